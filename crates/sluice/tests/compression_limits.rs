//! The process's compression budget end to end: `maxzlibmem` leaves answers uncompressed
//! while the deflate states it allows are all in use; `maxcomprate` (and the CLI's `set
//! rate-limit http-compression global`) steps a compressing answer down to stored blocks and
//! keeps the next ones uncompressed while the rate is over it; `show info` shows the limit.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, gunzip_prefix, read_message, whole_chunks};
use common::{Backend, GENEROUS, connect, fd_bind, frontend, info_field, sluice};
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// A backend whose answers send `first`, then wait for a token on the returned channel before
/// sending `rest`, as a chunked `text/plain` body.
fn held_backend(first: &'static [u8], rest: &'static [u8]) -> (Backend, mpsc::Sender<()>) {
    let (release, released) = mpsc::channel::<()>();
    let released = Arc::new(Mutex::new(released));
    let backend = Backend::start(move |s| {
        let mut reader = BufReader::new(s.try_clone().unwrap());
        let mut s = s;
        while read_message(&mut reader).is_some() {
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n";
            s.write_all(head.as_bytes()).unwrap();
            s.write_all(format!("{:x}\r\n", first.len()).as_bytes())
                .unwrap();
            s.write_all(first).unwrap();
            s.write_all(b"\r\n").unwrap();
            released.lock().unwrap().recv().unwrap();
            s.write_all(format!("{:x}\r\n", rest.len()).as_bytes())
                .unwrap();
            s.write_all(rest).unwrap();
            s.write_all(b"\r\n0\r\n\r\n").unwrap();
        }
    });
    (backend, release)
}

/// One proxy on one event loop (so that every answer shares its deflate states) with
/// `global` lines, compressing with gzip.
fn proxy(global: &str, server: SocketAddr) -> (common::Sluice, SocketAddr) {
    let (listener, addr) = frontend();
    let config = format!(
        "global\n    nbthread 1\n{global}\n{HTTP_DEFAULTS}\n\
         listen px\n    bind {}\n    compression algo gzip\n    server s1 {server}\n",
        fd_bind(&listener)
    );
    (sluice(&config).inherit(listener).start(), addr)
}

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip\r\n\r\n";

/// Sends a request and reads the answer's head; the connection and the head.
fn ask(addr: SocketAddr) -> (TcpStream, String) {
    let mut client = connect(addr);
    client.write_all(REQUEST).unwrap();
    client.set_read_timeout(Some(GENEROUS)).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(client.read(&mut byte).unwrap(), 1, "{head:?}");
        head.push(byte[0]);
    }
    (client, String::from_utf8(head).unwrap())
}

fn gzipped(head: &str) -> bool {
    head.to_ascii_lowercase()
        .contains("\r\ncontent-encoding: gzip\r\n")
}

/// Reads the rest of a chunked answer whose head was read: the body, dechunked.
fn body_of(client: TcpStream) -> Vec<u8> {
    common::http::read_chunked(&mut BufReader::new(client))
}

#[test]
fn maxzlibmem_leaves_answers_uncompressed_while_its_states_are_in_use() {
    let (backend, release) = held_backend(b"first part, ", b"last part");
    // 1 MB: room for four deflate states.
    let (_p, addr) = proxy("    maxzlibmem 1", backend.addr());
    let held: Vec<(TcpStream, String)> = (0..5).map(|_| ask(addr)).collect();
    let compressed: Vec<bool> = held.iter().map(|(_, head)| gzipped(head)).collect();
    assert_eq!(compressed, [true, true, true, true, false]);
    for _ in 0..5 {
        release.send(()).unwrap();
    }
    for (client, head) in held {
        let body = body_of(client);
        let plain = if gzipped(&head) {
            let mut plain = Vec::new();
            flate2::read::GzDecoder::new(&body[..])
                .read_to_end(&mut plain)
                .unwrap();
            plain
        } else {
            body
        };
        assert_eq!(plain, b"first part, last part");
    }
    // Done, their states are the thread's spares: the next answer compresses again.
    let (client, head) = ask(addr);
    release.send(()).unwrap();
    assert!(gzipped(&head), "{head}");
    body_of(client);
}

#[test]
fn maxcomprate_steps_a_compression_down_and_keeps_the_next_answers_plain() {
    // Highly compressible: level 1 makes it a few percent of its size.
    let part: &'static [u8] = "the same line again and again\n"
        .repeat(4000)
        .leak()
        .as_bytes();
    let (backend, release) = held_backend(part, part);
    let (p, addr) = proxy("", backend.addr());
    assert_eq!(p.cli("set rate-limit http-compression global 1"), "\n");
    let info = p.cli("show info");
    assert_eq!(info_field(&info, "CompressBpsRateLim"), Some("1024"));
    let (mut client, head) = ask(addr);
    assert!(gzipped(&head), "the rate is still 0: {head}");
    // Once the first part went through (the proxy flushed it while the server waits), the
    // rate is over 1 kB/s and the level steps down to 0: the second part is stored.
    let mut received = head.into_bytes();
    let mut plain = Vec::with_capacity(2 * part.len());
    let mut buf = [0u8; 65536];
    while plain.len() < part.len() {
        let n = client.read(&mut buf).unwrap();
        assert!(n > 0, "closed early");
        received.extend_from_slice(&buf[..n]);
        gunzip_prefix(&whole_chunks(&received), &mut plain);
    }
    let first_size = whole_chunks(&received).len();
    assert!(
        first_size < part.len() / 10,
        "compressed at level 1: {first_size}"
    );
    release.send(()).unwrap();
    while !received.ends_with(b"\r\n0\r\n\r\n") {
        let n = client.read(&mut buf).unwrap();
        assert!(n > 0, "closed early");
        received.extend_from_slice(&buf[..n]);
    }
    let body = whole_chunks(&received);
    assert!(
        body.len() - first_size > part.len(),
        "stored: {}",
        body.len()
    );
    let mut whole = Vec::new();
    flate2::read::GzDecoder::new(&body[..])
        .read_to_end(&mut whole)
        .unwrap();
    assert!(
        whole == [part, part].concat(),
        "one valid stream across the levels"
    );
    // Over the rate, a new answer starts uncompressed.
    let (client, head) = ask(addr);
    assert!(!gzipped(&head), "{head}");
    release.send(()).unwrap();
    assert_eq!(body_of(client).len(), 2 * part.len());
    // Without the limit, it compresses again.
    assert_eq!(p.cli("set rate-limit http-compression global 0"), "\n");
    let (client, head) = ask(addr);
    assert!(gzipped(&head), "{head}");
    release.send(()).unwrap();
    body_of(client);
}
