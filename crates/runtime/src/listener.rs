//! One listening socket's statistics (`option socket-stats`, configuration.txt §4.2).
//!
//! A frontend with the option counts, for each socket it listens on, what it counts for
//! itself of the sessions that came through that socket: sessions, bytes, denied and invalid
//! requests, denied responses and connections, failed rewrites. `show stat` (and the
//! statistics page) show one row of type 3 per socket after the frontend's, named by its
//! `bind` line's `name` or `sock-N` (N its number in the frontend, from 1). The sockets of
//! a port range are each a listener, as in HAProxy.

use crate::counters::{Counter, Traffic};
use sluice_config::addr::ListenAddr;
use sluice_config::plan::FrontendPlan;
use sluice_config::proxy::BindConf;
use std::sync::{Arc, OnceLock};

/// The counters of one listening socket.
#[derive(Debug, Default)]
pub struct ListenerStats {
    /// Its name in statistics.
    pub name: String,
    /// Its number in its frontend, from 1 (`sid` in `show stat`).
    pub id: u32,
    /// The address it listens on, as bound (`addr`), once bound.
    pub addr: OnceLock<String>,
    /// Its `bind` line's `maxconn` (`slim`; 0 for none).
    pub maxconn: u32,
    /// Sessions and bytes.
    pub traffic: Traffic,
    /// `dreq`.
    pub denied_requests: Counter,
    /// `dresp`.
    pub denied_responses: Counter,
    /// `ereq`.
    pub request_errors: Counter,
    /// `dcon`.
    pub denied_connections: Counter,
    /// `dses`.
    pub denied_sessions: Counter,
    /// `wrew`.
    pub failed_rewrites: Counter,
    /// `eint`.
    pub internal_errors: Counter,
}

/// The `bind` line of each of a frontend's listening sockets, in the order they are bound
/// (one per address of a line, one per port of a range): socket N (from 1) is item N - 1.
pub fn sockets_of(plan: &FrontendPlan) -> impl Iterator<Item = &BindConf> {
    plan.binds.iter().flat_map(|bind| {
        bind.addrs.iter().flat_map(move |addr| {
            let sockets = match addr {
                ListenAddr::Inet { ports, .. } => ports.clone().count(),
                ListenAddr::Unix(_) | ListenAddr::Abstract(_) | ListenAddr::Fd(_) => 1,
            };
            std::iter::repeat_n(bind, sockets)
        })
    })
}

/// The listeners of a frontend with `option socket-stats`, in the order its sockets are
/// bound (none without the option).
pub fn listeners_of(plan: &FrontendPlan) -> Vec<Arc<ListenerStats>> {
    if !plan.socket_stats {
        return Vec::new();
    }
    sockets_of(plan)
        .zip(1..)
        .map(|(bind, id)| {
            Arc::new(ListenerStats {
                name: bind.name.clone().unwrap_or_else(|| format!("sock-{id}")),
                id,
                maxconn: bind.maxconn.unwrap_or(0),
                ..ListenerStats::default()
            })
        })
        .collect()
}
