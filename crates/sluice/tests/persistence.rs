//! End-to-end behaviour of cookie persistence (configuration.txt §4.2 `cookie`, server
//! `cookie`, `option persist`, `force-persist`, `ignore-persist`): which server a request
//! with a persistence cookie reaches, what the server sees of the cookie, and what the client
//! is told in `Set-Cookie` (and `Cache-control`). The expected fields are the ones HAProxy 2.6
//! sends for the same configuration.
//!
//! Every backend uses `balance first`, so a request without persistence always goes to the
//! first usable server and the tests need no statistics. Each in-test server answers with its
//! name, and sets the cookies and cache fields the request asks for (`X-Set-Cookie`,
//! `X-Cache-Control`), so one server serves every scenario.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, Log, Received, http_backend, one_shot};
use common::{Backend, Closed, fd_bind, frontend, sluice};
use std::net::SocketAddr;

/// A server answering `200` with its name as the body, echoing the response fields the
/// request asks for.
fn server(name: &'static str) -> (Backend, Log) {
    http_backend(move |req: &Received| {
        let mut fields = String::new();
        if let Some(v) = req.header("x-set-cookie") {
            fields.push_str(&format!("Set-Cookie: {v}\r\n"));
        }
        if let Some(v) = req.header("x-cache-control") {
            fields.push_str(&format!("Cache-Control: {v}\r\n"));
        }
        format!(
            "HTTP/1.1 200 OK\r\n{fields}Content-Length: {}\r\n\r\n{name}",
            name.len()
        )
    })
}

/// Two servers `one` and `two` and a proxy whose backend has `lines` before its servers;
/// `server_options` are appended to each server line (`cookie one`...).
struct Setup {
    _sluice: common::Sluice,
    addr: SocketAddr,
    _one: Backend,
    one: Log,
    _two: Backend,
    two: Log,
}

fn setup(lines: &str, one_options: &str, two_options: &str) -> Setup {
    let (one_backend, one) = server("one");
    let (two_backend, two) = server("two");
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten px\n    bind {}\n    balance first\n{lines}\n    server one {} {one_options}\n    server two {} {two_options}\n",
        fd_bind(&listener),
        one_backend.addr(),
        two_backend.addr(),
    );
    Setup {
        _sluice: sluice(&config).inherit(listener).start(),
        addr,
        _one: one_backend,
        one,
        _two: two_backend,
        two,
    }
}

/// Sends a request with the extra header lines `fields` (each ending in CRLF) and returns
/// the answer.
fn request(addr: SocketAddr, method: &str, fields: &str) -> String {
    let raw = format!(
        "{method} / HTTP/1.1\r\nHost: x\r\n{fields}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    match one_shot(addr, raw.as_bytes()) {
        Closed::Eof(data) | Closed::Reset(data) => String::from_utf8_lossy(&data).into_owned(),
        Closed::StillOpen(data) => panic!(
            "connection still open after: {}",
            String::from_utf8_lossy(&data)
        ),
    }
}

fn get(addr: SocketAddr, fields: &str) -> String {
    request(addr, "GET", fields)
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// Every value of the response fields named `name`, in order.
fn fields<'a>(answer: &'a str, name: &str) -> Vec<&'a str> {
    let head = answer.split_once("\r\n\r\n").map_or(answer, |(h, _)| h);
    head.lines()
        .skip(1)
        .filter_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
        .collect()
}

fn last(log: &Log) -> Received {
    log.lock().unwrap().last().cloned().unwrap()
}

#[test]
fn insert_sets_the_cookie_once_and_the_cookie_brings_the_client_back() {
    let s = setup(
        "    cookie SRV insert httponly secure domain .example.com attr SameSite=Lax",
        "cookie one",
        "cookie two",
    );
    // A new client goes to the first server and learns its cookie; the server's own cookie
    // of the same name is dropped, as the proxy owns it.
    let answer = get(s.addr, "X-Set-Cookie: SRV=mine\r\n");
    assert_eq!(body(&answer), "one");
    assert_eq!(
        fields(&answer, "set-cookie"),
        ["SRV=one; path=/; domain=.example.com; HttpOnly; Secure; SameSite=Lax"]
    );
    // The cookie names the second server: the request goes there, the server still sees the
    // cookie (no `indirect`), and the client is not told again.
    let answer = get(s.addr, "Cookie: a=1; SRV=two\r\n");
    assert_eq!(body(&answer), "two");
    assert!(fields(&answer, "set-cookie").is_empty(), "{answer}");
    assert_eq!(
        last(&s.two).header("cookie").as_deref(),
        Some("a=1; SRV=two")
    );
    // An unknown value is balanced and corrected.
    let answer = get(s.addr, "Cookie: SRV=three\r\n");
    assert_eq!(body(&answer), "one");
    assert_eq!(fields(&answer, "set-cookie").len(), 1);
    assert!(fields(&answer, "cache-control").is_empty());
}

#[test]
fn insert_indirect_nocache_hides_the_cookie_and_keeps_caches_out() {
    let s = setup(
        "    cookie SRV insert indirect nocache",
        "cookie one",
        "cookie two",
    );
    // A cacheable response carrying our cookie is made private.
    let answer = get(s.addr, "X-Cache-Control: max-age=60\r\n");
    assert_eq!(fields(&answer, "set-cookie"), ["SRV=one; path=/"]);
    assert_eq!(fields(&answer, "cache-control"), ["max-age=60", "private"]);
    // A response no cache would store is left alone.
    let answer = get(s.addr, "");
    assert_eq!(fields(&answer, "set-cookie"), ["SRV=one; path=/"]);
    assert!(fields(&answer, "cache-control").is_empty(), "{answer}");
    // The server never sees our cookie, only the application's.
    let answer = get(
        s.addr,
        "Cookie: a=1; SRV=two; b=2\r\nX-Cache-Control: max-age=60\r\n",
    );
    assert_eq!(body(&answer), "two");
    assert!(fields(&answer, "set-cookie").is_empty());
    assert_eq!(fields(&answer, "cache-control"), ["max-age=60"]);
    assert_eq!(last(&s.two).header("cookie").as_deref(), Some("a=1; b=2"));
    get(s.addr, "Cookie: SRV=two\r\n");
    assert_eq!(last(&s.two).header("cookie"), None);
}

#[test]
fn postonly_inserts_only_after_a_post_and_a_server_without_value_clears_the_cookie() {
    let s = setup("    cookie SRV insert postonly", "", "cookie two");
    let answer = get(s.addr, "");
    assert!(fields(&answer, "set-cookie").is_empty(), "{answer}");
    // The first server has no `cookie`: the client is told to forget any it had.
    let answer = request(s.addr, "POST", "");
    assert_eq!(body(&answer), "one");
    assert_eq!(
        fields(&answer, "set-cookie"),
        ["SRV=; Expires=Thu, 01-Jan-1970 00:00:01 GMT; path=/"]
    );
}

#[test]
fn prefix_mode_prefixes_the_application_cookie_and_strips_it_on_the_way_back() {
    let s = setup("    cookie JSESSIONID prefix", "cookie s1", "cookie s2");
    let answer = get(s.addr, "X-Set-Cookie: JSESSIONID=abc; path=/; HttpOnly\r\n");
    assert_eq!(body(&answer), "one");
    assert_eq!(
        fields(&answer, "set-cookie"),
        ["JSESSIONID=s1~abc; path=/; HttpOnly"]
    );
    let answer = get(s.addr, "Cookie: x=1; JSESSIONID=s2~abc; y=2\r\n");
    assert_eq!(body(&answer), "two");
    assert_eq!(
        last(&s.two).header("cookie").as_deref(),
        Some("x=1; JSESSIONID=abc; y=2")
    );
    // No cookie is inserted in prefix mode when the server sets none.
    assert!(fields(&answer, "set-cookie").is_empty());
}

#[test]
fn rewrite_mode_replaces_the_value_the_server_sets() {
    let s = setup("    cookie SRV rewrite", "cookie one", "cookie two");
    let answer = get(
        s.addr,
        "Cookie: SRV=two\r\nX-Set-Cookie: SRV=placeholder; path=/; Max-Age=60\r\n",
    );
    assert_eq!(body(&answer), "two");
    assert_eq!(
        fields(&answer, "set-cookie"),
        ["SRV=two; path=/; Max-Age=60"]
    );
    // Other cookies pass untouched.
    let answer = get(s.addr, "X-Set-Cookie: other=1\r\n");
    assert_eq!(fields(&answer, "set-cookie"), ["other=1"]);
}

#[test]
fn a_cookie_naming_a_disabled_server_is_balanced_unless_option_persist() {
    let s = setup(
        "    cookie SRV insert indirect",
        "cookie one",
        "cookie two disabled",
    );
    let answer = get(s.addr, "Cookie: SRV=two\r\n");
    assert_eq!(body(&answer), "one");
    assert_eq!(fields(&answer, "set-cookie"), ["SRV=one; path=/"]);
    assert!(s.two.lock().unwrap().is_empty());

    let s = setup(
        "    cookie SRV insert indirect\n    option persist",
        "cookie one",
        "cookie two disabled",
    );
    let answer = get(s.addr, "Cookie: SRV=two\r\n");
    assert_eq!(body(&answer), "two");
    assert!(fields(&answer, "set-cookie").is_empty(), "{answer}");
    // Without a cookie the disabled server is still out of the rotation.
    assert_eq!(body(&get(s.addr, "")), "one");
}

#[test]
fn force_persist_and_ignore_persist_follow_their_conditions() {
    let s = setup(
        "    cookie SRV insert indirect
    acl tester req.hdr(x-tester) -m found
    force-persist if tester
    ignore-persist if { path_end .png } || { req.hdr(x-ignore) -m found }",
        "cookie one",
        "cookie two disabled",
    );
    // The tester reaches the disabled server through its cookie; others do not.
    let answer = get(s.addr, "Cookie: SRV=two\r\nX-Tester: 1\r\n");
    assert_eq!(body(&answer), "two");
    assert!(fields(&answer, "set-cookie").is_empty());
    assert_eq!(body(&get(s.addr, "Cookie: SRV=two\r\n")), "one");
    // The first rule that applies wins: force-persist before ignore-persist.
    let answer = get(s.addr, "Cookie: SRV=two\r\nX-Tester: 1\r\nX-Ignore: 1\r\n");
    assert_eq!(body(&answer), "two");
    // Ignored persistence: balanced, no cookie inserted, ours still removed.
    let s = setup(
        "    cookie SRV insert indirect\n    ignore-persist if { req.hdr(x-ignore) -m found }",
        "cookie one",
        "cookie two",
    );
    let answer = get(s.addr, "Cookie: a=1; SRV=two\r\nX-Ignore: 1\r\n");
    assert_eq!(body(&answer), "one");
    assert!(fields(&answer, "set-cookie").is_empty(), "{answer}");
    assert_eq!(last(&s.one).header("cookie").as_deref(), Some("a=1"));
}

#[test]
fn use_server_wins_over_the_cookie() {
    let s = setup(
        "    cookie SRV insert indirect\n    use-server one if { req.hdr(x-one) -m found }",
        "cookie one",
        "cookie two",
    );
    let answer = get(s.addr, "Cookie: SRV=two\r\nX-One: 1\r\n");
    assert_eq!(body(&answer), "one");
    // As in HAProxy, a server chosen by rule counts as a direct access: no cookie.
    assert!(fields(&answer, "set-cookie").is_empty(), "{answer}");
    assert_eq!(last(&s.one).header("cookie"), None);
}

/// A proxy whose persisted server `one` refuses connections, with `lines` in its section.
fn refusing_setup(lines: &str) -> (common::Sluice, SocketAddr, Backend, Log) {
    let (two_backend, two) = server("two");
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten px\n    bind {}\n    timeout connect 100ms\n    retries 1\n    cookie SRV insert indirect\n    http-send-name-header X-Server\n{lines}\n    server one {} cookie one\n    server two {} cookie two\n",
        fd_bind(&listener),
        common::refused_addr(),
        two_backend.addr(),
    );
    (
        sluice(&config).inherit(listener).start(),
        addr,
        two_backend,
        two,
    )
}

#[test]
fn option_redispatch_moves_a_persisted_request_off_a_refusing_server() {
    let (_sluice, addr, _two, two) = refusing_setup("    option redispatch");
    // The last retry goes to the other server, which the client then sticks to.
    let answer = get(addr, "Cookie: SRV=one\r\n");
    assert_eq!(body(&answer), "two");
    assert_eq!(fields(&answer, "set-cookie"), ["SRV=two; path=/"]);
    assert_eq!(last(&two).header("x-server").as_deref(), Some("two"));

    // Without it, or when force-persist holds, the request fails.
    let (_sluice, addr, _two, _) = refusing_setup("");
    assert!(get(addr, "Cookie: SRV=one\r\n").starts_with("HTTP/1.1 503"));
    let (_sluice, addr, _two, _) =
        refusing_setup("    option redispatch\n    force-persist if { req.hdr(x-f) -m found }");
    assert!(get(addr, "Cookie: SRV=one\r\nX-F: 1\r\n").starts_with("HTTP/1.1 503"));
    assert_eq!(body(&get(addr, "Cookie: SRV=one\r\n")), "two");
}

/// A cookie date as HAProxy writes it: `seconds` since the epoch in 4-second units, five
/// base64 digits.
fn cookie_date(seconds: u64) -> String {
    const DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let units = (seconds + 3) >> 2;
    [24, 18, 12, 6, 0]
        .iter()
        .map(|shift| char::from(DIGITS[((units >> shift) & 63) as usize]))
        .collect()
}

#[test]
fn maxidle_and_maxlife_date_the_cookie_and_expire_it() {
    let s = setup(
        "    cookie SRV insert indirect maxidle 30m maxlife 8h",
        "cookie one",
        "cookie two",
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // A new client gets both dates.
    let answer = get(s.addr, "");
    let set = fields(&answer, "set-cookie");
    let value = set[0].strip_prefix("SRV=one|").unwrap();
    let (last, rest) = value.split_at(5);
    assert!(
        rest.starts_with('|') && rest[1..].starts_with(last),
        "{value}"
    );
    // A cookie seen ten minutes ago persists and is refreshed, keeping its first date.
    let first = cookie_date(now - 3600);
    let answer = get(
        s.addr,
        &format!("Cookie: SRV=two|{}|{first}\r\n", cookie_date(now - 600)),
    );
    assert_eq!(body(&answer), "two");
    let set = fields(&answer, "set-cookie");
    assert!(set[0].starts_with("SRV=two|") && set[0].ends_with(&format!("|{first}; path=/")));
    // Idle for 40 minutes, or first issued 9 hours ago: ignored, balanced, reissued.
    for (last, first) in [(now - 2400, now - 3600), (now - 60, now - 9 * 3600)] {
        let cookie = format!(
            "Cookie: SRV=two|{}|{}\r\n",
            cookie_date(last),
            cookie_date(first)
        );
        let answer = get(s.addr, &cookie);
        assert_eq!(body(&answer), "one", "{cookie}");
        assert!(fields(&answer, "set-cookie")[0].starts_with("SRV=one|"));
    }
}
