import { afterEach, describe, expect, it } from 'vitest';
import { clearMocks, mockIPC } from '@tauri-apps/api/mocks';
import { api, BackendError, toBackendError } from './api';

afterEach(() => clearMocks());

describe('api', () => {
  it('passes arguments by name and returns the result', async () => {
    mockIPC((cmd, args) => {
      if (cmd === 'rename_conversation') return { got: args };
      return null;
    });
    await expect(api.renameConversation('a1', 'Trip')).resolves.toEqual({ got: { id: 'a1', title: 'Trip' } });
  });

  it('turns backend {code, message} errors into BackendError', async () => {
    mockIPC(() => {
      throw { code: 'busy', message: 'An answer is already being written.' };
    });
    const error = await api.stopAnswer().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect((error as BackendError).code).toBe('busy');
    expect((error as BackendError).message).toBe('An answer is already being written.');
  });

  it('makes a readable error out of anything', () => {
    expect(toBackendError('x', 'plain text').message).toBe('plain text');
    expect(toBackendError('x', 42).message).toContain('"x"');
  });
});
