//! Live objects built from the plan: the process, its frontends, backends and servers, with
//! their counters and limits.
//!
//! [`process::Process::build`] turns an immutable [`sluice_config::plan::Plan`] into shared
//! objects the event-loop threads, the CLI and (later) the health checks all hold through
//! `Arc`s. Live state (server maintenance, weights, counters) is in atomics so that reading it
//! never blocks the data path; the plan itself is never changed after start-up.

pub mod bell;
pub mod cache;
pub mod capture;
pub mod clock;
pub mod compression;
pub mod counters;
pub mod dynamic;
pub mod errors;
pub mod freq;
pub mod health;
pub mod idle;
pub mod listener;
pub mod load;
pub mod logging;
pub mod proc_vars;
pub mod process;
pub mod prometheus;
pub mod proxy;
pub mod rate;
pub mod record;
pub mod ring;
pub mod server_list;
pub mod server_state;
pub mod slots;
pub mod stats;
pub mod stats_typed;
pub mod streams;
pub mod tables;
pub mod timers;
pub mod wakers;
