// The user's own files as the UI sees them: the shapes of the documents commands and events
// (generated from crates/app's documents into bindings.ts, re-exported here under the UI's
// names), and the plain words shown for them.
import type { DocumentInfo, IndexProgress, LibraryView, Source } from './bindings';
import { language, locale, t } from './i18n/index.svelte';
import { formatBytes } from './models';
import { fileErrorText } from './errors';

export type { ConversationDocuments, DocumentEvent, DocumentInfo, IndexProgress, MessageSources, RemoteNotice, Source } from './bindings';

/** Every file in the library, and the disk it takes. */
export type Library = LibraryView;

/** The kinds of file Hearth reads, as the drop overlay and the picker say them. */
export function acceptedKinds(): string {
  return t('documents.kinds');
}

/** What the attachment list says about a file under its name. */
export function documentStatus(doc: DocumentInfo, progress: IndexProgress | undefined): string {
  if (doc.error) return fileErrorText(doc.error);
  if (doc.indexing || progress) {
    const scanned = progress?.scanned_pages;
    if (scanned) return t('documents.ocrPage', { page: Math.min(scanned.done + 1, scanned.total), pages: scanned.total });
    if (!progress || progress.total === 0) return t('documents.indexing');
    const percent = Math.min(100, Math.round((progress.done / progress.total) * 100));
    return t(progress.stage === 'reading' ? 'documents.readingPercent' : 'documents.indexingPercent', { percent });
  }
  const parts = [formatBytes(doc.size)];
  if (doc.passages > 0) parts.push(t('documents.passages', { count: doc.passages }));
  return parts.join(' · ');
}

/** The share of a file's indexing done (0..100), or null when not indexing. */
export function indexPercent(progress: IndexProgress | undefined): number | null {
  // A scan being read by OCR: its pages, one by one.
  const scanned = progress?.scanned_pages;
  if (scanned && scanned.total > 0) return Math.min(100, Math.round((scanned.done / scanned.total) * 100));
  if (!progress || progress.total === 0) return null;
  return Math.min(100, Math.round((progress.done / progress.total) * 100));
}

/** Where in its file a source is, in the user's language: "page 3", "section “Terms”", or ""
 *  for the whole file. The backend's `place` is English (the model reads it in the prompt), so
 *  it is said again here from the page, or from the heading inside its “…”. */
export function sourcePlace(source: Source): string {
  const place = placeOf(source);
  // Text read by OCR says so: the words may hold a misread letter (issue 53).
  return readFromScan(source) ? [place, t('sources.fromScan')].filter(Boolean).join(', ') : place;
}

function placeOf(source: Source): string {
  if (!source.place) return '';
  if (source.page != null) return t('sources.page', { page: source.page });
  const heading = /^section “(.*)”$/s.exec(source.place)?.[1];
  return heading !== undefined ? t('sources.section', { heading }) : source.place;
}

/** Whether a source's text was read from a scan by OCR (the backend's `from_scan`; false in
 *  sources saved before OCR). */
export function readFromScan(source: Source): boolean {
  return source.from_scan === true;
}

/** A source as listed under an answer: "contract.pdf, page 3". */
export function sourceLabel(source: Source): string {
  const place = sourcePlace(source);
  return place ? t('sources.fileAt', { name: source.name, place }) : source.name;
}

/** The live line while a long prompt is read: "Reading your document… 40%". */
export function readingLine(percent: number, withDocuments: boolean): string {
  return t(withDocuments ? 'documents.readingDocument' : 'documents.readingMessage', { percent: Math.round(percent) });
}

/** A language scans can be read in, as the backend lists the installed ones. */
export type { ScanLanguage } from './bindings';

/** Tesseract's language names, as the languages' own codes, for the browser to name them. */
const TESSERACT_TO_BCP47: Record<string, string> = {
  eng: 'en', deu: 'de', fra: 'fr', spa: 'es', ita: 'it', por: 'pt', nld: 'nl', pol: 'pl', rus: 'ru', ukr: 'uk',
  chi_sim: 'zh-Hans', chi_tra: 'zh-Hant', jpn: 'ja', kor: 'ko', ara: 'ar', hin: 'hi', tur: 'tr', swe: 'sv',
  dan: 'da', nor: 'no', fin: 'fi', ces: 'cs', ell: 'el', heb: 'he', hun: 'hu', ron: 'ro', vie: 'vi', tha: 'th',
};

/** Tesseract's name of the data for each language the app speaks. */
const APP_TO_TESSERACT: Record<string, string> = { en: 'eng', de: 'deu', fr: 'fra', es: 'spa', zh: 'chi_sim' };

/** A scan language in the app's language ("Deutsch" is "German" in English); its code when the
 *  browser cannot name it. */
export function scanLanguageName(code: string): string {
  const tag = TESSERACT_TO_BCP47[code];
  if (!tag) return code;
  try {
    return new Intl.DisplayNames([locale()], { type: 'language' }).of(tag) ?? code;
  } catch {
    return code;
  }
}

/** The languages scans are read in: the saved choice, else the app's language and English. */
export function chosenScanLanguages(chosen: string[] | null): string[] {
  if (chosen) return chosen;
  const own = APP_TO_TESSERACT[language()] ?? 'eng';
  return own === 'eng' ? ['eng'] : [own, 'eng'];
}
