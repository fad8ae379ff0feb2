//! What kind of FastFlowLM install a program is, read from the files around it (FastFlowLM's
//! `src/CMakeLists.txt` install layouts, `docs/fastflowlm-1.0.md`, "Installs"):
//!
//! - the portable tarball (`fastflowlm_<version>_linux.tar.gz`, unpacked anywhere, often per
//!   user): `flm` (a wrapper script), `flm-real`, `lib/` with XRT and its NPU plugin bundled,
//!   `xclbins/` and `model_list.json`, all in one folder;
//! - a package (the .deb for Ubuntu and Debian 13, in `/opt/fastflowlm`, or any FHS prefix):
//!   `bin/flm`, engines in `lib/`, `share/flm/{model_list.json,xclbins/}`, and XRT from the
//!   system (`libxrt-npu2`);
//! - a package built with `FLM_USE_HRX` (1.0.11 and later): the same, but engines
//!   (`lib*_npu.so`) in `lib/flm/` and the HRX runtime `libhrx.so` bundled in `lib/`, instead
//!   of XRT; told by the binary's needed libraries ([`hearth_npu::elf`]), or failing that by
//!   the engines' folder;
//! - the FastFlow SDK (`pip install fastflow-sdk`, FastFlowLM 1.0.14 as Python wheels for
//!   Python 3.12-3.14): `flm` in a Python environment's `bin/`, its `model_list.json` beside
//!   it (FastFlowLM 1.0.x reads the one beside its own binary). The layout Hearth reads is
//!   imitated in its tests: this machine's Python (3.11) cannot install the wheels.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// How a FastFlowLM install is laid out, and which NPU runtime it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// The portable tarball: everything in one folder, XRT bundled.
    Portable,
    /// A package (FHS prefix) that uses the system's XRT.
    PackageXrt,
    /// A package built with `FLM_USE_HRX`: the HRX runtime (`libhrx.so`) instead of XRT.
    PackageHrx,
    /// The FastFlow SDK's wheels in a Python environment (`bin/flm`, runtime bundled).
    Sdk,
}

impl Layout {
    /// The layout of the install `program` belongs to (links resolved, as FastFlowLM resolves
    /// its own path).
    pub fn of(program: &Path) -> Layout {
        let Some(dir) = program_dir(program) else {
            return Layout::PackageXrt;
        };
        if dir.join("flm-real").is_file() {
            return Layout::Portable;
        }
        if dir.parent().is_some_and(is_python_env) {
            return Layout::Sdk;
        }
        if hearth_npu::elf::runtime_of(program) == Some(hearth_npu::elf::Runtime::Hrx) {
            return Layout::PackageHrx;
        }
        // An HRX build keeps its engines (`libllama_npu.so`, ...) in `<prefix>/lib/flm/`.
        let hrx_engines = dir.parent().is_some_and(|prefix| {
            std::fs::read_dir(prefix.join("lib/flm"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().contains("_npu.so"))
        });
        if hrx_engines {
            Layout::PackageHrx
        } else {
            Layout::PackageXrt
        }
    }

    /// In words, for the doctor and the logs.
    pub fn words(self) -> &'static str {
        match self {
            Layout::Portable => "portable (XRT bundled)",
            Layout::PackageXrt => "package (system XRT)",
            Layout::PackageHrx => "package (HRX runtime)",
            Layout::Sdk => "FastFlow SDK (Python environment)",
        }
    }

    /// What this install is missing to run, in plain words with what to do, if anything.
    /// A package's system XRT is the doctor's XRT check; HRX and a portable install bring
    /// their own runtime, which must be there.
    pub fn missing(self, program: &Path) -> Option<String> {
        let dir = program_dir(program)?;
        match self {
            Layout::PackageXrt | Layout::Sdk => None,
            Layout::Portable => (!dir.join("lib").is_dir()).then(|| {
                format!(
                    "the portable FastFlowLM in {} has no lib/ folder with its XRT: unpack the release tarball again, whole",
                    dir.display()
                )
            }),
            Layout::PackageHrx => {
                let lib = dir.parent()?.join("lib");
                let has_hrx = std::fs::read_dir(&lib)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with("libhrx.so"));
                (!has_hrx).then(|| {
                    format!(
                        "this FastFlowLM was built for the HRX runtime, but {} holds no libhrx.so: reinstall its package (an HRX build does not use XRT)",
                        lib.display()
                    )
                })
            }
        }
    }

    /// Where this install keeps the folder holding `xclbins/` (and model_list.json): the
    /// program's own folder for the portable tarball, `<prefix>/share/flm` for a package.
    pub fn data_dir(self, program: &Path) -> Option<PathBuf> {
        let dir = program_dir(program)?;
        match self {
            Layout::Portable | Layout::Sdk => Some(dir),
            Layout::PackageXrt | Layout::PackageHrx => Some(dir.parent()?.join("share/flm")),
        }
    }

    /// FastFlowLM's own model list, where this install's version reads it: beside its binary
    /// (1.0.x, and the portable and SDK installs), else `share/flm/` of its prefix (`None` when
    /// neither exists; `FLM_CONFIG_PATH`, when it names a file, comes first for FastFlowLM).
    pub fn model_list(self, program: &Path) -> Option<PathBuf> {
        let beside = program_dir(program)?.join("model_list.json");
        [
            Some(beside),
            self.data_dir(program).map(|d| d.join("model_list.json")),
        ]
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
    }
}

/// A Python environment's folder: a virtual environment (`pyvenv.cfg`), a conda one
/// (`conda-meta/`), or a prefix with `lib/python3.*/` (the user's `~/.local`).
fn is_python_env(prefix: &Path) -> bool {
    prefix.join("pyvenv.cfg").is_file()
        || prefix.join("conda-meta").is_dir()
        || std::fs::read_dir(prefix.join("lib"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("python3"))
}

/// The folder of `program` after resolving links (`/usr/bin/flm` is a link into
/// `/opt/fastflowlm/bin`).
fn program_dir(program: &Path) -> Option<PathBuf> {
    program.canonicalize().ok()?.parent().map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, "").unwrap();
    }

    #[test]
    fn each_layout_is_told_by_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let portable = dir.path().join("fastflowlm_1.0.6_linux");
        touch(&portable.join("flm"));
        touch(&portable.join("flm-real"));
        assert_eq!(Layout::of(&portable.join("flm")), Layout::Portable);
        assert!(Layout::Portable.missing(&portable.join("flm")).is_some());
        fs::create_dir_all(portable.join("lib")).unwrap();
        assert_eq!(Layout::Portable.missing(&portable.join("flm")), None);
        assert_eq!(
            Layout::Portable.data_dir(&portable.join("flm")),
            Some(portable.canonicalize().unwrap())
        );

        let xrt = dir.path().join("opt-xrt");
        touch(&xrt.join("bin/flm"));
        fs::create_dir_all(xrt.join("lib")).unwrap();
        assert_eq!(Layout::of(&xrt.join("bin/flm")), Layout::PackageXrt);
        assert_eq!(
            Layout::PackageXrt.data_dir(&xrt.join("bin/flm")),
            Some(xrt.canonicalize().unwrap().join("share/flm"))
        );

        let hrx = dir.path().join("opt-hrx");
        touch(&hrx.join("bin/flm"));
        fs::create_dir_all(hrx.join("lib/flm")).unwrap();
        let flm = hrx.join("bin/flm");
        assert_eq!(Layout::of(&flm), Layout::PackageXrt, "an empty lib/flm");
        touch(&hrx.join("lib/flm/libllama_npu.so"));
        assert_eq!(Layout::of(&flm), Layout::PackageHrx);
        let missing = Layout::PackageHrx.missing(&flm).expect("no libhrx");
        assert!(missing.contains("libhrx.so"), "{missing}");
        touch(&hrx.join("lib/libhrx.so.0"));
        assert_eq!(Layout::PackageHrx.missing(&flm), None);

        // An HRX build is told by its binary's needed libraries, wherever its engines are.
        let elf = dir.path().join("usr-hrx");
        fs::create_dir_all(elf.join("bin")).unwrap();
        fs::write(
            elf.join("bin/flm"),
            hearth_npu::elf::minimal_elf(&["libhrx.so.0", "libc.so.6"]),
        )
        .unwrap();
        assert_eq!(Layout::of(&elf.join("bin/flm")), Layout::PackageHrx);
        fs::write(
            elf.join("bin/flm"),
            hearth_npu::elf::minimal_elf(&["libxrt_coreutil.so.2", "libc.so.6"]),
        )
        .unwrap();
        assert_eq!(Layout::of(&elf.join("bin/flm")), Layout::PackageXrt);
    }

    #[test]
    fn the_sdk_keeps_flm_and_its_model_list_in_a_python_environment() {
        // The FastFlow SDK's wheels need Python 3.12-3.14 (this machine has 3.11): the layout
        // is made by hand. model_list.json is beside the binary, where 1.0.x reads it.
        let dir = tempfile::tempdir().unwrap();
        let env = dir.path().join("venv");
        touch(&env.join("pyvenv.cfg"));
        touch(&env.join("bin/flm"));
        let flm = env.join("bin/flm");
        assert_eq!(Layout::of(&flm), Layout::Sdk);
        assert_eq!(Layout::Sdk.missing(&flm), None);
        assert_eq!(Layout::Sdk.model_list(&flm), None);
        touch(&env.join("bin/model_list.json"));
        assert_eq!(
            Layout::Sdk.model_list(&flm),
            Some(env.canonicalize().unwrap().join("bin/model_list.json"))
        );
        let local = dir.path().join("home/.local");
        touch(&local.join("bin/flm"));
        fs::create_dir_all(local.join("lib/python3.12/site-packages")).unwrap();
        assert_eq!(Layout::of(&local.join("bin/flm")), Layout::Sdk);
    }
}
