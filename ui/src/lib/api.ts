// The ONLY module that talks to the Rust side (invoke + Channel). Components call these functions,
// so tests can swap the backend with mockIPC. Area modules (models, npu) add their functions here.
import { invoke, Channel } from '@tauri-apps/api/core';
import type {
  AppStatus,
  ChatAction,
  ChatEvent,
  Conversation,
  ConversationSettings,
  ConversationSummary,
  ExportFormat,
  BackendKind,
  LocalModel,
  ModelStatus,
  RemoteServer,
  Settings,
} from './types';
import type { NpuDiagnosis, PowerSample } from './npu';
import type { InstalledModel, ModelsOverview, PullProgress, PullResult, Removed } from './models';

/** An error from the backend, with a stable code and a message meant for the user. */
export class BackendError extends Error {
  constructor(
    public readonly code: string,
    message: string,
    public readonly command: string,
  ) {
    super(message);
    this.name = 'BackendError';
  }
}

function isCodedError(value: unknown): value is { code: string; message: string } {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { code?: unknown }).code === 'string' &&
    typeof (value as { message?: unknown }).message === 'string'
  );
}

/** Turn whatever invoke rejected with into a BackendError with a readable message. */
export function toBackendError(command: string, raw: unknown): BackendError {
  if (raw instanceof BackendError) return raw;
  if (isCodedError(raw)) return new BackendError(raw.code, raw.message, command);
  if (typeof raw === 'string') return new BackendError('ipc', raw, command);
  if (raw instanceof Error) return new BackendError('ipc', raw.message, command);
  return new BackendError('ipc', `The app's backend did not answer "${command}" properly.`, command);
}

async function call<T>(command: string, args?: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(command, args);
  } catch (raw) {
    const error = toBackendError(command, raw);
    console.error(`ipc-> ${command}`, args, error);
    throw error;
  }
}

export const api = {
  appStatus: () => call<AppStatus>('app_status'),

  listLocalModels: () => call<LocalModel[]>('list_local_models'),
  /** Load a local model, or with backend 'remote' the model of that id on the saved server. */
  selectModel: (name: string, backend: BackendKind | null = null) =>
    call<ModelStatus>('select_model', { name, backend }),

  remoteServer: () => call<RemoteServer | null>('remote_server'),
  /** apiKey: null keeps the saved key, '' removes it. model: null keeps the saved choice. */
  saveRemoteServer: (url: string, apiKey: string | null, model: string | null) =>
    call<RemoteServer>('save_remote_server', { url, apiKey, model }),
  /** The server's model ids; apiKey null uses the saved key. */
  testRemoteServer: (url: string, apiKey: string | null) => call<string[]>('test_remote_server', { url, apiKey }),
  forgetRemoteServer: () => call<void>('forget_remote_server'),

  getSettings: () => call<Settings>('get_settings'),
  saveSettings: (settings: Settings) => call<Settings>('save_settings', { settings }),

  listConversations: (query: string) => call<ConversationSummary[]>('list_conversations', { query }),
  createConversation: () => call<Conversation>('create_conversation'),
  getConversation: (id: string) => call<Conversation>('get_conversation', { id }),
  renameConversation: (id: string, title: string) => call<void>('rename_conversation', { id, title }),
  deleteConversation: (id: string) => call<void>('delete_conversation', { id }),
  updateConversationSettings: (id: string, settings: ConversationSettings) =>
    call<void>('update_conversation_settings', { id, settings }),
  exportConversation: (id: string, format: ExportFormat) =>
    call<string>('export_conversation', { id, format }),

  npuStatus: () => call<NpuDiagnosis>('npu_status'),
  powerSample: () => call<PowerSample>('power_sample'),

  /** Start an answer; events arrive on `onEvent` until a `done` or `error` event. */
  startAnswer: (conversationId: string, action: ChatAction, onEvent: (event: ChatEvent) => void) => {
    const channel = new Channel<ChatEvent>();
    channel.onmessage = onEvent;
    return call<void>('start_answer', { conversationId, action, onEvent: channel });
  },
  stopAnswer: () => call<void>('stop_answer'),

  modelsOverview: () => call<ModelsOverview>('models_overview'),
  /** Download or resume `query` (catalog id or owner/name); progress arrives on `onProgress`. */
  pullModel: (query: string, onProgress: (p: PullProgress) => void) => {
    const channel = new Channel<PullProgress>();
    channel.onmessage = onProgress;
    return call<PullResult>('pull_model', { query, onProgress: channel });
  },
  pauseDownload: (name: string) => call<void>('pause_download', { name }),
  cancelDownload: (name: string) => call<number>('cancel_download', { name }),
  removeModel: (name: string) => call<Removed>('remove_model', { name }),
  importModel: (dir: string, name: string | null) => call<InstalledModel>('import_model', { dir, name }),
  setDefaultModel: (name: string) => call<void>('set_default_model', { name }),
};

export type Api = typeof api;
