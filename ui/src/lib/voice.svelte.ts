// Speaking to Hearth: the microphone button's state. Press to listen (the backend records,
// crates/app's voice.rs, and sends the level and time about ten times a second), press again or
// Escape to stop: the words are written down on this computer (by the NPU's Whisper or the
// processor's, which the result names) and handed to the message box, or sent at once when the
// person chose so. No speech model installed (and no NPU to hear): the first press says what
// one is and where it goes instead of listening. The sound never leaves the backend.
// It talks to the backend only through its slice of `api`.
import { api, BackendError, type Api } from './api';
import type { VoiceHeard, VoiceStatus } from './bindings';
import { language, t } from './i18n/index.svelte';

export type VoiceApi = Pick<Api, 'startListening' | 'stopListening' | 'cancelListening' | 'voiceStatus'>;

export type VoicePhase = 'idle' | 'starting' | 'listening' | 'hearing';

/** Where the "send what I said at once" choice is kept (this window's storage). */
const SEND_AT_ONCE_KEY = 'hearth.voice.sendAtOnce';

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

  constructor(private readonly api: VoiceApi) {
    try {
      this.sendAtOnce = globalThis.localStorage?.getItem(SEND_AT_ONCE_KEY) === '1';
    } catch {
      this.sendAtOnce = false;
    }
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
  async toggle(onWords: (text: string, send: boolean) => void) {
    if (this.phase === 'listening') return this.stop(onWords);
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

  async stop(onWords: (text: string, send: boolean) => void) {
    if (this.phase !== 'listening') return;
    this.phase = 'hearing';
    try {
      const heard: VoiceHeard = await this.api.stopListening(language());
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
    this.missing = null;
  }
}

function message(e: unknown): string {
  return e instanceof BackendError || e instanceof Error ? e.message : String(e);
}

/** The one microphone of the window. */
export const voice = new VoiceStore(api);
