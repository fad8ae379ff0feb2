//! How the app takes its mutexes: a holder that panicked does not leave the data poisoned for
//! every later request; the next holder takes it over as it was left.

use std::sync::{Mutex, MutexGuard};

/// Lock a mutex, recovering from a panic in another holder (the data stays usable).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
