//! The data path: accepting connections, choosing a server, connecting, forwarding bytes.
//!
//! [`accept::run_listener`] is where a connection enters: it waits for the connection limits
//! (bind, frontend, process) before accepting, so excess clients wait in the kernel's queue, and
//! spawns one session per connection. [`tcp::serve`] runs a `mode tcp` session: pick a server,
//! connect with retries, then [`forward::forward_streams`] relays both directions with half-close and
//! inactivity timeouts until both sides are done.

pub mod accept;
pub mod batch;
pub mod connect;
pub mod forward;
pub mod http;
pub mod inspect;
pub mod live_bytes;
pub mod park;
pub mod report;
pub mod stick_rules;
pub mod stream_context;
pub mod tcp;
pub mod track;
pub mod vars;
