// Pictures on the next message: added by paste, by a drop on the composer or the window, or
// through the picker; each is checked by the app (crates/app's pictures.rs: the kind sniffed
// from its bytes, bounded in bytes and pixels, downscaled and re-encoded) before it shows as a
// thumbnail, and goes with the message when it is sent (a failed send puts them back). They are
// kept per conversation draft, as the text is. When the chosen model does not see pictures the
// composer says so, and "Read the text in it" hands them to the document path instead (the app
// writes them out as a drop of documents, read by OCR). It talks to the backend only through its
// slice of `api`.
import type { Api } from './api';
import type { DraftPicture, PictureLimits, PictureUpload } from './types';
import type { ConversationList } from './conversations.svelte';
import { messageOf } from './notifications.svelte';
import { t } from './i18n/index.svelte';

export type PicturesApi = Pick<Api, 'checkPicture' | 'pickPictures' | 'takeDroppedPictures' | 'picturesAsDocuments' | 'messagePicture'>;

/** The names of the kinds of picture a model is given (the app sniffs the bytes all the same). */
const PICTURE_NAME = /\.(png|jpe?g|webp)$/i;

/** Whether a file's name is one of a picture a model can be given. */
export function isPictureName(name: string): boolean {
  return PICTURE_NAME.test(name);
}

/** Bytes as base64, in pieces (a picture of megabytes overflows one call's arguments). */
export function base64Of(bytes: Uint8Array): string {
  let binary = '';
  const piece = 0x8000;
  for (let i = 0; i < bytes.length; i += piece) binary += String.fromCharCode(...bytes.subarray(i, i + piece));
  return btoa(binary);
}

/** A picture as an image's source. */
export function pictureSrc(p: { media_type: string; data: string }): string {
  return `data:${p.media_type};base64,${p.data}`;
}

/** What the pictures cost of the model's context, in tokens (the app's estimate per picture). */
export function picturesTokens(pictures: DraftPicture[]): number {
  return pictures.reduce((sum, p) => sum + p.tokens, 0);
}

/** "photo.png is 22.0 MB; Hearth takes pictures up to 20 MB. ..." */
function tooLarge(name: string, bytes: number, max: number): string {
  const mb = 1024 * 1024;
  return t('pictures.tooLarge', { name, size: (bytes / mb).toFixed(1), max: max / mb });
}

export class PicturesStore {
  /** The pictures waiting to go with the next message, by the conversation's draft key. */
  drafts = $state<Record<string, DraftPicture[]>>({});
  /** Why the last picture could not be added, in plain words (shown next to the composer). */
  error = $state<string | null>(null);
  /** A picture is being checked. */
  busy = $state(false);
  /** Saved messages' pictures read so far (data: URLs), by "message/index". */
  private readonly shownPictures = new Map<string, Promise<string>>();

  constructor(
    private readonly api: PicturesApi,
    private readonly conversations: ConversationList,
    /** Whether the model in use sees pictures. */
    private readonly seesNow: () => boolean,
    /** Attach a drop of documents to the open conversation (the documents store's path). */
    private readonly attachDocuments: (token: string) => Promise<void>,
    /** The app's bounds on a message's pictures (its status' `picture_limits`), checked here
     *  first too, so a huge file is refused before the page reads it; null until the status
     *  is read (the app checks them again in any case). */
    private readonly limitsNow: () => PictureLimits | null,
  ) {}

  /** The most pictures one message carries, as the app says (unbounded here until it has). */
  private get maxPictures(): number {
    return this.limitsNow()?.max_pictures ?? Infinity;
  }

  /** The open conversation's pictures waiting to be sent. */
  get attached(): DraftPicture[] {
    return this.drafts[this.conversations.draftKey] ?? [];
  }

  /** Whether the model in use sees pictures. */
  get sees(): boolean {
    return this.seesNow();
  }

  /** Their estimated share of the context, in tokens. */
  get tokens(): number {
    return picturesTokens(this.attached);
  }

  private put(key: string, pictures: DraftPicture[]): void {
    const next = { ...this.drafts };
    if (pictures.length) next[key] = pictures;
    else delete next[key];
    this.drafts = next;
  }

  /** Adds checked pictures to the open draft, up to the app's bound (the rest said). */
  private add(key: string, checked: DraftPicture[]): void {
    const now = this.drafts[key] ?? [];
    const room = Math.max(0, this.maxPictures - now.length);
    if (checked.length > room) this.error = t('pictures.tooMany', { max: this.maxPictures });
    this.put(key, [...now, ...checked.slice(0, room)]);
  }

  private async checking(run: () => Promise<void>): Promise<void> {
    this.error = null;
    this.busy = true;
    try {
      await run();
    } catch (error) {
      this.error = messageOf(error);
    } finally {
      this.busy = false;
    }
  }

  /** Pasted or dropped on the composer: files the page holds. Files that are not pictures are
   *  left for whoever handles them (false when none was a picture). */
  async addFiles(files: File[]): Promise<boolean> {
    const pictures = files.filter((f) => f.type.startsWith('image/') || isPictureName(f.name));
    if (pictures.length === 0) return false;
    const key = this.conversations.draftKey;
    const maxBytes = this.limitsNow()?.max_picture_bytes ?? Infinity;
    await this.checking(async () => {
      const checked: DraftPicture[] = [];
      const problems: string[] = [];
      for (const file of pictures) {
        const name = file.name || t('pictures.pastedName');
        if (file.size > maxBytes) {
          problems.push(tooLarge(name, file.size, maxBytes));
          continue;
        }
        try {
          checked.push(await this.api.checkPicture(name, base64Of(new Uint8Array(await file.arrayBuffer()))));
        } catch (error) {
          problems.push(messageOf(error));
        }
      }
      this.add(key, checked);
      if (problems.length) this.error = problems.join(' ');
    });
    return true;
  }

  /** The picker button: the system's file dialog (opened by the backend), showing pictures. */
  pick(): Promise<void> {
    const key = this.conversations.draftKey;
    return this.checking(async () => this.add(key, await this.api.pickPictures(t('pictures.dialogTitle'), t('pictures.dialogFilter'))));
  }

  /** Pictures dropped on the window (by the drop's single-use token): to the model when it sees,
   *  else false (the drop's files then go the documents' way, read by OCR). */
  async takeDropped(token: string, names: string[]): Promise<boolean> {
    if (!this.sees || names.length === 0 || !names.every(isPictureName)) return false;
    const key = this.conversations.draftKey;
    await this.checking(async () => this.add(key, await this.api.takeDroppedPictures(token)));
    return true;
  }

  /** Takes a picture off the draft. */
  remove(index: number): void {
    const key = this.conversations.draftKey;
    this.put(key, this.attached.filter((_, i) => i !== index));
    this.error = null;
  }

  dismissError(): void {
    this.error = null;
  }

  /** Sends `text` with the draft's pictures through `sendWith` (the answer stream); a failed
   *  send puts them back. */
  async send(text: string, sendWith: (text: string, pictures: PictureUpload[]) => Promise<boolean>): Promise<boolean> {
    const key = this.conversations.draftKey;
    const pictures = this.attached;
    this.put(key, []);
    this.error = null;
    const sent = await sendWith(text, pictures.map((p) => ({ name: p.name, data: p.data })));
    if (!sent && pictures.length) {
      // A new conversation may have been made for the send: the pictures wait in it.
      const now = this.conversations.draftKey;
      this.put(now, [...pictures, ...(this.drafts[now] ?? [])].slice(0, this.maxPictures));
    }
    return sent;
  }

  /** Picture `index` of the saved message `messageId`, as an image's source (read once). */
  messagePicture(messageId: number, index: number): Promise<string> {
    const key = `${messageId}/${index}`;
    let shown = this.shownPictures.get(key);
    if (!shown) {
      shown = this.api.messagePicture(messageId, index);
      // A failed read is tried again next time.
      shown.catch(() => this.shownPictures.delete(key));
      this.shownPictures.set(key, shown);
    }
    return shown;
  }

  /** "Read the text in it": the draft's pictures become documents of the conversation, their
   *  text read by OCR (for a model that does not see). */
  async readText(): Promise<void> {
    const key = this.conversations.draftKey;
    const pictures = this.attached;
    if (pictures.length === 0) return;
    await this.checking(async () => {
      const token = await this.api.picturesAsDocuments(pictures.map((p) => ({ name: p.name, data: p.data })));
      this.put(key, []);
      await this.attachDocuments(token);
    });
  }
}
