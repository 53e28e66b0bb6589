//! The operator's interfaces: for now the runtime API on `stats socket` (management.txt §9.3).
//!
//! [`cli::serve`] accepts CLI connections and [`commands::execute`] runs one command line
//! against the live [`sluice_runtime::process::Process`]: `help`, `show info`, `prompt`, `quit`
//! in [`commands`] (`show info typed|json` in [`info`]), the statistics and server-management
//! commands in [`ops`], run-time changes to the server list (`add server`, `del server`, `set
//! server addr|health|agent...`) in [`servers`], the stick-table commands in [`tables`],
//! runtime maps and ACLs in [`maps`], `show sess` and `shutdown session` in [`sessions`], `show
//! errors` in [`errors`], and `get var`, `set rate-limit`, `show servers conn` and the mode
//! switches in [`misc`]. The stats page is served by the data path
//! (`sluice_proxy::http::stats_page`) from the same rows.

pub mod cli;
pub mod commands;
pub mod errors;
pub mod info;
pub mod maps;
pub mod misc;
pub mod ops;
pub mod servers;
pub mod sessions;
pub mod tables;
