//! The PROXY protocol end to end: a bind line with `accept-proxy` takes the client's addresses
//! from a v1 or v2 header (and the data after it intact), so X-Forwarded-For and a
//! `send-proxy` server see the announced client; a missing, garbled or late header closes the
//! connection before anything reaches a server; `send-proxy` and `send-proxy-v2` servers
//! receive the exact header before any data, in TCP and HTTP mode, with the TLVs of
//! `proxy-v2-options` as HAProxy 2.6 writes them; an HTTP connection that
//! carries one client's header is never reused for another client; and two Sluice processes
//! chain (`send-proxy-v2` → `accept-proxy`).
//!
//! With `SLUICE_TEST_BINARY=/usr/sbin/haproxy` every test passes except two: HAProxy 2.6 takes
//! the out-of-range address of the garbled-header test (Sluice is strict, see
//! `sluice_net::proxy_protocol`), and its `-d` output has no stream log lines.
#![allow(clippy::unwrap_used)]

mod common;

use common::{
    Backend, Closed, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_to_close, wait_until,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};

const V1_HEADER: &[u8] = b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 80\r\n";

/// A `listen` section: `bind_opts` on the inherited frontend, `server_opts` on one server.
fn listen(
    fe: &impl std::os::fd::AsRawFd,
    bind_opts: &str,
    server: SocketAddr,
    server_opts: &str,
) -> String {
    format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {} {bind_opts}\n    server s1 {server} {server_opts}\n",
        fd_bind(fe)
    )
}

/// Sends `data`, half-closes, and returns everything received until the proxy closes.
fn exchange(addr: SocketAddr, data: &[u8]) -> Closed {
    let mut c = connect(addr);
    c.write_all(data).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    read_to_close(&mut c, GENEROUS)
}

#[test]
fn accept_proxy_passes_the_announced_client_to_a_send_proxy_server() {
    // The echo server returns what it received: the header Sluice sent, then the data.
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let _proxy = common::sluice(&listen(&fe, "accept-proxy", backend.addr(), "send-proxy"))
        .inherit(fe)
        .start();
    let sent = [V1_HEADER, b"hello"].concat();
    assert_eq!(exchange(addr, &sent), Closed::Eof(sent));
}

#[test]
fn the_announced_client_is_the_one_logged() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let proxy = common::sluice(&listen(&fe, "accept-proxy", backend.addr(), ""))
        .inherit(fe)
        .start();
    let sent = [V1_HEADER, b"logged"].concat();
    assert_eq!(exchange(addr, &sent), Closed::Eof(b"logged".to_vec()));
    // The tcplog line starts with the client's address and port.
    assert!(
        wait_until(GENEROUS, || proxy
            .stderr()
            .lines()
            .any(|l| l.starts_with("1.2.3.4:1111 "))),
        "{}",
        proxy.stderr()
    );
}

#[test]
fn accept_proxy_takes_a_v2_header_and_keeps_the_data_after_it() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let _proxy = common::sluice(&listen(&fe, "accept-proxy", backend.addr(), "send-proxy"))
        .inherit(fe)
        .start();
    let mut v2 = b"\r\n\r\n\x00\r\nQUIT\n\x21\x21\x00\x24".to_vec();
    v2.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    v2.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    v2.extend_from_slice(&[0x0f, 0xa0, 0x01, 0xbb]);
    let sent = [&v2[..], b"payload"].concat();
    let want = [
        &b"PROXY TCP6 2001:db8::1 2001:db8::2 4000 443\r\n"[..],
        b"payload",
    ]
    .concat();
    assert_eq!(exchange(addr, &sent), Closed::Eof(want));
}

/// Checks that a server with `server_opts` gets a v1 line announcing the real client before
/// the client's data.
fn assert_v1_line_sent(server_opts: &str) {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let _proxy = common::sluice(&listen(&fe, "", backend.addr(), server_opts))
        .inherit(fe)
        .start();
    let mut c = connect(addr);
    let me = c.local_addr().unwrap();
    c.write_all(b"hi").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let want = format!(
        "PROXY TCP4 127.0.0.1 127.0.0.1 {} {}\r\nhi",
        me.port(),
        addr.port()
    );
    assert_eq!(
        read_to_close(&mut c, GENEROUS),
        Closed::Eof(want.into_bytes())
    );
}

#[test]
fn send_proxy_announces_the_real_client_in_v1() {
    assert_v1_line_sent("send-proxy");
}

#[test]
fn send_proxy_v2_sends_the_exact_binary_header() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let _proxy = common::sluice(&listen(&fe, "", backend.addr(), "send-proxy-v2"))
        .inherit(fe)
        .start();
    let mut c = connect(addr);
    let me = c.local_addr().unwrap();
    c.write_all(b"hi").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    // Signature, version 2 PROXY, TCP over IPv4, 12 address bytes, then the addresses.
    let mut want = b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c".to_vec();
    want.extend_from_slice(&[127, 0, 0, 1, 127, 0, 0, 1]);
    want.extend_from_slice(&me.port().to_be_bytes());
    want.extend_from_slice(&addr.port().to_be_bytes());
    want.extend_from_slice(b"hi");
    assert_eq!(read_to_close(&mut c, GENEROUS), Closed::Eof(want));
}

/// A v2 header from 1.2.3.4:1111 to 5.6.7.8:80 carrying `tlvs` (already encoded).
fn v2_header_with(tlvs: &[u8]) -> Vec<u8> {
    let mut header = b"\r\n\r\n\x00\r\nQUIT\n\x21\x11".to_vec();
    header.extend_from_slice(&(12 + tlvs.len() as u16).to_be_bytes());
    header.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 0x04, 0x57, 0, 80]);
    header.extend_from_slice(tlvs);
    header
}

#[test]
fn proxy_v2_options_add_the_tlvs_haproxy_adds() {
    // client (its own v2 header with an authority) → accept-proxy, send-proxy-v2 with every
    // option a clear connection has values for → echo.
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let config = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {} accept-proxy\n    unique-id-format id-%[src_port]\n    \
         server s1 {} send-proxy-v2 proxy-v2-options crc32c,authority,unique-id,ssl,cert-cn\n",
        fd_bind(&fe),
        backend.addr()
    );
    let _proxy = common::sluice(&config).inherit(fe).start();
    let announced = v2_header_with(&[&[0x02, 0, 11][..], b"example.com"].concat());
    let Closed::Eof(got) = exchange(addr, &[&announced[..], b"hi"].concat()) else {
        panic!("the echo did not answer");
    };
    // CRC32C first (its value checked below), then the authority passed on, the unique id
    // from the frontend's format (with the announced port), and an SSL record saying the
    // client is not on TLS, with no sub-record (so no common name).
    let tlvs = [
        &[0x03, 0, 4, 0, 0, 0, 0][..],
        &[0x02, 0, 11],
        b"example.com",
        &[0x05, 0, 7],
        b"id-1111",
        &[0x20, 0, 5, 0, 0, 0, 0, 0],
    ]
    .concat();
    let mut want = v2_header_with(&tlvs);
    let crc_at = 16 + 12 + 3;
    let crc = crc32c::crc32c(&want);
    want[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
    want.extend_from_slice(b"hi");
    assert_eq!(got, want);
}

#[test]
fn proxy_v2_options_without_send_proxy_v2_send_a_v1_line() {
    // As HAProxy 2.6 does: the options alone make a header, and it is the v1 one.
    assert_v1_line_sent("proxy-v2-options crc32c");
}

#[test]
fn missing_garbled_or_late_headers_close_without_forwarding() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let config = format!(
        "defaults\n    mode tcp\n    timeout connect 2s\n    timeout client 500ms\n    timeout server 30s\n\
         listen app\n    bind {} accept-proxy\n    server s1 {}\n",
        fd_bind(&fe),
        backend.addr()
    );
    let _proxy = common::sluice(&config).inherit(fe).start();
    for bad in [
        &b"GET / HTTP/1.0\r\n\r\n"[..],
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 80\n",
        // HAProxy 2.6 takes this one (see sluice_net::proxy_protocol): Sluice is strict.
        b"PROXY TCP4 1.2.3.999 5.6.7.8 1111 80\r\nhello",
        b"\r\n\r\n\x00\r\nQUIT\n\x22\x11\x00\x00",
    ] {
        let mut c = connect(addr);
        c.write_all(bad).unwrap();
        let seen = read_to_close(&mut c, GENEROUS);
        assert!(
            seen.is_closed() && seen.data().is_empty(),
            "{:?}: {seen:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // A header that never completes: closed once `timeout client` has passed.
    let mut c = connect(addr);
    c.write_all(b"PROXY TCP4 1.2").unwrap();
    let seen = read_to_close(&mut c, GENEROUS);
    assert!(seen.is_closed() && seen.data().is_empty(), "{seen:?}");
    // A client that closes before its header is complete.
    assert!(exchange(addr, b"PROXY TCP4").data().is_empty());
    assert_eq!(backend.accepted(), 0, "nothing reached the server");
}

/// An HTTP server answering every request on a connection with `pp=<PROXY line>;xff=<value>`
/// (the PROXY line it received first, if any, and the request's X-Forwarded-For).
fn reporting_http_backend() -> Backend {
    Backend::start(|s| {
        let mut writer = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let mut proxy_line = String::new();
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line.starts_with("PROXY ") {
                proxy_line = line.trim_end().to_owned();
                continue;
            }
            let mut xff = String::new();
            loop {
                let mut field = String::new();
                if r.read_line(&mut field).unwrap_or(0) == 0 {
                    return;
                }
                if field == "\r\n" {
                    break;
                }
                if let Some((name, value)) = field.split_once(':')
                    && name.eq_ignore_ascii_case("x-forwarded-for")
                {
                    xff = value.trim().to_owned();
                }
            }
            let body = format!("pp={proxy_line};xff={xff}");
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if writer.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    })
}

/// Sends one request (after `prefix`) on `c` and returns the body of the answer.
fn get_body(c: &mut TcpStream, prefix: &[u8]) -> String {
    c.write_all(prefix).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut length = 0;
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0u8; length];
    r.read_exact(&mut body).unwrap();
    String::from_utf8(body).unwrap()
}

const HTTP_DEFAULTS: &str = "\
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
";

#[test]
fn http_mode_uses_the_announced_client_for_x_forwarded_for() {
    let backend = reporting_http_backend();
    let (fe, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten app\n    option forwardfor\n    bind {} accept-proxy\n    server s1 {}\n",
        fd_bind(&fe),
        backend.addr()
    );
    let _proxy = common::sluice(&config).inherit(fe).start();
    let mut c = connect(addr);
    assert_eq!(get_body(&mut c, V1_HEADER), "pp=;xff=1.2.3.4");
    // The header is read once: the next request on the connection is plain HTTP.
    assert_eq!(get_body(&mut c, b""), "pp=;xff=1.2.3.4");
}

#[test]
fn http_send_proxy_connections_are_never_shared_between_clients() {
    // `http-reuse always` would hand an idle server connection to the next client; one that
    // carries a PROXY header must not be, or the server would see the wrong client.
    let backend = reporting_http_backend();
    let (fe, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten app\n    http-reuse always\n    bind {} accept-proxy\n    server s1 {} send-proxy\n",
        fd_bind(&fe),
        backend.addr()
    );
    let _proxy = common::sluice(&config).inherit(fe).start();
    for (n, client) in ["1.1.1.1", "2.2.2.2"].iter().enumerate() {
        let mut c = connect(addr);
        let header = format!("PROXY TCP4 {client} 5.6.7.8 1111 80\r\n");
        let want = format!("pp=PROXY TCP4 {client} 5.6.7.8 1111 80;xff=");
        assert_eq!(get_body(&mut c, header.as_bytes()), want);
        // The session keeps its own connection for its next request.
        assert_eq!(get_body(&mut c, b""), want);
        assert_eq!(backend.accepted(), n + 1);
        // Once the proxy closes our connection, the session has ended and handed its server
        // connection to the pool, if it were allowed to: the next client would then get it.
        c.shutdown(Shutdown::Write).unwrap();
        assert!(read_to_close(&mut c, GENEROUS).is_closed());
    }
}

#[test]
fn two_sluices_chain_send_proxy_v2_into_accept_proxy() {
    // client → first (send-proxy-v2) → second (accept-proxy, send-proxy) → echo: the echo
    // server sees the client of the first proxy.
    let backend = Backend::echo();
    let (fe2, addr2) = frontend();
    let _second = common::sluice(&listen(&fe2, "accept-proxy", backend.addr(), "send-proxy"))
        .inherit(fe2)
        .start();
    let (fe1, addr1) = frontend();
    let _first = common::sluice(&listen(&fe1, "", addr2, "send-proxy-v2"))
        .inherit(fe1)
        .start();
    let mut c = connect(addr1);
    let me = c.local_addr().unwrap();
    c.write_all(b"ping").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let want = format!(
        "PROXY TCP4 127.0.0.1 127.0.0.1 {} {}\r\nping",
        me.port(),
        addr1.port()
    );
    assert_eq!(
        read_to_close(&mut c, GENEROUS),
        Closed::Eof(want.into_bytes())
    );
}

/// Sends `data` on the unix socket at `path`, half-closes, and reads to the end.
fn unix_exchange(path: &std::path::Path, data: &[u8]) -> Vec<u8> {
    let mut c = std::os::unix::net::UnixStream::connect(path).unwrap();
    c.set_read_timeout(Some(GENEROUS)).unwrap();
    c.write_all(data).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    got
}

#[test]
fn unix_clients_are_announced_as_unknown_or_local_and_may_send_a_header() {
    // A unix socket client has no inet address: v1 says UNKNOWN, v2 sends a LOCAL header with
    // no address block (HAProxy 2.6 sends exactly these bytes). A unix listener may also
    // accept-proxy, as configuration.txt's example of an SSL offloader in front shows.
    let backend = Backend::echo();
    let dir = common::TempDir::new();
    let (v1, v2, pp) = (
        dir.join("v1.sock"),
        dir.join("v2.sock"),
        dir.join("pp.sock"),
    );
    let server = backend.addr();
    let config = format!(
        "{TCP_DEFAULTS}\n\
         listen v1\n    bind \"{}\"\n    server s1 {server} send-proxy\n\
         listen v2\n    bind \"{}\"\n    server s1 {server} send-proxy-v2\n\
         listen pp\n    bind \"{}\" accept-proxy\n    server s1 {server} send-proxy\n",
        v1.display(),
        v2.display(),
        pp.display()
    );
    let _proxy = common::sluice(&config).start();
    assert_eq!(unix_exchange(&v1, b"hi"), b"PROXY UNKNOWN\r\nhi");
    assert_eq!(
        unix_exchange(&v2, b"hi"),
        b"\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00hi"
    );
    let sent = [V1_HEADER, b"hi"].concat();
    assert_eq!(unix_exchange(&pp, &sent), sent);
}
