// The user's own files as the UI sees them: the shapes of the documents commands and events
// (generated from crates/app's documents into bindings.ts, re-exported here under the UI's
// names), and the plain words shown for them.
import type { DocumentInfo, IndexProgress, LibraryView, Source } from './bindings';
import { t } from './i18n/index.svelte';
import { formatBytes } from './models';

export type { ConversationDocuments, DocumentEvent, DocumentInfo, IndexProgress, MessageSources, RemoteNotice, Source } from './bindings';

/** Every file in the library, and the disk it takes. */
export type Library = LibraryView;

/** The kinds of file Hearth reads, as the drop overlay and the picker say them. */
export function acceptedKinds(): string {
  return t('documents.kinds');
}

/** What the attachment list says about a file under its name. */
export function documentStatus(doc: DocumentInfo, progress: IndexProgress | undefined): string {
  if (doc.error) return doc.error;
  if (doc.indexing || progress) {
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
  if (!progress || progress.total === 0) return null;
  return Math.min(100, Math.round((progress.done / progress.total) * 100));
}

/** Where in its file a source is, in the user's language: "page 3", "section “Terms”", or ""
 *  for the whole file. The backend's `place` is English (the model reads it in the prompt), so
 *  it is said again here from the page, or from the heading inside its “…”. */
export function sourcePlace(source: Source): string {
  if (!source.place) return '';
  if (source.page != null) return t('sources.page', { page: source.page });
  const heading = /^section “(.*)”$/s.exec(source.place)?.[1];
  return heading !== undefined ? t('sources.section', { heading }) : source.place;
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
