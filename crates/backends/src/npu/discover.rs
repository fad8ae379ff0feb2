//! Finding FastFlowLM: the program (`HEARTH_FLM`, `flm` on `PATH`, the standard install, then
//! the open-kernel fork `oflm`), its version (`version --json`, gated at [`MIN_VERSION`]), its
//! `validate --json` report folded into Hearth's NPU checks, and whether it can run a given
//! model ([`npu_support`]: kernels under its kernel root and an engine for the model's family).

use std::path::{Path, PathBuf};

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use hearth_chat::backend::{Availability, BackendKind};
use hearth_npu::bounded::{self, QuickLimits, QuickOutput};
use hearth_npu::elf::Runtime;
use serde::Serialize;
use serde_json::Value;

use crate::npu::install::Layout;
use crate::npu::process::{self, own_server, OwnServer};
use crate::npu::registry::{FlmModel, FlmRegistry};
use crate::npu::{known_issues, NpuError};

/// The oldest FastFlowLM Hearth drives (0.9.45; the NPU tests run against 0.9.45 and 1.0.x).
pub const MIN_VERSION: &str = hearth_npu::software::FLM_MIN_VERSION;

/// Where the FastFlowLM packages install the program.
pub const STANDARD_PROGRAM: &str = hearth_npu::software::FLM_STANDARD_PROGRAM;

/// Where the FastFlowLM packages install the kernels (the folder holding `xclbins/`).
pub const STANDARD_KERNEL_ROOT: &str = "/opt/fastflowlm/share/flm";

/// The model families FastFlowLM has an engine for (`details.family` in model_list.json).
pub const ENGINE_FAMILIES: &[&str] = &[
    "llama3",
    "deepseek-r1",
    "deepseek-r1-0528",
    "qwen2",
    "qwen2vl",
    "qwen3",
    "qwen3-it",
    "qwen3-tk",
    "qwen3vl",
    "qwen3vl-flash",
    "qwen3.5",
    "qwen3.5-omni",
    "qwen3.6-moe",
    "gemma3",
    "gemma3-text",
    "gemma4e",
    "gemma4e-flash",
    "gemma4-12b",
    "gpt-oss",
    "lfm2",
    "lfm2.5-tk",
    "phi4",
    "nanbeige",
    "hunyuan",
];

/// Which program it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// AMD's FastFlowLM, `flm`.
    Flm,
    /// The MIT open-kernel fork OpenFlowLM, `oflm`.
    Oflm,
}

/// An installed FastFlowLM that is new enough.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlmProgram {
    /// The executable.
    pub path: PathBuf,
    /// `flm` or `oflm`.
    pub flavor: Flavor,
    /// Its version, "1.0.6".
    pub version: String,
    /// How its install is laid out.
    pub layout: Layout,
    /// The NPU runtime its binary links (from its ELF needed libraries), when it names one.
    pub runtime: Option<Runtime>,
    /// The system it was found on (`/`, or a test's fixture tree): where who holds the NPU is
    /// read when FastFlowLM says it is busy.
    #[serde(skip)]
    pub system_root: PathBuf,
}

impl FlmProgram {
    /// "FastFlowLM 1.0.6" (or "OpenFlowLM 1.0.6").
    pub fn label(&self) -> String {
        match self.flavor {
            Flavor::Flm => format!("FastFlowLM {}", self.version),
            Flavor::Oflm => format!("OpenFlowLM {}", self.version),
        }
    }
}

/// Where to look for the program: `HEARTH_FLM`, `PATH` and the standard install
/// ([`STANDARD_PROGRAM`]). [`Lookup::from_env`] reads this process's environment, tests build
/// their own. The lookup order is the NPU crate's ([`hearth_npu::software::locate_flm`]).
pub use hearth_npu::software::FlmLookup as Lookup;

fn flavor_of(path: &Path) -> Flavor {
    match path.file_name().and_then(|n| n.to_str()) {
        Some(n) if n.starts_with("oflm") => Flavor::Oflm,
        _ => Flavor::Flm,
    }
}

/// The FastFlowLM executable, as [`hearth_npu::software::locate_flm`] finds it: `HEARTH_FLM`
/// (only it, when set), then `flm` on `PATH`, then the standard install, then `oflm` on `PATH`.
pub fn locate(lookup: &Lookup) -> Result<PathBuf, NpuError> {
    use hearth_npu::software::{locate_flm, FlmNotFound};
    match locate_flm(lookup) {
        Ok(found) => Ok(lookup.on_disk(&found.path)),
        Err(FlmNotFound::NotExecutable { path }) => {
            Err(match crate::npu::python_env::chosen_for(&path) {
                Some(env) => NpuError::NoFlmInPythonEnv { env },
                None => NpuError::NotExecutable { path },
            })
        }
        Err(FlmNotFound::NotInstalled { searched }) => Err(NpuError::NotInstalled { searched }),
    }
}

/// Runs `exe args...` with the update check off, stdin closed, and bounds on its time and
/// output ([`bounded::run_flm`]); returns the exit success and stdout. stderr is discarded
/// (`validate` writes device errors there).
pub(crate) fn run_quick(exe: &Path, args: &[&str]) -> Result<QuickOutput, NpuError> {
    run_quick_with(exe, args, None)
}

/// [`run_quick`] with `FLM_CONFIG_PATH` set to `config` when given.
fn run_quick_with(
    exe: &Path,
    args: &[&str],
    config: Option<&Path>,
) -> Result<QuickOutput, NpuError> {
    Ok(bounded::run_flm(exe, args, config, QuickLimits::default())?)
}

/// The version `version --json` prints (`{ "version": "1.0.6" }`), or failing that the one in
/// `FLM v1.0.6`.
/// `--version` is the fallback: it works even when FastFlowLM finds no model_list.json of its
/// own, which every other verb needs (it exits 1, so only its output counts).
pub fn read_version(exe: &Path) -> Result<String, NpuError> {
    read_version_on(exe, Path::new("/"))
}

/// [`read_version`] on the system under `root`. When the program (1.0.8 and later) refuses to
/// start because the NPU is held, that is the error ([`NpuError::DeviceBusy`], naming who holds
/// it), not an unknown version.
fn read_version_on(exe: &Path, root: &Path) -> Result<String, NpuError> {
    let out = run_quick(exe, &["version", "--json"])?;
    if let Some(v) = parse_version_output(&out.stdout) {
        return Ok(v);
    }
    if about_the_device(&out) {
        if let Some(holders) = held_by(root) {
            return Err(NpuError::DeviceBusy {
                path: exe.to_path_buf(),
                holders,
            });
        }
    }
    let text = run_quick(exe, &["--version"])?;
    parse_version_output(&text.stdout).ok_or_else(|| {
        let said = if out.stdout.trim().is_empty() {
            &out.stderr
        } else {
            &out.stdout
        };
        NpuError::VersionUnknown {
            path: exe.to_path_buf(),
            output: process::strip_ansi(said.trim()).chars().take(200).collect(),
        }
    })
}

/// "1.0.6" from `{ "version": "1.0.6" }` or from text such as `FLM v1.0.6`.
pub fn parse_version_output(out: &str) -> Option<String> {
    if let Ok(v) = serde_json::from_str::<Value>(out.trim()) {
        if let Some(s) = v.get("version").and_then(Value::as_str) {
            let s = s.trim().trim_start_matches(['v', 'V']);
            if !s.is_empty() {
                return Some(s.to_string());
            }
        }
    }
    hearth_npu::software::parse_flm_version(out)
}

/// The version the FastFlowLM on `port` says it is (`GET /api/version`: `{"version":
/// "1.0.14"}`), within 2 s: how Hearth learns about the FastFlowLM it runs without starting a
/// second `flm` beside it (1.0.8 and later hold the NPU in every process).
pub fn running_version(port: u16) -> Option<String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(2)))
        .build()
        .into();
    let body = agent
        .get(&format!("http://127.0.0.1:{port}/api/version"))
        .call()
        .ok()?
        .body_mut()
        .with_config()
        .limit(4096)
        .read_to_string()
        .ok()?;
    parse_version_output(&body)
}

/// Checks `version` against [`MIN_VERSION`].
pub fn check_version(exe: &Path, version: &str) -> Result<(), NpuError> {
    if hearth_npu::software::version_at_least(version, MIN_VERSION) {
        Ok(())
    } else {
        Err(NpuError::TooOld {
            path: exe.to_path_buf(),
            found: version.to_string(),
            needed: MIN_VERSION.to_string(),
        })
    }
}

/// What was learnt of each FastFlowLM program, with the size and time of change of its file
/// then: asked once per process (and again only when the file changes and no Hearth server
/// runs), since from 1.0.8 every `flm` opens the NPU at start and a second one beside a running
/// server is refused.
static LEARNT: Mutex<Vec<(PathBuf, Option<Stamp>, FlmProgram)>> = Mutex::new(Vec::new());

/// A file's size and time of change.
type Stamp = (u64, SystemTime);

/// The size and time of change of `path`'s file (links resolved).
fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

/// Finds FastFlowLM as [`locate`] does, reads its version and refuses one older than
/// [`MIN_VERSION`].
///
/// The version is asked once: later calls answer from what was learnt while the file is
/// unchanged. While Hearth's own FastFlowLM 1.0.8 or later runs ([`own_server`]), no second
/// `flm` is started (each opens the NPU at start and would be refused it): what was learnt
/// stands, else the running server is asked (`/api/version`). Beside an older server a second
/// `flm` of the same release is harmless; one of 1.0.8 or later is refused the NPU, and that
/// reads as busy ([`NpuError::DeviceBusy`], the holder named).
pub fn find(lookup: &Lookup) -> Result<FlmProgram, NpuError> {
    let path = locate(lookup)?;
    let now = stamp(&path);
    let own = own_server().filter(OwnServer::refuses_a_second_flm);
    {
        let learnt = LEARNT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, program)) = learnt
            .iter()
            .find(|(p, was, _)| *p == path && (*was == now || own.is_some()))
        {
            return Ok(program.clone());
        }
    }
    let version = match &own {
        Some(own) => running_version(own.port).ok_or_else(|| NpuError::DeviceBusy {
            path: path.clone(),
            holders: own.words(),
        })?,
        None => read_version_on(&path, &lookup.root)?,
    };
    check_version(&path, &version)?;
    let program = FlmProgram {
        flavor: flavor_of(&path),
        layout: Layout::of(&path),
        runtime: hearth_npu::elf::runtime_of(&path),
        path: path.clone(),
        version,
        system_root: lookup.root.clone(),
    };
    let mut learnt = LEARNT.lock().unwrap_or_else(|e| e.into_inner());
    learnt.retain(|(p, _, _)| *p != path);
    learnt.push((path, now, program.clone()));
    Ok(program)
}

/// Whether FastFlowLM's words in a failed short command are about the device: "No NPU device
/// found" (1.0.8 and later print it for a device another process holds, and for none) or
/// "busy".
fn about_the_device(out: &QuickOutput) -> bool {
    let said = |text: &str| text.contains("No NPU device found") || text.contains("busy");
    !out.success && (said(&out.stdout) || said(&out.stderr))
}

/// Who holds the NPU of the system under `root`, in words, if anyone: the processes this user
/// can see holding it, or "another user's program" when the device refuses an open (EBUSY) and
/// none is visible. `None` when it is free (or absent).
fn held_by(root: &Path) -> Option<String> {
    let holders = hearth_npu::device_holders(root);
    (!holders.is_empty() || hearth_npu::device_is_busy(root))
        .then(|| hearth_npu::holder_words(&holders))
}

// ---------------------------------------------------------------- validate

/// What `validate --json` said, as Hearth's NPU checks.
#[derive(Debug, Clone, Serialize)]
pub struct ValidateReport {
    /// FastFlowLM's own verdict (`ready`, or the exit status when the output was not JSON).
    pub ready: bool,
    /// One check per failing item, with its fix; one Ok check when ready.
    pub checks: Vec<hearth_npu::Check>,
    /// The JSON as printed, when it was JSON.
    pub raw: Option<Value>,
}

/// Runs `validate --json` and reads it, unless Hearth's own FastFlowLM runs
/// ([`own_server`]): that one passed the check before it started and holds the NPU now, and a
/// second `flm` beside it would be refused (1.0.8 and later), so the report says so instead.
pub fn validate(program: &FlmProgram) -> Result<ValidateReport, NpuError> {
    if let Some(own) = own_server() {
        return Ok(ValidateReport {
            ready: true,
            checks: vec![hearth_npu::Check::new(
                hearth_npu::CheckId::FlmValidate,
                hearth_npu::Status::Info,
                "validate_own_server",
                format!(
                    "FastFlowLM's own check is not run while {} holds the NPU: it passed before that server started",
                    own.words()
                ),
            )
            .with("holders", own.words())],
            raw: None,
        });
    }
    validate_with(program, None)
}

/// [`validate`] with `FLM_CONFIG_PATH` = `registry` (Hearth's model_list.json): FastFlowLM
/// refuses every verb but `--version` when it finds no model list, and an install may have
/// none of its own.
///
/// A busy NPU is reported as busy, with who holds it, whichever way the version says it:
/// `"busy": true` (1.0.9 and later), a refused start (1.0.8), or a held device skipped as
/// absent (up to 1.0.7). The caller makes sure Hearth's own server is not running
/// ([`validate`] does).
pub fn validate_with(
    program: &FlmProgram,
    registry: Option<&Path>,
) -> Result<ValidateReport, NpuError> {
    let out = run_quick_with(&program.path, &["validate", "--json"], registry)?;
    let mut report = parse_validate(&out.stdout, out.success);
    // 1.0.9 and later say `"busy": true`; 1.0.8 refuses to start ("No NPU device found");
    // up to 1.0.7 a held device is skipped as absent. Each is "busy" when the NPU is held.
    let says_busy = report
        .raw
        .as_ref()
        .and_then(|v| v.get("busy"))
        .and_then(Value::as_bool)
        == Some(true);
    let says_absent = report
        .checks
        .iter()
        .any(|c| matches!(c.code.as_str(), "validate_no_device" | "validate_no_report"));
    let held = if says_busy {
        Some(held_by(&program.system_root).unwrap_or_else(|| hearth_npu::holder_words(&[])))
    } else if says_absent {
        held_by(&program.system_root)
    } else {
        None
    };
    if let Some(holders) = held {
        report.checks.retain(|c| {
            !matches!(
                c.code.as_str(),
                "validate_no_device" | "validate_no_report" | "validate_not_ready"
            )
        });
        report.checks.insert(0, busy_check(&holders));
        report.ready = false;
    }
    Ok(report)
}

/// The NPU is busy: `holders` (in words) have it.
fn busy_check(holders: &str) -> hearth_npu::Check {
    problem(
        "busy",
        format!("The NPU is busy: {holders} is using it"),
        "Close that program or wait until it finishes, then try again. The NPU serves one program at a time.",
    )
    .with("holders", holders)
}

/// A problem FastFlowLM's own check found: its code (the fix has the same), English sentence
/// and fix; parameters are added with `with`.
fn problem(code: &str, summary: String, fix: &str) -> hearth_npu::Check {
    let code = format!("validate_{code}");
    hearth_npu::Check::new(
        hearth_npu::CheckId::FlmValidate,
        hearth_npu::Status::Problem,
        &code,
        summary,
    )
    .fix(&code, fix)
}

/// FastFlowLM's own check passed.
fn passed() -> hearth_npu::Check {
    hearth_npu::Check::new(
        hearth_npu::CheckId::FlmValidate,
        hearth_npu::Status::Ok,
        "validate_ok",
        "FastFlowLM's own check passed",
    )
}

/// Reads `validate --json` output (`success` is the exit status, used when it is not JSON).
pub fn parse_validate(out: &str, success: bool) -> ValidateReport {
    let Ok(v) = serde_json::from_str::<Value>(out.trim()) else {
        let checks = if success {
            vec![passed()]
        } else {
            vec![problem(
                "no_report",
                "FastFlowLM's own check (`flm validate`) failed and printed no report".into(),
                "Run `flm validate` in a terminal to see what it reports.",
            )]
        };
        return ValidateReport {
            ready: success,
            checks,
            raw: None,
        };
    };
    let flag = |k: &str| v.get(k).and_then(Value::as_bool);
    let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("unknown");
    let ready = flag("ready").unwrap_or(success);
    let mut checks = Vec::new();
    if flag("kernel_ok") == Some(false) {
        checks.push(
            problem(
                "kernel",
                format!(
                    "FastFlowLM needs Linux 6.17 or later with amdxdna 0.6 or later (this is Linux {}, amdxdna {})",
                    text("kernel"),
                    text("drm_version")
                ),
                "Install a newer kernel (6.17 or later; your distribution's HWE or mainline kernel), or the amdxdna-dkms driver for this one, then restart the computer.",
            )
            .with("kernel", text("kernel"))
            .with("driver", text("drm_version")),
        );
    }
    if flag("amd_device_found") == Some(false) {
        checks.push(problem(
            "no_device",
            "FastFlowLM found no NPU device it could open (/dev/accel/accel*)".into(),
            "If the doctor shows the NPU, this is usually permission: `sudo usermod -aG render $USER`, then log out and back in. Otherwise enable the NPU in the BIOS and install the amdxdna driver.",
        ));
    }
    if flag("all_fw_ok") == Some(false) {
        let found: Vec<String> = v
            .get("devices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|d| d.get("fw_ok").and_then(Value::as_bool) == Some(false))
            .map(|d| {
                let n = |k: &str| d.get(k).and_then(Value::as_i64).unwrap_or(0);
                format!(
                    "{} {}.{}.{}.{}",
                    d.get("device").and_then(Value::as_str).unwrap_or("NPU"),
                    n("fw_major"),
                    n("fw_minor"),
                    n("fw_patch"),
                    n("fw_build")
                )
            })
            .collect();
        let found = if found.is_empty() {
            "older".into()
        } else {
            found.join(", ")
        };
        checks.push(
            problem(
                "firmware",
                format!("FastFlowLM needs NPU firmware 1.1 or newer (found {found})"),
                "Update the NPU firmware: install the newest linux-firmware package (Ubuntu: `sudo apt update && sudo apt install --only-upgrade linux-firmware`), then restart the computer.",
            )
            .with("found", found),
        );
    }
    if flag("enough_cols") == Some(false) {
        checks.push(problem(
            "columns",
            "This NPU has fewer than 8 columns: FastFlowLM needs an XDNA 2 NPU (Ryzen AI 300 series or later)".into(),
            "Nothing to fix on this computer: Hearth runs on the CPU.",
        ));
    }
    if flag("memlock_ok") == Some(false) {
        checks.push(problem(
            "memlock",
            format!(
                "FastFlowLM cannot lock enough memory (limit {} bytes)",
                text("memlock_limit")
            ),
            "Allow unlimited locked memory: add `* soft memlock unlimited` and `* hard memlock unlimited` to /etc/security/limits.d/99-npu.conf (with sudo), then log out and log back in.",
        ).with("limit", text("memlock_limit")));
    }
    if flag("npu_driver_ok") == Some(false) {
        checks.push(problem(
            "driver",
            "FastFlowLM reports the NPU driver is not working".into(),
            "Reinstall the NPU driver, then restart the computer.",
        ));
    }
    if flag("runtime_ok") == Some(false) {
        checks.push(
            problem(
                "runtime",
                format!(
                    "OpenFlowLM could not open the NPU through its runtime: {}",
                    text("runtime_error")
                ),
                "Install XRT with its NPU plugin (see the XRT check), then restart the computer.",
            )
            .with("reason", text("runtime_error")),
        );
    }
    if !ready && checks.is_empty() {
        checks.push(problem(
            "not_ready",
            "FastFlowLM's own check (`flm validate`) says the NPU is not ready".into(),
            "Run `flm validate` in a terminal to see what it reports.",
        ));
    }
    if ready && checks.is_empty() {
        checks.push(passed());
    }
    ValidateReport {
        ready,
        checks,
        raw: Some(v),
    }
}

/// Adds the report's checks to a diagnosis (the doctor's NPU status), which then is ready only
/// if FastFlowLM agrees.
pub fn fold_validate(diagnosis: &mut hearth_npu::Diagnosis, report: &ValidateReport) {
    diagnosis.add_checks(report.checks.iter().cloned());
}

/// The doctor's NPU status with FastFlowLM's own check folded in: [`hearth_npu::diagnose`] of `root`,
/// then, for the FastFlowLM this process finds ([`Lookup::from_env`]), `validate --json`.
/// FastFlowLM is only asked on the live system (`root` = `/`): a fixture tree has none.
pub fn npu_status(root: &Path) -> hearth_npu::Diagnosis {
    let mut diagnosis = hearth_npu::diagnose(root);
    if root != Path::new("/") {
        return diagnosis;
    }
    match find(&crate::npu::python_env::lookup()) {
        // The doctor's own FastFlowLM check already says how to install it.
        Err(NpuError::NotInstalled { .. }) => {}
        Err(e) => diagnosis.add_checks([problem(
            "unusable",
            e.to_string(),
            "Install or update FastFlowLM, then run `hearth doctor` again.",
        )
        .with("reason", e)]),
        Ok(program) => match validate(&program) {
            Ok(report) => fold_validate(&mut diagnosis, &report),
            Err(e) => diagnosis.add_checks([hearth_npu::Check::new(
                hearth_npu::CheckId::FlmValidate,
                hearth_npu::Status::Warning,
                "validate_failed",
                format!("FastFlowLM's own check could not run: {e}"),
            )
            .with("reason", &e)
            .fix(
                "validate_failed",
                "Run `flm validate` in a terminal to see what it reports.",
            )]),
        },
    }
    diagnosis
}

// ---------------------------------------------------------------- kernels and models

/// The folder holding FastFlowLM's `xclbins/`, found as FastFlowLM finds it: `FLM_XCLBIN_PATH`
/// (a trailing `/xclbins` is dropped), the program's own folder (after resolving links), its
/// prefix's `share/flm` (1.0.x installs a package relocatably there), then
/// [`STANDARD_KERNEL_ROOT`]. A path that does not hold `xclbins/` is skipped, as FastFlowLM does.
pub fn kernel_root(program: &Path, flm_xclbin_path: Option<&Path>) -> Option<PathBuf> {
    let from_env = flm_xclbin_path.map(|p| {
        let s = p.to_string_lossy();
        let s = s.trim_end_matches('/');
        PathBuf::from(s.strip_suffix("/xclbins").unwrap_or(s))
    });
    let exe_dir = program
        .canonicalize()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let share = exe_dir
        .as_ref()
        .and_then(|d| d.parent())
        .map(|prefix| prefix.join("share/flm"));
    [
        from_env,
        exe_dir,
        share,
        Some(PathBuf::from(STANDARD_KERNEL_ROOT)),
    ]
    .into_iter()
    .flatten()
    .find(|root| root.join("xclbins").is_dir())
}

/// Whether FastFlowLM `program` can run the registry entry `entry` on the NPU: it needs an
/// engine for the entry's family and kernels in `xclbins/<name>/` under its kernel root
/// (`FLM_XCLBIN_PATH` is read from this process's environment), and the model must not be one
/// it is known to fail with ([`known_issues`]).
pub fn npu_support(program: &FlmProgram, entry: &FlmModel) -> Availability {
    npu_support_with(program, entry, xclbin_env().as_deref())
}

/// `FLM_XCLBIN_PATH` of this process, when set.
fn xclbin_env() -> Option<PathBuf> {
    std::env::var_os("FLM_XCLBIN_PATH")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// [`npu_support`] for the FastFlowLM this process finds ([`Lookup::from_env`]); when none is
/// found, or it is too old, the reason says so.
pub fn npu_availability(entry: &FlmModel) -> Availability {
    match find(&crate::npu::python_env::lookup()) {
        Ok(program) => npu_support(&program, entry),
        Err(e) => Availability::unusable(BackendKind::Npu, e.to_string()),
    }
}

/// Whether the model `name` (a registry name or tag) of Hearth's registry at `registry` can run
/// on the NPU here, with the reason when not (no FastFlowLM, too old, no engine or kernels for
/// it, or not a registered model at all).
pub fn registry_availability(registry: &Path, name: &str) -> Availability {
    registry_availabilities(registry, &[name])
        .pop()
        .expect("one answer per name")
}

/// [`registry_availability`] for each of `names`, finding FastFlowLM and reading the registry
/// once.
pub fn registry_availabilities(registry: &Path, names: &[&str]) -> Vec<Availability> {
    let program = match find(&crate::npu::python_env::lookup()) {
        Ok(program) => program,
        Err(e) => {
            let reason = e.to_string();
            return names
                .iter()
                .map(|_| Availability::unusable(BackendKind::Npu, reason.clone()))
                .collect();
        }
    };
    let file = FlmRegistry::read(registry).ok();
    names
        .iter()
        .map(|name| match file.as_ref().and_then(|f| f.find(name)) {
            Some((_, entry)) => npu_support(&program, entry),
            None => Availability::unusable(
                BackendKind::Npu,
                format!(
                    "{name} is not in Hearth's model registry, and FastFlowLM runs registered \
                     models only (the built-in demo and model folders given by path run on the \
                     CPU)"
                ),
            ),
        })
        .collect()
}

/// [`npu_support`] without the table of known incompatibilities: whether FastFlowLM has what
/// the model needs, for a tester who tries the NPU anyway.
pub fn npu_support_anyway(program: &FlmProgram, entry: &FlmModel) -> Availability {
    installed_support(program, entry, xclbin_env().as_deref())
}

/// [`npu_support`] with `FLM_XCLBIN_PATH` given.
pub fn npu_support_with(
    program: &FlmProgram,
    entry: &FlmModel,
    flm_xclbin_path: Option<&Path>,
) -> Availability {
    let installed = installed_support(program, entry, flm_xclbin_path);
    if !installed.usable {
        return installed;
    }
    match known_issues::known_issue(&program.version, entry) {
        Some(issue) => {
            Availability::unusable(BackendKind::Npu, issue.words(&entry.name, &program.label()))
        }
        None => installed,
    }
}

/// Whether `program` has an engine for the entry's family and kernels for its name.
fn installed_support(
    program: &FlmProgram,
    entry: &FlmModel,
    flm_xclbin_path: Option<&Path>,
) -> Availability {
    if let Some(missing) = program.layout.missing(&program.path) {
        return Availability::unusable(BackendKind::Npu, missing);
    }
    let family = entry.details.family.as_str();
    if !ENGINE_FAMILIES.contains(&family) {
        return Availability::unusable(
            BackendKind::Npu,
            format!(
                "{} has no engine for the model family {family:?} of {}: it runs on the CPU",
                program.label(),
                entry.name
            ),
        );
    }
    let Some(root) = kernel_root(&program.path, flm_xclbin_path) else {
        return Availability::unusable(
            BackendKind::Npu,
            format!(
                "{}'s NPU kernels (an xclbins folder) were not found next to {}, in {STANDARD_KERNEL_ROOT} or in FLM_XCLBIN_PATH: reinstall FastFlowLM",
                program.label(),
                program.path.display()
            ),
        );
    };
    let kernels = root.join("xclbins").join(&entry.name);
    if !kernels.is_dir() {
        return Availability::unusable(
            BackendKind::Npu,
            format!(
                "{} has no NPU kernels for {} (no folder {}): it runs on the CPU",
                program.label(),
                entry.name,
                kernels.display()
            ),
        );
    }
    Availability::usable(BackendKind::Npu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn versions_from_json_and_text() {
        assert_eq!(
            parse_version_output("{ \"version\": \"1.0.6\" }\n").as_deref(),
            Some("1.0.6")
        );
        assert_eq!(
            parse_version_output("OFLM v1.0.3\n").as_deref(),
            Some("1.0.3")
        );
        assert_eq!(parse_version_output("nothing"), None);
    }

    #[test]
    fn locate_keeps_the_plain_messages() {
        // The order itself is tested in hearth_npu::software.
        let dir = tempfile::tempdir().unwrap();
        let lookup = Lookup {
            hearth_flm: Some(dir.path().join("missing")),
            ..Lookup::default()
        };
        let e = locate(&lookup).unwrap_err();
        assert!(matches!(e, NpuError::NotExecutable { .. }), "{e:?}");
        assert!(e.to_string().starts_with("HEARTH_FLM is "), "{e}");
        let lookup = Lookup {
            standard: dir.path().join("flm"),
            ..Lookup::default()
        };
        let e = locate(&lookup).unwrap_err();
        assert!(matches!(e, NpuError::NotInstalled { .. }), "{e:?}");
        assert!(e.to_string().contains("install it from"), "{e}");
        let flm = script(dir.path(), "flm", "true");
        assert_eq!(locate(&lookup).unwrap(), flm);
    }

    #[test]
    fn too_old_says_which_version_is_needed() {
        let e = check_version(Path::new("/x/flm"), "0.9.44").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("0.9.44") && text.contains(MIN_VERSION),
            "{text}"
        );
        check_version(Path::new("/x/flm"), "0.9.45").unwrap();
        check_version(Path::new("/x/flm"), "1.0.2").unwrap();
        check_version(Path::new("/x/flm"), "1.0.10").unwrap();
    }

    #[test]
    fn validate_each_failing_item_has_a_fix() {
        let out = r#"{"all_fw_ok": false, "amd_device_found": true, "devices": [{"device": "/dev/accel/accel0",
            "fw_major": 1, "fw_minor": 0, "fw_patch": 5, "fw_build": 64, "fw_ok": false, "cols": 8}],
            "enough_cols": true, "kernel_ok": true, "memlock_ok": false, "memlock_limit": "65536", "ready": false}"#;
        let r = parse_validate(out, false);
        assert!(!r.ready);
        assert_eq!(r.checks.len(), 2, "{:?}", r.checks);
        assert!(r.checks[0].summary.contains("1.0.5.64"));
        assert!(r.checks[1].summary.contains("65536"));
        assert!(r.checks.iter().all(|c| c.fix.is_some()));
        let ok = parse_validate(r#"{"ready": true}"#, true);
        assert!(ok.ready);
        assert_eq!(ok.checks[0].status, hearth_npu::Status::Ok);
        let garbage = parse_validate("Segmentation fault", false);
        assert!(!garbage.ready && garbage.checks[0].fix.is_some());
    }

    #[test]
    fn kernel_root_strips_xclbins_and_skips_missing() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("k/xclbins/M")).unwrap();
        let exe = script(dir.path(), "flm", "true");
        let with_suffix = dir.path().join("k/xclbins/");
        assert_eq!(
            kernel_root(&exe, Some(&with_suffix)),
            Some(dir.path().join("k"))
        );
        fs::create_dir_all(dir.path().join("xclbins")).unwrap();
        let exe_dir = exe.canonicalize().unwrap().parent().unwrap().to_path_buf();
        assert_eq!(
            kernel_root(&exe, Some(&dir.path().join("nowhere"))),
            Some(exe_dir)
        );
    }

    #[test]
    fn a_chosen_python_env_without_flm_is_refused_in_words() {
        use crate::npu::python_env::{flm_in, python_env, set_python_env};
        use std::os::unix::fs::PermissionsExt;
        let _one = crate::npu::python_env::TEST_CHOICE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let env = dir.path().join("venv");
        std::fs::create_dir_all(env.join("bin")).unwrap();
        set_python_env(Some(env.clone()));
        let mut l = Lookup {
            hearth_flm: python_env().map(|e| flm_in(&e)),
            ..Lookup::default()
        };
        let e = locate(&l).unwrap_err().to_string();
        assert!(
            e.contains("holds no FastFlowLM") && e.contains("bin/flm"),
            "{e}"
        );
        std::fs::write(flm_in(&env), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(flm_in(&env), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(locate(&l).unwrap(), flm_in(&env));
        set_python_env(None);
        l.hearth_flm = Some(dir.path().join("nothing"));
        let e = locate(&l).unwrap_err().to_string();
        assert!(e.contains("HEARTH_FLM"), "{e}");
    }
}
