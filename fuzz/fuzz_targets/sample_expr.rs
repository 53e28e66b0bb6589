//! The sample language of rules, ACLs and log formats, from configuration text, compiled and
//! evaluated against a stream. The first byte picks what the first line is (an expression, an
//! ACL declaration, a log format); the rest of the input, when it is a complete request head,
//! is the stream's request. Compiling must refuse bad text with an error, and evaluating
//! must never panic, whatever the request holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_http::{Limits, Parse, parse_request};
use sluice_sample::testing::{TestCtx, words};
use sluice_sample::{AclSet, Condition, Expr, LogFormat, MapStore};

/// Text that names a device or a kernel file: a map or pattern file there would block the
/// fuzzer on a read that never ends, which is no finding.
fn names_special_file(text: &str) -> bool {
    ["dev/", "proc/", "sys/"].iter().any(|p| text.contains(p))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(rest) = std::str::from_utf8(rest) else {
        return;
    };
    let (text, request) = rest.split_once('\n').unwrap_or((rest, ""));
    if names_special_file(text) {
        return;
    }
    let mut ctx = TestCtx::new();
    ctx.req_buf = request.as_bytes().to_vec();
    if let Ok(Parse::Complete(head)) = parse_request(&ctx.req_buf, &Limits::default()) {
        ctx.req = Some(head);
        ctx.buffered = Some(ctx.req_buf.len());
        ctx.body = Some(ctx.req_buf.clone());
    }
    let maps = MapStore::new();
    match mode % 3 {
        0 => {
            if let Ok(expr) = Expr::parse(text, &maps) {
                expr.eval(&ctx);
            }
        }
        1 => {
            let mut acls = AclSet::new(maps);
            let declared = words(text);
            if acls.add(&declared).is_ok()
                && let Some(name) = declared.first()
                && let Ok(cond) = Condition::parse(&["if".to_owned(), name.clone()], &acls)
            {
                cond.eval(&ctx);
                cond.decide(&ctx);
            }
        }
        _ => {
            let _ = LogFormat::parse(text, &maps);
        }
    }
});
