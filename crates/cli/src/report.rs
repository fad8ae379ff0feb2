//! `hearth doctor --report FILE`: everything a tester on a Ryzen AI laptop can send back, in one
//! JSON file: the doctor's findings (device, hardware contexts, sensors, power) and who holds
//! the NPU, FastFlowLM's version, install (package, portable, FastFlow SDK) and runtime (HRX or
//! XRT) and its own `validate`, a short run of one model on the NPU and on the CPU (the
//! self-test's fixed prompts, then one timed answer on each: tokens/s, time to first token,
//! watts and joules; `--model`, else the first installed model the NPU can run), and one timed
//! CPU answer for each other model family installed (`config.json`'s `model_type`), so every
//! family the CPU engine runs here is in the file.
//!
//! The report holds no text of the user's: the prompts are Hearth's fixed ones. Home folders,
//! user names and other programs' command lines are replaced before it is written
//! ([`Redactor`]). Hearth only writes it to FILE and prints it; it never sends it anywhere.

use std::path::Path;

use hearth_app::npu::{Diagnosis, PowerSample, Run, SELFTEST_MAX_TOKENS};
use hearth_app::session::{BackendKind, OpenOptions};
use hearth_app::{Home, Session};
use hearth_chat::Receipt;
use serde::Serialize;
use serde_json::{json, Value};

use crate::model_args::{BackendArgs, ModelArgs};

/// Changes when the report's layout changes, so whoever reads it knows which one it is.
pub const REPORT_FORMAT: u32 = 1;

/// What the report promises about privacy; written into it.
pub const PRIVACY: &str = "This report holds no prompt or answer of yours (the runs use \
Hearth's fixed test prompts). Home folders, user names and other programs' command lines are \
replaced by <home>, <user> and null. Hearth never sends it: it is only written to the file and \
printed, for you to read before you share it.";

/// Answer length of the timed runs, in tokens.
const TIMED_TOKENS: usize = 64;

/// The timed answer of one backend.
#[derive(Debug, Serialize)]
pub struct TimedRun {
    /// `npu` or `cpu`.
    pub backend: BackendKind,
    /// Decode speed, tokens/s.
    pub tokens_per_second: f64,
    /// Time to first token, s.
    pub ttft_secs: f64,
    /// Tokens written.
    pub generated_tokens: usize,
    /// Energy of the whole answer, J (headline meter), when power could be read.
    pub joules: Option<f64>,
    /// Average power over the answer, W (headline meter), when power could be read.
    pub watts: Option<f64>,
    /// The full receipt (timings, every power meter and its source); it holds no text.
    pub receipt: Receipt,
}

impl TimedRun {
    fn from_receipt(receipt: Receipt) -> TimedRun {
        let joules = receipt.energy.as_ref().and_then(|e| e.total_joules);
        let secs = receipt
            .energy
            .as_ref()
            .map(|e| e.prefill_secs + e.decode_secs)
            .unwrap_or(0.0);
        TimedRun {
            backend: receipt.backend_kind,
            tokens_per_second: receipt.tokens_per_second,
            ttft_secs: receipt.ttft_secs,
            generated_tokens: receipt.generated_tokens,
            joules,
            watts: joules.filter(|_| secs > 0.0).map(|j| j / secs),
            receipt,
        }
    }
}

/// Runs the self-test and one timed answer per backend for `model` (an installed model's
/// name), each part an object or `{"failed": reason}`. The self-test and the timed answers are
/// the app's ([`hearth_app::npu::selftest`], [`hearth_app::npu::timed_answer`]).
pub fn runs(model: &str) -> Value {
    let args = ModelArgs {
        model: model.to_string(),
        context: None,
        threads: None,
        kernel: None,
    };
    let (home, local) = match crate::model_args::home().and_then(|home| {
        let local = args.resolve_in(&home)?;
        Ok((home, local))
    }) {
        Ok(found) => found,
        Err(e) => return json!({ "failed": format!("{e:#}") }),
    };
    let npu_args = BackendArgs {
        backend: Some(BackendKind::Npu),
        url: None,
        api_key_env: None,
    };
    let mut npu = match npu_args.open_session(&args, false) {
        Ok(npu) => npu,
        Err(e) => {
            return json!({
                "model": local.name,
                "selftest": { "failed": format!("the NPU backend could not open: {e:#}") },
                "cpu": timed_on_cpu(&home, &local),
            })
        }
    };
    // The self-test first: it also loads the model onto the NPU, so the timed answers measure
    // answering, not loading.
    let selftest = match hearth_app::npu::selftest(
        &local,
        &OpenOptions::default(),
        &mut npu,
        SELFTEST_MAX_TOKENS,
    ) {
        Ok(fidelity) => json!({
            "identical": fidelity.identical_count(),
            "of": fidelity.prompts.len(),
            "report": fidelity,
        }),
        Err(e) => json!({ "failed": e.to_string() }),
    };
    let npu_run = timed(&home, &mut npu);
    // The NPU's model is closed before the CPU's is loaded: each has the machine to itself.
    drop(npu);
    json!({
        "model": local.name,
        "selftest": selftest,
        "npu": npu_run,
        "cpu": timed_on_cpu(&home, &local),
    })
}

/// The timed answer of `local` on Hearth's CPU engine.
fn timed_on_cpu(home: &Home, local: &hearth_app::LocalModel) -> Value {
    match Session::open(home, local, BackendKind::Cpu, OpenOptions::default()) {
        Ok(mut cpu) => timed(home, &mut cpu),
        Err(e) => json!({ "failed": format!("the model could not load on the CPU: {e}") }),
    }
}

/// One greedy answer to the self-test's first prompt, with power read on this machine.
fn timed(home: &Home, session: &mut Session) -> Value {
    match hearth_app::npu::timed_answer(home, session, TIMED_TOKENS) {
        Run::Answered { receipt, .. } => serde_json::to_value(TimedRun::from_receipt(*receipt))
            .unwrap_or_else(|e| json!({ "failed": e.to_string() })),
        Run::Failed { error } => json!({ "failed": error }),
    }
}

/// FastFlowLM as this machine has it: its version and what its own `validate --json` says.
pub fn fastflowlm() -> Value {
    match hearth_app::npu::fastflowlm() {
        Ok(flm) => json!({
            "program": flm.program,
            "path": flm.path,
            "version": flm.version,
            "install": flm.install,
            "runtime": flm.runtime,
            "validate": match flm.validate {
                Ok(report) => serde_json::to_value(report).unwrap_or(Value::Null),
                Err(e) => json!({ "failed": e }),
            },
        }),
        Err(e) => json!({ "not_found": e }),
    }
}

/// The installed model the report runs on the NPU and the CPU when no `--model` is given: the
/// first (the default first) that can run on the NPU here; `None` when none can.
pub fn pick_npu_model() -> Option<String> {
    let home = crate::model_args::home().ok()?;
    hearth_app::models::local_models(&home)
        .into_iter()
        .find(|m| m.runs_on_npu())
        .map(|m| m.name)
}

/// The model family of a model folder, as its `config.json` names it (`model_type`).
fn family_of(folder: &Path) -> Option<String> {
    let config: Value =
        serde_json::from_slice(&std::fs::read(folder.join("config.json")).ok()?).ok()?;
    config.get("model_type")?.as_str().map(str::to_string)
}

/// One timed CPU answer for each model family installed here other than `ran`'s (the model
/// the NPU comparison ran), on the first installed model of that family: `{family: {model,
/// run}}`.
pub fn cpu_families(ran: Option<&str>) -> Value {
    let home = match crate::model_args::home() {
        Ok(home) => home,
        Err(e) => return json!({ "failed": format!("{e:#}") }),
    };
    let models = hearth_app::models::local_models(&home);
    let done = ran
        .and_then(|name| models.iter().find(|m| m.name == name))
        .and_then(|m| family_of(&m.path));
    let mut families = serde_json::Map::new();
    for model in &models {
        let Some(family) = family_of(&model.path) else {
            continue;
        };
        if Some(&family) == done.as_ref() || families.contains_key(&family) {
            continue;
        }
        eprintln!(
            "hearth: timing {} ({family}) on the CPU for the report...",
            model.name
        );
        families.insert(
            family,
            json!({ "model": model.name, "cpu": timed_on_cpu(&home, model) }),
        );
    }
    Value::Object(families)
}

/// Who holds the NPU, in words ("flm (process 4242)", "another user's program"), or `None`
/// when it is free.
fn npu_holder(diagnosis: &Diagnosis) -> Option<String> {
    let refused = diagnosis
        .checks
        .iter()
        .any(|c| c.code == "access_busy" || c.code == "access_busy_by");
    (refused || !diagnosis.holders.is_empty())
        .then(|| hearth_app::npu::holder_words(&diagnosis.holders))
}

/// The machine in a few facts: kernel, CPU model, memory.
fn machine(root: &Path) -> Value {
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_default();
    let field = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
    };
    let cpuinfo = read("proc/cpuinfo");
    let meminfo = read("proc/meminfo");
    json!({
        "kernel": read("proc/sys/kernel/osrelease").trim(),
        "cpu": field(&cpuinfo, "model name"),
        "memory": field(&meminfo, "MemTotal"),
    })
}

/// The doctor's findings as JSON: the diagnosis plus one idle power reading.
#[derive(Serialize)]
struct Findings<'a> {
    #[serde(flatten)]
    diagnosis: &'a Diagnosis,
    power: &'a PowerSample,
}

/// What `hearth doctor --json` prints, and the report's `doctor` part: the diagnosis plus the
/// idle power reading.
pub fn findings(diagnosis: &Diagnosis, power: &PowerSample) -> Value {
    serde_json::to_value(Findings { diagnosis, power }).unwrap_or_else(
        |e| json!({ "failed": format!("the findings could not be written as JSON: {e}") }),
    )
}

/// Everything gathered, as one redacted JSON document. `fastflowlm`, `runs` and
/// `cpu_families` are what [`fastflowlm`], [`runs`] and [`cpu_families`] gave (or why they
/// were not run).
pub fn build(
    root: &Path,
    diagnosis: &Diagnosis,
    power: &PowerSample,
    fastflowlm: Value,
    runs: Value,
    cpu_families: Value,
) -> Value {
    let mut report = json!({
        "report_format": REPORT_FORMAT,
        "hearth_version": env!("CARGO_PKG_VERSION"),
        "privacy": PRIVACY,
        "machine": machine(root),
        "doctor": findings(diagnosis, power),
        "npu_holder": npu_holder(diagnosis),
        "fastflowlm": fastflowlm,
        "runs": runs,
        "cpu_families": cpu_families,
    });
    Redactor::for_system(root).value(&mut report);
    report
}

/// Replaces what could name the person from a report: home folders (`/home/<name>` and this
/// user's `$HOME`), the names of people's accounts (`/etc/passwd` entries with uid 1000 to
/// 59999, and `$USER`), and other programs' command lines (every `command` field).
#[derive(Debug, Default)]
pub struct Redactor {
    homes: Vec<String>,
    users: Vec<String>,
}

impl Redactor {
    /// The home folders and user names of the system under `root` (and, on `/`, of this
    /// session's `HOME` and `USER`).
    pub fn for_system(root: &Path) -> Redactor {
        let mut r = Redactor::default();
        let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap_or_default();
        for line in passwd.lines() {
            let f: Vec<&str> = line.split(':').collect();
            let person = f
                .get(2)
                .and_then(|uid| uid.parse::<u32>().ok())
                .is_some_and(|uid| (1000..60000).contains(&uid));
            if person && f.len() >= 6 {
                r.add_user(f[0]);
                r.add_home(f[5]);
            }
        }
        if root == Path::new("/") {
            for var in ["USER", "LOGNAME"] {
                if let Ok(name) = std::env::var(var) {
                    r.add_user(&name);
                }
            }
            if let Ok(home) = std::env::var("HOME") {
                r.add_home(&home);
            }
        }
        r
    }

    fn add_user(&mut self, name: &str) {
        // One-letter names would erase letters everywhere; "root" is not a person.
        if name.len() >= 2 && name != "root" && !self.users.iter().any(|u| u == name) {
            self.users.push(name.to_string());
        }
    }

    fn add_home(&mut self, home: &str) {
        let home = home.trim_end_matches('/');
        if home.len() > 1 && !self.homes.iter().any(|h| h == home) {
            self.homes.push(home.to_string());
        }
    }

    /// `text` with home folders and user names replaced.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        // Longest first, so /home/ana/work is not left as <home>/work's parent's leftovers.
        let mut homes = self.homes.clone();
        homes.sort_by_key(|h| std::cmp::Reverse(h.len()));
        for home in &homes {
            out = out.replace(home.as_str(), "<home>");
        }
        out = redact_home_segments(&out);
        for user in &self.users {
            out = replace_word(&out, user, "<user>");
        }
        out
    }

    /// Redacts every string of a JSON document in place, and empties every `command` field
    /// (other programs' command lines).
    pub fn value(&self, v: &mut Value) {
        match v {
            Value::String(s) => *s = self.text(s),
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i)),
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    if key == "command" {
                        *item = Value::Null;
                    } else {
                        self.value(item);
                    }
                }
            }
            _ => {}
        }
    }
}

/// `/home/<anything>` becomes `/home/<user>`, for homes `/etc/passwd` does not list.
fn redact_home_segments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("/home/") {
        out.push_str(&rest[..at + "/home/".len()]);
        rest = &rest[at + "/home/".len()..];
        let end = rest
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'' || c == ':')
            .unwrap_or(rest.len());
        if end > 0 && !rest.starts_with('<') {
            out.push_str("<user>");
        } else {
            out.push_str(&rest[..end]);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Replaces `word` where it stands alone (not inside a longer name or word).
fn replace_word(text: &str, word: &str, with: &str) -> String {
    let is_name_char = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + word.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(is_name_char) || after.is_some_and(is_name_char) {
            out.push_str(word);
        } else {
            out.push_str(with);
        }
        rest = &rest[at + word.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor() -> Redactor {
        let mut r = Redactor::default();
        r.add_user("ana");
        r.add_home("/home/ana");
        r.add_user("root");
        r.add_user("x");
        r
    }

    #[test]
    fn home_paths_and_user_names_are_replaced() {
        let r = redactor();
        assert_eq!(
            r.text("/home/ana/.local/bin/flm serve"),
            "<home>/.local/bin/flm serve"
        );
        assert_eq!(
            r.text("`sudo usermod -aG render ana`"),
            "`sudo usermod -aG render <user>`"
        );
        assert_eq!(
            r.text("/home/bob/x and /home/"),
            "/home/<user>/x and /home/"
        );
        assert_eq!(
            r.text("banana anastasia ana."),
            "banana anastasia <user>.",
            "a name inside another word stays"
        );
        assert_eq!(r.text("root x /sys/class"), "root x /sys/class");
    }

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/npu")
            .join(name)
    }

    /// Copies a fixture tree (keeping symlinks) so a test can change it.
    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let (src, dst) = (e.path(), to.join(e.file_name()));
            let ty = e.file_type().unwrap();
            if ty.is_symlink() {
                std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
            } else if ty.is_dir() {
                copy_tree(&src, &dst);
            } else {
                std::fs::copy(&src, &dst).unwrap();
            }
        }
    }

    #[test]
    fn report_on_a_fixture_laptop_names_no_one() {
        // ana may not open the NPU (so the fix names her), and FastFlowLM, run from her home,
        // holds it with a command line that names her files.
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&fixture("strix-busy"), dir.path());
        std::fs::write(
            dir.path().join("proc/4242/cmdline"),
            b"/home/ana/.local/bin/flm\0serve\0/home/ana/models/secret-project\0",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("proc/cpuinfo"),
            "model name\t: AMD Ryzen AI 9 HX 370\n",
        )
        .unwrap();
        let d = hearth_npu::diagnose_with(dir.path(), |_| {
            Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
        });
        let fix = d
            .checks
            .iter()
            .find_map(|c| c.fix.clone().filter(|f| f.contains("usermod")))
            .expect("the access fix names the user");
        assert!(fix.contains("ana"), "{fix}");
        let p = hearth_npu::PowerSources::discover(dir.path()).sample(0.0);
        let report = build(
            dir.path(),
            &d,
            &p,
            json!({"path": "/home/ana/.local/bin/flm", "install": "FastFlow SDK (Python environment)", "runtime": "HRX"}),
            json!({"not_run": "test"}),
            json!({"not_run": "test"}),
        );
        for section in [
            "report_format",
            "privacy",
            "machine",
            "doctor",
            "npu_holder",
            "fastflowlm",
            "runs",
            "cpu_families",
        ] {
            assert!(report.get(section).is_some(), "no {section} in {report:#}");
        }
        for part in [
            "detection",
            "checks",
            "contexts",
            "holders",
            "sensors",
            "power",
        ] {
            assert!(report["doctor"].get(part).is_some(), "no doctor.{part}");
        }
        assert_eq!(report["machine"]["cpu"], "AMD Ryzen AI 9 HX 370");
        assert_eq!(report["doctor"]["holders"][0]["name"], "flm");
        assert_eq!(report["npu_holder"], "flm (process 4242)");
        assert_eq!(report["fastflowlm"]["runtime"], "HRX");
        let text = serde_json::to_string(&report).unwrap();
        assert!(!text.contains("/home/ana"), "a home path is left: {text}");
        assert!(
            !text.contains("secret-project"),
            "a command line is left: {text}"
        );
        assert!(
            !text
                .split(|c: char| !c.is_alphanumeric())
                .any(|w| w == "ana"),
            "the user name is left: {text}"
        );
        // The node's group is whatever group owns the copied file: only the name matters.
        assert!(text.contains(" <user>`. Then log out"), "{text}");
        assert!(text.contains("<home>/.local/bin/flm"), "{text}");
    }

    #[test]
    fn command_fields_are_emptied_everywhere() {
        let mut v = json!({"holders": [{"pid": 1, "name": "flm", "command": "flm serve /home/ana/m"}],
                           "path": "/home/ana/bin"});
        redactor().value(&mut v);
        assert_eq!(v["holders"][0]["command"], Value::Null);
        assert_eq!(v["holders"][0]["name"], "flm");
        assert_eq!(v["path"], "<home>/bin");
    }
}
