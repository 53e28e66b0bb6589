//! Hostile configuration text never panics the reader: thousands of pseudo-random lines made
//! of the characters that matter to the lexer and the keyword parsers (quotes, escapes, `$`,
//! `#`, dots, colons, digits, keywords) go through the whole `plan::check` pipeline.
//!
//! The generator is a fixed-seed xorshift, so a failure is reproducible from its seed.
#![allow(clippy::unwrap_used)]

use sluice_config::cond::CondContext;
use sluice_config::plan;
use sluice_config::reader::Source;
use std::sync::Arc;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const PIECES: &[&str] = &[
    "global",
    "defaults",
    "frontend",
    "backend",
    "listen",
    "bind",
    "server",
    "timeout",
    "client",
    "connect",
    "maxconn",
    "mode",
    "tcp",
    "stats",
    "socket",
    "option",
    "no",
    "from",
    ".if",
    ".elif",
    ".else",
    ".endif",
    ".alert",
    "defined(",
    "streq(",
    ")",
    "&&",
    "||",
    "!",
    "\"",
    "'",
    "\\",
    "\\x",
    "\\x4",
    "$",
    "${",
    "}",
    "${A-",
    "[*]",
    "#",
    " ",
    "\t",
    ":",
    "::",
    "[",
    "]",
    "@",
    "fd@",
    "unix@",
    "ipv6@",
    "abns@",
    "1",
    "0",
    "65536",
    "-1",
    "10s",
    "99999999999d",
    "k",
    "*",
    ",",
    "-",
    "a",
    "zz",
    "\u{e9}",
    "\r",
    "weight",
    "256",
    "disabled",
    "backup",
    "accept-proxy",
    "send-proxy",
    "send-proxy-v2",
    "no-send-proxy",
    "acl",
    "if",
    "unless",
    "{",
    "http-request",
    "http-response",
    "tcp-request",
    "content",
    "use_backend",
    "use-server",
    "redirect",
    "location",
    "set-header",
    "deny",
    "return",
    "status",
    "string",
    "lf-string",
    "%[",
    "%[src]",
    "path_beg",
    "hdr(",
    "req.hdr(host)",
    ",lower",
    ",map(",
    "-m",
    "-i",
    "-f",
    "set-var(txn.x)",
    "log",
    "log-format",
    "%ci",
    "%{+Q}",
    "cookie",
    "insert",
    "check",
    "inter",
    "http-check",
    "expect",
    "retry-on",
    "balance",
    "hash",
    "userlist",
    "user",
    "password",
    "capture",
    "ring",
    "ring@",
    "description",
    "format",
    "maxlen",
    "size",
    "logasap",
    "error-log-format",
    "%[fc_err]",
    "master-worker",
    "expose-fd",
    "listeners",
];

fn random_config(rng: &mut XorShift) -> String {
    let mut text = String::new();
    let lines = 1 + rng.next() % 20;
    for _ in 0..lines {
        let words = rng.next() % 8;
        for _ in 0..words {
            text.push_str(rng.pick(PIECES));
            if rng.next().is_multiple_of(3) {
                text.push(' ');
            }
        }
        text.push('\n');
    }
    text
}

#[test]
fn random_configurations_never_panic() {
    let env = |name: &str| (name == "A").then(|| "x y".to_owned());
    let ctx = CondContext {
        lookup: &env,
        features: &["THREAD"],
        enabled: &[],
        version: "2.6",
    };
    for seed in 1..=6000u64 {
        let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let source = Source {
            name: Arc::from(format!("seed-{seed}.cfg")),
            text: random_config(&mut rng),
        };
        // The outcome does not matter; reaching the end of every input does.
        let checked = plan::check(std::slice::from_ref(&source), &ctx);
        assert!(checked.plan.is_some() || checked.diagnostics.iter().any(|d| d.is_fatal()));
    }
}
