//! The user-space software the NPU path needs: XRT (with its NPU plugin) and FastFlowLM.
//!
//! Found by their files, without loading them: XRT's `libxrt_coreutil.so.<version>` and
//! `libxrt_driver_xdna.so*` in the usual library folders, `xrt-smi`, and the package database
//! (`/var/lib/dpkg/status`) for a version when the library name has none. FastFlowLM is an `flm`
//! (or `oflm`) executable, found by [`locate_flm`] (the one lookup order, used by the doctor and
//! by the chat crate's NPU backend); its version is what `flm version --json` prints
//! (`flm --version` for programs that do not know `version --json`), run with bounds on its
//! output and time ([`crate::bounded`]).

use crate::bounded::{run_flm, QuickLimits};
use crate::fsroot::FsRoot;
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// XRT older than this cannot drive the NPU.
pub const XRT_MIN_VERSION: &str = "2.20";

/// The oldest FastFlowLM Hearth drives: 0.9.45, the last 0.9.x release, whose behaviour the NPU
/// tests check as they check 1.0.x's (AMD's Lemonade requires 1.0.2 on Linux).
pub const FLM_MIN_VERSION: &str = "0.9.45";

const LIB_DIRS: &[&str] = &[
    "/opt/xilinx/xrt/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
];

/// What was found of XRT.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct XrtInfo {
    /// Path of `libxrt_coreutil.so*`, if found.
    pub library: Option<String>,
    /// XRT version ("2.20.0"), from the library name or the package database.
    pub version: Option<String>,
    /// Path of the NPU plugin `libxrt_driver_xdna.so*`, if found.
    pub npu_plugin: Option<String>,
    /// Path of `xrt-smi`, if found.
    pub xrt_smi: Option<String>,
}

/// Compares dotted versions numerically ("2.9" < "2.20"); non-numeric parts count as 0.
pub fn version_at_least(version: &str, minimum: &str) -> bool {
    let parts = |s: &str| -> Vec<u64> {
        s.split('.')
            .map(|p| {
                p.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse()
                    .unwrap_or(0)
            })
            .collect()
    };
    let (mut v, mut m) = (parts(version), parts(minimum));
    let n = v.len().max(m.len());
    v.resize(n, 0);
    m.resize(n, 0);
    v >= m
}

/// "202520.2.20.172" (Xilinx packages) or "2.20.0-1ubuntu1" -> "2.20.172" / "2.20.0".
fn xrt_version_from_package(version: &str) -> Option<String> {
    let v = version.split(':').next_back()?;
    let v = v.split(['-', '~', '+']).next()?;
    let mut parts: Vec<&str> = v.split('.').collect();
    if parts.first().is_some_and(|p| p.len() == 6) {
        parts.remove(0);
    }
    let numeric: Vec<&str> = parts
        .into_iter()
        .take_while(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        .take(3)
        .collect();
    (numeric.len() >= 2).then(|| numeric.join("."))
}

/// The version of an installed Debian package, from `/var/lib/dpkg/status`.
pub fn dpkg_version(root: &FsRoot, package: &str) -> Option<String> {
    let status = root.read_trimmed("/var/lib/dpkg/status").ok()?;
    status.split("\n\n").find_map(|para| {
        let field = |k: &str| para.lines().find_map(|l| l.strip_prefix(k)).map(str::trim);
        (field("Package:")? == package && field("Status:")?.ends_with("installed"))
            .then(|| field("Version:").map(str::to_string))
            .flatten()
    })
}

fn find_lib(root: &FsRoot, stem: &str) -> Option<(String, Option<String>)> {
    for dir in LIB_DIRS {
        let mut best: Option<(String, Option<String>)> = None;
        for f in root.list_dir(dir) {
            let Some(suffix) = f.strip_prefix(stem) else {
                continue;
            };
            if !(suffix.is_empty() || suffix.starts_with('.')) {
                continue;
            }
            let version = suffix.trim_start_matches('.');
            let full = version.split('.').count() >= 3
                && version.split('.').all(|p| p.parse::<u32>().is_ok());
            let candidate = (format!("{dir}/{f}"), full.then(|| version.to_string()));
            if best
                .as_ref()
                .is_none_or(|b| b.1.is_none() && candidate.1.is_some())
            {
                best = Some(candidate);
            }
        }
        if best.is_some() {
            return best;
        }
    }
    None
}

/// Looks for XRT under `root`.
pub fn find_xrt(root: &FsRoot) -> XrtInfo {
    let lib = find_lib(root, "libxrt_coreutil.so");
    let plugin = find_lib(root, "libxrt_driver_xdna.so").map(|(p, _)| p);
    let xrt_smi = [
        "/opt/xilinx/xrt/bin/xrt-smi",
        "/usr/bin/xrt-smi",
        "/usr/local/bin/xrt-smi",
    ]
    .into_iter()
    .find(|p| root.exists(p))
    .map(str::to_string);
    let version = lib.as_ref().and_then(|(_, v)| v.clone()).or_else(|| {
        ["libxrt2", "xrt", "xrt-base", "libxrt-coreutil2"]
            .into_iter()
            .find_map(|p| dpkg_version(root, p))
            .and_then(|v| xrt_version_from_package(&v))
    });
    XrtInfo {
        library: lib.map(|(p, _)| p),
        version,
        npu_plugin: plugin,
        xrt_smi,
    }
}

/// What was found of FastFlowLM.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct FlmInfo {
    /// Path of the executable (`flm` or the open-kernel fork `oflm`), if found.
    pub executable: Option<String>,
    /// Its version ("0.9.43"), if it could be read.
    pub version: Option<String>,
    /// Why the version is unknown, when it is.
    pub version_error: Option<String>,
    /// The NPU runtime its binary links (HRX or XRT), when its ELF header says (not sent to
    /// the desktop app's UI yet).
    #[cfg_attr(feature = "ts", ts(skip))]
    pub runtime: Option<crate::elf::Runtime>,
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Where the FastFlowLM packages install the program.
pub const FLM_STANDARD_PROGRAM: &str = "/opt/fastflowlm/bin/flm";

/// Where to look for FastFlowLM: the one home of its lookup order (see [`locate_flm`]).
///
/// Every path is named as on the live system and checked under [`FlmLookup::root`], so a
/// fixture tree can stand in for the whole file system. [`FlmLookup::from_env`] reads this
/// process's environment, [`FlmLookup::under`] builds the lookup for a root, tests build their
/// own. By default nothing is chosen, `PATH` is empty, the standard install is
/// [`FLM_STANDARD_PROGRAM`] and the root is the live system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlmLookup {
    /// `HEARTH_FLM`: a path chosen by the user (or a test); when set, nothing else is tried.
    pub hearth_flm: Option<PathBuf>,
    /// `PATH`: the folders searched for `flm`, then for `oflm` (relative entries are skipped).
    pub path: Option<OsString>,
    /// The standard install location ([`FLM_STANDARD_PROGRAM`]).
    pub standard: PathBuf,
    /// Folders where the portable tarball (`fastflowlm_<version>_linux.tar.gz`: `flm`,
    /// `flm-real`, `lib/`, `xclbins/`) is unpacked for one user; `flm` is looked for in each
    /// and in each of its subfolders. By default none; [`FlmLookup::from_env`] gives
    /// [`user_installs`].
    pub user_installs: Vec<PathBuf>,
    /// Python environments where the FastFlow SDK (`pip install fastflow-sdk`) may have put
    /// `flm`, in their `bin/`: the active virtual environment, conda's, and the user's own
    /// (`pip install --user`, `~/.local`). By default none; [`FlmLookup::from_env`] gives
    /// [`python_envs`].
    pub python_envs: Vec<PathBuf>,
    /// Where the paths above are resolved: `/` for the live system, a fixture tree in tests.
    pub root: PathBuf,
}

/// Where this user's portable FastFlowLM may be: `$XDG_DATA_HOME/fastflowlm` (or
/// `~/.local/share/fastflowlm`), where Hearth's README says to unpack the tarball, and
/// `~/.cache/lemonade/bin/flm/npu`, where AMD's Lemonade installs it for its user.
pub fn user_installs() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home.as_ref().map(|h| h.join(".local/share")));
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home.as_ref().map(|h| h.join(".cache")));
    [
        data.map(|d| d.join("fastflowlm")),
        cache.map(|c| c.join("lemonade/bin/flm/npu")),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// This process's Python environments, where the FastFlow SDK's wheels put `flm` in `bin/`:
/// `$VIRTUAL_ENV`, `$CONDA_PREFIX` and `~/.local` (a `pip install --user`).
pub fn python_envs() -> Vec<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    [
        var("VIRTUAL_ENV"),
        var("CONDA_PREFIX"),
        var("HOME").map(|h| h.join(".local")),
    ]
    .into_iter()
    .flatten()
    .collect()
}

impl Default for FlmLookup {
    fn default() -> Self {
        FlmLookup {
            hearth_flm: None,
            path: None,
            standard: PathBuf::from(FLM_STANDARD_PROGRAM),
            user_installs: Vec::new(),
            python_envs: Vec::new(),
            root: PathBuf::from("/"),
        }
    }
}

impl FlmLookup {
    /// The lookup of this process: `HEARTH_FLM` (when not empty), `PATH`,
    /// [`FLM_STANDARD_PROGRAM`], this user's portable installs ([`user_installs`]), on the live
    /// system.
    pub fn from_env() -> FlmLookup {
        FlmLookup {
            hearth_flm: std::env::var_os("HEARTH_FLM")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            path: std::env::var_os("PATH"),
            user_installs: user_installs(),
            python_envs: python_envs(),
            ..FlmLookup::default()
        }
    }

    /// The lookup under `root`: this process's ([`FlmLookup::from_env`]) on the live system; on
    /// a fixture tree `HEARTH_FLM` is never read and `PATH` is `/usr/local/bin:/usr/bin:/bin`.
    pub fn under(root: &FsRoot) -> FlmLookup {
        if root.is_live() {
            return FlmLookup::from_env();
        }
        FlmLookup {
            path: Some("/usr/local/bin:/usr/bin:/bin".into()),
            root: root.root().to_path_buf(),
            ..FlmLookup::default()
        }
    }

    /// Where `path` (named as on the live system) is on disk: itself on the live system (a
    /// relative `HEARTH_FLM` stays relative to the working folder), under the root otherwise.
    pub fn on_disk(&self, path: &Path) -> PathBuf {
        let root = FsRoot::new(&self.root);
        if root.is_live() {
            path.to_path_buf()
        } else {
            root.path(path)
        }
    }

    fn is_executable(&self, path: &Path) -> bool {
        is_executable(&self.on_disk(path))
    }

    /// `flm` in a user install folder or one of its subfolders (the tarball may unpack into
    /// `fastflowlm_<version>_linux/`), the first in name order.
    fn in_user_install(&self) -> Option<PathBuf> {
        self.user_installs.iter().find_map(|dir| {
            let mut subfolders: Vec<PathBuf> = std::fs::read_dir(self.on_disk(dir))
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| dir.join(e.file_name()))
                .collect();
            subfolders.sort();
            std::iter::once(dir.clone())
                .chain(subfolders)
                .map(|d| d.join("flm"))
                .find(|p| self.is_executable(p))
        })
    }

    /// `bin/flm` of the first Python environment that has one.
    fn in_python_env(&self) -> Option<PathBuf> {
        self.python_envs
            .iter()
            .map(|env| env.join("bin/flm"))
            .find(|p| self.is_executable(p))
    }

    fn on_path(&self, name: &str) -> Option<PathBuf> {
        std::env::split_paths(self.path.as_ref()?)
            .filter(|d| d.is_absolute())
            .map(|d| d.join(name))
            .find(|p| self.is_executable(p))
    }
}

/// Which of [`FlmLookup`]'s places FastFlowLM was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlmSource {
    /// The path `HEARTH_FLM` names.
    HearthFlm,
    /// `flm` in a `PATH` folder.
    FlmOnPath,
    /// The standard install ([`FlmLookup::standard`]).
    Standard,
    /// A Python environment's `bin/` ([`FlmLookup::python_envs`]): the FastFlow SDK.
    PythonEnv,
    /// A portable install of this user ([`FlmLookup::user_installs`]).
    UserInstall,
    /// The open-kernel fork `oflm` in a `PATH` folder.
    OflmOnPath,
}

/// The FastFlowLM executable [`locate_flm`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlmLocation {
    /// Its path as seen on the live system (in a fixture tree: without the tree's folder).
    pub path: PathBuf,
    /// Where it was found.
    pub source: FlmSource,
}

/// Why [`locate_flm`] found no FastFlowLM.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlmNotFound {
    /// `HEARTH_FLM` names something that is not an executable file (nothing else was tried).
    #[error("HEARTH_FLM is {}, which is not an executable file: correct or unset it", .path.display())]
    NotExecutable {
        /// The path given.
        path: PathBuf,
    },
    /// No place held an executable.
    #[error("FastFlowLM is not installed (looked for {searched}): install it from the ROCm/FastFlowLM releases on GitHub, or set HEARTH_FLM to the path of flm")]
    NotInstalled {
        /// Where it was looked for, in words: "flm and oflm on PATH, /opt/fastflowlm/bin/flm".
        searched: String,
    },
}

/// Finds the FastFlowLM executable: `HEARTH_FLM` (only it, when set), then `flm` on `PATH`, then
/// the standard install, then a Python environment's `bin/flm` (the FastFlow SDK), then this
/// user's portable installs, then the fork `oflm` on `PATH`.
/// Each is taken only if it is an executable file.
pub fn locate_flm(lookup: &FlmLookup) -> Result<FlmLocation, FlmNotFound> {
    let found = |path: PathBuf, source: FlmSource| FlmLocation { path, source };
    if let Some(p) = &lookup.hearth_flm {
        return if lookup.is_executable(p) {
            Ok(found(p.clone(), FlmSource::HearthFlm))
        } else {
            Err(FlmNotFound::NotExecutable { path: p.clone() })
        };
    }
    let standard = &lookup.standard;
    lookup
        .on_path("flm")
        .map(|p| found(p, FlmSource::FlmOnPath))
        .or_else(|| {
            lookup
                .is_executable(standard)
                .then(|| found(standard.clone(), FlmSource::Standard))
        })
        .or_else(|| {
            lookup
                .in_python_env()
                .map(|p| found(p, FlmSource::PythonEnv))
        })
        .or_else(|| {
            lookup
                .in_user_install()
                .map(|p| found(p, FlmSource::UserInstall))
        })
        .or_else(|| {
            lookup
                .on_path("oflm")
                .map(|p| found(p, FlmSource::OflmOnPath))
        })
        .ok_or_else(|| {
            let mut searched = format!("flm and oflm on PATH, {}", standard.display());
            for env in &lookup.python_envs {
                searched.push_str(&format!(", {}", env.join("bin/flm").display()));
            }
            for dir in &lookup.user_installs {
                searched.push_str(&format!(", {}", dir.display()));
            }
            FlmNotFound::NotInstalled { searched }
        })
}

/// Pulls "0.9.43" out of "FLM v0.9.43" (or any text with a dotted version).
pub fn parse_flm_version(output: &str) -> Option<String> {
    output.split_whitespace().find_map(|w| {
        let w = w.trim_start_matches(['v', 'V']);
        let parts: Vec<&str> = w.split('.').collect();
        (parts.len() >= 2
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())))
        .then(|| w.to_string())
    })
}

/// "1.0.6" out of `{ "version": "1.0.6" }` (what `flm version --json` prints).
pub fn parse_flm_version_json(output: &str) -> Option<String> {
    let after = output.split_once("\"version\"")?.1;
    let value = after
        .trim_start()
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?;
    let value = value.split('"').next()?.trim_start_matches(['v', 'V']);
    parse_flm_version(value)
}

/// Asks `exe` for its version within `limits` each: `version --json`, then `--version`.
fn run_version(exe: &Path, limits: QuickLimits) -> Result<String, String> {
    match run_version_with(exe, &["version", "--json"], limits) {
        Ok(out) => match parse_flm_version_json(&out).or_else(|| parse_flm_version(&out)) {
            Some(v) => return Ok(v),
            None => tracing::debug!("{} version --json printed {out:?}", exe.display()),
        },
        Err(e) => tracing::debug!("{e}"),
    }
    let out = run_version_with(exe, &["--version"], limits)?;
    parse_flm_version(&out).ok_or_else(|| format!("{} --version printed no version", exe.display()))
}

/// Runs `exe args` through the bounded runner ([`run_flm`]); returns its stdout, whatever its
/// exit status (`--version` exits 1 where FastFlowLM finds no registry of its own).
fn run_version_with(exe: &Path, args: &[&str], limits: QuickLimits) -> Result<String, String> {
    run_flm(exe, args, None, limits)
        .map(|out| out.stdout)
        .map_err(|e| e.to_string())
}

/// Looks for FastFlowLM under `root` as [`locate_flm`] does ([`FlmLookup::under`]) and asks it
/// for its version (the package database's when it does not say).
///
/// A `HEARTH_FLM` that is not executable is passed over here, so the report still shows what
/// else is installed; the backend refuses it ([`FlmNotFound::NotExecutable`]).
pub fn find_flm(root: &FsRoot) -> FlmInfo {
    find_flm_with(root, QuickLimits::default())
}

/// [`find_flm`], with each version command run within `limits`.
fn find_flm_with(root: &FsRoot, limits: QuickLimits) -> FlmInfo {
    let mut lookup = FlmLookup::under(root);
    let mut located = locate_flm(&lookup);
    if let Err(FlmNotFound::NotExecutable { path }) = &located {
        tracing::debug!("HEARTH_FLM {} is not executable", path.display());
        lookup.hearth_flm = None;
        located = locate_flm(&lookup);
    }
    match located {
        Ok(FlmLocation { path: shown, .. }) => {
            let path = lookup.on_disk(&shown);
            let (version, version_error) = match run_version(&path, limits) {
                Ok(v) => (Some(v), None),
                Err(e) => match dpkg_version(root, "fastflowlm") {
                    Some(v) => (Some(v.split('-').next().unwrap_or(&v).to_string()), None),
                    None => (None, Some(e)),
                },
            };
            FlmInfo {
                executable: Some(shown.to_string_lossy().into_owned()),
                version,
                version_error,
                runtime: crate::elf::runtime_of(&path),
            }
        }
        Err(_) => FlmInfo {
            executable: None,
            version: None,
            version_error: None,
            runtime: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn versions_compare_numerically() {
        assert!(version_at_least("2.20.0", "2.20"));
        assert!(version_at_least("2.21", "2.20"));
        assert!(!version_at_least("2.13.0", "2.20"));
        assert!(!version_at_least("2.9", "2.20"));
    }

    #[test]
    fn package_versions() {
        assert_eq!(
            xrt_version_from_package("202520.2.20.172").as_deref(),
            Some("2.20.172")
        );
        assert_eq!(
            xrt_version_from_package("2.13.0-3").as_deref(),
            Some("2.13.0")
        );
        assert_eq!(xrt_version_from_package("junk"), None);
    }

    #[test]
    fn xrt_from_library_names() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("opt/xilinx/xrt/lib");
        fs::create_dir_all(&lib).unwrap();
        for f in [
            "libxrt_coreutil.so",
            "libxrt_coreutil.so.2",
            "libxrt_coreutil.so.2.20.0",
            "libxrt_driver_xdna.so.2",
            "libxrt_coreutil_static.a",
        ] {
            fs::write(lib.join(f), "").unwrap();
        }
        let x = find_xrt(&FsRoot::new(dir.path()));
        assert_eq!(x.version.as_deref(), Some("2.20.0"));
        assert_eq!(
            x.library.as_deref(),
            Some("/opt/xilinx/xrt/lib/libxrt_coreutil.so.2.20.0")
        );
        assert_eq!(
            x.npu_plugin.as_deref(),
            Some("/opt/xilinx/xrt/lib/libxrt_driver_xdna.so.2")
        );
    }

    #[test]
    fn xrt_version_from_dpkg_when_the_name_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("usr/lib/x86_64-linux-gnu");
        fs::create_dir_all(&lib).unwrap();
        fs::write(lib.join("libxrt_coreutil.so.2"), "").unwrap();
        fs::create_dir_all(dir.path().join("var/lib/dpkg")).unwrap();
        fs::write(
            dir.path().join("var/lib/dpkg/status"),
            "Package: bash\nStatus: install ok installed\nVersion: 5.2\n\nPackage: libxrt2\nStatus: install ok installed\nVersion: 2.13.0-3\n",
        )
        .unwrap();
        let x = find_xrt(&FsRoot::new(dir.path()));
        assert_eq!(x.version.as_deref(), Some("2.13.0"));
        assert_eq!(x.npu_plugin, None);
    }

    #[test]
    fn flm_version_from_its_output() {
        assert_eq!(
            parse_flm_version("FLM v0.9.43\n").as_deref(),
            Some("0.9.43")
        );
        assert_eq!(parse_flm_version("no version here"), None);
        assert_eq!(
            parse_flm_version_json("{ \"version\": \"1.0.6\" }\n").as_deref(),
            Some("1.0.6")
        );
        assert_eq!(parse_flm_version_json("FLM v1.0.6"), None);
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("opt/fastflowlm/bin");
        fs::create_dir_all(&bin).unwrap();
        let flm = bin.join("flm");
        fs::write(&flm, "#!/bin/sh\necho \"FLM v0.9.43\"\n").unwrap();
        fs::set_permissions(&flm, fs::Permissions::from_mode(0o755)).unwrap();
        let f = find_flm(&FsRoot::new(dir.path()));
        assert_eq!(f.executable.as_deref(), Some("/opt/fastflowlm/bin/flm"));
        assert_eq!(f.version.as_deref(), Some("0.9.43"));
    }

    #[test]
    fn flm_absent_or_silent() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(find_flm(&FsRoot::new(dir.path())).executable, None);
        let bin = dir.path().join("usr/bin");
        fs::create_dir_all(&bin).unwrap();
        fs::write(bin.join("flm"), "#!/bin/sh\necho hello\n").unwrap();
        fs::set_permissions(bin.join("flm"), fs::Permissions::from_mode(0o755)).unwrap();
        let f = find_flm(&FsRoot::new(dir.path()));
        assert_eq!(f.version, None);
        assert!(f.version_error.unwrap().contains("printed no version"));
    }

    /// An executable shell script at `absolute` under `root` (its folders created).
    fn program(root: &Path, absolute: &str) -> PathBuf {
        let p = FsRoot::new(root).path(absolute);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, "#!/bin/sh\ntrue\n").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn located(lookup: &FlmLookup) -> (String, FlmSource) {
        let found = locate_flm(lookup).unwrap();
        (found.path.display().to_string(), found.source)
    }

    #[test]
    fn lookup_hearth_flm_wins_and_nothing_else_is_tried() {
        let dir = tempfile::tempdir().unwrap();
        program(dir.path(), "/usr/bin/flm");
        program(dir.path(), "/opt/fastflowlm/bin/flm");
        program(dir.path(), "/home/me/flm");
        let mut lookup = FlmLookup::under(&FsRoot::new(dir.path()));
        lookup.hearth_flm = Some("/home/me/flm".into());
        assert_eq!(
            located(&lookup),
            ("/home/me/flm".into(), FlmSource::HearthFlm)
        );
    }

    #[test]
    fn lookup_hearth_flm_not_executable_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        program(dir.path(), "/usr/bin/flm");
        fs::write(dir.path().join("plain"), "not a program").unwrap();
        let mut lookup = FlmLookup::under(&FsRoot::new(dir.path()));
        for chosen in ["/missing/flm", "/plain"] {
            lookup.hearth_flm = Some(chosen.into());
            let e = locate_flm(&lookup).unwrap_err();
            assert_eq!(
                e,
                FlmNotFound::NotExecutable {
                    path: chosen.into()
                },
                "a broken HEARTH_FLM is reported, not replaced by flm on PATH"
            );
            assert!(e.to_string().contains("correct or unset it"), "{e}");
        }
    }

    #[test]
    fn lookup_flm_on_path_beats_the_standard_install() {
        let dir = tempfile::tempdir().unwrap();
        program(dir.path(), "/opt/fastflowlm/bin/flm");
        program(dir.path(), "/usr/bin/flm");
        program(dir.path(), "/usr/local/bin/oflm");
        let lookup = FlmLookup::under(&FsRoot::new(dir.path()));
        assert_eq!(
            located(&lookup),
            ("/usr/bin/flm".into(), FlmSource::FlmOnPath)
        );
    }

    #[test]
    fn lookup_standard_install_beats_oflm() {
        let dir = tempfile::tempdir().unwrap();
        program(dir.path(), "/opt/fastflowlm/bin/flm");
        program(dir.path(), "/usr/local/bin/oflm");
        let lookup = FlmLookup::under(&FsRoot::new(dir.path()));
        assert_eq!(
            located(&lookup),
            ("/opt/fastflowlm/bin/flm".into(), FlmSource::Standard)
        );
    }

    #[test]
    fn lookup_oflm_is_found_last() {
        let dir = tempfile::tempdir().unwrap();
        program(dir.path(), "/bin/oflm");
        // Only `flm` is looked for in the standard install's folder.
        program(dir.path(), "/opt/fastflowlm/bin/oflm");
        let lookup = FlmLookup::under(&FsRoot::new(dir.path()));
        assert_eq!(
            located(&lookup),
            ("/bin/oflm".into(), FlmSource::OflmOnPath)
        );
    }

    #[test]
    fn lookup_nothing_found_lists_what_was_searched() {
        let dir = tempfile::tempdir().unwrap();
        // Not executable, and in a relative PATH entry: neither counts.
        fs::create_dir_all(dir.path().join("usr/bin")).unwrap();
        fs::write(dir.path().join("usr/bin/flm"), "").unwrap();
        let mut lookup = FlmLookup::under(&FsRoot::new(dir.path()));
        lookup.path = Some("rel:/usr/bin".into());
        program(dir.path(), "rel/flm");
        let e = locate_flm(&lookup).unwrap_err();
        assert_eq!(
            e,
            FlmNotFound::NotInstalled {
                searched: "flm and oflm on PATH, /opt/fastflowlm/bin/flm".into()
            }
        );
        assert!(e.to_string().contains("set HEARTH_FLM"), "{e}");
        assert_eq!(find_flm(&FsRoot::new(dir.path())).executable, None);
    }

    #[test]
    fn a_portable_install_of_this_user_is_found_after_the_standard_one() {
        let dir = tempfile::tempdir().unwrap();
        let unpacked = dir.path().join("share/fastflowlm/fastflowlm_1.0.6_linux");
        fs::create_dir_all(&unpacked).unwrap();
        let flm = unpacked.join("flm");
        fs::write(&flm, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&flm, fs::Permissions::from_mode(0o755)).unwrap();
        let lookup = FlmLookup {
            standard: dir.path().join("none/flm"),
            user_installs: vec![
                dir.path().join("cache/lemonade"),
                dir.path().join("share/fastflowlm"),
            ],
            ..FlmLookup::default()
        };
        let found = locate_flm(&lookup).unwrap();
        assert_eq!((found.path, found.source), (flm, FlmSource::UserInstall));
        let empty = FlmLookup {
            user_installs: vec![dir.path().join("cache/lemonade")],
            ..lookup
        };
        let e = locate_flm(&empty).unwrap_err();
        assert!(e.to_string().contains("cache/lemonade"), "{e}");
    }

    #[test]
    fn the_sdk_flm_in_a_python_environment_is_found_before_portable_installs() {
        // The FastFlow SDK's wheels (Python 3.12-3.14) put `flm` in the environment's bin/,
        // beside its model_list.json; this machine cannot install them, so the layout is made
        // by hand.
        let dir = tempfile::tempdir().unwrap();
        let env = dir.path().join("venv");
        fs::create_dir_all(env.join("bin")).unwrap();
        fs::write(env.join("pyvenv.cfg"), "version = 3.12.7\n").unwrap();
        let flm = env.join("bin/flm");
        fs::write(&flm, crate::elf::minimal_elf(&["libhrx.so.0", "libc.so.6"])).unwrap();
        fs::set_permissions(&flm, fs::Permissions::from_mode(0o755)).unwrap();
        let portable = dir.path().join("share/fastflowlm");
        fs::create_dir_all(&portable).unwrap();
        fs::write(portable.join("flm"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(portable.join("flm"), fs::Permissions::from_mode(0o755)).unwrap();
        let lookup = FlmLookup {
            standard: dir.path().join("none/flm"),
            python_envs: vec![dir.path().join("no-env"), env.clone()],
            user_installs: vec![portable],
            ..FlmLookup::default()
        };
        let found = locate_flm(&lookup).unwrap();
        assert_eq!(
            (found.path, found.source),
            (flm.clone(), FlmSource::PythonEnv)
        );
        assert_eq!(crate::elf::runtime_of(&flm), Some(crate::elf::Runtime::Hrx));
        let none = FlmLookup {
            python_envs: vec![dir.path().join("no-env")],
            user_installs: Vec::new(),
            ..lookup
        };
        let e = locate_flm(&none).unwrap_err();
        assert!(e.to_string().contains("no-env/bin/flm"), "{e}");
    }

    /// An `flm` at /usr/bin under `root` whose every verb runs `body`.
    fn flm_running(root: &Path, body: &str) {
        let p = FsRoot::new(root).path("/usr/bin/flm");
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_version_that_never_answers_is_stopped_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        flm_running(dir.path(), "exec sleep 300");
        let limits = QuickLimits {
            time: std::time::Duration::from_millis(100),
            ..QuickLimits::default()
        };
        let f = find_flm_with(&FsRoot::new(dir.path()), limits);
        assert_eq!(f.executable.as_deref(), Some("/usr/bin/flm"));
        assert_eq!(f.version, None);
        let e = f.version_error.unwrap();
        assert!(
            e.contains("--version: it did not finish within 100 ms"),
            "{e}"
        );
    }

    #[test]
    fn a_version_flood_is_refused_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        flm_running(dir.path(), "exec yes 1.0.6");
        let limits = QuickLimits {
            max_output: 1024,
            ..QuickLimits::default()
        };
        let f = find_flm_with(&FsRoot::new(dir.path()), limits);
        assert_eq!(f.version, None, "a flood is not read for a version");
        let e = f.version_error.unwrap();
        assert!(e.contains("it printed more than 1 KiB"), "{e}");
    }

    #[test]
    fn lookup_on_a_fixture_root_never_reads_the_live_environment() {
        let dir = tempfile::tempdir().unwrap();
        let lookup = FlmLookup::under(&FsRoot::new(dir.path()));
        assert_eq!(
            lookup,
            FlmLookup {
                hearth_flm: None,
                path: Some("/usr/local/bin:/usr/bin:/bin".into()),
                standard: FLM_STANDARD_PROGRAM.into(),
                user_installs: Vec::new(),
                python_envs: Vec::new(),
                root: dir.path().to_path_buf(),
            },
            "HEARTH_FLM and PATH of this process must not leak into a fixture"
        );
    }
}
