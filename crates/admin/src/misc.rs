//! Smaller runtime commands (management.txt §9.3): `get var`, `show servers conn`,
//! `experimental-mode` and `expert-mode`.
//!
//! The two modes are switches of the CLI connection; Sluice has none of the commands
//! HAProxy reserves to them, so they gate nothing yet, but scripts that turn them on before
//! their commands keep working.

use crate::commands::{CliState, Flow};
use crate::ops::server_addr_port;
use sluice_runtime::idle::Figures;
use sluice_runtime::process::Process;
use sluice_runtime::stats::proxy_iid;
use sluice_sample::Sample;
use std::fmt::Write;

/// HAProxy's name for a sample's type, as `get var` prints it.
fn type_name(sample: &Sample<'_>) -> &'static str {
    match sample {
        Sample::Bool(_) => "bool",
        Sample::Int(_) => "sint",
        Sample::Ip(std::net::IpAddr::V4(_)) => "ipv4",
        Sample::Ip(std::net::IpAddr::V6(_)) => "ipv6",
        Sample::Str(_) => "str",
        Sample::Bin(_) => "bin",
        Sample::Meth(_) => "meth",
    }
}

/// `get var <name>`: a `proc.` variable's type and value.
pub fn get_var(_: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    let Some(name) = args.first() else {
        out.push_str("Missing process-wide variable identifier.\n");
        return Flow::Continue;
    };
    let found = name
        .starts_with("proc.")
        .then(|| sluice_runtime::proc_vars::get(name))
        .flatten();
    let Some(value) = found else {
        out.push_str("Variable not found.\n");
        return Flow::Continue;
    };
    let text = match &value {
        Sample::Bool(b) => u8::from(*b).to_string(),
        Sample::Int(i) => i.to_string(),
        Sample::Ip(ip) => ip.to_string(),
        Sample::Str(b) | Sample::Bin(b) | Sample::Meth(b) => {
            String::from_utf8_lossy(b).into_owned()
        }
    };
    let _ = writeln!(out, "{name}: type={} value=<{text}>", type_name(&value));
    Flow::Continue
}

/// `show servers conn [<backend>]`: each server's connections in use and idle, in total and
/// per event-loop thread. Each thread keeps its own usage figures (its pools are its own):
/// `used_max` and `need_est` are the sums of the threads' figures.
pub fn show_servers_conn(
    process: &Process,
    args: &[String],
    _: &mut CliState,
    out: &mut String,
) -> Flow {
    let Some(backends) = crate::ops::backends_named(process, args.first(), out) else {
        return Flow::Continue;
    };
    let threads = process.nbthread;
    let _ = writeln!(
        out,
        "# bkname/svname bkid/svid addr port - purge_delay used_cur used_max need_est unsafe_nb safe_nb idle_lim idle_cur idle_per_thr[{threads}]"
    );
    for b in backends {
        for s in &b.servers {
            let (addr, port) = server_addr_port(s);
            let idle_lim = s.conf.pool_max_conn.map_or(-1, i64::from);
            let per_thread = sluice_runtime::idle::per_thread((b.plan.id.uid, s.id), threads);
            let mut total = Figures::default();
            for figures in &per_thread {
                total.add(*figures);
            }
            // Never reused connections are HAProxy's "unsafe" ones, reused ones "safe".
            let Figures {
                used_cur,
                used_max,
                need_est,
                idle_unsafe,
                idle_safe,
            } = total;
            let _ = write!(
                out,
                "{}/{} {}/{} {addr} {port} - {} {used_cur} {used_max} {need_est} {idle_unsafe} {idle_safe} {idle_lim} {}",
                b.name(),
                s.conf.name,
                proxy_iid(b.plan.id.uid),
                s.id,
                s.conf.pool_purge_delay.as_millis(),
                idle_unsafe.saturating_add(idle_safe),
            );
            for figures in per_thread {
                let _ = write!(
                    out,
                    " {}",
                    figures.idle_unsafe.saturating_add(figures.idle_safe)
                );
            }
            out.push('\n');
        }
    }
    Flow::Continue
}

fn mode(args: &[String], name: &str, on: &mut bool, out: &mut String) -> Flow {
    match args.first().map(String::as_str) {
        None => {
            let _ = writeln!(out, "{name} is {}", if *on { "ON" } else { "OFF" });
        }
        // As in HAProxy, any word but `on` turns the mode off.
        Some(word) => *on = word == "on",
    }
    Flow::Continue
}

/// `experimental-mode [on|off]`: this connection's experimental mode.
pub fn experimental_mode(
    _: &Process,
    args: &[String],
    state: &mut CliState,
    out: &mut String,
) -> Flow {
    mode(args, "experimental-mode", &mut state.experimental, out)
}

/// `expert-mode [on|off]`: this connection's expert mode.
pub fn expert_mode(_: &Process, args: &[String], state: &mut CliState, out: &mut String) -> Flow {
    mode(args, "expert-mode", &mut state.expert, out)
}

/// `set rate-limit connections|sessions global <n>`: the process's accept rate limits (0
/// for none); `http-compression global <n>`: `maxcomprate`, in kB/s. Sluice has no TLS, so
/// `ssl-sessions` is refused.
pub fn set_rate_limit(
    process: &Process,
    args: &[String],
    _: &mut CliState,
    out: &mut String,
) -> Flow {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let set: &dyn Fn(u32) = match words.as_slice() {
        ["connections", "global", ..] => &|v| process.accept_limits.connections.set_limit(v),
        ["sessions", "global", ..] => &|v| process.accept_limits.sessions.set_limit(v),
        ["http-compression", "global", ..] => &|v| process.compression.set_rate_limit_kbps(v),
        ["ssl-sessions", "global", ..] => {
            out.push_str("'set rate-limit ssl-sessions' is not supported by Sluice.\n");
            return Flow::Continue;
        }
        _ => {
            out.push_str(
                "'set rate-limit' only supports :\n   - 'connections global' to set the per-process maximum connection rate\n   - 'sessions global' to set the per-process maximum session rate\n   - 'http-compression global' to set the per-process maximum compression speed in kB/s\n",
            );
            return Flow::Continue;
        }
    };
    let Some(value) = words.get(2) else {
        out.push_str("Expects an integer value.\n");
        return Flow::Continue;
    };
    match value.parse::<i64>() {
        Ok(v) => match u32::try_from(v) {
            Ok(v) => set(v),
            Err(_) => out.push_str("Value out of range.\n"),
        },
        Err(_) => out.push_str("Expects an integer value.\n"),
    }
    Flow::Continue
}
