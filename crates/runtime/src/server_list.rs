//! A backend's servers, and the run-time changes to that list (`add server`, `del server`).
//!
//! Sessions hold plain references to the server they were given while the CLI may add others,
//! so the list is append-only (`boxcar`: an element never moves and reading needs no lock). A
//! deleted server keeps its slot, marked: HAProxy only lets a server in maintenance without
//! connections go, so nothing still uses it, and lookups (by position, name, `id` or the
//! listings) no longer see it. Positions are never reused: queues, the balancer and
//! persistence keep addressing servers by position.

use crate::proxy::{Backend, Server, initial_state};
use sluice_balance::ServerState;
use sluice_config::addr::{Host, ServerAddr};
use sluice_config::proxy::ServerConf;
use std::collections::VecDeque;
use std::fmt;

/// A backend's servers by position.
pub struct ServerList {
    all: boxcar::Vec<Server>,
}

impl ServerList {
    pub(crate) fn new(servers: Vec<Server>) -> ServerList {
        let all = boxcar::Vec::with_capacity(servers.len());
        for server in servers {
            all.push(server);
        }
        ServerList { all }
    }

    /// The number of positions, deleted servers included (bounds for `get`).
    pub fn len(&self) -> usize {
        self.all.count()
    }

    /// Whether the backend never had a server.
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// The server at `index`, unless it was deleted.
    pub fn get(&self, index: usize) -> Option<&Server> {
        self.all.get(index).filter(|s| !s.is_deleted())
    }

    /// The servers that were not deleted, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Server> {
        self.all.iter().map(|(_, s)| s).filter(|s| !s.is_deleted())
    }
}

impl<'a> IntoIterator for &'a ServerList {
    type Item = &'a Server;
    type IntoIter = Box<dyn Iterator<Item = &'a Server> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl std::ops::Index<usize> for ServerList {
    type Output = Server;

    /// The server at `index`; only for positions known to exist (a lease's, a test's).
    fn index(&self, index: usize) -> &Server {
        &self.all[index]
    }
}

impl fmt::Debug for ServerList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter().map(Server::name))
            .finish()
    }
}

/// Why `add server` or `del server` refused, in HAProxy's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused(pub String);

impl Backend {
    /// Adds a server at run time (`add server`). It starts in maintenance, as in HAProxy:
    /// `enable server` puts it in service. Only backends whose algorithm follows weight
    /// changes take dynamic servers, and the address must be an IP (no name resolution at run
    /// time). Returns the new server's position.
    pub fn add_server(&self, mut conf: ServerConf) -> Result<usize, Refused> {
        let ip = match &conf.addr {
            ServerAddr::Inet {
                host: Host::Ip(ip), ..
            } => Some(*ip),
            ServerAddr::Inet { .. } => {
                return Err(Refused(
                    "a dynamic server needs an IP address: Sluice resolves names only at start-up"
                        .to_owned(),
                ));
            }
            ServerAddr::Unix(_) | ServerAddr::Abstract(_) => None,
        };
        let mut shared = self.lock();
        if !shared.balancer.is_dynamic() {
            return Err(Refused(
                "Backend must use a dynamic load balancing to support dynamic servers.".to_owned(),
            ));
        }
        if self.servers.iter().any(|s| s.name() == conf.name) {
            return Err(Refused(
                "Already exists a server with the same name in backend.".to_owned(),
            ));
        }
        let id = match conf.id {
            Some(id) => {
                if let Some(other) = self.servers.iter().find(|s| s.id == id) {
                    // HAProxy names where the other server was declared; a dynamic one was
                    // declared nowhere.
                    let at = match other.conf.span.line {
                        0 => "(null):0".to_owned(),
                        _ => other.conf.span.to_string(),
                    };
                    return Err(Refused(format!(
                        "'id' : custom id {id} already used at {at} ('server {}').",
                        other.name()
                    )));
                }
                id
            }
            None => (1..)
                .find(|id| self.servers.iter().all(|s| s.id != *id))
                .unwrap_or(u32::MAX),
        };
        conf.id = Some(id);
        let index = self.servers.len();
        let follows = crate::dynamic::follows_load(&conf);
        // In maintenance by the CLI, not by the configuration (`show servers state` tells).
        let state = ServerState {
            usable: false,
            ..initial_state(&conf)
        };
        let server = Server::new(conf, index, ip);
        server
            .health
            .update(|h| h.admin = crate::health::Admin::Maint);
        // Under the backend's lock, so the position, the balancer's and the queues' agree.
        let pushed = self.servers.all.push(server);
        debug_assert_eq!(pushed, index);
        shared.balancer.add_server(state, id);
        shared.queues.servers.push(VecDeque::new());
        shared.warming.push();
        if follows {
            shared.following.push(index);
        }
        drop(shared);
        self.apply_health(index);
        Ok(index)
    }

    /// Removes the server at `index` (`del server`): it must be in maintenance, without
    /// connections or queued requests, and no other server may track it.
    pub fn delete_server(&self, index: usize, tracked: bool) -> Result<(), Refused> {
        let Some(server) = self.servers.get(index) else {
            return Err(Refused("No such server.".to_owned()));
        };
        if tracked {
            return Err(Refused(
                "This server is tracked by other servers: it cannot be deleted.".to_owned(),
            ));
        }
        let shared = self.lock();
        if server.health.get().admin != crate::health::Admin::Maint {
            return Err(Refused(
                "Only servers in maintenance mode can be deleted.".to_owned(),
            ));
        }
        if shared.balancer.connections(index) > 0
            || shared
                .queues
                .servers
                .get(index)
                .is_some_and(|q| !q.is_empty())
        {
            return Err(Refused(
                "Server still has connections attached to it, cannot remove it.".to_owned(),
            ));
        }
        // Under the lock: no pick or forced lease can take it between the checks and this.
        server
            .deleted
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::health::Admin;
    use sluice_config::cond::CondContext;
    use sluice_config::reader::Source;
    use std::sync::Arc;

    fn backend(text: &str) -> Backend {
        let no_env = |_: &str| None;
        let ctx = CondContext {
            lookup: &no_env,
            features: &[],
            enabled: &[],
            version: "2.6",
        };
        let source = Source {
            name: Arc::from("t.cfg"),
            text: text.to_owned(),
        };
        let plan = sluice_config::plan::check(&[source], &ctx).plan.unwrap();
        let bp = plan.backends.into_iter().next().unwrap();
        let resolved = bp.servers.iter().map(|_| None).collect();
        Backend::new(bp, resolved)
    }

    fn conf(line: &str) -> ServerConf {
        let words: Vec<String> = line.split(' ').map(str::to_owned).collect();
        sluice_config::proxy::parse_dynamic_server(&words).unwrap()
    }

    #[tokio::test]
    async fn a_deleted_server_is_found_by_nothing_and_its_slot_stays() {
        let b = Arc::new(backend("backend b\n server a 127.0.0.1:1\n"));
        let index = b.add_server(conf("n 127.0.0.1:2 maxconn 3")).unwrap();
        assert_eq!((index, b.servers[index].id), (1, 2));
        assert!(!b.is_server_usable(index), "starts in maintenance");
        b.set_admin(index, |a| *a = Admin::Ready);
        let lease = b
            .acquire_server_at(index, crate::proxy::QueuePriority::default())
            .await
            .unwrap();
        b.set_admin(index, |a| *a = Admin::Maint);
        assert_eq!(
            b.delete_server(index, false),
            Err(Refused(
                "Server still has connections attached to it, cannot remove it.".to_owned()
            ))
        );
        drop(lease);
        assert!(
            b.delete_server(index, true).is_err(),
            "a tracked server stays"
        );
        assert_eq!(b.delete_server(index, false), Ok(()));
        assert!(b.servers.get(index).is_none());
        assert!(b.server_named("n").is_none());
        assert!(b.lease_server_forced(index).is_none());
        assert_eq!(b.servers.iter().count(), 1);
        assert_eq!(b.servers.len(), 2, "positions are never reused");
        let again = b.add_server(conf("n 127.0.0.1:2")).unwrap();
        assert_eq!((again, b.servers[again].id), (2, 2), "the id is free again");
    }

    #[test]
    fn a_server_in_service_cannot_be_deleted() {
        let b = backend("backend b\n server a 127.0.0.1:1\n");
        assert_eq!(
            b.delete_server(0, false),
            Err(Refused(
                "Only servers in maintenance mode can be deleted.".to_owned()
            ))
        );
    }
}
