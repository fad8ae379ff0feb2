// The user's files in the app: the open conversation's attachments (with their indexing progress, a rough
// time left for each (indexing.ts), Cancel and Continue for indexing), the files that could not be read (each with why, by code;
// dismissed with ✕, or kept in the library when the user asks), the document library, the sources of each
// answer, the passage opened from one, and the notice that passages go to a remote server. Files are named to the backend only by
// library id or by the token of a drop (drops.svelte.ts hands over the drops of documents): no
// path leaves the UI. It talks to the backend only through its slice of `api`.
import { t } from './i18n/index.svelte';
import type { Api } from './api';
import type { Conversation } from './types';
import type { ConversationList } from './conversations.svelte';
import type { ConversationDocuments, DocumentEvent, DocumentInfo, IndexProgress, Library, RemoteNotice, Source } from './documents';
import { type Notifications, messageOf } from './notifications.svelte';
import type { FileError } from './errors';
import { TimeLeft } from './indexing';

export type DocumentsApi = Pick<
  Api,
  | 'pickDocuments'
  | 'attachDropped'
  | 'attachDocument'
  | 'detachDocument'
  | 'conversationDocuments'
  | 'acceptRemoteDocuments'
  | 'library'
  | 'removeDocument'
  | 'messageSources'
  | 'cancelIndexing'
  | 'continueIndexing'
  | 'keepFailed'
  | 'pickDocumentFolder'
  | 'openDocument'
  | 'onDocuments'
>;

/** A file that could not be read, shown with why until dismissed (it is not kept in the
 *  library unless the user asks: `failure` names it for that; null: nothing to keep). */
export interface FailedFile {
  name: string;
  error: FileError;
  failure: number | null;
  /** Keep in Your files was pressed. */
  kept: boolean;
}

export class DocumentsStore {
  /** The open conversation's files. */
  attached = $state<DocumentInfo[]>([]);
  /** Files that could not be read, newest last, until dismissed. */
  failed = $state<FailedFile[]>([]);
  /** Indexing progress by file name. */
  progress = $state<Record<string, IndexProgress>>({});
  /** A rough time left by file name, in seconds (null: too early to say), from the progress
   *  events' rate so far (review #10). */
  timeLeft = $state<Record<string, number | null>>({});
  private readonly estimates = new TimeLeft();
  /** The notice that passages will be sent to a remote server (null: none to show). */
  remoteNotice = $state<RemoteNotice | null>(null);
  /** Every indexed file and the disk the library uses; null until listed. */
  library = $state<Library | null>(null);
  /** The sources of each answer, by message id. */
  sources = $state<Record<number, Source[]>>({});
  /** The passage opened from a source, shown in the passage view. */
  passage = $state<Source | null>(null);
  /** Why the last attach, remove or listing failed, shown above the message box. */
  error = $state<string | null>(null);
  busy = $state(false);
  /** Indexing was cancelled: the names of the files it never read (null: nothing to say). */
  stopped = $state<string[] | null>(null);
  /** Cancel was pressed and indexing has not said it finished yet: "Stopping…" at once. */
  stopping = $state(false);
  /** Whether indexing runs now (as far as the events and the last listing tell). */
  indexing = $derived(Object.keys(this.progress).length > 0 || (this.library?.indexing ?? false));

  constructor(
    private readonly api: DocumentsApi,
    private readonly conversations: ConversationList,
    private readonly notifications: Notifications,
    /** When a progress event comes, in ms (tests pass their own). */
    private readonly clock: () => number = () => performance.now(),
  ) {
    conversations.onShow((conversation) => void this.show(conversation));
  }

  /** Listens to the backend's `documents` events; resolves to the function that stops it. */
  watch(): Promise<() => void> {
    return this.api.onDocuments((event) => void this.onEvent(event));
  }

  /** Another conversation was opened (or a new one started, null): its files and sources. */
  private async show(conversation: Conversation | null): Promise<void> {
    this.passage = null;
    this.error = null;
    this.failed = [];
    if (!conversation) {
      this.attached = [];
      this.remoteNotice = null;
      return;
    }
    const id = conversation.id;
    try {
      const [docs, sources] = await Promise.all([this.api.conversationDocuments(id), this.api.messageSources(id)]);
      if (this.conversations.current?.id !== id) return;
      this.attached = docs.documents;
      this.remoteNotice = docs.remote_notice;
      const byMessage: Record<number, Source[]> = { ...this.sources };
      for (const m of sources) byMessage[m.message_id] = m.sources;
      this.sources = byMessage;
    } catch (error) {
      this.error = messageOf(error);
    }
  }

  /** The open conversation's files again, as the library has them now. */
  private async refreshAttached(): Promise<void> {
    const id = this.conversations.current?.id;
    if (!id) return;
    try {
      const docs = await this.api.conversationDocuments(id);
      if (this.conversations.current?.id === id) this.attached = docs.documents;
    } catch (error) {
      this.error = messageOf(error);
    }
  }

  /** The conversation to attach to, created when none is open yet. */
  private async target(): Promise<string | null> {
    if (!this.conversations.current) {
      try {
        await this.conversations.create();
      } catch (error) {
        this.error = messageOf(error);
        return null;
      }
    }
    return this.conversations.current?.id ?? null;
  }

  /** After an attach or detach: the list, and the remote notice that may now apply (the
   *  command returns both). */
  private attachedNow(id: string, now: ConversationDocuments): void {
    if (this.conversations.current?.id !== id) return;
    // A file that failed before this answer came is not listed as being read.
    const failed = new Set(this.failed.map((f) => f.name));
    this.attached = now.documents.filter((d) => !(d.passages === 0 && failed.has(d.name)));
    this.remoteNotice = now.remote_notice;
  }

  private async attachWith(run: (id: string) => Promise<ConversationDocuments>): Promise<void> {
    this.error = null;
    const id = await this.target();
    if (!id) return;
    this.busy = true;
    try {
      this.attachedNow(id, await run(id));
    } catch (error) {
      this.error = messageOf(error);
    } finally {
      this.busy = false;
    }
  }

  /** The paperclip: the system's file dialog (opened by the backend), then attach what was chosen. */
  pick(): Promise<void> {
    return this.attachWith((id) => this.api.pickDocuments(id, t('attach.dialogTitle'), t('attach.dialogFilter')));
  }

  /** The folder button: the system's folder dialog (opened by the backend), whose choice comes
   *  back as a drop (the `dropped` event, handled as one by drops.svelte.ts). */
  async pickFolder(): Promise<void> {
    this.error = null;
    try {
      await this.api.pickDocumentFolder(t('attach.folderDialogTitle'));
    } catch (error) {
      this.error = messageOf(error);
    }
  }

  /** Attach the documents of a drop on the window (by its single-use token). */
  attachDropped(token: string): Promise<void> {
    return this.attachWith((id) => this.api.attachDropped(id, token));
  }

  /** Attach a file already in the library to the open conversation. */
  attach(documentId: number): Promise<void> {
    return this.attachWith((id) => this.api.attachDocument(id, documentId));
  }

  /** Take a file off the open conversation (it stays in the library). */
  async detach(documentId: number): Promise<void> {
    const id = this.conversations.current?.id;
    if (!id) return;
    this.error = null;
    try {
      this.attachedNow(id, await this.api.detachDocument(id, documentId));
    } catch (error) {
      this.error = messageOf(error);
    }
  }

  /** Another model was chosen: passages may now go to a remote server (or no longer), so the
   *  notice is read again for the open conversation. */
  async modelChosen(): Promise<void> {
    const id = this.conversations.current?.id;
    if (!id || this.attached.length === 0) {
      this.remoteNotice = null;
      return;
    }
    try {
      const docs = await this.api.conversationDocuments(id);
      if (this.conversations.current?.id === id) this.remoteNotice = docs.remote_notice;
    } catch (error) {
      this.error = messageOf(error);
    }
  }

  /** The user accepted that passages of this conversation's files go to the remote server. */
  async acceptRemote(): Promise<void> {
    const id = this.conversations.current?.id;
    if (!id) return;
    try {
      await this.api.acceptRemoteDocuments(id);
      this.remoteNotice = null;
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  /** List the library (every indexed file, the disk it uses). */
  async refreshLibrary(): Promise<void> {
    try {
      this.library = await this.api.library();
    } catch (error) {
      this.error = messageOf(error);
    }
  }

  /** Delete a file's text and index from the library (the original file is not touched). */
  async remove(documentId: number): Promise<void> {
    try {
      this.library = await this.api.removeDocument(documentId);
      this.attached = this.attached.filter((d) => d.id !== documentId);
    } catch (error) {
      this.error = messageOf(error);
    }
  }

  /** Cancel: stops the indexing going now; what was read and embedded is kept. */
  async cancelIndexing(): Promise<void> {
    this.stopping = true;
    try {
      await this.api.cancelIndexing();
    } catch (error) {
      this.stopping = false;
      this.error = messageOf(error);
    }
  }

  /** Continue indexing: embeds what a cancel (or the choice of another model) left. */
  async continueIndexing(): Promise<void> {
    this.stopped = null;
    try {
      await this.api.continueIndexing();
      if (this.library) this.library = { ...this.library, indexing: true };
    } catch (error) {
      this.error = messageOf(error);
    }
  }

  dismissStopped(): void {
    this.stopped = null;
  }

  /** ✕ on a file that could not be read: it goes from the list (it is not in the library). */
  dismissFailed(file: FailedFile): void {
    this.failed = this.failed.filter((f) => f !== file);
  }

  /** Keep in Your files: the library keeps the file with why it could not be read. */
  async keepFailed(file: FailedFile): Promise<void> {
    if (file.failure === null) return;
    try {
      await this.api.keepFailed(file.failure);
      this.failed = this.failed.map((f) => (f === file ? { ...f, kept: true } : f));
    } catch (error) {
      this.error = messageOf(error);
    }
  }

  /** The sources of the answer being written (the chat's `sources` event). */
  setSources(messageId: number, sources: Source[]): void {
    this.sources = { ...this.sources, [messageId]: sources };
  }

  openPassage(source: Source): void {
    this.passage = source;
  }

  closePassage(): void {
    this.passage = null;
  }

  /** Open a source's file in the person's own program, at its page where that program allows
   *  (review #13); what to say beside the button: where it opened, or why it could not. */
  async openFile(source: Source): Promise<{ ok: boolean; text: string }> {
    try {
      const opened = await this.api.openDocument(source.document_id, source.page);
      if (source.page === null) return { ok: true, text: t('passage.opened', { name: opened.name }) };
      const key = opened.at_page ? 'passage.openedAtPage' : 'passage.openedTurnTo';
      return { ok: true, text: t(key, { name: opened.name, page: source.page }) };
    } catch (error) {
      return { ok: false, text: error instanceof Error ? error.message : String(error) };
    }
  }

  dismissError(): void {
    this.error = null;
  }

  private forgetTimeLeft(name: string): void {
    this.estimates.forget(name);
    const { [name]: _gone, ...rest } = this.timeLeft;
    this.timeLeft = rest;
  }

  /** One `documents` event from the backend. */
  async onEvent(event: DocumentEvent): Promise<void> {
    switch (event.event) {
      case 'progress':
        this.progress = { ...this.progress, [event.data.document_name]: event.data };
        this.timeLeft = { ...this.timeLeft, [event.data.document_name]: this.estimates.update(event.data, this.clock()) };
        return;
      case 'indexed': {
        const doc = event.data.document;
        const { [doc.name]: _done, ...rest } = this.progress;
        this.progress = rest;
        this.forgetTimeLeft(doc.name);
        // A file still being read for the first time is listed by name with id 0 until now.
        const same = (d: DocumentInfo) => d.id === doc.id || (d.id === 0 && d.name === doc.name);
        const at = this.attached.findIndex(same);
        if (at >= 0) this.attached = [...this.attached.slice(0, at), doc, ...this.attached.slice(at + 1).filter((d) => !same(d))];
        if (this.library) this.library = { ...this.library, documents: this.library.documents.map((d) => (d.id === doc.id ? doc : d)) };
        return;
      }
      case 'failed': {
        const { name, error, failure } = event.data;
        const { [name]: _done, ...rest } = this.progress;
        this.progress = rest;
        this.forgetTimeLeft(name);
        this.failed = [...this.failed.filter((f) => f.name !== name), { name, error, failure, kept: false }];
        // It was listed while being read; it is not attached (nor kept) now. A file of the same
        // name that was read (it has passages) stays.
        this.attached = this.attached.filter((d) => !(d.name === name && d.passages === 0));
        return;
      }
      case 'finished': {
        this.progress = {};
        this.timeLeft = {};
        this.estimates.clear();
        this.stopping = false;
        const unread = event.data.unread;
        if (event.data.cancelled) this.stopped = unread;
        this.attached = this.attached.filter((d) => !(d.id === 0 && unread.includes(d.name))).map((d) => ({ ...d, indexing: false }));
        if (this.library) await this.refreshLibrary();
        // Continue indexing embedded what a cancel left: the rows say it is all indexed now.
        if (!event.data.cancelled && this.attached.some((d) => d.waiting > 0)) await this.refreshAttached();
        return;
      }
    }
  }
}
