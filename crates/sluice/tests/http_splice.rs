//! HTTP bodies through kernel pipes (`option splice-request`, `option splice-response`,
//! `option splice-auto`): a large request body and a large response body arrive whole and in
//! order, the messages after them on the same connections are read right (the splice stops at
//! the body's end), and `show info` shows the pipes given back.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{http_backend, proxy, read_message};
use std::io::{BufReader, Write};
use std::net::SocketAddr;

/// A body of `len` bytes no two neighbouring windows of which look alike.
fn pattern(len: usize, seed: u8) -> String {
    (0..len)
        .map(|n| char::from(b'a' + ((n / 7 + usize::from(seed)) % 26) as u8))
        .collect()
}

/// Sends a POST with `body`, then a GET, on one kept-alive connection; returns both answers.
fn post_then_get(addr: SocketAddr, body: &str) -> (common::http::Received, common::http::Received) {
    let mut s = common::connect(addr);
    let mut reader = BufReader::new(s.try_clone().unwrap());
    write!(
        s,
        "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}GET /download HTTP/1.1\r\nHost: x\r\n\r\n",
        body.len()
    )
    .unwrap();
    let first = read_message(&mut reader).unwrap();
    let second = read_message(&mut reader).unwrap();
    (first, second)
}

/// `TotalSplicdedBytesOut` of `show info`.
fn spliced_out(sluice: &common::Sluice) -> u64 {
    let info = sluice.cli("show info");
    info.lines()
        .find_map(|l| l.strip_prefix("TotalSplicdedBytesOut: "))
        .unwrap_or_else(|| panic!("{info}"))
        .parse()
        .unwrap()
}

/// Runs the exchange through a proxy with `option_lines`; returns how many bytes it spliced.
fn check(option_lines: &str) -> u64 {
    let download = pattern(3 << 20, 1);
    let served = download.clone();
    let (backend, log) = http_backend(move |req| {
        if req.request_line().starts_with("POST") {
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_owned()
        } else {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{served}",
                served.len()
            )
        }
    });
    let (sluice, addr) = proxy(backend.addr(), option_lines);
    let upload = pattern(2 << 20, 5);
    let (posted, got) = post_then_get(addr, &upload);
    assert!(posted.head.starts_with("HTTP/1.1 200"), "{}", posted.head);
    let requests = log.lock().unwrap();
    assert_eq!(requests.len(), 2, "both requests reached the server");
    assert!(
        requests[0].body == upload.as_bytes(),
        "the upload arrived whole"
    );
    assert_eq!(requests[1].request_line(), "GET /download HTTP/1.1");
    assert!(got.head.starts_with("HTTP/1.1 200"), "{}", got.head);
    assert!(
        got.body == download.as_bytes(),
        "the download arrived whole"
    );
    drop(requests);
    // Every pipe went back once the bodies were through.
    let info = sluice.cli("show info");
    assert!(info.contains("\nPipesUsed: 0\n"), "{info}");
    spliced_out(&sluice)
}

#[test]
fn spliced_bodies_arrive_whole_and_stop_at_their_length() {
    let spliced = check("    option splice-request\n    option splice-response");
    // Both bodies, less what came in the buffers that read their heads.
    assert!(spliced > (5 << 20) - 64 * 1024, "{spliced}");
}

#[test]
fn copied_bodies_behave_the_same() {
    assert_eq!(check(""), 0);
}

#[test]
fn splice_auto_splices_large_bodies() {
    assert!(check("    option splice-auto") > (5 << 20) - 64 * 1024);
}

#[test]
fn splicing_one_direction_leaves_the_other_copied() {
    let spliced = check("    option splice-response");
    assert!(
        (3 << 20) - 64 * 1024 < spliced && spliced <= 3 << 20,
        "{spliced}"
    );
}
