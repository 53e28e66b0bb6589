//! Servers' states carried over a reload (configuration.txt `load-server-state-from-file`,
//! `server-state-file`, `server-state-base`, `server-state-file-name`; management.txt
//! "show servers state").
//!
//! Before a reload an operator saves `show servers state` to a file; the new process reads
//! it at start-up and gives each backend's servers back what the CLI or the stats page had
//! changed: maintenance or drain set by hand, the weight, and the address (`set server
//! addr`). Lines are matched to servers by backend and server names. The health seen by the
//! checks is not carried over: the checks find it again within their first round. What the
//! loading could not apply is returned as warnings, in HAProxy's manner: the process starts
//! with its configuration wherever a state is missing or unreadable.

use crate::health::Admin;
use crate::process::Process;
use crate::proxy::{Backend, Server};
use sluice_config::proxy::ServerStateFrom;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// The admin-state flags of the state file (HAProxy's `SRV_ADMF_*`): set by hand in
/// maintenance, and by hand in drain.
const FORCED_MAINT: u32 = 0x01;
const FORCED_DRAIN: u32 = 0x08;

/// One server's line of a state file (version 1), the fields Sluice applies.
#[derive(Debug, PartialEq, Eq)]
struct StateLine<'a> {
    backend: &'a str,
    server: &'a str,
    addr: &'a str,
    admin: u32,
    user_weight: u32,
}

/// Parses a state file's text: `None` unless it starts with the version line `1`; lines
/// that are comments or too short are skipped.
fn parse(text: &str) -> Option<Vec<StateLine<'_>>> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "1" {
        return None;
    }
    Some(
        lines
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                // be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state
                // srv_uweight ...
                Some(StateLine {
                    backend: f.get(1)?,
                    server: f.get(3)?,
                    addr: f.get(4)?,
                    admin: f.get(6)?.parse().ok()?,
                    user_weight: f.get(7)?.parse().ok()?,
                })
            })
            .collect(),
    )
}

/// The state file `backend` reads, if it reads one.
fn file_of(process: &Process, backend: &Backend) -> Option<PathBuf> {
    let global = &process.global;
    let (from, local_name) = &backend.plan.server_state;
    let name = match from {
        None | Some(ServerStateFrom::Nowhere) => return None,
        Some(ServerStateFrom::Global) => global.server_state_file.clone()?,
        Some(ServerStateFrom::Local) => local_name
            .clone()
            .unwrap_or_else(|| backend.name().to_owned()),
    };
    let path = PathBuf::from(&name);
    Some(match &global.server_state_base {
        Some(base) if path.is_relative() => PathBuf::from(base).join(path),
        _ => path,
    })
}

/// Applies the state files the backends name; returns a warning for each file that could not
/// be read and each line that named no server or could not be applied.
pub fn load(process: &Process) -> Vec<String> {
    let mut warnings = Vec::new();
    let mut files: HashMap<PathBuf, Option<String>> = HashMap::new();
    for backend in &process.backends {
        let Some(path) = file_of(process, backend) else {
            continue;
        };
        let text = files.entry(path.clone()).or_insert_with(|| {
            std::fs::read_to_string(&path)
                .map_err(|e| {
                    warnings.push(format!(
                        "backend '{}': cannot read the server state file '{}': {e}",
                        backend.name(),
                        path.display()
                    ));
                })
                .ok()
        });
        let Some(text) = text.as_deref() else {
            continue;
        };
        let Some(lines) = parse(text) else {
            warnings.push(format!(
                "backend '{}': the server state file '{}' is not in version 1",
                backend.name(),
                path.display()
            ));
            // Said once: the other backends reading it skip it quietly.
            files.insert(path, None);
            continue;
        };
        for line in lines.iter().filter(|l| l.backend == backend.name()) {
            match backend.server_named(line.server) {
                Some((index, server)) => apply(backend, index, server, line, &mut warnings),
                None => warnings.push(format!(
                    "backend '{}': no server '{}' for its saved state",
                    backend.name(),
                    line.server
                )),
            }
        }
    }
    warnings
}

/// Gives one server its saved state.
fn apply(
    backend: &Arc<Backend>,
    index: usize,
    server: &Server,
    line: &StateLine<'_>,
    warnings: &mut Vec<String>,
) {
    if line.admin & FORCED_MAINT != 0 {
        backend.set_admin(index, |a| *a = Admin::Maint);
    } else if line.admin & FORCED_DRAIN != 0 {
        backend.set_admin(index, |a| *a = Admin::Drain);
    }
    if line.user_weight != server.stats.weight() && line.user_weight <= 256 {
        server.stats.set_weight(line.user_weight);
        backend.apply_health(index);
    }
    // `-` (not resolved) and unix paths keep the configuration's address.
    if let Ok(ip) = line.addr.parse::<IpAddr>()
        && server.location().ip != Some(ip)
        && server.relocate(ip, None).is_none()
    {
        warnings.push(format!(
            "server '{}/{}': its saved address {ip} does not apply to a unix socket",
            backend.name(),
            server.name()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_lines_give_the_fields_applied() {
        let text = "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight\n\
                    3 be 1 s1 10.0.0.7 0 1 7 10 12 8 2 0 6 0 0 0 - 80 - 0 0 - - 0\n\
                    3 be 2 s2 - 2 0 10 10\n\
                    short line\n";
        assert_eq!(
            parse(text),
            Some(vec![
                StateLine {
                    backend: "be",
                    server: "s1",
                    addr: "10.0.0.7",
                    admin: 1,
                    user_weight: 7,
                },
                StateLine {
                    backend: "be",
                    server: "s2",
                    addr: "-",
                    admin: 0,
                    user_weight: 10,
                },
            ])
        );
        assert_eq!(parse("2\n3 be 1 s1 - 2 0 1 1\n"), None);
        assert_eq!(parse(""), None);
    }
}
