//! Inside the NPU: its hardware contexts, its free context slots, and the faults it reported.
//!
//! A hardware context is one program's claim on a partition of NPU columns (FastFlowLM holds one
//! or two per loaded model). The driver lists them through GET_ARRAY(`HW_CONTEXT_ALL`), one
//! `struct amdxdna_drm_hwctx_entry` per context, laid out in `include/uapi/drm/amdxdna_accel.h`
//! (Linux 7.1) as:
//!
//! ```text
//!   @0   u32 context_id      @4   u32 start_col       @8   u32 num_col     @12  u32 hwctx_id
//!   @16  s64 pid             @24  u64 command_submissions                  @32  u64 command_completions
//!   @40  u64 migrations      @48  u64 preemptions     @56  u64 errors      @64  u64 priority
//!   @72  u64 heap_usage      @80  u64 suspensions     @88  u32 state (0 idle, 1 active)
//!   @92  u32 pasid           @96..@116 u32 gops, fps, dma_bandwidth, latency, frame_exec_time
//!   @116 u32 txn_op_idx      @120 u32 ctx_pc          @124 u32 fatal_error_type
//!   @128 u32 fatal_error_exception_type               @132 u32 fatal_error_exception_pc
//!   @136 u32 fatal_error_app_module                   @140 u32 pad     = 144 bytes
//! ```
//!
//! AMD's staging driver (2026-07) appends `char name[16] @144` (the creating process's name),
//! 160 bytes. The element size is negotiated: Hearth asks for [`ENTRY_BYTES_WITH_NAME`] and the
//! driver writes `min(asked, its own size)` bytes per record and says which, so each record is
//! read at the stride the driver reports and the name is read only when it is there.
//!
//! Since June 2026 the driver lists only the contexts of processes of the same Linux user (all of
//! them for root), so the count of used slots comes from GET_INFO(`RESOURCE_INFO`)
//! (`npu_task_curr` of `npu_task_max`) when the driver offers it. XDNA 2 NPUs have 16 slots,
//! shared by every process.
//!
//! A context that crashed reports a nonzero `fatal_error_type` with the program counter of the
//! exception. A context disappears when its process exits, so after FastFlowLM dies only the
//! device-wide last asynchronous error (GET_ARRAY(`HW_LAST_ASYNC_ERR`): `u64 err_code @0;
//! u64 ts_us @8` (wall clock, µs since 1970); `u64 ex_err_code @16`) still tells of a fault:
//! [`DeviceContexts::faults_since`] reads both.

use crate::device::{self, Detection};
use crate::fsroot::FsRoot;
use crate::ioctl::{self, array_param, param};
use serde::Serialize;
use std::fs::File;
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Size of a context record in Linux 7.1 (and every kernel with GET_ARRAY before it).
pub const ENTRY_BYTES: u32 = 144;
/// Size of a context record with the process name (AMD's staging driver, 2026-07).
pub const ENTRY_BYTES_WITH_NAME: u32 = 160;
/// Context slots of an XDNA 2 NPU (the driver's `hwctx_limit`), when the driver does not say.
pub const XDNA2_CONTEXT_SLOTS: u64 = 16;
/// Records asked for: more than any NPU has slots; the driver rejects more than 1024.
const MAX_CONTEXTS: u32 = 64;
/// Size of `struct amdxdna_async_error`.
pub const ASYNC_ERROR_BYTES: u32 = 24;
/// Size of `struct amdxdna_drm_get_resource_info` (5 x u64).
pub const RESOURCE_INFO_BYTES: usize = 40;
/// `txn_op_idx` and `ctx_pc` hold this when no command is under way.
const NOT_RUNNING: u32 = u32::MAX;

/// Why the contexts could not be read or decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContextsError {
    /// The driver does not offer the query (an older kernel).
    #[error("the amdxdna driver of this kernel does not list hardware contexts ({what}); a newer kernel or amdxdna-dkms does")]
    Unsupported {
        /// Which query.
        what: &'static str,
    },
    /// The query failed for another reason.
    #[error("the amdxdna {what} query failed: {source}")]
    Ioctl {
        /// Which query.
        what: &'static str,
        /// The system's error.
        source: io::Error,
    },
    /// The driver's records are smaller than the first published layout.
    #[error("the driver's hardware context records are {element_size} bytes, fewer than the {needed} of the layout Hearth reads: this driver is not one Hearth knows")]
    ElementTooSmall {
        /// The record size the driver reported.
        element_size: u32,
        /// The smallest size Hearth reads.
        needed: u32,
    },
    /// The reply is shorter than its own counts say.
    #[error("the driver's {what} reply is truncated: {count} records of {element_size} bytes need {needed} bytes, the reply has {got}")]
    Truncated {
        /// Which reply.
        what: &'static str,
        /// Records it claims.
        count: u32,
        /// Their size.
        element_size: u32,
        /// Bytes those need.
        needed: usize,
        /// Bytes there are.
        got: usize,
    },
    /// A fixed-size reply is shorter than its struct.
    #[error("the driver's {what} reply has {got} bytes, its struct has {needed}")]
    Short {
        /// Which reply.
        what: &'static str,
        /// Bytes of the struct.
        needed: usize,
        /// Bytes there are.
        got: usize,
    },
}

/// Whether a context has work under way (`state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextState {
    /// Every submitted command has completed (or the context is not on the NPU yet).
    Idle,
    /// Commands are in flight.
    Active,
    /// A value this code does not know.
    Other(u32),
}

/// One hardware context, decoded from a `struct amdxdna_drm_hwctx_entry`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HwContext {
    /// The driver's context id.
    pub context_id: u32,
    /// The firmware's context id (`hwctx_id`).
    pub firmware_id: u32,
    /// First NPU column of its partition.
    pub start_col: u32,
    /// Columns in its partition.
    pub num_col: u32,
    /// The process that created it.
    pub pid: i64,
    /// The process's name: the record's `name` (newer drivers), else `/proc/<pid>/comm`.
    pub process: Option<String>,
    /// Commands submitted.
    pub submitted: u64,
    /// Commands completed.
    pub completed: u64,
    /// Errors the driver counted.
    pub errors: u64,
    /// Times moved to other columns.
    pub migrations: u64,
    /// Times preempted.
    pub preemptions: u64,
    /// Times suspended.
    pub suspensions: u64,
    /// Device heap in use, bytes.
    pub heap_bytes: u64,
    /// Idle or active.
    pub state: ContextState,
    /// Index of the last control code run (`u32::MAX` when none is under way).
    pub txn_op_idx: u32,
    /// The context's program counter (`u32::MAX` when none is under way).
    pub ctx_pc: u32,
    /// Nonzero when the context crashed.
    pub fatal_error_type: u32,
    /// The firmware's exception type, with a fatal error.
    pub fatal_error_exception_type: u32,
    /// Program counter of the exception, with a fatal error.
    pub fatal_error_exception_pc: u32,
    /// The firmware module that raised it, with a fatal error.
    pub fatal_error_app_module: u32,
}

impl HwContext {
    /// "flm (process 4242)", or "process 4242" without a name.
    pub fn owner(&self) -> String {
        match &self.process {
            Some(name) => format!("{name} (process {})", self.pid),
            None => format!("process {}", self.pid),
        }
    }

    /// Commands submitted but not completed.
    pub fn pending(&self) -> u64 {
        self.submitted.saturating_sub(self.completed)
    }

    /// What the NPU reported wrong with this context, in words; `None` when healthy.
    pub fn fault(&self) -> Option<String> {
        let mut found = Vec::new();
        if self.fatal_error_type != 0 {
            found.push(format!(
                "fatal error type {:#x} (exception {:#x} at PC {:#010x}, module {:#x})",
                self.fatal_error_type,
                self.fatal_error_exception_type,
                self.fatal_error_exception_pc,
                self.fatal_error_app_module
            ));
        }
        if self.errors > 0 {
            found.push(format!("{} command errors", self.errors));
        }
        (!found.is_empty()).then(|| found.join(", "))
    }

    /// One line: "context 3 of flm (process 4242): active, 120 of 121 commands done, columns
    /// 0-3, healthy".
    pub fn describe(&self) -> String {
        let state = match self.state {
            ContextState::Idle => "idle".to_string(),
            ContextState::Active => "active".to_string(),
            ContextState::Other(n) => format!("state {n}"),
        };
        let columns = match self.num_col {
            0 => "no columns yet".to_string(),
            1 => format!("column {}", self.start_col),
            n => format!("columns {}-{}", self.start_col, self.start_col + n - 1),
        };
        let mut line = format!(
            "context {} of {}: {state}, {} of {} commands done, {columns}",
            self.context_id,
            self.owner(),
            self.completed,
            self.submitted
        );
        if self.txn_op_idx != NOT_RUNNING && self.ctx_pc != NOT_RUNNING {
            line.push_str(&format!(
                ", at op {} PC {:#010x}",
                self.txn_op_idx, self.ctx_pc
            ));
        }
        match self.fault() {
            Some(fault) => line.push_str(&format!(", FAULT: {fault}")),
            None => line.push_str(", healthy"),
        }
        line
    }
}

fn u32_at(r: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]])
}

fn u64_at(r: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&r[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Decodes the records a HW_CONTEXT_ALL query wrote: `count` records of `element_size` bytes
/// (both as the driver returned them) at the start of `bytes`.
pub fn decode_contexts(
    bytes: &[u8],
    element_size: u32,
    count: u32,
) -> Result<Vec<HwContext>, ContextsError> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if element_size < ENTRY_BYTES {
        return Err(ContextsError::ElementTooSmall {
            element_size,
            needed: ENTRY_BYTES,
        });
    }
    let stride = element_size as usize;
    let needed = stride.saturating_mul(count as usize);
    if bytes.len() < needed {
        return Err(ContextsError::Truncated {
            what: "hardware context",
            count,
            element_size,
            needed,
            got: bytes.len(),
        });
    }
    Ok(bytes[..needed]
        .chunks_exact(stride)
        .map(|r| {
            let process = (r.len() >= ENTRY_BYTES_WITH_NAME as usize)
                .then(|| c_name(&r[144..160]))
                .flatten();
            HwContext {
                context_id: u32_at(r, 0),
                start_col: u32_at(r, 4),
                num_col: u32_at(r, 8),
                firmware_id: u32_at(r, 12),
                pid: u64_at(r, 16) as i64,
                submitted: u64_at(r, 24),
                completed: u64_at(r, 32),
                migrations: u64_at(r, 40),
                preemptions: u64_at(r, 48),
                errors: u64_at(r, 56),
                heap_bytes: u64_at(r, 72),
                suspensions: u64_at(r, 80),
                state: match u32_at(r, 88) {
                    0 => ContextState::Idle,
                    1 => ContextState::Active,
                    n => ContextState::Other(n),
                },
                txn_op_idx: u32_at(r, 116),
                ctx_pc: u32_at(r, 120),
                fatal_error_type: u32_at(r, 124),
                fatal_error_exception_type: u32_at(r, 128),
                fatal_error_exception_pc: u32_at(r, 132),
                fatal_error_app_module: u32_at(r, 136),
                process,
            }
        })
        .collect())
}

/// A NUL-terminated name, `None` when empty.
fn c_name(field: &[u8]) -> Option<String> {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    let name = String::from_utf8_lossy(&field[..end]).trim().to_string();
    (!name.is_empty()).then_some(name)
}

/// The driver's resource counters (`struct amdxdna_drm_get_resource_info`, 5 x u64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResourceInfo {
    /// Highest NPU clock, MHz (`npu_clk_max`).
    pub clock_max_mhz: u64,
    /// Peak TOPS (`npu_tops_max`).
    pub tops_max: u64,
    /// Context slots (`npu_task_max`, the driver's `hwctx_limit`).
    pub context_slots: u64,
    /// Current TOPS (`npu_tops_curr`).
    pub tops_now: u64,
    /// Contexts now, of every process and user (`npu_task_curr`).
    pub contexts_now: u64,
}

impl ResourceInfo {
    /// Decodes the 40 bytes of a RESOURCE_INFO query.
    pub fn decode(bytes: &[u8]) -> Result<ResourceInfo, ContextsError> {
        if bytes.len() < RESOURCE_INFO_BYTES {
            return Err(ContextsError::Short {
                what: "resource info",
                needed: RESOURCE_INFO_BYTES,
                got: bytes.len(),
            });
        }
        Ok(ResourceInfo {
            clock_max_mhz: u64_at(bytes, 0),
            tops_max: u64_at(bytes, 8),
            context_slots: u64_at(bytes, 16),
            tops_now: u64_at(bytes, 24),
            contexts_now: u64_at(bytes, 32),
        })
    }
}

/// The last asynchronous error the NPU raised (`struct amdxdna_async_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AsyncError {
    /// The driver's encoded error (number, module, severity, class).
    pub code: u64,
    /// When, in µs since 1970 (wall clock).
    pub at_unix_us: u64,
    /// Extra detail (for AIE errors: the column in bits 0-7, the row in bits 8-15).
    pub extra: u64,
}

impl AsyncError {
    /// Decodes a HW_LAST_ASYNC_ERR reply: `None` when the NPU raised none since the driver
    /// loaded (all zero).
    pub fn decode(bytes: &[u8]) -> Result<Option<AsyncError>, ContextsError> {
        if bytes.len() < ASYNC_ERROR_BYTES as usize {
            return Err(ContextsError::Short {
                what: "last asynchronous error",
                needed: ASYNC_ERROR_BYTES as usize,
                got: bytes.len(),
            });
        }
        let e = AsyncError {
            code: u64_at(bytes, 0),
            at_unix_us: u64_at(bytes, 8),
            extra: u64_at(bytes, 16),
        };
        Ok((e.code != 0 || e.at_unix_us != 0).then_some(e))
    }

    /// When it was raised.
    pub fn at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(self.at_unix_us)
    }

    /// "error 0x40001 (detail 0x302) at 2026-12-05 00:00:00 UTC".
    pub fn describe(&self) -> String {
        format!(
            "error {:#x} (detail {:#x}) at {}",
            self.code,
            self.extra,
            utc(self.at_unix_us / 1_000_000)
        )
    }
}

/// Unix seconds as "2026-12-05 00:00:00 UTC" (the proleptic Gregorian calendar).
fn utc(secs: u64) -> String {
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date, after Howard Hinnant's `civil_from_days`.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// How many context slots are taken, of how many.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextSlots {
    /// Taken, by every process.
    pub used: u64,
    /// All slots.
    pub total: u64,
    /// Where the numbers come from.
    pub source: String,
}

impl ContextSlots {
    /// True when no slot is free: a new model cannot get onto the NPU.
    pub fn full(&self) -> bool {
        self.used >= self.total
    }
}

/// What the driver shows of the NPU's contexts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceContexts {
    /// Every context this user may see.
    pub contexts: Vec<HwContext>,
    /// The record size the driver used ([`ENTRY_BYTES`] or [`ENTRY_BYTES_WITH_NAME`]).
    pub entry_bytes: u32,
    /// Slots taken and free.
    pub slots: ContextSlots,
    /// The driver's resource counters, when it offers them.
    pub resources: Option<ResourceInfo>,
    /// The last asynchronous error the NPU raised since the driver loaded, if any.
    pub last_async_error: Option<AsyncError>,
    /// Why the last asynchronous error could not be read, when it could not.
    pub async_error_unavailable: Option<String>,
}

impl DeviceContexts {
    /// Puts the replies of the three queries together: the contexts (`element_size`, `count`
    /// and bytes as returned), the resource info and the last asynchronous error (each `Err`
    /// when that query failed).
    pub fn from_replies(
        contexts: &ioctl::ArrayReply,
        resources: Result<ResourceInfo, ContextsError>,
        last_async_error: Result<Option<AsyncError>, ContextsError>,
    ) -> Result<DeviceContexts, ContextsError> {
        let list = decode_contexts(&contexts.bytes, contexts.element_size, contexts.count)?;
        let resources = resources
            .map_err(|e| tracing::debug!(error = %e, "no NPU resource info"))
            .ok()
            .filter(|r| r.context_slots > 0);
        let slots = match resources {
            Some(r) => ContextSlots {
                used: r.contexts_now,
                total: r.context_slots,
                source: "amdxdna resource info (every process)".into(),
            },
            None => ContextSlots {
                used: list.len() as u64,
                total: XDNA2_CONTEXT_SLOTS,
                source: "contexts visible to this user, of the 16 an XDNA 2 NPU has".into(),
            },
        };
        let (last_async_error, async_error_unavailable) = match last_async_error {
            Ok(e) => (e, None),
            Err(e) => (None, Some(e.to_string())),
        };
        Ok(DeviceContexts {
            contexts: list,
            entry_bytes: contexts.element_size,
            slots,
            resources,
            last_async_error,
            async_error_unavailable,
        })
    }

    /// Reads the contexts, the slots and the last asynchronous error from an open device.
    /// Only the context list is required; the other two are read when the driver offers them.
    pub fn read(device: &File) -> Result<DeviceContexts, ContextsError> {
        let contexts = ioctl::get_array(
            device,
            array_param::HW_CONTEXT_ALL,
            ENTRY_BYTES_WITH_NAME,
            MAX_CONTEXTS,
        )
        .map_err(|e| query_error("GET_ARRAY(HW_CONTEXT_ALL)", e))?;
        let resources = ioctl::get_info(device, param::RESOURCE_INFO, RESOURCE_INFO_BYTES)
            .map_err(|e| query_error("GET_INFO(RESOURCE_INFO)", e))
            .and_then(|b| ResourceInfo::decode(&b));
        let last_async_error =
            ioctl::get_array(device, array_param::HW_LAST_ASYNC_ERR, ASYNC_ERROR_BYTES, 1)
                .map_err(|e| query_error("GET_ARRAY(HW_LAST_ASYNC_ERR)", e))
                .and_then(|r| AsyncError::decode(&r.bytes));
        DeviceContexts::from_replies(&contexts, resources, last_async_error)
    }

    /// Names the processes whose records carry no name, from `/proc/<pid>/comm`.
    pub(crate) fn name_processes(&mut self, root: &FsRoot) {
        for c in self.contexts.iter_mut().filter(|c| c.process.is_none()) {
            c.process = root
                .read_trimmed(format!("/proc/{}/comm", c.pid))
                .ok()
                .filter(|n| !n.is_empty());
        }
    }

    /// Contexts that report a fault.
    pub fn faulty(&self) -> impl Iterator<Item = &HwContext> {
        self.contexts.iter().filter(|c| c.fault().is_some())
    }

    /// The faults the NPU reported that bear on an answer begun at `since`: every context in
    /// fault now, and the last asynchronous error when it was raised at or after `since`. Empty
    /// when the NPU reported none.
    pub fn faults_since(&self, since: SystemTime) -> Vec<String> {
        let mut found: Vec<String> = self
            .faulty()
            .map(|c| {
                format!(
                    "context {} of {}: {}",
                    c.context_id,
                    c.owner(),
                    c.fault().unwrap_or_default()
                )
            })
            .collect();
        if let Some(e) = self.last_async_error.filter(|e| e.at() >= since) {
            found.push(format!("the NPU raised {}", e.describe()));
        }
        found
    }
}

fn query_error(what: &'static str, e: io::Error) -> ContextsError {
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY) | Some(libc::EINVAL) => {
            ContextsError::Unsupported { what }
        }
        _ => ContextsError::Ioctl { what, source: e },
    }
}

/// Whether the NPU itself reported a fault while an answer ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "npu", content = "detail", rename_all = "snake_case")]
pub enum FaultCheck {
    /// It did: each fault in words.
    Faults(Vec<String>),
    /// It reported none: no context in fault and no device error since the answer began.
    NoFault,
    /// It could not be asked, and why.
    Unknown(String),
}

impl FaultCheck {
    /// One sentence for an error message.
    pub fn words(&self) -> String {
        match self {
            FaultCheck::Faults(faults) => {
                format!("The NPU itself reported a fault: {}.", faults.join("; "))
            }
            FaultCheck::NoFault => "The NPU itself reported no fault (no hardware context in \
                 error, no device error since the answer began)."
                .into(),
            FaultCheck::Unknown(reason) => {
                format!("Whether the NPU itself reported a fault is not known: {reason}.")
            }
        }
    }
}

/// Asks this machine's NPU whether it reported a fault since `since` (when a failed answer
/// began): for the NPU backend when FastFlowLM crashes or stops answering. Opens the device
/// node for the queries and closes it again.
pub fn check_faults_since(since: SystemTime) -> FaultCheck {
    let root = FsRoot::default();
    let dev = match device::detect(&root) {
        Detection::Found(dev) => dev,
        _ => return FaultCheck::Unknown("no NPU with its driver was found".into()),
    };
    let file = match crate::access::open_node(&root.path(&dev.node)) {
        Ok(f) => f,
        Err(e) => return FaultCheck::Unknown(format!("{} could not be opened ({e})", dev.node)),
    };
    match DeviceContexts::read(&file) {
        Ok(mut contexts) => {
            contexts.name_processes(&root);
            let faults = contexts.faults_since(since);
            if faults.is_empty() {
                FaultCheck::NoFault
            } else {
                FaultCheck::Faults(faults)
            }
        }
        Err(e) => FaultCheck::Unknown(e.to_string()),
    }
}

/// Encodes one context record of `element_size` bytes (the driver's half, for tests and
/// fixtures): every field at its offset in the uapi header, the name only when it fits.
pub fn encode_context(c: &HwContext, element_size: u32) -> Vec<u8> {
    let mut r = vec![0u8; element_size as usize];
    let mut put = |at: usize, bytes: &[u8]| {
        if at + bytes.len() <= r.len() {
            r[at..at + bytes.len()].copy_from_slice(bytes);
        }
    };
    put(0, &c.context_id.to_le_bytes());
    put(4, &c.start_col.to_le_bytes());
    put(8, &c.num_col.to_le_bytes());
    put(12, &c.firmware_id.to_le_bytes());
    put(16, &c.pid.to_le_bytes());
    put(24, &c.submitted.to_le_bytes());
    put(32, &c.completed.to_le_bytes());
    put(40, &c.migrations.to_le_bytes());
    put(48, &c.preemptions.to_le_bytes());
    put(56, &c.errors.to_le_bytes());
    put(72, &c.heap_bytes.to_le_bytes());
    put(80, &c.suspensions.to_le_bytes());
    let state = match c.state {
        ContextState::Idle => 0,
        ContextState::Active => 1,
        ContextState::Other(n) => n,
    };
    put(88, &state.to_le_bytes());
    put(116, &c.txn_op_idx.to_le_bytes());
    put(120, &c.ctx_pc.to_le_bytes());
    put(124, &c.fatal_error_type.to_le_bytes());
    put(128, &c.fatal_error_exception_type.to_le_bytes());
    put(132, &c.fatal_error_exception_pc.to_le_bytes());
    put(136, &c.fatal_error_app_module.to_le_bytes());
    if let Some(name) = &c.process {
        let n = name.as_bytes();
        let n = &n[..n.len().min(15)];
        put(144, n);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(id: u32, pid: i64, name: Option<&str>) -> HwContext {
        HwContext {
            context_id: id,
            firmware_id: id + 100,
            start_col: 0,
            num_col: 4,
            pid,
            process: name.map(str::to_string),
            submitted: 121,
            completed: 120,
            errors: 0,
            migrations: 1,
            preemptions: 2,
            suspensions: 3,
            heap_bytes: 64 << 20,
            state: ContextState::Active,
            txn_op_idx: NOT_RUNNING,
            ctx_pc: NOT_RUNNING,
            fatal_error_type: 0,
            fatal_error_exception_type: 0,
            fatal_error_exception_pc: 0,
            fatal_error_app_module: 0,
        }
    }

    fn reply(records: &[HwContext], element_size: u32) -> ioctl::ArrayReply {
        ioctl::ArrayReply {
            element_size,
            count: records.len() as u32,
            bytes: records
                .iter()
                .flat_map(|c| encode_context(c, element_size))
                .collect(),
        }
    }

    #[test]
    fn record_offsets_are_the_headers() {
        let mut c = context(7, 4242, Some("flm"));
        c.fatal_error_type = 0x0102_0304;
        c.fatal_error_exception_pc = 0xA0B0_C0D0;
        c.errors = 5;
        let r = encode_context(&c, ENTRY_BYTES_WITH_NAME);
        assert_eq!(r.len(), 160);
        assert_eq!(&r[0..4], &7u32.to_le_bytes(), "context_id @0");
        assert_eq!(&r[12..16], &107u32.to_le_bytes(), "hwctx_id @12");
        assert_eq!(&r[16..24], &4242i64.to_le_bytes(), "pid @16");
        assert_eq!(&r[24..32], &121u64.to_le_bytes(), "command_submissions @24");
        assert_eq!(&r[32..40], &120u64.to_le_bytes(), "command_completions @32");
        assert_eq!(&r[56..64], &5u64.to_le_bytes(), "errors @56");
        assert_eq!(&r[88..92], &1u32.to_le_bytes(), "state @88");
        assert_eq!(&r[124..128], &[4, 3, 2, 1], "fatal_error_type @124");
        assert_eq!(
            &r[132..136],
            &0xA0B0_C0D0u32.to_le_bytes(),
            "exception pc @132"
        );
        assert_eq!(&r[144..148], b"flm\0", "name @144");
        let back = decode_contexts(&r, 160, 1).unwrap();
        assert_eq!(back, vec![c]);
    }

    #[test]
    fn linux_7_1_records_have_no_name() {
        let c = context(1, 99, Some("flm"));
        let d = decode_contexts(&encode_context(&c, ENTRY_BYTES), ENTRY_BYTES, 1).unwrap();
        assert_eq!(d[0].process, None, "a 144-byte record carries no name");
        assert_eq!(d[0].pid, 99);
    }

    #[test]
    fn records_are_read_at_the_drivers_stride() {
        // A future driver with 176-byte records: the known fields stay where they are.
        let list = [context(1, 10, Some("a")), context(2, 20, Some("b"))];
        let r = reply(&list, 176);
        let d = decode_contexts(&r.bytes, 176, 2).unwrap();
        assert_eq!(d[1].context_id, 2);
        assert_eq!(d[1].process.as_deref(), Some("b"));
    }

    #[test]
    fn malformed_replies_are_errors_not_panics() {
        let r = reply(&[context(1, 10, None), context(2, 20, None)], 144);
        let err = decode_contexts(&r.bytes[..200], 144, 2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the driver's hardware context reply is truncated: 2 records of 144 bytes need 288 bytes, the reply has 200"
        );
        let err = decode_contexts(&r.bytes, 96, 2).unwrap_err();
        assert!(matches!(
            err,
            ContextsError::ElementTooSmall {
                element_size: 96,
                needed: 144
            }
        ));
        assert!(decode_contexts(&[], 0, 0).unwrap().is_empty());
        assert!(decode_contexts(&[], u32::MAX, u32::MAX).is_err());
        assert!(ResourceInfo::decode(&[0u8; 39]).is_err());
        assert!(AsyncError::decode(&[1u8; 23]).is_err());
    }

    #[test]
    fn faults_are_described() {
        let mut c = context(3, 4242, Some("flm"));
        assert_eq!(c.fault(), None);
        assert!(c.describe().ends_with("healthy"), "{}", c.describe());
        c.fatal_error_type = 2;
        c.fatal_error_exception_pc = 0x1c40;
        c.txn_op_idx = 17;
        c.ctx_pc = 0x1c3c;
        let d = c.describe();
        assert!(d.starts_with("context 3 of flm (process 4242): active, 120 of 121 commands done, columns 0-3, at op 17 PC 0x00001c3c"), "{d}");
        assert!(
            d.contains("FAULT: fatal error type 0x2 (exception 0x0 at PC 0x00001c40"),
            "{d}"
        );
    }

    #[test]
    fn slots_come_from_resource_info_else_sixteen() {
        let list = [context(1, 10, None), context(2, 20, None)];
        let res = ResourceInfo {
            clock_max_mhz: 1800,
            tops_max: 50,
            context_slots: 16,
            tops_now: 3,
            contexts_now: 16,
        };
        let d = DeviceContexts::from_replies(&reply(&list, 144), Ok(res), Ok(None)).unwrap();
        assert!(d.slots.full(), "16 of 16 counted over every process");
        let d = DeviceContexts::from_replies(
            &reply(&list, 144),
            Err(ContextsError::Unsupported { what: "x" }),
            Ok(None),
        )
        .unwrap();
        assert_eq!((d.slots.used, d.slots.total), (2, 16));
        assert!(!d.slots.full());
    }

    #[test]
    fn async_errors_count_only_since_the_answer_began() {
        let at = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut bytes = Vec::new();
        bytes.extend(0x8000_0000_0401u64.to_le_bytes());
        bytes.extend(1_800_000_000_000_000u64.to_le_bytes());
        bytes.extend(0x0203u64.to_le_bytes());
        let e = AsyncError::decode(&bytes).unwrap().unwrap();
        assert_eq!(e.at(), at);
        assert_eq!(AsyncError::decode(&[0u8; 24]).unwrap(), None);
        let d = DeviceContexts::from_replies(
            &reply(&[], 160),
            Ok(ResourceInfo::decode(&[0u8; 40]).unwrap()),
            Ok(Some(e)),
        )
        .unwrap();
        assert_eq!(d.faults_since(at - Duration::from_secs(5)).len(), 1);
        assert!(d.faults_since(at + Duration::from_secs(5)).is_empty());
        assert_eq!(
            d.slots.total, 16,
            "zero slots from the driver means it did not say"
        );
    }

    #[test]
    fn error_times_read_as_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_796_428_800), "2026-12-05 00:00:00 UTC");
        assert_eq!(utc(951_782_400 + 3661), "2000-02-29 01:01:01 UTC");
        assert!(
            utc(u64::MAX / 1_000_000).ends_with(" UTC"),
            "no panic on a wild timestamp"
        );
    }

    #[test]
    fn fault_check_words() {
        assert!(FaultCheck::NoFault.words().contains("reported no fault"));
        assert!(FaultCheck::Faults(vec![
            "context 1 of flm (process 2): fatal error type 0x2".into()
        ])
        .words()
        .starts_with("The NPU itself reported a fault: context 1"));
        assert!(FaultCheck::Unknown("no NPU".into())
            .words()
            .contains("not known: no NPU"));
    }
}
