//! The `mode http` data path: one client connection carries requests one after the other
//! (keep-alive, pipelining), each forwarded to a server chosen per request.
//!
//! [`session::serve`] runs the client side: it reads and parses each request head within
//! `timeout http-request`, answers bad requests itself (400, 408, 414, 431, 501, 505) and hands
//! good ones to [`exchange`], which gets a server connection (the session's own, the thread's
//! idle [`pool`], or a new one), sends the re-encoded head, streams the body both ways with
//! [`body`], and says whether both connections may carry another request. Heads are parsed and
//! re-encoded by the pure `sluice_http` codec; nothing here buffers a whole body.

pub mod body;
pub mod buffer;
pub mod exchange;
mod invalid;
pub mod normalize;
pub mod persist;
pub mod pool;
mod redir;
pub mod rewrite;
pub mod rules;
pub mod scratch;
pub mod session;
pub mod settings;
pub mod stats_page;
