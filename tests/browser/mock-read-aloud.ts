// Read aloud in the mocked backend, as crates/app's read_aloud answers: read_aloud_speak emits a
// `read-aloud` "started" event, then "ended" after window.__mockReadAloud.lastsMs (at once, as
// stopped, on read_aloud_stop or a new reading); a test may make the next speak fail
// (window.__mockReadAloud.fail: the app's error). What was asked to be read is kept in `spoken`.
// Piper voices (Settings › Read aloud): `piperInstalled` says whether `piper` is on this
// imagined computer; download_piper_voice sends progress in `voiceSteps` steps and installs the
// voice, unless cancelled or told to fail (`voiceFail`: the app's error).
import { emit } from '@tauri-apps/api/event';

type Json = Record<string, any>;

export const readAloudControl = {
  /** How long a reading lasts. */
  lastsMs: 60_000,
  /** The error the next read_aloud_speak fails with (then cleared). */
  fail: null as Json | null,
  /** What read_aloud_speak was given. */
  spoken: [] as { messageId: number | null; text: string }[],
  /** A `piper` program is installed. */
  piperInstalled: false,
  /** The error the next download_piper_voice fails with (then cleared). */
  voiceFail: null as Json | null,
  /** Steps a voice download takes, and the wait between them. */
  voiceSteps: 10,
  voiceStepMs: 60,
};

const VOICES: [string, string][] = [
  ['en', 'en_US-lessac-medium'],
  ['de', 'de_DE-thorsten-medium'],
  ['fr', 'fr_FR-siwis-medium'],
  ['es', 'es_ES-davefx-medium'],
  ['zh', 'zh_CN-huayan-medium'],
];
const installedVoices = new Set<string>();
const runningVoices = new Map<string, { cancel: boolean }>();

function piperStatus() {
  return {
    piper_installed: readAloudControl.piperInstalled,
    voices: VOICES.map(([language, name]) => ({
      language, name, about_bytes: 63_000_000, installed: installedVoices.has(language), downloading: runningVoices.has(language),
    })),
  };
}

async function downloadVoice(args: Json) {
  const language = String(args.language);
  const name = VOICES.find(([l]) => l === language)?.[1];
  if (!name) throw { code: 'not_found', message: `Hearth offers no Piper voice for ${language}.`, detail: null, params: {} };
  if (readAloudControl.voiceFail) {
    const error = readAloudControl.voiceFail;
    readAloudControl.voiceFail = null;
    throw error;
  }
  if (installedVoices.has(language)) return 'installed';
  const channel = args.onProgress as { id: number };
  let index = 0;
  const total = 63_201_294;
  const send = (phase: string, done: number) =>
    (window as any).__TAURI_INTERNALS__.runCallback(channel.id, {
      message: { name, phase, file: `${name}.onnx`, files_done: 0, file_count: 2, done_bytes: done, total_bytes: total, bytes_per_sec: 0, eta_secs: null, message: null },
      index: index++,
    });
  const flags = { cancel: false };
  runningVoices.set(language, flags);
  try {
    for (let step = 0; step <= readAloudControl.voiceSteps; step++) {
      if (flags.cancel) {
        send('cancelled', 0);
        return 'cancelled';
      }
      send('downloading', Math.round((total * step) / readAloudControl.voiceSteps));
      await new Promise((r) => setTimeout(r, readAloudControl.voiceStepMs));
    }
    installedVoices.add(language);
    send('done', total);
    return 'installed';
  } finally {
    runningVoices.delete(language);
  }
}
(window as any).__mockReadAloud = readAloudControl;

let current: { id: number | null; timer: ReturnType<typeof setTimeout> } | null = null;

function end(stopped: boolean) {
  if (!current) return;
  clearTimeout(current.timer);
  const id = current.id;
  current = null;
  void emit('read-aloud', { kind: 'ended', message_id: id, stopped });
}

export function readAloudCommand(cmd: string, args: Json): unknown {
  switch (cmd) {
    case 'read_aloud_speak': {
      if (readAloudControl.fail) {
        const error = readAloudControl.fail;
        readAloudControl.fail = null;
        throw error;
      }
      end(true);
      const id = (args.messageId as number | null | undefined) ?? null;
      readAloudControl.spoken.push({ messageId: id, text: String(args.text) });
      current = { id, timer: setTimeout(() => end(false), readAloudControl.lastsMs) };
      void emit('read-aloud', { kind: 'started', message_id: id });
      return null;
    }
    case 'read_aloud_stop':
      end(true);
      return null;
    case 'piper_voices':
      return piperStatus();
    case 'download_piper_voice':
      return downloadVoice(args);
    case 'cancel_piper_voice': {
      const flags = runningVoices.get(String(args.language));
      if (flags) flags.cancel = true;
      return null;
    }
  }
  return undefined;
}
