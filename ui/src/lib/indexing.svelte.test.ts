// Cancel and Continue indexing in the documents store: a cancelled run's Finished event clears
// the progress, drops the files it never read and says so; Continue indexing asks the backend
// and the library shows it running until its own Finished.
import { describe, expect, it } from 'vitest';
import { DocumentsStore, type DocumentsApi } from './documents.svelte';
import { ConversationList, type ConversationsApi } from './conversations.svelte';
import { Notifications } from './notifications.svelte';
import type { DocumentInfo, Library } from './documents';
import type { Conversation } from './types';

const conversation: Conversation = {
  id: 'c1',
  title: 'New conversation',
  created_at: 0,
  updated_at: 0,
  settings: {
    system_prompt: '',
    sampling: { temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05, repetition_penalty: 1, seed: 0 },
    max_tokens: 64,
    enable_thinking: null,
  },
  messages: [],
  versions: [],
};

function doc(id: number, name: string, more: Partial<DocumentInfo> = {}): DocumentInfo {
  return { id, name, format: 'text', title: null, size: 1_000, passages: 0, waiting: 0, error: null, indexing: true, ...more };
}

function setup(clock?: () => number) {
  const calls: string[] = [];
  let waiting = 30;
  const library = (): Library => ({
    documents: [doc(1, 'a.txt', { passages: 42, indexing: false })],
    disk_bytes: 1_000,
    embedding_model: 'all-MiniLM-L6-v2',
    embedding_choices: [],
    waiting,
    indexing: false,
    scan_languages: null,
  });
  const api = {
    createConversation: async () => structuredClone(conversation),
    getConversation: async () => structuredClone(conversation),
    listConversations: async () => [],
    conversationDocuments: async () => ({ documents: [doc(1, 'a.txt'), doc(0, 'b.txt')], remote_notice: null }),
    messageSources: async () => [],
    pickDocuments: async () => ({ documents: [doc(1, 'a.txt'), doc(0, 'b.txt')], remote_notice: null }),
    library: async () => (calls.push('library'), library()),
    cancelIndexing: async () => (calls.push('cancel'), true),
    continueIndexing: async () => (calls.push('continue'), (waiting = 0), null),
    onDocuments: async () => () => {},
  } as unknown as DocumentsApi & ConversationsApi;
  const notifications = new Notifications();
  const conversations = new ConversationList(api, notifications, () => false);
  return { calls, documents: new DocumentsStore(api, conversations, notifications, clock) };
}

describe('indexing: Cancel and Continue', () => {
  it('a cancelled run clears its progress, drops the files it never read and names them', async () => {
    const { calls, documents } = setup();
    await documents.pick();
    await documents.onEvent({ event: 'progress', data: { document_name: 'a.txt', stage: 'reading', done: 0, total: 2, scanned_pages: null } });
    expect(documents.indexing).toBe(true);
    await documents.cancelIndexing();
    expect(calls).toEqual(['cancel']);
    await documents.onEvent({ event: 'indexed', data: { document: doc(1, 'a.txt', { passages: 42, indexing: false }) } });
    await documents.onEvent({ event: 'finished', data: { cancelled: true, unread: ['b.txt'] } });
    expect(documents.progress).toEqual({});
    expect(documents.indexing).toBe(false);
    expect(documents.stopped).toEqual(['b.txt']);
    expect(documents.attached.map((d) => [d.name, d.indexing])).toEqual([['a.txt', false]]);
    documents.dismissStopped();
    expect(documents.stopped).toBeNull();
  });

  it('Continue indexing runs until its Finished, then the library lists nothing waiting', async () => {
    const { calls, documents } = setup();
    await documents.refreshLibrary();
    expect(documents.library?.waiting).toBe(30);
    await documents.continueIndexing();
    expect(documents.indexing).toBe(true);
    await documents.onEvent({ event: 'finished', data: { cancelled: false, unread: [] } });
    expect(calls).toEqual(['library', 'continue', 'library']);
    expect(documents.library?.waiting).toBe(0);
    expect(documents.indexing).toBe(false);
    expect(documents.stopped).toBeNull();
  });

  it('review #10 (S3): the progress events give each file a rough time left, forgotten when it is indexed', async () => {
    let now = 0;
    const { documents } = setup(() => now);
    const progress = (done: number) => ({ event: 'progress', data: { document_name: 'a.txt', stage: 'embedding', done, total: 100, scanned_pages: null } }) as const;
    await documents.onEvent(progress(0));
    expect(documents.timeLeft).toEqual({ 'a.txt': null });
    now = 10_000;
    await documents.onEvent(progress(20));
    expect(documents.timeLeft['a.txt']).toBeCloseTo(40, 5);
    await documents.onEvent({ event: 'indexed', data: { document: doc(1, 'a.txt', { passages: 100, indexing: false }) } });
    expect(documents.timeLeft).toEqual({});
    await documents.onEvent(progress(0));
    await documents.onEvent({ event: 'finished', data: { cancelled: true, unread: [] } });
    expect(documents.timeLeft).toEqual({});
  });
});
