import { describe, expect, it } from 'vitest';
import { setLanguage } from './i18n/index.svelte';
import { DocumentsStore, type DocumentsApi } from './documents.svelte';
import { ConversationList, type ConversationsApi } from './conversations.svelte';
import { Notifications } from './notifications.svelte';
import { chosenScanLanguages, documentStatus, indexPercent, readingLine, scanLanguageName, sourceLabel, type DocumentInfo, type Source } from './documents';
import type { Conversation, ChatEvent } from './types';
import type { RemoteNotice } from './documents';
import { AnswerStream } from './answer.svelte';
import { ModelSession } from './session.svelte';

const settings = {
  system_prompt: '',
  sampling: { temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05, repetition_penalty: 1, seed: 0 },
  max_tokens: 64,
  enable_thinking: null,
};
const conversation: Conversation = { id: 'c1', title: 'New conversation', created_at: 0, updated_at: 0, settings, messages: [], versions: [] };

function doc(id: number, name: string, more: Partial<DocumentInfo> = {}): DocumentInfo {
  return { id, name, format: 'pdf', title: null, size: 12_345, passages: 7, waiting: 0, error: null, indexing: false, ...more };
}
const source: Source = { number: 1, document_id: 1, name: 'contract.pdf', place: 'page 3', page: 3, section: 2, char_start: 10, char_end: 40, text: 'The rent is due monthly.', from_scan: false, used: 'cited', numbers: [], read_whole: false };

/** The documents store over a fake backend that records the calls it gets. */
function setup(notice: RemoteNotice | null = null) {
  const calls: string[] = [];
  let attached: DocumentInfo[] = [];
  const library = { documents: [doc(1, 'contract.pdf'), doc(2, 'notes.md', { format: 'text' })], disk_bytes: 2_500_000 };
  // Each attach and detach answers with the conversation's files and notice, as the backend does.
  const now = () => ({ documents: attached, remote_notice: notice });
  const api = {
    createConversation: async () => structuredClone(conversation),
    getConversation: async () => structuredClone(conversation),
    listConversations: async () => [],
    conversationDocuments: async (id: string) => (calls.push(`documents ${id}`), { documents: attached, remote_notice: notice }),
    messageSources: async () => [{ message_id: 5, sources: [source] }],
    pickDocuments: async (id: string, title: string, filter: string) => (calls.push(`pick ${id}`), (dialog = { title, filter }), (attached = [doc(1, 'contract.pdf', { indexing: true, passages: 0 })]), now()),
    attachDropped: async (id: string, token: string) => (calls.push(`drop ${id} ${token}`), (attached = [doc(2, 'notes.md')]), now()),
    attachDocument: async (id: string, documentId: number) => (calls.push(`attach ${id} ${documentId}`), (attached = [library.documents[documentId - 1]]), now()),
    detachDocument: async (id: string, documentId: number) => (calls.push(`detach ${id} ${documentId}`), (attached = attached.filter((d) => d.id !== documentId)), now()),
    acceptRemoteDocuments: async (id: string) => (calls.push(`accept ${id}`), (notice = null), null),
    library: async () => library,
    removeDocument: async (documentId: number) => (calls.push(`remove ${documentId}`), { ...library, documents: library.documents.filter((d) => d.id !== documentId) }),
    onDocuments: async () => () => {},
  } as unknown as DocumentsApi & ConversationsApi;
  const notifications = new Notifications();
  const conversations = new ConversationList(api, notifications, () => false);
  const documents = new DocumentsStore(api, conversations, notifications);
  return { api, calls, conversations, documents };
}

/** The words the last file dialog was opened with. */
let dialog: { title: string; filter: string } | null = null;

describe('DocumentsStore', () => {
  it('review #14 (S3): the file dialog of the paperclip speaks the language of the app', async () => {
    const { documents } = setup();
    setLanguage('de');
    try {
      await documents.pick();
    } finally {
      setLanguage('en');
    }
    expect(dialog).toEqual({ title: 'Dateien anhängen', filter: 'Dokumente' });
  });

  it('the paperclip creates the conversation when none is open, attaches, and follows indexing to its end', async () => {
    const { calls, documents } = setup();
    await documents.pick();
    // The attach answers with the list and the notice: no second call to learn them.
    expect(calls).toEqual(['pick c1']);
    expect(documents.attached.map((d) => d.name)).toEqual(['contract.pdf']);
    await documents.onEvent({ event: 'progress', data: { document_name: 'contract.pdf', stage: 'embedding', done: 2, total: 5, scanned_pages: null } });
    expect(documentStatus(documents.attached[0], documents.progress['contract.pdf'])).toBe('Indexing… 40%');
    await documents.onEvent({ event: 'indexed', data: { document: doc(1, 'contract.pdf', { passages: 12 }) } });
    expect(documents.progress).toEqual({});
    expect(documentStatus(documents.attached[0], undefined)).toBe('12.3 KB · 12 passages');
  });

  it('a drop of documents attaches by its token, with the remote notice the attach answers with', async () => {
    const notice: RemoteNotice = { server: 'gpu-box:8000', message: 'Passages … will be sent to gpu-box:8000 to answer.' };
    const { calls, documents } = setup(notice);
    await documents.attachDropped('t1');
    expect(calls).toEqual(['drop c1 t1']);
    expect(documents.attached.map((d) => d.name)).toEqual(['notes.md']);
    expect(documents.remoteNotice).toEqual(notice);
  });

  it('a file that cannot be indexed is listed apart with its code, not attached, until dismissed; Keep asks the backend (issue 53)', async () => {
    const { api, documents } = setup();
    const error = { code: 'damaged', params: { file: 'scan.pdf', format: 'pdf' }, detail: '/home/ana/scan.pdf: bad xref', message: 'x' };
    documents.attached = [doc(0, 'scan.pdf', { passages: 0, indexing: true }), doc(2, 'notes.md')];
    await documents.onEvent({ event: 'failed', data: { name: 'scan.pdf', error, failure: 7 } });
    expect(documents.failed).toEqual([{ name: 'scan.pdf', error, failure: 7, kept: false }]);
    expect(documents.attached.map((d) => d.name)).toEqual(['notes.md']);
    expect(documentStatus(doc(3, 'scan.pdf', { error }), undefined)).toBe('This file is damaged or is not really a PDF. Open it in the program that made it and save it again.');
    const kept: number[] = [];
    api.keepFailed = async (failure: number) => (kept.push(failure), null);
    await documents.keepFailed(documents.failed[0]);
    expect(kept).toEqual([7]);
    expect(documents.failed[0].kept).toBe(true);
    documents.dismissFailed(documents.failed[0]);
    expect(documents.failed).toEqual([]);
  });

  it('choosing a model on a remote server reads the notice again for the open conversation', async () => {
    const { api, conversations, documents } = setup(null);
    await documents.attach(1);
    await conversations.open('c1');
    await new Promise((r) => setTimeout(r, 0));
    expect(documents.remoteNotice).toBeNull();
    const notice: RemoteNotice = { server: 'gpu-box:8000', message: 'Passages … will be sent to gpu-box:8000 to answer.' };
    api.conversationDocuments = async () => ({ documents: documents.attached, remote_notice: notice });
    await documents.modelChosen();
    expect(documents.remoteNotice).toEqual(notice);
  });

  it('opening a conversation lists its files, the sources of its answers and the remote notice; accepting hides it', async () => {
    const { calls, conversations, documents } = setup({ server: 'http://10.0.0.2:8080', message: 'Passages of the files attached to this conversation will be sent to http://10.0.0.2:8080 to answer.' });
    await documents.attach(1);
    await conversations.open('c1');
    await new Promise((r) => setTimeout(r, 0));
    expect(documents.sources[5]).toEqual([source]);
    expect(documents.remoteNotice?.server).toBe('http://10.0.0.2:8080');
    await documents.acceptRemote();
    expect(documents.remoteNotice).toBeNull();
    expect(calls).toContain('accept c1');
  });

  it('detach takes a file off the conversation; remove deletes it from the library and the list', async () => {
    const { calls, documents } = setup();
    await documents.attach(1);
    await documents.attach(2);
    await documents.detach(2);
    expect(documents.attached).toEqual([]);
    await documents.attach(1);
    await documents.refreshLibrary();
    await documents.remove(1);
    expect(calls).toContain('remove 1');
    expect(documents.library?.documents.map((d) => d.name)).toEqual(['notes.md']);
    expect(documents.attached).toEqual([]);
  });

  it('the passage opens from a source and closes; another conversation closes it', async () => {
    const { conversations, documents } = setup();
    documents.openPassage(source);
    expect(documents.passage).toEqual(source);
    conversations.startNew();
    expect(documents.passage).toBeNull();
  });
});

describe('the answer stream and the documents store, wired as main.ts wires them', () => {
  it("an answer's sources land under it and the reading percent the backend reports shows until the first word", async () => {
    const { api, conversations, documents } = setup();
    const notifications = new Notifications();
    const readings: (number | null)[] = [];
    let answer: AnswerStream;
    const events = [
      { event: 'started', data: { conversation: { id: 'c1', title: 'Rent', created_at: 0, updated_at: 1, message_count: 2, snippet: null }, user_message: { id: 8, role: 'user', content: 'Rent?', state: 'complete', receipt: null, created_at: 0, branches: [] }, assistant_message: { id: 9, role: 'assistant', content: '', state: 'streaming', receipt: null, created_at: 0, branches: [] }, prompt_tokens: 900, context_limit: 4096, trimmed_messages: 0, model: null } },
      { event: 'sources', data: { sources: [source] } },
      { event: 'reading', data: { done: 0, total: 900 } },
      { event: 'reading', data: { done: 360, total: 900 } },
      { event: 'reading', data: { done: 900, total: 900 } },
      { event: 'token', data: { text: 'It is 900 euros [1].' } },
    ] as unknown as ChatEvent[];
    const full = {
      ...api,
      startAnswer: async (_id: string, _action: unknown, onEvent: (e: ChatEvent) => void) => {
        for (const e of events) {
          onEvent(e);
          readings.push(answer.readingPercent);
        }
      },
    } as never;
    answer = new AnswerStream(full, conversations, new ModelSession(full, notifications), notifications);
    answer.onSources((id, sources) => documents.setSources(id, sources));
    await answer.send('Rent?');
    expect(documents.sources[9]).toEqual([source]);
    expect(readings).toEqual([null, null, 0, 40, 100, null]);
  });
});

describe('documents words', () => {
  it('says sources and the reading line plainly (sizes: formatBytes in models.test.ts)', () => {
    expect(sourceLabel(source)).toBe('contract.pdf, page 3');
    expect(sourceLabel({ ...source, place: '' })).toBe('contract.pdf');
    expect(readingLine(40.2, true)).toBe('Reading your document… 40%');
    expect(sourceLabel({ ...source, from_scan: true } as typeof source)).toBe('contract.pdf, page 3, read from a scan');
  });

  it('a scan read by OCR shows its pages one by one; scans are read in the app language and English by default (issue 53)', () => {
    const reading = { document_name: 'scan.pdf', stage: 'reading' as const, done: 0, total: 1, scanned_pages: { done: 2, total: 10 } };
    expect(documentStatus(doc(0, 'scan.pdf', { indexing: true }), reading)).toBe('Reading scanned page 3 of 10…');
    expect(indexPercent(reading)).toBe(20);
    expect(chosenScanLanguages(null)).toEqual(['eng']);
    setLanguage('de');
    expect(chosenScanLanguages(null)).toEqual(['deu', 'eng']);
    expect(scanLanguageName('chi_sim')).toMatch(/Chinesisch/);
    setLanguage('en');
    expect(chosenScanLanguages(['fra'])).toEqual(['fra']);
  });

  it('review #14 (S3): a source says its page or section in the language in use, not in English', () => {
    const section = { ...source, name: 'holiday-plan.md', page: null, place: 'section “Travel”' };
    setLanguage('zh');
    expect(sourceLabel(section)).toBe('holiday-plan.md，“Travel”一节');
    expect(sourceLabel(source)).toBe('contract.pdf，第 3 页');
    setLanguage('de');
    expect(sourceLabel(section)).toBe('holiday-plan.md, Abschnitt „Travel“');
    setLanguage('en');
    expect(sourceLabel(section)).toBe('holiday-plan.md, section “Travel”');
  });
});
