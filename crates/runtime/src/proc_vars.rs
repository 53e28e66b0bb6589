//! The `proc.` variables (configuration.txt §2.8): one table for the whole process, which
//! the data path's rules read and write and the CLI's `get var` reads.
//!
//! Process variables are few and rarely written, so one short lock around a small vector is
//! enough; the session-scoped variables live with their session (`sluice_proxy::vars`).

use sluice_sample::Sample;
use std::sync::{Mutex, MutexGuard};

/// Name (with its `proc.` prefix) and value of each process variable.
pub type Table = Vec<(String, Sample<'static>)>;

static PROCESS_VARS: Mutex<Table> = Mutex::new(Vec::new());

/// The table, locked.
pub fn table() -> MutexGuard<'static, Table> {
    // Every change is one push, assignment or retain: a panic cannot leave it half-done.
    PROCESS_VARS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The value of `name`, if set.
pub fn get(name: &str) -> Option<Sample<'static>> {
    table()
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
}
