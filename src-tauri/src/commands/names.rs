// The names of the commands the web UI may call: the one list. `build.rs` includes this file to
// declare them to Tauri (each becomes an `allow-<name>` permission); tests check that the
// capability file grants exactly these, that `generate_handler!` in lib.rs registers each, and
// `ui/src/lib/bindings.ts` carries them as the `Command` type that `api.ts` calls with.

/// Every command of the app, by the name the UI invokes.
pub const COMMANDS: &[&str] = &[
    "app_status",
    "list_local_models",
    "select_model",
    "get_settings",
    "save_settings",
    "list_conversations",
    "create_conversation",
    "get_conversation",
    "show_branch",
    "rename_conversation",
    "delete_conversation",
    "update_conversation_settings",
    "export_conversation",
    "start_answer",
    "stop_answer",
    "npu_status",
    "power_sample",
    "compare_backends",
    "models_overview",
    "pull_model",
    "pause_download",
    "cancel_download",
    "remove_model",
    "import_model",
    "found_models",
    "import_found",
    "set_default_model",
    "remote_server",
    "save_remote_server",
    "test_remote_server",
    "forget_remote_server",
];
