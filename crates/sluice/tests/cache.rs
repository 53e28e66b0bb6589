//! End-to-end behaviour of `cache` sections with `http-request cache-use` and
//! `http-response cache-store` (configuration.txt §6) beyond what `tests/vtc/cache` shows on
//! both proxies: the `cache_lookups` and `cache_hits` statistics, `max-object-size` for
//! bodies of known length and chunked ones, room made by dropping the oldest objects, and
//! expiry.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, Log, http_backend, status_of};
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

/// A server answering `GET /N` (or `/chunked/N`) with a cacheable body of N bytes, with a
/// length or chunked.
fn sized_backend() -> (common::Backend, Log) {
    http_backend(|req| {
        let path = req
            .head
            .split_whitespace()
            .nth(1)
            .unwrap_or("/0")
            .to_owned();
        let chunked = path.starts_with("/chunked/");
        let size: usize = path.rsplit('/').next().unwrap().parse().unwrap_or(0);
        let body = "b".repeat(size);
        if chunked {
            format!(
                "HTTP/1.1 200 OK\r\nCache-Control: max-age=100\r\nTransfer-Encoding: chunked\r\n\r\n{size:x}\r\n{body}\r\n0\r\n\r\n"
            )
        } else {
            format!(
                "HTTP/1.1 200 OK\r\nCache-Control: max-age=100\r\nContent-Length: {size}\r\n\r\n{body}"
            )
        }
    })
}

/// GETs `path` on a kept-alive connection and returns the status, whether it carried `Age`
/// (served from the cache) and the body's length.
fn get(addr: SocketAddr, path: &str) -> (u16, bool, usize) {
    let mut conn = common::connect(addr);
    conn.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let answer = common::read_to_close(&mut conn, common::GENEROUS);
    let text = String::from_utf8_lossy(answer.data()).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let aged = head
        .lines()
        .any(|l| l.to_ascii_lowercase().starts_with("age:"));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        common::http::whole_chunks(answer.data()).len()
    } else {
        body.len()
    };
    (status_of(answer.data()), aged, body)
}

fn requests_seen(log: &Log) -> usize {
    log.lock().unwrap().len()
}

/// Sluice with a `listen px` whose rules use cache `c` (declared with `cache_lines`) in
/// front of `backend`; returns the process and the address of `px`.
fn cached_proxy(backend: SocketAddr, cache_lines: &str) -> (common::Sluice, SocketAddr) {
    let (listener, addr) = common::frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten px\n    bind {}\n    http-request cache-use c\n    \
         http-response cache-store c\n    server s1 {backend}\ncache c\n{cache_lines}\n",
        common::fd_bind(&listener)
    );
    (common::sluice(&config).inherit(listener).start(), addr)
}

/// The `show stat` row of `px`'s `svname` (FRONTEND or BACKEND), as field name → value.
fn stat_row(proxy: &common::Sluice, svname: &str) -> std::collections::HashMap<String, String> {
    let csv = proxy.cli("show stat");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap()
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let row = lines
        .find(|l| l.starts_with(&format!("px,{svname},")))
        .unwrap();
    header
        .iter()
        .zip(row.split(','))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn lookups_and_hits_are_counted_by_the_proxy_whose_rule_looked() {
    let (backend, log) = sized_backend();
    let (proxy, addr) = cached_proxy(backend.addr(), "    total-max-size 1");
    assert_eq!(get(addr, "/10"), (200, false, 10));
    assert_eq!(get(addr, "/10"), (200, true, 10));
    assert_eq!(get(addr, "/10"), (200, true, 10));
    assert_eq!(requests_seen(&log), 1);
    // A POST is not looked up.
    let mut conn = common::connect(addr);
    conn.write_all(
        b"POST /10 HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    common::read_to_close(&mut conn, common::GENEROUS);
    assert_eq!(requests_seen(&log), 2);
    // A `listen` section's rules are its frontend's, as in HAProxy.
    let front = stat_row(&proxy, "FRONTEND");
    assert_eq!(
        (
            front["cache_lookups"].as_str(),
            front["cache_hits"].as_str()
        ),
        ("3", "2")
    );
    let back = stat_row(&proxy, "BACKEND");
    assert_eq!(
        (back["cache_lookups"].as_str(), back["cache_hits"].as_str()),
        ("0", "0")
    );
}

#[test]
fn objects_larger_than_max_object_size_are_not_kept() {
    let (backend, log) = sized_backend();
    let (_proxy, addr) = cached_proxy(
        backend.addr(),
        "    total-max-size 1\n    max-object-size 1000",
    );
    for path in ["/2000", "/chunked/2000"] {
        let before = requests_seen(&log);
        assert_eq!(get(addr, path), (200, false, 2000));
        assert_eq!(
            get(addr, path),
            (200, false, 2000),
            "{path} came from the server"
        );
        assert_eq!(requests_seen(&log), before + 2);
    }
    for path in ["/100", "/chunked/100"] {
        assert_eq!(get(addr, path), (200, false, 100));
        assert_eq!(
            get(addr, path),
            (200, true, 100),
            "{path} came from the cache"
        );
    }
}

#[test]
fn the_oldest_objects_make_room_for_new_ones() {
    let (backend, log) = sized_backend();
    // 1 MiB holds three objects of 300 kB, not four.
    let (proxy, addr) = cached_proxy(
        backend.addr(),
        "    total-max-size 1\n    max-object-size 400000",
    );
    for path in ["/300000", "/300001", "/300002", "/300003"] {
        assert!(!get(addr, path).1);
    }
    assert!(get(addr, "/300003").1);
    assert!(get(addr, "/300001").1);
    let seen = requests_seen(&log);
    assert_eq!(
        get(addr, "/300000"),
        (200, false, 300000),
        "the oldest was dropped"
    );
    assert_eq!(requests_seen(&log), seen + 1);
    let shown = proxy.cli("show cache");
    assert_eq!(
        shown.lines().filter(|l| l.contains(" hash:")).count(),
        3,
        "{shown}"
    );
}

#[test]
fn an_object_expires_after_its_max_age() {
    let (backend, log) = http_backend(|_| {
        "HTTP/1.1 200 OK\r\nCache-Control: max-age=1\r\nContent-Length: 2\r\n\r\nok".to_owned()
    });
    let (_proxy, addr) = cached_proxy(backend.addr(), "    total-max-size 1");
    assert!(!get(addr, "/").1);
    assert!(get(addr, "/").1, "fresh for up to a second");
    // Stale within two seconds at most: the next request goes to the server.
    assert!(common::wait_until(Duration::from_secs(3), || !get(
        addr, "/"
    )
    .1));
    assert!(requests_seen(&log) >= 2);
}
