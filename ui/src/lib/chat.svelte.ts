// The app's state: conversations, the open conversation, the answer being streamed and its live
// numbers. Components read it and call its methods; it talks to the backend only through `api`.
import type { Api } from './api';
import { BackendError } from './api';
import type {
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
  Message,
  ModelStatus,
  Notice,
  Receipt,
  RemoteServer,
  Settings,
} from './types';

export type View = 'chat' | 'models';

/** Fallback when the backend has not said how long a message may be. */
export const DEFAULT_MAX_MESSAGE_CHARS = 100_000;

/** Why a message cannot be sent as it is, in plain words; null if it can. */
export function validateMessage(text: string, maxChars: number): string | null {
  if (text.trim().length === 0) return 'Type a message first.';
  if (text.length > maxChars) {
    return `This message is ${text.length.toLocaleString('en')} characters long; Hearth can send at most ${maxChars.toLocaleString('en')} at once. Shorten it or send it in parts. Your text is still in the box.`;
  }
  return null;
}

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
  current = $state<Conversation | null>(null);
  view = $state<View>('chat');

  streaming = $state(false);
  stopping = $state(false);
  live = $state<LiveStats | null>(null);
  promptTokens = $state(0);
  contextLimit = $state(0);
  trimmedMessages = $state(0);
  loadingModel = $state(false);

  notices = $state<Notice[]>([]);
  error = $state<string | null>(null);
  /** Text the composer should show again (after a failed send). */
  draft = $state('');

  constructor(private readonly api: Api) {}

  get model(): ModelStatus | null {
    return this.status?.model ?? null;
  }

  get maxMessageChars(): number {
    return this.status?.max_message_chars ?? DEFAULT_MAX_MESSAGE_CHARS;
  }

  /** The last receipt of the open conversation, shown when nothing is streaming. */
  get lastReceipt() {
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

  private fail(error: unknown): void {
    this.error = error instanceof Error ? error.message : String(error);
  }

  async init(): Promise<void> {
    try {
      const [status, settings] = await Promise.all([this.api.appStatus(), this.api.getSettings()]);
      this.status = status;
      this.settings = settings;
      this.notices = status.notices;
      this.contextLimit = status.model?.context_length ?? 0;
      this.models = await this.api.listLocalModels();
      void this.refreshRemote();
      await this.refreshConversations();
      // The user may already have started typing or sending while the model loaded.
      if (!this.current && !this.streaming && this.conversations.length > 0) {
        await this.openConversation(this.conversations[0].id);
      }
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

  async newConversation(): Promise<void> {
    if (this.streaming) return;
    try {
      this.current = await this.api.createConversation();
      this.view = 'chat';
      this.live = null;
      this.promptTokens = 0;
      this.trimmedMessages = 0;
      await this.refreshConversations();
    } catch (error) {
      this.fail(error);
    }
  }

  async openConversation(id: string): Promise<void> {
    if (this.streaming) return;
    try {
      this.current = await this.api.getConversation(id);
      this.view = 'chat';
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
      await this.refreshConversations();
    } catch (error) {
      this.fail(error);
    }
  }

  async remove(id: string): Promise<void> {
    try {
      await this.api.deleteConversation(id);
      if (this.current?.id === id) this.current = null;
      await this.refreshConversations();
    } catch (error) {
      this.fail(error);
    }
  }

  async exportAs(id: string, format: ExportFormat): Promise<void> {
    try {
      const path = await this.api.exportConversation(id, format);
      this.notices = [...this.notices, { level: 'info', message: `Saved the conversation to ${path}` }];
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
      this.remoteError = error instanceof Error ? error.message : String(error);
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
      this.remoteError = error instanceof Error ? error.message : String(error);
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

  async selectModel(name: string, backend: BackendKind | null = null): Promise<void> {
    if (this.streaming || this.loadingModel) return;
    this.loadingModel = true;
    try {
      this.pickerError = null;
      const model = await this.api.selectModel(name, backend);
      if (this.status) this.status = { ...this.status, model, model_error: null };
      this.contextLimit = model.context_length;
    } catch (error) {
      // Shown next to the picker, where the choice was made.
      this.pickerError = error instanceof Error ? error.message : String(error);
    } finally {
      this.loadingModel = false;
    }
  }

  dismissNotice(index: number): void {
    this.notices = this.notices.filter((_, i) => i !== index);
  }

  /** Send a new message. Returns false (and says why) if it was not sent. */
  async send(text: string): Promise<boolean> {
    const problem = validateMessage(text, this.maxMessageChars);
    if (problem) {
      this.error = problem;
      return false;
    }
    if (!this.current) await this.newConversation();
    if (!this.current) return false;
    return this.run({ kind: 'send', content: text }, text);
  }

  async regenerate(): Promise<boolean> {
    return this.run({ kind: 'regenerate' });
  }

  async editAndResend(messageId: number, text: string): Promise<boolean> {
    const problem = validateMessage(text, this.maxMessageChars);
    if (problem) {
      this.error = problem;
      return false;
    }
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

  private async run(action: ChatAction, draft?: string): Promise<boolean> {
    const conversation = this.current;
    if (!conversation || this.streaming) return false;
    this.error = null;
    this.streaming = true;
    this.stopping = false;
    this.live = { generated_tokens: 0, ttft_secs: null, tokens_per_second: null, elapsed_secs: 0 };
    let finished = false;
    const onEvent = (event: ChatEvent) => {
      if (this.current?.id !== conversation.id) return;
      finished = this.apply(action, event) || finished;
    };
    try {
      await this.api.startAnswer(conversation.id, action, onEvent);
      return true;
    } catch (error) {
      if (draft !== undefined) this.draft = draft;
      this.fail(error);
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
      this.stopping = false;
      if (!finished) this.live = this.live && { ...this.live };
      await this.refreshConversations();
      // The first message names the conversation: show the new title.
      const listed = this.conversations.find((c) => c.id === conversation.id);
      if (listed && this.current?.id === conversation.id) this.current.title = listed.title;
    }
  }

  /** Apply one streamed event; true when the answer is finished. */
  private apply(action: ChatAction, event: ChatEvent): boolean {
    const conversation = this.current;
    if (!conversation) return false;
    switch (event.event) {
      case 'started': {
        const { user_message, assistant_message } = event.data;
        let messages = conversation.messages;
        if (action.kind === 'regenerate') {
          while (messages.length > 0 && messages[messages.length - 1].role === 'assistant') {
            messages = messages.slice(0, -1);
          }
        } else if (action.kind === 'edit') {
          const at = messages.findIndex((m) => m.id === action.message_id);
          if (at >= 0) messages = messages.slice(0, at);
        }
        conversation.messages = [...messages, ...(user_message ? [user_message] : []), assistant_message];
        this.promptTokens = event.data.prompt_tokens;
        this.contextLimit = event.data.context_limit;
        this.trimmedMessages = event.data.trimmed_messages;
        if (this.status) this.status = { ...this.status, model: event.data.model, model_error: null };
        return false;
      }
      case 'token': {
        const last = conversation.messages[conversation.messages.length - 1];
        if (last && last.role === 'assistant') last.content += event.data.text;
        return false;
      }
      case 'stats':
        this.live = event.data;
        return false;
      case 'done': {
        const index = conversation.messages.length - 1;
        if (index >= 0) conversation.messages[index] = event.data.message;
        const r = event.data.message.receipt;
        if (r) {
          this.live = ChatStore.liveFromReceipt(r);
          this.promptTokens = r.prompt_tokens;
        }
        return true;
      }
      case 'error': {
        this.error = event.data.message;
        const last = conversation.messages[conversation.messages.length - 1];
        if (last && last.role === 'assistant') last.state = 'error';
        return true;
      }
    }
  }
}
