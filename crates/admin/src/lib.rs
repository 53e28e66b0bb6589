//! The operator's interfaces: for now the runtime API on `stats socket` (management.txt §9.3).
//!
//! [`cli::serve`] accepts CLI connections and [`commands::execute`] runs one command line
//! against the live [`sluice_runtime::process::Process`]: `help`, `show info`, `prompt`, `quit`
//! in [`commands`], the statistics and server-management commands in [`ops`], the
//! run-time changes to the server list (`add server`, `del server`, `set server addr`) in
//! [`servers`], the stick-table commands in [`tables`]. The stats page
//! is served by the data path (`sluice_proxy::http::stats_page`) from the same rows.

pub mod cli;
pub mod commands;
pub mod ops;
pub mod servers;
pub mod tables;
