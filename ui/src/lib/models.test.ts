import { describe, expect, it } from 'vitest';
import { formatBytes, formatEta, foundSourceLabel, groupByKind, importedAs, percentDone, phaseLabel, plainSummary, recommendedId, repoFromInput, seesOn, shownName, type CatalogEntry, type FoundModel, type InstalledModel, type PullProgress } from './models';
import { setLanguage, t } from './i18n/index.svelte';

describe('models helpers', () => {
  it('formats sizes like a disk does', () => {
    expect(formatBytes(999)).toBe('999 B');
    expect(formatBytes(1_700_000_000)).toBe('1.70 GB');
    expect(formatBytes(52_400_000)).toBe('52.4 MB');
    expect(formatBytes(-1)).toBe('—');
  });

  it('says a model sees pictures only where its backend says so', () => {
    const npu = { kind: 'npu' as const, usable: false, reason: 'FastFlowLM is not installed', sees_pictures: true };
    const cpu = { kind: 'cpu' as const, usable: true, reason: null, sees_pictures: false };
    // FastFlowLM's vlm on the NPU, even before FastFlowLM is installed; the processor reads text.
    expect(seesOn([cpu, npu], 'npu')).toBe(true);
    expect(seesOn([cpu, npu], 'cpu')).toBe(false);
    expect(seesOn([cpu, { ...npu, sees_pictures: false }], 'npu')).toBe(false);
    expect(seesOn([cpu], 'remote')).toBe(false);
    expect(seesOn(undefined, 'npu')).toBe(false);
    expect(seesOn(null, 'npu')).toBe(false);
  });

  it('formats time left', () => {
    expect(formatEta(null)).toBe('—');
    expect(formatEta(45)).toBe('45 s');
    expect(formatEta(185)).toBe('3 min 05 s');
    expect(formatEta(4320)).toBe('1 h 12 min');
  });

  it('never shows more than 100 percent or divides by zero', () => {
    expect(percentDone(5, 0)).toBe(0);
    expect(percentDone(150, 100)).toBe(100);
    expect(percentDone(1, 3)).toBe(33);
  });

  it('says what a download is doing', () => {
    const p: PullProgress = {
      name: 'm', phase: 'downloading', file: 'model.q4nx', files_done: 0, file_count: 4,
      done_bytes: 1_000_000_000, total_bytes: 2_000_000_000, bytes_per_sec: 10_000_000, eta_secs: 100, message: null,
    };
    expect(phaseLabel(p)).toBe('1.00 GB of 2.00 GB · 10.0 MB/s · 1 min 40 s left');
    expect(phaseLabel({ ...p, phase: 'retrying', message: 'connection dropped' })).toBe('connection dropped');
    expect(phaseLabel({ ...p, phase: 'paused' })).toBe('Paused at 1.00 GB of 2.00 GB');
  });
});

describe('recommendation and plain words', () => {
  const item = (id: string, bytes: number, backends: ('npu' | 'cpu')[], fits = true, format: 'q4nx' | 'safetensors' = 'q4nx') => ({
    entry: { id, name: id, tag: '', repo: '', revision: '', format, kind: 'chat' as const, download_bytes: bytes, memory_bytes: bytes * 1.3, parameters: '', license: '', backends, context_length: 0, think: false, vlm: false, flm_family: '', quantization: '', description: '', note: '' },
    installed: false, partial: null, fit: { memory: fits, disk: fits, hint: '' },
  });

  it('recommends the smallest fitting model, one the NPU runs when there is an NPU', () => {
    const catalog = [item('big', 5e9, ['cpu'], true, 'safetensors'), item('npu-small', 2e9, ['npu', 'cpu']), item('cpu-tiny', 1e9, ['cpu']), item('huge', 1e8, ['cpu'], false)];
    expect(recommendedId(catalog, true)).toBe('npu-small');
    expect(recommendedId(catalog, false)).toBe('cpu-tiny');
    expect(recommendedId([item('x', 1e9, ['cpu'], false)], false)).toBeNull();
  });

  it('never recommends an embedding model to chat with, however small', () => {
    const embedding = { ...item('embed', 5e8, ['cpu']), entry: { ...item('embed', 5e8, ['cpu']).entry, kind: 'embedding' as const } };
    expect(recommendedId([embedding, item('cpu-tiny', 1e9, ['cpu'])], false)).toBe('cpu-tiny');
    expect(recommendedId([embedding], false)).toBeNull();
  });

  it('describes a model in one plain sentence', () => {
    expect(plainSummary(item('m', 1.3e9, ['cpu']).entry)).toBe('Small and quick: good for everyday questions and short texts.');
  });

  const ofKind = (id: string, kind: 'chat' | 'embedding' | 'speech' | 'reranking', bytes = 1e9) => {
    const base = item(id, bytes, ['cpu']);
    return { ...base, entry: { ...base.entry, kind } };
  };

  it('review #23 (S3): the Hugging Face field takes a pasted model link as well as owner/name, and speaks of neither format first', () => {
    expect(repoFromInput(' Qwen/Qwen3-0.6B ')).toBe('Qwen/Qwen3-0.6B');
    expect(repoFromInput('Qwen/Qwen3-0.6B@v1')).toBe('Qwen/Qwen3-0.6B@v1');
    expect(repoFromInput('https://example.org/Qwen/Qwen3-0.6B')).toBe('Qwen/Qwen3-0.6B');
    expect(repoFromInput('https://example.org/Qwen/Qwen3-0.6B/tree/v1')).toBe('Qwen/Qwen3-0.6B@v1');
    expect(repoFromInput('https://example.org/Qwen/Qwen3-0.6B/blob/main/config.json')).toBe('Qwen/Qwen3-0.6B');
    expect(repoFromInput('https://example.org/')).toBe('https://example.org/');
    setLanguage('en');
    expect(t('models.repoLabel')).toBe('Paste a Hugging Face model link, or its owner/name');
    expect(t('models.repoHint')).toContain('GGUF');
  });

  it('review #6 (S2): the embedding model says what it is for and that it does not chat, not "good for everyday questions"', () => {
    const sentence = plainSummary({ ...ofKind('qwen3-embedding', 'embedding').entry, format: 'safetensors' });
    expect(sentence).toBe('Helps Hearth find passages in your files by meaning, also in languages other than English. It does not chat. Needs converting before it can run.');
    expect(plainSummary(ofKind('s', 'speech').entry)).toMatch(/speech.*It does not chat\.$/);
    expect(plainSummary(ofKind('r', 'reranking').entry)).toMatch(/better order.*It does not chat\.$/);
  });

  it('review #6 (S2): the catalog is grouped by kind, models to chat with first, empty kinds left out', () => {
    const catalog = [ofKind('embed', 'embedding'), ofKind('a', 'chat'), ofKind('rr', 'reranking'), ofKind('b', 'chat')];
    const groups = groupByKind(catalog);
    expect(groups.map((g) => g.kind)).toEqual(['chat', 'embedding', 'reranking']);
    expect(groups[0].items.map((i) => i.entry.id)).toEqual(['a', 'b']);
  });

  it('review #14 (S3): Chinese model summaries join their sentences without a space', () => {
    setLanguage('zh');
    try {
      const entry = { ...item('m', 1.3e9, ['cpu'], true, 'safetensors').entry, think: true };
      expect(plainSummary(entry)).not.toMatch(/。 /);
    } finally {
      setLanguage('en');
    }
  });
});

describe('found models', () => {
  it('names where a model was found in plain words', () => {
    expect(foundSourceLabel('ollama')).toBe('from Ollama');
    expect(foundSourceLabel('lmstudio')).toBe('from LM Studio');
    expect(foundSourceLabel('jan')).toBe('from Jan');
    expect(foundSourceLabel('huggingface')).toBe('from the Hugging Face cache');
  });

  it('shows a conversion as a percentage', () => {
    const p: PullProgress = {
      name: 'm', phase: 'converting', file: null, files_done: 0, file_count: 0,
      done_bytes: 250, total_bytes: 1000, bytes_per_sec: 0, eta_secs: null, message: null,
    };
    expect(phaseLabel(p)).toBe('Converting for Hearth: 25%');
  });
});

describe('importing what people have', () => {
  it('a found model already imported is recognised by its source or its name', () => {
    const found = { path: '/home/u/.lmstudio/models/x/tiny.gguf', import_name: 'tiny' } as FoundModel;
    const byPath = { name: 'Other', source: 'import:/home/u/.lmstudio/models/x/tiny.gguf' } as InstalledModel;
    const byName = { name: 'tiny', source: 'import:/elsewhere' } as InstalledModel;
    expect(importedAs(found, [byPath])?.name).toBe('Other');
    expect(importedAs(found, [byName])?.name).toBe('tiny');
    expect(importedAs(found, [{ name: 'demo', source: 'built-in' } as InstalledModel])).toBeNull();
  });

  it('NPU ports lose their -NPU2 on a computer without an NPU', () => {
    const entry = { name: 'Llama-3.2-1B-NPU2', backends: ['npu', 'cpu'] } as Parameters<typeof shownName>[0];
    expect(shownName(entry, true)).toBe('Llama-3.2-1B-NPU2');
    expect(shownName(entry, false)).toBe('Llama-3.2-1B');
  });

  it('review #7 (S3): two catalog models never read alike ("MiniCPM5-2B" twice)', () => {
    const port = { id: 'minicpm5-2b-npu2', name: 'MiniCPM5-2B-NPU2', format: 'q4nx', backends: ['npu', 'cpu'] } as CatalogEntry;
    const original = { id: 'minicpm5-2b', name: 'MiniCPM5-2B', format: 'safetensors', backends: ['cpu'] } as CatalogEntry;
    const catalog = [port, original];
    const names = catalog.map((e) => shownName(e, false, catalog));
    expect(new Set(names).size).toBe(2);
    expect(names).toEqual(['MiniCPM5-2B (ready to run)', 'MiniCPM5-2B (original, needs converting)']);
    expect(shownName(port, true, catalog)).toBe('MiniCPM5-2B-NPU2');
    // An NPU-only build keeps its name without an NPU: it is not "ready to run" there.
    const npuOnly = { id: 'qwen2.5-3b-npu2', name: 'Qwen2.5-3B-Instruct-NPU2', format: 'q4nx', backends: ['npu'] } as CatalogEntry;
    const qwen = { id: 'qwen2.5-3b', name: 'Qwen2.5-3B-Instruct', format: 'safetensors', backends: ['cpu'] } as CatalogEntry;
    expect([npuOnly, qwen].map((e) => shownName(e, false, [npuOnly, qwen]))).toEqual(['Qwen2.5-3B-Instruct-NPU2', 'Qwen2.5-3B-Instruct']);
  });
});
