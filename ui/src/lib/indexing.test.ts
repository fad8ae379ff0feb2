// Review #10 (S3): a file's row says what is done, with a rough time left while it is indexed.
import { afterEach, describe, expect, it } from 'vitest';
import type { DocumentInfo, IndexProgress } from './documents';
import { setLanguage } from './i18n/index.svelte';
import { formatBytes } from './models';
import { ESTIMATE_AFTER_MS, TimeLeft, fileStatus, passagesWords, timeLeftWords } from './indexing';

function doc(more: Partial<DocumentInfo> = {}): DocumentInfo {
  return { id: 1, name: 'manual.pdf', format: 'pdf', title: null, size: 263_000, passages: 217, waiting: 0, error: null, indexing: false, ...more };
}

function embedding(done: number, total = 100): IndexProgress {
  return { document_name: 'manual.pdf', stage: 'embedding', done, total, scanned_pages: null };
}

afterEach(() => setLanguage('en'));

describe('review #10 (S3): a rough time left', () => {
  it('says nothing in the first seconds, then the rate so far: 10 of 100 passages in 6 s leaves about 1 min', () => {
    const left = new TimeLeft();
    expect(left.update(embedding(0), 0)).toBeNull();
    expect(left.update(embedding(5), ESTIMATE_AFTER_MS - 1)).toBeNull();
    expect(left.update(embedding(10), 6_000)).toBeCloseTo(54, 5);
    expect(timeLeftWords(left.seconds('manual.pdf')!)).toBe('about 1 min left');
  });

  it('does not jump when one batch is slow: the estimate is smoothed', () => {
    const left = new TimeLeft();
    left.update(embedding(0), 0);
    const steady = left.update(embedding(20), 10_000)!; // 2 passages a second: 40 s left
    expect(steady).toBeCloseTo(40, 5);
    // A slow batch: the raw rate falls to 1.5 a second (≈ 46.7 s left); the estimate moves a little.
    const after = left.update(embedding(30), 20_000)!;
    expect(after).toBeGreaterThan(40);
    expect(after).toBeLessThan(46.7);
    expect(timeLeftWords(after)).toBe('less than a minute left');
  });

  it('starts again on a new stage, a new total or a step back', () => {
    const left = new TimeLeft();
    left.update(embedding(0), 0);
    expect(left.update(embedding(50), 10_000)).not.toBeNull();
    expect(left.update(embedding(0, 300), 11_000)).toBeNull();
    expect(left.update({ ...embedding(1, 300), stage: 'reading' }, 12_000)).toBeNull();
    left.forget('manual.pdf');
    expect(left.seconds('manual.pdf')).toBeNull();
  });

  it('counts scanned pages while OCR reads them', () => {
    const left = new TimeLeft();
    const page = (done: number): IndexProgress => ({ document_name: 'scan.pdf', stage: 'reading', done: 0, total: 1, scanned_pages: { done, total: 20 } });
    left.update(page(0), 0);
    expect(left.update(page(4), 8_000)).toBeCloseTo(32, 5);
  });

  it('rounds to friendly steps', () => {
    expect(timeLeftWords(3)).toBe('a few seconds left');
    expect(timeLeftWords(30)).toBe('less than a minute left');
    expect(timeLeftWords(80)).toBe('about 1 min left');
    expect(timeLeftWords(200)).toBe('about 3 min left');
    expect(timeLeftWords(3 * 3600)).toBe('about 3 hours left');
  });
});

describe('review #10 (S3): what a row says', () => {
  it('a file stopped by Cancel says how many passages are not indexed yet', () => {
    expect(fileStatus(doc({ waiting: 185 }), undefined, null)).toBe(`${formatBytes(263_000)} · 217 passages, 185 not indexed yet`);
    expect(fileStatus(doc(), undefined, null)).toBe(`${formatBytes(263_000)} · 217 passages`);
    expect(passagesWords(doc({ waiting: 185 }))).toBe('217 passages, 185 not indexed yet');
    expect(passagesWords(doc())).toBe('217 passages');
    expect(passagesWords(doc({ passages: 0 }))).toBe('');
  });

  it('"Starting…" until the first progress, and while no passage is embedded yet, instead of 0%', () => {
    expect(fileStatus(doc({ indexing: true, passages: 0 }), undefined, null)).toBe('Starting…');
    expect(fileStatus(doc(), embedding(0), null)).toBe('Starting…');
    expect(fileStatus(doc(), embedding(40), null)).toBe('Indexing… 40%');
    expect(fileStatus(doc(), embedding(40), 30)).toBe('Indexing… 40% · less than a minute left');
  });

  it('is said in the five languages', () => {
    const words: Record<string, [string, string, string]> = {
      de: ['Wird gestartet…', 'noch etwa 3 Min.', '217 Abschnitte, 185 noch nicht indexiert'],
      es: ['Empezando…', 'quedan 3 min aprox.', '217 pasajes, 185 aún sin indexar'],
      fr: ['Démarrage…', 'environ 3 min restantes', '217 extraits, 185 pas encore indexés'],
      zh: ['正在开始…', '大约还剩 3 分钟', '217 个段落，其中 185 个尚未索引'],
    };
    for (const [code, [starting, minutes, waiting]] of Object.entries(words)) {
      setLanguage(code);
      expect(fileStatus(doc(), embedding(0), null)).toBe(starting);
      expect(timeLeftWords(180)).toBe(minutes);
      expect(passagesWords(doc({ waiting: 185 }))).toBe(waiting);
    }
  });
});
