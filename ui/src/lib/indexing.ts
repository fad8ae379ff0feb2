// How far the indexing of a file is, in words (review #10): a rough time left from the
// progress events' rate so far, smoothed so it does not jump, in friendly steps ("a few
// seconds", "less than a minute", "about 3 min"); "Starting…" until the first progress, and
// while no passage is embedded yet, instead of a stuck 0%; and a file that is only partly indexed says how many of its
// passages are not indexed yet. Pure functions and one small tracker fed the events' times, so
// the words can be tested without a clock.
import type { DocumentInfo, IndexProgress } from './bindings';
import { documentStatus } from './documents';
import { fileErrorText } from './errors';
import { t } from './i18n/index.svelte';
import { formatBytes } from './models';

/** Progress must run this long (ms) before a time left is said: earlier rates mislead. */
export const ESTIMATE_AFTER_MS = 3_000;
/** Weight of the newest estimate in the smoothed one (the rest is the one before). */
const SMOOTHING = 0.3;

/** What the tracker keeps of one file's run: where it started and its smoothed estimate. */
interface Run {
  stage: IndexProgress['stage'];
  total: number;
  startedAt: number;
  startDone: number;
  lastDone: number;
  /** Seconds left, smoothed (null: not enough progress yet). */
  seconds: number | null;
}

/** How far a file is by the unit that moves: scanned pages while OCR reads them, else files
 *  (reading) or passages (embedding). */
function position(progress: IndexProgress): { done: number; total: number } {
  const scanned = progress.scanned_pages;
  if (scanned && scanned.total > 0) return { done: scanned.done, total: scanned.total };
  return { done: progress.done, total: progress.total };
}

/** Rough times left by file name, from the progress events and when they came. */
export class TimeLeft {
  private runs = new Map<string, Run>();

  /** A progress event came at `now` (ms, any steady clock). Returns the file's seconds left. */
  update(progress: IndexProgress, now: number): number | null {
    const { done, total } = position(progress);
    const name = progress.document_name;
    let run = this.runs.get(name);
    // A new stage, a new count or a step back is a new run: the old rate says nothing of it.
    if (!run || run.stage !== progress.stage || run.total !== total || done < run.lastDone) {
      run = { stage: progress.stage, total, startedAt: now, startDone: done, lastDone: done, seconds: null };
      this.runs.set(name, run);
      return null;
    }
    run.lastDone = done;
    const elapsed = now - run.startedAt;
    const moved = done - run.startDone;
    if (elapsed < ESTIMATE_AFTER_MS || moved <= 0 || total <= 0) return run.seconds;
    const raw = ((total - done) * elapsed) / moved / 1000;
    run.seconds = run.seconds === null ? raw : SMOOTHING * raw + (1 - SMOOTHING) * run.seconds;
    return run.seconds;
  }

  /** The file's seconds left so far (null: none yet). */
  seconds(name: string): number | null {
    return this.runs.get(name)?.seconds ?? null;
  }

  /** The file is done (or failed): its run is forgotten. */
  forget(name: string): void {
    this.runs.delete(name);
  }

  /** Indexing ended: every run is forgotten. */
  clear(): void {
    this.runs.clear();
  }
}

/** A time left in friendly steps: "a few seconds left", "less than a minute left",
 *  "about 3 min left", "about 2 h left". */
export function timeLeftWords(seconds: number): string {
  if (seconds < 15) return t('indexing.fewSeconds');
  if (seconds < 50) return t('indexing.underMinute');
  const minutes = Math.max(1, Math.round(seconds / 60));
  if (minutes < 90) return t('indexing.aboutMinutes', { count: minutes });
  return t('indexing.aboutHours', { count: Math.round(minutes / 60) });
}

/** What a file's row says under its name, in the attachments and in Your files: why it could
 *  not be read; while indexed, "Starting…" until something is done, then how far with a rough
 *  time left; else its size and passages, with those not indexed yet. */
export function fileStatus(doc: DocumentInfo, progress: IndexProgress | undefined, secondsLeft: number | null): string {
  if (doc.error) return fileErrorText(doc.error);
  if (doc.indexing || progress) {
    // Embedding says 0% while the model loads and the first batch runs (~10 s on 2 cores).
    if (!progress || (progress.stage === 'embedding' && progress.done === 0)) return t('indexing.starting');
    const status = documentStatus(doc, progress);
    return secondsLeft === null ? status : `${status} · ${timeLeftWords(secondsLeft)}`;
  }
  return [formatBytes(doc.size), passagesWords(doc)].filter(Boolean).join(' · ');
}

/** "217 passages", or "217 passages, 185 not indexed yet" (empty without passages). */
export function passagesWords(doc: DocumentInfo): string {
  if (doc.passages === 0) return '';
  if (doc.waiting > 0) return t('indexing.passagesWaiting', { count: doc.passages, waiting: Math.min(doc.waiting, doc.passages) });
  return t('documents.passages', { count: doc.passages });
}
