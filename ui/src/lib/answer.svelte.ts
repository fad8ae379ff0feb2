// The answer stream: sending a message (or regenerating, editing, continuing), the answer being
// written with its live numbers, stopping it, and what went wrong with it. The streamed events
// land in the open conversation of the ConversationList; the model an answer ran on goes to the
// ModelSession. It talks to the backend only through its slice of `api`.
import { t } from './i18n/index.svelte';
import type { Api } from './api';
import { BackendError } from './api';
import type { AnswerVersion, ChatAction, ChatEvent, Conversation, LiveStats, PictureUpload, Receipt } from './types';
import type { ConversationList } from './conversations.svelte';
import type { ModelSession } from './session.svelte';
import { errorText, plainError } from './errors';
import { type Notifications, messageOf } from './notifications.svelte';
import type { Source } from './documents';

export type AnswerApi = Pick<Api, 'startAnswer' | 'stopAnswer'>;

/** What "Continue" sends, in the app's language, where the model cannot write on inside its cut
 *  answer (a server, the NPU): a new answer then goes on from it. */
export function continueText(): string {
  return t('chat.continuePrompt');
}

/**
 * A message's length as the backend counts it (`validate_text` in the app crate):
 * Unicode characters, not the UTF-16 units of `String.length` (an emoji is one, not two).
 */
export function messageLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** Why a message cannot be sent as it is, in plain words; null if it can. */
export function validateMessage(text: string, maxChars: number): string | null {
  if (text.trim().length === 0) return t('composer.typeFirst');
  const length = messageLength(text);
  if (length > maxChars) {
    return t('composer.tooLongSend', { length, max: maxChars });
  }
  return null;
}

/** The numbers of a finished answer, shown like live ones. */
export function liveFromReceipt(r: Receipt): LiveStats {
  return {
    generated_tokens: r.generated_tokens,
    ttft_secs: r.ttft_secs,
    tokens_per_second: r.tokens_per_second,
    elapsed_secs: r.ttft_secs + r.decode_secs,
  };
}

export class AnswerStream {
  streaming = $state(false);
  /** The conversation whose answer is being written. */
  streamingId = $state<string | null>(null);
  stopping = $state(false);
  /** The numbers of the answer being written, else of the open conversation's last one. */
  live = $state<LiveStats | null>(null);
  promptTokens = $state(0);
  trimmedMessages = $state(0);
  /** When the answer being written started (ms, performance clock): the reading time counts from it. */
  answerStartedAt = $state(0);
  /** Why the last send failed, shown under the composer. */
  composerError = $state<string | null>(null);
  /** The backend's refusal of the last action that failed before it started. */
  private lastFailure: BackendError | null = null;
  /** Why an answer failed, by message id, shown under that answer. */
  answerErrors = $state<Record<number, string>>({});
  /** The NPU failed mid-answer and the processor finished it: why, by message id. */
  fallbacks = $state<Record<number, string>>({});
  /** The user message being edited. */
  editingId = $state<number | null>(null);
  /** How much of the prompt the model has read, 0..100, as the backend reports it (the
   *  processor does after each chunk it reads); null before its first report, after the first
   *  word, and all along on a backend that cannot tell (the NPU, a remote server). */
  readingPercent = $state<number | null>(null);
  private sourcesHandlers: ((messageId: number, sources: Source[]) => void)[] = [];

  constructor(
    private readonly api: AnswerApi,
    private readonly conversations: ConversationList,
    private readonly session: ModelSession,
    private readonly notifications: Notifications,
  ) {
    conversations.onShow((conversation) => this.show(conversation));
  }

  /** `handler` receives the sources an answer cites, as soon as they are known. */
  onSources(handler: (messageId: number, sources: Source[]) => void): void {
    this.sourcesHandlers.push(handler);
  }

  /** Whether the answer being written belongs to the open conversation. */
  get streamingHere(): boolean {
    return this.streaming && this.streamingId === (this.conversations.current?.id ?? null);
  }

  /** Another conversation was opened (or a new one started, null). */
  private show(conversation: Conversation | null): void {
    this.editingId = null;
    this.composerError = null;
    if (conversation === null) {
      if (!this.streaming) this.live = null;
      this.promptTokens = 0;
      this.trimmedMessages = 0;
      return;
    }
    if (this.streaming) return;
    // Show the numbers of the conversation's last answer until a new one starts.
    const receipt = this.conversations.lastReceipt;
    this.live = receipt ? liveFromReceipt(receipt) : null;
    this.promptTokens = receipt?.prompt_tokens ?? 0;
    this.trimmedMessages = receipt?.trimmed_messages ?? 0;
  }

  /** Send a new message. Returns false (and says why, under the composer) if it was not sent. */
  async send(text: string, pictures: PictureUpload[] = []): Promise<boolean> {
    const problem = validateMessage(text, this.session.maxMessageChars);
    if (problem) {
      this.composerError = problem;
      return false;
    }
    this.composerError = null;
    if (!this.conversations.current) {
      try {
        await this.conversations.create();
      } catch (error) {
        this.composerError = plainError(messageOf(error)).summary;
        return false;
      }
    }
    this.conversations.setDraft('');
    const sent = await this.run({ kind: 'send', content: text, pictures });
    // Put the text back for this conversation only, once; the composer shows it.
    const current = this.conversations.current;
    if (!sent && current) this.conversations.setDraft(text, current.id);
    return sent;
  }

  /** Write on at the end of the last answer, cut at the length limit, in the same answer; where
   *  the model cannot (the backend refuses with `unsupported`), say so and ask it to go on in a
   *  new answer (review #9). */
  async continueAnswer(): Promise<boolean> {
    const last = this.conversations.current?.messages.at(-1);
    if (!last || last.role !== 'assistant') return false;
    if (await this.run({ kind: 'continue', message_id: last.id })) return true;
    if (this.lastFailure?.code !== 'unsupported') return false;
    this.composerError = null;
    this.notifications.toast('info', t('chat.continueNewAnswer'));
    return this.send(continueText());
  }

  async regenerate(): Promise<boolean> {
    return this.run({ kind: 'regenerate' });
  }

  async editAndResend(messageId: number, text: string): Promise<boolean> {
    const problem = validateMessage(text, this.session.maxMessageChars);
    if (problem) {
      this.composerError = problem;
      return false;
    }
    this.editingId = null;
    return this.run({ kind: 'edit', message_id: messageId, content: text });
  }

  /** Stop the answer being written. */
  async stop(): Promise<void> {
    if (!this.streaming || this.stopping) return;
    this.stopping = true;
    try {
      await this.api.stopAnswer();
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  private async run(action: ChatAction): Promise<boolean> {
    const conversation = this.conversations.current;
    if (!conversation || this.streaming) return false;
    this.composerError = null;
    this.streaming = true;
    this.streamingId = conversation.id;
    this.stopping = false;
    this.live = { generated_tokens: 0, ttft_secs: null, tokens_per_second: null, elapsed_secs: 0 };
    this.readingPercent = null;
    this.answerStartedAt = performance.now();
    let finished = false;
    const onEvent = (event: ChatEvent) => {
      finished = this.apply(conversation.id, action, event) || finished;
    };
    this.lastFailure = null;
    try {
      await this.api.startAnswer(conversation.id, action, onEvent);
      return true;
    } catch (error) {
      if (error instanceof BackendError) this.lastFailure = error;
      this.composerError = plainError(messageOf(error)).summary;
      // The backend may have saved part of the turn before failing: show what is stored, and
      // list what it kept (a conversation created for this message stays, empty).
      if (error instanceof BackendError) await this.conversations.reload(conversation.id);
      await this.conversations.refresh();
      return false;
    } finally {
      this.streaming = false;
      this.streamingId = null;
      this.stopping = false;
      if (!finished) this.live = this.live && { ...this.live };
    }
  }

  /** Apply one streamed event of `conversationId`; true when the answer is finished. */
  private apply(conversationId: string, action: ChatAction, event: ChatEvent): boolean {
    // Numbers and the model follow the answer wherever the user is; messages only when its
    // conversation is open.
    const open = this.conversations.current;
    const conversation = open?.id === conversationId ? open : null;
    if (event.event === 'token') this.readingPercent = null;
    switch (event.event) {
      case 'reading': {
        const { done, total } = event.data;
        this.readingPercent = total > 0 ? Math.min(100, (done / total) * 100) : 100;
        return false;
      }
      case 'sources': {
        const answerId = conversation?.messages.findLast((m) => m.role === 'assistant')?.id;
        if (answerId !== undefined) for (const handler of this.sourcesHandlers) handler(answerId, event.data.sources);
        return false;
      }
      case 'started': {
        this.promptTokens = event.data.prompt_tokens;
        this.session.contextLimit = event.data.context_limit;
        this.trimmedMessages = event.data.trimmed_messages;
        if (event.data.model) this.session.answeredWith(event.data.model);
        // The conversation's line of the list as the turn left it (a first message names it).
        void this.conversations.place(event.data.conversation);
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
        } else if (action.kind === 'edit' || action.kind === 'continue') {
          // An edit drops what followed the message; a continue puts the answer back as it
          // stands (with its text so far), where the tokens then land.
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
          this.live = liveFromReceipt(r);
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
        // In the user's language, by its code (errors.ts).
        const text = errorText(event.data);
        if (last && last.role === 'assistant') {
          last.state = 'error';
          this.answerErrors = { ...this.answerErrors, [last.id]: text };
        } else {
          this.composerError = plainError(text).summary;
        }
        return true;
      }
    }
  }
}
