//! Live frontends, backends and servers.
//!
//! A [`Frontend`] owns its connection limit and counters and points at the [`Backend`] taking
//! its traffic. A [`Backend`] owns its [`Server`]s and the balancing state; choosing a server
//! takes a short lock on that state only (the servers' own state is read from atomics).

use crate::counters::{Counter, Traffic};
use sluice_balance::{Candidate, RoundRobin};
use sluice_config::plan::{BackendPlan, FrontendPlan};
use sluice_config::proxy::ServerConf;
use sluice_net::stream::{self, Target};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
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
    balancer: Mutex<RoundRobin>,
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
        Backend {
            balancer: Mutex::new(RoundRobin::new(servers.len())),
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

    /// Chooses a server for a new connection, or `None` when none is usable.
    pub fn pick_server(&self) -> Option<&Server> {
        // Bounded stack copy: the view is rebuilt per pick, but allocation-free for backends
        // of up to 64 servers, which covers almost every configuration.
        let mut small = [Candidate {
            weight: 0,
            usable: false,
            backup: false,
        }; 64];
        let heap;
        let candidates: &[Candidate] = if self.servers.len() <= small.len() {
            for (slot, server) in small.iter_mut().zip(&self.servers) {
                *slot = server.candidate();
            }
            &small[..self.servers.len()]
        } else {
            heap = self
                .servers
                .iter()
                .map(Server::candidate)
                .collect::<Vec<_>>();
            &heap
        };
        let index = match self.balancer.lock() {
            Ok(mut rr) => rr.pick(candidates),
            // A panic while holding the lock cannot leave the credits inconsistent in a way
            // that matters: keep balancing with them.
            Err(poisoned) => poisoned.into_inner().pick(candidates),
        }?;
        self.servers.get(index)
    }
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
    /// In maintenance: takes no new traffic (`disabled` in the configuration).
    maintenance: AtomicBool,
    weight: AtomicU32,
    /// Sessions and bytes.
    pub traffic: Traffic,
    /// Failed connection attempts (`econ`).
    pub failed_connections: Counter,
    /// Retried attempts (`wretr`).
    pub retries: Counter,
}

impl Server {
    fn new(conf: ServerConf, id: u32, ip: Option<IpAddr>) -> Self {
        Server {
            maintenance: AtomicBool::new(conf.disabled),
            weight: AtomicU32::new(conf.weight),
            conf,
            id,
            ip,
            traffic: Traffic::default(),
            failed_connections: Counter::default(),
            retries: Counter::default(),
        }
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.conf.name
    }

    /// True while in maintenance.
    pub fn in_maintenance(&self) -> bool {
        self.maintenance.load(Ordering::Relaxed)
    }

    /// Puts the server in or out of maintenance.
    pub fn set_maintenance(&self, on: bool) {
        self.maintenance.store(on, Ordering::Relaxed);
    }

    /// Current weight.
    pub fn weight(&self) -> u32 {
        self.weight.load(Ordering::Relaxed)
    }

    /// Where to connect for a client that connected to port `client_dst_port`.
    pub fn target(&self, client_dst_port: Option<u16>) -> Option<Target> {
        stream::server_target(&self.conf.addr, self.ip, client_dst_port)
    }

    fn candidate(&self) -> Candidate {
        Candidate {
            weight: self.weight(),
            usable: !self.in_maintenance(),
            backup: self.conf.backup,
        }
    }
}
