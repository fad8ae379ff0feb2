//! `hearth search`: index files into the document library (`documents.db` in Hearth's data
//! folder; a file indexed before is read again only when it changed) and print the passages that
//! best answer a question: file, page or section, character range, text and score.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Context;
use hearth_documents::{
    find_embedding_model, index, search, EmbeddingModel, EngineEmbedding, Hit, IndexSettings,
    Library, Outcome, Place, Progress, Ranking, Stage,
};

use crate::model_args::finish_output;
use crate::progress::StatusLine;
use crate::terminal::safe;

/// Search files for the passages that answer a question.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A file to search (repeat for several). It is indexed into Hearth's document library
    /// first: once, and again when it changes.
    #[arg(long = "file", value_name = "PATH", required = true)]
    files: Vec<PathBuf>,
    /// How to rank passages: keyword (BM25, no model), semantic (embeddings) or combined.
    #[arg(long, value_enum, default_value_t = RankingArg::Combined)]
    ranking: RankingArg,
    /// How many passages to print.
    #[arg(long, default_value_t = 5)]
    limit: usize,
    /// The sentence-embedding model: a folder (config.json, weights, tokenizer.json) of a BERT
    /// encoder or of a Qwen3 model, or an installed model's name (`hearth pull
    /// qwen3-embedding-0.6b` installs the multilingual Qwen3-Embedding-0.6B). By default the one
    /// that comes with Hearth (all-MiniLM-L6-v2, English); without any, ranking is by keyword
    /// only.
    #[arg(long, env = "HEARTH_EMBEDDING_MODEL", value_name = "NAME|DIR")]
    embedding_model: Option<PathBuf>,
    /// Judge the first passages found again with this model (a reranker such as
    /// Qwen3-Reranker-0.6B, or a chat model asked the same question): a folder or an installed
    /// model's name. It reads the first 20 and ranks them by its p(yes).
    #[arg(long, value_name = "NAME|DIR")]
    rerank: Option<PathBuf>,
    /// Threads for the embedding model (default: one per physical core).
    #[arg(long)]
    threads: Option<usize>,
    /// Print one JSON object: the files' outcomes and the ranked passages.
    #[arg(long)]
    json: bool,
    /// The question.
    question: String,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum RankingArg {
    Keyword,
    Semantic,
    Combined,
}

/// The folder of the installed model named `given` (a bare name that is not a folder here),
/// else `given` as a path.
fn installed_folder(store: &hearth_hub::Store, given: PathBuf) -> PathBuf {
    if given.is_dir() || given.components().count() != 1 {
        return given;
    }
    store
        .get(&given.to_string_lossy())
        .map_or(given, |model| model.folder)
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The app's folders and library file (`hearth_app::Home`), so the app sees what was indexed.
    let home = crate::model_args::home()?;
    let store = home.store();
    let library = Library::open(&home.documents_db())?;
    let embedding_model = args
        .embedding_model
        .clone()
        .map(|given| installed_folder(&store, given));
    let embedder = match args.ranking {
        RankingArg::Keyword => None,
        _ => match find_embedding_model(embedding_model, None) {
            Some(dir) => Some(EngineEmbedding::load(&dir, args.threads).with_context(|| {
                format!("cannot load the embedding model in {}", dir.display())
            })?),
            None if args.embedding_model.is_some() => anyhow::bail!(
                "{} is neither an embedding model's folder (it has no config.json) nor an \
                 installed model's name",
                args.embedding_model.unwrap_or_default().display()
            ),
            None if args.ranking == RankingArg::Semantic => anyhow::bail!(
                "semantic ranking needs an embedding model and none came with this Hearth: \
                 pass --embedding-model DIR, or use --ranking keyword"
            ),
            None => None,
        },
    };
    let model = embedder.as_ref().map(|e| e as &dyn EmbeddingModel);
    let mut status = StatusLine::new();
    let cancel = AtomicBool::new(false);
    let started = Instant::now();
    let report = index(
        &library,
        &args.files,
        &IndexSettings::default(),
        model,
        &mut |p: Progress| show_progress(&mut status, &p),
        &cancel,
    )?;
    status.finish();
    let index_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut documents = Vec::new();
    for file in &report.files {
        if let Outcome::Failed(message) = &file.outcome {
            status.line(&format!("hearth: {message}"));
        }
        if let (Some(id), false) = (file.document, matches!(file.outcome, Outcome::Failed(_))) {
            documents.push(id);
        }
    }
    let ranking = match args.ranking {
        RankingArg::Keyword => Ranking::Keyword,
        RankingArg::Semantic => Ranking::Semantic,
        RankingArg::Combined if model.is_some() => Ranking::Combined,
        RankingArg::Combined => Ranking::Keyword,
    };
    let started = Instant::now();
    let hits = search(
        &library,
        &args.question,
        &documents,
        ranking,
        model,
        args.limit,
    )?;
    let search_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut rerank_ms = None;
    let reranker = match args
        .rerank
        .clone()
        .map(|given| installed_folder(&store, given))
    {
        Some(dir) => Some(
            hearth_documents::EngineReranker::load(&dir, args.threads).map_err(|e| {
                anyhow::anyhow!("cannot load the reranker in {}: {e}", dir.display())
            })?,
        ),
        None => None,
    };
    let hits = match &reranker {
        Some(reranker) => {
            let started = Instant::now();
            let first = search(
                &library,
                &args.question,
                &documents,
                ranking,
                model,
                args.limit.max(hearth_documents::RERANK_DEPTH),
            )?;
            let mut all = |_| std::ops::ControlFlow::Continue(());
            let mut ranked = hearth_documents::rerank(&args.question, first, reranker, &mut all)
                .map_err(|e| anyhow::anyhow!("the reranker failed: {e}"))?
                .unwrap_or_default();
            ranked.truncate(args.limit);
            rerank_ms = Some(started.elapsed().as_secs_f64() * 1e3);
            ranked
        }
        None => hits,
    };
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        let value = serde_json::json!({
            "ranking": ranking_name(ranking),
            "embedding_model": model.map(|m| m.model_id()),
            "reranker": reranker.as_ref().map(hearth_documents::Reranker::model_id),
            "timings": { "index_ms": index_ms, "search_ms": search_ms, "rerank_ms": rerank_ms },
            "files": report.files.iter().map(|f| serde_json::json!({
                "file": f.given,
                "outcome": match &f.outcome {
                    Outcome::Unchanged => serde_json::json!({"unchanged": true}),
                    Outcome::Indexed { passages } => serde_json::json!({"indexed": passages}),
                    Outcome::Failed(message) => serde_json::json!({"error": message}),
                },
            })).collect::<Vec<_>>(),
            "passages": hits.iter().map(hit_json).collect::<Vec<_>>(),
        });
        writeln!(out, "{value}")
    } else {
        print_hits(&mut out, &hits)
    };
    finish_output(written)?;
    let failed = report
        .files
        .iter()
        .any(|f| matches!(f.outcome, Outcome::Failed(_)));
    Ok(if failed && documents.is_empty() {
        ExitCode::from(2)
    } else if hits.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn show_progress(status: &mut StatusLine, p: &Progress) {
    let file = p.file.display();
    match p.stage {
        Stage::Reading if p.done == p.total => {}
        Stage::Reading if status.is_live() => {
            status.redraw(&format!("reading {}/{} {file}", p.done + 1, p.total))
        }
        Stage::Reading => status.line(&format!("reading {}/{} {file}", p.done + 1, p.total)),
        Stage::Embedding => status.redraw(&format!(
            "embedding passages {}/{} ({file})",
            p.done, p.total
        )),
    }
}

fn ranking_name(ranking: Ranking) -> &'static str {
    match ranking {
        Ranking::Keyword => "keyword",
        Ranking::Semantic => "semantic",
        Ranking::Combined => "combined",
    }
}

fn place_json(place: &Place) -> serde_json::Value {
    match place {
        Place::Page(page) => serde_json::json!({ "page": page }),
        Place::Heading(heading) => serde_json::json!({ "heading": heading }),
        Place::Whole => serde_json::json!({ "whole": true }),
    }
}

fn hit_json(hit: &Hit) -> serde_json::Value {
    serde_json::json!({
        "file": hit.path,
        "title": hit.title,
        "section": hit.section,
        "place": place_json(&hit.place),
        "chars": [hit.char_start, hit.char_end],
        "score": hit.score,
        "keyword_rank": hit.keyword_rank,
        "semantic_rank": hit.semantic_rank,
        "text": hit.text,
    })
}

fn print_hits(out: &mut impl Write, hits: &[Hit]) -> std::io::Result<()> {
    for (n, hit) in hits.iter().enumerate() {
        let place = match &hit.place {
            Place::Page(page) => format!(", page {page}"),
            Place::Heading(heading) => format!(", \u{a7} {}", one_line(heading)),
            Place::Whole => String::new(),
        };
        writeln!(
            out,
            "{}. {}{place}, characters {}..{} (score {:.4})",
            n + 1,
            one_line(&hit.path.display().to_string()),
            hit.char_start,
            hit.char_end,
            hit.score
        )?;
        for line in hit.text.lines().filter(|l| !l.trim().is_empty()) {
            writeln!(out, "   {}", safe(line.trim_end()))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// `text` for one line of a terminal: control and bidi characters escaped (see `safe`), line
/// breaks too, so a file's name or heading cannot draw on the screen or fake a result line.
fn one_line(text: &str) -> String {
    safe(text).replace('\n', "\\u{a}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p8_a_heading_with_terminal_escapes_is_printed_escaped() {
        let hit = Hit {
            document: 1,
            path: PathBuf::from("e\nfake.md"),
            title: None,
            section: 0,
            place: Place::Heading("Title \u{1b}]0;PWNED\u{7}\u{1b}[2J\nnext".to_owned()),
            char_start: 0,
            char_end: 7,
            text: "kittens".to_owned(),
            from_scan: false,
            score: 1.0,
            keyword_rank: Some(1),
            semantic_rank: None,
        };
        let mut out = Vec::new();
        print_hits(&mut out, &[hit]).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
        assert!(out.contains("Title \\u{1b}]0;PWNED\\u{7}"), "{out:?}");
        assert_eq!(
            out.lines().count(),
            3,
            "one result line, one text line, a blank: {out:?}"
        );
    }
}
