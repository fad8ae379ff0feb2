// What a first message costs in IPC round trips: the UI's real send path (the stores wired as
// main.ts wires them) over a fake backend that counts every call. A first message in a new
// conversation takes two: create the conversation, then start the answer; the answer's
// `started` event carries the conversation's line of the list, so the list is not asked again.
// With HEARTH_PRINT_IPC_COUNT=1 the test prints the count on one line, which
// scripts/architecture-metrics.py reads.
import { describe, expect, it } from 'vitest';
import type { Api } from './api';
import { AnswerStream } from './answer.svelte';
import { ConversationList } from './conversations.svelte';
import { DocumentsStore } from './documents.svelte';
import { ModelSession } from './session.svelte';
import { Notifications } from './notifications.svelte';
import type { ChatEvent, Conversation, ConversationSummary, Message } from './types';

const settings = {
  system_prompt: '',
  sampling: { temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05, repetition_penalty: 1, seed: 0 },
  max_tokens: 64,
  enable_thinking: null,
};

function message(id: number, role: 'user' | 'assistant', content: string): Message {
  return { id, role, content, state: 'complete', receipt: null, created_at: 0, branches: [], pictures: [] };
}

function summary(id: string, title: string, updated_at: number, message_count: number): ConversationSummary {
  return { id, title, created_at: 0, updated_at, message_count, snippet: null };
}

/** A backend holding one earlier conversation; every call is recorded in `calls` by name. */
function countingBackend() {
  const calls: string[] = [];
  const created: Conversation = { id: 'new', title: 'New conversation', created_at: 5, updated_at: 5, settings, messages: [], versions: [] };
  let list = [summary('old', 'Earlier', 1, 2)];
  const backend = {
    listConversations: async () => structuredClone(list),
    createConversation: async () => {
      list = [summary('new', 'New conversation', 5, 0), ...list];
      return structuredClone(created);
    },
    getConversation: async () => structuredClone(created),
    conversationDocuments: async () => ({ documents: [], remote_notice: null }),
    messageSources: async () => [],
    startAnswer: async (_id: string, _action: unknown, onEvent: (event: ChatEvent) => void) => {
      const line = summary('new', 'Hello there', 6, 2);
      list = [line, ...list.filter((c) => c.id !== 'new')];
      onEvent({
        event: 'started',
        data: { conversation: line, user_message: message(1, 'user', 'Hello there'), assistant_message: message(2, 'assistant', ''), prompt_tokens: 4, context_limit: 512, trimmed_messages: 0, model: null as never },
      });
      onEvent({ event: 'token', data: { text: 'Hi!' } });
      onEvent({ event: 'done', data: { message: message(2, 'assistant', 'Hi!') } });
    },
  };
  // Every call goes through the proxy, so one the fake does not answer is counted too (and fails).
  const api = new Proxy(backend, {
    get(target, name: string) {
      const real = (target as Record<string, (...args: unknown[]) => unknown>)[name];
      return (...args: unknown[]) => {
        calls.push(name);
        if (!real) throw new Error(`the UI called ${name}, which this fake backend does not answer`);
        return real(...args);
      };
    },
  }) as unknown as Api;
  return { api, calls, list: () => list };
}

/** The stores as main.ts wires them (those on the send path), over `api`. */
function stores(api: Api) {
  const notifications = new Notifications();
  const session = new ModelSession(api, notifications);
  const conversations = new ConversationList(api, notifications, (): boolean => answer.streaming);
  const answer = new AnswerStream(api, conversations, session, notifications);
  const documents = new DocumentsStore(api, conversations, notifications);
  return { conversations, answer, documents };
}

describe('a first message', () => {
  it('takes two IPC round trips: create the conversation, start the answer', async () => {
    const backend = countingBackend();
    const { conversations, answer } = stores(backend.api);
    await conversations.load();
    conversations.startNew();
    backend.calls.length = 0;

    expect(await answer.send('Hello there')).toBe(true);

    if (import.meta.env.HEARTH_PRINT_IPC_COUNT === '1') console.log(`first message IPC round trips: ${backend.calls.length}`);
    expect(backend.calls).toEqual(['createConversation', 'startAnswer']);
    // The list is what the backend would list, placed from the `started` event alone.
    expect(conversations.conversations).toEqual(backend.list());
    expect(conversations.current?.messages.map((m) => m.content)).toEqual(['Hello there', 'Hi!']);
  });
});
