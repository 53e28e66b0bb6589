//! Changing a backend's servers at run time: `add server`, `del server`, and `set server`'s
//! `addr`, `health`, `agent` and check-target settings (management.txt §9.3), answered in HAProxy 2.6's words so scripts and controllers
//! that drive HAProxy this way work unchanged.

use crate::commands::{CliState, Flow};
use crate::ops::find_server;
use sluice_config::addr::ServerPort;
use sluice_runtime::process::Process;
use sluice_runtime::proxy::{Backend, Location, Server};
use std::net::IpAddr;
use std::sync::Arc;

/// `add server B/S ADDR [options]`: a new server, in maintenance until `enable server`.
pub fn add_server(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    let Some((backend, name)) = args.first().and_then(|a| a.split_once('/')) else {
        out.push_str("Require 'backend/server'.\n");
        return Flow::Continue;
    };
    let Some(b) = p.backends.iter().find(|b| b.name() == backend) else {
        out.push_str("No such backend.\n");
        return Flow::Continue;
    };
    let words: Vec<String> = std::iter::once(name.to_owned())
        .chain(args[1..].iter().cloned())
        .collect();
    let added = sluice_config::proxy::parse_dynamic_server(&words)
        .and_then(|conf| b.add_server(conf).map_err(|refused| refused.0));
    match added {
        Ok(_) => out.push_str("New server registered.\n"),
        Err(message) => {
            out.push_str(&message);
            // HAProxy ends this one message without the usual empty line.
            if !message.starts_with("Backend must use a dynamic") {
                out.push('\n');
            }
        }
    }
    Flow::Continue
}

/// `del server B/S`: removes a server in maintenance that has no connection left and that no
/// other server tracks.
pub fn del_server(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    let Some((b, index, _)) = find_server(p, args.first(), out) else {
        return Flow::Continue;
    };
    let Some(bi) = p.backends.iter().position(|x| std::ptr::eq(&**x, &**b)) else {
        return Flow::Continue;
    };
    let tracked = p.backends.iter().any(|other| {
        other
            .servers
            .iter()
            .any(|s| s.conf.checks.track.as_ref().and_then(|t| t.resolved) == Some((bi, index)))
    });
    match b.delete_server(index, tracked) {
        Ok(()) => out.push_str("Server deleted.\n"),
        Err(refused) => {
            out.push_str(&refused.0);
            out.push('\n');
        }
    }
    Flow::Continue
}

/// `set server B/S addr IP [port PORT]`: moves the server; new connections and checks go to
/// the new address, idle connections to the old one are not reused.
pub fn set_addr(s: &Server, args: &[String], out: &mut String) {
    const BY: &str = " by 'stats socket command'\n";
    let text = args.first().map_or("", String::as_str);
    let Ok(ip) = text.parse::<IpAddr>() else {
        out.push_str(&format!("Invalid addr '{text}'{BY}"));
        return;
    };
    let before = s.location();
    if before.port.is_none() {
        out.push_str(&format!("Invalid addr '{text}'{BY}"));
        return;
    }
    let mut message = if before.ip == Some(ip) {
        "no need to change the addr".to_owned()
    } else {
        format!("IP changed from '{}' to '{ip}'", show_ip(&before))
    };
    let mut port = None;
    if let Some(word) = args
        .get(2)
        .filter(|_| args.get(1).is_some_and(|w| w == "port"))
    {
        match parse_port(word) {
            PortChange::Fixed(p) if Some(p) == before.port => {
                message.push_str(", no need to change the port");
            }
            PortChange::Fixed(p) => {
                message.push_str(&format!(
                    ", port changed from '{}' to '{}'",
                    show_port(before.port),
                    show_port(Some(p))
                ));
                port = Some(p);
            }
            PortChange::Map => message.push_str(
                ", can't change <port> to port map because it is incompatible with current \
                 health check port configuration (use 'port' statement from the 'server' \
                 directive.",
            ),
            PortChange::Invalid => {
                message.push_str(&format!(", problem converting port '{word}' to an int"));
            }
        }
    }
    s.relocate(ip, port);
    out.push_str(&message);
    out.push_str(BY);
}

enum PortChange {
    Fixed(ServerPort),
    /// `+N` or `-N`: a port map, which follows the client's port.
    Map,
    Invalid,
}

fn parse_port(word: &str) -> PortChange {
    if word.starts_with(['+', '-']) {
        return PortChange::Map;
    }
    match word.parse::<u16>() {
        Ok(0) => PortChange::Fixed(ServerPort::SameAsClient),
        Ok(p) => PortChange::Fixed(ServerPort::Fixed(p)),
        Err(_) => PortChange::Invalid,
    }
}

fn show_ip(here: &Location) -> String {
    here.ip.map_or("(none)".to_owned(), |ip| ip.to_string())
}

fn show_port(port: Option<ServerPort>) -> String {
    match port {
        Some(ServerPort::Fixed(p)) => p.to_string(),
        Some(ServerPort::Offset(o)) => format!("{o:+}"),
        Some(ServerPort::SameAsClient) | None => "0".to_owned(),
    }
}

/// `set server B/S health up|stopping|down`: forces the checks' verdict until the next check
/// says otherwise (nothing happens on a server without checks, as in HAProxy).
pub fn set_health(
    b: &Arc<Backend>,
    index: usize,
    s: &Server,
    word: Option<&str>,
    out: &mut String,
) {
    let (up, stopping) = match word {
        Some("up") => (true, false),
        Some("stopping") => (true, true),
        Some("down") => (false, false),
        _ => {
            out.push_str("'set server <srv> health' expects 'up', 'stopping', or 'down'.\n");
            return;
        }
    };
    if s.conf.checks.check {
        // The check counter goes to its end, as HAProxy's does: 0 down, at the top up.
        let c = &s.conf.checks;
        s.stats
            .set_check_health(if up { c.rise() + c.fall() - 1 } else { 0 });
        b.set_health(index, |h| {
            h.check_up = up;
            h.stopping = stopping;
        });
    }
}

/// `set server B/S agent up|down`: forces the agent's verdict.
pub fn set_agent(b: &Arc<Backend>, index: usize, s: &Server, word: Option<&str>, out: &mut String) {
    let up = match word {
        Some("up") => true,
        Some("down") => false,
        _ => {
            out.push_str("'set server <srv> agent' expects 'up' or 'down'.\n");
            return;
        }
    };
    if !s.conf.checks.agent {
        out.push_str("agent checks are not enabled on this server.\n");
        return;
    }
    b.set_health(index, |h| h.agent_up = up);
}

/// `set server B/S check-addr IP [port P] | check-port P | agent-addr IP | agent-port P |
/// agent-send STRING`: where the next checks and agent queries go, and what the agent gets.
pub fn set_probe(s: &Server, what: &str, args: &[String], out: &mut String) {
    let c = &s.conf.checks;
    let value = args.first().map_or("", String::as_str);
    let (enabled, refusal) = if what.starts_with("agent") {
        (c.agent, "agent checks are not enabled on this server.\n")
    } else {
        // HAProxy ends this one and the port error without the usual empty line.
        (c.check, "health checks are not enabled on this server")
    };
    let port = |text: &str| text.parse::<u16>().ok().filter(|&p| p > 0);
    match what {
        "check-port" | "agent-port" => {
            let Some(p) = port(value) else {
                out.push_str("provided port is not an integer");
                return;
            };
            if !enabled {
                out.push_str(refusal);
                return;
            }
            s.set_probes(|t| match what {
                "check-port" => t.check_port = Some(p),
                _ => t.agent_port = Some(p),
            });
        }
        "check-addr" | "agent-addr" => {
            let Ok(ip) = value.parse::<IpAddr>() else {
                out.push_str("incorrect addr address given for server.\n");
                return;
            };
            let new_port = match (args.get(1).map(String::as_str), args.get(2)) {
                (Some("port"), Some(p)) => match port(p) {
                    Some(p) => Some(p),
                    None => {
                        out.push_str("provided port is not an integer");
                        return;
                    }
                },
                _ => None,
            };
            if !enabled {
                out.push_str(refusal);
                return;
            }
            s.set_probes(|t| {
                if what == "check-addr" {
                    t.check_addr = Some(ip);
                    t.check_port = new_port.or(t.check_port);
                } else {
                    t.agent_addr = Some(ip);
                    t.agent_port = new_port.or(t.agent_port);
                }
            });
        }
        _ => {
            if !enabled {
                out.push_str(refusal);
                return;
            }
            s.set_probes(|t| t.agent_send = Some(value.as_bytes().to_vec()));
        }
    }
}
