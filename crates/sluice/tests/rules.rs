//! End-to-end behaviour of ACLs and rules: content switching (`use_backend` with named and
//! computed backends, `use-server`), the answers the proxy makes itself (`deny`, `return`,
//! `redirect`, the monitor URI), head rewriting seen by the server (`set-header`,
//! `replace-path`...), response rules seen by the client, variables carried from the request
//! to the response, and `tcp-request` rules in both modes.
//!
//! Each in-test server answers with its own name, so the tests see where a request went, and
//! records what it received, so they see what the rules changed.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, Log, Received, http_backend, one_shot, status_of};
use common::{
    Backend, Closed, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_n, read_to_close,
    sluice, stays_silent,
};
use std::io::{BufReader, Write};
use std::net::SocketAddr;

/// A server answering `200` with its name as the body and in an `X-Server` field.
fn named_http(name: &'static str) -> (Backend, Log) {
    http_backend(move |_| {
        format!(
            "HTTP/1.1 200 OK\r\nX-Server: {name}\r\nServer: test\r\nContent-Length: {}\r\n\r\n{name}",
            name.len()
        )
    })
}

/// Starts Sluice with `config` (a `{bind}` placeholder for the frontend's bind line).
fn start(config: &str) -> (common::Sluice, SocketAddr) {
    let (listener, addr) = frontend();
    let text = config.replace("{bind}", &format!("bind {}", fd_bind(&listener)));
    (sluice(&text).inherit(listener).start(), addr)
}

/// Sends one request, closing after it, and returns the whole answer.
fn get(addr: SocketAddr, request: &str) -> String {
    match one_shot(addr, request.as_bytes()) {
        Closed::Eof(data) | Closed::Reset(data) => String::from_utf8_lossy(&data).into_owned(),
        Closed::StillOpen(data) => panic!(
            "connection still open after: {}",
            String::from_utf8_lossy(&data)
        ),
    }
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    let head = answer.split_once("\r\n\r\n").map_or(answer, |(h, _)| h);
    head.lines().skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn last(log: &Log) -> Received {
    log.lock().unwrap().last().cloned().unwrap()
}

#[test]
fn use_backend_switches_on_acls_and_computed_names() {
    let (app, _) = named_http("app");
    let (api, _) = named_http("api");
    let (img, _) = named_http("img");
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    acl is_api path_beg /api/
    acl is_img path_end .png .jpg
    acl token req.hdr(authorization) -m found
    use_backend api if is_api token
    use_backend img if is_img || {{ req.hdr(x-img) -m found }}
    use_backend %[req.hdr(x-backend),lower]
    default_backend app
backend app
    server s {}
backend api
    server s {}
backend img
    server s {}
",
        app.addr(),
        api.addr(),
        img.addr()
    );
    let (_p, addr) = start(&config);
    let cases = [
        (
            "GET /api/x HTTP/1.1\r\nHost: h\r\nAuthorization: t\r\n",
            "api",
        ),
        // Both ACLs must match (implicit AND).
        ("GET /api/x HTTP/1.1\r\nHost: h\r\n", "app"),
        ("GET /a.png HTTP/1.1\r\nHost: h\r\n", "img"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX-Img: 1\r\n", "img"),
        // A computed name picks the backend; an unknown one falls through to the default.
        ("GET / HTTP/1.1\r\nHost: h\r\nX-Backend: API\r\n", "api"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX-Backend: nowhere\r\n", "app"),
    ];
    for (request, expected) in cases {
        let answer = get(addr, &format!("{request}Connection: close\r\n\r\n"));
        assert_eq!(body(&answer), expected, "{request:?} → {answer}");
    }
}

#[test]
fn deny_return_redirect_and_monitor_are_answered_by_the_proxy() {
    let (app, log) = named_http("app");
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    monitor-uri /health
    monitor fail if {{ req.hdr(x-fail) -m found }}
    http-request deny if {{ path_beg /admin }}
    http-request deny deny_status 429 if {{ path_beg /slow }}
    http-request return status 201 content-type text/plain string pong hdr X-Path %[path] if {{ path /ping }}
    http-request redirect location /new code 301 if {{ path /old }}
    http-request redirect prefix https://example.com drop-query set-cookie SEEN=1 if {{ path_beg /pre }}
    http-request redirect scheme https if {{ path_beg /sch }}
    redirect location /moved if {{ path /legacy }}
    default_backend app
backend app
    server s {}
",
        app.addr()
    );
    let (_p, addr) = start(&config);
    let close = "Connection: close\r\n\r\n";

    let answer = get(addr, &format!("GET /health HTTP/1.1\r\nHost: h\r\n{close}"));
    assert_eq!(status_of(answer.as_bytes()), 200, "{answer}");
    let answer = get(
        addr,
        &format!("GET /health HTTP/1.1\r\nHost: h\r\nX-Fail: 1\r\n{close}"),
    );
    assert_eq!(status_of(answer.as_bytes()), 503, "{answer}");

    let answer = get(addr, &format!("GET /admin HTTP/1.1\r\nHost: h\r\n{close}"));
    assert_eq!(status_of(answer.as_bytes()), 403, "{answer}");
    let answer = get(addr, &format!("GET /slow HTTP/1.1\r\nHost: h\r\n{close}"));
    assert_eq!(status_of(answer.as_bytes()), 429, "{answer}");

    let answer = get(addr, &format!("GET /ping HTTP/1.1\r\nHost: h\r\n{close}"));
    assert!(answer.starts_with("HTTP/1.1 201 Created\r\n"), "{answer}");
    assert_eq!(header(&answer, "content-type"), Some("text/plain"));
    assert_eq!(header(&answer, "x-path"), Some("/ping"));
    assert_eq!(body(&answer), "pong");

    let answer = get(addr, &format!("GET /old HTTP/1.1\r\nHost: h\r\n{close}"));
    assert!(
        answer.starts_with("HTTP/1.1 301 Moved Permanently\r\n"),
        "{answer}"
    );
    assert_eq!(header(&answer, "location"), Some("/new"));
    assert_eq!(header(&answer, "cache-control"), None);

    let answer = get(
        addr,
        &format!("GET /pre/x?y=2 HTTP/1.1\r\nHost: h\r\n{close}"),
    );
    assert_eq!(status_of(answer.as_bytes()), 302, "{answer}");
    assert_eq!(
        header(&answer, "location"),
        Some("https://example.com/pre/x")
    );
    assert_eq!(header(&answer, "set-cookie"), Some("SEEN=1; path=/;"));
    assert_eq!(header(&answer, "cache-control"), Some("no-cache"));

    let answer = get(
        addr,
        &format!("GET /sch/p?q HTTP/1.1\r\nHost: www.h\r\n{close}"),
    );
    assert_eq!(header(&answer, "location"), Some("https://www.h/sch/p?q"));

    let answer = get(addr, &format!("GET /legacy HTTP/1.1\r\nHost: h\r\n{close}"));
    assert_eq!(header(&answer, "location"), Some("/moved"));

    assert!(log.lock().unwrap().is_empty(), "nothing reaches the server");
}

/// Sends a GET of each path on one connection, the last asking to close, and returns all
/// that came back until the proxy closed.
fn pipelined(addr: SocketAddr, paths: &[&str]) -> String {
    let mut requests = String::new();
    for (n, path) in paths.iter().enumerate() {
        let close = if n + 1 == paths.len() {
            "Connection: close\r\n"
        } else {
            ""
        };
        requests.push_str(&format!("GET {path} HTTP/1.1\r\nHost: h\r\n{close}\r\n"));
    }
    let mut s = connect(addr);
    s.write_all(requests.as_bytes()).unwrap();
    let Closed::Eof(data) = read_to_close(&mut s, GENEROUS) else {
        panic!("the last request asked to close the connection");
    };
    String::from_utf8_lossy(&data).into_owned()
}

/// The status of each answer in `text`, in order.
fn statuses(text: &str) -> Vec<&str> {
    text.match_indices("HTTP/1.1 ")
        .map(|(i, _)| &text[i + 9..i + 12])
        .collect()
}

/// A frontend `www` answering `/one` itself and denying `/deny`, with `options` (lines),
/// in front of a server named `app` whose log is returned.
fn answering_frontend(options: &str) -> (common::Sluice, SocketAddr, common::Backend, Log) {
    let (app, log) = named_http("app");
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
{options}    http-request return status 200 content-type text/plain string one if {{ path /one }}
    http-request deny if {{ path /deny }}
    default_backend app
backend app
    server s {}
",
        app.addr()
    );
    let (p, addr) = start(&config);
    (p, addr, app, log)
}

#[test]
fn answers_of_the_proxy_keep_the_connection_alive_deny_included() {
    let (_p, addr, _app, log) = answering_frontend("");
    // As in HAProxy 2.6, a denied request leaves the connection open for the next one.
    let text = pipelined(addr, &["/one", "/app", "/deny", "/last"]);
    assert_eq!(statuses(&text), ["200", "200", "403", "200"], "{text}");
    let denied = &text[text.find("HTTP/1.1 403").unwrap_or(0)..];
    let denied_head = &denied[..denied.find("\r\n\r\n").unwrap_or(denied.len())];
    assert!(
        !denied_head.to_ascii_lowercase().contains("connection:"),
        "the 403 says nothing of closing: {denied_head}"
    );
    let seen: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.request_line().to_owned())
        .collect();
    assert_eq!(seen, ["GET /app HTTP/1.1", "GET /last HTTP/1.1"]);
}

#[test]
fn request_rewrites_reach_the_server_in_order() {
    let (app, log) = named_http("app");
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    http-request set-header X-Proto http
    http-request add-header X-Client %[src]
    http-request del-header X-Secret
    http-request del-header x-debug- -m beg
    http-request replace-header User-Agent (.*)bot(.*) \\1robot\\2
    http-request replace-value Accept ^text/(.*)$ TEXT/\\1
    http-request set-header X-Seen-Proto %[req.hdr(x-proto)]
    http-request replace-path /legacy/(.*) /\\1
    http-request set-query a=1 if {{ path /q }}
    http-request set-method POST if {{ path /m }}
    http-request set-path /new%[path] if {{ path_beg /old }}
    default_backend app
backend app
    http-request set-header X-Backend app
    server s {}
",
        app.addr()
    );
    let (_p, addr) = start(&config);
    get(
        addr,
        "GET /legacy/a/b?x=1 HTTP/1.1\r\nHost: h\r\nX-Secret: s\r\nX-Debug-One: 1\r\nX-Debug-Two: 2\r\nUser-Agent: googlebot/2\r\nAccept: a/b, text/html\r\nConnection: close\r\n\r\n",
    );
    let seen = last(&log);
    assert_eq!(seen.request_line(), "GET /a/b?x=1 HTTP/1.1");
    assert_eq!(seen.header("x-proto").as_deref(), Some("http"));
    assert_eq!(seen.header("x-client").as_deref(), Some("127.0.0.1"));
    assert_eq!(seen.header("x-secret"), None);
    assert_eq!(seen.header("x-debug-one"), None);
    assert_eq!(seen.header("x-debug-two"), None);
    assert_eq!(seen.header("user-agent").as_deref(), Some("googlerobot/2"));
    assert_eq!(seen.header("accept").as_deref(), Some("a/b, TEXT/html"));
    // A later rule sees what an earlier one wrote.
    assert_eq!(seen.header("x-seen-proto").as_deref(), Some("http"));
    assert_eq!(seen.header("x-backend").as_deref(), Some("app"));

    get(
        addr,
        "GET /q HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(last(&log).request_line(), "GET /q?a=1 HTTP/1.1");
    get(
        addr,
        "GET /m HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(last(&log).request_line(), "POST /m HTTP/1.1");
    get(
        addr,
        "GET /old/x?k HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(last(&log).request_line(), "GET /new/old/x?k HTTP/1.1");
}

#[test]
fn computed_values_cannot_inject_lines_and_oversized_rewrites_fail_with_500() {
    // Both sides: a request or a response rewrite that does not fit is the proxy's failure.
    let (app, log) = named_http("app");
    let config = format!(
        "global
    tune.bufsize 2048
    tune.maxrewrite 512
{HTTP_DEFAULTS}
frontend www
    {{bind}}
    http-request set-header X-Echo %[url_param(v),url_dec]
    http-request set-header X-Big %[req.hdr(x-in)]%[req.hdr(x-in)]%[req.hdr(x-in)] if {{ req.hdr(x-in) -m found }}
    http-request set-var(txn.out) req.hdr(x-out)
    http-response set-header X-Big %[var(txn.out)]%[var(txn.out)]%[var(txn.out)]%[var(txn.out)] if {{ var(txn.out) -m found }}
    default_backend app
backend app
    server s {}
",
        app.addr()
    );
    let (p, addr) = start(&config);
    // CR and LF from a decoded parameter are escaped, never written as a line break.
    let answer = get(
        addr,
        "GET /?v=a%0d%0aX-Evil:%201 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(answer.as_bytes()), 200, "{answer}");
    let seen = last(&log);
    assert_eq!(seen.header("x-evil"), None, "{}", seen.head);
    assert!(
        seen.header("x-echo").unwrap().starts_with('a'),
        "{}",
        seen.head
    );
    // A head that no longer fits in the buffer (past the maxrewrite reserve) is refused.
    let big = "y".repeat(600);
    let answer = get(
        addr,
        &format!("GET / HTTP/1.1\r\nHost: h\r\nX-In: {big}\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(status_of(answer.as_bytes()), 500, "{answer}");
    assert_eq!(
        log.lock().unwrap().len(),
        1,
        "the refused request was not forwarded"
    );
    let answer = get(
        addr,
        &format!("GET / HTTP/1.1\r\nHost: h\r\nX-Out: {big}\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(status_of(answer.as_bytes()), 500, "{answer}");
    assert!(!answer.contains("X-Big"), "{answer}");
    // Each failure is a failed rewrite (`wrew`, 84th field) and an internal error (`eint`,
    // 95th), counted before the 500 is sent: a request's on the frontend only, a
    // response's on the frontend, the backend and the server too, as HAProxy 2.6 counts.
    let stat = p.cli("show stat");
    let failures = |prefix: &str| {
        let row = stat.lines().find(|l| l.starts_with(prefix)).unwrap();
        let fields: Vec<&str> = row.split(',').collect();
        (fields[83].to_owned(), fields[94].to_owned())
    };
    let counted = |n: &str| (n.to_owned(), n.to_owned());
    assert_eq!(failures("www,FRONTEND,"), counted("2"), "{stat}");
    assert_eq!(failures("app,BACKEND,"), counted("1"), "{stat}");
    assert_eq!(failures("app,s,"), counted("1"), "{stat}");
}

/// `strict-mode off`: a rewrite that does not fit is ignored (counted in `wrew` only) and the
/// message goes on; `strict-mode on` brings the 500 back for the rules after it.
#[test]
fn strict_mode_off_ignores_rewrites_that_do_not_fit() {
    let (app, log) = named_http("app");
    let config = format!(
        "global
    tune.bufsize 2048
    tune.maxrewrite 512
{HTTP_DEFAULTS}
frontend www
    {{bind}}
    http-request strict-mode off
    http-request set-header X-Big %[req.hdr(x-in)]%[req.hdr(x-in)]%[req.hdr(x-in)] if {{ req.hdr(x-in) -m found }}
    http-request set-header X-After yes
    http-request strict-mode on if {{ path /strict }}
    http-request set-header X-Big2 %[req.hdr(x-in)]%[req.hdr(x-in)]%[req.hdr(x-in)] if {{ path /strict }}
    http-response strict-mode off
    http-response set-header X-Resp ok
    default_backend app
backend app
    server s {}
",
        app.addr()
    );
    let (p, addr) = start(&config);
    let big = "y".repeat(600);
    let answer = get(
        addr,
        &format!("GET / HTTP/1.1\r\nHost: h\r\nX-In: {big}\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(status_of(answer.as_bytes()), 200, "{answer}");
    let seen = last(&log);
    assert_eq!(seen.header("x-big"), None, "{}", seen.head);
    assert_eq!(
        seen.header("x-after").as_deref(),
        Some("yes"),
        "{}",
        seen.head
    );
    let answer = get(
        addr,
        &format!("GET /strict HTTP/1.1\r\nHost: h\r\nX-In: {big}\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(status_of(answer.as_bytes()), 500, "{answer}");
    // Three failed rewrites (`wrew`): one ignored in each request, then the strict one,
    // the only internal error (`eint`).
    let stat = p.cli("show stat");
    let row = stat
        .lines()
        .find(|l| l.starts_with("www,FRONTEND,"))
        .unwrap();
    let fields: Vec<&str> = row.split(',').collect();
    assert_eq!((fields[83], fields[94]), ("3", "1"), "{row}");
}

#[test]
fn response_rules_run_backend_first_and_see_request_variables() {
    let (app, _) = named_http("app");
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    http-request set-var(txn.path) path
    http-response set-header X-Order %[res.hdr(x-order)],front
    http-response set-header X-Path %[var(txn.path)]
    http-response set-header X-Method %[method]
    default_backend app
backend app
    http-response set-header X-Order back
    http-response del-header Server
    http-response set-status 299 reason Fine if {{ var(txn.path) -m str /fine }}
    http-response deny if {{ var(txn.path) -m str /hide }}
    server s {}
",
        app.addr()
    );
    let (_p, addr) = start(&config);
    let answer = get(
        addr,
        "GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(answer.as_bytes()), 200, "{answer}");
    assert_eq!(header(&answer, "x-order"), Some("back,front"));
    assert_eq!(header(&answer, "x-path"), Some("/x"));
    assert_eq!(header(&answer, "x-method"), Some("GET"));
    assert_eq!(header(&answer, "server"), None);
    assert_eq!(header(&answer, "x-server"), Some("app"));
    assert_eq!(body(&answer), "app");

    let answer = get(
        addr,
        "GET /fine HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 299 Fine\r\n"), "{answer}");
    let answer = get(
        addr,
        "GET /hide HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(answer.as_bytes()), 502, "{answer}");
    assert!(!answer.contains("x-server"), "{answer}");
}

#[test]
fn variables_do_not_leak_between_requests_of_a_connection() {
    let (app, _) = named_http("app");
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    http-request set-var(txn.first) str(yes) if {{ path /set }}
    http-request set-var(sess.count) str(seen) if {{ path /set }}
    http-response set-header X-Txn %[var(txn.first)]
    http-response set-header X-Sess %[var(sess.count)]
    default_backend app
backend app
    server s {}
",
        app.addr()
    );
    let (_p, addr) = start(&config);
    let s = connect(addr);
    let mut writer = s.try_clone().unwrap();
    let mut reader = BufReader::new(s);
    writer
        .write_all(b"GET /set HTTP/1.1\r\nHost: h\r\n\r\nGET /other HTTP/1.1\r\nHost: h\r\n\r\n")
        .unwrap();
    let first = common::http::read_message(&mut reader).unwrap();
    let second = common::http::read_message(&mut reader).unwrap();
    assert_eq!(first.header("x-txn").as_deref(), Some("yes"));
    assert_eq!(first.header("x-sess").as_deref(), Some("seen"));
    // txn. ends with its transaction, sess. lives as long as the connection.
    // An unset variable renders as nothing, like any missing sample outside a log line.
    assert_eq!(second.header("x-txn").as_deref(), Some(""));
    assert_eq!(second.header("x-sess").as_deref(), Some("seen"));
}

#[test]
fn use_server_pins_requests_and_falls_back_when_the_server_is_unusable() {
    let (one, _) = named_http("one");
    let (two, _) = named_http("two");
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    default_backend b
backend b
    balance first
    use-server two if {{ req.hdr(x-pin) -m str two }}
    use-server off if {{ req.hdr(x-pin) -m str off }}
    server one {}
    server two {}
    server off {} disabled
",
        one.addr(),
        two.addr(),
        two.addr()
    );
    let (_p, addr) = start(&config);
    for _ in 0..3 {
        let answer = get(
            addr,
            "GET / HTTP/1.1\r\nHost: h\r\nX-Pin: two\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(body(&answer), "two");
    }
    let answer = get(
        addr,
        "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(body(&answer), "one");
    let answer = get(
        addr,
        "GET / HTTP/1.1\r\nHost: h\r\nX-Pin: off\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(body(&answer), "one", "a disabled server is skipped");
}

#[test]
fn tcp_request_connection_reject_closes_before_anything_is_read() {
    let (app, log) = named_http("app");
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    tcp-request connection reject if {{ src 127.0.0.0/8 }}
    default_backend app
backend app
    server s {}
",
        app.addr()
    );
    let (p, addr) = start(&config);
    let answer = one_shot(addr, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert!(answer.is_closed());
    assert!(answer.data().is_empty(), "{:?}", answer.data());
    assert!(log.lock().unwrap().is_empty());
    drop(p);
}

#[test]
fn content_rules_that_judged_the_data_for_good_let_the_session_go_at_once() {
    // Inspect delays of an hour, and rules whose conditions the first four bytes decide for
    // good (a whole prefix that does not match): as HAProxy does, the session goes on at once,
    // through the frontend's rules, the backend's, and the backend's response rules, rather
    // than at the end of each delay (the answer would then never come within the harness's
    // read timeout). The client keeps its side open: no end of stream ends the waits.
    let echo = Backend::echo();
    let config = format!(
        "{TCP_DEFAULTS}
frontend f
    {{bind}}
    tcp-request inspect-delay 1h
    tcp-request content reject if {{ req.payload(0,4) -m str QUIT }}
    default_backend echo
backend echo
    tcp-request inspect-delay 1h
    tcp-request content reject if {{ req.payload(0,4) -m str STOP }}
    tcp-response inspect-delay 1h
    tcp-response content reject if {{ res.payload(0,4) -m str BAD! }}
    server s {}
",
        echo.addr()
    );
    let (_p, addr) = start(&config);
    let mut s = connect(addr);
    s.write_all(b"ping").unwrap();
    assert_eq!(read_n(&mut s, 4), b"ping");
    // A rule still missing its data does wait: three bytes cannot say whether they start
    // "QUIT", and the fourth decides.
    let mut s = connect(addr);
    s.write_all(b"QUI").unwrap();
    assert!(stays_silent(&mut s, std::time::Duration::from_millis(300)));
    s.write_all(b"T").unwrap();
    assert!(read_to_close(&mut s, GENEROUS).is_closed());
    assert_eq!(echo.accepted(), 1);
}

#[test]
fn tcp_mode_content_rules_and_use_backend_read_the_first_bytes() {
    let alpha = Backend::named("alpha");
    let beta = Backend::named("beta");
    let echo = Backend::echo();
    let config = format!(
        "{TCP_DEFAULTS}
frontend f
    {{bind}}
    tcp-request inspect-delay 5s
    tcp-request content reject if {{ req.len gt 100 }}
    tcp-request content accept if {{ req.len ge 4 }}
    use_backend beta if {{ req.len ge 6 }}
    use_backend echo if {{ req.len eq 5 }}
    default_backend alpha
backend alpha
    server s {}
backend beta
    server s {}
backend echo
    server s {}
",
        alpha.addr(),
        beta.addr(),
        echo.addr()
    );
    let (_p, addr) = start(&config);

    // Four bytes decide the accept; the use_backend rules then see four bytes: the default.
    let mut s = connect(addr);
    s.write_all(b"abcd").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let Closed::Eof(data) = read_to_close(&mut s, GENEROUS) else {
        panic!("expected the server's answer then a close");
    };
    assert!(String::from_utf8_lossy(&data).contains("alpha"));

    // Sent in one piece, five bytes reach the echo server untouched, first bytes included.
    let mut s = connect(addr);
    s.write_all(b"hello").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let Closed::Eof(data) = read_to_close(&mut s, GENEROUS) else {
        panic!("expected the echo then a close");
    };
    assert_eq!(data, b"hello");

    // Two bytes then the client stops sending: inspection ends, the default backend serves.
    let mut s = connect(addr);
    s.write_all(b"ab").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let Closed::Eof(data) = read_to_close(&mut s, GENEROUS) else {
        panic!("expected the server's answer then a close");
    };
    assert!(String::from_utf8_lossy(&data).contains("alpha"));

    // Too much data at once is rejected: closed without a byte.
    let mut s = connect(addr);
    s.write_all(&[b'x'; 200]).unwrap();
    let closed = read_to_close(&mut s, GENEROUS);
    assert!(closed.is_closed());
    assert!(closed.data().is_empty());
}

/// A minimal TLS 1.2 ClientHello record naming `sni` in its server_name extension.
fn client_hello(sni: &str) -> Vec<u8> {
    let name = sni.as_bytes();
    let mut server_name = vec![0u8];
    server_name.extend_from_slice(&(name.len() as u16).to_be_bytes());
    server_name.extend_from_slice(name);
    let mut extension = vec![0, 0];
    extension.extend_from_slice(&(server_name.len() as u16 + 2).to_be_bytes());
    extension.extend_from_slice(&(server_name.len() as u16).to_be_bytes());
    extension.extend_from_slice(&server_name);
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7u8; 32]);
    body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
    body.extend_from_slice(&(extension.len() as u16).to_be_bytes());
    body.extend_from_slice(&extension);
    let mut handshake = vec![1, 0];
    handshake.extend_from_slice(&(body.len() as u16).to_be_bytes());
    handshake.extend_from_slice(&body);
    let mut record = vec![0x16, 3, 1];
    record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
    record.extend_from_slice(&handshake);
    record
}

#[test]
fn tls_passthrough_is_routed_by_sni_without_terminating_tls() {
    let alpha = Backend::echo();
    let beta = Backend::named("beta");
    let config = format!(
        "{TCP_DEFAULTS}
frontend tls
    {{bind}}
    tcp-request inspect-delay 5s
    tcp-request content accept if {{ req.ssl_hello_type 1 }}
    use_backend alpha if {{ req.ssl_sni -i alpha.example.com }}
    default_backend beta
backend alpha
    server s {}
backend beta
    server s {}
",
        alpha.addr(),
        beta.addr()
    );
    let (_p, addr) = start(&config);
    let hello = client_hello("ALPHA.example.com");
    // Sent in two writes (which may reach the proxy as one or two pieces): the proxy waits
    // until the whole record is there, then forwards every byte to the backend its SNI names.
    let mut s = connect(addr);
    s.write_all(&hello[..20]).unwrap();
    s.flush().unwrap();
    std::thread::yield_now();
    s.write_all(&hello[20..]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let Closed::Eof(data) = read_to_close(&mut s, GENEROUS) else {
        panic!("expected the echo then a close");
    };
    assert_eq!(data, hello);

    let mut s = connect(addr);
    s.write_all(&client_hello("other.example.com")).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let Closed::Eof(data) = read_to_close(&mut s, GENEROUS) else {
        panic!("expected the server's answer then a close");
    };
    assert!(String::from_utf8_lossy(&data).contains("beta"));
}

#[test]
fn balance_hash_sends_one_key_to_one_server() {
    let servers = [named_http("a"), named_http("b"), named_http("c")];
    let lines: String = servers
        .iter()
        .enumerate()
        .map(|(i, (s, _))| format!("    server s{i} {}\n", s.addr()))
        .collect();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    default_backend b
backend b
    balance hash req.hdr(x-user),lower
    hash-type consistent
{lines}"
    );
    let (_p, addr) = start(&config);
    let served_by = |user: &str| {
        let answer = get(
            addr,
            &format!("GET / HTTP/1.1\r\nHost: h\r\nX-User: {user}\r\nConnection: close\r\n\r\n"),
        );
        body(&answer).to_owned()
    };
    let mut seen = std::collections::BTreeSet::new();
    for n in 0..30 {
        let user = format!("user{n}");
        let first = served_by(&user);
        // The converter runs before hashing: case does not matter.
        assert_eq!(served_by(&user.to_uppercase()), first, "{user}");
        assert_eq!(served_by(&user), first, "{user}");
        seen.insert(first);
    }
    assert!(
        seen.len() > 1,
        "thirty keys spread over the servers: {seen:?}"
    );
}

#[test]
fn retry_on_sends_a_bodiless_request_again_after_the_failures_it_names() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // The first request gets a 503, the second nothing at all (a close), the third a 200.
    let seen = std::sync::Arc::new(AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&seen);
    let flaky = Backend::start(move |s| {
        let mut writer = s.try_clone().unwrap();
        let mut reader = BufReader::new(s);
        while common::http::read_message(&mut reader).is_some() {
            let answer = match count.fetch_add(1, Ordering::SeqCst) % 3 {
                0 => "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n",
                1 => return,
                _ => "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            };
            if writer.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    });
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    default_backend b
backend b
    retries 3
    retry-on 503 empty-response
    server s {}
",
        flaky.addr()
    );
    let (_p, addr) = start(&config);
    let answer = get(
        addr,
        "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(answer.as_bytes()), 200, "{answer}");
    assert_eq!(seen.load(Ordering::SeqCst), 3);
    // A request with a body is never replayed: the 503 reaches the client.
    let answer = get(
        addr,
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
    );
    assert_eq!(status_of(answer.as_bytes()), 503, "{answer}");
    assert_eq!(seen.load(Ordering::SeqCst), 4);
}

#[test]
fn silent_drop_resets_the_connection_at_each_tcp_request_stage() {
    let (app, log) = named_http("app");
    for (stage, defaults) in [
        ("connection", HTTP_DEFAULTS),
        ("session", HTTP_DEFAULTS),
        ("content", HTTP_DEFAULTS),
        ("content", TCP_DEFAULTS),
    ] {
        // TCP content rules wait for the client's bytes, so the drop comes after its write
        // (HTTP ones run once the head was read).
        let cond = if stage == "content" && defaults == TCP_DEFAULTS {
            "req.len gt 0"
        } else {
            "src 127.0.0.0/8"
        };
        let config = format!(
            "{defaults}
frontend fe
    {{bind}}
    tcp-request inspect-delay 5s
    tcp-request {stage} silent-drop if {{ {cond} }}
    default_backend app
backend app
    server s {}
",
            app.addr()
        );
        let (p, addr) = start(&config);
        let mut c = connect(addr);
        // Before any content, the client sends nothing: a plain close would be an end of
        // stream, where the drop is a reset.
        if stage == "content" {
            c.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
        }
        c.set_read_timeout(Some(GENEROUS)).unwrap();
        let read = std::io::Read::read(&mut c, &mut [0u8; 64]);
        assert!(
            matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "tcp-request {stage} ({defaults}): {read:?}"
        );
        // HAProxy counts a drop as a denied request (`dreq`, the 11th field), whatever the
        // stage, and not as a denied connection or session.
        let stat = p.cli("show stat");
        let row = stat
            .lines()
            .find(|l| l.starts_with("fe,FRONTEND,"))
            .unwrap();
        assert_eq!(row.split(',').nth(10), Some("1"), "{stage}: {row}");
        drop(p);
    }
    assert!(
        log.lock().unwrap().is_empty(),
        "a dropped client reached the server"
    );
}

#[test]
fn tcp_response_silent_drop_resets_the_clients_connection() {
    let echo = Backend::echo();
    let config = format!(
        "{TCP_DEFAULTS}
listen fe
    {{bind}}
    tcp-response inspect-delay 5s
    tcp-response content silent-drop if {{ res.len gt 0 }}
    server s {}
",
        echo.addr()
    );
    let (p, addr) = start(&config);
    let mut c = connect(addr);
    // The rule waits for the server's first bytes, the echo of these: the drop comes after
    // the client's write.
    c.write_all(b"ping").unwrap();
    c.set_read_timeout(Some(GENEROUS)).unwrap();
    let read = std::io::Read::read(&mut c, &mut [0u8; 64]);
    assert!(
        matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "{read:?}"
    );
    // A denied request (`dreq`, the 11th field), as HAProxy counts drops, not a denied
    // response; counted before the client sees its reset.
    let stat = p.cli("show stat");
    let row = stat
        .lines()
        .find(|l| l.starts_with("fe,FRONTEND,"))
        .unwrap();
    let fields: Vec<&str> = row.split(',').collect();
    assert_eq!((fields[10], fields[11]), ("1", "0"), "{row}");
}

#[test]
fn under_http_server_close_the_proxys_own_answers_keep_the_client() {
    let (_p, addr, _app, _log) = answering_frontend("    option http-server-close\n");
    // `http-server-close` ends server connections only, as in HAProxy 2.6.
    let text = pipelined(addr, &["/one", "/deny", "/app"]);
    assert_eq!(statuses(&text), ["200", "403", "200"], "{text}");
}

/// `setenv`, `presetenv`, `unsetenv` and `resetenv` change the environment from the next
/// line on: `"${NAME}"` in later lines and the `env()` fetch at run time see it.
#[test]
fn global_environment_changes_reach_later_lines_and_the_env_fetch() {
    let config = format!(
        "global
    resetenv HOME
    setenv GREETING hello
    presetenv GREETING ignored
    presetenv SLUICE_TEST_PLACE world
    setenv DROPPED 1
    unsetenv DROPPED
{HTTP_DEFAULTS}
frontend www
    {{bind}}
    http-request return status 200 content-type text/plain lf-string \"${{GREETING}} %[env(SLUICE_TEST_PLACE)] [%[env(DROPPED)]] [%[env(PATH)]]\"
"
    );
    let (_p, addr) = start(&config);
    let answer = get(
        addr,
        "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    // PATH went with `resetenv`.
    assert!(answer.ends_with("\r\n\r\nhello world [] []"), "{answer}");
}

/// `hostname`: the system's host name, as the kernel has it.
#[test]
fn the_hostname_fetch_is_the_systems_name() {
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    http-request return status 200 content-type text/plain lf-string \"[%[hostname]]\"
"
    );
    let (_p, addr) = start(&config);
    let answer = get(
        addr,
        "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert!(!name.trim().is_empty());
    assert!(
        answer.ends_with(&format!("\r\n\r\n[{}]", name.trim())),
        "{answer}"
    );
}

/// `cur_server_timeout` and `cur_tunnel_timeout` without a `set-timeout`: the backend's own
/// timeouts, as the manual says ("equal to be_server_timeout unless a set-timeout rule has
/// been applied"; HAProxy 2.6 read 0 there).
#[test]
fn current_timeouts_default_to_the_backend_s() {
    let config = format!(
        "{HTTP_DEFAULTS}
listen www
    {{bind}}
    timeout tunnel 3s
    http-request set-timeout server 4s if {{ path /set }}
    http-request return status 200 content-type text/plain lf-string \"[%[cur_server_timeout] %[cur_tunnel_timeout]]\"
"
    );
    let (_p, addr) = start(&config);
    let request = |path: &str| {
        get(
            addr,
            &format!("GET {path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"),
        )
    };
    let answer = request("/");
    assert!(answer.ends_with("\r\n\r\n[30000 3000]"), "{answer}");
    let answer = request("/set");
    assert!(answer.ends_with("\r\n\r\n[4000 3000]"), "{answer}");
}

/// The other timeouts and the retries, as the manual's fetches of later HAProxy versions
/// read them: a backend's `timeout queue` and `timeout tarpit` default to its `timeout
/// connect`, a frontend without servers has no tarpit delay, and the current values are the
/// configured ones (no rule of Sluice changes them).
#[test]
fn configured_timeouts_and_retries_are_read_from_the_stream_s_proxies() {
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    timeout client 7s
    http-request return status 200 content-type text/plain lf-string \"[%[fe_tarpit_timeout] %[cur_client_timeout] %[cur_tarpit_timeout]]\" if {{ path /front }}
    use_backend queued if {{ path /queued }}
    default_backend plain
backend plain
    timeout connect 2s
    http-request return status 200 content-type text/plain lf-string \"[%[be_connect_timeout] %[be_queue_timeout] %[be_tarpit_timeout] %[cur_connect_timeout] %[cur_queue_timeout] %[cur_tarpit_timeout] %[be_max_retries] %[cur_max_retries]]\"
backend queued
    timeout connect 2s
    timeout queue 5s
    timeout tarpit 6s
    retries 1
    http-request return status 200 content-type text/plain lf-string \"[%[be_queue_timeout] %[be_tarpit_timeout] %[cur_tarpit_timeout] %[be_max_retries]]\"
"
    );
    let (_p, addr) = start(&config);
    let request = |path: &str| {
        get(
            addr,
            &format!("GET {path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"),
        )
    };
    let answer = request("/front");
    assert!(answer.ends_with("\r\n\r\n[0 7000 0]"), "{answer}");
    let answer = request("/");
    assert!(
        answer.ends_with("\r\n\r\n[2000 2000 2000 2000 2000 2000 3 3]"),
        "{answer}"
    );
    let answer = request("/queued");
    assert!(answer.ends_with("\r\n\r\n[5000 6000 6000 1]"), "{answer}");
}

/// `dst_conn` counts every connection open on the socket, from its accept (one that sent
/// nothing yet counts) to its end.
#[test]
fn dst_conn_counts_the_socket_s_connections_up_and_down() {
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    http-request return status 200 content-type text/plain lf-string \"%[dst_conn]\"
"
    );
    let (_p, addr) = start(&config);
    let count = || {
        body(&get(
            addr,
            "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
        ))
        .to_owned()
    };
    assert_eq!(count(), "1");
    let silent = connect(addr);
    assert!(
        common::wait_until(GENEROUS, || count() == "2"),
        "the silent connection is counted"
    );
    drop(silent);
    assert!(
        common::wait_until(GENEROUS, || count() == "1"),
        "and counted down once closed"
    );
}
