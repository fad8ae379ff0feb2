//! Opening a file of the library in the person's own program.

use hearth_app::open_file::Opened;
use hearth_app::App;
use tauri::State;

use crate::error::CommandResult;

/// Opens the library's document `document_id` in the desktop's program for it, at `page` where
/// that program can be told the page (`Opened::at_page` says whether it was).
#[tauri::command(async)]
pub fn open_document(
    app: State<'_, App>,
    document_id: i64,
    page: Option<u32>,
) -> CommandResult<Opened> {
    app.open_document(document_id, page)
}
