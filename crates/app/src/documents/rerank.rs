//! The app's second look at the passages found for a question (`hearth_documents::rerank`):
//! which model judges them, whether it runs, and what it costs on this computer.
//!
//! - **The model**: an installed model whose folder name or config.json says "reranker"
//!   (Qwen3-Reranker-0.6B), else the chat model the question is for, loaded a second time from
//!   its own folder for judging (its weights read through the file's map, so a model the chat
//!   already holds is not copied again; a context of its own, nothing kept between questions).
//!   A model on a server cannot be asked for its logits, so there the second look needs an
//!   installed reranker.
//! - **The setting** ([`RerankMode`], Settings › Files): off; on; auto, the default, which
//!   judges only with a reranker and only where a question's second look measured under
//!   [`AUTO_LIMIT_SECS`] here (a chat model judges only when the user turns it on: on the
//!   bench, the starter chat model's judgement lost more answers than it found).
//! - **The cost**: the seconds one question's second look takes ([`RERANK_DEPTH`] passages),
//!   measured on the questions it judged and kept per model in `rerank-cost.json` beside the
//!   library (the mean of the questions measured). In auto, before any measurement, the first
//!   question's judging stops at [`AUTO_LIMIT_SECS`]: the cost is extrapolated from the
//!   passages judged by then and that question keeps its first ranking.
//!
//! Contract: [`Documents::retrieve`] never fails for the reranker's sake: a model that cannot
//! be loaded or fails is logged and the passages keep the first ranking.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hearth_documents::{
    is_reranker_folder, rerank, search, DocumentId, EmbeddingModel, EngineReranker, Hit, Library,
    Ranking, RERANK_DEPTH,
};
use serde::{Deserialize, Serialize};

use super::{library_error, Documents};
use crate::error::Result;
use crate::lock::lock;
pub use crate::settings::RerankMode;

/// Auto judges passages only where a question's second look takes less than this, in seconds.
pub const AUTO_LIMIT_SECS: f64 = 2.0;

/// What Settings › Files shows of the second look.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RerankStatus {
    /// The setting.
    pub mode: RerankMode,
    /// The model that judges (an installed reranker, or the chat model last asked); None
    /// while none is known.
    pub model: Option<String>,
    /// Its measured milliseconds per question here; None until a question measured it.
    pub millis: Option<u64>,
    /// Whether the next question is judged: on, or auto unmeasured (its first question
    /// measures) or measured under the limit; never without a model.
    pub active: bool,
}

/// Measured seconds of the questions judged with one model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Cost {
    questions: u32,
    seconds: f64,
}

impl Cost {
    fn per_question(&self) -> Option<f64> {
        (self.questions > 0).then(|| self.seconds / self.questions as f64)
    }
}

/// The reranker's state in a running front end.
pub(crate) struct Reranking {
    mode: Mutex<RerankMode>,
    /// The model loaded for judging and its folder.
    loaded: Mutex<Option<(PathBuf, Arc<EngineReranker>)>>,
    /// The folder of the model asked last (for the status before the next question).
    last: Mutex<Option<PathBuf>>,
    /// Where measured costs are kept, by model folder.
    costs_path: PathBuf,
}

impl Reranking {
    /// Costs kept in `rerank-cost.json` beside the library at `library_path`.
    pub(crate) fn new(library_path: &Path) -> Self {
        Self {
            mode: Mutex::new(RerankMode::default()),
            loaded: Mutex::new(None),
            last: Mutex::new(None),
            costs_path: library_path.with_file_name("rerank-cost.json"),
        }
    }

    fn costs(&self) -> BTreeMap<String, Cost> {
        // A damaged or foreign file only loses the measurements: they are taken again.
        std::fs::read(&self.costs_path)
            .ok()
            .filter(|bytes| bytes.len() < 1 << 20)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    fn cost(&self, folder: &Path) -> Option<f64> {
        self.costs()
            .get(&folder.display().to_string())
            .and_then(Cost::per_question)
    }

    fn record(&self, folder: &Path, seconds: f64) {
        let mut costs = self.costs();
        let cost = costs.entry(folder.display().to_string()).or_default();
        cost.questions += 1;
        cost.seconds += seconds;
        let written = serde_json::to_vec_pretty(&costs)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                let partial = self.costs_path.with_extension("json.partial");
                std::fs::write(&partial, bytes)?;
                std::fs::rename(&partial, &self.costs_path)
            });
        if let Err(error) = written {
            tracing::warn!(
                "could not keep the reranker's measured cost in {}: {error}",
                self.costs_path.display()
            );
        }
    }

    fn load(&self, folder: &Path) -> Option<Arc<EngineReranker>> {
        let mut slot = lock(&self.loaded);
        if let Some((loaded, model)) = slot.as_ref() {
            if loaded == folder {
                return Some(model.clone());
            }
        }
        // The model judged with before is let go first.
        *slot = None;
        match EngineReranker::load(folder, None) {
            Ok(model) => {
                let model = Arc::new(model);
                *slot = Some((folder.to_path_buf(), model.clone()));
                Some(model)
            }
            Err(error) => {
                tracing::warn!(
                    "the model in {} cannot judge passages ({error}); they keep their first ranking",
                    folder.display()
                );
                None
            }
        }
    }
}

/// Whether passages are judged with a model whose measured cost is `seconds`; `reranker`:
/// whether it is a reranker (else a chat model, which auto does not ask: measured on the bench,
/// the starter chat model's judgement lost more answers than it found).
fn judges(mode: RerankMode, seconds: Option<f64>, reranker: bool) -> bool {
    match mode {
        RerankMode::Off => false,
        RerankMode::On => true,
        // Unmeasured: the first question measures it, within the limit.
        RerankMode::Auto => reranker && seconds.is_none_or(|s| s < AUTO_LIMIT_SECS),
    }
}

impl Documents {
    /// Sets whether passages get a second look (Settings › Files).
    pub fn set_rerank_mode(&self, mode: RerankMode) {
        *lock(&self.rerank.mode) = mode;
    }

    /// The folder of the model that judges passages for the chat model in `chat_model` (its
    /// folder; None for a model on a server): an installed reranker first.
    fn reranker_folder(&self, chat_model: Option<&Path>) -> Option<PathBuf> {
        let installed = self.models.as_ref().and_then(|store| {
            store
                .list()
                .unwrap_or_default()
                .into_iter()
                .map(|m| m.folder)
                .find(|folder| is_reranker_folder(folder))
        });
        installed.or_else(|| {
            chat_model
                .filter(|dir| dir.join("config.json").is_file())
                .map(Path::to_path_buf)
        })
    }

    /// What Settings › Files shows of the second look: the setting, the model (an installed
    /// reranker, or the chat model asked last), its measured cost here.
    pub fn rerank_status(&self) -> RerankStatus {
        let mode = *lock(&self.rerank.mode);
        let last = lock(&self.rerank.last).clone();
        let folder = self.reranker_folder(last.as_deref());
        let seconds = folder.as_deref().and_then(|f| self.rerank.cost(f));
        RerankStatus {
            mode,
            model: folder
                .as_deref()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned()),
            millis: seconds.map(|s| (s * 1e3).round() as u64),
            active: folder
                .as_deref()
                .is_some_and(|f| judges(mode, seconds, is_reranker_folder(f))),
        }
    }

    /// The `limit` passages of `documents` that best answer `question`: keyword and meaning
    /// combined (`embedder`; keywords alone without one), then, as the setting says, the first
    /// [`RERANK_DEPTH`] judged again by a model (see the module's notes) for the chat model in
    /// `chat_model`.
    #[allow(clippy::too_many_arguments)]
    pub fn retrieve(
        &self,
        library: &Library,
        question: &str,
        documents: &[DocumentId],
        embedder: Option<&dyn EmbeddingModel>,
        chat_model: Option<&Path>,
        limit: usize,
    ) -> Result<Vec<Hit>> {
        let ranking = match embedder {
            Some(_) => Ranking::Combined,
            None => Ranking::Keyword,
        };
        let mode = *lock(&self.rerank.mode);
        let folder = self.reranker_folder(chat_model);
        *lock(&self.rerank.last) = chat_model.map(Path::to_path_buf);
        let seconds = folder.as_deref().and_then(|f| self.rerank.cost(f));
        let judged_by = folder.filter(|f| judges(mode, seconds, is_reranker_folder(f)));
        let Some(folder) = judged_by else {
            return search(library, question, documents, ranking, embedder, limit)
                .map_err(library_error);
        };
        let depth = limit.max(RERANK_DEPTH);
        let first = search(library, question, documents, ranking, embedder, depth)
            .map_err(library_error)?;
        let Some(reranker) = self.rerank.load(&folder) else {
            return Ok(first.into_iter().take(limit).collect());
        };
        let total = first.len();
        // Auto, before any measurement: stop at the limit, and measure what was done.
        let budget = (mode == RerankMode::Auto && seconds.is_none()).then_some(AUTO_LIMIT_SECS);
        let started = Instant::now();
        let mut done = 0;
        let mut after_each = |n: usize| {
            done = n;
            match budget {
                Some(limit) if n < total && started.elapsed().as_secs_f64() > limit => {
                    ControlFlow::Break(())
                }
                _ => ControlFlow::Continue(()),
            }
        };
        let judged = rerank(question, first.clone(), reranker.as_ref(), &mut after_each);
        let elapsed = started.elapsed().as_secs_f64();
        if done > 0 {
            // Per question of RERANK_DEPTH passages, whatever this one had.
            self.rerank
                .record(&folder, elapsed / done as f64 * RERANK_DEPTH as f64);
        }
        let ranked = match judged {
            Ok(Some(ranked)) => ranked,
            Ok(None) => {
                tracing::info!(
                    seconds = elapsed,
                    done,
                    total,
                    "the second look takes longer than auto allows here; passages keep their first ranking"
                );
                first
            }
            Err(error) => {
                tracing::warn!(
                    "the second look failed ({error}); passages keep their first ranking"
                );
                first
            }
        };
        Ok(ranked.into_iter().take(limit).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_reranker() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/engine/tiny-qwen3-reranker")
    }

    fn library_with_a_file(dir: &Path) -> (Documents, Library, DocumentId) {
        let path = dir.join("documents.db");
        let documents = Documents::new(path.clone());
        let library = Library::open(&path).unwrap();
        let file = hearth_documents::library::FileState {
            path: dir.join("notes.txt"),
            size: 1,
            mtime_ns: 1,
            sha256: "x".into(),
        };
        let passages: Vec<hearth_documents::library::NewPassage> = [
            "Hearth keeps its models in the data folder.",
            "Models are downloaded from the catalog.",
            "The data folder holds conversations and models.",
        ]
        .iter()
        .map(|text| hearth_documents::library::NewPassage {
            section: 0,
            place: hearth_documents::Place::Whole,
            char_start: 0,
            char_end: text.len(),
            text: (*text).to_owned(),
            from_scan: false,
        })
        .collect();
        let id = library.store(&file, "text", None, &passages).unwrap();
        (documents, library, id)
    }

    #[test]
    fn the_chat_model_judges_passages_as_the_setting_says_and_its_cost_is_measured() {
        let dir = tempfile::tempdir().unwrap();
        let (documents, library, id) = library_with_a_file(dir.path());
        let question = "Where are the models kept?";
        let chat = tiny_reranker();
        documents.set_rerank_mode(RerankMode::Off);
        let first = documents
            .retrieve(&library, question, &[id], None, Some(&chat), 5)
            .unwrap();
        assert_eq!(first.len(), 3);
        let status = documents.rerank_status();
        assert_eq!(status.model.as_deref(), Some("tiny-qwen3-reranker"));
        assert_eq!((status.millis, status.active), (None, false));
        documents.set_rerank_mode(RerankMode::On);
        let judged = documents
            .retrieve(&library, question, &[id], None, Some(&chat), 2)
            .unwrap();
        assert_eq!(judged.len(), 2);
        assert!(judged.iter().all(|hit| (0.0..=1.0).contains(&hit.score)));
        assert!(judged.windows(2).all(|w| w[0].score >= w[1].score));
        let status = documents.rerank_status();
        assert!(status.millis.is_some() && status.active, "{status:?}");
        // A model on a server (no folder) has nothing to judge with: the first ranking stays.
        let remote = documents
            .retrieve(&library, question, &[id], None, None, 5)
            .unwrap();
        assert_eq!(remote, first);
    }

    #[test]
    fn auto_judges_until_measured_slow() {
        assert!(judges(RerankMode::Auto, None, true));
        assert!(judges(RerankMode::Auto, Some(1.9), true));
        assert!(!judges(RerankMode::Auto, Some(2.0), true));
        assert!(
            !judges(RerankMode::Auto, Some(0.5), false),
            "auto asks rerankers only"
        );
        assert!(judges(RerankMode::On, Some(30.0), false));
        assert!(!judges(RerankMode::Off, Some(0.1), true));
    }

    #[test]
    fn costs_are_kept_per_model_and_a_damaged_file_is_measured_again() {
        let dir = tempfile::tempdir().unwrap();
        let reranking = Reranking::new(&dir.path().join("documents.db"));
        let model = dir.path().join("Qwen3-Reranker-0.6B");
        assert_eq!(reranking.cost(&model), None);
        reranking.record(&model, 1.0);
        reranking.record(&model, 2.0);
        assert_eq!(reranking.cost(&model), Some(1.5));
        assert_eq!(reranking.cost(&dir.path().join("other")), None);
        std::fs::write(dir.path().join("rerank-cost.json"), b"{not json").unwrap();
        assert_eq!(reranking.cost(&model), None);
        reranking.record(&model, 4.0);
        assert_eq!(reranking.cost(&model), Some(4.0));
    }
}
