// Shapes that cross the IPC boundary. They mirror the serde types in src-tauri/src and
// crates/chat (same field names).

import type { EnergyReport } from './npu';

export type Role = 'system' | 'user' | 'assistant';

/** Sampling settings (hearth-engine SamplingParams). */
export interface Sampling {
  temperature: number;
  top_k: number;
  top_p: number;
  min_p: number;
  repetition_penalty: number;
  seed: number;
}

/** Per-conversation settings: system prompt and sampling. */
export interface ConversationSettings {
  system_prompt: string;
  sampling: Sampling;
  max_tokens: number;
  /** null: the model's default. */
  enable_thinking: boolean | null;
}

export interface ConversationSummary {
  id: string;
  title: string;
  created_at: number;
  updated_at: number;
  message_count: number;
  /** A short piece of text around the search match, when listing with a query. */
  snippet: string | null;
}

export type MessageState = 'complete' | 'streaming' | 'stopped' | 'interrupted' | 'error';

/** Where answers are computed (hearth_chat::BackendKind). */
export type BackendKind = 'cpu' | 'npu' | 'remote';

/** Timing fields a backend reports itself (FastFlowLM's, a server's usage). */
export interface BackendTimings {
  load_secs: number | null;
  prefill_secs: number | null;
  prefill_tokens_per_s: number | null;
  decode_secs: number | null;
  decode_tokens_per_s: number | null;
}

/** What an answer cost, how fast it ran and where, stored with the message (hearth_chat::Receipt). */
export interface Receipt {
  model_name: string;
  model_sha256: string | null;
  backend_kind: BackendKind;
  backend: string;
  device: string;
  runtime_version: string | null;
  prompt_tokens: number;
  generated_tokens: number;
  /** false: the counts are estimates (a server that reported none). */
  counts_exact: boolean;
  ttft_secs: number;
  decode_secs: number;
  tokens_per_second: number;
  backend_timings: BackendTimings | null;
  stop_reason: string;
  trimmed_messages: number;
  finished_at: number;
  energy?: EnergyReport | null;
}

export interface Message {
  id: number;
  role: Role;
  content: string;
  state: MessageState;
  receipt: Receipt | null;
  created_at: number;
}

/** An earlier answer, kept when the answer was written again (hearth_chat AnswerVersion). */
export interface AnswerVersion {
  /** The answer now shown in its place. */
  message_id: number;
  content: string;
  state: MessageState;
  receipt: Receipt | null;
  created_at: number;
}

export interface Conversation {
  id: string;
  title: string;
  created_at: number;
  updated_at: number;
  settings: ConversationSettings;
  messages: Message[];
  /** Earlier versions of its answers, oldest first. */
  versions?: AnswerVersion[];
}

/** The loaded model and where it runs. */
export interface ModelStatus {
  name: string;
  path: string;
  family: string;
  parameter_count: number;
  context_length: number;
  weight_format: string;
  backend_kind: BackendKind;
  backend: string;
  device: string;
  kernel: string;
  is_demo: boolean;
  sha256: string | null;
}

/** Whether a backend can run a model now, and why not (hearth_chat::Availability). */
export interface Availability {
  kind: BackendKind;
  usable: boolean;
  /** Why not, in plain words with what to do (null when usable). */
  reason: string | null;
}

/** NPU answers compared with the CPU engine's for a fixed set of prompts. */
export interface SelfTest {
  identical: number;
  total: number;
  summary: string;
}

export interface LocalModel {
  name: string;
  path: string;
  is_demo: boolean;
  /** The model Hearth opens at start (kept in the registry). */
  is_default: boolean;
  /** Where it can run on this computer, best first. */
  backends: Availability[];
  /** The NPU self-test, when one ran (null otherwise). */
  selftest?: SelfTest | null;
}

/** Emitted (Tauri event `model-loading`) while select_model loads a model. */
export interface ModelLoading {
  model: string;
  backend: 'npu' | 'cpu';
  stage: 'starting' | 'loading' | 'ready' | 'failed';
  message: string;
}

/** One side of compare_backends. */
export interface BackendRun {
  text: string;
  receipt: Receipt;
}

/** What compare_backends returns: the same prompt on the NPU and on the processor. */
export interface BackendComparison {
  npu: BackendRun | { error: string };
  cpu: BackendRun;
  texts_agree: boolean;
}

/** The saved remote server (never its key: only whether one is saved). */
export interface RemoteServer {
  url: string;
  /** host:port, to name the server in sentences. */
  host: string;
  /** The model last chosen on it. */
  model: string | null;
  has_key: boolean;
}

/** A message the app must show the user once (database recovered, demo model in use, ...). */
export interface Notice {
  level: 'info' | 'warning' | 'error';
  message: string;
}

export interface AppStatus {
  model: ModelStatus | null;
  model_error: string | null;
  notices: Notice[];
  data_dir: string;
  max_message_chars: number;
}

export type Theme = 'light' | 'dark' | 'system';

export interface Settings {
  theme: Theme;
  font_size: number;
  sampling: Sampling;
  max_tokens: number;
  system_prompt: string;
  /** CPU threads for the engine; null: automatic. */
  threads?: number | null;
}

export type ChatAction =
  | { kind: 'send'; content: string }
  | { kind: 'regenerate' }
  | { kind: 'edit'; message_id: number; content: string };

export interface LiveStats {
  generated_tokens: number;
  ttft_secs: number | null;
  tokens_per_second: number | null;
  elapsed_secs: number;
}

/** Events streamed over the Channel while an answer is generated. */
export type ChatEvent =
  | {
      event: 'started';
      data: {
        user_message: Message | null;
        assistant_message: Message;
        prompt_tokens: number;
        context_limit: number;
        trimmed_messages: number;
        model: ModelStatus;
      };
    }
  | { event: 'token'; data: { text: string } }
  | { event: 'stats'; data: LiveStats }
  | { event: 'done'; data: { message: Message } }
  /** The NPU failed mid-answer and Hearth finished it on the processor. */
  | { event: 'fallback'; data: { reason: string; backend: BackendKind } }
  | { event: 'error'; data: { code: string; message: string } };

export type ExportFormat = 'markdown' | 'json';
