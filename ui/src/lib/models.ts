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
  ModelKind,
  ModelsOverview,
  PartialDownload,
  PullPhase,
  PullEnd,
  PullProgress,
  PullResult,
  Removed,
  WeightFormat,
} from './bindings';
import type { Availability, BackendKind, BuiltinKind, CatalogEntry, CatalogItem, FoundModel, FoundSource, InstalledModel, Machine, ModelKind, PullProgress } from './bindings';

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

/** The kinds the Models page groups the catalog by, in the order shown: models to chat with
 *  first, then the helpers that do not chat. */
export const MODEL_KINDS: readonly ModelKind[] = ['chat', 'embedding', 'reranking', 'speech'];

/** The catalog in groups by kind (in MODEL_KINDS' order), each keeping the order given; kinds
 *  with no model are left out. */
export function groupByKind(items: CatalogItem[]): { kind: ModelKind; items: CatalogItem[] }[] {
  return MODEL_KINDS.map((kind) => ({ kind, items: items.filter((i) => i.entry.kind === kind) })).filter((g) => g.items.length > 0);
}

/** A group's heading on the Models page. */
export function kindHeading(kind: ModelKind): string {
  return t(`kind.${kind}.heading` as const);
}

/** One plain sentence about a catalog model: what it is for. A model to chat with is told by
 *  its size and what it can do; a helper by its kind, saying that it does not chat. */
export function plainSummary(entry: CatalogEntry): string {
  if (entry.kind !== 'chat') {
    const convert = entry.format === 'safetensors' ? t('summary.convert') : '';
    return [t(`kind.${entry.kind}.purpose` as const), convert].filter(Boolean).join(t('summary.join'));
  }
  const gb = entry.memory_bytes / 1e9;
  const size = gb < 2.5 ? t('summary.small') : gb < 6 ? t('summary.medium') : t('summary.large');
  const think = entry.think ? t('summary.think') : '';
  const convert = entry.format === 'safetensors' ? t('summary.convert') : '';
  return [size, think, convert].filter(Boolean).join(t('summary.join'));
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

/** How the picker and Settings name the model that came with Hearth: short, so the header
 *  does not cut it at 800x600 (review #15). */
export function builtinName(kind: BuiltinKind): string {
  return kind === 'starter' ? t('models.builtinStarter') : t('models.builtinDemo');
}

/** Whether a model reads pictures on backend `kind`: that backend's own word (FastFlowLM's
 *  `vlm` mark on the NPU, said even before FastFlowLM is installed; the server's word or the
 *  user's switch for a remote model). Hearth's engine on the processor reads text only. */
export function seesOn(backends: Availability[] | null | undefined, kind: BackendKind): boolean {
  return (backends ?? []).some((b) => b.kind === kind && b.sees_pictures);
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
export function shownName(entry: CatalogEntry, hasNpu: boolean, catalog: CatalogEntry[] = []): string {
  // An NPU-only build keeps its "-NPU2": without an NPU it is not one this computer runs.
  if (hasNpu || !entry.backends?.includes('cpu')) return entry.name;
  const short = (e: CatalogEntry) => e.name.replace(/-NPU\d*$/i, '');
  const name = short(entry);
  // Two models that would read alike (an NPU build and the original) say which is which
  // (review #7).
  const twins = catalog.filter((e) => e.id !== entry.id && short(e) === name && e.backends?.includes('cpu'));
  if (twins.length === 0) return name;
  return t(entry.format === 'q4nx' ? 'catalog.twinReady' : 'catalog.twinConvert', { name });
}

/** What the Hugging Face field asks to download: `owner/name` (with `@revision`) as typed, or
 *  the same read from a pasted model page link (`…/owner/name`, `…/owner/name/tree/revision`). */
export function repoFromInput(input: string): string {
  const text = input.trim();
  if (!/^https?:\/\//i.test(text)) return text;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return text;
  }
  const [owner, name, tree, revision] = url.pathname.split('/').filter(Boolean);
  if (!owner || !name) return text;
  return tree === 'tree' && revision ? `${owner}/${name}@${revision}` : `${owner}/${name}`;
}
