//! Sockets: binding listeners (inet, unix, inherited `fd@N`), accepted and connected streams.
//!
//! This crate turns the addresses of the plan into operating-system sockets and hides the
//! difference between TCP and unix streams behind [`stream::Stream`]. It knows nothing of
//! proxies or sessions. Binding happens before the event loops start, with blocking std sockets
//! ([`listen::BoundListener`]); each event-loop thread then registers its own shard (or clone)
//! of each. The project's `unsafe` code lives in [`fd`] (and in the allocator, `sluice-heap`).
//! The PROXY protocol is here too: a pure codec ([`proxy_protocol`]) and its use on streams
//! ([`proxy_io`]), and zero-copy forwarding through kernel pipes ([`splice`]). Listening
//! sockets move between processes in [`fd_pass`].

pub mod fd;
pub mod fd_pass;
pub mod listen;
pub mod proxy_io;
pub mod proxy_protocol;
pub mod readiness;
pub mod splice;
pub mod stream;
