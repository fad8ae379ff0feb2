import { describe, expect, it } from 'vitest';
import { ModelSession } from './session.svelte';
import { Notifications } from './notifications.svelte';
import type { Api } from './api';

function session(api: Partial<Api>) {
  const notifications = new Notifications();
  return { notifications, session: new ModelSession(api as Api, notifications) };
}

describe('ModelSession', () => {
  it('shows a model as loading only until FastFlowLM is ready, failed or stopped', () => {
    const { session: s } = session({});
    const event = (stage: 'starting' | 'loading' | 'checking' | 'ready' | 'failed' | 'stopped') =>
      s.onModelLoading({ model: 'm', backend: 'npu', stage, message: '' });
    for (const settled of ['ready', 'failed', 'stopped'] as const) {
      event('loading');
      expect(s.modelLoading?.stage).toBe('loading');
      event(settled);
      expect(s.modelLoading).toBeNull();
    }
    event('checking');
    expect(s.modelLoading?.stage).toBe('checking');
  });

  it('lists the saved server models, or the saved choice with the reason when unreachable', async () => {
    const server = { url: 'http://gpu-box:8000', host: 'gpu-box:8000', model: 'qwen', has_key: true, sees_pictures: ['qwen'] };
    const remote = (name: string, sees: boolean, serverSees = sees) => ({
      name,
      server_sees: serverSees,
      backend: { kind: 'remote' as const, usable: true, reason: null, sees_pictures: sees },
    });
    let reachable = true;
    const { session: s } = session({
      remoteServer: async () => server,
      testRemoteServer: async (url: string, key: string | null) => {
        expect([url, key]).toEqual([server.url, null]); // null: the saved key is used
        if (!reachable) throw new Error('Nothing answers at http://gpu-box:8000.');
        return [remote('qwen', true, false), remote('llava', true), remote('llama', false)];
      },
    });
    await s.refreshRemote();
    expect(s.remoteModels.map((m) => [m.name, m.backend.sees_pictures])).toEqual([
      ['qwen', true],
      ['llava', true],
      ['llama', false],
    ]);
    expect(s.remoteError).toBeNull();
    reachable = false;
    await s.refreshRemote();
    // The saved choice, seeing by the user's switch (the server cannot be asked).
    expect(s.remoteModels).toEqual([remote('qwen', true, false)]);
    expect(s.remoteError).toContain('Nothing answers');
  });

  it('shows a failed model choice next to the picker', async () => {
    const { session: s, notifications } = session({
      selectModel: async () => {
        throw new Error('The server at http://gpu-box:8000 has no model named "x".');
      },
    });
    await s.selectModel('x', 'remote');
    expect(s.pickerError).toContain('has no model named');
    expect(notifications.toasts).toEqual([]);
  });

  it('loads through tryOnNpuAnyway only when asked', async () => {
    const calls: string[] = [];
    const model = { name: 'minicpm5', backend_kind: 'npu', context_length: 4096 };
    const { session: s } = session({
      selectModel: async (name: string, backend: string | null) => {
        calls.push(`select ${name} ${backend}`);
        return model as never;
      },
      tryOnNpuAnyway: async (name: string) => {
        calls.push(`anyway ${name}`);
        return model as never;
      },
    } as unknown as Partial<Api>);
    await s.selectModel('minicpm5', 'npu');
    await s.selectModel('minicpm5', 'npu', true);
    expect(calls).toEqual(['select minicpm5 npu', 'anyway minicpm5']);
    expect(s.pickerError).toBeNull();
    expect(s.contextLimit).toBe(4096);
  });
});
