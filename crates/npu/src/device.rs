//! Finding the NPU: the accel class in sysfs, the PCI bus, the device node and the kernel.
//!
//! `/sys/class/accel/accelN/device` is the PCI function: `vendor` 0x1022, `device` 0x17f0 for
//! XDNA 2 (Strix, Strix Halo, Krackan, Gorgon) or 0x1502 for XDNA 1 (Phoenix, Hawk Point),
//! `driver` a link ending in `amdxdna`, `vbnv` the product name and `fw_version` the firmware.
//! When no accel entry exists, the PCI bus still tells "the NPU is there but no driver took it"
//! apart from "there is no NPU (or it is switched off in the BIOS)".

use crate::fsroot::FsRoot;
use crate::ioctl::FirmwareVersion;
use serde::Serialize;

/// AMD's PCI vendor id.
pub const AMD_VENDOR: u64 = 0x1022;
/// PCI device id of the XDNA 2 family.
pub const XDNA2_DEVICE: u64 = 0x17f0;
/// PCI device id of XDNA 1 (Phoenix, Hawk Point).
pub const XDNA1_DEVICE: u64 = 0x1502;

/// Which NPU generation a PCI device id is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "NpuGeneration"))]
pub enum Generation {
    /// XDNA 2: Ryzen AI 300 and later; what FastFlowLM and Hearth's NPU path support.
    Xdna2,
    /// XDNA 1: Ryzen 7040/8040; not supported by FastFlowLM.
    Xdna1,
}

impl Generation {
    /// The generation of an AMD PCI device id, if it is an NPU.
    pub fn from_ids(vendor: u64, device: u64) -> Option<Generation> {
        match (vendor, device) {
            (AMD_VENDOR, XDNA2_DEVICE) => Some(Generation::Xdna2),
            (AMD_VENDOR, XDNA1_DEVICE) => Some(Generation::Xdna1),
            _ => None,
        }
    }

    /// "XDNA 2".
    pub fn label(self) -> &'static str {
        match self {
            Generation::Xdna2 => "XDNA 2",
            Generation::Xdna1 => "XDNA 1",
        }
    }
}

/// An NPU with a driver bound and an accel entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct NpuDevice {
    /// `accel0`.
    pub accel: String,
    /// `/dev/accel/accel0`.
    pub node: String,
    /// PCI address from the `device` link, `0000:c5:00.1`.
    pub pci_address: Option<String>,
    /// PCI device id.
    pub pci_device: u64,
    /// The generation.
    pub generation: Generation,
    /// `vbnv`: "NPU Strix", "NPU Strix Halo", "NPU Krackan 1"...
    pub product: Option<String>,
    /// `fw_version` as written.
    pub firmware_text: Option<String>,
    /// `fw_version` parsed.
    pub firmware: Option<FirmwareVersion>,
    /// The driver the `driver` link names (`amdxdna`).
    pub driver: Option<String>,
}

impl NpuDevice {
    /// "NPU Strix (XDNA 2)" or, without `vbnv`, "AMD XDNA 2 NPU".
    pub fn display_name(&self) -> String {
        match &self.product {
            Some(p) => format!("{p} ({})", self.generation.label()),
            None => format!("AMD {} NPU", self.generation.label()),
        }
    }
}

/// What the system shows of an NPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Detection {
    /// An NPU with its accel entry (the node may still be missing or closed to this user).
    Found(NpuDevice),
    /// An NPU on the PCI bus that no driver has taken.
    NoDriver {
        /// PCI address, `0000:c5:00.1`.
        pci_address: String,
        /// The generation.
        generation: Generation,
    },
    /// No NPU on the PCI bus.
    NotFound,
}

fn link_basename(root: &FsRoot, path: &str) -> Option<String> {
    let target = root.read_link(path)?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// Looks for the NPU under `root`.
pub fn detect(root: &FsRoot) -> Detection {
    for accel in root.list_dir("/sys/class/accel") {
        let dev = format!("/sys/class/accel/{accel}/device");
        let (Ok(vendor), Ok(device)) = (
            root.read_u64(format!("{dev}/vendor")),
            root.read_u64(format!("{dev}/device")),
        ) else {
            tracing::debug!(accel, "accel entry without readable PCI ids");
            continue;
        };
        let Some(generation) = Generation::from_ids(vendor, device) else {
            continue;
        };
        let firmware_text = root.read_trimmed(format!("{dev}/fw_version")).ok();
        return Detection::Found(NpuDevice {
            node: format!("/dev/accel/{accel}"),
            pci_address: link_basename(root, &format!("/sys/class/accel/{accel}/device")),
            pci_device: device,
            generation,
            product: root
                .read_trimmed(format!("{dev}/vbnv"))
                .ok()
                .filter(|s| !s.is_empty()),
            firmware: firmware_text.as_deref().and_then(FirmwareVersion::parse),
            firmware_text,
            driver: link_basename(root, &format!("{dev}/driver")),
            accel,
        });
    }
    for addr in root.list_dir("/sys/bus/pci/devices") {
        let dev = format!("/sys/bus/pci/devices/{addr}");
        if let (Ok(v), Ok(d)) = (
            root.read_u64(format!("{dev}/vendor")),
            root.read_u64(format!("{dev}/device")),
        ) {
            if let Some(generation) = Generation::from_ids(v, d) {
                return Detection::NoDriver {
                    pci_address: addr,
                    generation,
                };
            }
        }
    }
    Detection::NotFound
}

/// The running kernel, from `/proc/sys/kernel/osrelease`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Kernel {
    /// "6.14.0-15-generic".
    pub release: String,
    /// (major, minor), when the release starts with them.
    pub version: Option<(u32, u32)>,
}

impl Kernel {
    /// Parses a kernel release string.
    pub fn parse(release: &str) -> Kernel {
        let mut it = release
            .split(|c: char| !c.is_ascii_digit())
            .map(|p| p.parse::<u32>());
        let version = match (it.next(), it.next()) {
            (Some(Ok(a)), Some(Ok(b))) => Some((a, b)),
            _ => None,
        };
        Kernel {
            release: release.to_string(),
            version,
        }
    }

    /// Reads the running kernel under `root`.
    pub fn read(root: &FsRoot) -> Option<Kernel> {
        root.read_trimmed("/proc/sys/kernel/osrelease")
            .ok()
            .map(|r| Kernel::parse(&r))
    }

    /// True for 6.14 and later, which carry the amdxdna driver in-tree.
    pub fn has_inbox_amdxdna(&self) -> bool {
        self.version.is_some_and(|v| v >= (6, 14))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    pub(crate) fn strix_tree(root: &std::path::Path) {
        let pci = root.join("sys/devices/pci0000:00/0000:00:08.2/0000:c5:00.1");
        fs::create_dir_all(&pci).unwrap();
        fs::write(pci.join("vendor"), "0x1022\n").unwrap();
        fs::write(pci.join("device"), "0x17f0\n").unwrap();
        fs::write(pci.join("vbnv"), "NPU Strix\n").unwrap();
        fs::write(pci.join("fw_version"), "1.1.2.64\n").unwrap();
        fs::create_dir_all(root.join("sys/bus/pci/drivers/amdxdna")).unwrap();
        symlink("../../../../bus/pci/drivers/amdxdna", pci.join("driver")).unwrap();
        fs::create_dir_all(root.join("sys/class/accel/accel0")).unwrap();
        symlink(
            "../../../devices/pci0000:00/0000:00:08.2/0000:c5:00.1",
            root.join("sys/class/accel/accel0/device"),
        )
        .unwrap();
    }

    #[test]
    fn strix_is_found_with_name_firmware_and_driver() {
        let dir = tempfile::tempdir().unwrap();
        strix_tree(dir.path());
        let Detection::Found(d) = detect(&FsRoot::new(dir.path())) else {
            panic!("expected the NPU to be found");
        };
        assert_eq!(d.generation, Generation::Xdna2);
        assert_eq!(d.display_name(), "NPU Strix (XDNA 2)");
        assert_eq!(d.node, "/dev/accel/accel0");
        assert_eq!(d.pci_address.as_deref(), Some("0000:c5:00.1"));
        assert_eq!(d.driver.as_deref(), Some("amdxdna"));
        assert_eq!(d.firmware, Some(FirmwareVersion([1, 1, 2, 64])));
    }

    #[test]
    fn pci_device_without_driver() {
        let dir = tempfile::tempdir().unwrap();
        let pci = dir.path().join("sys/bus/pci/devices/0000:c5:00.1");
        fs::create_dir_all(&pci).unwrap();
        fs::write(pci.join("vendor"), "0x1022\n").unwrap();
        fs::write(pci.join("device"), "0x1502\n").unwrap();
        assert_eq!(
            detect(&FsRoot::new(dir.path())),
            Detection::NoDriver {
                pci_address: "0000:c5:00.1".into(),
                generation: Generation::Xdna1
            }
        );
    }

    #[test]
    fn other_accel_devices_and_garbage_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("sys/class/accel/accel0/device");
        fs::create_dir_all(&a).unwrap();
        fs::write(a.join("vendor"), "0x8086\n").unwrap(); // an Intel NPU
        fs::write(a.join("device"), "0x7d1d\n").unwrap();
        let b = dir.path().join("sys/class/accel/accel1/device");
        fs::create_dir_all(&b).unwrap();
        fs::write(b.join("vendor"), "\u{0}\u{1}garbage").unwrap();
        fs::write(b.join("device"), "").unwrap();
        assert_eq!(detect(&FsRoot::new(dir.path())), Detection::NotFound);
    }

    #[test]
    fn kernel_versions() {
        assert!(Kernel::parse("6.14.0-15-generic").has_inbox_amdxdna());
        assert!(Kernel::parse("7.0.1-arch1-1").has_inbox_amdxdna());
        assert!(!Kernel::parse("6.8.0-51-generic").has_inbox_amdxdna());
        assert_eq!(Kernel::parse("weird").version, None);
    }
}
