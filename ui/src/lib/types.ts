// The shapes that cross the IPC boundary, under the names the UI uses. They are generated from
// the Rust types (src-tauri and the domain crates) into bindings.ts by `npm run bindings`; a Rust
// test fails while that file is stale, and `npm test` type-checks the UI against it.

export type {
  AnswerVersion,
  AppStatus,
  Availability,
  BackendComparison,
  BackendKind,
  BackendRun,
  BackendTimings,
  ChatAction,
  ChatEvent,
  Conversation,
  ConversationSettings,
  ConversationSummary,
  ErrorCode,
  ExportFormat,
  LiveStats,
  LocalModel,
  Message,
  MessageState,
  ModelLoading,
  ModelStatus,
  Notice,
  Receipt,
  RemoteServer,
  Role,
  Sampling,
  SelfTest,
  Settings,
  Theme,
} from './bindings';
