//! The NPU device as each release holds it, imitated by a lock on the file
//! `FLM_IMITATION_DEVICE` names (unset: no device is imitated, nothing is ever busy).
//!
//! amdxdna lets one process at a time hold the device; a second open gets EBUSY. What each
//! release does with that (notes, "FastFlowLM 1.0.8 to 1.0.14"):
//!
//! - up to 1.0.7, `serve` opens the device when it loads its model; `validate` opens it to
//!   read it and silently skips a device it cannot open (`amd_device_found: false`); the other
//!   verbs never open it;
//! - 1.0.8 opens the device in every process at start, before any command: beside a running
//!   `flm` every verb prints `[ERROR]  No NPU device found.` and exits 1;
//! - 1.0.9 and later run `validate` before the device is opened and report a busy one
//!   (`"busy": true`); every other verb still opens it at start as 1.0.8 does (the release
//!   notes name only `validate`, so the imitation assumes the rest is unchanged).

use std::fs::{File, OpenOptions, TryLockError};
use std::sync::OnceLock;

use crate::setup::Release;

/// The device this process holds, for its whole life.
static HELD: OnceLock<File> = OnceLock::new();

/// Whether the device is there and who has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// No device is imitated.
    NoDevice,
    /// This process holds it now.
    Held,
    /// Another process holds it (EBUSY).
    Busy,
}

/// Opens the device and holds it until the process ends.
pub fn open() -> Open {
    if HELD.get().is_some() {
        return Open::Held;
    }
    let Some(path) = std::env::var_os("FLM_IMITATION_DEVICE").filter(|p| !p.is_empty()) else {
        return Open::NoDevice;
    };
    let Ok(file) = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
    else {
        return Open::NoDevice;
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = HELD.set(file);
            Open::Held
        }
        Err(TryLockError::WouldBlock) => Open::Busy,
        Err(TryLockError::Error(_)) => Open::NoDevice,
    }
}

/// Whether another process holds the device, asked without holding it (1.0.9's `validate`).
pub fn busy() -> bool {
    let Some(path) = std::env::var_os("FLM_IMITATION_DEVICE").filter(|p| !p.is_empty()) else {
        return false;
    };
    let Ok(file) = File::open(path) else {
        return false;
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(TryLockError::WouldBlock) => true,
        Err(TryLockError::Error(_)) => false,
    }
}

/// The start-up open of 1.0.8 and later (for 1.0.9 and later, every verb but `validate`):
/// false when the device is busy, after printing what FastFlowLM prints.
pub fn open_at_start(release: &Release, command: Option<&str>) -> bool {
    if !release.at_least(1, 0, 8) || (release.at_least(1, 0, 9) && command == Some("validate")) {
        return true;
    }
    if open() == Open::Busy {
        eprintln!("\x1b[31m[ERROR]  No NPU device found.\x1b[0m");
        return false;
    }
    true
}
