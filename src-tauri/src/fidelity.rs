//! The NPU self-test's results, kept per model: the app runs `hearth_backends::selftest` once for
//! each model it loads onto the NPU (and again after FastFlowLM is updated) and shows in the
//! Models view whether the NPU's answers match Hearth's CPU engine.
//!
//! Kept in `<state>/selftest/<key>.json`, where the key is the weights' sha256 (or, for a model
//! with no recorded hash, its name), so a re-downloaded model with other weights is tested
//! again.

use std::path::{Path, PathBuf};

use hearth_backends::selftest::FidelityReport;
use serde::{Deserialize, Serialize};

/// What the Models view shows about a model's self-test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(rename = "SelfTest")]
pub struct SelftestSummary {
    /// Prompts whose NPU and CPU answers are identical.
    pub identical: usize,
    /// Prompts compared.
    pub total: usize,
    /// One plain sentence.
    pub summary: String,
}

/// A saved self-test: the FastFlowLM version it ran on, and the full report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedSelftest {
    /// FastFlowLM's version at the time.
    pub runtime_version: String,
    /// The per-prompt comparison.
    pub report: FidelityReport,
}

impl SavedSelftest {
    /// The summary for the Models view.
    pub fn summary(&self) -> SelftestSummary {
        summarize(&self.report)
    }
}

/// The plain-words verdict of a report.
pub fn summarize(report: &FidelityReport) -> SelftestSummary {
    let total = report.prompts.len();
    let identical = report.identical_count();
    let failed = report.prompts.iter().filter(|p| p.error.is_some()).count();
    let summary = if failed > 0 {
        format!(
            "The NPU could not answer {failed} of {total} test questions, so its answers could \
             not be checked. Answers on the processor are not affected."
        )
    } else if identical == total {
        format!("The NPU wrote exactly what the processor writes on all {total} test questions.")
    } else if report
        .prompts
        .iter()
        .all(|p| p.identical() || p.agreeing_tokens.unwrap_or(0) >= 8)
    {
        format!(
            "The NPU matched the processor on {identical} of {total} test questions; the others \
             agree for a while and then pick a different, nearly as likely word. That is normal \
             rounding, not a fault."
        )
    } else {
        format!(
            "The NPU's answers differ from the processor's from the first words on {} of {total} \
             test questions: it may be running a different version of this model. Use the \
             processor for answers you rely on.",
            total - identical
        )
    };
    SelftestSummary {
        identical,
        total,
        summary,
    }
}

/// Where the self-test results are kept.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("selftest")
}

/// The file name for a model: its weights' hash, else its name (made safe for a file name).
fn file_for(state_dir: &Path, name: &str, sha256: Option<&str>) -> PathBuf {
    let key: String = match sha256 {
        Some(hash) => hash.to_owned(),
        None => name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect(),
    };
    dir(state_dir).join(format!("{key}.json"))
}

/// The saved self-test of a model, if one was run (a file that cannot be read counts as none:
/// the test runs again).
pub fn load(state_dir: &Path, name: &str, sha256: Option<&str>) -> Option<SavedSelftest> {
    let bytes = std::fs::read(file_for(state_dir, name, sha256)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Saves a self-test (atomically).
pub fn save(
    state_dir: &Path,
    name: &str,
    sha256: Option<&str>,
    saved: &SavedSelftest,
) -> Result<(), String> {
    let path = file_for(state_dir, name, sha256);
    std::fs::create_dir_all(dir(state_dir))
        .map_err(|e| format!("could not create {}: {e}", dir(state_dir).display()))?;
    let bytes = serde_json::to_vec_pretty(saved).expect("plain fields serialize");
    hearth_hub::write_atomic(&path, &bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_backends::selftest::PromptAgreement;

    fn prompt(agreeing_tokens: usize, same: bool) -> PromptAgreement {
        PromptAgreement {
            prompt: "p".into(),
            reference: "a b c".into(),
            candidate: if same { "a b c".into() } else { "a b d".into() },
            agreeing_chars: if same { 5 } else { 4 },
            agreeing_tokens: Some(agreeing_tokens),
            reference_tokens: Some(3),
            diverges_at_char: (!same).then_some(4),
            divergence: (!same).then(|| ("c".into(), "d".into())),
            error: None,
        }
    }

    fn report(prompts: Vec<PromptAgreement>) -> FidelityReport {
        FidelityReport {
            candidate: "npu".into(),
            reference: "cpu".into(),
            prompts,
        }
    }

    #[test]
    fn the_summary_tells_a_match_a_late_parting_and_a_different_model_apart() {
        let all = summarize(&report(vec![prompt(3, true), prompt(3, true)]));
        assert_eq!((all.identical, all.total), (2, 2));
        assert!(all.summary.contains("exactly"), "{}", all.summary);
        let late = summarize(&report(vec![prompt(3, true), prompt(20, false)]));
        assert!(late.summary.contains("normal rounding"), "{}", late.summary);
        let wrong = summarize(&report(vec![prompt(0, false), prompt(1, false)]));
        assert!(
            wrong.summary.contains("different version"),
            "{}",
            wrong.summary
        );
    }

    #[test]
    fn results_are_kept_per_weights_and_a_damaged_file_counts_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let saved = SavedSelftest {
            runtime_version: "1.0.6".into(),
            report: report(vec![prompt(3, true)]),
        };
        save(dir.path(), "m/../x", Some("ab12"), &saved).unwrap();
        assert_eq!(
            load(dir.path(), "m/../x", Some("ab12"))
                .unwrap()
                .summary()
                .identical,
            1
        );
        assert!(
            load(dir.path(), "m/../x", Some("cd34")).is_none(),
            "other weights"
        );
        save(dir.path(), "m/../x", None, &saved).unwrap();
        let by_name = file_for(dir.path(), "m/../x", None);
        assert_eq!(
            by_name.parent().unwrap(),
            super::dir(dir.path()),
            "no path escapes"
        );
        std::fs::write(&by_name, "{not json").unwrap();
        assert!(load(dir.path(), "m/../x", None).is_none());
    }
}
