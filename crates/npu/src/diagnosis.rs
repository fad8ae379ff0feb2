//! The NPU doctor: every fact about the NPU path, each problem reported apart with its fix.
//!
//! [`diagnose`] reads the system under a root, opens the device node at most once, and returns
//! a [`Diagnosis`]: a list of [`Check`]s in plain words, and `ready` when none is a problem.

use crate::access::{self, Holder, NodeAccess, OpenOutcome};
use crate::contexts::DeviceContexts;
use crate::device::{self, Detection, Generation, Kernel, NpuDevice};
use crate::elf::Runtime;
use crate::fsroot::FsRoot;
use crate::ioctl::{self, FirmwareVersion, Sensor};
use crate::limits::{self, MemlockLimits};
use crate::metric::Metric;
use crate::software::{self, FlmInfo, XrtInfo, FLM_MIN_VERSION, XRT_MIN_VERSION};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::Path;

/// The oldest NPU firmware FastFlowLM works with.
pub const MIN_FIRMWARE: FirmwareVersion = FirmwareVersion([1, 1, 0, 0]);

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "CheckStatus"))]
pub enum Status {
    /// Fine.
    Ok,
    /// Worth knowing; does not block the NPU path.
    Info,
    /// Might cause trouble; does not block the NPU path.
    Warning,
    /// Blocks the NPU path until fixed.
    Problem,
}

/// What a check looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum CheckId {
    /// Is there an XDNA 2 NPU with its driver?
    Device,
    /// Does the kernel carry the driver?
    Kernel,
    /// Is the NPU firmware new enough?
    Firmware,
    /// Can this user open the device node, and is it free?
    Access,
    /// Is the locked-memory limit unlimited?
    Memlock,
    /// Is XRT with its NPU plugin installed and new enough?
    Xrt,
    /// Is FastFlowLM installed?
    Fastflowlm,
    /// Does FastFlowLM's own check (`flm validate --json`) pass? Added by the caller that runs
    /// it ([`Diagnosis::add_checks`]).
    FlmValidate,
    /// Do the driver's power sensors answer?
    Sensors,
    /// Are the NPU's hardware contexts healthy, and is a context slot free?
    Contexts,
}

/// One finding, in plain words (English), and as a code with parameters for a front end that
/// shows it in another language.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "NpuCheck"))]
pub struct Check {
    /// What was checked.
    pub id: CheckId,
    /// How it came out.
    pub status: Status,
    /// Which finding: the desktop's catalog key is `npu.check.<code>`, filled with `params`.
    pub code: String,
    /// What the finding and its fix name (versions, paths, a group, processes), by name.
    pub params: BTreeMap<String, String>,
    /// One sentence: what is the case.
    pub summary: String,
    /// Which fix: the catalog key is `npu.fix.<fix_code>`, filled with `params`.
    pub fix_code: Option<String>,
    /// What to do about it, step by step, with exact commands; `None` when nothing is needed.
    pub fix: Option<String>,
}

impl Check {
    /// A finding: its check, status, code and English sentence.
    pub fn new(id: CheckId, status: Status, code: &str, summary: impl Into<String>) -> Check {
        Check {
            id,
            status,
            code: code.to_string(),
            params: BTreeMap::new(),
            summary: summary.into(),
            fix_code: None,
            fix: None,
        }
    }

    /// The same finding, naming `value` as parameter `name` (for the summary and the fix).
    pub fn with(mut self, name: &str, value: impl ToString) -> Check {
        self.params.insert(name.to_string(), value.to_string());
        self
    }

    /// The same finding with what to do about it: its code and English text.
    pub fn fix(mut self, code: &str, fix: impl Into<String>) -> Check {
        self.fix_code = Some(code.to_string());
        self.fix = Some(fix.into());
        self
    }
}

/// Everything the doctor found.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "NpuDiagnosis"))]
pub struct Diagnosis {
    /// True when no check is a [`Status::Problem`]: the NPU path can run.
    pub ready: bool,
    /// One line for a status bar: "NPU ready: NPU Strix (XDNA 2)" or what blocks it.
    pub summary: String,
    /// What the system shows of the NPU.
    pub detection: Detection,
    /// The running kernel.
    pub kernel: Option<Kernel>,
    /// The memlock limits of this process.
    pub memlock: Option<MemlockLimits>,
    /// XRT as found.
    pub xrt: XrtInfo,
    /// FastFlowLM as found.
    pub fastflowlm: FlmInfo,
    /// Processes holding the device.
    pub holders: Vec<Holder>,
    /// The driver's sensors, read once through the ioctl when the device opened.
    pub sensors: Metric<Vec<Sensor>>,
    /// The NPU's hardware contexts, slots and last error, read once through the ioctls when the
    /// device opened (not sent to the desktop app's UI yet).
    #[cfg_attr(feature = "ts", ts(skip))]
    pub contexts: Metric<DeviceContexts>,
    /// The findings, in order.
    pub checks: Vec<Check>,
}

/// Diagnoses the NPU path on the system under `root` (`/` for this machine).
pub fn diagnose(root: &Path) -> Diagnosis {
    diagnose_with(root, access::open_node)
}

/// Like [`diagnose`], with the device open done by `open` (given the resolved node path): the
/// kernel's answer to the open is the one thing a fixture tree cannot give, so tests pass it in.
pub fn diagnose_with(root: &Path, open: impl FnOnce(&Path) -> io::Result<File>) -> Diagnosis {
    let root = FsRoot::new(root);
    let detection = device::detect(&root);
    let kernel = device::Kernel::read(&root);
    let mut checks = Vec::new();
    let mut holders = Vec::new();
    let mut sensors = Metric::unavailable("no NPU device: the sensors ioctl was not run");
    let mut contexts = Metric::unavailable("no NPU device: the context query was not run");

    checks.push(device_check(&detection, kernel.as_ref()));
    checks.push(kernel_check(&root, kernel.as_ref(), &detection));
    if let Detection::Found(dev) = &detection {
        if dev.generation == Generation::Xdna2 {
            checks.push(firmware_check(dev));
            let node = root.path(&dev.node);
            let outcome = OpenOutcome::from_result(open(&node));
            let facts = access::node_access(&root, &dev.node);
            sensors = read_sensors(&outcome, facts.as_ref());
            contexts = read_contexts(&root, &outcome, facts.as_ref());
            let context_pids: Vec<i64> = match &contexts {
                Metric::Available { value, .. } => value.contexts.iter().map(|c| c.pid).collect(),
                Metric::Unavailable { .. } => Vec::new(),
            };
            holders = access::find_holders(&root, &dev.node, &context_pids);
            checks.push(access_check(dev, &outcome, facts.as_ref(), &holders));
            checks.push(contexts_check(&contexts));
        }
    }
    let memlock = MemlockLimits::read(&root);
    checks.push(memlock_check(&root, &memlock));
    let xrt = software::find_xrt(&root);
    let fastflowlm = software::find_flm(&root);
    checks.push(match fastflowlm.runtime {
        Some(Runtime::Hrx) => hrx_check(&xrt),
        _ => xrt_check(&xrt),
    });
    checks.push(flm_check(&fastflowlm));
    checks.push(match &sensors {
        Metric::Available { value, .. } => {
            let power: Vec<String> = value
                .iter()
                .filter(|s| s.kind == ioctl::SensorKind::Power)
                .map(|s| format!("{} {:.2} W", s.label, s.value))
                .collect();
            Check::new(
                CheckId::Sensors,
                Status::Info,
                "sensors",
                format!("NPU sensors answer: {}", power.join(", ")),
            )
            .with("sensors", power.join(", "))
        }
        Metric::Unavailable { unavailable } => Check::new(
            CheckId::Sensors,
            Status::Info,
            "sensors_unavailable",
            format!("NPU power sensors unavailable: {unavailable}. Hearth measures power from amdgpu and the battery instead."),
        )
        .with("reason", unavailable),
    });

    let (ready, summary) = verdict(&detection, &checks);
    Diagnosis {
        ready,
        summary,
        detection,
        kernel,
        memlock: memlock.ok(),
        xrt,
        fastflowlm,
        holders,
        sensors,
        contexts,
        checks,
    }
}

/// Ready when no check is a problem, and the one-line summary that says so or names the first
/// problem.
fn verdict(detection: &Detection, checks: &[Check]) -> (bool, String) {
    let problems: Vec<&Check> = checks
        .iter()
        .filter(|c| c.status == Status::Problem)
        .collect();
    let ready = problems.is_empty();
    let summary = match (detection, problems.first()) {
        (Detection::Found(d), None) => format!("NPU ready: {}", d.display_name()),
        (_, Some(first)) if problems.len() == 1 => {
            format!("NPU not ready: {}", first.summary)
        }
        (_, Some(first)) => format!(
            "NPU not ready ({} problems): {}",
            problems.len(),
            first.summary
        ),
        (_, None) => "NPU not ready".into(),
    };
    (ready, summary)
}

impl Diagnosis {
    /// Adds findings made elsewhere (FastFlowLM's own `validate`), after the others, and
    /// updates `ready` and `summary` to count them.
    pub fn add_checks(&mut self, checks: impl IntoIterator<Item = Check>) {
        self.checks.extend(checks);
        let (ready, summary) = verdict(&self.detection, &self.checks);
        self.ready = ready;
        self.summary = summary;
    }

    /// Replaces the hardware contexts (read from the device elsewhere, or decoded from a saved
    /// reply) and the check that judges them.
    pub fn set_contexts(&mut self, contexts: Metric<DeviceContexts>) {
        let check = contexts_check(&contexts);
        match self.checks.iter_mut().find(|c| c.id == CheckId::Contexts) {
            Some(old) => *old = check,
            None => self.checks.push(check),
        }
        self.contexts = contexts;
        let (ready, summary) = verdict(&self.detection, &self.checks);
        self.ready = ready;
        self.summary = summary;
    }
}

const DRIVER_FIX: &str = "Use Linux 6.14 or later (it includes the amdxdna driver), or install \
the driver for your kernel: on Ubuntu `sudo add-apt-repository ppa:amd-team/xrt && sudo apt \
install amdxdna-dkms`. Then restart the computer.";

fn device_check(detection: &Detection, kernel: Option<&Kernel>) -> Check {
    match detection {
        Detection::Found(d) if d.generation == Generation::Xdna2 => Check::new(
            CheckId::Device,
            Status::Ok,
            "device_found",
            format!(
                "NPU found: {}{}, driver {}",
                d.display_name(),
                d.pci_address
                    .as_deref()
                    .map(|a| format!(" at PCI {a}"))
                    .unwrap_or_default(),
                d.driver.as_deref().unwrap_or("unknown")
            ),
        )
        .with("name", d.display_name())
        .with("pci", d.pci_address.as_deref().unwrap_or("?"))
        .with("driver", d.driver.as_deref().unwrap_or("?")),
        Detection::Found(d) => Check::new(
            CheckId::Device,
            Status::Problem,
            "device_first_generation",
            format!(
                "This NPU ({}) is the first generation, which FastFlowLM does not support",
                d.display_name()
            ),
        )
        .with("name", d.display_name())
        .fix("xdna2_needed", "Nothing to fix: the NPU path needs an XDNA 2 NPU (Ryzen AI 300 series or later). Hearth runs on the CPU."),
        Detection::NoDriver {
            pci_address,
            generation,
        } => {
            let summary = format!(
                "An {} NPU is in this computer (PCI {pci_address}), but no driver has taken it",
                generation.label()
            );
            let (fix_code, fix) = if kernel.is_some_and(Kernel::has_inbox_amdxdna) {
                ("driver_not_started", "Your kernel has the amdxdna driver but it did not start. Run `sudo modprobe \
amdxdna`, and if that fails, `sudo dmesg | grep -i amdxdna` shows why (often missing NPU firmware: \
update the linux-firmware package). Then restart.")
            } else {
                ("driver", DRIVER_FIX)
            };
            Check::new(CheckId::Device, Status::Problem, "device_no_driver", summary)
                .with("generation", generation.label())
                .with("pci", pci_address)
                .fix(fix_code, fix)
        }
        Detection::NotFound => Check::new(CheckId::Device, Status::Problem, "device_not_found", "No NPU was found")
            .fix("enable_npu", format!(
                "If this computer has a Ryzen AI processor, the NPU may be switched off: open the \
BIOS/UEFI setup (usually F2 or Del at start) and enable the NPU or \"IPU\". {DRIVER_FIX} \
Without an NPU, Hearth runs on the CPU."
            )),
    }
}

fn kernel_check(root: &FsRoot, kernel: Option<&Kernel>, detection: &Detection) -> Check {
    let Some(k) = kernel else {
        return Check::new(
            CheckId::Kernel,
            Status::Warning,
            "kernel_unreadable",
            "The kernel version could not be read (/proc/sys/kernel/osrelease)",
        );
    };
    let driver_present = root.exists("/sys/module/amdxdna")
        || matches!(detection, Detection::Found(d) if d.driver.as_deref() == Some("amdxdna"));
    if k.version.is_none() {
        return Check::new(
            CheckId::Kernel,
            Status::Warning,
            "kernel_unknown",
            format!(
                "The kernel version {:?} could not be understood",
                crate::fsroot::shorten(&k.release)
            ),
        )
        .with("release", crate::fsroot::shorten(&k.release));
    }
    if k.has_inbox_amdxdna() {
        Check::new(
            CheckId::Kernel,
            Status::Ok,
            "kernel_inbox",
            format!("Linux {} includes the amdxdna driver", k.release),
        )
        .with("release", &k.release)
    } else if driver_present {
        Check::new(
            CheckId::Kernel,
            Status::Ok,
            "kernel_dkms",
            format!(
                "Linux {} is older than 6.14, but the amdxdna driver is installed (DKMS)",
                k.release
            ),
        )
        .with("release", &k.release)
    } else {
        let check = Check::new(
            CheckId::Kernel,
            Status::Problem,
            "kernel_old",
            format!(
                "Linux {} is older than 6.14 and the amdxdna driver is not installed",
                k.release
            ),
        )
        .with("release", &k.release);
        if matches!(detection, Detection::NoDriver { .. }) {
            check.fix("same_as_above", "The same fix as for the NPU above.")
        } else {
            check.fix("driver", DRIVER_FIX)
        }
    }
}

fn firmware_check(dev: &NpuDevice) -> Check {
    let fix = "Update the NPU firmware: install the newest linux-firmware package for your \
distribution (Ubuntu: `sudo apt update && sudo apt install --only-upgrade linux-firmware`), then \
restart the computer.";
    match (&dev.firmware, &dev.firmware_text) {
        (Some(fw), _) if *fw >= MIN_FIRMWARE => Check::new(
            CheckId::Firmware,
            Status::Ok,
            "firmware_ok",
            format!("NPU firmware {fw} (needs {MIN_FIRMWARE} or newer)"),
        )
        .with("version", fw)
        .with("min", MIN_FIRMWARE),
        (Some(fw), _) => Check::new(
            CheckId::Firmware,
            Status::Problem,
            "firmware_old",
            format!("NPU firmware {fw} is older than {MIN_FIRMWARE}, which FastFlowLM needs"),
        )
        .with("version", fw)
        .with("min", MIN_FIRMWARE)
        .fix("firmware", fix),
        (None, Some(text)) => Check::new(
            CheckId::Firmware,
            Status::Warning,
            "firmware_unknown",
            format!("NPU firmware version {text:?} could not be understood"),
        )
        .with("version", text),
        (None, None) => Check::new(
            CheckId::Firmware,
            Status::Warning,
            "firmware_missing",
            "The NPU firmware version is not shown by the driver (fw_version missing)",
        )
        .fix("firmware", fix),
    }
}

fn access_check(
    dev: &NpuDevice,
    outcome: &OpenOutcome,
    facts: Option<&NodeAccess>,
    holders: &[Holder],
) -> Check {
    match outcome {
        OpenOutcome::Opened(_) if holders.is_empty() => Check::new(
            CheckId::Access,
            Status::Ok,
            "access_ok",
            format!("You can open {}", dev.node),
        )
        .with("node", &dev.node),
        OpenOutcome::Opened(_) => Check::new(
            CheckId::Access,
            Status::Info,
            "access_shared",
            format!(
                "You can open {}; it is also in use by {}",
                dev.node,
                access::holder_words(holders)
            ),
        )
        .with("node", &dev.node)
        .with("holders", access::holder_words(holders)),
        OpenOutcome::Missing => Check::new(
            CheckId::Access,
            Status::Problem,
            "access_missing",
            format!("The driver is loaded but {} does not exist", dev.node),
        )
        .with("node", &dev.node)
        .fix("restart_dmesg_node", "Restart the computer. If it is still missing, `ls -l /dev/accel` and `sudo dmesg | grep -i amdxdna` show what the driver did."),
        OpenOutcome::Denied => {
            let group = facts.map(|f| f.group.as_str()).unwrap_or("render");
            let user = facts
                .and_then(|f| f.user.clone())
                .unwrap_or_else(|| "$USER".into());
            let listed = facts.is_some_and(|f| f.user_listed_in_group);
            let session = facts.is_some_and(|f| f.session_has_group);
            if listed && !session {
                Check::new(
                    CheckId::Access,
                    Status::Problem,
                    "access_new_group",
                    format!("You were added to the {group} group, but this login started before that"),
                )
                .with("group", group)
                .fix("log_in_again", "Log out and log back in (or restart the computer) so the new group applies.")
            } else {
                Check::new(
                    CheckId::Access,
                    Status::Problem,
                    "access_denied",
                    format!("No permission to open {}: it belongs to the {group} group", dev.node),
                )
                .with("node", &dev.node)
                .with("group", group)
                .with("user", &user)
                .fix("join_group", format!(
                    "Add yourself to the group: `sudo usermod -aG {group} {user}`. Then log out and log back in (a new login is needed before the group applies)."
                ))
            }
        }
        OpenOutcome::Busy if holders.is_empty() => Check::new(
            CheckId::Access,
            Status::Problem,
            "access_busy",
            format!("{} is busy: another user's program has it open", dev.node),
        )
        .with("node", &dev.node)
        .fix("close_other_apps", "Close other AI apps (FastFlowLM, Lemonade, another Hearth). `sudo fuser -v /dev/accel/*` shows which process holds it."),
        OpenOutcome::Busy => Check::new(
            CheckId::Access,
            Status::Problem,
            "access_busy_by",
            format!("{} is busy: {} has it open", dev.node, access::holder_words(holders)),
        )
        .with("node", &dev.node)
        .with("holders", access::holder_words(holders))
        .with("program", &holders[0].name)
        .with("pid", holders[0].pid)
        .fix("close_holder", format!(
            "Close {} or wait until it finishes (to stop it now: `kill {}`).",
            holders[0].name, holders[0].pid
        )),
        OpenOutcome::Failed(msg) => Check::new(
            CheckId::Access,
            Status::Problem,
            "access_failed",
            format!("{} could not be opened: {msg}", dev.node),
        )
        .with("node", &dev.node)
        .with("reason", msg)
        .fix("restart_dmesg", "Restart the computer; if it persists, `sudo dmesg | grep -i amdxdna` shows the driver's error."),
    }
}

fn read_sensors(outcome: &OpenOutcome, facts: Option<&NodeAccess>) -> Metric<Vec<Sensor>> {
    match outcome {
        OpenOutcome::Opened(file) if facts.is_some_and(|f| f.is_char_device) => {
            match ioctl::read_sensors(file) {
                Ok(s) if s.is_empty() => Metric::unavailable("the driver returned no sensors"),
                Ok(s) => Metric::available(s, "amdxdna GET_INFO sensors ioctl"),
                Err(e) => Metric::unavailable(ioctl::describe_error(&e)),
            }
        }
        OpenOutcome::Opened(_) => {
            Metric::unavailable("the device node is not a character device: the ioctl was not run")
        }
        _ => Metric::unavailable("the device could not be opened"),
    }
}

fn read_contexts(
    root: &FsRoot,
    outcome: &OpenOutcome,
    facts: Option<&NodeAccess>,
) -> Metric<DeviceContexts> {
    match outcome {
        OpenOutcome::Opened(file) if facts.is_some_and(|f| f.is_char_device) => {
            match DeviceContexts::read(file) {
                Ok(mut c) => {
                    c.name_processes(root);
                    Metric::available(c, "amdxdna GET_ARRAY hardware contexts ioctl")
                }
                Err(e) => Metric::unavailable(e.to_string()),
            }
        }
        OpenOutcome::Opened(_) => Metric::unavailable(
            "the device node is not a character device: the context query was not run",
        ),
        _ => Metric::unavailable("the device could not be opened"),
    }
}

/// The health of every context and whether a slot is free for FastFlowLM.
fn contexts_check(contexts: &Metric<DeviceContexts>) -> Check {
    let view = match contexts {
        Metric::Available { value, .. } => value,
        Metric::Unavailable { unavailable } => {
            return Check::new(
                CheckId::Contexts,
                Status::Info,
                "contexts_unreadable",
                format!("The NPU's hardware contexts could not be read: {unavailable}"),
            )
            .with("reason", unavailable)
        }
    };
    let slots = &view.slots;
    let faulty: Vec<String> = view
        .faulty()
        .map(|c| {
            format!(
                "context {} of {} ({})",
                c.context_id,
                c.owner(),
                c.fault().unwrap_or_default()
            )
        })
        .collect();
    let mut summaries = Vec::new();
    let mut fixes = Vec::new();
    let owners = owners(view);
    if !faulty.is_empty() {
        summaries.push(format!("The NPU reports a fault in {}", faulty.join("; ")));
        fixes.push(
            "Stop the program that owns the faulty context (for FastFlowLM, Hearth restarts it on the next answer). If faults come back, `sudo dmesg | grep -i amdxdna` shows the driver's view; `hearth doctor --report FILE` collects what to send to Hearth's developers."
                .to_string(),
        );
    }
    if slots.full() {
        summaries.push(format!(
            "All {} NPU context slots are in use{}: no other model can load onto the NPU until one is freed",
            slots.total,
            if owners.is_empty() { String::new() } else { format!(" ({owners})") }
        ));
        fixes.push(
            "Close programs that use the NPU (other AI apps, another FastFlowLM), or unload models you do not need; the slots are shared by every program on this computer."
                .to_string(),
        );
    }
    if summaries.is_empty() {
        let mut summary = format!(
            "{} of {} NPU context slots in use; no context reports a fault",
            slots.used, slots.total
        );
        let check = match &view.last_async_error {
            Some(e) => {
                summary.push_str(&format!(
                    " (the last error the NPU raised since the driver loaded: {})",
                    e.describe()
                ));
                Check::new(
                    CheckId::Contexts,
                    Status::Ok,
                    "contexts_ok_last_error",
                    summary,
                )
                .with("error", e.describe())
            }
            None => Check::new(CheckId::Contexts, Status::Ok, "contexts_ok", summary),
        };
        return check.with("used", slots.used).with("total", slots.total);
    }
    // A fault, the slots full, or both: one code for each case.
    let code = match (faulty.is_empty(), slots.full()) {
        (false, false) => "contexts_fault",
        (true, true) => "contexts_full",
        _ => "contexts_fault_full",
    };
    Check::new(
        CheckId::Contexts,
        Status::Warning,
        code,
        summaries.join(". "),
    )
    .with("faults", faulty.join("; "))
    .with("total", slots.total)
    .with(
        "owners",
        if owners.is_empty() {
            "?".to_string()
        } else {
            owners
        },
    )
    .fix(code, fixes.join(" "))
}

/// "flm (process 4242) x2, python3 (process 77)": who holds the visible contexts.
fn owners(view: &DeviceContexts) -> String {
    let mut seen: Vec<(String, usize)> = Vec::new();
    for c in &view.contexts {
        let owner = c.owner();
        match seen.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, n)) => *n += 1,
            None => seen.push((owner, 1)),
        }
    }
    seen.iter()
        .map(|(o, n)| {
            if *n > 1 {
                format!("{o} x{n}")
            } else {
                o.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn memlock_check(root: &FsRoot, memlock: &Result<MemlockLimits, String>) -> Check {
    match memlock {
        Ok(l) if l.is_unlimited() => Check::new(
            CheckId::Memlock,
            Status::Ok,
            "memlock_ok",
            "Locked-memory limit is unlimited",
        ),
        Ok(l) => {
            let written = limits::drop_ins_setting_unlimited(root);
            let check = Check::new(
                CheckId::Memlock,
                Status::Problem,
                "memlock_low",
                format!(
                    "Locked-memory limit is {}; the NPU runtime needs unlimited",
                    l.soft
                ),
            )
            .with("limit", l.soft);
            if written.is_empty() {
                check
                    .with("content", limits::DROP_IN_CONTENT.replace('\n', "\\n"))
                    .with("path", limits::DROP_IN_PATH)
                    .fix("memlock_write", format!(
                    "Allow unlimited locked memory:\n  printf '{}' | sudo tee {}\nThen log out and log back in.",
                    limits::DROP_IN_CONTENT.replace('\n', "\\n"),
                    limits::DROP_IN_PATH
                ))
            } else {
                check.with("files", written.join(", ")).fix("memlock_log_in", format!(
                    "{} already allows it, but this login started before: log out and log back in. If apps started from the desktop still get the old limit, also set DefaultLimitMEMLOCK=infinity in /etc/systemd/system.conf and /etc/systemd/user.conf and restart.",
                    written.join(", ")
                ))
            }
        }
        Err(reason) => Check::new(
            CheckId::Memlock,
            Status::Warning,
            "memlock_unreadable",
            format!("The locked-memory limit could not be read: {reason}"),
        )
        .with("reason", reason),
    }
}

const XRT_INSTALL: &str = "Install XRT with its NPU plugin. Ubuntu: `sudo add-apt-repository \
ppa:amd-team/xrt && sudo apt install libxrt2 libxrt-npu2 libxrt-utils-npu amdxdna-dkms`. Arch: \
`sudo pacman -S xrt xrt-plugin-amdxdna`.";

/// FastFlowLM's HRX build (1.0.11 and later, and the FastFlow SDK's) opens the NPU through the
/// amdxdna driver and its firmware, which the device, kernel and firmware checks judge: XRT is
/// not needed, whatever is installed.
fn hrx_check(xrt: &XrtInfo) -> Check {
    Check::new(
        CheckId::Xrt,
        Status::Ok,
        "xrt_not_needed",
        format!(
            "FastFlowLM here is the HRX build: it runs the NPU through the amdxdna driver and firmware, without XRT{}",
            xrt.version
                .as_deref()
                .map(|v| format!(" (XRT {v} is installed and unused by it)"))
                .unwrap_or_default()
        ),
    )
}

fn xrt_check(xrt: &XrtInfo) -> Check {
    let Some(lib) = &xrt.library else {
        return Check::new(
            CheckId::Xrt,
            Status::Problem,
            "xrt_missing",
            "XRT (AMD's NPU runtime library) is not installed",
        )
        .fix("xrt_install", XRT_INSTALL);
    };
    match &xrt.version {
        Some(v) if !software::version_at_least(v, XRT_MIN_VERSION) => Check::new(
            CheckId::Xrt,
            Status::Problem,
            "xrt_old",
            format!("XRT {v} is too old for the NPU (needs {XRT_MIN_VERSION} or newer)"),
        )
        .with("version", v)
        .with("min", XRT_MIN_VERSION)
        .fix("xrt_replace", format!("Remove the old XRT packages (Debian 12's libxrt 2.13 cannot drive the NPU), then: {XRT_INSTALL}")),
        _ if xrt.npu_plugin.is_none() => Check::new(
            CheckId::Xrt,
            Status::Problem,
            "xrt_no_plugin",
            format!(
                "XRT {} is installed without its NPU plugin (libxrt_driver_xdna)",
                xrt.version.as_deref().unwrap_or("(version unknown)")
            ),
        )
        .with("version", xrt.version.as_deref().unwrap_or("?"))
        .fix("xrt_plugin", "Install the plugin: Ubuntu `sudo apt install libxrt-npu2`, Arch `sudo pacman -S xrt-plugin-amdxdna`."),
        Some(v) => Check::new(
            CheckId::Xrt,
            Status::Ok,
            "xrt_ok",
            format!("XRT {v} with the NPU plugin"),
        )
        .with("version", v),
        None => Check::new(
            CheckId::Xrt,
            Status::Warning,
            "xrt_version_unknown",
            format!("XRT is installed ({lib}) but its version could not be told"),
        )
        .with("library", lib),
    }
}

fn flm_check(flm: &FlmInfo) -> Check {
    match (&flm.executable, &flm.version) {
        (Some(exe), Some(v)) if !software::version_at_least(v, FLM_MIN_VERSION) => Check::new(
            CheckId::Fastflowlm,
            Status::Problem,
            "flm_old",
            format!("FastFlowLM {v} ({exe}) is too old: Hearth needs {FLM_MIN_VERSION} or newer"),
        )
        .with("version", v)
        .with("path", exe)
        .with("min", FLM_MIN_VERSION)
        .fix("flm_update", format!("Update FastFlowLM to {FLM_MIN_VERSION} or newer from the ROCm/FastFlowLM releases on GitHub (the .deb for Ubuntu, or the AUR package on Arch). Until then Hearth runs on the CPU.")),
        (Some(exe), Some(v)) => Check::new(
            CheckId::Fastflowlm,
            Status::Ok,
            "flm_ok",
            format!("FastFlowLM {v} is installed ({exe})"),
        )
        .with("version", v)
        .with("path", exe),
        (Some(exe), None) => Check::new(
            CheckId::Fastflowlm,
            Status::Warning,
            "flm_version_unknown",
            format!(
                "FastFlowLM is installed ({exe}) but its version is unknown: {}",
                flm.version_error.as_deref().unwrap_or("no answer")
            ),
        )
        .with("path", exe)
        .with("reason", flm.version_error.as_deref().unwrap_or("?")),
        (None, _) => Check::new(
            CheckId::Fastflowlm,
            Status::Problem,
            "flm_missing",
            "FastFlowLM is not installed: Hearth runs models on the NPU through it",
        )
        .fix("flm_install", "Install FastFlowLM for your distribution from the ROCm/FastFlowLM releases on GitHub (a .deb for Ubuntu, or the AUR package on Arch), then run `flm validate`. Until then Hearth runs on the CPU."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contexts::{encode_context, ContextState, HwContext, ResourceInfo};
    use crate::ioctl::ArrayReply;

    fn flm_context(id: u32) -> HwContext {
        HwContext {
            context_id: id,
            firmware_id: id,
            start_col: 0,
            num_col: 4,
            pid: 4242,
            process: Some("flm".into()),
            submitted: 10,
            completed: 10,
            errors: 0,
            migrations: 0,
            preemptions: 0,
            suspensions: 0,
            heap_bytes: 0,
            state: ContextState::Idle,
            txn_op_idx: u32::MAX,
            ctx_pc: u32::MAX,
            fatal_error_type: 0,
            fatal_error_exception_type: 0,
            fatal_error_exception_pc: 0,
            fatal_error_app_module: 0,
        }
    }

    fn view(list: &[HwContext], used: u64) -> Metric<DeviceContexts> {
        let reply = ArrayReply {
            element_size: 160,
            count: list.len() as u32,
            bytes: list.iter().flat_map(|c| encode_context(c, 160)).collect(),
        };
        let res = ResourceInfo {
            clock_max_mhz: 1800,
            tops_max: 50,
            context_slots: 16,
            tops_now: 0,
            contexts_now: used,
        };
        Metric::available(
            DeviceContexts::from_replies(&reply, Ok(res), Ok(None)).unwrap(),
            "test",
        )
    }

    #[test]
    fn contexts_healthy_with_free_slots_are_ok() {
        let c = contexts_check(&view(&[flm_context(1), flm_context(2)], 2));
        assert_eq!(c.status, Status::Ok);
        assert_eq!(
            c.summary,
            "2 of 16 NPU context slots in use; no context reports a fault"
        );
    }

    #[test]
    fn no_free_slot_is_a_warning_naming_the_holders() {
        let c = contexts_check(&view(&[flm_context(1), flm_context(2)], 16));
        assert_eq!(c.status, Status::Warning);
        assert!(
            c.summary
                .starts_with("All 16 NPU context slots are in use (flm (process 4242) x2)"),
            "{}",
            c.summary
        );
        assert!(c.fix.as_deref().unwrap().contains("Close programs"));
    }

    #[test]
    fn a_faulty_context_is_a_warning_with_its_fault() {
        let mut bad = flm_context(3);
        bad.fatal_error_type = 2;
        bad.fatal_error_exception_pc = 0x40;
        let c = contexts_check(&view(&[flm_context(1), bad], 2));
        assert_eq!(c.status, Status::Warning);
        assert!(
            c.summary.starts_with(
                "The NPU reports a fault in context 3 of flm (process 4242) (fatal error type 0x2"
            ),
            "{}",
            c.summary
        );
    }

    #[test]
    fn empty_root_reports_each_problem_apart() {
        let dir = tempfile::tempdir().unwrap();
        let d = diagnose(dir.path());
        assert!(!d.ready);
        let ids: Vec<CheckId> = d.checks.iter().map(|c| c.id).collect();
        assert_eq!(
            ids,
            [
                CheckId::Device,
                CheckId::Kernel,
                CheckId::Memlock,
                CheckId::Xrt,
                CheckId::Fastflowlm,
                CheckId::Sensors
            ]
        );
        assert!(d.checks[0].fix.as_deref().unwrap().contains("BIOS"));
        assert!(d
            .summary
            .starts_with("NPU not ready (3 problems): No NPU was found"));
    }
}
