//! Models FastFlowLM is known not to run: which model, on which FastFlowLM versions, the issue
//! that says so. Such a model runs on the processor, and the reason says so plainly, instead of
//! FastFlowLM starting and failing at the first answer; a tester can still try the NPU anyway
//! (`hearth run --npu-anyway`, [`crate::npu::NpuOptions::npu_anyway`]).

use crate::npu::registry::FlmModel;

/// One known incompatibility.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownIssue {
    /// Matches a model when its registry name or its engine family (`details.family`) starts
    /// with this, compared without case ("minicpm5").
    pub model: &'static str,
    /// The first FastFlowLM version it was reported on.
    pub since: &'static str,
    /// The first version that fixed it; `None` while the issue is open.
    pub fixed_in: Option<&'static str>,
    /// The versions it was reported on, for the words.
    pub reported_on: &'static str,
    /// The issue at ROCm/FastFlowLM.
    pub issue: u32,
    /// What goes wrong, in plain words.
    pub what: &'static str,
}

/// The table. Each row cites its issue; add a row when an issue says a model cannot run, and
/// give it a `fixed_in` when a release fixes it.
pub const KNOWN_ISSUES: &[KnownIssue] = &[KnownIssue {
    model: "minicpm5",
    since: "1.0.1",
    fixed_in: None,
    reported_on: "1.0.1, 1.0.2, 1.0.4 and 1.0.6",
    issue: 712,
    what: "it fails at the first answer token (runlist failed execution, ERT_CMD_STATE_TIMEOUT)",
}];

impl KnownIssue {
    /// Whether it concerns FastFlowLM `version`.
    pub fn affects_version(&self, version: &str) -> bool {
        use hearth_npu::software::version_at_least;
        version_at_least(version, self.since)
            && self
                .fixed_in
                .is_none_or(|fixed| !version_at_least(version, fixed))
    }

    /// Whether it concerns the registry entry `entry`.
    pub fn affects_model(&self, entry: &FlmModel) -> bool {
        [entry.name.as_str(), entry.details.family.as_str()]
            .iter()
            .any(|s| s.to_ascii_lowercase().starts_with(self.model))
    }

    /// The link to the issue.
    pub fn url(&self) -> String {
        format!("https://github.com/ROCm/FastFlowLM/issues/{}", self.issue)
    }

    /// Why `name` runs on the processor, for `hearth list`, the app and `hearth run`.
    pub fn words(&self, name: &str, flm_label: &str) -> String {
        let status = match self.fixed_in {
            None => "open".to_string(),
            Some(v) => format!("fixed in {v}"),
        };
        format!(
            "{name} runs on the processor here: with {flm_label} on the NPU {} (FastFlowLM issue {}, {status}; reported on {}: {}). To try the NPU anyway: `hearth run --npu-anyway`, or \"Try on the NPU anyway\" in the app",
            self.what,
            self.issue,
            self.reported_on,
            self.url()
        )
    }
}

/// The known issue of the registry entry `entry` on FastFlowLM `version`, if any.
pub fn known_issue(version: &str, entry: &FlmModel) -> Option<&'static KnownIssue> {
    KNOWN_ISSUES
        .iter()
        .find(|i| i.affects_version(version) && i.affects_model(entry))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::npu::registry::FlmModelDetails;

    fn entry(name: &str, family: &str) -> FlmModel {
        FlmModel {
            name: name.into(),
            default_context_length: None,
            details: FlmModelDetails {
                family: family.into(),
            },
            vlm: false,
            hearth: None,
        }
    }

    #[test]
    fn minicpm5_on_1_0_x_is_known_not_to_run() {
        let pack = entry("MiniCPM5-2B-NPU2", "qwen3");
        let issue = known_issue("1.0.6", &pack).expect("issue 712");
        assert_eq!(issue.issue, 712);
        let words = issue.words("MiniCPM5-2B-NPU2", "FastFlowLM 1.0.6");
        assert!(words.contains("runs on the processor"), "{words}");
        assert!(
            words.contains("712") && words.contains("--npu-anyway"),
            "{words}"
        );
        assert!(known_issue("1.0.10", &pack).is_some(), "still open");
        assert!(
            known_issue("0.9.45", &pack).is_none(),
            "not reported before 1.0.1"
        );
    }

    #[test]
    fn other_models_and_fixed_versions_are_not_matched() {
        let qwen = entry("Qwen3-1.7B-NPU2", "qwen3");
        assert!(known_issue("1.0.6", &qwen).is_none());
        let fixed = KnownIssue {
            fixed_in: Some("1.0.8"),
            ..KNOWN_ISSUES[0]
        };
        assert!(fixed.affects_version("1.0.7"));
        assert!(!fixed.affects_version("1.0.8"));
    }
}
