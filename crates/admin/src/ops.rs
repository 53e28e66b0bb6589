//! The statistics and server-management commands of the runtime API (management.txt §9.3):
//! `show stat`, `show servers state`, `show backend`, `enable|disable server|health|agent|
//! frontend`, `set server ... state|weight`, `get|set weight`, `clear counters`, `set maxconn
//! global`.
//!
//! Every change goes through the live objects' own entry points (the server's health state then
//! [`Backend::apply_health`], the frontend's pause switch, the process's connection slots), so
//! the CLI, the stats page and the health checks all act on the same state. Answers and errors
//! use HAProxy 2.6's words, which scripts match.

use crate::commands::{CliState, Flow};
use sluice_config::addr::{ServerAddr, ServerPort};
use sluice_config::global::CliLevel;
use sluice_runtime::health::Admin;
use sluice_runtime::process::Process;
use sluice_runtime::proxy::{Backend, Server};
use sluice_runtime::stats::{self, Filter, proxy_iid};
use std::fmt::Write;
use std::sync::Arc;

/// `show stat [{<iid>|<proxy>} <type> <sid>]`: the CSV of every row, or of the rows the three
/// arguments select (a proxy by name or id, a mask of 1 frontends, 2 backends, 4 servers, and a
/// server id, -1 meaning all). With fewer than three arguments every row is shown, as HAProxy
/// does. `typed` (alone, or after the three filters) gives one field per line with HAProxy's
/// type tags, `json` the same fields as HAProxy's JSON objects. A proxy name that does not exist is "No such proxy.";
/// an id that does not exist selects nothing.
pub fn show_stat(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    // As in HAProxy 2.6, three words are the filters and the format follows them; with fewer,
    // the first word may be the format alone.
    let (filters, format) = match words.as_slice() {
        [proxy, kind, sid, rest @ ..] => (Some((*proxy, *kind, *sid)), rest.first().copied()),
        [first, ..] => (None, Some(*first)),
        [] => (None, None),
    };
    let (typed, json) = match format {
        Some("typed") => (true, false),
        Some("json") => (false, true),
        _ => (false, false),
    };
    let filter = match filters {
        Some((proxy, kind, sid)) => {
            let iid = match proxy {
                // -1 selects every proxy.
                "-1" => None,
                name => match proxy_id(process, name) {
                    Some(iid) => Some(iid),
                    None => {
                        out.push_str("No such proxy.\n");
                        return Flow::Continue;
                    }
                },
            };
            Filter {
                iid,
                types: kind.parse().unwrap_or(-1),
                sid: sid.parse().unwrap_or(-1),
            }
        }
        None => Filter::ALL,
    };
    if json {
        out.push_str(&sluice_runtime::stats_typed::json(process, |r| {
            filter.keeps(r)
        }));
    } else if typed {
        out.push_str(&sluice_runtime::stats_typed::typed(process, filter));
    } else {
        out.push_str(&stats::csv(process, filter));
    }
    Flow::Continue
}

/// The `iid` of the proxy named or numbered `word`.
fn proxy_id(process: &Process, word: &str) -> Option<u32> {
    if let Ok(n) = word.parse::<u32>() {
        return Some(n);
    }
    let by_name = |name: &str, uid: u32| (name == word).then_some(proxy_iid(uid));
    process
        .frontends
        .iter()
        .find_map(|f| by_name(f.name(), f.plan.id.uid))
        .or_else(|| {
            process
                .backends
                .iter()
                .find_map(|b| by_name(b.name(), b.plan.id.uid))
        })
}

/// The backend a `show servers ...` command names, or every backend without a name; `None`
/// (with HAProxy's message written) when no backend has that name.
pub fn backends_named<'p>(
    process: &'p Process,
    name: Option<&String>,
    out: &mut String,
) -> Option<Vec<&'p Backend>> {
    match name {
        Some(name) => match process.backends.iter().find(|b| b.name() == name) {
            Some(b) => Some(vec![&**b]),
            None => {
                out.push_str("Can't find backend.\n");
                None
            }
        },
        None => Some(process.backends.iter().map(|b| &**b).collect()),
    }
}

/// The header of `show servers state` (format version 1).
const SERVERS_STATE_HEADER: &str = "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n";

/// `show servers state [<backend>]`: one line per server in HAProxy's state-file format.
pub fn show_servers_state(
    process: &Process,
    args: &[String],
    _: &mut CliState,
    out: &mut String,
) -> Flow {
    let Some(backends) = backends_named(process, args.first(), out) else {
        return Flow::Continue;
    };
    out.push_str(SERVERS_STATE_HEADER);
    for b in backends {
        for s in &b.servers {
            server_state_line(b, s, out);
        }
    }
    Flow::Continue
}

/// A server's address and port as the state file and `show servers conn` print them (`-`
/// for an address not resolved, port 0 when it follows the client's).
pub(crate) fn server_addr_port(s: &Server) -> (String, i64) {
    let here = s.location();
    match (&s.conf.addr, here.port) {
        (ServerAddr::Unix(path), _) => (path.clone(), 0),
        (ServerAddr::Abstract(name), _) => (name.to_string(), 0),
        (ServerAddr::Inet { .. }, None) => ("-".to_owned(), 0),
        (ServerAddr::Inet { .. }, Some(port)) => (
            here.ip.map_or("-".to_owned(), |ip| ip.to_string()),
            match port {
                ServerPort::Fixed(p) => i64::from(p),
                ServerPort::SameAsClient => 0,
                ServerPort::Offset(o) => i64::from(o),
            },
        ),
    }
}

/// HAProxy's number for a check status (`enum healthcheck_status`, the state file's
/// `srv_check_status`).
fn check_status_number(code: &str) -> u8 {
    const ORDER: [&str; 21] = [
        "UNK",
        "INI",
        "SOCKERR_START",
        "CHECKED",
        "HANA",
        "SOCKERR",
        "L4OK",
        "L4TOUT",
        "L4CON",
        "L6OK",
        "L6TOUT",
        "L6RSP",
        "L7TOUT",
        "L7RSP",
        "L57DATA",
        "L7OK",
        "L7OKC",
        "L7STS",
        "PROCERR",
        "PROCTOUT",
        "PROCOK",
    ];
    ORDER.iter().position(|c| *c == code).unwrap_or(0) as u8
}

fn server_state_line(b: &Backend, s: &Server, out: &mut String) {
    let h = s.health.get();
    let c = &s.conf.checks;
    let maint = h.admin == Admin::Maint;
    let op_state = if !h.operational() || maint {
        0
    } else if h.stopping {
        3
    } else {
        2
    };
    // SRV_ADMF_FMAINT 0x01, SRV_ADMF_CMAINT 0x04 (from the configuration), SRV_ADMF_FDRAIN 0x08.
    let admin_state = match h.admin {
        Admin::Ready => 0,
        Admin::Drain => 8,
        Admin::Maint if s.conf.disabled => 5,
        Admin::Maint => 1,
    };
    let (check_status, check_result) = match (&h.last_check, c.check) {
        (Some(last), true) => {
            let n = check_status_number(last.status);
            // CHK_RES_FAILED 2, CHK_RES_PASSED 3.
            (n, if h.check_up { 3 } else { 2 })
        }
        _ => (1, 0),
    };
    let check_health = if !c.check {
        if h.operational() && !maint {
            c.rise()
        } else {
            0
        }
    } else {
        s.check_health()
    };
    // CHK_ST_CONFIGURED 0x2, CHK_ST_ENABLED 0x4, CHK_ST_PAUSED 0x8.
    let paused = if maint { 8 } else { 0 };
    let check_state = if c.check {
        2 | if s.stats.checks_enabled() { 4 } else { 0 } | paused
    } else {
        paused
    };
    let agent_state = if c.agent {
        2 | if s.stats.agent_enabled() { 4 } else { 0 }
    } else {
        0
    };
    let (addr, port) = server_addr_port(s);
    let _ = writeln!(
        out,
        "{} {} {} {} {addr} {op_state} {admin_state} {} {} {} {check_status} {check_result} \
         {check_health} {check_state} {agent_state} 0 0 - {port} - 0 {} {} {} {}",
        proxy_iid(b.plan.id.uid),
        b.name(),
        s.id,
        s.name(),
        s.stats.weight(),
        s.conf.weight,
        s.stats.last_change_age(),
        c.port.unwrap_or(0),
        c.addr.map_or("-".to_owned(), |a| a.to_string()),
        c.agent_addr.map_or("-".to_owned(), |a| a.to_string()),
        c.agent_port.unwrap_or(0),
    );
}

/// `show backend`: the names of the proxies with a backend side.
pub fn show_backend(process: &Process, _: &[String], _: &mut CliState, out: &mut String) -> Flow {
    out.push_str("# name\n");
    for b in &process.backends {
        out.push_str(b.name());
        out.push('\n');
    }
    Flow::Continue
}

/// Finds `backend/server` or says why not, in HAProxy's words.
pub(crate) fn find_server<'p>(
    process: &'p Process,
    arg: Option<&String>,
    out: &mut String,
) -> Option<(&'p Arc<Backend>, usize, &'p Server)> {
    let Some((backend, server)) = arg.and_then(|a| a.split_once('/')) else {
        out.push_str("Require 'backend/server'.\n");
        return None;
    };
    let Some(b) = process.backends.iter().find(|b| b.name() == backend) else {
        out.push_str("No such backend.\n");
        return None;
    };
    let Some((index, s)) = b.server_named(server) else {
        out.push_str("No such server.\n");
        return None;
    };
    Some((b, index, s))
}

/// `disable server B/S`: maintenance.
pub fn disable_server(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    if let Some((b, i, _)) = find_server(p, args.first(), out) {
        b.set_admin(i, |a| *a = Admin::Maint);
    }
    Flow::Continue
}

/// `enable server B/S`: out of maintenance (a drain stays).
pub fn enable_server(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    if let Some((b, i, _)) = find_server(p, args.first(), out) {
        b.set_admin(i, |a| {
            if *a == Admin::Maint {
                *a = Admin::Ready;
            }
        });
    }
    Flow::Continue
}

/// `shutdown sessions server B/S`: ends every session on the server at once (the kill signal
/// `on-marked-down shutdown-sessions` uses).
pub fn shutdown_sessions_server(
    p: &Process,
    args: &[String],
    _: &mut CliState,
    out: &mut String,
) -> Flow {
    if let Some((b, index, s)) = find_server(p, args.first(), out) {
        s.health.kill_sessions(&p.streams, b.plan.id.uid, index);
    }
    Flow::Continue
}

/// `set server B/S state ready|drain|maint` and `set server B/S weight N[%]`.
pub fn set_server(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    let Some((b, i, s)) = find_server(p, args.first(), out) else {
        return Flow::Continue;
    };
    match args.get(1).map(String::as_str) {
        Some("state") => {
            let admin = match args.get(2).map(String::as_str) {
                Some("ready") => Admin::Ready,
                Some("drain") => Admin::Drain,
                Some("maint") => Admin::Maint,
                _ => {
                    out.push_str(
                        "'set server <srv> state' expects 'ready', 'drain' and 'maint'.\n",
                    );
                    return Flow::Continue;
                }
            };
            b.set_admin(i, |a| *a = admin);
        }
        Some("weight") => set_weight_of(b, i, s, args.get(2), out),
        Some("addr") => crate::servers::set_addr(s, &args[2..], out),
        Some("health") => crate::servers::set_health(b, i, s, args.get(2).map(String::as_str), out),
        Some("agent") => crate::servers::set_agent(b, i, s, args.get(2).map(String::as_str), out),
        Some(what @ ("check-addr" | "check-port" | "agent-addr" | "agent-port" | "agent-send")) => {
            crate::servers::set_probe(s, what, &args[2..], out)
        }
        _ => out.push_str(
            "usage: set server <backend>/<server> addr | agent | agent-addr | agent-port | \
             agent-send | check-addr | check-port | fqdn | health | ssl | state | weight\n",
        ),
    }
    Flow::Continue
}

/// Parses `N` (absolute, 0 to 256) or `N%` (of the configured weight, 0 to 100).
pub fn parse_weight(text: &str, initial: u32) -> Result<u32, &'static str> {
    if text.is_empty() {
        return Err("Require <weight> or <weight%>.");
    }
    let (digits, relative) = match text.strip_suffix('%') {
        Some(d) => (d, true),
        None => (text, false),
    };
    let Ok(n) = digits.parse::<i64>() else {
        return Err("Empty weight string empty or preceded by garbage");
    };
    if relative {
        if !(0..=100).contains(&n) {
            return Err("Relative weight can only be set between 0 and 100% inclusive.");
        }
        Ok((u64::from(initial) * n as u64 / 100) as u32)
    } else {
        if !(0..=256).contains(&n) {
            return Err("Absolute weight can only be between 0 and 256 inclusive.");
        }
        Ok(n as u32)
    }
}

fn set_weight_of(b: &Backend, i: usize, s: &Server, arg: Option<&String>, out: &mut String) {
    match parse_weight(arg.map_or("", String::as_str), s.conf.weight) {
        Ok(w) => {
            s.stats.set_weight(w);
            b.apply_health(i);
        }
        Err(msg) => {
            out.push_str(msg);
            out.push('\n');
        }
    }
}

/// `set weight B/S N[%]`.
pub fn set_weight(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    if let Some((b, i, s)) = find_server(p, args.first(), out) {
        set_weight_of(b, i, s, args.get(1), out);
    }
    Flow::Continue
}

/// `get weight B/S`: the current and the configured weight.
pub fn get_weight(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    if let Some((_, _, s)) = find_server(p, args.first(), out) {
        let current = stats::server_weight(s, &s.health.get());
        let _ = writeln!(out, "{current} (initial {})", s.conf.weight);
    }
    Flow::Continue
}

fn switch_health(p: &Process, args: &[String], out: &mut String, on: bool) {
    if let Some((_, _, s)) = find_server(p, args.first(), out) {
        if !s.conf.checks.check {
            // HAProxy complains only when asked to enable.
            if on {
                out.push_str("Health check was not configured on this server, cannot enable.\n");
            }
            return;
        }
        s.stats.set_checks_enabled(on);
    }
}

fn switch_agent(p: &Process, args: &[String], out: &mut String, on: bool) {
    if let Some((_, _, s)) = find_server(p, args.first(), out) {
        if !s.conf.checks.agent {
            if on {
                out.push_str("Agent was not configured on this server, cannot enable.\n");
            }
            return;
        }
        s.stats.set_agent_enabled(on);
    }
}

/// `disable health B/S`.
pub fn disable_health(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    switch_health(p, args, out, false);
    Flow::Continue
}

/// `enable health B/S`.
pub fn enable_health(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    switch_health(p, args, out, true);
    Flow::Continue
}

/// `disable agent B/S`.
pub fn disable_agent(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    switch_agent(p, args, out, false);
    Flow::Continue
}

/// `enable agent B/S`.
pub fn enable_agent(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    switch_agent(p, args, out, true);
    Flow::Continue
}

/// `clear counters [all]`: maximums only, or (`all`, admin level) every total too.
pub fn clear_counters(
    p: &Process,
    args: &[String],
    state: &mut CliState,
    out: &mut String,
) -> Flow {
    let all = args.first().is_some_and(|a| a == "all");
    if all && state.level < CliLevel::Admin {
        out.push_str("Permission denied\n");
        return Flow::Continue;
    }
    let traffics = p
        .frontends
        .iter()
        .map(|f| (&f.traffic, &f.stats))
        .chain(p.backends.iter().map(|b| (&b.traffic, &b.stats)))
        .chain(
            p.backends
                .iter()
                .flat_map(|b| b.servers.iter().map(|s| (&s.traffic, &s.stats))),
        );
    for (traffic, stats) in traffics {
        traffic.sessions.reset_max();
        traffic.session_rate.reset_max();
        if all {
            traffic.total_sessions.reset();
            traffic.bytes_in.reset();
            traffic.bytes_out.reset();
        }
        stats.clear(all);
    }
    for f in &p.frontends {
        f.connection_rate.reset_max();
        if all {
            f.connections.reset();
        }
    }
    if all {
        for f in &p.frontends {
            for c in [
                &f.failed,
                &f.request_errors,
                &f.denied_connections,
                &f.denied_requests,
                &f.intercepted,
            ] {
                c.reset();
            }
        }
        for b in &p.backends {
            for c in [
                &b.failed_connections,
                &b.retries,
                &b.response_errors,
                &b.queue_timeouts,
                &b.denied_requests,
            ] {
                c.reset();
            }
            for s in &b.servers {
                s.failed_connections.reset();
                s.response_errors.reset();
                s.retries.reset();
            }
        }
    }
    p.traffic.sessions.reset_max();
    p.traffic.session_rate.reset_max();
    p.connection_rate.reset_max();
    Flow::Continue
}

/// `set maxconn global N`: the process-wide connection limit, at most the one it started with.
pub fn set_maxconn_global(
    p: &Process,
    args: &[String],
    _: &mut CliState,
    out: &mut String,
) -> Flow {
    let Some(n) = args.first().and_then(|a| a.parse::<u32>().ok()) else {
        out.push_str("Expects an integer value.\n");
        return Flow::Continue;
    };
    if n > p.maxconn {
        out.push_str("Value out of range.\n");
        return Flow::Continue;
    }
    // 0 means "the hard limit" in HAProxy.
    let n = if n == 0 { p.maxconn } else { n };
    p.set_runtime_maxconn(n);
    Flow::Continue
}

/// `set maxconn frontend NAME N`: the frontend's concurrent connection limit; open sessions
/// are not cut when it drops.
pub fn set_maxconn_frontend(
    p: &Process,
    args: &[String],
    _: &mut CliState,
    out: &mut String,
) -> Flow {
    let Some(name) = args.first() else {
        out.push_str("A frontend name is expected.\n");
        return Flow::Continue;
    };
    let Some(f) = p.frontends.iter().find(|f| f.name() == name) else {
        out.push_str("No such frontend.\n");
        return Flow::Continue;
    };
    match args.get(1).and_then(|a| a.parse::<u32>().ok()) {
        Some(n) => f.slots.set_limit(n),
        None => out.push_str("Integer value expected.\n"),
    }
    Flow::Continue
}

fn switch_frontend(p: &Process, args: &[String], out: &mut String, on: bool) {
    let Some(f) = args
        .first()
        .and_then(|name| p.frontends.iter().find(|f| f.name() == name))
    else {
        out.push_str("No such frontend.\n");
        return;
    };
    if f.stats.paused() != on {
        out.push_str(if on {
            "All sockets are already enabled.\n"
        } else {
            "All sockets are already disabled.\n"
        });
        return;
    }
    f.stats.set_paused(!on);
}

/// `disable frontend NAME`: its listeners stop accepting (connections wait in the kernel).
pub fn disable_frontend(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    switch_frontend(p, args, out, false);
    Flow::Continue
}

/// `enable frontend NAME`.
pub fn enable_frontend(p: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    switch_frontend(p, args, out, true);
    Flow::Continue
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::{CliMode, execute_line};
    use std::sync::Arc;

    /// A process with a frontend, a backend of two servers (one checked) and a listen.
    fn process() -> Process {
        let no_env = |_: &str| None;
        let ctx = sluice_config::cond::CondContext {
            lookup: &no_env,
            features: &[],
            enabled: &[],
            version: "2.6",
        };
        let text = "defaults\n mode http\n timeout connect 1s\n timeout client 1s\n timeout server 1s\n\
                    frontend fe\n bind 127.0.0.1:65001\n acl lan src 10.0.0.0/8\n default_backend be\n\
                    backend be\n server s1 127.0.0.1:1 check\n server s2 127.0.0.1:2 weight 20 backup\n\
                    listen li\n bind 127.0.0.1:65002\n server x 127.0.0.1:3 agent-check agent-port 4\n";
        let source = sluice_config::reader::Source {
            name: Arc::from("t.cfg"),
            text: text.to_owned(),
        };
        let checked = sluice_config::plan::check(&[source], &ctx);
        let Some(plan) = checked.plan else {
            panic!("{:?}", checked.diagnostics);
        };
        let opts = sluice_runtime::process::BuildOptions {
            maxconn: 100,
            default_frontend_maxconn: None,
            nbthread: 1,
            ulimit_n: 1024,
        };
        Process::build(plan, opts, None).unwrap_or_else(|_| unreachable!())
    }

    fn run(p: &Process, line: &str, level: CliLevel) -> String {
        let mut state = CliState {
            mode: CliMode::NonInteractive,
            level,
            payload: None,
            expert: false,
            experimental: false,
        };
        let mut out = String::new();
        execute_line(p, line, &mut state, &mut out);
        out
    }

    #[test]
    fn no_command_line_makes_it_panic() {
        let p = process();
        let heads = [
            "show stat",
            "show servers state",
            "show backend",
            "disable server",
            "enable server",
            "set server",
            "get weight",
            "set weight",
            "disable health",
            "enable health",
            "disable agent",
            "enable agent",
            "clear counters",
            "set maxconn global",
            "disable frontend",
            "enable frontend",
            "show map",
            "show acl",
            "get map",
            "get acl",
            "add map",
            "add acl",
            "del map",
            "del acl",
            "set map",
            "clear map",
            "clear acl",
            "show sess",
            "shutdown session",
            "show errors",
            "show info",
            "get var",
            "show servers conn",
            "set rate-limit",
            "set rate-limit connections global",
            "experimental-mode",
            "expert-mode",
        ];
        let args = [
            "#0",
            "#1",
            "#-1",
            "@1",
            "0x1000",
            "#0x1000",
            "10.0.0.0/8",
            "proc.x",
            "request",
            "response",
            "",
            "be/s1",
            "be/s2",
            "li/x",
            "be/",
            "/s1",
            "/",
            "be",
            "fe",
            "li",
            "-1",
            "0",
            "2",
            "3",
            "4",
            "7",
            "99999999999999999999",
            "-99999999999999999999",
            "state",
            "weight",
            "ready",
            "drain",
            "maint",
            "50%",
            "300",
            "256",
            "%",
            "-5%",
            "1e3",
            "all",
            "typed",
            "json",
            "\u{0}",
            "é/ü",
            "be/s1 state",
            "be/s1 weight",
        ];
        for head in heads {
            for a in args {
                for b in ["", "drain", "-1", "10%", "x"] {
                    for c in ["", "-1", "1", "q"] {
                        let line = format!("{head} {a} {b} {c}");
                        let out = run(&p, &line, CliLevel::Admin);
                        assert!(out.ends_with('\n'), "{line:?} -> {out:?}");
                    }
                }
            }
        }
        // Whatever happened, the state is still coherent enough to report.
        assert!(run(&p, "show stat", CliLevel::User).starts_with("# pxname,"));
        assert!(run(&p, "set maxconn global 100", CliLevel::Admin) == "\n");
    }

    #[test]
    fn levels_and_words() {
        let p = process();
        assert_eq!(
            run(&p, "disable server be/s1", CliLevel::Operator),
            "Permission denied\n\n"
        );
        assert_eq!(
            run(&p, "clear counters all", CliLevel::Operator),
            "Permission denied\n\n"
        );
        assert_eq!(run(&p, "clear counters", CliLevel::Operator), "\n");
        assert_eq!(
            run(&p, "clear counters", CliLevel::User),
            "Permission denied\n\n"
        );
        assert_eq!(
            run(&p, "enable health be/s2", CliLevel::Admin),
            "Health check was not configured on this server, cannot enable.\n\n"
        );
        assert_eq!(run(&p, "disable health be/s2", CliLevel::Admin), "\n");
        assert_eq!(run(&p, "disable agent li/x", CliLevel::Admin), "\n");
        assert_eq!(
            run(&p, "show stat li 4 -1", CliLevel::User)
                .lines()
                .nth(1)
                .map(|l| l.split(',').nth(17).unwrap_or_default().to_owned()),
            Some("no check".to_owned())
        );
        assert_eq!(
            run(&p, "set server be/s1 state maint", CliLevel::Admin),
            "\n"
        );
        assert!(
            run(&p, "show servers state be", CliLevel::User).contains("\n3 be 1 s1 127.0.0.1 0 1 ")
        );
        assert_eq!(
            run(&p, "get weight be/s2", CliLevel::User),
            "20 (initial 20)\n\n"
        );
    }

    #[test]
    fn weights_absolute_and_relative() {
        assert_eq!(parse_weight("10", 20), Ok(10));
        assert_eq!(parse_weight("50%", 20), Ok(10));
        assert_eq!(parse_weight("0%", 20), Ok(0));
        assert!(parse_weight("257", 20).is_err());
        assert!(parse_weight("101%", 20).is_err());
        assert!(parse_weight("-1", 20).is_err());
        assert!(parse_weight("abc", 20).is_err());
        assert!(parse_weight("%", 20).is_err());
        assert_eq!(parse_weight("", 1), Err("Require <weight> or <weight%>."));
    }

    #[test]
    fn check_status_numbers_are_haproxys() {
        assert_eq!(check_status_number("L4CON"), 8);
        assert_eq!(check_status_number("L7OK"), 15);
        assert_eq!(check_status_number("L7STS"), 17);
        assert_eq!(check_status_number("nonsense"), 0);
    }
}
