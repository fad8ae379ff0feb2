//! `DRM_IOCTL_AMDXDNA_GET_INFO` and `DRM_IOCTL_AMDXDNA_GET_ARRAY` on `/dev/accel/accelN`: the
//! amdxdna driver's query interface, which needs no XRT.
//!
//! Layouts are those of the kernel's `include/uapi/drm/amdxdna_accel.h` (Linux 7.1, and AMD's
//! amdxdna staging driver of 2026-07, which only appends fields):
//!
//! - `struct amdxdna_drm_get_info { u32 param; u32 buffer_size; u64 buffer; }` (16 bytes):
//!   `buffer_size` is the capacity going in and the bytes written coming out.
//! - `struct amdxdna_drm_get_array { u32 param @0; u32 element_size @4; u32 num_element @8;
//!   u32 pad @12; u64 buffer @16; }` (24 bytes): `element_size` and `num_element` are the most
//!   the caller takes going in, and what the driver wrote coming out. The driver writes
//!   `min(element_size, its own struct size)` bytes per element, so an older kernel's smaller
//!   records come back with their own size (see [`crate::contexts`]).
//!
//! The decoders work on plain byte slices so they are tested on exact layouts; [`get_info`] and
//! [`get_array`] are the only places that call the kernel.
//!
//! Every query wakes the NPU from runtime suspend, so telemetry calls them only while a
//! generation runs, and the doctor once.

use serde::Serialize;
use std::fs::File;
use std::io;

/// `_IOWR('d', DRM_COMMAND_BASE + 7, struct amdxdna_drm_get_info)`.
pub const DRM_IOCTL_AMDXDNA_GET_INFO: u64 = 0xC010_6447;

/// `_IOWR('d', DRM_COMMAND_BASE + 10, struct amdxdna_drm_get_array)`.
pub const DRM_IOCTL_AMDXDNA_GET_ARRAY: u64 = 0xC018_644A;

/// GET_ARRAY `param` values used by Hearth.
pub mod array_param {
    /// Every hardware context this user may see (`struct amdxdna_drm_hwctx_entry` records).
    pub const HW_CONTEXT_ALL: u32 = 0;
    /// The last asynchronous error the NPU raised (`struct amdxdna_async_error`, 24 bytes).
    pub const HW_LAST_ASYNC_ERR: u32 = 2;
}

/// GET_INFO `param` values used by Hearth.
pub mod param {
    /// AIE version (8 bytes).
    pub const AIE_VERSION: u32 = 2;
    /// Power, column utilization and temperature sensors (168-byte records).
    pub const SENSORS: u32 = 4;
    /// Firmware version: `{u32 major, minor, patch, build}`.
    pub const FIRMWARE_VERSION: u32 = 8;
    /// Power mode: one u8.
    pub const POWER_MODE: u32 = 9;
    /// Resource info: 5 x u64, among them the hardware context limit and count.
    pub const RESOURCE_INFO: u32 = 12;
}

/// Size of one sensor record (`struct amdxdna_drm_query_sensor`).
pub const SENSOR_RECORD_BYTES: usize = 168;

/// What a sensor measures (`type` byte at 161).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum SensorKind {
    /// Power, in watts after scaling.
    Power,
    /// Column utilization, %.
    ColumnUtilization,
    /// Temperature, °C after scaling.
    Temperature,
    /// A type this code does not know.
    Other(u8),
}

/// One decoded sensor record.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Sensor {
    /// `label[64]`, e.g. "Total Power".
    pub label: String,
    /// What it measures.
    pub kind: SensorKind,
    /// `input x 10^unitm`: the current value in base units (W, %, °C).
    pub value: f64,
    /// `units[16]` as the driver wrote it (informative only: it changed from "mW" to "W").
    pub units: String,
    /// `status[64]`.
    pub status: String,
}

/// Reads a NUL-terminated string from a fixed-size field.
fn c_string(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).trim().to_string()
}

/// Decodes the records a SENSORS query wrote (`bytes` = the first `buffer_size` bytes out).
/// A trailing partial record is ignored; a value is `input x 10^unitm` whatever `units` says.
pub fn decode_sensors(bytes: &[u8]) -> Vec<Sensor> {
    bytes
        .chunks_exact(SENSOR_RECORD_BYTES)
        .map(|r| {
            let u32_at = |at: usize| u32::from_le_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]]);
            let unitm = r[160] as i8;
            let kind = match r[161] {
                0 => SensorKind::Power,
                1 => SensorKind::ColumnUtilization,
                2 => SensorKind::Temperature,
                other => SensorKind::Other(other),
            };
            Sensor {
                label: c_string(&r[0..64]),
                kind,
                value: f64::from(u32_at(64)) * 10f64.powi(i32::from(unitm)),
                units: c_string(&r[144..160]),
                status: c_string(&r[80..144]),
            }
        })
        .collect()
}

/// Encodes one sensor record (the driver's half, for tests and fixtures).
pub fn encode_sensor(label: &str, kind: u8, input: u32, unitm: i8, units: &str) -> Vec<u8> {
    let mut r = vec![0u8; SENSOR_RECORD_BYTES];
    let l = label.as_bytes();
    r[..l.len().min(63)].copy_from_slice(&l[..l.len().min(63)]);
    r[64..68].copy_from_slice(&input.to_le_bytes());
    r[68..72].copy_from_slice(&input.to_le_bytes());
    r[72..76].copy_from_slice(&input.to_le_bytes());
    r[76..80].copy_from_slice(&input.to_le_bytes());
    r[80..82].copy_from_slice(b"OK");
    let u = units.as_bytes();
    r[144..144 + u.len().min(15)].copy_from_slice(&u[..u.len().min(15)]);
    r[160] = unitm as u8;
    r[161] = kind;
    r
}

/// NPU firmware version `major.minor.patch.build`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct FirmwareVersion(pub [u32; 4]);

impl std::fmt::Display for FirmwareVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b, c, d] = self.0;
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

impl FirmwareVersion {
    /// Parses sysfs `fw_version` text, "1.1.2.64" (missing trailing parts count as 0).
    pub fn parse(text: &str) -> Option<FirmwareVersion> {
        let mut parts = [0u32; 4];
        let mut n = 0;
        for (i, p) in text.trim().split('.').enumerate() {
            if i >= 4 {
                return None;
            }
            parts[i] = p.trim().parse().ok()?;
            n += 1;
        }
        (n >= 2).then_some(FirmwareVersion(parts))
    }

    /// Decodes the 16 bytes of a FIRMWARE_VERSION query.
    pub fn decode(bytes: &[u8]) -> Option<FirmwareVersion> {
        let b = bytes.get(..16)?;
        let at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some(FirmwareVersion([at(0), at(4), at(8), at(12)]))
    }
}

/// Power mode reported by POWER_MODE (one byte).
pub fn power_mode_name(byte: u8) -> &'static str {
    match byte {
        0 => "default",
        1 => "low",
        2 => "medium",
        3 => "high",
        4 => "turbo",
        _ => "unknown",
    }
}

/// The 16-byte GET_INFO argument.
#[repr(C)]
struct GetInfo {
    param: u32,
    buffer_size: u32,
    buffer: u64,
}

const _: () = assert!(std::mem::size_of::<GetInfo>() == 16);

/// Runs GET_INFO(`param`) on an open accel device with a `capacity`-byte buffer and returns the
/// bytes the driver wrote. EOPNOTSUPP/ENODEV come back as the `io::Error` for the caller to word.
pub fn get_info(device: &File, param: u32, capacity: usize) -> io::Result<Vec<u8>> {
    use std::os::fd::AsRawFd;
    let mut buffer = vec![0u8; capacity];
    let mut arg = GetInfo {
        param,
        buffer_size: u32::try_from(capacity).map_err(|_| io::Error::other("buffer too large"))?,
        buffer: buffer.as_mut_ptr() as u64,
    };
    // SAFETY: `arg` is a live, correctly laid out amdxdna_drm_get_info whose `buffer` points to
    // `capacity` writable bytes owned by `buffer`, which outlives the call; the driver writes at
    // most `buffer_size` bytes there and updates `buffer_size`.
    let rc = unsafe {
        libc::ioctl(
            device.as_raw_fd(),
            DRM_IOCTL_AMDXDNA_GET_INFO as _,
            &mut arg as *mut GetInfo,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    buffer.truncate((arg.buffer_size as usize).min(capacity));
    Ok(buffer)
}

/// The 24-byte GET_ARRAY argument.
#[repr(C)]
struct GetArray {
    param: u32,
    element_size: u32,
    num_element: u32,
    pad: u32,
    buffer: u64,
}

const _: () = assert!(std::mem::size_of::<GetArray>() == 24);

/// What a GET_ARRAY query wrote: `count` records of `element_size` bytes each, in `bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayReply {
    /// The size of one record as the driver wrote it (at most the size asked for).
    pub element_size: u32,
    /// How many records the driver wrote.
    pub count: u32,
    /// The buffer, cut to what the records cover (never longer than the buffer given).
    pub bytes: Vec<u8>,
}

/// Runs GET_ARRAY(`param`) on an open accel device, taking at most `count` records of at most
/// `element_size` bytes each. Errors come back as the `io::Error` for the caller to word.
pub fn get_array(
    device: &File,
    param: u32,
    element_size: u32,
    count: u32,
) -> io::Result<ArrayReply> {
    use std::os::fd::AsRawFd;
    let capacity = element_size as usize * count as usize;
    let mut buffer = vec![0u8; capacity];
    let mut arg = GetArray {
        param,
        element_size,
        num_element: count,
        pad: 0,
        buffer: buffer.as_mut_ptr() as u64,
    };
    // SAFETY: `arg` is a live, correctly laid out amdxdna_drm_get_array whose `buffer` points to
    // `element_size * num_element` writable bytes owned by `buffer`, which outlives the call; the
    // driver writes at most that many bytes there and updates the two counts.
    let rc = unsafe {
        libc::ioctl(
            device.as_raw_fd(),
            DRM_IOCTL_AMDXDNA_GET_ARRAY as _,
            &mut arg as *mut GetArray,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let written = (arg.element_size as usize)
        .saturating_mul(arg.num_element as usize)
        .min(capacity);
    buffer.truncate(written);
    Ok(ArrayReply {
        element_size: arg.element_size,
        count: arg.num_element,
        bytes: buffer,
    })
}

/// Reads every sensor (up to 16 records) from an open device.
pub fn read_sensors(device: &File) -> io::Result<Vec<Sensor>> {
    get_info(device, param::SENSORS, 16 * SENSOR_RECORD_BYTES).map(|b| decode_sensors(&b))
}

/// Words an ioctl failure for a report: unsupported kernels say so instead of a bare errno.
pub fn describe_error(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) => {
            "the amdxdna driver does not report sensors here (needs Linux 7.0+ with AMD PMF)".into()
        }
        Some(libc::ENODEV) => "the NPU sensors are not present on this platform".into(),
        Some(libc::ENOTTY) => "the device does not understand the amdxdna query".into(),
        _ => format!("the amdxdna query failed: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_number_matches_iowr_d_47_16_bytes() {
        // _IOWR = dir 3 << 30 | size << 16 | type << 8 | nr
        let expected = (3u64 << 30) | (16 << 16) | ((b'd' as u64) << 8) | 0x47;
        assert_eq!(DRM_IOCTL_AMDXDNA_GET_INFO, expected);
    }

    #[test]
    fn get_array_number_matches_iowr_d_4a_24_bytes() {
        let expected = (3u64 << 30) | (24 << 16) | ((b'd' as u64) << 8) | 0x4A;
        assert_eq!(DRM_IOCTL_AMDXDNA_GET_ARRAY, expected);
        assert_eq!(std::mem::offset_of!(GetArray, element_size), 4);
        assert_eq!(std::mem::offset_of!(GetArray, num_element), 8);
        assert_eq!(std::mem::offset_of!(GetArray, buffer), 16);
    }

    #[test]
    fn get_array_on_a_plain_file_fails_cleanly() {
        let f = tempfile::tempfile().unwrap();
        let err = get_array(&f, array_param::HW_CONTEXT_ALL, 160, 4).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY));
    }

    #[test]
    fn sensors_decode_from_driver_bytes() {
        let mut buf = encode_sensor("Total Power", 0, 1630, -3, "mW");
        buf.extend(encode_sensor("Column 0", 1, 87, 0, "%"));
        buf.extend(encode_sensor("NPU temp", 2, 51_000, -3, "C"));
        buf.extend([0u8; 40]); // partial record: ignored
        let s = decode_sensors(&buf);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].label, "Total Power");
        assert_eq!(s[0].kind, SensorKind::Power);
        assert!((s[0].value - 1.63).abs() < 1e-9, "1630 x 10^-3 W");
        assert_eq!(s[0].units, "mW");
        assert_eq!(s[0].status, "OK");
        assert_eq!(s[1].kind, SensorKind::ColumnUtilization);
        assert_eq!(s[1].value, 87.0);
        assert!((s[2].value - 51.0).abs() < 1e-9);
    }

    #[test]
    fn value_trusts_unitm_not_units_string() {
        // 2026 drivers write "W" with unitm -3: still milliwatts of input.
        let s = decode_sensors(&encode_sensor("Total Power", 0, 2500, -3, "W"));
        assert!((s[0].value - 2.5).abs() < 1e-9);
    }

    #[test]
    fn sensor_record_offsets_are_exact() {
        let r = encode_sensor("x", 7, 0x0102_0304, -2, "u");
        assert_eq!(&r[64..68], &[4, 3, 2, 1]);
        assert_eq!(r[144], b'u');
        assert_eq!(r[160], 0xFE);
        assert_eq!(r[161], 7);
        assert_eq!(decode_sensors(&r)[0].kind, SensorKind::Other(7));
    }

    #[test]
    fn firmware_versions_parse_and_order() {
        let fw = FirmwareVersion::parse("1.1.2.64\n").unwrap();
        assert_eq!(fw.to_string(), "1.1.2.64");
        assert!(fw >= FirmwareVersion([1, 1, 0, 0]));
        assert!(FirmwareVersion::parse("1.0.0.166").unwrap() < FirmwareVersion([1, 1, 0, 0]));
        assert_eq!(FirmwareVersion::parse("garbage"), None);
        assert_eq!(FirmwareVersion::parse("1.2.3.4.5"), None);
        let bytes: Vec<u8> = [1u32, 1, 2, 64]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(FirmwareVersion::decode(&bytes), Some(fw));
        assert_eq!(FirmwareVersion::decode(&bytes[..10]), None);
    }

    #[test]
    fn get_info_on_a_plain_file_fails_cleanly() {
        // Not an accel device: the kernel answers ENOTTY, never undefined behaviour.
        let f = tempfile::tempfile().unwrap();
        let err = get_info(&f, param::SENSORS, 168).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY));
        assert!(describe_error(&err).contains("does not understand"));
    }

    #[test]
    fn power_modes_have_names() {
        assert_eq!(power_mode_name(4), "turbo");
        assert_eq!(power_mode_name(9), "unknown");
    }
}
