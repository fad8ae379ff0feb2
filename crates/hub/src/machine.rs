//! "Fits on this machine": the catalog beside the memory and disk this machine has.

use serde::Serialize;

use crate::catalog::{self, CatalogEntry};
use crate::error::Result;
use crate::fsutil;
use crate::store::{PartialDownload, Store};

/// Memory and disk of this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Machine {
    /// Installed memory in bytes.
    pub total_memory: u64,
    /// Memory available now in bytes.
    pub available_memory: u64,
    /// Free disk space where models are stored, in bytes.
    pub free_disk: u64,
}

impl Machine {
    /// Measures this machine (memory through `sysinfo`, disk through `statvfs` on the store).
    pub fn measure(store: &Store) -> Result<Machine> {
        let mut system = sysinfo::System::new();
        system.refresh_memory();
        fsutil::create_dir_all(store.root())?;
        Ok(Machine {
            total_memory: system.total_memory(),
            available_memory: system.available_memory(),
            free_disk: fsutil::free_space(store.root())?,
        })
    }
}

/// Whether a model fits, and a sentence saying so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Fit {
    /// The model's memory need is below the installed memory (with 2 GB left for the rest).
    pub memory: bool,
    /// The download fits in the free disk space.
    pub disk: bool,
    /// Plain-language hint.
    pub hint: String,
}

/// Judges whether `entry` fits on `machine`.
pub fn fit(entry: &CatalogEntry, machine: &Machine) -> Fit {
    const HEADROOM: u64 = 2_000_000_000;
    let memory = entry.memory_bytes.saturating_add(HEADROOM) <= machine.total_memory;
    let disk = entry.download_bytes <= machine.free_disk;
    let hint = match (memory, disk) {
        (true, true) => format!(
            "Fits: needs about {} of memory ({} installed) and {} of disk ({} free)",
            crate::human_bytes(entry.memory_bytes),
            crate::human_bytes(machine.total_memory),
            crate::human_bytes(entry.download_bytes),
            crate::human_bytes(machine.free_disk)
        ),
        (false, _) => format!(
            "Too big for this machine's memory: needs about {}, it has {}",
            crate::human_bytes(entry.memory_bytes),
            crate::human_bytes(machine.total_memory)
        ),
        (true, false) => format!(
            "Not enough free disk: needs {}, {} free. Remove a model or free some space",
            crate::human_bytes(entry.download_bytes),
            crate::human_bytes(machine.free_disk)
        ),
    };
    Fit { memory, disk, hint }
}

/// One catalog model as the Models view shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CatalogItem {
    /// The catalog entry.
    pub entry: CatalogEntry,
    /// Installed (registered) under its name.
    pub installed: bool,
    /// A paused or interrupted download of it.
    pub partial: Option<PartialDownload>,
    /// Fit on this machine.
    pub fit: Fit,
}

/// The catalog with install state and fit hints.
pub fn catalog_view(store: &Store, machine: &Machine) -> Result<Vec<CatalogItem>> {
    let registry = store.registry().read()?;
    let partials = store.partial_downloads()?;
    Ok(catalog::entries()?
        .iter()
        .map(|entry| CatalogItem {
            installed: if entry.is_speech() {
                // Speech models live in models/speech/, outside the registry.
                crate::speech::installed(store, &entry.name).is_ok_and(|m| m.is_some())
            } else {
                registry.find(&entry.name).is_some()
            },
            partial: partials.iter().find(|p| p.name == entry.name).cloned(),
            fit: fit(entry, machine),
            entry: entry.clone(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_says_why_a_model_does_not_fit() {
        let entry = catalog::find("qwen3:1.7b").unwrap().unwrap();
        let small = Machine {
            total_memory: 2_000_000_000,
            available_memory: 1_000_000_000,
            free_disk: 100_000_000_000,
        };
        let f = fit(entry, &small);
        assert!(!f.memory && f.disk);
        assert!(f.hint.contains("memory"), "{}", f.hint);
        let no_disk = Machine {
            total_memory: 32_000_000_000,
            free_disk: 1_000,
            ..small
        };
        let f = fit(entry, &no_disk);
        assert!(f.memory && !f.disk);
        assert!(f.hint.contains("disk"), "{}", f.hint);
    }
}
