import { describe, expect, it } from 'vitest';
import { formatBytes, formatEta, percentDone, phaseLabel, type PullProgress } from './models';

describe('models helpers', () => {
  it('formats sizes like a disk does', () => {
    expect(formatBytes(999)).toBe('999 B');
    expect(formatBytes(1_700_000_000)).toBe('1.70 GB');
    expect(formatBytes(52_400_000)).toBe('52.4 MB');
    expect(formatBytes(-1)).toBe('—');
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
      name: 'm', phase: 'downloading', file: 'model.q4nx', filesDone: 0, fileCount: 4,
      doneBytes: 1_000_000_000, totalBytes: 2_000_000_000, bytesPerSec: 10_000_000, etaSecs: 100, message: null,
    };
    expect(phaseLabel(p)).toBe('1.00 GB of 2.00 GB · 10.0 MB/s · 1 min 40 s left');
    expect(phaseLabel({ ...p, phase: 'retrying', message: 'connection dropped' })).toBe('connection dropped');
    expect(phaseLabel({ ...p, phase: 'paused' })).toBe('Paused at 1.00 GB of 2.00 GB');
  });
});
