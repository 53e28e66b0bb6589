//! Server selection for a backend: which server gets the next connection or request
//! (configuration.txt §4.2 "balance", "hash-type", "hash-balance-factor", "option allbackups";
//! §5.2 "weight", "backup", "maxconn", "id"). Start with [`Balancer`].
//!
//! Pure code: no I/O, no clock, no randomness source. Time-dependent inputs (slowstart's growing
//! weight) arrive as [`ServerState`] updates, and `balance random` takes its randomness in
//! [`PickInput::random`]. The flow is:
//!
//! 1. configuration: [`parse_balance`] and [`parse_hash_type`] turn the `balance` and `hash-type`
//!    words into an [`Algorithm`] and a [`HashType`];
//! 2. start-up: [`Balancer::new`] builds the selection structure from them and the servers'
//!    states;
//! 3. server events (checks, CLI, slowstart steps): [`Balancer::update`];
//! 4. per request: the data path extracts the key of a hash-based algorithm ([`source_key`],
//!    [`uri_key`], [`url_param_key`]/[`form_param_key`], [`hdr_key`], or the `balance hash`
//!    expression), calls [`Balancer::pick`], then [`Balancer::connection_started`] and, when the
//!    connection or request ends, [`Balancer::connection_ended`].
//!
//! The hash functions and the static-map and consistent-ring layouts reproduce HAProxy's, so a
//! hash-balanced farm maps every key to the same server as under HAProxy 2.6 (`tests/compat.rs`).
//! `roundrobin` is a smooth earliest-deadline-first rotation rather than HAProxy's tree, with the
//! same proportions.

mod balancer;
mod chash;
mod config;
mod first;
pub mod hash;
mod heap;
mod key;
mod leastconn;
mod map;
mod rr;

pub use balancer::{Balancer, MAX_WEIGHT, PickInput, ServerState};
pub use config::{
    Algorithm, DEFAULT_RANDOM_DRAWS, HashFunction, HashMethod, HashType, UriOptions, parse_balance,
    parse_hash_type,
};
pub use hash::{hash, integer_key};
pub use key::{SourceKey, form_param_key, hdr_key, source_key, uri_key, url_param_key};
