import { describe, expect, it } from 'vitest';
import { contextWarning, formatRate, formatSeconds } from './format';

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
