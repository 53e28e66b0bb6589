//! The process's stick tables (configuration.txt §4.2 `stick-table`): one shared
//! [`sluice_stick::Table`] per section declaring one, found by the section's name, and the
//! millisecond clock every table operation is given.
//!
//! The tables themselves are pure (`sluice-stick`); this module only owns them for the
//! process and supplies the time: milliseconds since the process started, from a monotonic
//! clock, so expiry and rates never jump with the wall clock.

use sluice_stick::{Table, TableConf};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The monotonic clock of stick tables.
#[derive(Clone, Copy, Debug)]
pub struct Clock(Instant);

impl Clock {
    /// A clock starting now.
    pub fn start() -> Clock {
        Clock(Instant::now())
    }

    /// Milliseconds since the clock started (the process start, for the tables' clock).
    pub fn now_ms(self) -> u64 {
        u64::try_from(crate::clock::since(self.0).as_millis()).unwrap_or(u64::MAX)
    }
}

/// Every stick table of the process.
#[derive(Debug)]
pub struct Tables {
    list: Vec<Arc<Table>>,
    by_name: HashMap<String, usize>,
    clock: Clock,
}

impl Tables {
    /// Empty tables for `confs`, in declaration order.
    pub fn new(confs: Vec<TableConf>) -> Tables {
        let list: Vec<Arc<Table>> = confs.into_iter().map(|c| Arc::new(Table::new(c))).collect();
        let by_name = list
            .iter()
            .enumerate()
            .map(|(i, t)| (t.conf().name.clone(), i))
            .collect();
        Tables {
            list,
            by_name,
            clock: Clock::start(),
        }
    }

    /// The table of section `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Table>> {
        self.by_name.get(name).and_then(|&i| self.list.get(i))
    }

    /// Every table, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Table>> {
        self.list.iter()
    }

    /// The tables' clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The current time of the tables' clock.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }
}
