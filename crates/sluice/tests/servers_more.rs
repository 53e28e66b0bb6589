//! More server options, end to end: `id` decides the order `balance first` fills servers in
//! and is what `fe_id`, `be_id` and `srv_id` return;
//! `minconn` with `fullconn` makes a server's limit follow the backend's load (watched through
//! a frontend answering `%[queue(app)]`, so every step waits for an observed state);
//! `slowstart` ramps a server's weight after it comes back up, watched through the weights
//! `http-check send-state` reports to the server; `source` binds the connections to servers;
//! health checks connect from the same `source`; `redir` answers GET and HEAD with a redirect and forwards the rest; `server-template`
//! declares numbered servers sharing one address (a host name resolved once);
//! `max-keep-alive-queue` lets a kept-alive client leave its full server.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::HTTP_DEFAULTS;
use common::{
    Backend, Closed, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_to_close, wait_until,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The answers of `n` sequential connections to a frontend whose servers send their name.
fn names(addr: SocketAddr, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let mut c = connect(addr);
            match read_to_close(&mut c, GENEROUS) {
                Closed::Eof(d) => String::from_utf8(d).unwrap(),
                other => panic!("connection not served: {other:?}"),
            }
        })
        .collect()
}

#[test]
fn balance_first_follows_server_ids_not_declaration_order() {
    let late = Backend::named("declared-first");
    let early = Backend::named("lowest-id");
    let (fe, addr) = frontend();
    // The second server has id 1; the first one takes the next free id, 2.
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    balance first\n    server a {}\n    server b {} id 1\n",
        fd_bind(&fe),
        late.addr(),
        early.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    assert_eq!(names(addr, 3), ["lowest-id"; 3]);
    assert_eq!(late.accepted(), 0);
}

/// The requests waiting in backend `app`'s queues, read through the `watch` frontend.
fn queued(watch: SocketAddr) -> usize {
    let mut s = connect(watch);
    s.write_all(b"GET /q HTTP/1.1\r\nHost: w\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
        .rsplit("\r\n\r\n")
        .next()
        .unwrap_or("")
        .trim()
        .parse()
        .unwrap_or(usize::MAX)
}

#[test]
fn a_minconn_server_takes_more_connections_as_the_backend_fills() {
    // Limit = max(minconn 1, 4 x connections / fullconn 8): 1 until the backend holds 4
    // connections (queued ones included), then 2, 3 at 6, and maxconn 4 from 8 on.
    let server = Backend::silent();
    let (fe, addr) = frontend();
    let (watch_fe, watch) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    fullconn 8\n    timeout queue 30s\n    server s {} minconn 1 maxconn 4\n\
         frontend watch\n    mode http\n    bind {}\n    http-request return status 200 content-type text/plain lf-string %[queue(app)]\n",
        fd_bind(&fe),
        server.addr(),
        fd_bind(&watch_fe),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).inherit(watch_fe).start();
    let mut clients: Vec<TcpStream> = Vec::new();
    // (accepted by the server, queued) after each new client.
    let expected = [
        (1, 0),
        (1, 1),
        (1, 2),
        (2, 2),
        (2, 3),
        (3, 3),
        (3, 4),
        (4, 4),
    ];
    for (n, (accepted, waiting)) in expected.into_iter().enumerate() {
        clients.push(connect(addr));
        assert!(
            wait_until(GENEROUS, || server.accepted() == accepted
                && queued(watch) == waiting),
            "client {}: expected {accepted} served and {waiting} queued, saw {} and {}",
            n + 1,
            server.accepted(),
            queued(watch)
        );
    }
}

/// Reads an HTTP request head from `s`.
fn read_head(s: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

#[test]
fn slowstart_ramps_the_weight_of_a_server_coming_back_up() {
    // The server fails its checks (503) until `healthy` is set; every check request carries
    // the state and weights Sluice gives it (`http-check send-state`).
    let healthy = Arc::new(AtomicBool::new(false));
    let states = Arc::new(Mutex::new(Vec::<String>::new()));
    let (ok, log) = (Arc::clone(&healthy), Arc::clone(&states));
    let server = Backend::start(move |mut s| {
        let Some(head) = read_head(&mut s) else {
            return;
        };
        if let Some(state) = head
            .lines()
            .find_map(|l| l.strip_prefix("x-haproxy-server-state: "))
        {
            log.lock().unwrap().push(state.to_owned());
        }
        let status = if ok.load(Ordering::SeqCst) { 200 } else { 503 };
        let _ = write!(s, "HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n");
    });
    let (fe, _addr) = frontend();
    let cfg = format!(
        "{HTTP_DEFAULTS}\nlisten app\n    bind {}\n    option httpchk\n    http-check send-state\n    \
         server s1 {} check inter 100 rise 1 fall 1 weight 32 slowstart 2s\n",
        fd_bind(&fe),
        server.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let weights_up = || -> Vec<u32> {
        states
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.starts_with("UP"))
            .filter_map(|s| {
                let w = s.split("; ").find_map(|f| f.strip_prefix("weight="))?;
                w.split('/').next()?.parse().ok()
            })
            .collect()
    };
    // Down first (the start-up weight is not ramped: slowstart never applies at start-up).
    assert!(wait_until(GENEROUS, || states
        .lock()
        .unwrap()
        .iter()
        .any(|s| s.starts_with("DOWN"))));
    states.lock().unwrap().clear();
    healthy.store(true, Ordering::SeqCst);
    // 2 s in whole seconds: 2/32 (one sixteenth), then (16 + 2) / 2 = 9 sixteenths, then 32.
    assert!(
        wait_until(Duration::from_secs(10), || weights_up().last() == Some(&32)),
        "the weight never reached 32: {:?}",
        states.lock().unwrap()
    );
    let mut seen = weights_up();
    seen.dedup();
    assert_eq!(seen, [2, 18, 32], "{:?}", states.lock().unwrap());
}

#[test]
fn source_binds_the_connections_to_servers() {
    // Every 127/8 address is local: the servers see which one the proxy connected from.
    let peer = || {
        Backend::start(|mut s| {
            let from = s
                .peer_addr()
                .map(|a| a.ip().to_string())
                .unwrap_or_default();
            let _ = s.write_all(from.as_bytes());
        })
    };
    let (own, inherited) = (peer(), peer());
    let (fe1, addr1) = frontend();
    let (fe2, addr2) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten own\n    bind {}\n    source 127.0.0.3\n    server s {} source 127.0.0.2\n\
         listen inherited\n    bind {}\n    source 127.0.0.3\n    server s {}\n",
        fd_bind(&fe1),
        own.addr(),
        fd_bind(&fe2),
        inherited.addr(),
    );
    let _proxy = common::sluice(&cfg).inherit(fe1).inherit(fe2).start();
    assert_eq!(names(addr1, 1), ["127.0.0.2"]);
    assert_eq!(names(addr2, 1), ["127.0.0.3"]);
}

#[test]
fn redir_answers_get_and_head_and_forwards_the_rest() {
    let server = Backend::start(|mut s| {
        if let Some(head) = read_head(&mut s) {
            let line = head.lines().next().unwrap_or_default().to_owned();
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{line}",
                line.len()
            );
        }
    });
    let (fe, addr) = frontend();
    let cfg = format!(
        "{HTTP_DEFAULTS}\nlisten app\n    bind {}\n    server s {} redir http://img.example.com\n",
        fd_bind(&fe),
        server.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let exchange = |request: &str| {
        let mut c = connect(addr);
        c.write_all(request.as_bytes()).unwrap();
        String::from_utf8_lossy(read_to_close(&mut c, GENEROUS).data()).into_owned()
    };
    // HAProxy 2.6's answer, byte for byte; the connection closes after it.
    assert_eq!(
        exchange("GET /a/b?x=1 HTTP/1.1\r\nHost: h\r\n\r\nGET /second HTTP/1.1\r\nHost: h\r\n\r\n"),
        "HTTP/1.1 302 Found\r\ncache-control: no-cache\r\ncontent-length: 0\r\n\
         location: http://img.example.com/a/b?x=1\r\nconnection: close\r\n\r\n"
    );
    assert!(
        exchange("HEAD http://h/z HTTP/1.1\r\nHost: h\r\n\r\n")
            .contains("location: http://img.example.com/z\r\n")
    );
    assert_eq!(server.accepted(), 0);
    let posted = exchange(
        "POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert!(posted.starts_with("HTTP/1.1 200"), "{posted}");
    assert!(posted.ends_with("POST /form HTTP/1.1"), "{posted}");
}

#[test]
fn server_template_servers_share_the_address_and_take_turns() {
    let server = Backend::start(|mut s| {
        if read_head(&mut s).is_some() {
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let (fe, addr) = frontend();
    let cfg = format!(
        "{HTTP_DEFAULTS}\nlisten app\n    bind {}\n    balance roundrobin\n    \
         http-response set-header x-server %[srv_name]\n    \
         server-template web 2-4 localhost:{} init-addr libc\n",
        fd_bind(&fe),
        server.addr().port()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let served: Vec<String> = (0..6)
        .map(|_| {
            let mut c = connect(addr);
            c.write_all(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
                .unwrap();
            let answer =
                String::from_utf8_lossy(read_to_close(&mut c, GENEROUS).data()).into_owned();
            answer
                .lines()
                .find_map(|l| l.strip_prefix("x-server: "))
                .unwrap_or_else(|| panic!("no server named in {answer:?}"))
                .to_owned()
        })
        .collect();
    let mut names = served.clone();
    names.sort();
    names.dedup();
    assert_eq!(names, ["web2", "web3", "web4"], "{served:?}");
    assert_eq!(server.accepted(), 6);
}

#[test]
fn health_checks_connect_from_the_source_too() {
    let peers = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = Arc::clone(&peers);
    // An HTTP check waits for the answer, so the connection is still there to be asked.
    let server = Backend::start(move |mut s| {
        let from = s
            .peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default();
        log.lock().unwrap().push(from);
        if read_head(&mut s).is_some() {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let (fe, _addr) = frontend();
    let cfg = format!(
        "{HTTP_DEFAULTS}\nlisten app\n    bind {}\n    option httpchk\n    source 127.0.0.4\n    server s {} check inter 100\n",
        fd_bind(&fe),
        server.addr(),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    assert!(wait_until(GENEROUS, || peers.lock().unwrap().len() >= 2));
    assert!(
        peers.lock().unwrap().iter().all(|p| p == "127.0.0.4"),
        "{:?}",
        peers.lock().unwrap()
    );
}

#[test]
fn id_fetches_return_the_configured_and_automatic_ids() {
    let server = Backend::start(|mut s| {
        if read_head(&mut s).is_some() {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let (fe, addr) = frontend();
    // Frontend `fe` is declared first (automatic id 1); the backend has id 42; its second
    // server has id 7, the first takes the next free number, 1.
    let cfg = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    default_backend be\n    \
         http-response set-header x-ids %[fe_id]/%[be_id]/%[srv_id]\n\
         backend be\n    id 42\n    balance first\n    server a 127.0.0.1:1 disabled\n    server b {} id 7\n",
        fd_bind(&fe),
        server.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let mut c = connect(addr);
    c.write_all(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        .unwrap();
    let answer = String::from_utf8_lossy(read_to_close(&mut c, GENEROUS).data()).into_owned();
    assert!(answer.contains("\r\nx-ids: 1/42/7\r\n"), "{answer}");
}

#[test]
fn slowstart_also_ramps_a_server_leaving_maintenance() {
    // Checks always pass; the agent first puts the server in maintenance, then back.
    let states = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = Arc::clone(&states);
    let server = Backend::start(move |mut s| {
        if let Some(head) = read_head(&mut s) {
            if let Some(state) = head
                .lines()
                .find_map(|l| l.strip_prefix("x-haproxy-server-state: "))
            {
                log.lock().unwrap().push(state.to_owned());
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let word = Arc::new(Mutex::new("maint".to_owned()));
    let said = Arc::clone(&word);
    let agent = Backend::start(move |mut s| {
        let text = said.lock().unwrap().clone();
        let _ = s.write_all(format!("{text}\n").as_bytes());
    });
    let (fe, _addr) = frontend();
    let cfg = format!(
        "{HTTP_DEFAULTS}\nlisten app\n    bind {}\n    option httpchk\n    http-check send-state\n    \
         server s1 {} check inter 100 weight 32 slowstart 2s agent-check agent-port {} agent-inter 50\n",
        fd_bind(&fe),
        server.addr(),
        agent.addr().port()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    assert!(wait_until(GENEROUS, || states
        .lock()
        .unwrap()
        .iter()
        .any(|s| s.starts_with("MAINT"))));
    states.lock().unwrap().clear();
    *word.lock().unwrap() = "ready".to_owned();
    let weights_up = || -> Vec<u32> {
        states
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.starts_with("UP"))
            .filter_map(|s| {
                let w = s.split("; ").find_map(|f| f.strip_prefix("weight="))?;
                w.split('/').next()?.parse().ok()
            })
            .collect()
    };
    assert!(
        wait_until(Duration::from_secs(10), || weights_up().last() == Some(&32)),
        "the weight never reached 32: {:?}",
        states.lock().unwrap()
    );
    let mut seen = weights_up();
    seen.dedup();
    assert_eq!(seen, [2, 18, 32], "{:?}", states.lock().unwrap());
}

/// Sends a kept-alive GET for `path` on `c` and returns the `X-Server` of its answer.
fn server_of(c: &mut TcpStream, path: &str) -> String {
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes())
        .unwrap();
    let head = read_head(c).expect("an answer");
    head.lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("x-server")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default()
}

/// Under `option prefer-last-server`, a client keeps going to the server whose connection it
/// kept; with `max-keep-alive-queue 0` it goes elsewhere when that server is full, instead
/// of waiting in its queue, as HAProxy does.
#[test]
fn max_keep_alive_queue_sends_a_kept_client_elsewhere_when_its_server_is_full() {
    // Set when s1 starts on the slow request, which holds its only slot for two seconds.
    let slow_started = Arc::new(AtomicBool::new(false));
    let named = |name: &'static str| {
        let slow_started = Arc::clone(&slow_started);
        common::http::http_backend(move |req| {
            if req.request_line().contains("/slow") {
                slow_started.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_secs(2));
            }
            format!("HTTP/1.1 200 OK\r\nX-Server: {name}\r\nContent-Length: 0\r\n\r\n")
        })
    };
    let ((s1, _), (s2, _)) = (named("s1"), named("s2"));
    let (fe, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}
    timeout queue 10s
listen app
    bind {}
    balance roundrobin
    option prefer-last-server
    http-reuse never
    max-keep-alive-queue 0
    use-server s1 if {{ path /slow }}
    server s1 {} maxconn 1
    server s2 {} maxconn 1
",
        fd_bind(&fe),
        s1.addr(),
        s2.addr()
    );
    let _p = common::sluice(&config).inherit(fe).start();
    let mut kept = connect(addr);
    assert_eq!(server_of(&mut kept, "/first"), "s1");
    // Another client takes s1's only slot for a while.
    let mut other = connect(addr);
    other
        .write_all(b"GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
        .unwrap();
    assert!(wait_until(GENEROUS, || slow_started.load(Ordering::SeqCst)));
    // s1 is full: the kept client's next request is balanced, not queued behind it.
    assert_eq!(server_of(&mut kept, "/second"), "s2");
    assert_eq!(
        read_head(&mut other)
            .as_deref()
            .map(|h| h.to_ascii_lowercase().contains("x-server: s1")),
        Some(true)
    );
}
