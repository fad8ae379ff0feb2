import { describe, expect, it } from 'vitest';
import { VoiceStore, type VoiceApi } from './voice.svelte';
import { BackendError } from './api';
import type { PullProgress, PullResult, SpeechOffer, VoiceStatus } from './bindings';

const OFFER: SpeechOffer = {
  name: 'whisper-base',
  size_bytes: 147_882_941,
  languages: Array.from({ length: 99 }, (_, i) => (i < 5 ? ['en', 'zh', 'es', 'de', 'fr'][i] : `l${i}`)),
  license: 'MIT',
  paused_bytes: 0,
  downloading: false,
};

function status(models: string[], offer: SpeechOffer | null = OFFER): VoiceStatus {
  return { speech_models: models, npu_hears: false, speech_models_dir: '/data/models/speech', listening: false, offer };
}

function progress(done: number, total: number): PullProgress {
  return {
    name: 'whisper-base',
    phase: 'downloading',
    file: 'model.bin',
    files_done: 0,
    file_count: 3,
    done_bytes: done,
    total_bytes: total,
    bytes_per_sec: 0,
    eta_secs: null,
    message: null,
  } as PullProgress;
}

/** A fake backend: `pull` decides how a download ends; `asked` records every call. */
function setup(pull: (onProgress: (p: PullProgress) => void) => Promise<PullResult>) {
  const asked: string[] = [];
  let installed: string[] = [];
  const api: VoiceApi = {
    voiceStatus: async () => (asked.push('status'), installed.length ? status(installed, null) : status([])),
    startListening: async () => (asked.push('start'), { device: 'test', max_seconds: 300 }),
    stopListening: async (language: string | null) => (
      asked.push(`stop ${language}`), { text: 'hello', backend: 'cpu', duration_s: 1, npu_failure: null }
    ),
    cancelListening: async () => void asked.push('cancel listening'),
    spokenLanguage: async (id: string | null, fallback: string) => (asked.push(`language ${id} ${fallback}`), id ? 'fr' : fallback),
    pullModel: async (query: string, onProgress: (p: PullProgress) => void) => {
      asked.push(`pull ${query}`);
      const result = await pull(onProgress);
      if (result.outcome === 'installed' || result.outcome === 'already_installed') installed = ['whisper-base'];
      return result;
    },
    pauseDownload: async (name: string) => void asked.push(`pause ${name}`),
    cancelDownload: async (name: string) => (asked.push(`cancel ${name}`), 0),
  } as unknown as VoiceApi;
  return { asked, store: new VoiceStore(api) };
}

const installed: PullResult = { outcome: 'installed', model: null };

describe('voice: the speech model offer', () => {
  it('the first press with no model offers Whisper base instead of listening', async () => {
    const { asked, store } = setup(async () => installed);
    await store.toggle(() => {});
    expect(asked).toEqual(['status']);
    expect(store.phase).toBe('idle');
    expect(store.offer?.name).toBe('whisper-base');
    expect(store.offer?.size_bytes).toBe(147_882_941);
    expect(store.download).toEqual({ kind: 'offered' });
  });

  it('one click downloads with progress, then the next press listens in the conversation’s language', async () => {
    const seen: number[] = [];
    const { asked, store } = setup(async (onProgress) => {
      onProgress(progress(50, 100));
      seen.push(store.download.kind === 'downloading' ? store.download.done : -1);
      return installed;
    });
    await store.toggle(() => {});
    await store.downloadModel();
    expect(seen).toEqual([50]);
    expect(store.missing).toBeNull();
    await store.toggle(() => {});
    expect(store.phase).toBe('listening');
    const words: string[] = [];
    await store.toggle((text) => words.push(text), 'conv-1');
    expect(words).toEqual(['hello']);
    expect(asked).toContain('language conv-1 en');
    expect(asked).toContain('stop fr');
  });

  it('"Detect the language I speak" lets Whisper decide', async () => {
    const { asked, store } = setup(async () => installed);
    await store.toggle(() => {});
    await store.downloadModel();
    store.setDetectLanguage(true);
    await store.toggle(() => {});
    await store.toggle(() => {}, 'conv-1');
    expect(asked).toContain('stop null');
    expect(asked.some((a) => a.startsWith('language'))).toBe(false);
  });

  it('a failure is said in words with Try again, which downloads again', async () => {
    let fail = true;
    const { asked, store } = setup(async () => {
      if (fail) throw new BackendError('network', 'hub: could not reach http://127.0.0.1:9: connection refused', 'pull_model');
      return installed;
    });
    await store.toggle(() => {});
    await store.downloadModel();
    expect(store.download.kind).toBe('failed');
    if (store.download.kind === 'failed') expect(store.download.error).toMatch(/internet/i);
    fail = false;
    await store.downloadModel();
    expect(store.missing).toBeNull();
    expect(asked.filter((a) => a === 'pull whisper-base')).toHaveLength(2);
  });

  it('a paused download offers Resume from its bytes; Cancel returns to the offer', async () => {
    const { asked, store } = setup(async (onProgress) => {
      onProgress(progress(40, 100));
      return { outcome: 'paused', model: null };
    });
    await store.toggle(() => {});
    await store.downloadModel();
    expect(store.download).toEqual({ kind: 'paused', done: 40 });
    await store.cancelDownload();
    expect(asked).toContain('cancel whisper-base');
    expect(store.download).toEqual({ kind: 'offered' });
  });

  it('a download paused in an earlier session shows as paused at the first press', async () => {
    const { store } = setup(async () => installed);
    const api = (store as unknown as { api: VoiceApi }).api;
    api.voiceStatus = async () => status([], { ...OFFER, paused_bytes: 1234 });
    await store.toggle(() => {});
    expect(store.download).toEqual({ kind: 'paused', done: 1234 });
  });
});
