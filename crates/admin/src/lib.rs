//! The operator's interfaces: for now the runtime API on `stats socket` (management.txt §9.3).
//!
//! [`cli::serve`] accepts CLI connections and [`commands::execute`] runs one command line
//! against the live [`sluice_runtime::process::Process`]. Only reading commands exist yet
//! (`help`, `show info`, `prompt`, `quit`); the full command set, the stats page and the
//! Prometheus exporter come with the operations issue.

pub mod cli;
pub mod commands;
pub mod ops;
