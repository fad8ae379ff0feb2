// The ONLY module that talks to the Rust side (invoke, Channel, events, the system dialogs).
// Only the stores call these functions (components never import this module), so tests can
// swap the backend with mockIPC. Each command goes through `call`, typed by the generated
// command map (commands.ts): a renamed argument or a changed return type fails svelte-check.
import { invoke, Channel, type InvokeArgs } from '@tauri-apps/api/core';
import { listen } from '@tauri-apps/api/event';
import type { CommandName, Commands, Events } from './commands';
import type { BackendKind, ChatAction, ChatEvent, ConversationSettings, ErrorCode, ExportFormat, PictureUpload, Settings } from './types';
import type { PullProgress } from './models';
import { errorText } from './errors';
import type { Language } from './bindings';
import type { VoiceLevel } from './bindings';

/** An error from the backend, with a stable code and a message meant for the user. */
export class BackendError extends Error {
  constructor(
    /** The backend's code, or 'ipc' when the call itself failed (no answer, a malformed one). */
    public readonly code: ErrorCode | 'ipc',
    message: string,
    public readonly command: string,
  ) {
    super(message);
    this.name = 'BackendError';
  }
}

function isCodedError(value: unknown): value is { code: ErrorCode; message: string } {
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
  // In the user's language, from the catalog by code, detail and params (errors.ts).
  if (isCodedError(raw)) return new BackendError(raw.code, errorText(raw), command);
  if (typeof raw === 'string') return new BackendError('ipc', raw, command);
  if (raw instanceof Error) return new BackendError('ipc', raw.message, command);
  return new BackendError('ipc', `The app's backend did not answer "${command}" properly.`, command);
}

/** The arguments of `command`: none, or the object Tauri reads. */
type ArgsOf<C extends CommandName> = Commands[C]['args'] extends Record<string, never> ? [] : [args: Commands[C]['args']];

/** Invoke one of Hearth's commands; its arguments and result are typed by the command map. */
function call<C extends CommandName>(command: C, ...args: ArgsOf<C>): Promise<Commands[C]['returns']> {
  return invokeOrThrow<Commands[C]['returns']>(command, args[0]);
}

async function invokeOrThrow<T>(command: string, args?: InvokeArgs): Promise<T> {
  try {
    return await invoke<T>(command, args);
  } catch (raw) {
    const error = toBackendError(command, raw);
    console.error(`ipc-> ${command}`, args, error);
    throw error;
  }
}

/** A dialog of tauri-plugin-dialog (not in the command map: the plugin defines it). */
function dialog(kind: 'open' | 'save', options: Record<string, unknown>): Promise<string | null> {
  return invokeOrThrow<string | null>(`plugin:dialog|${kind}`, { options });
}

/** Calls `handler` with every `name` event's payload; resolves to the function that stops it. */
function on<E extends keyof Events>(name: E, handler: (payload: Events[E]) => void): Promise<() => void> {
  return listen<Events[E]>(name, (event) => handler(event.payload));
}

export const api = {
  appStatus: () => call('app_status'),

  listLocalModels: () => call('list_local_models'),
  /** Load a local model (on backend 'npu' or 'cpu'; null: the best one), or with backend
   *  'remote' the model of that id on the saved server. Loading onto the NPU may take tens of
   *  seconds; its stages arrive through `onModelLoading`. */
  selectModel: (name: string, backend: BackendKind | null = null) =>
    call('select_model', { name, backend }),
  /** "Try on the NPU anyway": load a model on the NPU even when FastFlowLM is known to fail
   *  with it (the Models view gives the reason), for testers. */
  tryOnNpuAnyway: (name: string) =>
    call('select_model', { name, backend: 'npu', npuAnyway: true }),
  /** Calls `handler` for every `model-loading` event; resolves to the function that stops it. */
  onModelLoading: (handler: (loading: Events['model-loading']) => void) => on('model-loading', handler),
  /** The same prompt on the NPU and on the processor, with both receipts. */
  compareBackends: (name: string, prompt: string) =>
    call('compare_backends', { name, prompt }),

  remoteServer: () => call('remote_server'),
  /** apiKey: null keeps the saved key, '' removes it. model: null keeps the saved choice.
   *  seesPictures: the models switched to "sees pictures", null keeps the saved switches. */
  saveRemoteServer: (url: string, apiKey: string | null, model: string | null, seesPictures: string[] | null = null) =>
    call('save_remote_server', { url, apiKey, model, seesPictures }),
  /** The server's models, with which see pictures; apiKey null uses the saved key. */
  testRemoteServer: (url: string, apiKey: string | null) => call('test_remote_server', { url, apiKey }),
  forgetRemoteServer: () => call('forget_remote_server'),

  /** "Let other apps on this computer use Hearth": whether it is on, where, with which model. */
  shareStatus: () => call('share_status'),
  /** Serve the open model to other apps at `port` (a taken port falls back to a free one). */
  startSharing: (port: number) => call('start_sharing', { port }),
  stopSharing: () => call('stop_sharing'),

  getSettings: () => call('get_settings'),
  saveSettings: (settings: Settings) => call('save_settings', { settings }),

  listConversations: (query: string) => call('list_conversations', { query }),
  createConversation: () => call('create_conversation'),
  getConversation: (id: string) => call('get_conversation', { id }),
  renameConversation: (id: string, title: string) => call('rename_conversation', { id, title }),
  deleteConversation: (id: string) => call('delete_conversation', { id }),
  updateConversationSettings: (id: string, settings: ConversationSettings) =>
    call('update_conversation_settings', { id, settings }),
  /** Show the branch that starts at `messageId` (one version of an edited message); returns
   *  the conversation as it now shows. */
  showBranch: (conversationId: string, messageId: number) =>
    call('show_branch', { conversationId, messageId }),
  /** Write the conversation to `path` (chosen in the save dialog); returns the path written. */
  exportConversation: (id: string, format: ExportFormat, path: string | null = null) =>
    call('export_conversation', { id, format, path }),

  /** The system's folder picker; null when the user cancelled. */
  pickFolder: (title: string) => dialog('open', { directory: true, multiple: false, title }),
  /** The system's file picker showing only GGUF files (and folders to walk through); null when
   *  the user cancelled. */
  pickModelFile: (title: string) =>
    dialog('open', { directory: false, multiple: false, title, filters: [{ name: 'GGUF model (.gguf)', extensions: ['gguf', 'GGUF'] }] }),
  /** The system's save dialog; null when the user cancelled. */
  pickSavePath: (title: string, defaultPath: string, extension: string) =>
    dialog('save', { title, defaultPath, filters: [{ name: extension.toUpperCase(), extensions: [extension] }] }),

  npuStatus: () => call('npu_status'),
  powerSample: () => call('power_sample'),

  /** Start an answer; events arrive on `onEvent` until a `done` or `error` event. */
  startAnswer: (conversationId: string, action: ChatAction, onEvent: (event: ChatEvent) => void) => {
    const channel = new Channel<ChatEvent>();
    channel.onmessage = onEvent;
    return call('start_answer', { conversationId, action, onEvent: channel });
  },
  stopAnswer: () => call('stop_answer'),
  /** Read `text` aloud (answer `messageId`), in `language` or else its own; stops what was read. */
  readAloudSpeak: (messageId: number | null, text: string, language: Language | null = null) =>
    call('read_aloud_speak', { messageId, text, language }),
  readAloudStop: () => call('read_aloud_stop'),
  /** Whether `piper` is installed, and the Piper voice offered for each language. */
  piperVoices: () => call('piper_voices'),
  /** Download the Piper voice of `language`; progress arrives on `onProgress`. */
  downloadPiperVoice: (language: Language, onProgress: (p: PullProgress) => void) => {
    const channel = new Channel<PullProgress>();
    channel.onmessage = onProgress;
    return call('download_piper_voice', { language, onProgress: channel });
  },
  cancelPiperVoice: (language: Language) => call('cancel_piper_voice', { language }),
  /** Calls `handler` for every `read-aloud` event (a reading started, ended or failed). */
  onReadAloud: (handler: (event: Events['read-aloud']) => void) => on('read-aloud', handler),

  modelsOverview: () => call('models_overview'),
  /** Download or resume `query` (catalog id or owner/name); progress arrives on `onProgress`. */
  pullModel: (query: string, onProgress: (p: PullProgress) => void) => {
    const channel = new Channel<PullProgress>();
    channel.onmessage = onProgress;
    return call('pull_model', { query, onProgress: channel });
  },
  pauseDownload: (name: string) => call('pause_download', { name }),
  cancelDownload: (name: string) => call('cancel_download', { name }),
  removeModel: (name: string) => call('remove_model', { name }),
  /** Import a GGUF file or a model folder typed or picked in the import form (a GGUF file is
   *  converted; the original stays); progress on `onProgress`. */
  importModel: (path: string, name: string | null, onProgress: (p: PullProgress) => void) => {
    const channel = new Channel<PullProgress>();
    channel.onmessage = onProgress;
    return call('import_model', { path, name, onProgress: channel });
  },
  /** Import the model of a `dropped` event (its token is single-use); progress on `onProgress`. */
  importDropped: (token: string, onProgress: (p: PullProgress) => void) => {
    const channel = new Channel<PullProgress>();
    channel.onmessage = onProgress;
    return call('import_dropped', { token, onProgress: channel });
  },
  /** Files dragged over the window, away, or dropped (for the overlay only: what was dropped
   *  arrives classified in a `dropped` event); resolves to the function that stops listening. */
  onFileDrag: (handler: (drag: FileDrag) => void) =>
    Promise.all([
      listen('tauri://drag-enter', () => handler('over')),
      listen('tauri://drag-leave', () => handler('leave')),
      listen('tauri://drag-drop', () => handler('drop')),
    ]).then((stops) => () => stops.forEach((stop) => stop())),
  /** Calls `handler` with every drop on the window as the backend classified it; resolves to
   *  the function that stops it. */
  onDropped: (handler: (drop: Events['dropped']) => void) => on('dropped', handler),
  setDefaultModel: (name: string) => call('set_default_model', { name }),
  /** "Find it": link the linked model `name` to its GGUF file picked again at `path` (the same
   *  model only; another file is refused in plain words). */
  relinkModel: (name: string, path: string) => call('relink_model', { name, path }),
  // The user's files: named to the backend by a drop's token or a library id, never by path.
  // Each attach and detach returns the conversation's files and the remote notice, as
  // `conversationDocuments` does.
  /** The system's file dialog (opened by the backend); attaches what was chosen (the list unchanged if cancelled). */
  pickDocuments: (conversationId: string, title: string, filter: string) => call('pick_documents', { conversationId, title, filter }),
  /** Attach the documents of a `dropped` event (its token is single-use). */
  attachDropped: (conversationId: string, token: string) => call('attach_dropped', { conversationId, token }),
  attachDocument: (conversationId: string, documentId: number) => call('attach_document', { conversationId, documentId }),
  detachDocument: (conversationId: string, documentId: number) => call('detach_document', { conversationId, documentId }),
  conversationDocuments: (conversationId: string) => call('conversation_documents', { conversationId }),
  acceptRemoteDocuments: (conversationId: string) => call('accept_remote_documents', { conversationId }),
  library: () => call('library'),
  /** Delete a file's text and index (the original file is not touched); the library after. */
  removeDocument: (documentId: number) => call('remove_document', { documentId }),
  messageSources: (conversationId: string) => call('message_sources', { conversationId }),
  /** Open a library file in the desktop's program for it, at `page` where that program allows. */
  openDocument: (documentId: number, page: number | null) => call('open_document', { documentId, page }),
  /** Start listening to the microphone; its level and time arrive on `onLevel`. */
  startListening: (onLevel: (level: VoiceLevel) => void) => {
    const channel = new Channel<VoiceLevel>();
    channel.onmessage = onLevel;
    return call('start_listening', { onLevel: channel });
  },
  /** Stop listening and write down the words (`language`: a code, or null to detect it). */
  stopListening: (language: string | null) => call('stop_listening', { language }),
  cancelListening: () => call('cancel_listening'),
  voiceStatus: () => call('voice_status'),
  /** The language to hear in: the conversation's (from its latest messages), else `fallback`. */
  spokenLanguage: (conversationId: string | null, fallback: string) =>
    call('spoken_language', { conversationId, fallback }),
  /** Stop the indexing going now (what was read and embedded is kept); whether any was running. */
  cancelIndexing: () => call('cancel_indexing'),
  /** Embed, in the background, the passages the embedding model has no vector for yet. */
  continueIndexing: () => call('continue_indexing'),
  /** Keep a file that could not be read in the library, with why (by its `failed` event's number). */
  keepFailed: (failure: number) => call('keep_failed', { failure }),
  /** The system's folder dialog (opened by the backend); the folder chosen comes as a `dropped` event. Whether one was chosen. */
  pickDocumentFolder: (title: string) => call('pick_document_folder', { title }),

  // Pictures for the next message (crates/app's pictures.rs checks each; no path leaves the UI).
  /** Check a pasted or dropped picture (`data`: its bytes, base64). */
  checkPicture: (name: string, data: string) => call('check_picture', { name, data }),
  /** The system's file dialog showing pictures (opened by the backend); the pictures chosen, checked. */
  pickPictures: (title: string, filter: string) => call('pick_pictures', { title, filter }),
  /** The pictures of a drop on the window (by its single-use token), checked. */
  takeDroppedPictures: (token: string) => call('take_dropped_pictures', { token }),
  /** Picture `index` of a saved message, as a data: URL. */
  messagePicture: (messageId: number, index: number) => call('message_picture', { messageId, index }),
  /** Pictures for a model that does not see: kept as a drop of documents (read by OCR); its token. */
  picturesAsDocuments: (pictures: PictureUpload[]) => call('pictures_as_documents', { pictures }),
  /** Calls `handler` for every `documents` event (indexing progress, files done or failed). */
  onDocuments: (handler: (event: Events['documents']) => void) => on('documents', handler),

  /** Models other programs keep on this computer (their folders are only read). */
  foundModels: () => call('found_models'),
  /** Import a found model (converted or copied; the original stays); progress on `onProgress`. */
  importFound: (path: string, name: string | null, onProgress: (p: PullProgress) => void) => {
    const channel = new Channel<PullProgress>();
    channel.onmessage = onProgress;
    return call('import_found', { path, name, onProgress: channel });
  },
};

export type Api = typeof api;

/** A drag of files over the window: entering, leaving, or dropped. */
export type FileDrag = 'over' | 'leave' | 'drop';
