// The user's files in the mocked backend: a library, each conversation's attachments, the
// dialog's and a drop's files (mock-drops.ts; indexed with `documents` progress events, one of them failing),
// the remote notice, the sources an answer is given and how it used them, and Cancel / Continue indexing (passages read
// but not embedded wait in the library, and each file says how many of its own wait). A test steers it through window.__mockDocuments.
import { emit } from '@tauri-apps/api/event';
import { announce, takeDrop } from './mock-drops';

type Json = Record<string, any>;

export const documentsControl = {
  /** The files the paperclip's dialog returns (names; [] = cancelled). */
  picked: ['contract.pdf'] as string[],
  /** Files whose indexing fails, with why as the backend gives it (a code, its params, the
   *  technical detail apart). Failed files are not kept in the library unless asked. */
  unreadable: {
    'scan.pdf': {
      code: 'scanned-no-ocr-language', params: { file: 'scan.pdf', format: 'pdf', languages: 'eng', installed: '' },
      detail: '/home/ana/Downloads/scan.pdf: OCR languages asked eng, installed ', message: '/home/ana/Downloads/scan.pdf: this PDF is a scanned image and no OCR language is installed',
    },
  } as Record<string, Json>,
  /** The languages Tesseract reads scans in here, with their data sizes (null: no Tesseract). */
  scanLanguages: [{ code: 'eng', bytes: 4_113_088 }, { code: 'deu', bytes: 1_525_436 }, { code: 'chi_sim', bytes: 2_438_974 }] as Json[] | null,
  /** The folder the folder dialog returns (null = cancelled). */
  pickedFolder: 'Tax papers' as string | null,
  /** Files a folder dropped or picked gives, by folder name (a name ending in `/` in a drop). */
  folders: {
    'Tax papers': { files: ['2024 receipt.pdf', 'letter.docx', 'notes.md'], skipped: [{ why: 'not_document', count: 2 }, { why: 'too_large', count: 1 }], cuts: [] },
  } as Record<string, { files: string[]; skipped: Json[]; cuts: Json[] }>,
  /** Milliseconds between indexing progress events. */
  stepMs: 60,
  /** Installed embedding models the Settings offer besides the bundled one. */
  embeddingChoices: [] as string[],
  /** The remote notice (when the model in use is remote and the conversation has files). */
  remoteHost: null as string | null,
  /** The passages the next answer is given when its conversation has files (as the backend
   *  sends them before the answer: all `given`). */
  sources: [
    { number: 1, document_id: 1, name: 'contract.pdf', place: 'page 3', page: 3, section: 2, char_start: 120, char_end: 180, text: 'The rent of 900 euros is due on the first day of each month.', used: 'given', numbers: [], read_whole: false },
    { number: 2, document_id: 1, name: 'contract.pdf', place: 'page 5', page: 5, section: 4, char_start: 40, char_end: 95, text: 'Either party may end the lease with three months of notice.', used: 'given', numbers: [], read_whole: false },
    { number: 3, document_id: 1, name: 'contract.pdf', place: 'page 9', page: 9, section: 8, char_start: 0, char_end: 30, text: 'The garden is shared by all.', used: 'given', numbers: [], read_whole: false },
  ] as Json[],
  /** The same, as the backend saves them after the answer: how the answer used each (the rule is
   *  the backend's, crates/app/src/citations.rs); null: as given. */
  sorted: [
    { number: 1, document_id: 1, name: 'contract.pdf', place: 'page 3', page: 3, section: 2, char_start: 120, char_end: 180, text: 'The rent of 900 euros is due on the first day of each month.', used: 'cited', numbers: [], read_whole: false },
    { number: 2, document_id: 1, name: 'contract.pdf', place: 'page 5', page: 5, section: 4, char_start: 40, char_end: 95, text: 'Either party may end the lease with three months of notice.', used: 'cited', numbers: [], read_whole: false },
    { number: 3, document_id: 1, name: 'contract.pdf', place: 'page 9', page: 9, section: 8, char_start: 0, char_end: 30, text: 'The garden is shared by all.', used: 'also_read', numbers: [], read_whole: false },
  ] as Json[] | null,
};
(window as any).__mockDocuments = documentsControl;

const library = new Map<number, Json>();
const attached = new Map<string, number[]>();
const accepted = new Set<string>();
const saved = new Map<string, Json[]>();
let nextDoc = 1;
/** Failures by number, for Keep in Your files. */
const failures = new Map<number, Json>();
let nextFailure = 1;
/** Cancel's flag for the runs going now (each Cancel sets it and starts a fresh one). */
let cancel = { set: false };
let running = 0;
/** Passages read but not embedded yet (a cancelled run leaves them). */
let waiting = 0;

function fail(code: string, message: string): never {
  throw { code, message };
}

function format(name: string): string {
  const ext = name.split('.').pop()?.toLowerCase() ?? '';
  return ext === 'md' || ext === 'txt' ? 'text' : ext;
}

/** Add `name` to the library (once) and index it in the background with progress events. */
function addFile(name: string): Json {
  const known = [...library.values()].find((d) => d.name === name);
  if (known) return known;
  const doc = { id: nextDoc++, name, format: format(name), title: null, size: 48_213, passages: 0, waiting: 0, error: null, indexing: true };
  library.set(doc.id, doc);
  void index(doc);
  return doc;
}

async function index(doc: Json) {
  const total = 4;
  const flag = cancel;
  running++;
  let done = 1;
  for (; done <= total && !flag.set; done++) {
    await new Promise((r) => setTimeout(r, documentsControl.stepMs));
    if (flag.set) break;
    await emit('documents', { event: 'progress', data: { document_name: doc.name, stage: done < 2 ? 'reading' : 'embedding', done, total } });
  }
  running--;
  doc.indexing = false;
  const error = documentsControl.unreadable[doc.name];
  if (error) {
    // Not kept in the library, nor attached, unless the user asks (keep_failed).
    library.delete(doc.id);
    for (const [conversation, ids] of attached) attached.set(conversation, ids.filter((id) => id !== doc.id));
    const failure = nextFailure++;
    failures.set(failure, { ...doc, error });
    await emit('documents', { event: 'failed', data: { name: doc.name, error, failure } });
    await emit('documents', { event: 'finished', data: { cancelled: flag.set, unread: [] } });
    return;
  }
  doc.passages = 42;
  // Cancelled: the file was read (keyword search finds it), its vectors wait.
  if (flag.set) {
    waiting += 30;
    doc.waiting += 30;
  }
  await emit('documents', { event: 'indexed', data: { document: { ...doc } } });
  await emit('documents', { event: 'finished', data: { cancelled: flag.set, unread: [] } });
}

/** Continue indexing: embeds what waits, with progress, then says it finished. */
async function embedWaiting() {
  const flag = cancel;
  running++;
  const doc = [...library.values()].find((d) => d.waiting > 0) ?? [...library.values()].find((d) => d.passages > 0);
  const name = doc?.name ?? '';
  const total = waiting;
  for (let done = 0; done < total && !flag.set; done += 5) {
    await new Promise((r) => setTimeout(r, documentsControl.stepMs));
    await emit('documents', { event: 'progress', data: { document_name: name, stage: 'embedding', done, total, scanned_pages: null } });
    waiting = Math.max(0, total - done - 5);
    if (doc) doc.waiting = Math.min(doc.waiting, waiting);
  }
  running--;
  await emit('documents', { event: 'finished', data: { cancelled: flag.set, unread: [] } });
}

function listOf(conversationId: string): Json[] {
  return (attached.get(conversationId) ?? []).flatMap((id) => (library.has(id) ? [{ ...library.get(id) }] : []));
}

/** What every attach and detach answers with: the conversation's files and the remote notice. */
function documentsOf(conversationId: string) {
  return { documents: listOf(conversationId), remote_notice: notice(conversationId) };
}

function attach(conversationId: string, ids: number[]) {
  const list = attached.get(conversationId) ?? [];
  attached.set(conversationId, [...list, ...ids.filter((id) => !list.includes(id))]);
  return documentsOf(conversationId);
}

function notice(conversationId: string): { server: string; message: string } | null {
  const host = documentsControl.remoteHost;
  if (!host || accepted.has(conversationId) || listOf(conversationId).length === 0) return null;
  return { server: host, message: `Passages of the files attached to this conversation will be sent to ${host} to answer.` };
}

function libraryView() {
  const documents = [...library.values()].map((d) => ({ ...d }));
  return {
    documents,
    disk_bytes: documents.length * 310_000,
    embedding_model: 'all-MiniLM-L6-v2',
    embedding_choices: documentsControl.embeddingChoices,
    waiting,
    indexing: running > 0,
    scan_languages: documentsControl.scanLanguages,
  };
}

/** Before the answer's first token: the sources (the prompt's reading is the backend's, mock-backend.ts). */
export async function documentsBeforeAnswer(conversationId: string, send: (message: Json) => void, answerId: number) {
  if (listOf(conversationId).length === 0) return;
  send({ event: 'sources', data: { sources: documentsControl.sources } });
  saved.set(`${conversationId}:${answerId}`, documentsControl.sources);
}

/** After the answer, before `done`: the sources again as saved, with how the answer used them. */
export function documentsAfterAnswer(conversationId: string, send: (message: Json) => void, answerId: number) {
  if (listOf(conversationId).length === 0) return;
  const sorted = documentsControl.sorted ?? documentsControl.sources;
  send({ event: 'sources', data: { sources: sorted } });
  saved.set(`${conversationId}:${answerId}`, sorted);
}

/** start_answer's check: a remote server needs the notice accepted first. */
export function checkRemoteAccepted(conversationId: string) {
  const refusal = notice(conversationId);
  if (refusal) throw { code: 'invalid_input', message: refusal.message, detail: 'remote_documents', params: { server: refusal.server } };
}

export function documentsCommand(cmd: string, args: Json): unknown {
  switch (cmd) {
    case 'pick_documents':
      return attach(args.conversationId, documentsControl.picked.map((name) => addFile(name).id));
    case 'attach_dropped':
      return attach(args.conversationId, takeDrop(args.token, 'documents').map((name) => addFile(name).id));
    case 'attach_document':
      if (!library.has(args.documentId)) fail('not_found', `There is no file ${args.documentId} in your library.`);
      return attach(args.conversationId, [args.documentId]);
    case 'detach_document':
      attached.set(args.conversationId, (attached.get(args.conversationId) ?? []).filter((id) => id !== args.documentId));
      return documentsOf(args.conversationId);
    case 'conversation_documents':
      return documentsOf(args.conversationId);
    case 'accept_remote_documents':
      accepted.add(args.conversationId);
      return null;
    case 'library':
      return libraryView();
    case 'remove_document':
      library.delete(args.documentId);
      return libraryView();
    case 'cancel_indexing': {
      const wasRunning = running > 0;
      cancel.set = true;
      cancel = { set: false };
      return wasRunning;
    }
    case 'continue_indexing':
      void embedWaiting();
      return null;
    case 'pick_document_folder': {
      const folder = documentsControl.pickedFolder;
      if (folder === null) return false;
      void announce([`${folder}/`]);
      return true;
    }
    case 'keep_failed': {
      const kept = failures.get(args.failure);
      if (!kept) fail('not_found', 'Hearth no longer knows that file. Attach it again to keep it in Your files.');
      failures.delete(args.failure);
      library.set(kept.id, kept);
      void emit('documents', { event: 'indexed', data: { document: { ...kept } } });
      return null;
    }
    case 'open_document': {
      const doc = library.get(args.documentId);
      if (!doc) fail('not_found', 'This file is no longer in Your files, so Hearth cannot open it.');
      return { name: doc.name, at_page: args.page !== null };
    }
    case 'message_sources':
      return [...saved.entries()]
        .filter(([key]) => key.startsWith(`${args.conversationId}:`))
        .map(([key, sources]) => ({ message_id: Number(key.split(':')[1]), sources }));
  }
  return undefined;
}
