//! `show errors [<iid>|<proxy>] [request|response]` (management.txt §9.3): the last invalid
//! request of each frontend and the last invalid response of each backend, with a dump of
//! the bytes received.
//!
//! The layout is HAProxy 2.6's: a "Total events captured" line, then for each capture a
//! line with a single space, the header lines (date, proxy, peer, server, event number,
//! client), the buffer's fill and the error's offset, and the dump, in which each line
//! starts with its offset (`+` when it continues a longer line) and bytes that are not
//! printable are escaped (`\r`, `\n`, `\t`, `\\`, `\xHH`). HAProxy's lines about its HTTP
//! parser's internal state are left out.

use crate::commands::{CliState, Flow};
use sluice_runtime::errors::Capture;
use sluice_runtime::process::Process;
use sluice_runtime::record::write_date;
use sluice_runtime::stats::proxy_iid;
use std::fmt::Write;
use std::time::SystemTime;

/// The widest dump line, prefix included (HAProxy's).
const DUMP_WIDTH: usize = 79;

/// Appends the dump of `data`, one line per line of text or per [`DUMP_WIDTH`] columns.
pub fn dump(data: &[u8], out: &mut String) {
    let mut pos = 0;
    let mut line_start = true;
    while pos < data.len() {
        let mut line = format!("  {pos:05}{} ", if line_start { ' ' } else { '+' });
        line_start = false;
        while let Some(&c) = data.get(pos) {
            let piece = match c {
                b'\t' => "\\t".to_string(),
                b'\r' => "\\r".to_string(),
                b'\n' => "\\n".to_string(),
                b'\\' => "\\\\".to_string(),
                0x20..=0x7e => (c as char).to_string(),
                _ => format!("\\x{c:02X}"),
            };
            if line.len() + piece.len() > DUMP_WIDTH {
                break;
            }
            line.push_str(&piece);
            pos += 1;
            if c == b'\n' {
                line_start = true;
                break;
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
}

fn client_text(capture: &Capture) -> String {
    match capture.client {
        Some(a) => format!("{}:{}", a.ip(), a.port()),
        None => "unix".to_string(),
    }
}

fn named(peer: &Option<(String, u32)>) -> String {
    match peer {
        Some((name, id)) => format!("{name} (#{id})"),
        None => "<NONE> (#-1)".to_string(),
    }
}

fn write_capture(kind: &str, name: &str, iid: u32, capture: &Capture, out: &mut String) {
    let mut date = String::new();
    write_date(capture.when, &mut date);
    let (side, other, what) = if kind == "request" {
        ("frontend", "backend", "invalid request")
    } else {
        ("backend", "frontend", "invalid response")
    };
    let _ = writeln!(out, " \n[{date}] {side} {name} (#{iid}): {what}");
    let _ = writeln!(
        out,
        "  {other} {}, server {}, event #{}, src {}",
        named(&capture.peer),
        named(&capture.server),
        capture.event,
        client_text(capture)
    );
    let len = capture.data.len();
    let _ = writeln!(
        out,
        "  buffer starts at 0 (including 0 out), {} free,",
        capture.bufsize.saturating_sub(len)
    );
    // HAProxy's buffers wrap 48 bytes before their end (room for its own header).
    let _ = writeln!(
        out,
        "  len {len}, wraps at {}, error at position {}",
        capture.bufsize.saturating_sub(48),
        capture.error_at
    );
    out.push_str("  \n");
    dump(&capture.data, out);
}

/// `show errors [<iid>|<proxy>] [request|response]`.
pub fn show_errors(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    let mut words = args.iter().map(String::as_str).peekable();
    let proxy = match words.peek() {
        Some(&("request" | "response")) | None => None,
        Some(&"-1") => {
            words.next();
            None
        }
        Some(&word) => {
            words.next();
            let by_id = word.parse::<u32>().ok();
            let found = process
                .frontends
                .iter()
                .map(|f| &f.plan.id)
                .chain(process.backends.iter().map(|b| &b.plan.id))
                .find(|id| match by_id {
                    Some(iid) => proxy_iid(id.uid) == iid,
                    None => id.name == word,
                });
            match found {
                Some(id) => Some(id.uid),
                None => {
                    out.push_str("No such proxy.\n");
                    return Flow::Continue;
                }
            }
        }
    };
    let (requests, responses) = match words.next() {
        Some("request") => (true, false),
        Some("response") => (false, true),
        _ => (true, true),
    };
    let mut now = String::new();
    write_date(SystemTime::now(), &mut now);
    let _ = writeln!(
        out,
        "Total events captured on [{now}] : {}",
        process.error_events.total()
    );
    // Proxies in id order; a `listen` section's request (frontend side) comes before its
    // response (backend side).
    let mut uids: Vec<u32> = process
        .frontends
        .iter()
        .map(|f| f.plan.id.uid)
        .chain(process.backends.iter().map(|b| b.plan.id.uid))
        .filter(|uid| proxy.is_none_or(|p| p == *uid))
        .collect();
    uids.sort_unstable();
    uids.dedup();
    for uid in uids {
        if requests
            && let Some(f) = process.frontends.iter().find(|f| f.plan.id.uid == uid)
            && let Some(capture) = f.invalid_request.latest()
        {
            write_capture("request", &f.plan.id.name, proxy_iid(uid), &capture, out);
        }
        if responses
            && let Some(b) = process.backends.iter().find(|b| b.plan.id.uid == uid)
            && let Some(capture) = b.invalid_response.latest()
        {
            write_capture("response", &b.plan.id.name, proxy_iid(uid), &capture, out);
        }
    }
    Flow::Continue
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_break_lines_and_escape_like_haproxy() {
        let mut data = b"GET /".to_vec();
        data.extend(std::iter::repeat_n(b'x', 100));
        data.extend_from_slice(b"=\\\t\x01\xff\"' HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut out = String::new();
        dump(&data, &mut out);
        let x = |n| "x".repeat(n);
        assert_eq!(
            out,
            format!(
                "  00000  GET /{}\n  00070+ {}=\\\\\\t\\x01\\xFF\"' HTTP/1.1\\r\\n\n  00123  Host: x\\r\\n\n  00132  \\r\\n\n",
                x(65),
                x(35)
            )
        );
    }
}
