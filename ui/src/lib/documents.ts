// The user's own files as the UI sees them: the shapes of the documents commands and events
// (the IPC contract of crates/app's documents; they move to the generated bindings.ts once the
// Rust commands export them), and the plain words shown for them.

/** A file in the library (or attached to a conversation). */
export interface DocumentInfo {
  /** Library id. */
  id: number;
  /** File name only, e.g. "contract.pdf". */
  name: string;
  format: string;
  title: string | null;
  /** Bytes of the original file. */
  size: number;
  /** 0 while not yet indexed or when it failed. */
  passages: number;
  /** Plain words naming the file, when it could not be read. */
  error: string | null;
  /** True while its indexing runs. */
  indexing: boolean;
}

export interface Library {
  documents: DocumentInfo[];
  disk_bytes: number;
}

export interface ConversationDocuments {
  documents: DocumentInfo[];
  /** Set when the model in use is remote and the user has not accepted for this conversation. */
  remote_notice: string | null;
}

/** A passage an answer cites: its [n], its file and place, and its text. */
export interface Source {
  number: number;
  document_id: number;
  name: string;
  /** "page 3", "section “Terms”", or "" for the whole file. */
  place: string;
  page: number | null;
  section: number;
  char_start: number;
  char_end: number;
  text: string;
}

export interface MessageSources {
  message_id: number;
  sources: Source[];
}

/** How far a file's indexing is. */
export interface IndexProgress {
  document_name: string;
  stage: 'reading' | 'embedding';
  done: number;
  total: number;
}

/** The window event "documents". */
export type DocumentEvent =
  | { event: 'dropped'; data: { token: string; names: string[] } }
  | { event: 'progress'; data: IndexProgress }
  | { event: 'indexed'; data: { document: DocumentInfo } }
  | { event: 'failed'; data: { name: string; message: string } };

/** The kinds of file Hearth reads, as the drop overlay and the picker say them. */
export const ACCEPTED_KINDS = 'PDF, Word (.docx), OpenDocument (.odt), EPUB, HTML, Markdown, plain text and source code';

/** Bytes in the unit a person reads ("12 KB", "3.4 MB"). */
export function formatBytes(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = bytes / 1000;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${value >= 10 ? Math.round(value) : value.toFixed(1)} ${units[unit]}`;
}

/** What the attachment list says about a file under its name. */
export function documentStatus(doc: DocumentInfo, progress: IndexProgress | undefined): string {
  if (doc.error) return doc.error;
  if (doc.indexing || progress) {
    if (!progress || progress.total === 0) return 'Indexing…';
    const percent = Math.min(100, Math.round((progress.done / progress.total) * 100));
    return progress.stage === 'reading' ? `Reading… ${percent}%` : `Indexing… ${percent}%`;
  }
  const parts = [formatBytes(doc.size)];
  if (doc.passages > 0) parts.push(`${doc.passages.toLocaleString('en')} passage${doc.passages === 1 ? '' : 's'}`);
  return parts.join(' · ');
}

/** The share of a file's indexing done (0..100), or null when not indexing. */
export function indexPercent(progress: IndexProgress | undefined): number | null {
  if (!progress || progress.total === 0) return null;
  return Math.min(100, Math.round((progress.done / progress.total) * 100));
}

/** A source as listed under an answer: "contract.pdf, page 3". */
export function sourceLabel(source: Source): string {
  return source.place ? `${source.name}, ${source.place}` : source.name;
}

/** Whether a dropped set of names is a model to import (a .gguf file or a folder), not documents. */
export function droppedModel(names: string[]): boolean {
  return names.length > 0 && names.every((n) => /\.gguf$/i.test(n) || !/\.[A-Za-z0-9]{1,5}$/.test(n));
}

/** The live line while a long prompt is read: "Reading your document… 40%". */
export function readingLine(percent: number, withDocuments: boolean): string {
  return `${withDocuments ? 'Reading your document' : 'Reading your message'}… ${Math.round(percent)}%`;
}
