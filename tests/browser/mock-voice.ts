// The microphone in the mocked backend, as crates/app's voice.rs answers: voice_status (speech
// models installed, the NPU hearing), start_listening sending the level and time on its Channel
// every 100 ms, stop_listening giving the words (window.__mockVoice.words) and who heard them,
// cancel_listening; a test may make the next start fail (window.__mockVoice.failStart) or have
// no speech model (window.__mockVoice.models = []).

type Json = Record<string, any>;

export const voiceControl = {
  /** The installed speech models' names. */
  models: ['whisper-base'] as string[],
  /** What stop_listening hears. */
  words: 'What is the capital of France?',
  /** The error the next start_listening fails with (then cleared). */
  failStart: null as { code: string; message: string; detail: string | null; params: Json } | null,
  /** Languages stop_listening was asked for. */
  languages: [] as (string | null)[],
};
(window as any).__mockVoice = voiceControl;

let timer: ReturnType<typeof setInterval> | null = null;
let elapsed = 0;

function fail(error: Json): never {
  throw error;
}

export function voiceCommand(cmd: string, args: Json): unknown {
  switch (cmd) {
    case 'voice_status':
      return { speech_models: voiceControl.models, npu_hears: false, speech_models_dir: '/home/ana/.local/share/hearth/models/speech', listening: timer !== null };
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
