//! OCR's character error rate and speed on real pages (bench/README.md, "OCR"): the test set's
//! text PDF (two English pages and one each in German, French and Spanish) is drawn by
//! pdftoppm at 150 and 300 dpi, rebuilt as image-only PDFs, and read back through
//! `hearth_documents::extract` with Tesseract (each page with its language and English).
//!
//! `cargo run --release -p hearth-documents --example ocr_bench`

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use common::scans::{character_error_rate, image_pdf, rasterize, text_pdf, PAGES};
use hearth_documents::{extract, ExtractLimits};

fn main() {
    let dir = tempfile::tempdir().unwrap();
    println!("dpi  page  language  CER     seconds");
    for dpi in [150, 300] {
        let (mut errors, mut characters, mut seconds) = (0.0, 0usize, 0.0);
        for (index, (language, lines)) in PAGES.iter().enumerate() {
            let original = common::write(dir.path(), &format!("p{index}.pdf"), &text_pdf(&[lines]));
            let picture = rasterize(&original, 1, dpi, dir.path());
            let scan = common::write(
                dir.path(),
                &format!("s{index}-{dpi}.pdf"),
                &image_pdf(&[Some(&picture)], &[]),
            );
            let mut limits = ExtractLimits::default();
            limits.ocr.languages = vec![language.to_string(), "eng".to_owned()];
            limits.ocr.dpi = dpi;
            let started = Instant::now();
            let read = extract(&scan, &limits).unwrap();
            let elapsed = started.elapsed().as_secs_f64();
            let truth = lines.join("\n");
            let cer = character_error_rate(&read.sections[0].text, &truth);
            let count = common::scans::normalized(&truth).len();
            errors += cer * count as f64;
            characters += count;
            seconds += elapsed;
            println!(
                "{dpi:<4} {:<5} {language:<9} {:>5.2}%  {elapsed:.2}",
                index + 1,
                cer * 100.0
            );
        }
        println!(
            "{dpi} dpi: CER {:.2}% over {characters} characters, {:.2} pages/s ({} pages in {seconds:.1} s)",
            errors / characters as f64 * 100.0,
            PAGES.len() as f64 / seconds,
            PAGES.len()
        );
    }
}
