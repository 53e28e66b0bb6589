//! Stick-table persistence (configuration.txt §4.2 `stick match`, `stick on`, `stick
//! store-request`, `stick store-response`): a backend remembers which server a key (the
//! client's address, a session cookie...) went to, and sends the next requests with that
//! key to the same server.
//!
//! [`matched_server`] runs before balancing, after `use-server` and the persistence cookie
//! (which win when they decide): the first `match`/`on` rule whose condition holds and
//! whose key has an entry names the server, by name (`server_key`) or else by number
//! (`server_id`); a server that cannot take the request gives the choice back to the
//! balancing. The request-side store rules (`on`, `store-request`) compute their keys when
//! the server is chosen ([`request_stores`]) and write the server into the entries once the
//! connection is established ([`commit`]); `store-response` rules read the response head
//! ([`store_response`]).

use crate::stream_context::StreamView;
use crate::track::sample_key;
use sluice_config::stick::StickKind;
use sluice_runtime::proxy::{Backend, Server};
use sluice_stick::{DataType, Table};
use std::sync::Arc;

/// The index of the server a `stick match|on` rule names for the stream in `view`, if it
/// is usable.
pub fn matched_server(view: &StreamView<'_>, backend: &Backend) -> Option<usize> {
    let tables = &view.process.tables;
    for rule in &backend.plan.rules.stick_rules {
        if !rule.action.kind.matches() || !rule.applies(view) {
            continue;
        }
        let Some(table) = rule.action.table.as_deref().and_then(|t| tables.get(t)) else {
            continue;
        };
        let Some(key) = rule
            .action
            .key
            .eval(view)
            .and_then(|s| sample_key(table.conf().key, &s))
        else {
            continue;
        };
        let found = table.lookup(&key, tables.now_ms(), true, |d, _| {
            match d.text(DataType::ServerKey) {
                Some(name) => backend.server_named(name).map(|(i, _)| i),
                None => {
                    let id = d.get(DataType::ServerId)?;
                    backend.servers.iter().position(|s| u64::from(s.id) == id)
                }
            }
        });
        // The first rule whose key has an entry decides, as in HAProxy.
        if let Some(found) = found {
            return found.filter(|&i| backend.is_server_usable(i));
        }
    }
    None
}

/// The keys the request-side store rules (`on`, `store-request`) computed, kept until the
/// server is known for good.
#[derive(Default)]
pub struct PendingStores(Vec<(Arc<Table>, Vec<u8>)>);

/// The tables and keys of `backend`'s store rules of one side (`response` false: `on`,
/// `store-request`; true: `store-response`) that apply to the stream in `view`.
fn keys(view: &StreamView<'_>, backend: &Backend, response: bool) -> PendingStores {
    let tables = &view.process.tables;
    let mut pending = Vec::new();
    for rule in &backend.plan.rules.stick_rules {
        let wanted = if response {
            rule.action.kind == StickKind::StoreResponse
        } else {
            rule.action.kind.stores_request()
        };
        if !wanted || !rule.applies(view) {
            continue;
        }
        let Some(table) = rule.action.table.as_deref().and_then(|t| tables.get(t)) else {
            continue;
        };
        if let Some(key) = rule
            .action
            .key
            .eval(view)
            .and_then(|s| sample_key(table.conf().key, &s))
        {
            pending.push((Arc::clone(table), key));
        }
    }
    PendingStores(pending)
}

/// Evaluates the request-side store rules when the server is chosen; [`commit`] stores the
/// server once the connection to it is established (as HAProxy stores nothing for a
/// request no server took, and the server may still change with `option redispatch`).
pub fn request_stores(view: &StreamView<'_>, backend: &Backend) -> PendingStores {
    keys(view, backend, false)
}

/// Stores `server` under every pending key, unless it is `non-stick`.
pub fn commit(pending: &PendingStores, view: &StreamView<'_>, server: &Server) {
    if server.conf.non_stick {
        return;
    }
    let now = view.process.tables.now_ms();
    for (table, key) in &pending.0 {
        table.upsert(key, now, |d, _| {
            d.set(DataType::ServerId, u64::from(server.id));
            d.set_text(DataType::ServerKey, server.name());
        });
    }
}

/// Stores `server` under the keys of the `store-response` rules, over the response head in
/// `view`.
pub fn store_response(view: &StreamView<'_>, backend: &Backend, server: &Server) {
    let pending = keys(view, backend, true);
    commit(&pending, view, server);
}
