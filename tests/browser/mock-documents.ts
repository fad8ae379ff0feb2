// The user's files in the mocked backend: a library, each conversation's attachments, the
// dialog's and a drop's files (mock-drops.ts; indexed with `documents` progress events, one of them failing),
// the remote notice, the sources an answer cites, and Cancel / Continue indexing (passages read
// but not embedded wait in the library). A test steers it through window.__mockDocuments.
import { emit } from '@tauri-apps/api/event';
import { takeDrop } from './mock-drops';

type Json = Record<string, any>;

export const documentsControl = {
  /** The files the paperclip's dialog returns (names; [] = cancelled). */
  picked: ['contract.pdf'] as string[],
  /** Files whose indexing fails, with the message the backend gives. */
  unreadable: { 'scan.pdf': 'scan.pdf has no text layer; it may be a scan. Hearth reads the text of PDFs, not pictures of pages.' } as Record<string, string>,
  /** Milliseconds between indexing progress events. */
  stepMs: 60,
  /** Installed embedding models the Settings offer besides the bundled one. */
  embeddingChoices: [] as string[],
  /** The remote notice (when the model in use is remote and the conversation has files). */
  remoteHost: null as string | null,
  /** Sources the next answer cites when its conversation has files. */
  sources: [
    { number: 1, document_id: 1, name: 'contract.pdf', place: 'page 3', page: 3, section: 2, char_start: 120, char_end: 180, text: 'The rent of 900 euros is due on the first day of each month.' },
    { number: 2, document_id: 1, name: 'contract.pdf', place: 'page 5', page: 5, section: 4, char_start: 40, char_end: 95, text: 'Either party may end the lease with three months of notice.' },
  ],
};
(window as any).__mockDocuments = documentsControl;

const library = new Map<number, Json>();
const attached = new Map<string, number[]>();
const accepted = new Set<string>();
const saved = new Map<string, Json[]>();
let nextDoc = 1;
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
  const doc = { id: nextDoc++, name, format: format(name), title: null, size: 48_213, passages: 0, error: null, indexing: true };
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
  if (error) doc.error = error;
  else doc.passages = 42;
  // Cancelled: the file was read (keyword search finds it), its vectors wait.
  if (flag.set && !error) waiting += 30;
  await emit('documents', { event: 'indexed', data: { document: { ...doc } } });
  await emit('documents', { event: 'finished', data: { cancelled: flag.set, unread: [] } });
}

/** Continue indexing: embeds what waits, with progress, then says it finished. */
async function embedWaiting() {
  const flag = cancel;
  running++;
  const name = [...library.values()].find((d) => d.passages > 0)?.name ?? '';
  const total = waiting;
  for (let done = 0; done < total && !flag.set; done += 10) {
    await new Promise((r) => setTimeout(r, documentsControl.stepMs));
    await emit('documents', { event: 'progress', data: { document_name: name, stage: 'embedding', done, total } });
    waiting = Math.max(0, total - done - 10);
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
  };
}

/** Before the answer's first token: the sources (the prompt's reading is the backend's, mock-backend.ts). */
export async function documentsBeforeAnswer(conversationId: string, send: (message: Json) => void, answerId: number) {
  if (listOf(conversationId).length === 0) return;
  send({ event: 'sources', data: { sources: documentsControl.sources } });
  saved.set(`${conversationId}:${answerId}`, documentsControl.sources);
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
    case 'message_sources':
      return [...saved.entries()]
        .filter(([key]) => key.startsWith(`${args.conversationId}:`))
        .map(([key, sources]) => ({ message_id: Number(key.split(':')[1]), sources }));
  }
  return undefined;
}
