//! The haproxy.cfg reader: text in, diagnostics and an immutable [`plan::Plan`] out.
//!
//! This crate is pure (no sockets, no clock, no process environment: the environment comes in
//! through [`cond::CondContext`]), so `sluice -c` can never bind anything. It reads files, and
//! moves the working directory while it does where `default-path` asks ([`default_path`]). The stages, in order:
//! [`reader`] finds the files, [`lexer`] splits each line into words (quotes, escapes,
//! `"${VAR-default}"`), [`preprocess`] applies `.if/.elif/.else/.endif` blocks, [`sections`]
//! groups the lines into `global`/`defaults`/`frontend`/... sections, [`global`] and [`proxy`]
//! turn each section's keywords into typed `*Conf` values, and [`plan`] resolves names and
//! defaults into the `*Plan` the runtime is built from. Start reading at [`plan::Plan`].

pub mod addr;
pub mod cache;
pub mod canned;
pub mod checks;
pub mod compression;
pub mod cond;
pub mod cookie;
pub mod cpu_map;
pub mod default_path;
pub mod diag;
pub mod environment;
pub mod errors;
pub mod global;
pub mod http_options;
pub mod lexer;
pub mod logging;
pub mod mailers;
pub mod plan;
pub mod preprocess;
pub mod proxy;
pub mod reader;
pub mod retry;
pub mod ring;
pub mod rules;
pub mod sections;
pub mod source;
pub mod stats_page;
pub mod stick;
pub mod units;
pub mod userlist;

mod directive;
