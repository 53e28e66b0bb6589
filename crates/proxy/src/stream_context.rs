//! What the sample engine sees of a stream: the [`Context`] implementation of the data path.
//!
//! Rules, `use_backend` and log formats evaluate their fetches over a [`StreamView`], a set
//! of borrows taken at the moment of evaluation: the client's addresses, the proxies and the
//! server chosen so far, the request and response heads (offsets into the buffers they were
//! parsed from), the session's variables. Building one costs nothing but copying references,
//! so rules can take a fresh view before each step. Live counters (`nbsrv`, `be_conn`,
//! `srv_conn`...) are read from the process's atomics and balancer at the moment a fetch
//! asks.

use crate::vars::Vars;
use sluice_http::{RequestHead, ResponseHead};
use sluice_net::listen::Endpoints;
use sluice_runtime::process::Process;
use sluice_runtime::proxy::{Backend, Frontend, Server};
use sluice_sample::{BackendStat, Context, LogFacts, Sample, ServerStat};
use std::net::SocketAddr;
use std::time::SystemTime;

/// A stream as the sample engine sees it at one point of its life.
#[derive(Clone, Copy)]
pub struct StreamView<'a> {
    /// The process, for counters of other proxies.
    pub process: &'a Process,
    /// The accepting proxy.
    pub frontend: &'a Frontend,
    /// The backend chosen so far.
    pub backend: Option<&'a Backend>,
    /// The server chosen so far.
    pub server: Option<&'a Server>,
    /// The client's addresses.
    pub endpoints: Endpoints,
    /// The request buffer and its parsed head.
    pub request: Option<(&'a [u8], &'a RequestHead)>,
    /// The response buffer and its parsed head.
    pub response: Option<(&'a [u8], &'a ResponseHead)>,
    /// The session's variables.
    pub vars: &'a Vars,
    /// The client's bytes buffered by content inspection (`mode tcp`).
    pub payload: Option<&'a [u8]>,
    /// The server's bytes buffered by `tcp-response content` inspection (`mode tcp`).
    pub response_payload: Option<&'a [u8]>,
    /// Whether content inspection is over (`WAIT_END`): true except while `tcp-request
    /// content` rules may still wait for data.
    pub inspection_ended: bool,
    /// What the log record says (timers, bytes, termination), when a log line is rendered.
    pub facts: Option<&'a dyn LogFacts>,
}

impl<'a> StreamView<'a> {
    /// A view of a stream that has nothing but its client connection yet.
    pub fn new(
        process: &'a Process,
        frontend: &'a Frontend,
        endpoints: Endpoints,
        vars: &'a Vars,
    ) -> Self {
        StreamView {
            process,
            frontend,
            backend: None,
            server: None,
            endpoints,
            request: None,
            response: None,
            vars,
            payload: None,
            response_payload: None,
            inspection_ended: true,
            facts: None,
        }
    }

    fn backend_named(&self, name: Option<&str>) -> Option<&'a Backend> {
        match name {
            None => self.backend,
            Some(name) => self
                .process
                .backends
                .iter()
                .find(|b| b.name() == name)
                .map(|b| &**b),
        }
    }
}

impl Context for StreamView<'_> {
    fn src(&self) -> Option<SocketAddr> {
        self.endpoints.client
    }

    fn dst(&self) -> Option<SocketAddr> {
        self.endpoints.local
    }

    fn frontend_name(&self) -> &str {
        self.frontend.name()
    }

    fn backend_name(&self) -> Option<&str> {
        self.backend.map(Backend::name)
    }

    fn server_name(&self) -> Option<&str> {
        self.server.map(Server::name)
    }

    fn frontend_id(&self) -> Option<i64> {
        Some(i64::from(self.frontend.plan.id.uid))
    }

    fn backend_id(&self) -> Option<i64> {
        self.backend.map(|b| i64::from(b.plan.id.uid))
    }

    fn server_id(&self) -> Option<i64> {
        self.server.map(|s| i64::from(s.id))
    }

    fn request(&self) -> Option<(&[u8], &RequestHead)> {
        self.request
    }

    fn response(&self) -> Option<(&[u8], &ResponseHead)> {
        self.response
    }

    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn random(&self) -> u64 {
        sluice_runtime::proxy::next_random()
    }

    fn var(&self, name: &str) -> Option<Sample<'_>> {
        self.vars.get(name)
    }

    fn request_buffered(&self) -> Option<usize> {
        self.payload.map(<[u8]>::len)
    }

    fn request_payload(&self) -> Option<&[u8]> {
        self.payload
    }

    fn unique_id(&self) -> Option<Sample<'_>> {
        self.vars.unique_id().map(Sample::owned_str)
    }

    fn response_payload(&self) -> Option<&[u8]> {
        self.response_payload
    }

    fn log_facts(&self) -> Option<&dyn LogFacts> {
        self.facts
    }

    fn captured(&self, response: bool, index: usize) -> Option<Vec<u8>> {
        self.vars
            .captures()
            .get(response, index)
            .map(<[u8]>::to_vec)
    }

    fn set_var(&self, name: &str, value: Sample<'_>) {
        self.vars.set(name, value);
    }

    fn inspection_ended(&self) -> bool {
        self.inspection_ended
    }

    fn backend_stat(&self, backend: Option<&str>, stat: BackendStat) -> Option<i64> {
        let backend = self.backend_named(backend)?;
        Some(match stat {
            BackendStat::UsableServers => backend.usable_servers() as i64,
            BackendStat::Connections => backend.traffic.sessions.get() as i64,
            BackendStat::Queued => backend.queued() as i64,
            BackendStat::FreeSlots => backend.free_slots(),
        })
    }

    fn server_stat(&self, backend: Option<&str>, server: &str, stat: ServerStat) -> Option<i64> {
        let backend = self.backend_named(backend)?;
        let (index, server) = backend.server_named(server)?;
        Some(match stat {
            ServerStat::Connections => server.traffic.sessions.get() as i64,
            ServerStat::Queued => backend.server_queued(index) as i64,
            ServerStat::Up => i64::from(backend.is_server_usable(index)),
        })
    }
}
