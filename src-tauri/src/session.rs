//! The loaded model: which one, where it runs, and its weights' hash (computed in the background
//! for answer receipts).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hearth_engine::{LoadOptions, Model};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::paths::LocalModel;

/// What the UI shows about the loaded model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelStatus {
    /// Folder name.
    pub name: String,
    /// Folder.
    pub path: PathBuf,
    /// Architecture family.
    pub family: String,
    /// Number of parameters.
    pub parameter_count: usize,
    /// Context length it was loaded with, in tokens.
    pub context_length: usize,
    /// "q4nx" or "safetensors".
    pub weight_format: String,
    /// Backend ("cpu").
    pub backend: String,
    /// The device it runs on.
    pub device: String,
    /// Kernel level in use (e.g. avx2).
    pub kernel: String,
    /// The bundled demo model.
    pub is_demo: bool,
    /// sha256 of the weights file, once computed.
    pub sha256: Option<String>,
}

/// A model ready to answer.
pub struct LoadedModel {
    /// The engine's model.
    pub model: Model,
    /// What it is.
    pub entry: LocalModel,
    device: String,
    sha256: Arc<Mutex<Option<String>>>,
}

impl LoadedModel {
    /// Load `entry` and start hashing its weights file in the background.
    pub fn load(entry: &LocalModel, device: String) -> Result<Self, hearth_engine::Error> {
        let model = Model::load(&entry.path, &LoadOptions::default())?;
        let sha256 = Arc::new(Mutex::new(None));
        if let Some(file) = weights_file(&entry.path) {
            let slot = Arc::clone(&sha256);
            std::thread::Builder::new()
                .name("hearth-hash".into())
                .spawn(move || match sha256_file(&file) {
                    Ok(hex) => *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(hex),
                    Err(error) => {
                        tracing::warn!("receipt: cannot hash {}: {error}", file.display())
                    }
                })
                .ok();
        }
        Ok(Self {
            model,
            entry: entry.clone(),
            device,
            sha256,
        })
    }

    /// The weights' sha256 if computed by now.
    pub fn sha256(&self) -> Option<String> {
        self.sha256
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Backend label with its kernel level, e.g. "cpu (avx2)".
    pub fn backend_label(&self) -> String {
        let info = self.model.info();
        if info.kernel.is_empty() {
            info.backend.clone()
        } else {
            format!("{} ({})", info.backend, info.kernel)
        }
    }

    /// Device name.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// Status for the UI.
    pub fn status(&self) -> ModelStatus {
        let info = self.model.info();
        ModelStatus {
            name: self.entry.name.clone(),
            path: self.entry.path.clone(),
            family: info.family.clone(),
            parameter_count: info.parameter_count,
            context_length: info.context_length,
            weight_format: info.weight_format.clone(),
            backend: info.backend.clone(),
            device: self.device.clone(),
            kernel: info.kernel.clone(),
            is_demo: self.entry.is_demo,
            sha256: self.sha256(),
        }
    }
}

/// The weights file of a model folder (the one the receipt's hash is of).
fn weights_file(dir: &Path) -> Option<PathBuf> {
    [
        "model.q4nx",
        "model.safetensors",
        "model.safetensors.index.json",
    ]
    .iter()
    .map(|f| dir.join(f))
    .find(|p| p.is_file())
}

/// Lowercase hex sha256 of a file, streamed.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x");
        std::fs::write(&f, b"abc").unwrap();
        assert_eq!(
            sha256_file(&f).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
