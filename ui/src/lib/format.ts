// Small formatting helpers for numbers the user sees.

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

/** The small grey line under an answer: speed, time to first word, energy (in watt-hours) when
 *  measured; the receipt has the joules beside them. */
export function answerLine(r: {
  tokens_per_second: number;
  ttft_secs: number;
  energy?: { total_joules: number | null } | null;
}): string {
  const parts = [formatRate(r.tokens_per_second), `${formatSeconds(r.ttft_secs)} to first word`];
  const joules = r.energy?.total_joules;
  if (joules != null && Number.isFinite(joules)) parts.push(formatWattHours(joules));
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

/** The quiet line beside "Writing the answer": the live speed and, when a sensor measures it,
 *  the power now, and on battery how long a full one lasts at this rate ("about 4 h 00 min").
 *  Empty until the first numbers come. */
export function liveLine(tokensPerSecond: number | null | undefined, watts: number | null, batteryLasts: string | null = null): string {
  const parts: string[] = [];
  if (tokensPerSecond != null && Number.isFinite(tokensPerSecond)) parts.push(formatRate(tokensPerSecond));
  if (watts != null && Number.isFinite(watts)) parts.push(`${watts >= 100 ? watts.toFixed(0) : watts.toFixed(1)} W`);
  if (batteryLasts) parts.push(`a full battery lasts ${batteryLasts} at this rate`);
  return parts.join(' · ');
}

/** How fast this model read earlier prompts, tokens per second, from receipts (the backend's own
 *  prefill rate when it reports one, else prompt tokens over the time to the first word). */
export function readingRate(
  receipts: { prompt_tokens: number; ttft_secs: number; backend_timings?: { prefill_tokens_per_s: number | null } | null }[],
): number | null {
  for (let i = receipts.length - 1; i >= 0; i--) {
    const r = receipts[i];
    const own = r.backend_timings?.prefill_tokens_per_s;
    if (own != null && Number.isFinite(own) && own > 0) return own;
    if (r.prompt_tokens >= 32 && r.ttft_secs > 0) return r.prompt_tokens / r.ttft_secs;
  }
  return null;
}

/** What to say while the model reads the prompt: how much it reads, for how long already, and
 *  (when an earlier answer measured its reading speed) about how much is done. */
export function readingProgress(
  promptTokens: number,
  elapsedSecs: number,
  rate: number | null,
): { text: string; percent: number | null } {
  const tokens = promptTokens.toLocaleString('en');
  const secs = Math.max(0, Math.floor(elapsedSecs));
  if (rate == null || rate <= 0 || promptTokens <= 0) {
    return { text: `Reading your message and the conversation (${tokens} tokens)… ${secs} s`, percent: null };
  }
  const total = promptTokens / rate;
  const percent = Math.min(99, Math.floor((elapsedSecs / total) * 100));
  const left = Math.max(0, Math.ceil(total - elapsedSecs));
  const rest = left > 0 ? `, about ${left} s left` : ', almost done';
  return { text: `Reading your message and the conversation (${tokens} tokens): about ${percent}%${rest}`, percent };
}

/** Energy as people know it: "4.6 mWh", "0.12 Wh", "1.3 Wh". */
export function formatWattHours(joules: number | null | undefined): string {
  if (joules == null || !Number.isFinite(joules)) return '—';
  const wh = joules / 3600;
  if (wh < 0.1) return `${(wh * 1000).toFixed(wh * 1000 >= 10 ? 0 : 1)} mWh`;
  return `${wh.toFixed(wh >= 10 ? 0 : 2)} Wh`;
}

/** A share of the battery, "0.02%", "less than 0.01%". */
export function formatBatteryShare(joules: number, capacityWh: number): string {
  const percent = (joules / 3600 / capacityWh) * 100;
  if (percent < 0.01) return 'less than 0.01%';
  return `${percent < 1 ? percent.toFixed(2) : percent.toFixed(1)}%`;
}

/** How long a full battery lasts at `watts`: "about 3 h 20 min", "about 45 minutes". */
export function batteryLife(capacityWh: number, watts: number): string | null {
  if (!(capacityWh > 0) || !(watts > 0)) return null;
  const minutes = Math.round((capacityWh / watts) * 60);
  if (minutes < 90) return `about ${minutes} minutes`;
  return `about ${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}
