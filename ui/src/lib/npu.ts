// The NPU area's shapes (generated from crates/npu's types into bindings.ts) and small pure helpers for
// the status area, the power chart and the receipt's energy rows.

export type {
  CheckStatus,
  EnergyReport,
  Meter,
  MeterEnergy,
  Metric,
  NpuCheck,
  NpuDiagnosis,
  PowerSample,
} from './bindings';
import type { Metric, Meter, NpuCheck, NpuDiagnosis, PowerSample } from './bindings';
import { hasMessage, t } from './i18n/index.svelte';
import type { MessageKey } from './i18n/en';
import { formatNumber } from './format';

/** The value of a metric, or null. */
export function valueOf(m: Metric<number> | null | undefined): number | null {
  return m && 'value' in m && Number.isFinite(m.value) ? m.value : null;
}

/** Where a value came from, or why it is missing: for tooltips and screen readers. */
export function explain(m: Metric<number> | null | undefined): string {
  if (!m) return t('metric.notRead');
  return 'value' in m ? t('metric.from', { source: m.source }) : t('metric.unavailable', { reason: m.unavailable });
}

/** "14.8 W" (one decimal below 100), or an em dash. */
export function formatWatts(watts: number | null | undefined): string {
  if (watts == null || !Number.isFinite(watts)) return '—';
  return `${formatNumber(watts, watts >= 100 ? 0 : 1)} W`;
}

/** "850 mJ", "12.4 J", "1.3 kJ", or an em dash. */
export function formatJoules(joules: number | null | undefined): string {
  if (joules == null || !Number.isFinite(joules)) return '—';
  if (joules < 1) return `${formatNumber(Math.round(joules * 1000))} mJ`;
  if (joules >= 1000) return `${formatNumber(joules / 1000, 1)} kJ`;
  return `${formatNumber(joules, joules >= 100 ? 0 : 1)} J`;
}

/** The power figure to show first: the whole package, else the battery draw, else the NPU. */
export function headlinePower(sample: PowerSample | null): { label: MessageKey; metric: Metric<number> | null } {
  if (!sample) return { label: 'power.label', metric: null };
  if (valueOf(sample.package_watts) != null) return { label: 'power.label', metric: sample.package_watts };
  if (valueOf(sample.battery_watts) != null) return { label: 'power.battery', metric: sample.battery_watts };
  if (valueOf(sample.npu_watts) != null) return { label: 'power.npu', metric: sample.npu_watts };
  return { label: 'power.label', metric: sample.package_watts };
}

/** Each meter's name, as a catalog key. */
export const METER_LABEL: Record<Meter, MessageKey> = {
  package: 'meter.package',
  battery: 'meter.battery',
  npu: 'meter.npu',
};

/** One point of the live chart. */
export interface HistoryPoint {
  /** Milliseconds (any clock, increasing). */
  at: number;
  watts: number | null;
  tokensPerSecond: number | null;
}

/** Keeps the points of the last `windowMs` (one minute by default), oldest first. */
export function pushPoint(points: HistoryPoint[], point: HistoryPoint, windowMs = 60_000): HistoryPoint[] {
  const next = [...points, point];
  const from = point.at - windowMs;
  return next.filter((p) => p.at >= from);
}

/** SVG polyline points for one series over the window, scaled to [0, max]; gaps break nothing
 *  (missing values are skipped). `max` is the series' largest value (at least `floor`). */
export function polyline(
  points: HistoryPoint[],
  pick: (p: HistoryPoint) => number | null,
  width: number,
  height: number,
  windowMs = 60_000,
  floor = 1,
): { points: string; max: number } {
  const values = points.map(pick).filter((v): v is number => v != null && Number.isFinite(v));
  const max = Math.max(floor, ...values);
  if (points.length === 0) return { points: '', max };
  const end = points[points.length - 1].at;
  const coords: string[] = [];
  for (const p of points) {
    const v = pick(p);
    if (v == null || !Number.isFinite(v)) continue;
    const x = width - ((end - p.at) / windowMs) * width;
    const y = height - (Math.max(0, v) / max) * height;
    coords.push(`${x.toFixed(1)},${y.toFixed(1)}`);
  }
  return { points: coords.join(' '), max };
}

/** What the app says about the NPU in one line, and whether there is something to fix. */
export interface NpuState {
  kind: 'checking' | 'none' | 'ready' | 'needs-work' | 'unknown';
  sentence: string;
}

/** The NPU's state in plain words. No NPU at all is a normal state, said neutrally. `modelReason`
 *  is why the models here cannot run on the NPU (from their availability), when none can: an
 *  NPU that is ready without the program that runs models on it is not "ready" to the user. */
export function npuState(diagnosis: NpuDiagnosis | null, error: string | null = null, modelReason: string | null = null): NpuState {
  if (error) return { kind: 'unknown', sentence: t('npu.unknown') };
  if (!diagnosis) return { kind: 'checking', sentence: t('npu.checkingNpu') };
  if (diagnosis.detection.state === 'not_found') {
    return { kind: 'none', sentence: t('npu.none') };
  }
  if (diagnosis.ready && modelReason) {
    return {
      kind: 'needs-work',
      sentence: /FastFlowLM is not installed/i.test(modelReason)
        ? t('npu.readyNoFlm')
        : t('npu.readyNoModels'),
    };
  }
  if (diagnosis.ready) return { kind: 'ready', sentence: t('npu.ready') };
  return {
    kind: 'needs-work',
    sentence: t('npu.needsWork'),
  };
}

/** The first step that blocks the NPU (a problem before a warning); later steps may not matter
 *  until it is done, so only this one is shown. */
export function firstBlockingStep(diagnosis: NpuDiagnosis | null): NpuCheck | null {
  const checks = diagnosis?.checks ?? [];
  return checks.find((c) => c.status === 'problem') ?? checks.find((c) => c.status === 'warning') ?? null;
}

/** A finding in the language in use: its code's message (`npu.check.<code>`, filled with its
 *  params), or the doctor's English sentence when the catalog lacks the code. */
export function checkSummary(check: NpuCheck): string {
  return fromCatalog(`npu.check.${check.code}`, check.params) ?? check.summary;
}

/** What to do about a finding, in the language in use (`npu.fix.<fix_code>`), or the doctor's
 *  English text; null when nothing is needed. */
export function checkFix(check: NpuCheck): string | null {
  if (check.fix === null) return null;
  return (check.fix_code && fromCatalog(`npu.fix.${check.fix_code}`, check.params)) || check.fix;
}

function fromCatalog(key: string, params: Partial<Record<string, string>>): string | null {
  if (!hasMessage(key)) return null;
  return t(key, Object.fromEntries(Object.entries(params).filter((e): e is [string, string] => e[1] !== undefined)));
}

/** A fix text split into prose and commands (commands are marked with backticks). Each command
 *  goes on a line of its own, so the prose around it is made to read without it: a bracket
 *  opened before it becomes a dash, and the bracket or comma after it goes (the next words
 *  start a sentence); what is left without a letter or digit is dropped. */
export function fixPieces(fix: string): { text: string; command: boolean }[] {
  const split = fix.split('`');
  return split
    .map((text, i) => {
      const command = i % 2 === 1;
      if (command) return { text, command };
      if (i + 1 < split.length) text = text.replace(/\s*[(（]([^()（）]*)$/, (_, inside: string) => (inside.trim() ? ` — ${inside}` : ' '));
      if (i > 0) {
        const rest = text.replace(/^\s*[)）]?\s*[,，;；]?\s*/, '');
        if (rest !== text) text = rest.charAt(0).toLocaleUpperCase() + rest.slice(1);
      }
      return { text, command };
    })
    .filter((p) => (p.command ? p.text.trim() !== '' : /[\p{L}\p{N}]/u.test(p.text)));
}

/** The compact status item: where answers are computed, and the power while on the NPU. */
export function runningLabel(
  model: { backend_kind: 'cpu' | 'npu' | 'remote'; device: string } | null,
  loading: { backend: 'cpu' | 'npu' | 'remote' } | null,
  npuWatts: number | null,
): string {
  if (loading) return loading.backend === 'npu' ? t('chat.loadingNpu') : t('chat.loading');
  if (!model) return t('picker.none');
  if (model.backend_kind === 'remote') return t('npu.answersFrom', { host: model.device });
  if (model.backend_kind === 'npu') return npuWatts != null ? `${t('npu.runningNpu')} · ${formatWatts(npuWatts)}` : t('npu.runningNpu');
  return t('npu.runningCpu');
}

/** Why no model here can run on the NPU: the first reason their availability gives, when none
 *  is usable there (null when one is, or when none was judged for the NPU). */
export function npuModelReason(models: { builtin?: unknown; backends?: { kind: string; usable: boolean; reason: string | null }[] }[]): string | null {
  const npu = models.flatMap((m) => (m.backends ?? []).filter((b) => b.kind === 'npu'));
  if (npu.length === 0 || npu.some((b) => b.usable)) return null;
  return npu.find((b) => b.reason)?.reason ?? null;
}
