// Settings › Read aloud's natural voices (Piper, crates/app's read_aloud::voices): whether a
// `piper` program is installed, the voice each language of the app has and whether it is
// installed, and the download the person asked for, with its progress and, when it fails, what
// happened in plain words. It talks to the backend only through its slice of `api`.
import { api, type Api } from './api';
import type { PiperStatus } from './bindings';
import { plainError, type PlainError } from './errors';
import type { LanguageCode } from './i18n/index.svelte';
import type { PullProgress } from './models';

export type PiperApi = Pick<Api, 'piperVoices' | 'downloadPiperVoice' | 'cancelPiperVoice'>;

const message = (error: unknown) => (error instanceof Error ? error.message : String(error));

export class PiperVoicesStore {
  /** What the backend said last; null until it has answered. */
  status = $state<PiperStatus | null>(null);
  /** The running download's progress, null when none runs. */
  progress = $state<PullProgress | null>(null);
  /** The last failure, in words, until the next try or another language is chosen. */
  problem = $state<PlainError | null>(null);

  constructor(private readonly backend: PiperApi) {}

  async refresh() {
    try {
      this.status = await this.backend.piperVoices();
    } catch (error) {
      this.problem = plainError(message(error));
    }
  }

  async download(language: LanguageCode) {
    this.problem = null;
    this.progress = { name: '', phase: 'resolving', file: null, files_done: 0, file_count: 2, done_bytes: 0, total_bytes: 0, bytes_per_sec: 0, eta_secs: null, message: null };
    try {
      await this.backend.downloadPiperVoice(language, (p) => (this.progress = p));
    } catch (error) {
      this.problem = plainError(message(error));
    } finally {
      this.progress = null;
      await this.refresh();
    }
  }

  async cancel(language: LanguageCode) {
    try {
      await this.backend.cancelPiperVoice(language);
    } catch (error) {
      this.problem = plainError(message(error));
    }
  }
}

export const piperVoices = new PiperVoicesStore(api);
