//! End-to-end behaviour of the less common HTTP rules: `userlist` sections with
//! `http-request auth` and the `http_auth*` fetches, `http-request tarpit` and its delay,
//! `http-after-response` rules over served and proxy-made answers, and captures shown by
//! fetches and by the `option httplog` line, `normalize-uri`, and `tcp-response content`
//! rules over the first bytes of a `mode tcp` server.
//!
//! Answers are compared with what HAProxy 2.6 sends for the same configuration (realm
//! quoting, the status of a tarpit, the keep-alive after a 401).
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, Log, http_backend, one_shot};
use common::{
    Backend, Closed, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_to_close, sluice,
};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A server answering `200` with its name as the body.
fn named_http(name: &'static str) -> (Backend, Log) {
    http_backend(move |_| {
        format!(
            "HTTP/1.1 200 OK\r\nX-Server: {name}\r\nContent-Length: {}\r\n\r\n{name}",
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

fn status(answer: &str) -> &str {
    answer.get(9..12).unwrap_or("")
}

/// `Authorization: Basic` for `user:password`.
fn basic(user: &str, password: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("{user}:{password}").into_bytes();
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Authorization: Basic {out}")
}

#[test]
fn auth_asks_for_credentials_then_lets_valid_users_in() {
    let (app, log) = named_http("app");
    let config = format!(
        "{HTTP_DEFAULTS}
userlist admins
    group ops users scott
    user tiger password $5$rounds=1000$CzCgMB7e5VTSM5wE$ZErSu9omkcLRVuiLWwC5v1bMWz8y.3NT8k3o6DgkEhA
    user scott insecure-password elgato
frontend www
    {{bind}}
    acl ok http_auth(admins)
    acl ops http_auth_group(admins) ops
    http-request auth realm \"Admin area\" unless ok
    http-request return status 200 content-type text/plain lf-string \"ops %[http_auth_group(admins)]\" if {{ path /ops }} ops
    http-request auth if {{ path /ops }}
    http-request set-header X-User %[http_auth_user]
    default_backend app
backend app
    server s {}
",
        app.addr()
    );
    let (_p, addr) = start(&config);

    // No credentials: a 401 with the realm, and the connection stays open for a retry.
    let mut s = connect(addr);
    s.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    let mut first = vec![0u8; 4096];
    let n = s.read(&mut first).unwrap();
    let first = String::from_utf8_lossy(&first[..n]).into_owned();
    assert_eq!(status(&first), "401", "{first}");
    assert_eq!(
        header(&first, "www-authenticate"),
        Some("Basic realm=\"Admin area\"")
    );
    assert_eq!(header(&first, "connection"), None, "{first}");
    let length: usize = header(&first, "content-length").unwrap().parse().unwrap();
    assert_eq!(body(&first).len(), length);
    // Same connection, valid SHA-crypt credentials: forwarded.
    s.write_all(
        format!(
            "GET / HTTP/1.1\r\nHost: h\r\n{}\r\nConnection: close\r\n\r\n",
            basic("tiger", "secret")
        )
        .as_bytes(),
    )
    .unwrap();
    let Closed::Eof(second) = read_to_close(&mut s, GENEROUS) else {
        panic!("the second answer must end the connection");
    };
    let second = String::from_utf8_lossy(&second);
    assert_eq!(status(&second), "200", "{second}");
    assert_eq!(body(&second), "app");
    assert_eq!(
        log.lock()
            .unwrap()
            .last()
            .unwrap()
            .header("x-user")
            .as_deref(),
        Some("tiger")
    );

    // A wrong password is asked again.
    let wrong = get(
        addr,
        &format!(
            "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n{}\r\n\r\n",
            basic("tiger", "nope")
        ),
    );
    assert_eq!(status(&wrong), "401", "{wrong}");

    // Groups: scott is in ops, tiger is not (and the realm defaults to the proxy's name).
    let scott = get(
        addr,
        &format!(
            "GET /ops HTTP/1.1\r\nHost: h\r\nConnection: close\r\n{}\r\n\r\n",
            basic("scott", "elgato")
        ),
    );
    assert_eq!(body(&scott), "ops scott", "{scott}");
    let tiger = get(
        addr,
        &format!(
            "GET /ops HTTP/1.1\r\nHost: h\r\nConnection: close\r\n{}\r\n\r\n",
            basic("tiger", "secret")
        ),
    );
    assert_eq!(status(&tiger), "401", "{tiger}");
    assert_eq!(
        header(&tiger, "www-authenticate"),
        Some("Basic realm=\"www\"")
    );
}

#[test]
fn configuration_errors_of_userlists_and_auth_are_reported() {
    let dir = common::TempDir::new();
    let cfg = dir.write(
        "bad.cfg",
        "userlist L
    user a password $1$salt$qJH7.N4xYta3aEG/dfqo/0
frontend f
    mode http
    bind :0
    http-request auth realm
    acl x http_auth(missing)
",
    );
    let out = common::run(&["-c", "-f", cfg.to_str().unwrap()], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("MD5-crypt ('$1$') is not supported by Sluice"),
        "{stderr}"
    );
    assert!(stderr.contains("'realm' expects a value"), "{stderr}");
    assert!(
        stderr.contains("fetch method 'http_auth' : unable to find userlist 'missing'"),
        "{stderr}"
    );
}

/// Sends `request` (which asks to close) and measures how long the first byte of the answer
/// takes; returns the whole answer (read until the proxy closes) and that time.
fn timed_answer(addr: SocketAddr, request: &str) -> (String, Duration) {
    let mut s = connect(addr);
    s.write_all(request.as_bytes()).unwrap();
    let start = Instant::now();
    let mut first = [0u8; 1];
    s.read_exact(&mut first).unwrap();
    let took = start.elapsed();
    let rest = read_to_close(&mut s, GENEROUS);
    assert!(rest.is_closed(), "the connection ends after the answer");
    let mut all = first.to_vec();
    all.extend_from_slice(rest.data());
    (String::from_utf8_lossy(&all).into_owned(), took)
}

#[test]
fn tarpit_holds_the_request_then_answers() {
    let (app, log) = named_http("app");
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    timeout tarpit 300ms
    http-request tarpit if {{ path /slow }}
    http-request tarpit deny_status 403 if {{ path /slow403 }}
    default_backend app
backend app
    timeout connect 400ms
    http-request tarpit status 429 content-type text/plain string calm if {{ path /be }}
    server s {}
",
        app.addr()
    );
    let (_p, addr) = start(&config);
    let hold = Duration::from_millis(300);
    let upper = Duration::from_secs(5);

    let (answer, took) = timed_answer(
        addr,
        "GET /slow HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status(&answer), "500", "{answer}");
    assert!(took >= hold && took < upper, "answered after {took:?}");

    let (answer, took) = timed_answer(
        addr,
        "GET /slow403 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status(&answer), "403", "{answer}");
    assert!(took >= hold && took < upper, "answered after {took:?}");

    // A backend rule waits for the backend's delay: its `timeout connect` here.
    let (answer, took) = timed_answer(
        addr,
        "GET /be HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status(&answer), "429", "{answer}");
    assert_eq!(body(&answer), "calm");
    assert!(
        took >= Duration::from_millis(400) && took < upper,
        "answered after {took:?}"
    );
    assert!(log.lock().unwrap().is_empty(), "nothing reaches the server");
    // As in HAProxy 2.6, a client that did not ask to close keeps its connection after a
    // tarpit's answer, and its next request is served.
    let mut c = connect(addr);
    c.write_all(b"GET /slow HTTP/1.1\r\nHost: h\r\n\r\nGET /fine HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        .unwrap();
    let both = read_to_close(&mut c, GENEROUS);
    let text = String::from_utf8_lossy(both.data());
    assert!(both.is_closed(), "{text}");
    assert!(text.starts_with("HTTP/1.1 500 "), "{text}");
    assert!(
        text.contains("\r\n\r\napp"),
        "the next request was served: {text}"
    );
}

#[test]
fn after_response_rules_run_last_on_every_answer() {
    let (app, _) = named_http("app");
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    http-request return status 200 content-type text/plain string made if {{ path /made }}
    http-after-response add-header X-Order fe
    http-after-response set-header X-Status %[status]
    default_backend app
backend app
    http-response set-header X-Server rewritten
    http-after-response add-header X-Order be
    http-after-response replace-header X-Server ^rewritten$ after
    http-after-response set-status 203 if {{ status 200 }}
    server s {}
",
        app.addr()
    );
    let (_p, addr) = start(&config);

    let served = get(
        addr,
        "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert!(served.starts_with("HTTP/1.1 203 "), "{served}");
    assert_eq!(header(&served, "x-server"), Some("after"));
    // The backend's set runs first, then the frontend's, which sees the new status.
    let order: Vec<&str> = served
        .lines()
        .filter_map(|l| {
            l.strip_prefix("x-order: ")
                .or_else(|| l.strip_prefix("X-Order: "))
        })
        .collect();
    assert_eq!(order, ["be", "fe"], "{served}");
    assert_eq!(header(&served, "x-status"), Some("203"));
    assert_eq!(body(&served), "app");

    // The proxy's own answers: a return, and the 400 of a request it could not parse.
    let made = get(
        addr,
        "GET /made HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status(&made), "200", "{made}");
    assert_eq!(header(&made, "x-order"), Some("fe"));
    assert_eq!(body(&made), "made");
    let bad = get(addr, "GET / HTTP/1.1\r\nHost: h\r\nBad Field: x\r\n\r\n");
    assert_eq!(status(&bad), "400", "{bad}");
    assert_eq!(header(&bad, "x-order"), Some("fe"), "{bad}");
    assert_eq!(header(&bad, "x-status"), Some("400"), "{bad}");
    let length: usize = header(&bad, "content-length").unwrap().parse().unwrap();
    assert_eq!(body(&bad).len(), length);
}

#[test]
fn captures_belong_to_one_transaction() {
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    capture request header X-Id len 3
    http-request capture req.hdr(x-other) len 8
    http-request return status 200 content-type text/plain lf-string \"[%[capture.req.hdr(0)]][%[capture.req.hdr(1),length]]\"
"
    );
    let (_p, addr) = start(&config);
    let mut s = connect(addr);
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: h\r\nX-Id: abcdef\r\nX-Id: second\r\nX-Other: 0123456789\r\n\r\n\
          GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let Closed::Eof(data) = read_to_close(&mut s, GENEROUS) else {
        panic!("the second answer ends the connection");
    };
    let text = String::from_utf8_lossy(&data);
    let bodies: Vec<&str> = text.split("HTTP/1.1 200 OK").skip(1).map(body).collect();
    // The first occurrence, cut to the slot's length; nothing carried to the next request
    // (an absent value writes nothing outside log lines).
    assert_eq!(bodies, ["[abc][8]", "[][]"], "{text}");
}

#[test]
fn normalize_uri_rewrites_what_the_server_sees() {
    let (app, log) = named_http("app");
    let config = format!(
        "global
    expose-experimental-directives
{HTTP_DEFAULTS}
frontend www
    {{bind}}
    http-request normalize-uri path-merge-slashes
    http-request normalize-uri percent-decode-unreserved strict
    http-request normalize-uri percent-to-uppercase
    http-request normalize-uri path-strip-dot
    http-request normalize-uri path-strip-dotdot full
    http-request normalize-uri query-sort-by-name
    default_backend app
backend app
    server s {}
",
        app.addr()
    );
    let (_p, addr) = start(&config);
    let answer = get(
        addr,
        "GET //a//./b/../../../c/%7e%41x?z=1&a=%2f&a=0 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status(&answer), "200", "{answer}");
    assert_eq!(
        log.lock().unwrap().last().unwrap().request_line(),
        "GET /c/~Ax?a=%2F&a=0&z=1 HTTP/1.1"
    );
    // `strict`: a malformed percent sequence is a bad request.
    let bad = get(
        addr,
        "GET /%%36%36 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status(&bad), "400", "{bad}");
    assert_eq!(log.lock().unwrap().len(), 1);
}

#[test]
fn tcp_response_content_checks_the_servers_first_bytes() {
    let echo = Backend::echo();
    let config = format!(
        "{TCP_DEFAULTS}
listen l
    {{bind}}
    tcp-response inspect-delay 300ms
    tcp-response content reject if {{ res.payload(0,3) -m bin 424144 }}
    tcp-response content accept if {{ res.len ge 4 }}
    tcp-response content reject
    server s {}
",
        echo.addr()
    );
    let (p, addr) = start(&config);
    // The client's bytes reach the server while its answer is inspected.
    let mut good = connect(addr);
    good.write_all(b"GOOD").unwrap();
    assert_eq!(common::read_n(&mut good, 4), b"GOOD");
    good.write_all(b" and more").unwrap();
    assert_eq!(common::read_n(&mut good, 9), b" and more");

    let mut bad = connect(addr);
    bad.write_all(b"BAD!").unwrap();
    let closed = read_to_close(&mut bad, GENEROUS);
    assert!(closed.is_closed() && closed.data().is_empty(), "{closed:?}");

    // Too short to decide: the rules wait for the delay, then the last one rejects.
    let mut short = connect(addr);
    short.write_all(b"ab").unwrap();
    let start = Instant::now();
    let closed = read_to_close(&mut short, GENEROUS);
    let took = start.elapsed();
    assert!(closed.is_closed() && closed.data().is_empty(), "{closed:?}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "closed after {took:?}"
    );
    // Each rejected response is a denied response (`dresp`, the 12th field) of the frontend,
    // the backend and the server, as in HAProxy; no denied request (`dreq`).
    let stat = p.cli("show stat");
    for prefix in ["l,FRONTEND,", "l,s,", "l,BACKEND,"] {
        let row = stat.lines().find(|l| l.starts_with(prefix)).unwrap();
        let fields: Vec<&str> = row.split(',').collect();
        assert_eq!(fields[11], "2", "{row}");
        assert_ne!(fields[10], "2", "{row}");
    }
}

/// Rules may rewrite any field, but the body keeps the framing it arrived with: a request
/// sent chunked goes on chunked even after rules set a Content-Length and delete the
/// Transfer-Encoding, so what follows the body is read as the next request (no smuggling).
#[test]
fn rules_cannot_change_how_a_request_body_is_delimited() {
    let (app, log) = named_http("app");
    let (_p, addr) = common::http::proxy(
        app.addr(),
        "    http-request set-header Content-Length 1\n    http-request del-header Transfer-Encoding\n",
    );
    let answer = get(
        addr,
        "POST /first HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n\
         5\r\nhello\r\n0\r\n\r\n\
         GET /second HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(answer.matches("HTTP/1.1 200").count(), 2, "{answer}");
    let seen = log.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].request_line(), "POST /first HTTP/1.1");
    assert_eq!(seen[0].body, b"hello");
    assert_eq!(
        seen[0].header("transfer-encoding").as_deref(),
        Some("chunked")
    );
    assert_eq!(seen[0].header("content-length"), None);
    assert_eq!(seen[1].request_line(), "GET /second HTTP/1.1");
}

/// Likewise for responses: a rule setting a smaller Content-Length does not cut the body the
/// server sent, and the client connection stays in step for its next request.
#[test]
fn rules_cannot_change_how_a_response_body_is_delimited() {
    let (app, _log) =
        http_backend(|_| "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789".to_owned());
    let (_p, addr) = common::http::proxy(
        app.addr(),
        "    http-response set-header Content-Length 3\n    http-response set-header Transfer-Encoding chunked\n",
    );
    let answer = get(
        addr,
        "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    let responses: Vec<&str> = answer.split("HTTP/1.1 ").skip(1).collect();
    assert_eq!(responses.len(), 2, "{answer}");
    for response in responses {
        let full = format!("HTTP/1.1 {response}");
        assert_eq!(header(&full, "content-length"), Some("10"), "{full}");
        assert_eq!(header(&full, "transfer-encoding"), None, "{full}");
        assert_eq!(body(&full), "0123456789");
    }
}

/// Sends `request` on a new connection and checks that the proxy answers nothing and
/// resets the connection.
fn assert_reset_after(addr: SocketAddr, request: &[u8]) {
    let mut c = connect(addr);
    c.write_all(request).unwrap();
    c.set_read_timeout(Some(GENEROUS)).unwrap();
    let read = c.read(&mut [0u8; 64]);
    assert!(
        matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "{read:?}"
    );
}

#[test]
fn silent_drop_resets_the_connection_and_counts_a_denied_request() {
    let (backend, seen) = named_http("s1");
    let (proxy, addr) = start(&format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    {{bind}}\n    \
         http-request silent-drop if {{ path /drop }}\n    \
         http-request reject if {{ path /reject }}\n    default_backend be\n\
         backend be\n    server s1 {}\n",
        backend.addr()
    ));
    // silent-drop: no answer, a reset rather than an end of stream.
    assert_reset_after(addr, b"GET /drop HTTP/1.1\r\nHost: h\r\n\r\n");
    // reject: no answer, and the connection is killed (a reset), as HAProxy kills it.
    assert!(matches!(
        one_shot(addr, b"GET /reject HTTP/1.1\r\nHost: h\r\n\r\n"),
        Closed::Reset(d) if d.is_empty()
    ));
    assert!(
        seen.lock().unwrap().is_empty(),
        "a dropped request reached the server"
    );
    // Both are denied requests (`dreq`, the 11th field of the frontend's row).
    let stat = proxy.cli("show stat");
    let row = stat
        .lines()
        .find(|l| l.starts_with("fe,FRONTEND,"))
        .unwrap();
    assert_eq!(row.split(',').nth(10), Some("2"), "{row}");
}

#[test]
fn http_response_silent_drop_resets_the_client_after_the_server_answered() {
    let (backend, seen) = named_http("s1");
    let (proxy, addr) = start(&format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    {{bind}}\n    \
         http-request set-var(txn.drop) bool(true) if {{ path /drop }}\n    default_backend be\n\
         backend be\n    http-response silent-drop if {{ var(txn.drop) -m bool }}\n    \
         server s1 {}\n",
        backend.addr()
    ));
    // The server answers; the client gets a reset instead of the answer.
    assert_reset_after(addr, b"GET /drop HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(seen.lock().unwrap().len(), 1, "the server had the request");
    // Other requests are answered.
    let answer = one_shot(
        addr,
        b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert!(
        matches!(&answer, Closed::Eof(d) if d.starts_with(b"HTTP/1.1 200")),
        "{answer:?}"
    );
    // A denied request (`dreq`, the 11th field) on the frontend and the backend, as
    // HAProxy counts a drop.
    let stat = proxy.cli("show stat");
    for prefix in ["fe,FRONTEND,", "be,BACKEND,"] {
        let row = stat.lines().find(|l| l.starts_with(prefix)).unwrap();
        assert_eq!(row.split(',').nth(10), Some("1"), "{row}");
    }
}
