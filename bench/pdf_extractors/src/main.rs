//! One PDF through one text extractor: `pdf-extractors-bench EXTRACTOR FILE.pdf RUNS`, where
//! EXTRACTOR is `pdf-extract`, `lopdf` or `pdf_oxide`. Prints one JSON object: the extractor,
//! each page's text (from the last run), the seconds of every run (parse and extract all
//! pages, from bytes already in memory), or the error. `compare.py` drives it.

use std::time::Instant;

fn pages_by(extractor: &str, bytes: &[u8]) -> Result<Vec<String>, String> {
    match extractor {
        "pdf-extract" => {
            pdf_extract::extract_text_from_mem_by_pages(bytes).map_err(|e| e.to_string())
        }
        "lopdf" => {
            let document = lopdf::Document::load_mem(bytes).map_err(|e| e.to_string())?;
            let pages: Vec<u32> = document.get_pages().keys().copied().collect();
            Ok(pages
                .iter()
                .map(|&page| document.extract_text(&[page]).unwrap_or_default())
                .collect())
        }
        "pdf_oxide" => {
            let document =
                pdf_oxide::PdfDocument::from_bytes(bytes.to_vec()).map_err(|e| e.to_string())?;
            let count = document.page_count().map_err(|e| e.to_string())?;
            Ok((0..count)
                .map(|page| document.extract_text(page).unwrap_or_default())
                .collect())
        }
        other => Err(format!("unknown extractor {other}")),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, extractor, file, runs] = args.as_slice() else {
        eprintln!("usage: pdf-extractors-bench pdf-extract|lopdf|pdf_oxide FILE.pdf RUNS");
        std::process::exit(2);
    };
    let bytes = std::fs::read(file).expect("the PDF is readable");
    let runs: usize = runs.parse().expect("RUNS is a number");
    let mut seconds = Vec::new();
    let mut outcome = Err(String::from("no run"));
    for _ in 0..runs {
        let start = Instant::now();
        // A panic inside a parser is a result too (what Hearth would catch).
        outcome = std::panic::catch_unwind(|| pages_by(extractor, &bytes))
            .unwrap_or_else(|_| Err(String::from("panicked")));
        seconds.push(start.elapsed().as_secs_f64());
        if outcome.is_err() {
            break;
        }
    }
    let json = match outcome {
        Ok(pages) => serde_json::json!({"extractor": extractor, "seconds": seconds, "pages": pages}),
        Err(error) => serde_json::json!({"extractor": extractor, "seconds": seconds, "error": error}),
    };
    println!("{json}");
}
