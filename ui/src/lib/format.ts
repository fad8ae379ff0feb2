// Small formatting helpers for numbers the user sees.
import { formatJoules } from './npu';

/** "12.3 tok/s", or an em dash when there is nothing to show yet. */
export function formatRate(tokensPerSecond: number | null | undefined): string {
  if (tokensPerSecond == null || !Number.isFinite(tokensPerSecond)) return '—';
  return `${tokensPerSecond >= 100 ? tokensPerSecond.toFixed(0) : tokensPerSecond.toFixed(1)} tok/s`;
}

/** Seconds as "850 ms" or "1.24 s". */
export function formatSeconds(secs: number | null | undefined): string {
  if (secs == null || !Number.isFinite(secs)) return '—';
  if (secs < 1) return `${Math.round(secs * 1000)} ms`;
  return `${secs.toFixed(2)} s`;
}

/** 1234567 -> "1.2 M", 2_000 -> "2.0 k" (parameter counts). */
export function formatCount(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)} B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} k`;
  return String(n);
}

/** How full the context is, and what to tell the user about it. */
export function contextWarning(used: number, limit: number): { percent: number; level: 'ok' | 'warn' | 'full'; message: string | null } {
  if (limit <= 0) return { percent: 0, level: 'ok', message: null };
  const percent = Math.min(100, Math.round((used / limit) * 100));
  if (percent >= 95) {
    return {
      percent,
      level: 'full',
      message: 'The model\'s memory for this conversation is full. From now on the oldest messages are left out of what it sees. Start a new conversation to begin fresh.',
    };
  }
  if (percent >= 75) {
    return {
      percent,
      level: 'warn',
      message: `This conversation uses ${percent}% of what the model can remember. When it fills, the oldest messages will be left out.`,
    };
  }
  return { percent, level: 'ok', message: null };
}

/** "3 min ago" style age of a unix timestamp (seconds). */
export function relativeTime(unixSecs: number, nowSecs: number): string {
  const d = Math.max(0, nowSecs - unixSecs);
  if (d < 60) return 'just now';
  if (d < 3600) return `${Math.floor(d / 60)} min ago`;
  if (d < 86400) return `${Math.floor(d / 3600)} h ago`;
  return `${Math.floor(d / 86400)} d ago`;
}

/** The small grey line under an answer: speed, time to first word, energy when measured. */
export function answerLine(r: {
  tokens_per_second: number;
  ttft_secs: number;
  energy?: { total_joules: number | null } | null;
}): string {
  const parts = [formatRate(r.tokens_per_second), `${formatSeconds(r.ttft_secs)} to first word`];
  const joules = r.energy?.total_joules;
  if (joules != null && Number.isFinite(joules)) parts.push(formatJoules(joules));
  return parts.join(' · ');
}

/** The heading a conversation is listed under, by its last change. */
export function dayGroup(unixSecs: number, now: Date): 'Today' | 'Yesterday' | 'Previous 7 days' | 'Older' {
  const startOfToday = new Date(now.getFullYear(), now.getMonth(), now.getDate()).getTime() / 1000;
  if (unixSecs >= startOfToday) return 'Today';
  if (unixSecs >= startOfToday - 86400) return 'Yesterday';
  if (unixSecs >= startOfToday - 7 * 86400) return 'Previous 7 days';
  return 'Older';
}
