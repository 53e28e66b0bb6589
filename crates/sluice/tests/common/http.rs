//! HTTP helpers of the end-to-end tests: in-test HTTP servers that record what they receive,
//! a one-section proxy in front of them, and readers for the messages that come back.

use super::{Backend, Closed, GENEROUS, connect, fd_bind, frontend, read_to_close, sluice};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};

/// A request as an in-test server received it.
#[derive(Clone, Debug)]
pub struct Received {
    pub head: String,
    pub body: Vec<u8>,
}

impl Received {
    /// The value of the first header named `name` (case-insensitive), if any.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }

    pub fn request_line(&self) -> &str {
        self.head.lines().next().unwrap_or("")
    }
}

pub type Log = Arc<Mutex<Vec<Received>>>;

/// Reads one HTTP/1.x message (head, then a Content-Length or chunked body) from `r`.
/// Returns `None` at a clean end of stream before any byte.
pub fn read_message(r: &mut BufReader<TcpStream>) -> Option<Received> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) if head.is_empty() => return None,
            Ok(0) => panic!("end of stream inside a head: {head:?}"),
            Ok(_) => {}
            Err(e) => panic!("read error: {e}"),
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let rec = Received {
        head,
        body: Vec::new(),
    };
    let body = if let Some(len) = rec.header("content-length") {
        let mut body = vec![0; len.parse().unwrap()];
        r.read_exact(&mut body).unwrap();
        body
    } else if rec
        .header("transfer-encoding")
        .is_some_and(|te| te.ends_with("chunked"))
    {
        read_chunked(r)
    } else {
        Vec::new()
    };
    Some(Received { body, ..rec })
}

pub fn read_chunked(r: &mut BufReader<TcpStream>) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        r.read_line(&mut size).unwrap();
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap(), 16).unwrap();
        if size == 0 {
            // Trailers, then the empty line.
            loop {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                if line == "\r\n" {
                    return body;
                }
            }
        }
        let mut chunk = vec![0; size + 2];
        r.read_exact(&mut chunk).unwrap();
        body.extend_from_slice(&chunk[..size]);
    }
}

/// An HTTP server answering every request with `respond(request)` on kept-alive
/// connections, recording each request.
pub fn http_backend<F>(respond: F) -> (Backend, Log)
where
    F: Fn(&Received) -> String + Send + Sync + 'static,
{
    let log: Log = Arc::default();
    let seen = Arc::clone(&log);
    let backend = Backend::start(move |s| {
        let mut writer = s.try_clone().unwrap();
        let mut reader = BufReader::new(s);
        while let Some(req) = read_message(&mut reader) {
            let answer = respond(&req);
            seen.lock().unwrap().push(req.clone());
            if writer.write_all(answer.as_bytes()).is_err() {
                return;
            }
            if req
                .header("connection")
                .is_some_and(|c| c.eq_ignore_ascii_case("close"))
            {
                return;
            }
        }
    });
    (backend, log)
}

/// A backend that reads (the start of) one request per connection and answers `raw`, as is,
/// then closes: for servers that answer wrong, or answer and leave.
pub fn answering(raw: &'static [u8]) -> Backend {
    Backend::start(move |mut s| {
        let mut buf = [0u8; 4096];
        let _ = std::io::Read::read(&mut s, &mut buf);
        let _ = s.write_all(raw);
    })
}

/// A backend answering `200 OK` with body `ok` to everything.
pub fn ok_backend() -> (Backend, Log) {
    http_backend(|_| "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_owned())
}

pub const HTTP_DEFAULTS: &str = "\
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
";

/// Starts Sluice with one HTTP listen section `px` in front of `backend`, with `extra` lines in
/// the section. Returns the process and the frontend address.
pub fn proxy(backend: SocketAddr, extra: &str) -> (super::Sluice, SocketAddr) {
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten px\n    bind {}\n{extra}\n    server s1 {backend}\n",
        fd_bind(&listener)
    );
    (sluice(&config).inherit(listener).start(), addr)
}

/// Sends `raw` on a new connection and returns everything received until the proxy closes.
pub fn one_shot(addr: SocketAddr, raw: &[u8]) -> Closed {
    let mut s = connect(addr);
    s.write_all(raw).unwrap();
    read_to_close(&mut s, GENEROUS)
}

/// Sends `raw` on a new connection and reads until the proxy ends its side of it; returns what
/// came and the connection, whose client side is still open.
pub fn until_proxy_ends(addr: SocketAddr, raw: &[u8]) -> (String, TcpStream) {
    let mut s = connect(addr);
    s.write_all(raw).unwrap();
    match read_to_close(&mut s, GENEROUS) {
        Closed::Eof(data) => (String::from_utf8_lossy(&data).into_owned(), s),
        other => panic!("the proxy did not end the connection: {other:?}"),
    }
}

pub fn status_of(data: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(data);
    let line = text.lines().next().unwrap_or("");
    line.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// The data of the whole chunks in `received`, a head then a chunked body received so far.
pub fn whole_chunks(received: &[u8]) -> Vec<u8> {
    let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Vec::new();
    };
    let mut body = &received[at + 4..];
    let mut data = Vec::new();
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&body[..end]).unwrap(), 16).unwrap();
        if body.len() < end + 2 + size + 2 {
            break;
        }
        data.extend_from_slice(&body[end + 2..end + 2 + size]);
        body = &body[end + 2 + size + 2..];
    }
    data
}

/// What the start of a gzip stream decodes to, into `plain` (whose spare capacity bounds it):
/// the flushed pieces of a compressed answer still coming.
pub fn gunzip_prefix(compressed: &[u8], plain: &mut Vec<u8>) {
    // A 10-byte header, then deflate data.
    if compressed.len() > 10 {
        plain.clear();
        let _ = flate2::Decompress::new(false).decompress_vec(
            &compressed[10..],
            plain,
            flate2::FlushDecompress::Sync,
        );
    }
}

/// A WebSocket upgrade request.
pub const UPGRADE: &[u8] = b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/// A server that switches every request's connection to a tunnel, then echoes.
pub fn upgrading_backend() -> Backend {
    Backend::start(|mut s| {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut byte).unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        let answer = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
        if s.write_all(answer).is_err() {
            return;
        }
        super::echo_handler(s);
    })
}

/// Reads a message head, byte by byte so that nothing after it is taken.
pub fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "{head:?}");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

/// Opens a tunnel through the proxy: the 101 is read, then one echo round trip.
pub fn open_tunnel(addr: SocketAddr) -> TcpStream {
    let mut s = connect(addr);
    s.write_all(UPGRADE).unwrap();
    let head = read_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    s.write_all(b"ping").unwrap();
    assert_eq!(super::read_n(&mut s, 4), b"ping");
    s
}
