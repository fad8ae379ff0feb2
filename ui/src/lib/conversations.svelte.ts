// The conversation list: the saved conversations (filtered by the search), the one open, the
// unsent text of each, and what is done to them (open, rename, delete, export). Whoever shows
// something of the open conversation subscribes to `onShow`. It talks to the backend only
// through its slice of `api`.
import { t } from './i18n/index.svelte';
import type { Api } from './api';
import type { Conversation, ConversationSettings, ConversationSummary, ExportFormat, Receipt } from './types';
import type { Notifications } from './notifications.svelte';

export type ConversationsApi = Pick<
  Api,
  | 'listConversations'
  | 'createConversation'
  | 'getConversation'
  | 'renameConversation'
  | 'deleteConversation'
  | 'updateConversationSettings'
  | 'exportConversation'
  | 'showBranch'
  | 'pickSavePath'
  | 'pickFolder'
>;

/** The draft key of a conversation not created yet (it is created on the first send). */
export const NEW = '';

export class ConversationList {
  conversations = $state<ConversationSummary[]>([]);
  search = $state('');
  /** The open conversation; null: a new one, created when its first message is sent. */
  current = $state<Conversation | null>(null);
  /** Unsent text per conversation (NEW for a conversation not created yet). */
  drafts = $state<Record<string, string>>({});

  private readonly shown: ((conversation: Conversation | null) => void)[] = [];

  /** `isAnswering`: whether an answer is being written now (its conversations stay). */
  constructor(
    private readonly api: ConversationsApi,
    private readonly notifications: Notifications,
    private readonly isAnswering: () => boolean,
    /** Where the save dialog opens: the user's Documents folder, else home (null: unknown). */
    private readonly documentsDir: () => string | null = () => null,
  ) {}

  /** Calls `handler` whenever a conversation is opened or a new one started (null). */
  onShow(handler: (conversation: Conversation | null) => void): void {
    this.shown.push(handler);
  }

  /** The draft key of the open conversation. */
  get draftKey(): string {
    return this.current?.id ?? NEW;
  }

  /** The last receipt of the open conversation. */
  get lastReceipt(): Receipt | null {
    const messages = this.current?.messages ?? [];
    for (let i = messages.length - 1; i >= 0; i--) {
      const receipt = messages[i].receipt;
      if (receipt) return receipt;
    }
    return null;
  }

  /** At start: the list, and the latest conversation opened unless the user already began one. */
  async load(): Promise<void> {
    await this.refresh();
    if (!this.current && !this.isAnswering() && this.conversations.length > 0 && !this.drafts[NEW]) {
      await this.open(this.conversations[0].id);
    }
  }

  async refresh(): Promise<void> {
    try {
      this.conversations = await this.api.listConversations(this.search.trim());
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  /** Start a new conversation; it is saved when its first message is sent. */
  startNew(): void {
    this.current = null;
    this.shown.forEach((handler) => handler(null));
  }

  async open(id: string): Promise<void> {
    try {
      this.current = await this.api.getConversation(id);
      this.shown.forEach((handler) => handler(this.current));
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  /** Save the open (new) conversation: its first message is about to be sent. */
  async create(): Promise<Conversation> {
    const created = await this.api.createConversation();
    this.current = created;
    const { [NEW]: _sent, ...rest } = this.drafts;
    this.drafts = rest;
    return created;
  }

  /** Read the open conversation `id` again (the backend may have saved part of a failed turn). */
  async reload(id: string): Promise<void> {
    if (this.current?.id !== id) return;
    try {
      const conversation = await this.api.getConversation(id);
      if (this.current?.id === id) this.current = conversation;
    } catch {
      /* keep what is on screen */
    }
  }

  /** Show another version of the edited message `messageId` of the open conversation, with the
   *  conversation that followed it. */
  async showBranch(messageId: number): Promise<void> {
    const id = this.current?.id;
    if (id === undefined) return;
    try {
      const conversation = await this.api.showBranch(id, messageId);
      if (this.current?.id === id) this.current = conversation;
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  /** A conversation's line as the backend has it now (an answer's `started` event carries
   *  it): placed at the top of the list without listing again. Only when the line moves (a
   *  new conversation, or one that was not the latest) while a search filters the list is the
   *  list asked again, since the backend alone knows what the search matches. */
  async place(line: ConversationSummary): Promise<void> {
    if (this.current?.id === line.id) this.current.title = line.title;
    const top = this.conversations[0];
    if (top?.id === line.id) {
      this.conversations = [{ ...line, snippet: top.snippet }, ...this.conversations.slice(1)];
    } else if (this.search.trim()) {
      await this.refresh();
    } else {
      this.conversations = [line, ...this.conversations.filter((c) => c.id !== line.id)];
    }
  }

  /** The title conversation `id` now has (renamed by the user); its place in the list stays. */
  private retitle(id: string, title: string): void {
    if (this.current?.id === id) this.current.title = title;
    this.conversations = this.conversations.map((c) => (c.id === id ? { ...c, title } : c));
  }

  setDraft(text: string, key: string = this.draftKey): void {
    this.drafts = { ...this.drafts, [key]: text };
  }

  async rename(id: string, title: string): Promise<void> {
    const clean = title.trim();
    if (!clean) return;
    try {
      await this.api.renameConversation(id, clean);
      // Keep the list's order: only the title changes.
      this.retitle(id, clean);
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  async remove(id: string): Promise<void> {
    try {
      await this.api.deleteConversation(id);
      if (this.current?.id === id) this.startNew();
      const { [id]: _gone, ...rest } = this.drafts;
      this.drafts = rest;
      await this.refresh();
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  /** Export through the system's save dialog; says where the file went. */
  async exportAs(id: string, format: ExportFormat): Promise<void> {
    const extension = format === 'json' ? 'json' : 'md';
    const title = this.conversations.find((c) => c.id === id)?.title ?? 'conversation';
    const stem = title.replace(/[^\p{L}\p{N} _-]+/gu, '').trim().slice(0, 60) || 'conversation';
    try {
      const dir = this.documentsDir();
      const file = `${stem}.${extension}`;
      const path = await this.api.pickSavePath(t('export.dialogOne'), dir ? `${dir.replace(/\/+$/, '')}/${file}` : file, extension);
      if (path === null) return;
      const written = await this.api.exportConversation(id, format, path);
      this.notifications.toast('info', t('export.savedOne', { path: written }));
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  /** Export every conversation into one folder the user picks. */
  async exportAll(format: ExportFormat): Promise<void> {
    try {
      const dir = await this.api.pickFolder(t('export.dialogAll'));
      if (dir === null) return;
      const all = await this.api.listConversations('');
      // Given a folder, the backend picks a new name per conversation and replaces nothing.
      for (const c of all) await this.api.exportConversation(c.id, format, dir);
      this.notifications.toast('info', t('export.savedAll', { count: all.length, path: dir }));
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  /** Delete every saved conversation (the caller asked the user first). */
  async deleteAll(): Promise<void> {
    if (this.isAnswering()) {
      this.notifications.toast('warning', t('settings.deleteAllBusy'));
      return;
    }
    try {
      const all = await this.api.listConversations('');
      for (const c of all) await this.api.deleteConversation(c.id);
      this.drafts = {};
      this.startNew();
      await this.refresh();
      this.notifications.toast('info', t('settings.deletedAll', { count: all.length }));
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  async saveSettings(settings: ConversationSettings): Promise<void> {
    if (!this.current) return;
    try {
      await this.api.updateConversationSettings(this.current.id, settings);
      this.current.settings = settings;
    } catch (error) {
      this.notifications.fail(error);
    }
  }
}
