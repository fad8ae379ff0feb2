import { describe, expect, it } from 'vitest';
import {
  answerLine,
  batteryLife,
  contextWarning,
  dayGroup,
  formatBatteryShare,
  formatRate,
  formatSeconds,
  formatWattHours,
  liveLine,
  readingWait,
} from './format';

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
    expect(answerLine({ tokens_per_second: 12.34, ttft_secs: 0.3, energy: { total_joules: 16.5 } })).toBe('12.3 tok/s · 300 ms to first word · 4.6 mWh');
    expect(answerLine({ tokens_per_second: 5, ttft_secs: 1.5, energy: { total_joules: null } })).toBe('5.0 tok/s · 1.50 s to first word');
  });

  it("review #17 (S3): a remote server's answer shows no energy of this computer under it", () => {
    const remote = { tokens_per_second: 12.34, ttft_secs: 0.3, backend_kind: 'remote', energy: { total_joules: 16.5 } };
    expect(answerLine(remote)).toBe('12.3 tok/s · 300 ms to first word');
  });

  it('groups by day in local time', () => {
    const now = new Date(2026, 11, 1, 12, 0, 0);
    const at = (d: Date) => d.getTime() / 1000;
    expect(dayGroup(at(new Date(2026, 11, 1, 0, 5)), now)).toBe('sidebar.today');
    expect(dayGroup(at(new Date(2026, 10, 30, 23, 0)), now)).toBe('sidebar.yesterday');
    expect(dayGroup(at(new Date(2026, 10, 26)), now)).toBe('sidebar.previous7');
    expect(dayGroup(at(new Date(2026, 9, 1)), now)).toBe('sidebar.older');
  });
});

describe('live numbers and energy in units people know', () => {
  it('the live line has the speed, and the power only when a sensor measured it', () => {
    expect(liveLine(null, null)).toBe('');
    expect(liveLine(42.44, null)).toBe('42.4 tok/s');
    expect(liveLine(42.44, 13.26)).toBe('42.4 tok/s · 13.3 W');
    expect(liveLine(null, 9)).toBe('9.0 W');
    expect(liveLine(40, 15, 'about 4 h 00 min')).toBe('40.0 tok/s · 15.0 W · a full battery lasts about 4 h 00 min at this rate');
  });

  it('reading a prompt on a backend that does not say how far it is: tokens and seconds, no share', () => {
    expect(readingWait(2300, 3.4)).toEqual({ text: 'Reading your message and the conversation (2,300 tokens)… 3 s', percent: null });
    expect(readingWait(2300, 0).text).toContain('… 0 s');
  });

  it('watt-hours, share of the battery and battery life', () => {
    expect(formatWattHours(16.5)).toBe('4.6 mWh');
    expect(formatWattHours(90)).toBe('25 mWh');
    expect(formatWattHours(3600)).toBe('1.00 Wh');
    expect(formatWattHours(null)).toBe('—');
    expect(formatBatteryShare(16.5, 60)).toBe('less than 0.01%');
    expect(formatBatteryShare(360, 50)).toBe('0.20%');
    expect(batteryLife(60, 15)).toBe('about 4 h 00 min');
    expect(batteryLife(10, 15)).toBe('about 40 minutes');
    expect(batteryLife(0, 15)).toBeNull();
  });
});
