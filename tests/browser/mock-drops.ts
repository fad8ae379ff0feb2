// Files dropped on the window in the mocked backend, classified as crates/app's drop.rs does
// (documents first, pictures among them, and the files of a folder of documents; then one model;
// what is left is listed with why) and kept under a single-use token, then announced with the
// shell's drag-drop event and a `dropped` event. A test drops files by name with
// window.__mockDrop: a name ending in `/` is a folder holding a model, unless mock-documents'
// `folders` lists it (then the files it gives, and what it skips).
import { emit } from '@tauri-apps/api/event';
import { documentsControl } from './mock-documents';

type Kind = 'model' | 'documents' | 'neither';

const DOCUMENT = /\.(txt|text|log|csv|md|markdown|pdf|docx|odt|html?|epub|rs|py|js|ts|json|toml|ya?ml)$/i;
const PICTURE = /\.(png|jpe?g|webp|gif|bmp|tiff?|heic|heif|avif)$/i;

const waiting = new Map<string, { kind: Kind; names: string[] }>();
let nextToken = 1;

/** A drop of `names`, as the backend classifies it. */
function classify(names: string[]) {
  const folderOf = (n: string) => (n.endsWith('/') ? documentsControl.folders[n.slice(0, -1)] : undefined);
  const models = names.filter((n) => /\.gguf$/i.test(n) || (n.endsWith('/') && !folderOf(n)));
  const folders = names.filter((n) => folderOf(n)).map((n) => ({ name: n.slice(0, -1), ...folderOf(n)! }));
  const loose = names.filter((n) => !models.includes(n) && (DOCUMENT.test(n) || PICTURE.test(n)));
  const files = [...loose, ...folders.flatMap((f) => f.files)];
  const shown = [...loose, ...folders.map((f) => f.name)];
  const reports = folders.map((f) => ({ name: f.name, files: f.files.length, skipped: f.skipped, cuts: f.cuts }));
  const other = names.filter((n) => !models.includes(n) && !loose.includes(n) && !folderOf(n)).map((name) => ({ name, why: 'unknown' }));
  const left = (list: string[], why: string) => list.map((name) => ({ name, why }));
  if (files.length) return { kind: 'documents' as Kind, names: shown, files, folders: reports, left: [...left(models, 'model_with_documents'), ...other] };
  if (models.length) return { kind: 'model' as Kind, names: models.slice(0, 1), files: models.slice(0, 1), folders: reports, left: [...left(models.slice(1), 'another_model'), ...other] };
  return { kind: 'neither' as Kind, names: [], files: [], folders: reports, left: other };
}

/** A drop on the window: the shell's drag-drop event, then the backend's classified `dropped` event. */
export async function dropFiles(names: string[]) {
  await emit('tauri://drag-drop', { paths: names.map((n) => `/home/ana/Downloads/${n}`), position: { x: 10, y: 10 } });
  await announce(names);
}

/** The `dropped` event of `names` (a drop, or the folder the dialog chose), as the backend classifies it. */
export async function announce(names: string[]) {
  const { files, ...drop } = classify(names);
  let token: string | null = null;
  if (drop.kind === 'model' || drop.kind === 'documents') {
    token = `drop-${nextToken++}`;
    waiting.set(token, { kind: drop.kind, names: files });
  }
  await emit('dropped', { ...drop, reason: '', token });
}
(window as any).__mockDrop = dropFiles;

/** Keeps `names` as a drop of documents without announcing it (the app's pictures_as_documents
 *  does this for pictures whose text is to be read); its token. */
export function keepDocuments(names: string[]): string {
  const token = `drop-${nextToken++}`;
  waiting.set(token, { kind: 'documents', names });
  return token;
}

/** The names of the drop `token`, once, when it is a drop of `kind` (attach_dropped, import_dropped). */
export function takeDrop(token: unknown, kind: Kind): string[] {
  const held = waiting.get(String(token));
  if (!held) throw { code: 'not_found', message: 'Those dropped files were already used or are no longer known. Drop them again.' };
  if (held.kind !== kind) throw { code: 'invalid_input', message: `That drop holds ${held.kind}, not ${kind}. Drop the files again.` };
  waiting.delete(String(token));
  return held.names;
}
