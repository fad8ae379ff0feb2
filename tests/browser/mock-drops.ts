// Files dropped on the window in the mocked backend, classified as crates/app's drop.rs does
// (documents first, then one model, then pictures; what is left is listed with why) and kept
// under a single-use token, then announced with the shell's drag-drop event and a `dropped`
// event. A test drops files by name with window.__mockDrop: a name ending in `/` is a folder
// holding a model.
import { emit } from '@tauri-apps/api/event';

type Kind = 'model' | 'documents' | 'picture' | 'neither';

const DOCUMENT = /\.(txt|text|log|csv|md|markdown|pdf|docx|odt|html?|epub|rs|py|js|ts|json|toml|ya?ml)$/i;
const PICTURE = /\.(png|jpe?g|webp|gif|bmp|tiff?|heic|heif|avif)$/i;

const waiting = new Map<string, { kind: Kind; names: string[] }>();
let nextToken = 1;

/** A drop of `names`, as the backend classifies it. */
function classify(names: string[]) {
  const models = names.filter((n) => /\.gguf$/i.test(n) || n.endsWith('/'));
  const documents = names.filter((n) => !models.includes(n) && DOCUMENT.test(n));
  const pictures = names.filter((n) => PICTURE.test(n));
  const other = names.filter((n) => !models.includes(n) && !documents.includes(n) && !pictures.includes(n)).map((name) => ({ name, why: 'unknown' }));
  const left = (list: string[], why: string) => list.map((name) => ({ name, why }));
  if (documents.length) return { kind: 'documents' as Kind, names: documents, left: [...left(models, 'model_with_documents'), ...left(pictures, 'picture'), ...other] };
  if (models.length) return { kind: 'model' as Kind, names: models.slice(0, 1), left: [...left(models.slice(1), 'another_model'), ...left(pictures, 'picture'), ...other] };
  if (pictures.length) return { kind: 'picture' as Kind, names: pictures, left: other };
  return { kind: 'neither' as Kind, names: [], left: other };
}

/** A drop on the window: the shell's drag-drop event, then the backend's classified `dropped` event. */
export async function dropFiles(names: string[]) {
  await emit('tauri://drag-drop', { paths: names.map((n) => `/home/ana/Downloads/${n}`), position: { x: 10, y: 10 } });
  const drop = classify(names);
  let token: string | null = null;
  if (drop.kind === 'model' || drop.kind === 'documents') {
    token = `drop-${nextToken++}`;
    waiting.set(token, { kind: drop.kind, names: drop.names });
  }
  await emit('dropped', { ...drop, reason: '', token });
}
(window as any).__mockDrop = dropFiles;

/** The names of the drop `token`, once, when it is a drop of `kind` (attach_dropped, import_dropped). */
export function takeDrop(token: unknown, kind: Kind): string[] {
  const held = waiting.get(String(token));
  if (!held) throw { code: 'not_found', message: 'Those dropped files were already used or are no longer known. Drop them again.' };
  if (held.kind !== kind) throw { code: 'invalid_input', message: `That drop holds ${held.kind}, not ${kind}. Drop the files again.` };
  waiting.delete(String(token));
  return held.names;
}
