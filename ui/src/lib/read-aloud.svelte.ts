// Read aloud: which answer is being read, and the speaker buttons' speak and stop. The backend
// (crates/app's read_aloud) says each sentence with espeak-ng as the answer streams and tells
// what happens in `read-aloud` events: a reading started (also when "always read answers" has
// it follow an answer being written), ended (said, or stopped) or failed (in plain words, shown
// beside that answer's button). It talks to the backend only through its slice of `api`.
import { api, type Api } from './api';
import type { ReadAloudEvent } from './bindings';
import { errorText } from './errors';

export type ReadAloudApi = Pick<Api, 'readAloudSpeak' | 'readAloudStop' | 'onReadAloud'>;

/** What a reading is of: an answer by its id, or 'text' for words that are not a saved answer. */
export type ReadingKey = number | 'text';

function keyOf(messageId: number | null): ReadingKey {
  return messageId ?? 'text';
}

export class ReadAloudStore {
  /** The answer being read, or null. */
  reading = $state<ReadingKey | null>(null);
  /** Why the last reading failed, and of which answer. */
  error = $state<{ key: ReadingKey; message: string } | null>(null);
  private listening: Promise<() => void> | null = null;

  constructor(private readonly api: ReadAloudApi) {}

  /** Follows the backend's events (once; every speaker button calls it). */
  listen(): Promise<() => void> {
    this.listening ??= this.api.onReadAloud((event) => this.handle(event)).catch((error) => {
      this.listening = null;
      throw error;
    });
    return this.listening;
  }

  handle(event: ReadAloudEvent) {
    const key = keyOf(event.message_id);
    if (event.kind === 'started') {
      this.reading = key;
      this.error = null;
    } else {
      if (this.reading === key) this.reading = null;
      if (event.kind === 'failed') this.error = { key, message: errorText(event.error) };
    }
  }

  /** Whether answer `messageId` is being read. */
  isReading(messageId: number): boolean {
    return this.reading === messageId;
  }

  /** Why reading answer `messageId` failed, if it did last. */
  errorOf(messageId: number): string | null {
    return this.error?.key === messageId ? this.error.message : null;
  }

  /** Reads `text` (answer `messageId`) aloud, in its own language; stops what was being read. */
  async speak(messageId: number | null, text: string) {
    const key = keyOf(messageId);
    this.error = null;
    try {
      await this.listen();
      this.reading = key;
      await this.api.readAloudSpeak(messageId, text);
    } catch (error) {
      if (this.reading === key) this.reading = null;
      this.error = { key, message: error instanceof Error ? error.message : String(error) };
    }
  }

  /** Stops reading aloud. */
  async stop() {
    this.reading = null;
    try {
      await this.api.readAloudStop();
    } catch (error) {
      this.error = { key: 'text', message: error instanceof Error ? error.message : String(error) };
    }
  }
}

export const readAloud = new ReadAloudStore(api);
