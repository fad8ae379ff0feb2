// Generated from the #[tauri::command] functions in src-tauri/src/commands/ by
// src-tauri/tests/bindings.rs: do not edit. After changing a command, run `npm run bindings`.
import type { Channel } from '@tauri-apps/api/core';
import type {
  AppStatus,
  BackendComparison,
  BackendKind,
  ChatAction,
  ChatEvent,
  Conversation,
  ConversationDocuments,
  ConversationSettings,
  ConversationSummary,
  DocumentEvent,
  DraftPicture,
  Dropped,
  ExportFormat,
  FoundModel,
  InstalledModel,
  Language,
  LibraryView,
  Listening,
  LocalModel,
  MessageSources,
  ModelLoading,
  ModelStatus,
  ModelsOverview,
  NpuDiagnosis,
  Opened,
  PictureUpload,
  PiperStatus,
  PowerSample,
  PullProgress,
  PullResult,
  ReadAloudEvent,
  RemoteModel,
  RemoteServer,
  Removed,
  Settings,
  ShareStatus,
  VoiceDownloaded,
  VoiceHeard,
  VoiceLevel,
  VoiceStatus,
} from './bindings';

/** Each command the UI can invoke: its arguments as Tauri reads them (camelCase keys;
 * an optional one may be left out) and what it returns. Errors are `CommandError`s. */
export interface Commands {
  app_status: { args: Record<string, never>; returns: AppStatus };
  list_local_models: { args: Record<string, never>; returns: LocalModel[] };
  select_model: { args: { name: string; backend?: BackendKind | null; npuAnyway?: boolean | null }; returns: ModelStatus };
  get_settings: { args: Record<string, never>; returns: Settings };
  save_settings: { args: { settings: Settings }; returns: Settings };
  list_conversations: { args: { query?: string | null }; returns: ConversationSummary[] };
  create_conversation: { args: Record<string, never>; returns: Conversation };
  get_conversation: { args: { id: string }; returns: Conversation };
  show_branch: { args: { conversationId: string; messageId: number }; returns: Conversation };
  rename_conversation: { args: { id: string; title: string }; returns: null };
  delete_conversation: { args: { id: string }; returns: null };
  update_conversation_settings: { args: { id: string; settings: ConversationSettings }; returns: null };
  export_conversation: { args: { id: string; format: ExportFormat; path?: string | null }; returns: string };
  start_answer: { args: { conversationId: string; action: ChatAction; onEvent: Channel<ChatEvent> }; returns: null };
  stop_answer: { args: Record<string, never>; returns: null };
  npu_status: { args: Record<string, never>; returns: NpuDiagnosis };
  power_sample: { args: Record<string, never>; returns: PowerSample };
  compare_backends: { args: { name: string; prompt: string }; returns: BackendComparison };
  models_overview: { args: Record<string, never>; returns: ModelsOverview };
  pull_model: { args: { query: string; onProgress: Channel<PullProgress> }; returns: PullResult };
  pause_download: { args: { name: string }; returns: null };
  cancel_download: { args: { name: string }; returns: number };
  remove_model: { args: { name: string }; returns: Removed };
  import_model: { args: { path: string; name?: string | null; onProgress: Channel<PullProgress> }; returns: InstalledModel };
  import_dropped: { args: { token: string; onProgress: Channel<PullProgress> }; returns: InstalledModel };
  found_models: { args: Record<string, never>; returns: FoundModel[] };
  import_found: { args: { path: string; name?: string | null; onProgress: Channel<PullProgress> }; returns: InstalledModel };
  set_default_model: { args: { name: string }; returns: null };
  relink_model: { args: { name: string; path: string }; returns: InstalledModel };
  remote_server: { args: Record<string, never>; returns: RemoteServer | null };
  save_remote_server: { args: { url: string; apiKey?: string | null; model?: string | null; seesPictures?: string[] | null }; returns: RemoteServer };
  test_remote_server: { args: { url: string; apiKey?: string | null }; returns: RemoteModel[] };
  forget_remote_server: { args: Record<string, never>; returns: null };
  share_status: { args: Record<string, never>; returns: ShareStatus };
  start_sharing: { args: { port: number }; returns: ShareStatus };
  stop_sharing: { args: Record<string, never>; returns: ShareStatus };
  pick_documents: { args: { conversationId: string; title: string; filter: string }; returns: ConversationDocuments };
  attach_dropped: { args: { conversationId: string; token: string }; returns: ConversationDocuments };
  attach_document: { args: { conversationId: string; documentId: number }; returns: ConversationDocuments };
  detach_document: { args: { conversationId: string; documentId: number }; returns: ConversationDocuments };
  conversation_documents: { args: { conversationId: string }; returns: ConversationDocuments };
  accept_remote_documents: { args: { conversationId: string }; returns: null };
  library: { args: Record<string, never>; returns: LibraryView };
  remove_document: { args: { documentId: number }; returns: LibraryView };
  message_sources: { args: { conversationId: string }; returns: MessageSources[] };
  open_document: { args: { documentId: number; page?: number | null }; returns: Opened };
  cancel_indexing: { args: Record<string, never>; returns: boolean };
  continue_indexing: { args: Record<string, never>; returns: null };
  pick_document_folder: { args: { title: string }; returns: boolean };
  keep_failed: { args: { failure: number }; returns: null };
  test_drop: { args: { paths: string[] }; returns: null };
  read_aloud_speak: { args: { messageId?: number | null; text: string; language?: Language | null }; returns: null };
  read_aloud_stop: { args: Record<string, never>; returns: null };
  piper_voices: { args: Record<string, never>; returns: PiperStatus };
  download_piper_voice: { args: { language: Language; onProgress: Channel<PullProgress> }; returns: VoiceDownloaded };
  cancel_piper_voice: { args: { language: Language }; returns: null };
  start_listening: { args: { onLevel: Channel<VoiceLevel> }; returns: Listening };
  stop_listening: { args: { language?: string | null }; returns: VoiceHeard };
  cancel_listening: { args: Record<string, never>; returns: null };
  voice_status: { args: Record<string, never>; returns: VoiceStatus };
  spoken_language: { args: { conversationId?: string | null; fallback: string }; returns: string };
  check_picture: { args: { name: string; data: string }; returns: DraftPicture };
  pick_pictures: { args: { title: string; filter: string }; returns: DraftPicture[] };
  take_dropped_pictures: { args: { token: string }; returns: DraftPicture[] };
  message_picture: { args: { messageId: number; index: number }; returns: string };
  pictures_as_documents: { args: { pictures: PictureUpload[] }; returns: string };
}

/** A command's name. */
export type CommandName = keyof Commands;

/** The events the app emits to the window, by name, with what each carries. */
export interface Events {
  'model-loading': ModelLoading;
  'documents': DocumentEvent;
  'dropped': Dropped;
  'read-aloud': ReadAloudEvent;
}
