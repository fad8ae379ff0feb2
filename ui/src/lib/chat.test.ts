import { describe, expect, it } from 'vitest';
import { CONTINUE_TEXT, ChatStore, messageLength, validateMessage } from './chat.svelte';
import type { Api } from './api';
import type { ChatAction, ChatEvent, Conversation, Message } from './types';

const settings = {
  system_prompt: '',
  sampling: { temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05, repetition_penalty: 1, seed: 0 },
  max_tokens: 64,
  enable_thinking: null,
};

function message(id: number, role: 'user' | 'assistant', content: string): Message {
  return { id, role, content, state: 'complete', receipt: null, created_at: 0 };
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

describe('ChatStore', () => {
  it('streams tokens into the answer and keeps the receipt', async () => {
    const receipt = {
      model_name: 'demo', model_sha256: null, backend: 'cpu', device: 'cpu', prompt_tokens: 7, generated_tokens: 2,
      ttft_secs: 0.1, decode_secs: 0.1, tokens_per_second: 10, stop_reason: 'end of turn', trimmed_messages: 0, finished_at: 0,
    };
    const store = new ChatStore(
      fakeApi(() => [
        { event: 'started', data: { user_message: message(1, 'user', 'hi'), assistant_message: message(2, 'assistant', ''), prompt_tokens: 7, context_limit: 512, trimmed_messages: 0, model: null as never } },
        { event: 'token', data: { text: 'Hel' } },
        { event: 'token', data: { text: 'lo' } },
        { event: 'stats', data: { generated_tokens: 2, ttft_secs: 0.1, tokens_per_second: 9, elapsed_secs: 0.3 } },
        { event: 'done', data: { message: { ...message(2, 'assistant', 'Hello'), receipt: receipt as never } } },
      ]),
    );
    expect(await store.send('hi')).toBe(true);
    expect(store.current?.messages.map((m) => m.content)).toEqual(['hi', 'Hello']);
    expect(store.live?.tokens_per_second).toBe(10);
    expect(store.streaming).toBe(false);
    expect(store.contextLimit).toBe(512);
  });

  it('shows a streamed error and stops streaming', async () => {
    const store = new ChatStore(
      fakeApi(() => [
        { event: 'started', data: { user_message: message(1, 'user', 'hi'), assistant_message: message(2, 'assistant', ''), prompt_tokens: 3, context_limit: 512, trimmed_messages: 0, model: null as never } },
        { event: 'error', data: { code: 'model', message: 'The model stopped with an error.' } },
      ]),
    );
    await store.send('hi');
    // The error is shown under the answer that failed, not at the top of the window.
    expect(store.answerErrors[2]).toBe('The model stopped with an error.');
    expect(store.current?.messages[1].state).toBe('error');
    expect(store.streaming).toBe(false);
  });

  it('does not send an empty message, and says why under the composer', async () => {
    const store = new ChatStore(fakeApi(() => []));
    expect(await store.send('   ')).toBe(false);
    expect(store.composerError).toBe('Type a message first.');
  });

  it('creates a conversation only on the first send', async () => {
    let created = 0;
    const api = fakeApi(() => []);
    const create = api.createConversation;
    api.createConversation = async () => {
      created++;
      return create();
    };
    const store = new ChatStore(api);
    store.newConversation();
    store.newConversation();
    expect(created).toBe(0);
    expect(store.current).toBeNull();
    await store.send('hello');
    expect(created).toBe(1);
    expect(store.current?.id).toBe('c1');
  });

  it('keeps a failed message as the draft of its conversation only, once', async () => {
    const api = fakeApi(() => []);
    api.startAnswer = async () => {
      throw new Error('your message is too long for this model');
    };
    const store = new ChatStore(api);
    expect(await store.send('Too long')).toBe(false);
    expect(store.composerError).toBe('Your message is too long for this model');
    expect(store.drafts['c1']).toBe('Too long');
    store.setDraft('', 'c1'); // the user empties the box: nothing refills it
    expect(store.drafts['c1']).toBe('');
    store.newConversation();
    expect(store.drafts[store.draftKey] ?? '').toBe('');
  });

  it('notes a fallback to the processor next to that answer', async () => {
    const store = new ChatStore(
      fakeApi(() => [
        { event: 'started', data: { user_message: message(1, 'user', 'hi'), assistant_message: message(2, 'assistant', ''), prompt_tokens: 3, context_limit: 512, trimmed_messages: 0, model: null as never } },
        { event: 'fallback', data: { reason: 'The NPU stopped answering.', backend: 'cpu', model: null as never } },
        { event: 'done', data: { message: message(2, 'assistant', 'ok') } },
      ]),
    );
    await store.send('hi');
    expect(store.fallbacks[2]).toBe('The NPU stopped answering.');
  });

  it('keeps a regenerated answer as an earlier version of the new one', async () => {
    let round = 0;
    const store = new ChatStore(
      fakeApi((action) => {
        round++;
        const answer = message(round * 10, 'assistant', '');
        const events: ChatEvent[] = [
          { event: 'started', data: { user_message: action.kind === 'send' ? message(1, 'user', 'q') : null, assistant_message: answer, prompt_tokens: 3, context_limit: 512, trimmed_messages: 0, model: null as never } },
          { event: 'done', data: { message: { ...answer, content: `answer ${round}` } } },
        ];
        return events;
      }),
    );
    await store.send('q');
    await store.regenerate();
    await store.regenerate();
    expect(store.current?.messages.map((m) => m.content)).toEqual(['q', 'answer 3']);
    expect(store.current?.versions?.map((v) => [v.message_id, v.content])).toEqual([
      [30, 'answer 1'],
      [30, 'answer 2'],
    ]);
  });

  it('shows a model as loading only until FastFlowLM is ready, failed or stopped', () => {
    const store = new ChatStore(fakeApi(() => []));
    const event = (stage: 'starting' | 'loading' | 'checking' | 'ready' | 'failed' | 'stopped') =>
      store.onModelLoading({ model: 'm', backend: 'npu', stage, message: '' });
    for (const settled of ['ready', 'failed', 'stopped'] as const) {
      event('loading');
      expect(store.modelLoading?.stage).toBe('loading');
      event(settled);
      expect(store.modelLoading).toBeNull();
    }
    event('checking');
    expect(store.modelLoading?.stage).toBe('checking');
  });

  it('keeps the list order when a conversation is renamed', async () => {
    const api = { renameConversation: async () => {} } as unknown as Api;
    const store = new ChatStore(api);
    const summary = (id: string, title: string) => ({ id, title, created_at: 0, updated_at: 0, message_count: 2, snippet: null });
    store.conversations = [summary('a', 'First'), summary('b', 'Second')];
    await store.rename('b', 'Renamed');
    expect(store.conversations.map((c) => c.title)).toEqual(['First', 'Renamed']);
  });

  it('shows info toasts for a while and remembers a closed notice', async () => {
    const memory = new Map<string, string>();
    const timers: (() => void)[] = [];
    const storage = { getItem: (k: string) => memory.get(k) ?? null, setItem: (k: string, v: string) => void memory.set(k, v) };
    const store = new ChatStore({} as Api, storage, (fn) => void timers.push(fn));
    store.toast('info', 'Saved.');
    store.toast('warning', 'The database was recovered.');
    timers.forEach((fn) => fn());
    expect(store.toasts.map((t) => t.message)).toEqual(['The database was recovered.']);
    store.forgetNotice(store.toasts[0]);
    expect(JSON.parse(memory.get('hearth.dismissed-notices')!)).toEqual(['The database was recovered.']);
  });
});

describe('ChatStore and the remote server', () => {
  it('lists the saved server models, or the saved choice with the reason when unreachable', async () => {
    const server = { url: 'http://gpu-box:8000', host: 'gpu-box:8000', model: 'qwen', has_key: true };
    let reachable = true;
    const api = {
      remoteServer: async () => server,
      testRemoteServer: async (url: string, key: string | null) => {
        expect([url, key]).toEqual([server.url, null]); // null: the saved key is used
        if (!reachable) throw new Error('Nothing answers at http://gpu-box:8000.');
        return ['qwen', 'llama'];
      },
    } as unknown as Api;
    const store = new ChatStore(api);
    await store.refreshRemote();
    expect(store.remoteModels).toEqual(['qwen', 'llama']);
    expect(store.remoteError).toBeNull();
    reachable = false;
    await store.refreshRemote();
    expect(store.remoteModels).toEqual(['qwen']);
    expect(store.remoteError).toContain('Nothing answers');
  });

  it('shows a failed model choice next to the picker', async () => {
    const api = {
      selectModel: async () => {
        throw new Error('The server at http://gpu-box:8000 has no model named "x".');
      },
    } as unknown as Api;
    const store = new ChatStore(api);
    await store.selectModel('x', 'remote');
    expect(store.pickerError).toContain('has no model named');
    expect(store.toasts).toEqual([]);
  });
});

describe('ChatStore: try on the NPU anyway', () => {
  it('loads through tryOnNpuAnyway only when asked', async () => {
    const calls: string[] = [];
    const model = { name: 'minicpm5', backend_kind: 'npu', context_length: 4096 };
    const api = {
      selectModel: async (name: string, backend: string | null) => {
        calls.push(`select ${name} ${backend}`);
        return model;
      },
      tryOnNpuAnyway: async (name: string) => {
        calls.push(`anyway ${name}`);
        return model;
      },
    } as unknown as Api;
    const store = new ChatStore(api);
    await store.selectModel('minicpm5', 'npu');
    await store.selectModel('minicpm5', 'npu', true);
    expect(calls).toEqual(['select minicpm5 npu', 'anyway minicpm5']);
    expect(store.pickerError).toBeNull();
  });
});

describe('ChatStore: focus and Continue', () => {
  it('asks for the message box focus on a new or opened conversation', async () => {
    const store = new ChatStore(fakeApi(() => []));
    const before = store.focusRequest;
    store.newConversation();
    expect(store.focusRequest).toBe(before + 1);
    await store.openConversation('c1');
    expect(store.focusRequest).toBe(before + 2);
  });

  it('Continue asks the model to go on, as a message of its own', async () => {
    const sent: ChatAction[] = [];
    const store = new ChatStore(
      fakeApi((action) => {
        sent.push(action);
        return [];
      }),
    );
    await store.continueAnswer();
    expect(sent).toEqual([{ kind: 'send', content: CONTINUE_TEXT }]);
  });
});
