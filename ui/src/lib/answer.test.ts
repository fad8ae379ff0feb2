import { describe, expect, it } from 'vitest';
import { AnswerStream, messageLength, validateMessage } from './answer.svelte';
import { setLanguage } from './i18n/index.svelte';
import { ConversationList } from './conversations.svelte';
import { ModelSession } from './session.svelte';
import { Notifications } from './notifications.svelte';
import { Shell } from './shell.svelte';
import { BackendError, type Api } from './api';
import type { ChatAction, ChatEvent, Conversation, ConversationSummary, Message } from './types';

const settings = {
  system_prompt: '',
  sampling: { temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05, repetition_penalty: 1, seed: 0 },
  max_tokens: 64,
  enable_thinking: null,
};

function message(id: number, role: 'user' | 'assistant', content: string): Message {
  return { id, role, content, state: 'complete', receipt: null, created_at: 0, branches: [], pictures: [] };
}

/** Conversation c1's line of the list, as a `started` event carries it. */
function line(title: string, message_count = 2): ConversationSummary {
  return { id: 'c1', title, created_at: 0, updated_at: 1, message_count, snippet: null };
}

/** A fake backend whose startAnswer replays the given events. */
function fakeApi(events: (action: ChatAction) => ChatEvent[]): Api {
  const conversation: Conversation = { id: 'c1', title: 'New conversation', created_at: 0, updated_at: 0, settings, messages: [], versions: [] };
  return {
    createConversation: async () => structuredClone(conversation),
    getConversation: async () => structuredClone(conversation),
    listConversations: async () => [],
    startAnswer: async (_id: string, action: ChatAction, onEvent: (e: ChatEvent) => void) => {
      for (const e of events(action)) onEvent(e);
    },
  } as unknown as Api;
}

/** The stores as main.ts wires them, over `api`. */
function stores(api: Api) {
  const notifications = new Notifications();
  const shell = new Shell();
  const session = new ModelSession(api, notifications);
  const conversations = new ConversationList(api, notifications, (): boolean => answer.streaming);
  const answer = new AnswerStream(api, conversations, session, notifications);
  conversations.onShow(() => shell.showChat());
  return { notifications, shell, session, conversations, answer };
}

describe('validateMessage', () => {
  it('refuses empty and over-long messages with a reason', () => {
    expect(validateMessage('  ', 10)).toBe('Type a message first.');
    expect(validateMessage('x'.repeat(11), 10)).toContain('at most 10');
    expect(validateMessage('hello', 10)).toBeNull();
  });

  it('counts characters as the backend does: an emoji is one, not two UTF-16 units', () => {
    expect(messageLength('🦀🦀')).toBe(2);
    expect(validateMessage('🦀'.repeat(10), 10)).toBeNull();
    expect(validateMessage('🦀'.repeat(11), 10)).toContain('11 characters');
  });
});

describe('AnswerStream', () => {
  it('streams tokens into the answer and keeps the receipt', async () => {
    const receipt = {
      model_name: 'demo', model_sha256: null, backend: 'cpu', device: 'cpu', prompt_tokens: 7, generated_tokens: 2,
      ttft_secs: 0.1, decode_secs: 0.1, tokens_per_second: 10, stop_reason: 'end of turn', trimmed_messages: 0, finished_at: 0,
    };
    const { answer, conversations, session } = stores(
      fakeApi(() => [
        { event: 'started', data: { conversation: line('hi'), user_message: message(1, 'user', 'hi'), assistant_message: message(2, 'assistant', ''), prompt_tokens: 7, context_limit: 512, trimmed_messages: 0, model: null as never } },
        { event: 'token', data: { text: 'Hel' } },
        { event: 'token', data: { text: 'lo' } },
        { event: 'stats', data: { generated_tokens: 2, ttft_secs: 0.1, tokens_per_second: 9, elapsed_secs: 0.3 } },
        { event: 'done', data: { message: { ...message(2, 'assistant', 'Hello'), receipt: receipt as never } } },
      ]),
    );
    expect(await answer.send('hi')).toBe(true);
    expect(conversations.current?.messages.map((m) => m.content)).toEqual(['hi', 'Hello']);
    expect(answer.live?.tokens_per_second).toBe(10);
    expect(answer.streaming).toBe(false);
    expect(session.contextLimit).toBe(512);
  });

  it('shows a streamed error and stops streaming', async () => {
    const { answer, conversations } = stores(
      fakeApi(() => [
        { event: 'started', data: { conversation: line('hi'), user_message: message(1, 'user', 'hi'), assistant_message: message(2, 'assistant', ''), prompt_tokens: 3, context_limit: 512, trimmed_messages: 0, model: null as never } },
        { event: 'error', data: { code: 'model', message: 'The model stopped with an error.' } },
      ]),
    );
    await answer.send('hi');
    // The error is shown under the answer that failed, not at the top of the window.
    expect(answer.answerErrors[2]).toBe('The model stopped with an error.');
    expect(conversations.current?.messages[1].state).toBe('error');
    expect(answer.streaming).toBe(false);
  });

  it('does not send an empty message, and says why under the composer', async () => {
    const { answer } = stores(fakeApi(() => []));
    expect(await answer.send('   ')).toBe(false);
    expect(answer.composerError).toBe('Type a message first.');
  });

  it('creates a conversation only on the first send', async () => {
    let created = 0;
    const api = fakeApi(() => []);
    const create = api.createConversation;
    api.createConversation = async () => {
      created++;
      return create();
    };
    const { answer, conversations } = stores(api);
    conversations.startNew();
    conversations.startNew();
    expect(created).toBe(0);
    expect(conversations.current).toBeNull();
    await answer.send('hello');
    expect(created).toBe(1);
    expect(conversations.current?.id).toBe('c1');
  });

  it('keeps a failed message as the draft of its conversation only, once', async () => {
    const api = fakeApi(() => []);
    api.startAnswer = async () => {
      throw new Error('your message is too long for this model');
    };
    const { answer, conversations } = stores(api);
    expect(await answer.send('Too long')).toBe(false);
    expect(answer.composerError).toBe('Your message is too long for this model');
    expect(conversations.drafts['c1']).toBe('Too long');
    conversations.setDraft('', 'c1'); // the user empties the box: nothing refills it
    expect(conversations.drafts['c1']).toBe('');
    conversations.startNew();
    expect(conversations.drafts[conversations.draftKey] ?? '').toBe('');
    expect(answer.composerError).toBeNull();
  });

  it('notes a fallback to the processor next to that answer', async () => {
    const { answer } = stores(
      fakeApi(() => [
        { event: 'started', data: { conversation: line('hi'), user_message: message(1, 'user', 'hi'), assistant_message: message(2, 'assistant', ''), prompt_tokens: 3, context_limit: 512, trimmed_messages: 0, model: null as never } },
        { event: 'fallback', data: { reason: 'The NPU stopped answering.', backend: 'cpu', model: null as never } },
        { event: 'done', data: { message: message(2, 'assistant', 'ok') } },
      ]),
    );
    await answer.send('hi');
    expect(answer.fallbacks[2]).toBe('The NPU stopped answering.');
  });

  it('keeps a regenerated answer as an earlier version of the new one', async () => {
    let round = 0;
    const { answer, conversations } = stores(
      fakeApi((action) => {
        round++;
        const reply = message(round * 10, 'assistant', '');
        const events: ChatEvent[] = [
          { event: 'started', data: { conversation: line('hi'), user_message: action.kind === 'send' ? message(1, 'user', 'q') : null, assistant_message: reply, prompt_tokens: 3, context_limit: 512, trimmed_messages: 0, model: null as never } },
          { event: 'done', data: { message: { ...reply, content: `answer ${round}` } } },
        ];
        return events;
      }),
    );
    await answer.send('q');
    await answer.regenerate();
    await answer.regenerate();
    expect(conversations.current?.messages.map((m) => m.content)).toEqual(['q', 'answer 3']);
    expect(conversations.current?.versions?.map((v) => [v.message_id, v.content])).toEqual([
      [30, 'answer 1'],
      [30, 'answer 2'],
    ]);
  });

  /** Stores whose open conversation c1 holds a question and an answer cut at the length limit;
   *  `start` plays the backend's startAnswer. */
  async function withCutAnswer(start: (action: ChatAction, onEvent: (e: ChatEvent) => void) => void) {
    const conversation: Conversation = {
      id: 'c1', title: 'Story', created_at: 0, updated_at: 0, settings, versions: [],
      messages: [message(1, 'user', 'Tell me a story'), message(2, 'assistant', 'Once upon a')],
    };
    const api = {
      getConversation: async () => structuredClone(conversation),
      listConversations: async () => [],
      startAnswer: async (_id: string, action: ChatAction, onEvent: (e: ChatEvent) => void) => start(action, onEvent),
    } as unknown as Api;
    const all = stores(api);
    await all.conversations.open('c1');
    return all;
  }

  it('review #9 (S3): Continue writes on in the same answer, where the model can', async () => {
    const sent: ChatAction[] = [];
    const { answer, conversations } = await withCutAnswer((action, onEvent) => {
      sent.push(action);
      const cut = message(2, 'assistant', 'Once upon a');
      onEvent({ event: 'started', data: { conversation: line('Story'), user_message: null, assistant_message: cut, prompt_tokens: 9, context_limit: 128, trimmed_messages: 0, model: null } } as unknown as ChatEvent);
      onEvent({ event: 'token', data: { text: ' time' } });
      onEvent({ event: 'done', data: { message: message(2, 'assistant', 'Once upon a time') } });
    });
    expect(await answer.continueAnswer()).toBe(true);
    expect(sent).toEqual([{ kind: 'continue', message_id: 2 }]);
    expect(conversations.current?.messages.map((m) => [m.id, m.content])).toEqual([
      [1, 'Tell me a story'],
      [2, 'Once upon a time'],
    ]);
  });

  it('review #9 (S3): where the model cannot, Continue says so and asks for a new answer in the language of the app', async () => {
    const sent: ChatAction[] = [];
    const { answer, notifications } = await withCutAnswer((action) => {
      sent.push(action);
      if (action.kind === 'continue') throw new BackendError('unsupported', 'cannot continue in place', 'start_answer');
    });
    setLanguage('de');
    try {
      await answer.continueAnswer();
    } finally {
      setLanguage('en');
    }
    expect(sent).toEqual([
      { kind: 'continue', message_id: 2 },
      { kind: 'send', content: 'Bitte dort weitermachen, wo die Antwort aufgehört hat.', pictures: [] },
    ]);
    expect(notifications.toasts.map((n) => n.message)).toEqual([expect.stringContaining('neuen Antwort')]);
    expect(answer.composerError).toBeNull();
  });
});

describe('ConversationList', () => {
  it('keeps the list order when a conversation is renamed', async () => {
    const api = { renameConversation: async () => {} } as unknown as Api;
    const { conversations } = stores(api);
    const summary = (id: string, title: string) => ({ id, title, created_at: 0, updated_at: 0, message_count: 2, snippet: null });
    conversations.conversations = [summary('a', 'First'), summary('b', 'Second')];
    await conversations.rename('b', 'Renamed');
    expect(conversations.conversations.map((c) => c.title)).toEqual(['First', 'Renamed']);
  });

  it("places an answer's conversation at the top of the list, asking the backend again only for a search", async () => {
    let listed = 0;
    const summary = (id: string, title: string) => ({ id, title, created_at: 0, updated_at: 0, message_count: 2, snippet: null });
    const api = { listConversations: async () => (listed++, [summary('b', 'Second')]) } as unknown as Api;
    const { conversations } = stores(api);
    conversations.conversations = [summary('a', 'First'), summary('b', 'Second')];
    await conversations.place({ ...summary('a', 'First'), message_count: 4 });
    expect(conversations.conversations.map((c) => [c.id, c.message_count])).toEqual([['a', 4], ['b', 2]]);
    await conversations.place({ ...summary('b', 'Second'), message_count: 4 });
    expect(conversations.conversations.map((c) => c.id)).toEqual(['b', 'a']);
    expect(listed).toBe(0);
    // Filtered by a search, the list is the backend's to give: whether the moved line still matches.
    conversations.search = 'Sec';
    await conversations.place(summary('a', 'First'));
    expect(listed).toBe(1);
    expect(conversations.conversations.map((c) => c.id)).toEqual(['b']);
  });

  it('shows the chat and asks for the message box focus on a new or opened conversation', async () => {
    const { conversations, shell } = stores(fakeApi(() => []));
    shell.view = 'settings';
    const before = shell.focusRequest;
    conversations.startNew();
    expect(shell.focusRequest).toBe(before + 1);
    expect(shell.view).toBe('chat');
    shell.view = 'models';
    await conversations.open('c1');
    expect(shell.focusRequest).toBe(before + 2);
    expect(shell.view).toBe('chat');
  });

  it('shows the branch the backend switched to, and says so when it could not', async () => {
    const asked: [string, number][] = [];
    const branch = { id: 'c1', title: 't', created_at: 0, updated_at: 0, settings, versions: [], messages: [
      { ...message(1, 'user', 'first version'), branches: [1, 3] },
      message(2, 'assistant', 'its answer'),
    ] };
    const api = {
      ...fakeApi(() => []),
      showBranch: async (id: string, messageId: number) => {
        asked.push([id, messageId]);
        if (messageId === 99) throw new Error('there is no message with id 99');
        return structuredClone(branch);
      },
    } as unknown as Api;
    const { conversations, notifications } = stores(api);
    await conversations.open('c1');
    await conversations.showBranch(1);
    expect(asked).toEqual([['c1', 1]]);
    expect(conversations.current?.messages.map((m) => m.content)).toEqual(['first version', 'its answer']);
    await conversations.showBranch(99);
    expect(conversations.current?.messages.length).toBe(2);
    expect(notifications.toasts.map((t) => t.level)).toEqual(['error']);
  });

  it('keeps the conversations while an answer is written', async () => {
    let deleted = 0;
    const api = {
      ...fakeApi(() => []),
      startAnswer: () => new Promise<void>(() => {}),
      listConversations: async () => [{ id: 'c1', title: 't', created_at: 0, updated_at: 0, message_count: 1, snippet: null }],
      deleteConversation: async () => void deleted++,
    } as unknown as Api;
    const { answer, conversations, notifications } = stores(api);
    void answer.send('hi');
    while (!answer.streaming) await new Promise((resolve) => setTimeout(resolve, 0));
    await conversations.deleteAll();
    expect(deleted).toBe(0);
    expect(notifications.toasts.map((t) => t.level)).toEqual(['warning']);
  });
});
