//! `show sess` and `shutdown session` (management.txt §9.3) over the process's stream
//! registry ([`sluice_runtime::streams`]).
//!
//! The one-line form starts exactly like HAProxy 2.6's (`0x<id>: proto=... src=... fe=...
//! be=... srv=...`), which is what scripts parse; the buffer, flag and timer fields Sluice
//! does not track are printed with neutral values so the line keeps HAProxy's shape. The
//! detailed form (`show sess <id>`) is reduced to the stream's identity, addresses, proxies
//! and age.

use crate::commands::{CliState, Flow};
use sluice_config::proxy::Mode;
use sluice_runtime::process::Process;
use sluice_runtime::stats::proxy_iid;
use sluice_runtime::streams::{Origin, StreamInfo};
use std::fmt::Write;
use std::net::SocketAddr;
use std::time::Duration;

/// A duration the way HAProxy prints ages: at most two units among days, hours, minutes
/// and seconds (`0s`, `45s`, `2m5s`, `3h`, `1d4h`).
pub fn human_time(d: Duration) -> String {
    let t = d.as_secs();
    let mut out = String::new();
    let mut units = 2;
    if t >= 86_400 {
        let _ = write!(out, "{}d", t / 86_400);
        units -= 1;
    }
    if units > 0 && t % 86_400 / 3600 != 0 {
        let _ = write!(out, "{}h", t % 86_400 / 3600);
        units -= 1;
    }
    if units > 0 && t % 3600 / 60 != 0 {
        let _ = write!(out, "{}m", t % 3600 / 60);
        units -= 1;
    }
    if (units > 0 && !t.is_multiple_of(60)) || t == 0 {
        let _ = write!(out, "{}s", t % 60);
    }
    out
}

/// HAProxy's address form in `show sess`: `a.b.c.d:port`, IPv6 without brackets.
fn addr_text(addr: Option<SocketAddr>) -> String {
    match addr {
        Some(a) => format!("{}:{}", a.ip(), a.port()),
        None => "unix:1".to_string(),
    }
}

fn proto(info: &StreamInfo) -> &'static str {
    match info.client {
        Some(SocketAddr::V4(_)) => "tcpv4",
        Some(SocketAddr::V6(_)) => "tcpv6",
        None => "unix_stream",
    }
}

/// The names (and ids) of the stream's frontend, backend and server.
struct Names {
    fe: String,
    fe_id: i64,
    fe_mode: &'static str,
    be: Option<(String, u32, &'static str)>,
    srv: Option<(String, u32)>,
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Tcp => "tcp",
        Mode::Http => "http",
    }
}

fn names(process: &Process, info: &StreamInfo) -> Names {
    let (fe, fe_id, fe_mode) = match &info.origin {
        Origin::Client(f) => (
            f.plan.id.name.clone(),
            i64::from(proxy_iid(f.plan.id.uid)),
            mode_name(f.plan.mode),
        ),
        Origin::Cli => ("GLOBAL".to_string(), 0, "cli"),
    };
    let (be_uid, srv_index) = info.target();
    let backend = be_uid.and_then(|uid| process.backends.iter().find(|b| b.plan.id.uid == uid));
    let srv = backend
        .zip(srv_index)
        .and_then(|(b, i)| b.servers.get(i).map(|s| (s.conf.name.clone(), s.id)));
    Names {
        fe,
        fe_id,
        fe_mode,
        be: backend.map(|b| {
            (
                b.plan.id.name.clone(),
                proxy_iid(b.plan.id.uid),
                mode_name(b.plan.mode),
            )
        }),
        srv,
    }
}

fn summary(process: &Process, info: &StreamInfo, out: &mut String) {
    let n = names(process, info);
    let be = n.be.as_ref().map_or("<NONE>", |b| b.0.as_str());
    let srv = n.srv.as_ref().map_or("<none>", |s| s.0.as_str());
    let _ = writeln!(
        out,
        "0x{:x}: proto={} src={} fe={} be={be} srv={srv} ts=00 epoch=0 age={} calls={} rate=0 cpu=0 lat=0 \
         rq[f=0h,i=0,an=00h,rx=,wx=,ax=] rp[f=0h,i=0,an=00h,rx=,wx=,ax=] scf=[8,0h,fd={}] scb=[8,0h,fd=-1] exp= rc=0 c_exp=",
        info.id(),
        proto(info),
        addr_text(info.client),
        n.fe,
        human_time(info.started.elapsed()),
        info.calls().max(1),
        info.fd,
    );
}

fn detail(process: &Process, info: &StreamInfo, out: &mut String) {
    let n = names(process, info);
    let mut date = String::new();
    let started_at = info.started_at();
    sluice_runtime::record::write_date(started_at, &mut date);
    let micros = started_at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_micros() % 1000);
    let _ = writeln!(
        out,
        "0x{:x}: [{date}{micros:03}] id={} proto={} source={}",
        info.id(),
        info.uniq,
        proto(info),
        addr_text(info.client)
    );
    let _ = writeln!(
        out,
        "  flags=0x0, conn_retries=0, conn_exp=<NEVER> conn_et=0x000 srv_conn=(nil), pend_pos=(nil) waiting=0 epoch=0"
    );
    let _ = writeln!(
        out,
        "  frontend={} (id={} mode={}), listener=? (id=1) addr={}",
        n.fe,
        n.fe_id,
        n.fe_mode,
        addr_text(info.local)
    );
    let _ = match &n.be {
        Some((name, id, mode)) => writeln!(out, "  backend={name} (id={id} mode={mode})"),
        None => writeln!(out, "  backend=<NONE> (id=-1 mode=-)"),
    };
    let _ = match &n.srv {
        Some((name, id)) => writeln!(out, "  server={name} (id={id})"),
        None => writeln!(out, "  server=<NONE> (id=-1)"),
    };
    // Each stream's block ends with an empty line, as in HAProxy.
    let _ = writeln!(
        out,
        "  task=0x{:x} (state=0x00 nice=0 calls={} rate=0 exp=<NEVER> tmask=0x1 age={})\n",
        info.id(),
        info.calls().max(1),
        human_time(info.started.elapsed())
    );
}

/// A stream pointer as `show sess` prints it (`0x...`, or bare hexadecimal).
fn parse_pointer(word: &str) -> Option<u64> {
    let hex = word
        .strip_prefix("0x")
        .or_else(|| word.strip_prefix("0X"))
        .unwrap_or(word);
    u64::from_str_radix(hex, 16).ok().filter(|&p| p != 0)
}

/// `show sess [<id>|all]`: every stream on one line, one stream in detail, or every stream
/// in detail.
pub fn show_sess(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    if args.first().is_some_and(|a| a == "all") {
        for info in process.streams.list() {
            detail(process, &info, out);
        }
        return Flow::Continue;
    }
    // As in HAProxy, another word that is not a pointer lists everything.
    match args.first().and_then(|a| parse_pointer(a)) {
        Some(id) => match process.streams.get(id) {
            Some(info) => detail(process, &info, out),
            None => out.push_str("Session not found.\n"),
        },
        None => {
            for info in process.streams.list() {
                summary(process, &info, out);
            }
        }
    }
    Flow::Continue
}

/// `shutdown session <id>`: ends one stream at once, both sides closed.
pub fn shutdown_session(
    process: &Process,
    args: &[String],
    _: &mut CliState,
    out: &mut String,
) -> Flow {
    let Some(id) = args.first().and_then(|a| parse_pointer(a)) else {
        out.push_str("Session pointer expected (use 'show sess').\n");
        return Flow::Continue;
    };
    match process.streams.get(id) {
        Some(info) => info.kill(),
        None => out.push_str("No such session (use 'show sess').\n"),
    }
    Flow::Continue
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_use_two_units_at_most() {
        let t = |s| human_time(Duration::from_secs(s));
        assert_eq!(t(0), "0s");
        assert_eq!(t(45), "45s");
        assert_eq!(t(125), "2m5s");
        assert_eq!(t(3600), "1h");
        assert_eq!(t(3725), "1h2m");
        assert_eq!(t(86_400 + 4 * 3600 + 5), "1d4h");
        assert_eq!(t(2 * 86_400 + 7), "2d7s");
    }

    #[test]
    fn pointers_are_hexadecimal() {
        assert_eq!(parse_pointer("0x1a0"), Some(0x1a0));
        assert_eq!(parse_pointer("1a0"), Some(0x1a0));
        assert_eq!(parse_pointer("all"), None);
        assert_eq!(parse_pointer("0x0"), None);
    }
}
