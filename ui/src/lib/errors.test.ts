import { describe, expect, it } from 'vitest';
import { plainError } from './errors';

describe('plainError', () => {
  it('turns a network failure into one plain sentence and keeps the original as details', () => {
    const raw =
      'hub: could not reach https://huggingface.co/api/models/x: io: failed to lookup address information: Name or service not known. Check the network connection (or HF_ENDPOINT), then run the same command again';
    const e = plainError(raw);
    expect(e.summary).toMatch(/^Can't reach the internet/);
    expect(e.summary).not.toMatch(/hub:|HF_ENDPOINT|command/);
    expect(e.details).toBe(raw);
  });

  it('explains a missing folder without the OS error number', () => {
    const e = plainError('hub: could not open /home/me/Downloads/my-model: No such file or directory (os error 2)');
    expect(e.summary).toBe('That folder does not exist. Choose another folder.');
  });

  it('strips a subsystem prefix and capitalizes an unknown message', () => {
    expect(plainError('engine: the model stopped')).toEqual({ summary: 'The model stopped', details: 'engine: the model stopped' });
  });

  it('leaves a message already meant for people alone, with no details', () => {
    expect(plainError('An answer is already being written.')).toEqual({ summary: 'An answer is already being written.', details: null });
  });
});
