import { describe, expect, it } from 'vitest';
import { answerLine, contextWarning, dayGroup, formatRate, formatSeconds } from './format';

describe('format', () => {
  it('formats speed and time', () => {
    expect(formatRate(null)).toBe('—');
    expect(formatRate(12.345)).toBe('12.3 tok/s');
    expect(formatRate(250.4)).toBe('250 tok/s');
    expect(formatSeconds(0.25)).toBe('250 ms');
    expect(formatSeconds(1.5)).toBe('1.50 s');
  });

  it('warns before the context fills, then says it is full', () => {
    expect(contextWarning(100, 4096).level).toBe('ok');
    expect(contextWarning(3200, 4096).level).toBe('warn');
    expect(contextWarning(3200, 4096).message).toContain('78%');
    expect(contextWarning(4000, 4096).level).toBe('full');
    expect(contextWarning(5, 0).level).toBe('ok');
  });
});

describe('answerLine and dayGroup', () => {
  it('shows speed, time to first word and energy when measured', () => {
    expect(answerLine({ tokens_per_second: 12.34, ttft_secs: 0.3 })).toBe('12.3 tok/s · 300 ms to first word');
    expect(answerLine({ tokens_per_second: 12.34, ttft_secs: 0.3, energy: { total_joules: 16.5 } })).toBe('12.3 tok/s · 300 ms to first word · 16.5 J');
    expect(answerLine({ tokens_per_second: 5, ttft_secs: 1.5, energy: { total_joules: null } })).toBe('5.0 tok/s · 1.50 s to first word');
  });

  it('groups by day in local time', () => {
    const now = new Date(2026, 11, 1, 12, 0, 0);
    const at = (d: Date) => d.getTime() / 1000;
    expect(dayGroup(at(new Date(2026, 11, 1, 0, 5)), now)).toBe('Today');
    expect(dayGroup(at(new Date(2026, 10, 30, 23, 0)), now)).toBe('Yesterday');
    expect(dayGroup(at(new Date(2026, 10, 26)), now)).toBe('Previous 7 days');
    expect(dayGroup(at(new Date(2026, 9, 1)), now)).toBe('Older');
  });
});
