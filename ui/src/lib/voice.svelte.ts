// Speaking to Hearth: the microphone button's state. Press to listen (the backend records,
// crates/app's voice.rs, and sends the level and time about ten times a second), press again or
// Escape to stop: the words are written down on this computer (by the NPU's Whisper or the
// processor's, which the result names) and handed to the message box, or sent at once when the
// person chose so. No speech model installed (and no NPU to hear): the first press offers the
// default one (Whisper base: name, size, languages, what it is for) with one button instead of
// listening; its download shows progress with Cancel, says a failure in words with Try again,
// offers Resume for a paused one, and once it is installed the next press listens. The language
// heard is the conversation's (the backend tells it from the latest messages), else the app's,
// unless "Detect the language I speak" is chosen. The sound never leaves the backend.
// It talks to the backend only through its slice of `api`.
import { api, BackendError, type Api } from './api';
import type { SpeechOffer, VoiceHeard, VoiceStatus } from './bindings';
import { plainError } from './errors';
import { language, t } from './i18n/index.svelte';

export type VoiceApi = Pick<
  Api,
  'startListening' | 'stopListening' | 'cancelListening' | 'voiceStatus' | 'spokenLanguage' | 'pullModel' | 'pauseDownload' | 'cancelDownload'
>;

/** Where the offered speech model's download stands. */
export type DownloadState =
  | { kind: 'offered' }
  | { kind: 'downloading'; done: number; total: number }
  | { kind: 'paused'; done: number }
  | { kind: 'failed'; error: string };

/** The languages the offer names: Hearth's five, in the app's words (the rest are counted). */
export const NAMED_LANGUAGES = ['en', 'zh', 'es', 'de', 'fr'] as const;

export type VoicePhase = 'idle' | 'starting' | 'listening' | 'hearing';

/** Where the "send what I said at once" choice is kept (this window's storage). */
const SEND_AT_ONCE_KEY = 'hearth.voice.sendAtOnce';
/** Where the "detect the language I speak" choice is kept. */
const DETECT_KEY = 'hearth.voice.detect';

/** The level meter's range: -60 dBFS (empty) to 0 dBFS (full). */
export function meterFraction(dbfs: number): number {
  if (!Number.isFinite(dbfs)) return 0;
  return Math.min(1, Math.max(0, (dbfs + 60) / 60));
}

/** Seconds as "0:07", "1:23". */
export function clock(seconds: number): string {
  const whole = Math.max(0, Math.floor(seconds));
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, '0')}`;
}

export class VoiceStore {
  phase = $state<VoicePhase>('idle');
  /** The last level, dBFS, and the seconds recorded. */
  level = $state(-100);
  elapsed = $state(0);
  /** The recording reached its longest and stopped by itself: stop to hear it. */
  limitReached = $state(false);
  /** Why the last press failed, in words (shown beside the button). */
  error = $state<string | null>(null);
  /** No speech model and no NPU: what to say instead of listening. */
  missing = $state<VoiceStatus | null>(null);
  /** Who heard the last words ("npu" / "cpu"). */
  heardBy = $state<string | null>(null);
  sendAtOnce = $state(false);
  /** Let Whisper tell the spoken language instead of telling it the conversation's. */
  detectLanguage = $state(false);
  /** The offered speech model's download, while the offer shows. */
  download = $state<DownloadState>({ kind: 'offered' });

  constructor(private readonly api: VoiceApi) {
    try {
      this.sendAtOnce = globalThis.localStorage?.getItem(SEND_AT_ONCE_KEY) === '1';
      this.detectLanguage = globalThis.localStorage?.getItem(DETECT_KEY) === '1';
    } catch {
      this.sendAtOnce = false;
    }
  }

  setDetectLanguage(on: boolean) {
    this.detectLanguage = on;
    try {
      globalThis.localStorage?.setItem(DETECT_KEY, on ? '1' : '0');
    } catch {
      // As for sendAtOnce: the choice lasts this session.
    }
  }

  /** The speech model offered, when nothing can hear. */
  get offer(): SpeechOffer | null {
    return this.missing?.offer ?? null;
  }

  /** Download (or resume) the offered speech model; once installed, the offer closes and the
   *  next press listens. Paused or cancelled, it says so; a failure says why in words. */
  async downloadModel() {
    const offer = this.offer;
    if (!offer || this.download.kind === 'downloading') return;
    const start = this.download.kind === 'paused' ? this.download.done : offer.paused_bytes;
    this.download = { kind: 'downloading', done: start, total: offer.size_bytes };
    try {
      const result = await this.api.pullModel(offer.name, (p) => {
        if (this.download.kind === 'downloading' && p.total_bytes > 0) {
          this.download = { kind: 'downloading', done: p.done_bytes, total: p.total_bytes };
        }
      });
      if (result.outcome === 'installed' || result.outcome === 'already_installed') {
        this.missing = null;
        this.download = { kind: 'offered' };
      } else if (result.outcome === 'paused') {
        this.download = { kind: 'paused', done: this.download.kind === 'downloading' ? this.download.done : 0 };
      } else {
        this.download = { kind: 'offered' };
      }
    } catch (e) {
      this.download = { kind: 'failed', error: plainError(message(e)).summary };
    }
  }

  /** Pause the running download (its bytes are kept; Resume continues it). */
  async pauseDownload() {
    const offer = this.offer;
    if (offer && this.download.kind === 'downloading') await this.api.pauseDownload(offer.name);
  }

  /** Cancel the download and delete what it fetched. */
  async cancelDownload() {
    const offer = this.offer;
    if (!offer) return;
    const running = this.download.kind === 'downloading';
    await this.api.cancelDownload(offer.name);
    if (!running) this.download = { kind: 'offered' };
  }

  setSendAtOnce(on: boolean) {
    this.sendAtOnce = on;
    try {
      globalThis.localStorage?.setItem(SEND_AT_ONCE_KEY, on ? '1' : '0');
    } catch {
      // Private windows may refuse storage: the choice lasts this session.
    }
  }

  get busy(): boolean {
    return this.phase !== 'idle';
  }

  /** The button's press: start, or stop and hear. `onWords` gets the words (and whether to send). */
  async toggle(onWords: (text: string, send: boolean) => void, conversationId: string | null = null) {
    if (this.phase === 'listening') return this.stop(onWords, conversationId);
    if (this.phase !== 'idle') return;
    await this.start();
  }

  async start() {
    this.error = null;
    this.heardBy = null;
    this.phase = 'starting';
    try {
      const status = await this.api.voiceStatus();
      if (status.speech_models.length === 0 && !status.npu_hears) {
        this.missing = status;
        const offer = status.offer;
        if (offer?.downloading) this.download = { kind: 'downloading', done: offer.paused_bytes, total: offer.size_bytes };
        else if (offer && offer.paused_bytes > 0) this.download = { kind: 'paused', done: offer.paused_bytes };
        else if (this.download.kind !== 'downloading') this.download = { kind: 'offered' };
        this.phase = 'idle';
        return;
      }
      this.missing = null;
      this.level = -100;
      this.elapsed = 0;
      this.limitReached = false;
      await this.api.startListening((l) => {
        this.level = l.level_dbfs;
        this.elapsed = l.elapsed_s;
        if (l.limit_reached) this.limitReached = true;
      });
      this.phase = 'listening';
    } catch (e) {
      this.error = message(e);
      this.phase = 'idle';
    }
  }

  async stop(onWords: (text: string, send: boolean) => void, conversationId: string | null = null) {
    if (this.phase !== 'listening') return;
    this.phase = 'hearing';
    try {
      const spoken = this.detectLanguage ? null : await this.api.spokenLanguage(conversationId || null, language());
      const heard: VoiceHeard = await this.api.stopListening(spoken);
      this.heardBy = heard.backend;
      if (heard.text.trim()) onWords(heard.text.trim(), this.sendAtOnce);
      else this.error = t('voice.nothingHeard');
    } catch (e) {
      this.error = message(e);
    } finally {
      this.phase = 'idle';
      this.level = -100;
    }
  }

  async cancel() {
    if (this.phase !== 'listening') return;
    this.phase = 'idle';
    try {
      await this.api.cancelListening();
    } catch (e) {
      this.error = message(e);
    }
  }

  dismiss() {
    this.error = null;
    if (this.download.kind !== 'downloading') this.missing = null;
  }
}

function message(e: unknown): string {
  return e instanceof BackendError || e instanceof Error ? e.message : String(e);
}

/** The one microphone of the window. */
export const voice = new VoiceStore(api);
