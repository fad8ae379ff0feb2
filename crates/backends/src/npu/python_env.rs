//! The Python environment chosen in Settings where the FastFlow SDK (`pip install
//! fastflow-sdk`) put FastFlowLM: `<env>/bin/flm`, with its `model_list.json` beside it.
//!
//! Contract: the app sets the choice once it has read its settings ([`set_python_env`]) and
//! again when it changes; every lookup of this process ([`lookup`]) then tries `<env>/bin/flm`
//! first and only it, as `HEARTH_FLM` would be (`HEARTH_FLM` itself, set in the environment,
//! still wins: it is how a tester points at one program). A folder without an executable
//! `bin/flm` is refused in words ([`crate::npu::NpuError::NoFlmInPythonEnv`]), never passed
//! over for another FastFlowLM.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hearth_npu::software::FlmLookup as Lookup;

/// The environment chosen, if any.
static CHOSEN: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Tests that choose an environment take this first: the choice is one per process.
#[cfg(test)]
pub(crate) static TEST_CHOICE: Mutex<()> = Mutex::new(());

/// Chooses the Python environment FastFlowLM is looked for in first (`None`: none chosen).
pub fn set_python_env(env: Option<PathBuf>) {
    *CHOSEN.lock().unwrap_or_else(|e| e.into_inner()) = env;
}

/// The Python environment chosen, if any.
pub fn python_env() -> Option<PathBuf> {
    CHOSEN.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Where FastFlowLM is in a Python environment: `<env>/bin/flm`.
pub fn flm_in(env: &Path) -> PathBuf {
    env.join("bin").join("flm")
}

/// This process's lookup ([`Lookup::from_env`]) with the chosen environment's `bin/flm` as the
/// one program when `HEARTH_FLM` is not set.
pub fn lookup() -> Lookup {
    let mut lookup = Lookup::from_env();
    if lookup.hearth_flm.is_none() {
        if let Some(env) = python_env() {
            lookup.hearth_flm = Some(flm_in(&env));
        }
    }
    lookup
}

/// The chosen environment whose `bin/flm` is `path`, if that is where `path` comes from.
pub(crate) fn chosen_for(path: &Path) -> Option<PathBuf> {
    python_env().filter(|env| flm_in(env) == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chosen_env_is_looked_in_first() {
        let _one = TEST_CHOICE.lock().unwrap_or_else(|e| e.into_inner());
        let env = std::path::PathBuf::from("/nonexistent/venv");
        set_python_env(Some(env.clone()));
        assert_eq!(python_env(), Some(env.clone()));
        assert_eq!(chosen_for(&flm_in(&env)), Some(env.clone()));
        assert_eq!(chosen_for(Path::new("/usr/bin/flm")), None);
        if std::env::var_os("HEARTH_FLM").is_none() {
            assert_eq!(lookup().hearth_flm, Some(flm_in(&env)));
        }
        set_python_env(None);
    }
}
