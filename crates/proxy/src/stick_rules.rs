//! Stick-table persistence (configuration.txt §4.2 `stick match`, `stick on`, `stick
//! store-request`, `stick store-response`): a backend remembers which server a key (the
//! client's address, a session cookie...) went to, and sends the next requests with that
//! key to the same server.
//!
//! [`matched_server`] runs before balancing, after `use-server` and the persistence cookie
//! (which win when they decide): the first `match`/`on` rule whose condition holds and
//! whose key has an entry names the server, by name (`server_key`) or else by number
//! (`server_id`); a server that cannot take the request gives the choice back to the
//! balancing. [`store`] runs once the server is chosen (`on`, `store-request`) or once its
//! response head is in (`store-response`) and writes the server into every entry the rules
//! name.

use crate::stream_context::StreamView;
use crate::track::sample_key;
use sluice_config::stick::StickKind;
use sluice_runtime::proxy::{Backend, Server};
use sluice_stick::DataType;

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

/// Stores `server` under the keys of the backend's rules of the request side (`response`
/// false: `on`, `store-request`) or of the response side (`store-response`).
pub fn store(view: &StreamView<'_>, backend: &Backend, server: &Server, response: bool) {
    let tables = &view.process.tables;
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
        let Some(key) = rule
            .action
            .key
            .eval(view)
            .and_then(|s| sample_key(table.conf().key, &s))
        else {
            continue;
        };
        table.upsert(&key, tables.now_ms(), |d, _| {
            d.set(DataType::ServerId, u64::from(server.id));
            d.set_text(DataType::ServerKey, server.name());
        });
    }
}
