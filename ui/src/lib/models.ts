// The Models area: types of what the backend's model commands return (generated into
// bindings.ts from the hub's Rust types), and small helpers for
// showing them. The calls themselves live in api.ts.
import { t } from './i18n/index.svelte';
import { formatNumber } from './format';

export type {
  Backend,
  BuiltinKind,
  CatalogEntry,
  CatalogItem,
  Fit,
  FoundFormat,
  FoundModel,
  FoundSource,
  InstalledModel,
  Machine,
  ModelsOverview,
  PartialDownload,
  PullPhase,
  PullEnd,
  PullProgress,
  PullResult,
  Removed,
  WeightFormat,
} from './bindings';
import type { BuiltinKind, CatalogEntry, CatalogItem, FoundModel, FoundSource, InstalledModel, Machine, PullProgress } from './bindings';

/** Bytes as people read disk sizes: "1.70 GB", "52.4 MB" (powers of 1000). */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  if (unit === 0) return `${formatNumber(bytes)} B`;
  return `${formatNumber(value, value < 10 ? 2 : 1)} ${units[unit]}`;
}

/** Time left as "45 s", "3 min 05 s", "1 h 12 min"; an em dash when unknown. */
export function formatEta(secs: number | null | undefined): string {
  if (secs == null || !Number.isFinite(secs)) return '—';
  const s = Math.round(secs);
  if (s < 60) return `${formatNumber(s)} s`;
  if (s < 3600) return `${formatNumber(Math.floor(s / 60))} min ${String(s % 60).padStart(2, '0')} s`;
  return `${formatNumber(Math.floor(s / 3600))} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

/** Percent done, 0..100. */
export function percentDone(done: number, total: number): number {
  if (total <= 0) return 0;
  return Math.min(100, Math.floor((done / total) * 100));
}

/** What a download is doing, in plain words. */
export function phaseLabel(p: PullProgress): string {
  switch (p.phase) {
    case 'resolving':
      return t('pull.resolving');
    case 'downloading':
      return t('pull.downloading', { done: formatBytes(p.done_bytes), total: formatBytes(p.total_bytes), speed: formatBytes(p.bytes_per_sec), left: formatEta(p.eta_secs) });
    case 'retrying':
      return p.message ?? t('pull.retrying');
    case 'validating':
      return t('pull.validating');
    case 'converting':
      return t('pull.converting', { percent: percentDone(p.done_bytes, p.total_bytes) });
    case 'registering':
      return t('pull.registering');
    case 'done':
      return t('catalog.installed');
    case 'paused':
      return t('catalog.pausedAt', { done: formatBytes(p.done_bytes), total: formatBytes(p.total_bytes) });
    case 'cancelled':
      return t('pull.cancelled');
  }
}

/** The one catalog model to recommend here: the smallest that fits, preferring ones the NPU
 *  runs when this computer has one. Null when nothing fits. */
export function recommendedId(catalog: CatalogItem[], hasNpu: boolean): string | null {
  // Only a model to chat with is recommended (an embedding model helps search files).
  const fitting = catalog.filter((c) => c.entry.kind === 'chat' && c.fit.memory && c.fit.disk);
  const pool = hasNpu && fitting.some((c) => c.entry.backends.includes('npu'))
    ? fitting.filter((c) => c.entry.backends.includes('npu'))
    : fitting;
  // Ready-to-run Q4NX before a model that first needs converting.
  const ready = pool.some((c) => c.entry.format === 'q4nx') ? pool.filter((c) => c.entry.format === 'q4nx') : pool;
  const best = [...ready].sort((a, b) => a.entry.download_bytes - b.entry.download_bytes)[0];
  return best?.entry.id ?? null;
}

/** One plain sentence about a catalog model, from its size and what it can do. */
export function plainSummary(entry: CatalogEntry): string {
  const gb = entry.memory_bytes / 1e9;
  const size = gb < 2.5 ? t('summary.small') : gb < 6 ? t('summary.medium') : t('summary.large');
  const think = entry.think ? t('summary.think') : '';
  const convert = entry.format === 'safetensors' ? t('summary.convert') : '';
  return [size, think, convert].filter(Boolean).join(' ');
}

/** Whether a catalog model fits this computer, in plain words (the hub's Fit, told again in the
 *  language in use from the numbers it judged). */
export function fitHint(item: CatalogItem, machine: Machine): string {
  const need = { memory: formatBytes(item.entry.memory_bytes), installed: formatBytes(machine.total_memory), download: formatBytes(item.entry.download_bytes), free: formatBytes(machine.free_disk) };
  if (!item.fit.memory) return t('fit.memory', need);
  if (!item.fit.disk) return t('fit.disk', need);
  return t('fit.fits', need);
}

/** Where a found model is, in plain words. */
export function foundSourceLabel(source: FoundSource): string {
  switch (source) {
    case 'ollama':
      return t('found.from', { source: 'Ollama' });
    case 'lmstudio':
      return t('found.from', { source: 'LM Studio' });
    case 'jan':
      return t('found.from', { source: 'Jan' });
    case 'huggingface':
      return t('found.fromHfCache');
  }
}

/** How the picker names the model that came with Hearth. */
export function builtinLabel(kind: BuiltinKind): string {
  return kind === 'starter' ? t('models.builtinStarter') : t('models.builtinDemo');
}

/** The installed model a found one was imported as (its source names the found path), or one
 *  already installed under the name the import would take. */
export function importedAs(found: FoundModel, installed: InstalledModel[]): InstalledModel | null {
  return (
    installed.find((m) => m.source === `import:${found.path}`) ??
    installed.find((m) => m.name === found.import_name) ??
    null
  );
}

/** A catalog model's name as shown: the "-NPU2" of NPU ports is left out on a computer
 *  without an NPU, where it only confuses (they run on the processor too). */
export function shownName(entry: CatalogEntry, hasNpu: boolean): string {
  return hasNpu ? entry.name : entry.name.replace(/-NPU\d*$/i, '');
}
