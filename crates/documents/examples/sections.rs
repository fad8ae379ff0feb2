//! Prints what Hearth reads from a file, as JSON: its format, title and sections (place and
//! text). The retrieval bench (bench/documents/gold.py) turns its quotes into character ranges
//! of these texts, the same texts whose ranges `hearth search` reports.
//!
//! cargo run --release -p hearth-documents --example sections -- FILE

use hearth_documents::{extract, ExtractLimits, Place};

fn main() -> std::process::ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: sections FILE");
        return std::process::ExitCode::from(2);
    };
    match extract(path.as_ref(), &ExtractLimits::default()) {
        Ok(extracted) => {
            let sections: Vec<_> = extracted
                .sections
                .iter()
                .map(|section| {
                    let place = match &section.place {
                        Place::Page(page) => serde_json::json!({ "page": page }),
                        Place::Heading(heading) => serde_json::json!({ "heading": heading }),
                        Place::Whole => serde_json::json!({ "whole": true }),
                    };
                    serde_json::json!({ "place": place, "text": section.text })
                })
                .collect();
            let value = serde_json::json!({
                "format": extracted.format.name(),
                "title": extracted.title,
                "sections": sections,
            });
            println!("{value}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sections: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
