// The microphone in the mocked backend, as crates/app's voice.rs answers: voice_status (speech
// models installed, the NPU hearing), start_listening sending the level and time on its Channel
// every 100 ms, stop_listening giving the words (window.__mockVoice.words) and who heard them,
// cancel_listening; a test may make the next start fail (window.__mockVoice.failStart) or have
// no speech model (window.__mockVoice.models = []): then voice_status offers Whisper base, which
// the Models mock downloads (pull_model, pause_download, cancel_download) once the test adds it
// to its catalog (speechCatalogEntry); spoken_language answers the conversation's language
// (window.__mockVoice.conversationLanguage) or the app's.

import { modelsCommand } from './mock-models';

type Json = Record<string, any>;

const LANGUAGES = 'en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su'.split(' ');

/** whisper-base as crates/hub/catalog.json lists it, for the Models mock's catalog. */
export const speechCatalogEntry = {
  id: 'whisper-base', name: 'whisper-base', tag: 'whisper:base', repo: 'Systran/faster-whisper-base',
  revision: 'ebe41f70d5b6dfa9166e2c581c45c9c0cfc57b66', format: 'ct2', kind: 'speech', download_bytes: 147_882_941,
  memory_bytes: 500_000_000, parameters: '74M', license: 'MIT', backends: ['cpu'], context_length: 0, think: false,
  flm_family: '', quantization: 'float16', description: 'Whisper base', note: '', languages: LANGUAGES, files: [],
};

export const voiceControl = {
  /** The installed speech models' names. */
  models: ['whisper-base'] as string[],
  /** What stop_listening hears. */
  words: 'What is the capital of France?',
  /** The error the next start_listening fails with (then cleared). */
  failStart: null as { code: string; message: string; detail: string | null; params: Json } | null,
  /** Languages stop_listening was asked for. */
  languages: [] as (string | null)[],
  /** What spoken_language tells from a conversation's messages (null: nothing clear). */
  conversationLanguage: null as string | null,
  speechCatalogEntry,
};
(window as any).__mockVoice = voiceControl;

let timer: ReturnType<typeof setInterval> | null = null;
let elapsed = 0;

function fail(error: Json): never {
  throw error;
}

export function voiceCommand(cmd: string, args: Json): unknown {
  switch (cmd) {
    case 'voice_status': {
      const overview = modelsCommand('models_overview', {}) as Json;
      // A speech model shows in the catalog as installed, not in the installed list.
      const pulled = overview.catalog.some((c: Json) => c.entry.name === 'whisper-base' && c.installed);
      const models = pulled ? [...new Set([...voiceControl.models, 'whisper-base'])] : voiceControl.models;
      const paused = overview.partial.find((p: Json) => p.name === 'whisper-base');
      const offer = models.length === 0
        ? {
            name: 'whisper-base', size_bytes: 147_882_941, languages: LANGUAGES, license: 'MIT',
            paused_bytes: paused?.done_bytes ?? 0, downloading: overview.downloading.includes('whisper-base'),
          }
        : null;
      return { speech_models: models, npu_hears: false, speech_models_dir: '/home/ana/.local/share/hearth/models/speech', listening: timer !== null, offer };
    }
    case 'spoken_language':
      return (args.conversationId && voiceControl.conversationLanguage) || args.fallback;
    case 'start_listening': {
      if (voiceControl.failStart) {
        const error = voiceControl.failStart;
        voiceControl.failStart = null;
        fail(error);
      }
      if (timer) fail({ code: 'busy', message: 'Hearth is already listening: stop that recording first.', detail: 'mic_listening', params: {} });
      const channel = args.onLevel as { id: number };
      let index = 0;
      elapsed = 0;
      timer = setInterval(() => {
        elapsed += 0.1;
        const level = -30 + 10 * Math.sin(elapsed * 7);
        (window as any).__TAURI_INTERNALS__.runCallback(channel.id, { message: { elapsed_s: elapsed, level_dbfs: level, limit_reached: false }, index: index++ });
      }, 100);
      return { device: 'Mock microphone', max_seconds: 300 };
    }
    case 'stop_listening': {
      if (!timer) fail({ code: 'invalid_input', message: 'Hearth is not listening: press the microphone button to speak.', detail: 'mic_not_listening', params: {} });
      clearInterval(timer!);
      timer = null;
      voiceControl.languages.push(args.language ?? null);
      return { text: voiceControl.words, backend: 'cpu', duration_s: elapsed, npu_failure: null };
    }
    case 'cancel_listening':
      if (timer) clearInterval(timer);
      timer = null;
      return null;
    default:
      return undefined;
  }
}
