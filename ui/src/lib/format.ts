// Small formatting helpers for numbers the user sees, written for the language in use (Intl, and
// the catalog's words around them).
import { locale, t } from './i18n/index.svelte';
import type { MessageKey } from './i18n/en';

/** `value` with exactly `digits` decimals, for the language ("12.3", "12,3"). */
export function formatNumber(value: number, digits = 0): string {
  return new Intl.NumberFormat(locale(), { minimumFractionDigits: digits, maximumFractionDigits: digits }).format(value);
}

/** "12.3 tok/s", or an em dash when there is nothing to show yet. */
export function formatRate(tokensPerSecond: number | null | undefined): string {
  if (tokensPerSecond == null || !Number.isFinite(tokensPerSecond)) return '—';
  return t('format.rate', { rate: formatNumber(tokensPerSecond, tokensPerSecond >= 100 ? 0 : 1) });
}

/** Seconds as "850 ms" or "1.24 s". */
export function formatSeconds(secs: number | null | undefined): string {
  if (secs == null || !Number.isFinite(secs)) return '—';
  if (secs < 1) return `${formatNumber(Math.round(secs * 1000))} ms`;
  return `${formatNumber(secs, 2)} s`;
}

/** 1234567 -> "1.2 M", 2_000 -> "2.0 k" (parameter counts). */
export function formatCount(n: number): string {
  if (n >= 1e9) return `${formatNumber(n / 1e9, 1)} B`;
  if (n >= 1e6) return `${formatNumber(n / 1e6, 1)} M`;
  if (n >= 1e3) return `${formatNumber(n / 1e3, 1)} k`;
  return formatNumber(n);
}

/** How full the context is, and what to tell the user about it. */
export function contextWarning(used: number, limit: number): { percent: number; level: 'ok' | 'warn' | 'full'; message: string | null } {
  if (limit <= 0) return { percent: 0, level: 'ok', message: null };
  const percent = Math.min(100, Math.round((used / limit) * 100));
  if (percent >= 95) {
    return {
      percent,
      level: 'full',
      message: t('format.contextFull'),
    };
  }
  if (percent >= 75) {
    return {
      percent,
      level: 'warn',
      message: t('format.contextWarn', { percent }),
    };
  }
  return { percent, level: 'ok', message: null };
}

/** "3 min ago" style age of a unix timestamp (seconds). */
export function relativeTime(unixSecs: number, nowSecs: number): string {
  const d = Math.max(0, nowSecs - unixSecs);
  if (d < 60) return t('format.justNow');
  if (d < 3600) return t('format.minutesAgo', { count: Math.floor(d / 60) });
  if (d < 86400) return t('format.hoursAgo', { count: Math.floor(d / 3600) });
  return t('format.daysAgo', { count: Math.floor(d / 86400) });
}

/** Where an answer was computed, in words: "this computer's processor", "this computer's NPU"
 *  or "a remote server (gpu-box:8000)". */
export function answerPlace(r: { backend_kind: string; device: string }): string {
  if (r.backend_kind === 'remote') return t('receipt.remote', { device: r.device });
  return r.backend_kind === 'npu' ? t('receipt.npu') : t('receipt.cpu');
}

/** The small grey line under an answer: speed, time to first word, energy (in watt-hours) when
 *  measured; the receipt has the joules beside them. A remote server's answer has no energy
 *  here: this computer's readings are not its cost. */
export function answerLine(r: {
  tokens_per_second: number;
  ttft_secs: number;
  backend_kind?: string;
  energy?: { total_joules: number | null } | null;
}): string {
  const parts = [formatRate(r.tokens_per_second), t('format.toFirstWord', { time: formatSeconds(r.ttft_secs) })];
  const joules = r.backend_kind === 'remote' ? null : r.energy?.total_joules;
  if (joules != null && Number.isFinite(joules)) parts.push(formatWattHours(joules));
  return parts.join(' · ');
}

/** The heading a conversation is listed under, by its last change (a catalog key). */
export function dayGroup(unixSecs: number, now: Date): 'sidebar.today' | 'sidebar.yesterday' | 'sidebar.previous7' | 'sidebar.older' {
  const startOfToday = new Date(now.getFullYear(), now.getMonth(), now.getDate()).getTime() / 1000;
  if (unixSecs >= startOfToday) return 'sidebar.today';
  if (unixSecs >= startOfToday - 86400) return 'sidebar.yesterday';
  if (unixSecs >= startOfToday - 7 * 86400) return 'sidebar.previous7';
  return 'sidebar.older';
}

/** The quiet line beside "Writing the answer": the live speed and, when a sensor measures it,
 *  the power now, and on battery how long a full one lasts at this rate ("about 4 h 00 min").
 *  Empty until the first numbers come. */
export function liveLine(tokensPerSecond: number | null | undefined, watts: number | null, batteryLasts: string | null = null): string {
  const parts: string[] = [];
  if (tokensPerSecond != null && Number.isFinite(tokensPerSecond)) parts.push(formatRate(tokensPerSecond));
  if (watts != null && Number.isFinite(watts)) parts.push(`${formatNumber(watts, watts >= 100 ? 0 : 1)} W`);
  if (batteryLasts) parts.push(t('format.batteryLasts', { time: batteryLasts }));
  return parts.join(' · ');
}

/** What to say while the model reads the prompt on a backend that does not tell how far it is
 *  (the NPU, a remote server): how much it reads and for how long already, no share done. */
export function readingWait(promptTokens: number, elapsedSecs: number): { text: string; percent: null } {
  return { text: t('format.reading', { tokens: promptTokens, secs: Math.max(0, Math.floor(elapsedSecs)) }), percent: null };
}

/** Energy as people know it: "4.6 mWh", "0.12 Wh", "1.3 Wh". */
export function formatWattHours(joules: number | null | undefined): string {
  if (joules == null || !Number.isFinite(joules)) return '—';
  const wh = joules / 3600;
  if (wh < 0.1) return `${formatNumber(wh * 1000, wh * 1000 >= 10 ? 0 : 1)} mWh`;
  return `${formatNumber(wh, wh >= 10 ? 0 : 2)} Wh`;
}

/** `value` percent with `digits` decimals, for the language ("0.20%", "0,20 %"). */
export function formatPercent(value: number, digits: number): string {
  return new Intl.NumberFormat(locale(), { style: 'percent', minimumFractionDigits: digits, maximumFractionDigits: digits }).format(value / 100);
}

/** A share of the battery, "0.02%", "less than 0.01%". */
export function formatBatteryShare(joules: number, capacityWh: number): string {
  const share = (joules / 3600 / capacityWh) * 100;
  if (share < 0.01) return t('format.lessThanShare', { share: formatPercent(0.01, 2) });
  return formatPercent(share, share < 1 ? 2 : 1);
}

/** How long a full battery lasts at `watts`: "about 3 h 20 min", "about 45 minutes". */
export function batteryLife(capacityWh: number, watts: number): string | null {
  if (!(capacityWh > 0) || !(watts > 0)) return null;
  const minutes = Math.round((capacityWh / watts) * 60);
  if (minutes < 90) return t('format.aboutMinutes', { count: minutes });
  return t('format.aboutHours', { hours: Math.floor(minutes / 60), minutes: String(minutes % 60).padStart(2, '0') });
}

/** Why an answer ended, as the receipt says it: the backend's words for its stop reasons
 *  (hearth_chat's `AnswerStop::words`) in the language in use; anything else as it came. */
export function stopReason(words: string): string {
  const keys: Record<string, MessageKey> = {
    'end of turn': 'stop.endOfTurn',
    'length limit': 'stop.lengthLimit',
    stopped: 'stop.stopped',
    'context full': 'stop.contextFull',
    'stop string': 'stop.stopString',
  };
  return words in keys ? t(keys[words]) : words;
}
