// The app's state: conversations, the open conversation, the answer being streamed and its live
// numbers, drafts, and the notices shown as toasts. Components read it and call its methods; it
// talks to the backend only through `api`, and remembers small choices in `memory`.
import type { Api } from './api';
import { BackendError } from './api';
import type {
  AnswerVersion,
  AppStatus,
  BackendKind,
  ChatAction,
  ChatEvent,
  Conversation,
  ConversationSettings,
  ConversationSummary,
  ExportFormat,
  LiveStats,
  LocalModel,
  ModelLoading,
  ModelStatus,
  Notice,
  Receipt,
  RemoteServer,
  Settings,
} from './types';
import { plainError } from './errors';

/** The pages of the main area. Only the chat has a composer. */
export type View = 'chat' | 'models' | 'performance' | 'settings' | 'npu-help';

/** Where small UI choices are remembered (localStorage in the app, a Map in tests). */
export type Memory = Pick<Storage, 'getItem' | 'setItem'>;

/** Fallback when the backend has not said how long a message may be. */
export const DEFAULT_MAX_MESSAGE_CHARS = 100_000;

/** What "Continue" sends after an answer cut at the length limit. */
export const CONTINUE_TEXT = 'Please continue where you stopped.';

/** How long an info toast stays before it closes by itself. */
export const TOAST_MS = 6000;

/**
 * A message's length as the backend counts it (`validate_text` in src-tauri/src/answer.rs):
 * Unicode characters, not the UTF-16 units of `String.length` (an emoji is one, not two).
 */
export function messageLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** Why a message cannot be sent as it is, in plain words; null if it can. */
export function validateMessage(text: string, maxChars: number): string | null {
  if (text.trim().length === 0) return 'Type a message first.';
  const length = messageLength(text);
  if (length > maxChars) {
    return `This message is ${length.toLocaleString('en')} characters long; Hearth can send at most ${maxChars.toLocaleString('en')} at once. Shorten it or send it in parts. Your text is still in the box.`;
  }
  return null;
}

/** A transient notice in the corner; `details` holds the technical text, when there is one. */
export interface Toast {
  id: number;
  level: Notice['level'];
  message: string;
  details: string | null;
}

/** The draft key of a conversation not created yet (it is created on the first send). */
const NEW = '';

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

const memoryFallback = (): Memory => {
  const map = new Map<string, string>();
  return { getItem: (k) => map.get(k) ?? null, setItem: (k, v) => void map.set(k, v) };
};

export class ChatStore {
  status = $state<AppStatus | null>(null);
  settings = $state<Settings | null>(null);
  models = $state<LocalModel[]>([]);
  /** The saved remote server, if any, and the models it offered when last asked. */
  remote = $state<RemoteServer | null>(null);
  remoteModels = $state<string[]>([]);
  /** Why the remote server's models could not be listed, in plain words. */
  remoteError = $state<string | null>(null);
  /** Why the model last chosen in the picker could not be opened. */
  pickerError = $state<string | null>(null);
  conversations = $state<ConversationSummary[]>([]);
  search = $state('');
  /** The open conversation; null: a new one, created when its first message is sent. */
  current = $state<Conversation | null>(null);
  view = $state<View>('chat');

  streaming = $state(false);
  /** The conversation whose answer is being written. */
  streamingId = $state<string | null>(null);
  stopping = $state(false);
  live = $state<LiveStats | null>(null);
  promptTokens = $state(0);
  contextLimit = $state(0);
  trimmedMessages = $state(0);
  loadingModel = $state(false);
  /** The stage of a model being loaded (select_model's `model-loading` events). */
  modelLoading = $state<ModelLoading | null>(null);

  toasts = $state<Toast[]>([]);
  /** Why the last send failed, shown under the composer. */
  composerError = $state<string | null>(null);
  /** Why an answer failed, by message id, shown under that answer. */
  answerErrors = $state<Record<number, string>>({});
  /** The NPU failed mid-answer and the processor finished it: why, by message id. */
  fallbacks = $state<Record<number, string>>({});
  /** Unsent text per conversation (NEW for a conversation not created yet). */
  drafts = $state<Record<string, string>>({});
  /** The user message being edited. */
  editingId = $state<number | null>(null);
  /** Whether the first-run welcome card was closed (remembered). */
  welcomeDismissed = $state(false);
  /** Bumped whenever the message box should take the focus (start, new or opened conversation). */
  focusRequest = $state(0);
  /** When the answer being written started (ms, performance clock): the reading time counts from it. */
  answerStartedAt = $state(0);

  private nextToast = 1;

  constructor(
    private readonly api: Api,
    private readonly memory: Memory = memoryFallback(),
    private readonly schedule: (fn: () => void, ms: number) => void = (fn, ms) => void setTimeout(fn, ms),
  ) {
    this.welcomeDismissed = memory.getItem('hearth.welcome-dismissed') === '1';
  }

  get model(): ModelStatus | null {
    return this.status?.model ?? null;
  }

  get maxMessageChars(): number {
    return this.status?.max_message_chars ?? DEFAULT_MAX_MESSAGE_CHARS;
  }

  /** The draft key of the open conversation. */
  get draftKey(): string {
    return this.current?.id ?? NEW;
  }

  /** Whether the answer being written belongs to the open conversation. */
  get streamingHere(): boolean {
    return this.streaming && this.streamingId === (this.current?.id ?? null);
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

  /** The numbers of a finished answer, shown like live ones. */
  static liveFromReceipt(r: Receipt): LiveStats {
    return {
      generated_tokens: r.generated_tokens,
      ttft_secs: r.ttft_secs,
      tokens_per_second: r.tokens_per_second,
      elapsed_secs: r.ttft_secs + r.decode_secs,
    };
  }

  /** Show a notice in the corner; info closes by itself, warnings and errors stay until closed. */
  toast(level: Notice['level'], message: string, details: string | null = null): void {
    const id = this.nextToast++;
    this.toasts = [...this.toasts, { id, level, message, details }];
    if (level === 'info') this.schedule(() => this.dismissToast(id), TOAST_MS);
  }

  dismissToast(id: number): void {
    this.toasts = this.toasts.filter((t) => t.id !== id);
  }

  /** Close a backend notice for good: the same text is not shown again on later starts. */
  forgetNotice(toast: Toast): void {
    this.dismissToast(toast.id);
    const seen = this.dismissedNotices();
    if (!seen.includes(toast.message)) {
      this.memory.setItem('hearth.dismissed-notices', JSON.stringify([...seen, toast.message].slice(-50)));
    }
  }

  private dismissedNotices(): string[] {
    try {
      const parsed: unknown = JSON.parse(this.memory.getItem('hearth.dismissed-notices') ?? '[]');
      return Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === 'string') : [];
    } catch {
      return [];
    }
  }

  dismissWelcome(): void {
    this.welcomeDismissed = true;
    this.memory.setItem('hearth.welcome-dismissed', '1');
  }

  private fail(error: unknown): void {
    const { summary, details } = plainError(messageOf(error));
    this.toast('error', summary, details);
  }

  async init(): Promise<void> {
    try {
      const [status, settings] = await Promise.all([this.api.appStatus(), this.api.getSettings()]);
      this.status = status;
      this.settings = settings;
      const seen = this.dismissedNotices();
      for (const notice of status.notices) {
        // The built-in model has its own welcome card; the other notices show once as toasts.
        if (!seen.includes(notice.message) && !(status.model?.builtin && /^No model is downloaded yet/.test(notice.message))) {
          this.toast(notice.level, notice.message);
        }
      }
      this.contextLimit = status.model?.context_length ?? 0;
      this.models = await this.api.listLocalModels();
      void this.refreshRemote();
      await this.refreshConversations();
      // The user may already have started typing or sending while the model loaded.
      if (!this.current && !this.streaming && this.conversations.length > 0 && !this.drafts[NEW]) {
        await this.openConversation(this.conversations[0].id);
      }
      this.focusRequest++;
    } catch (error) {
      this.fail(error);
    }
  }

  async refreshConversations(): Promise<void> {
    try {
      this.conversations = await this.api.listConversations(this.search.trim());
    } catch (error) {
      this.fail(error);
    }
  }

  async refreshModels(): Promise<void> {
    try {
      this.models = await this.api.listLocalModels();
    } catch (error) {
      this.fail(error);
    }
  }

  /** Start a new conversation; it is saved when its first message is sent. */
  newConversation(): void {
    this.current = null;
    this.view = 'chat';
    this.editingId = null;
    this.composerError = null;
    if (!this.streaming) this.live = null;
    this.promptTokens = 0;
    this.trimmedMessages = 0;
    this.focusRequest++;
  }

  async openConversation(id: string): Promise<void> {
    try {
      const conversation = await this.api.getConversation(id);
      this.current = conversation;
      this.view = 'chat';
      this.editingId = null;
      this.composerError = null;
      this.focusRequest++;
      if (this.streaming) return;
      // Show the numbers of the conversation's last answer until a new one starts.
      const receipt = this.lastReceipt;
      this.live = receipt ? ChatStore.liveFromReceipt(receipt) : null;
      this.promptTokens = receipt?.prompt_tokens ?? 0;
      this.trimmedMessages = receipt?.trimmed_messages ?? 0;
    } catch (error) {
      this.fail(error);
    }
  }

  async rename(id: string, title: string): Promise<void> {
    const clean = title.trim();
    if (!clean) return;
    try {
      await this.api.renameConversation(id, clean);
      if (this.current?.id === id) this.current.title = clean;
      // Keep the list's order: only the title changes.
      this.conversations = this.conversations.map((c) => (c.id === id ? { ...c, title: clean } : c));
    } catch (error) {
      this.fail(error);
    }
  }

  async remove(id: string): Promise<void> {
    try {
      await this.api.deleteConversation(id);
      if (this.current?.id === id) this.newConversation();
      const { [id]: _gone, ...rest } = this.drafts;
      this.drafts = rest;
      await this.refreshConversations();
    } catch (error) {
      this.fail(error);
    }
  }

  /** Export through the system's save dialog; says where the file went. */
  async exportAs(id: string, format: ExportFormat): Promise<void> {
    const extension = format === 'json' ? 'json' : 'md';
    const title = this.conversations.find((c) => c.id === id)?.title ?? 'conversation';
    const stem = title.replace(/[^\p{L}\p{N} _-]+/gu, '').trim().slice(0, 60) || 'conversation';
    try {
      const path = await this.api.pickSavePath('Export the conversation', `${stem}.${extension}`, extension);
      if (path === null) return;
      const written = await this.api.exportConversation(id, format, path);
      this.toast('info', `Saved the conversation to ${written}`);
    } catch (error) {
      this.fail(error);
    }
  }

  /** Export every conversation into one folder the user picks. */
  async exportAll(format: ExportFormat): Promise<void> {
    try {
      const dir = await this.api.pickFolder('Choose a folder for the exported conversations');
      if (dir === null) return;
      const all = await this.api.listConversations('');
      // Given a folder, the backend picks a new name per conversation and replaces nothing.
      for (const c of all) await this.api.exportConversation(c.id, format, dir);
      this.toast('info', `Exported ${all.length === 1 ? 'one conversation' : `${all.length} conversations`} to ${dir}`);
    } catch (error) {
      this.fail(error);
    }
  }

  /** Delete every saved conversation (the caller asked the user first). */
  async deleteAll(): Promise<void> {
    if (this.streaming) {
      this.toast('warning', 'An answer is being written. Stop it first, then delete the conversations.');
      return;
    }
    try {
      const all = await this.api.listConversations('');
      for (const c of all) await this.api.deleteConversation(c.id);
      this.drafts = {};
      this.newConversation();
      await this.refreshConversations();
      this.toast('info', `Deleted ${all.length === 1 ? 'one conversation' : `${all.length} conversations`}.`);
    } catch (error) {
      this.fail(error);
    }
  }

  async saveConversationSettings(settings: ConversationSettings): Promise<void> {
    if (!this.current) return;
    try {
      await this.api.updateConversationSettings(this.current.id, settings);
      this.current.settings = settings;
    } catch (error) {
      this.fail(error);
    }
  }

  async saveSettings(settings: Settings): Promise<void> {
    try {
      this.settings = await this.api.saveSettings(settings);
    } catch (error) {
      this.fail(error);
    }
  }

  /** The saved remote server and, if one is set, the models it offers now. */
  async refreshRemote(): Promise<void> {
    try {
      this.remote = await this.api.remoteServer();
    } catch (error) {
      this.remoteError = messageOf(error);
      return;
    }
    if (!this.remote) {
      this.remoteModels = [];
      this.remoteError = null;
      return;
    }
    try {
      this.remoteModels = await this.api.testRemoteServer(this.remote.url, null);
      this.remoteError = null;
    } catch (error) {
      this.remoteModels = this.remote.model ? [this.remote.model] : [];
      this.remoteError = messageOf(error);
    }
  }

  /** Save the remote server (see api.saveRemoteServer); errors are thrown to the form. */
  async saveRemote(url: string, apiKey: string | null, model: string | null): Promise<void> {
    this.remote = await this.api.saveRemoteServer(url, apiKey, model);
    await this.refreshRemote();
  }

  /** Forget the remote server; a remote model in use is closed, so reload the status. */
  async forgetRemote(): Promise<void> {
    await this.api.forgetRemoteServer();
    this.remote = null;
    this.remoteModels = [];
    this.remoteError = null;
    if (this.model?.backend_kind === 'remote') {
      const status = await this.api.appStatus();
      this.status = status;
      this.contextLimit = status.model?.context_length ?? 0;
    }
  }

  /** A `model-loading` event from the backend. */
  onModelLoading(loading: ModelLoading): void {
    // Ready, failed and stopped (FastFlowLM idle; it starts again with the next answer) all
    // mean nothing is loading now.
    const settled = loading.stage === 'ready' || loading.stage === 'failed' || loading.stage === 'stopped';
    this.modelLoading = settled ? null : loading;
  }

  /** Load `name` (on `backend`; null: the best one). `npuAnyway` tries the NPU with a model
   *  FastFlowLM is known to fail with, for testers ("Try on the NPU anyway"). */
  async selectModel(name: string, backend: BackendKind | null = null, npuAnyway = false): Promise<void> {
    if (this.streaming || this.loadingModel) return;
    this.loadingModel = true;
    // Until the backend's first event, say what is happening.
    if (backend === 'npu' || backend === 'cpu') {
      this.modelLoading = { model: name, backend, stage: 'starting', message: '' };
    }
    try {
      this.pickerError = null;
      const model = npuAnyway ? await this.api.tryOnNpuAnyway(name) : await this.api.selectModel(name, backend);
      if (this.status) this.status = { ...this.status, model, model_error: null };
      this.contextLimit = model.context_length;
    } catch (error) {
      // Shown next to the picker, where the choice was made.
      this.pickerError = plainError(messageOf(error)).summary;
    } finally {
      this.loadingModel = false;
      this.modelLoading = null;
    }
  }

  setDraft(text: string, key: string = this.draftKey): void {
    this.drafts = { ...this.drafts, [key]: text };
  }

  /** Send a new message. Returns false (and says why, under the composer) if it was not sent. */
  async send(text: string): Promise<boolean> {
    const problem = validateMessage(text, this.maxMessageChars);
    if (problem) {
      this.composerError = problem;
      return false;
    }
    this.composerError = null;
    if (!this.current) {
      try {
        this.current = await this.api.createConversation();
        const { [NEW]: _sent, ...rest } = this.drafts;
        this.drafts = rest;
      } catch (error) {
        this.composerError = plainError(messageOf(error)).summary;
        return false;
      }
    }
    this.setDraft('');
    const sent = await this.run({ kind: 'send', content: text });
    // Put the text back for this conversation only, once; the composer shows it.
    if (!sent && this.current) this.setDraft(text, this.current.id);
    return sent;
  }

  /** Ask the model to go on after an answer that stopped at the length limit. */
  async continueAnswer(): Promise<boolean> {
    return this.send(CONTINUE_TEXT);
  }

  async regenerate(): Promise<boolean> {
    return this.run({ kind: 'regenerate' });
  }

  async editAndResend(messageId: number, text: string): Promise<boolean> {
    const problem = validateMessage(text, this.maxMessageChars);
    if (problem) {
      this.composerError = problem;
      return false;
    }
    this.editingId = null;
    return this.run({ kind: 'edit', message_id: messageId, content: text });
  }

  async stop(): Promise<void> {
    if (!this.streaming || this.stopping) return;
    this.stopping = true;
    try {
      await this.api.stopAnswer();
    } catch (error) {
      this.fail(error);
    }
  }

  private async run(action: ChatAction): Promise<boolean> {
    const conversation = this.current;
    if (!conversation || this.streaming) return false;
    this.composerError = null;
    this.streaming = true;
    this.streamingId = conversation.id;
    this.stopping = false;
    this.live = { generated_tokens: 0, ttft_secs: null, tokens_per_second: null, elapsed_secs: 0 };
    this.answerStartedAt = performance.now();
    let finished = false;
    const onEvent = (event: ChatEvent) => {
      finished = this.apply(conversation.id, action, event) || finished;
    };
    try {
      await this.api.startAnswer(conversation.id, action, onEvent);
      return true;
    } catch (error) {
      this.composerError = plainError(messageOf(error)).summary;
      if (error instanceof BackendError && this.current?.id === conversation.id) {
        // The backend may have saved part of the turn before failing: show what is stored.
        try {
          this.current = await this.api.getConversation(conversation.id);
        } catch {
          /* keep what is on screen */
        }
      }
      return false;
    } finally {
      this.streaming = false;
      this.streamingId = null;
      this.stopping = false;
      if (!finished) this.live = this.live && { ...this.live };
      await this.refreshConversations();
      // The first message names the conversation: show the new title.
      const listed = this.conversations.find((c) => c.id === conversation.id);
      if (listed && this.current?.id === conversation.id) this.current.title = listed.title;
    }
  }

  /** Apply one streamed event of `conversationId`; true when the answer is finished. */
  private apply(conversationId: string, action: ChatAction, event: ChatEvent): boolean {
    // Numbers and the model follow the answer wherever the user is; messages only when its
    // conversation is open.
    const conversation = this.current?.id === conversationId ? this.current : null;
    switch (event.event) {
      case 'started': {
        this.promptTokens = event.data.prompt_tokens;
        this.contextLimit = event.data.context_limit;
        this.trimmedMessages = event.data.trimmed_messages;
        if (this.status && event.data.model) this.status = { ...this.status, model: event.data.model, model_error: null };
        // A new conversation is listed (under its first message) as soon as its answer starts.
        if (action.kind === 'send') void this.refreshConversations();
        if (!conversation) return false;
        const { user_message, assistant_message } = event.data;
        let messages = conversation.messages;
        if (action.kind === 'regenerate') {
          // The answers written again become earlier versions of the new one (as the backend
          // keeps them), each after its own earlier versions.
          const kept: AnswerVersion[] = [];
          const earlier = conversation.versions ?? [];
          let at = messages.length;
          while (at > 0 && messages[at - 1].role === 'assistant') at--;
          for (const old of messages.slice(at)) {
            kept.push(...earlier.filter((v) => v.message_id === old.id));
            if (old.content.trim()) kept.push({ message_id: old.id, content: old.content, state: old.state, receipt: old.receipt, created_at: old.created_at });
          }
          const replaced = new Set(messages.slice(at).map((m) => m.id));
          conversation.versions = [
            ...earlier.filter((v) => !replaced.has(v.message_id)),
            ...kept.map((v) => ({ ...v, message_id: assistant_message.id })),
          ];
          messages = messages.slice(0, at);
        } else if (action.kind === 'edit') {
          const at = messages.findIndex((m) => m.id === action.message_id);
          if (at >= 0) messages = messages.slice(0, at);
        }
        conversation.messages = [...messages, ...(user_message ? [user_message] : []), assistant_message];
        return false;
      }
      case 'token': {
        const last = conversation?.messages[conversation.messages.length - 1];
        if (last && last.role === 'assistant') last.content += event.data.text;
        return false;
      }
      case 'stats':
        this.live = event.data;
        return false;
      case 'fallback': {
        const last = conversation?.messages[conversation.messages.length - 1];
        if (last && last.role === 'assistant') this.fallbacks = { ...this.fallbacks, [last.id]: event.data.reason };
        return false;
      }
      case 'done': {
        const r = event.data.message.receipt;
        if (r) {
          this.live = ChatStore.liveFromReceipt(r);
          this.promptTokens = r.prompt_tokens;
        }
        if (!conversation) return true;
        const index = conversation.messages.findIndex((m) => m.id === event.data.message.id);
        const at = index >= 0 ? index : conversation.messages.length - 1;
        if (at >= 0) conversation.messages[at] = event.data.message;
        return true;
      }
      case 'error': {
        const last = conversation?.messages[conversation.messages.length - 1];
        if (last && last.role === 'assistant') {
          last.state = 'error';
          this.answerErrors = { ...this.answerErrors, [last.id]: event.data.message };
        } else {
          this.composerError = plainError(event.data.message).summary;
        }
        return true;
      }
    }
  }
}

