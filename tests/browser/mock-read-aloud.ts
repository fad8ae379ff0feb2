// Read aloud in the mocked backend, as crates/app's read_aloud answers: read_aloud_speak emits a
// `read-aloud` "started" event, then "ended" after window.__mockReadAloud.lastsMs (at once, as
// stopped, on read_aloud_stop or a new reading); a test may make the next speak fail
// (window.__mockReadAloud.fail: the app's error). What was asked to be read is kept in `spoken`.
import { emit } from '@tauri-apps/api/event';

type Json = Record<string, any>;

export const readAloudControl = {
  /** How long a reading lasts. */
  lastsMs: 60_000,
  /** The error the next read_aloud_speak fails with (then cleared). */
  fail: null as Json | null,
  /** What read_aloud_speak was given. */
  spoken: [] as { messageId: number | null; text: string }[],
};
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
  }
  return undefined;
}
