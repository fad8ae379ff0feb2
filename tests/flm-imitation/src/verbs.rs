//! The short verbs: `version`, `port`, `validate`, `list` and `pull`.

use serde_json::json;

use crate::args::Args;
use crate::catalog::{dump4, Catalog};
use crate::device;
use crate::setup::{Fault, Release};
use crate::DEFAULT_PORT;

/// `version [--json]`: `FLM v1.0.6`, or `{ "version": "1.0.6" }` written by hand (spaces
/// inside the braces, no `v`).
pub fn version(release: &Release, args: &Args) -> i32 {
    if args.json {
        println!("{{ \"version\": \"{}\" }}", release.version);
    } else {
        println!("FLM v{}", release.version);
    }
    0
}

/// `port [--json]`.
pub fn port(args: &Args) -> i32 {
    if args.json {
        println!("{{ \"port\": {DEFAULT_PORT} }}");
    } else {
        println!("Server Port: {DEFAULT_PORT}");
    }
    0
}

/// `[ERROR]  Model not found: <tag>...`, on stdout as FastFlowLM prints it.
pub fn model_not_found(tag: &str) {
    println!("[ERROR]  Model not found: {tag}; Please check with `flm list` and try again.");
}

/// `validate [--json]`. A device another process holds is skipped as absent up to 1.0.7 (its
/// open fails with EBUSY), and reported as `"busy": true` from 1.0.9 (1.0.8 never gets here:
/// its start-up open failed first).
pub fn validate(release: &Release, as_json: bool, fault: Fault) -> i32 {
    let old_kernel = fault == Fault::ValidateOldKernel;
    let reports_busy = release.at_least(1, 0, 9);
    let busy = reports_busy && device::busy();
    let skipped = !reports_busy && device::open() == device::Open::Busy;
    let no_device = fault == Fault::ValidateNoDevice || skipped;
    let old_fw = fault == Fault::ValidateOldFirmware;
    let low_memlock = fault == Fault::ValidateMemlock;
    let mut v = json!({
        "object": "npu_stack_validation",
        "platform": "linux",
        "kernel": if old_kernel { "6.11.0-29-generic" } else { "7.0.0-rc2" },
        "kernel_ok": !old_kernel,
        "amd_device_found": true,
        "all_fw_ok": true,
        "enough_cols": true,
        "memlock_ok": true,
        "devices": [],
    });
    if !old_kernel {
        if no_device {
            v["amd_device_found"] = json!(false);
        } else {
            v["drm_version"] = json!("0.6");
            let (minor, patch) = if old_fw { (0, 5) } else { (1, 2) };
            v["devices"] = json!([{
                "cols": 8, "device": "/dev/accel/accel0", "fw_build": 64, "fw_major": 1,
                "fw_minor": minor, "fw_ok": !old_fw, "fw_patch": patch
            }]);
            v["all_fw_ok"] = json!(!old_fw);
        }
        v["memlock_limit"] = json!(if low_memlock { "8388608" } else { "infinity" });
        v["memlock_ok"] = json!(!low_memlock);
    }
    if reports_busy {
        v["busy"] = json!(busy);
    }
    let ready = !(old_kernel || no_device || old_fw || low_memlock || busy);
    v["ready"] = json!(ready);
    if as_json {
        println!("{}", dump4(&v));
    } else {
        println!("[Linux]  Kernel: {}", v["kernel"].as_str().unwrap_or(""));
        if busy {
            eprintln!("\x1b[31m[ERROR]  The NPU is busy: another process is using it.\x1b[0m");
        } else if no_device {
            eprintln!("\x1b[31m[ERROR]  No NPU device found.\x1b[0m");
        } else if !old_kernel {
            println!("\x1b[32m[Linux]  NPU: /dev/accel/accel0 with 8 columns\x1b[0m");
        }
    }
    if ready {
        0
    } else {
        1
    }
}

pub fn list(catalog: &Catalog, args: &Args) -> i32 {
    let filter = args.filter.as_deref().unwrap_or("all");
    if !matches!(filter, "all" | "installed" | "not-installed") {
        println!("[Error]  Invalid filter: please use 'all', 'installed', or 'not-installed'");
        return 1;
    }
    let mut models = Vec::new();
    for (family, size, entry) in catalog.entries() {
        let installed = catalog.installed(&entry);
        let keep = match filter {
            "installed" => installed,
            "not-installed" => !installed,
            _ => true,
        };
        if !keep {
            continue;
        }
        let tag = format!("{family}:{size}");
        let mut e = entry.clone();
        e["name"] = json!(tag);
        e["model"] = json!(tag);
        e["installed"] = json!(installed);
        models.push(e);
    }
    if args.json {
        println!("{}", dump4(&json!({ "models": models })));
    } else {
        println!("Models:");
        if models.is_empty() {
            println!("  No models found for the specified filter.");
        }
        for m in &models {
            let mark = if args.quiet {
                ""
            } else if m["installed"] == json!(true) {
                " ✅"
            } else {
                " ⏬"
            };
            println!("  - {}{mark}", m["name"].as_str().unwrap_or(""));
        }
    }
    0
}

pub fn pull(catalog: &Catalog, args: &Args) -> i32 {
    let tag = args.positional.get(1).map_or("", String::as_str);
    if !catalog.is_tag(tag) {
        model_not_found(tag);
        return 1;
    }
    let tag = catalog.rectify(tag);
    match catalog.entry(&tag) {
        Some(entry) if catalog.installed(&entry) && !args.force => {
            println!("[FLM]  Model is already downloaded.");
            println!("[FLM]  All required files are present.");
            0
        }
        _ => {
            println!("[ERROR]  Failed to pull model: {tag}");
            1
        }
    }
}
