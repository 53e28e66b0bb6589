//! Stick tables (configuration.txt §4.2 `stick-table`, §7.3.3 "Fetching samples at Layer 4"
//! for the counters): per-key counters, rates and server assignments that every thread of
//! the process shares.
//!
//! Pure code (layer 0: no I/O, no clock): the caller passes the time in milliseconds of its
//! own monotonic clock to every operation, so expiry and rates are tested with a controlled
//! clock. [`key`] turns values into canonical key bytes for a table's type, [`data`] names
//! the storable types and holds an entry's values, [`freq`] computes rates, and [`Table`]
//! holds the entries with their expiry and least-recently-used purge. The proxy builds one
//! [`Table`] per `stick-table` line; streams track entries through [`Table::track`] and
//! [`Table::release`]. Read [`Table`] first.

pub mod data;
pub mod freq;
pub mod key;
mod table;

pub use data::{ArrayType, Data, DataType, Gpc, Layout, MAX_ARRAY_LEN, array_index};
pub use key::{DEFAULT_KEY_LEN, KeyType};
pub use table::{EntryId, EntryView, Table, TableConf};
