//! Live frontends, backends and servers.
//!
//! A [`Frontend`] owns its connection limit and counters and points at the [`Backend`] taking
//! its traffic. A [`Backend`] owns its [`Server`]s and the balancing state; choosing a server
//! takes a short lock on that state only (the servers' own state is read from atomics).

use crate::counters::{Counter, Traffic};
use sluice_balance::{Algorithm, Balancer, PickInput, ServerState};
use sluice_config::plan::{BackendPlan, FrontendPlan};
use sluice_config::proxy::ServerConf;
use sluice_net::stream::{self, Target};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// A proxy's accepting side.
#[derive(Debug)]
pub struct Frontend {
    /// What the configuration said.
    pub plan: FrontendPlan,
    /// The backend taking this frontend's connections, if any.
    pub backend: Option<Arc<Backend>>,
    /// Concurrent connection limit (`maxconn`): a permit is held by every open session.
    pub slots: Arc<Semaphore>,
    /// The limit the semaphore was built with, for `show stat`.
    pub maxconn: u32,
    /// Sessions and bytes.
    pub traffic: Traffic,
    /// Connections closed without being forwarded (no backend, no server).
    pub failed: Counter,
    /// Invalid or timed-out requests (`ereq` in `show stat`).
    pub request_errors: Counter,
}

impl Frontend {
    /// A frontend from its plan, limited to `maxconn` concurrent sessions.
    pub fn new(plan: FrontendPlan, backend: Option<Arc<Backend>>, maxconn: u32) -> Self {
        Frontend {
            plan,
            backend,
            slots: Arc::new(Semaphore::new(maxconn as usize)),
            maxconn,
            traffic: Traffic::default(),
            failed: Counter::default(),
            request_errors: Counter::default(),
        }
    }

    /// The proxy's name.
    pub fn name(&self) -> &str {
        &self.plan.id.name
    }
}

/// A proxy's server side.
#[derive(Debug)]
pub struct Backend {
    /// What the configuration said.
    pub plan: BackendPlan,
    /// Servers, in declaration order.
    pub servers: Vec<Server>,
    balancer: Mutex<Balancer>,
    /// Sessions and bytes.
    pub traffic: Traffic,
    /// Connections that could not be established: every attempt failed, or no server was
    /// usable (`econ` in `show stat`).
    pub failed_connections: Counter,
    /// Extra connection attempts made after failures (`wretr`).
    pub retries: Counter,
    /// Invalid, missing or timed-out responses (`eresp`).
    pub response_errors: Counter,
}

impl Backend {
    /// A backend from its plan and its servers' resolved addresses (`None` for unix servers).
    pub fn new(plan: BackendPlan, resolved: Vec<Option<IpAddr>>) -> Self {
        let servers = plan
            .servers
            .iter()
            .zip(resolved)
            .enumerate()
            .map(|(i, (conf, ip))| Server::new(conf.clone(), i as u32 + 1, ip))
            .collect::<Vec<_>>();
        let states: Vec<ServerState> = servers
            .iter()
            .map(|s| ServerState {
                weight: s.conf.weight,
                usable: !s.conf.disabled,
                backup: s.conf.backup,
                maxconn: None,
            })
            .collect();
        let ids: Vec<u32> = servers.iter().map(|s| s.id).collect();
        let balancer = Balancer::new(
            &plan.balance,
            plan.hash_type,
            &states,
            plan.allbackups,
            plan.hash_balance_factor,
        )
        .with_ids(&ids);
        Backend {
            balancer: Mutex::new(balancer),
            servers,
            plan,
            traffic: Traffic::default(),
            failed_connections: Counter::default(),
            retries: Counter::default(),
            response_errors: Counter::default(),
        }
    }

    /// The proxy's name.
    pub fn name(&self) -> &str {
        &self.plan.id.name
    }

    /// The balancer, for server events (see [`crate::health`]).
    pub(crate) fn balancer_lock(&self) -> std::sync::MutexGuard<'_, Balancer> {
        self.balancer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The algorithm choosing servers (the data path extracts its key from the request).
    pub fn algorithm(&self) -> &Algorithm {
        &self.plan.balance
    }

    /// Chooses a server for a new connection given the algorithm's `key` (`None` when the
    /// algorithm uses none or it is missing: round robin then), or `None` when no server is
    /// usable. The returned lease counts the connection on the server until it is dropped, so
    /// `leastconn` and `first` see live counts.
    pub fn pick_server(&self, key: Option<&[u8]>) -> Option<ServerLease<'_>> {
        let input = PickInput {
            key,
            random: next_random(),
            exclude: None,
        };
        let mut balancer = self
            .balancer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let index = balancer.pick(&input)?;
        balancer.connection_started(index);
        drop(balancer);
        let server = self.servers.get(index)?;
        Some(ServerLease {
            backend: self,
            index,
            server,
        })
    }
}

/// A server chosen for one connection; dropping it tells the balancer the connection ended.
#[derive(Debug)]
pub struct ServerLease<'a> {
    backend: &'a Backend,
    index: usize,
    server: &'a Server,
}

impl<'a> ServerLease<'a> {
    /// The chosen server, for as long as its backend lives.
    pub fn server(&self) -> &'a Server {
        self.server
    }
}

impl std::ops::Deref for ServerLease<'_> {
    type Target = Server;

    fn deref(&self) -> &Server {
        self.server
    }
}

impl Drop for ServerLease<'_> {
    fn drop(&mut self) {
        let mut balancer = self
            .backend
            .balancer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        balancer.connection_ended(self.index);
    }
}

/// Randomness for `balance random`: a per-thread xorshift seeded from the standard
/// library's randomly keyed hasher (no syscall per pick).
fn next_random() -> u64 {
    use std::cell::Cell;
    use std::hash::{BuildHasher, Hasher};
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            std::collections::hash_map::RandomState::new().build_hasher().finish() | 1,
        );
    }
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        x
    })
}

/// One server of a backend.
#[derive(Debug)]
pub struct Server {
    /// What the configuration said.
    pub conf: ServerConf,
    /// Position in its backend, from 1 (`sid` in `show stat`).
    pub id: u32,
    /// The resolved address of an inet server.
    pub ip: Option<IpAddr>,
    /// Sessions and bytes.
    pub traffic: Traffic,
    /// Failed connection attempts (`econ`).
    pub failed_connections: Counter,
    /// Retried attempts (`wretr`).
    pub retries: Counter,
    /// Health: checks, agent, administrative state (see [`crate::health`]).
    pub health: crate::health::ServerHealth,
}

impl Server {
    fn new(conf: ServerConf, id: u32, ip: Option<IpAddr>) -> Self {
        Server {
            id,
            ip,
            traffic: Traffic::default(),
            failed_connections: Counter::default(),
            retries: Counter::default(),
            health: crate::health::ServerHealth::new(conf.disabled),
            conf,
        }
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.conf.name
    }

    /// Where to connect for a client that connected to port `client_dst_port`.
    pub fn target(&self, client_dst_port: Option<u16>) -> Option<Target> {
        stream::server_target(&self.conf.addr, self.ip, client_dst_port)
    }
}
