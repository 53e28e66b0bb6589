//! What happened to one stream, recorded when it ends: the raw material of HAProxy's log
//! lines (configuration.txt §8.2.2 "TCP log format", §8.2.3 "HTTP log format").
//!
//! The data path fills a [`StreamRecord`] (borrowed names, no allocation) and hands it to the
//! process's [`StreamLog`]. Today the only log is the `-d` debug output on stderr; the
//! logging issue adds syslog targets and `log-format`. [`StreamRecord::write_http_line`] and
//! [`StreamRecord::write_tcp_line`] already produce the default `option httplog` and
//! `option tcplog` lines, field for field (without captures, which do not exist yet).

use crate::capture::CaptureSet;
use sluice_sample::{LogFacts, LogNumber, LogText, civil};
use std::fmt::Write;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Who or what ended the stream: the first character of HAProxy's termination state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Normal end (`-`).
    Normal,
    /// The client aborted or sent something invalid (`C`).
    ClientAbort,
    /// The server aborted, refused or answered something invalid (`S`).
    ServerAbort,
    /// The proxy refused the request itself (`P`).
    Proxy,
    /// The client-side timeout struck (`c`).
    ClientTimeout,
    /// The server-side timeout struck (`s`).
    ServerTimeout,
    /// A local resource was missing (`R`), e.g. no server to send the request to.
    Resource,
    /// The proxy answered the request itself (`L`): `return`, `redirect`, the monitor URI.
    Local,
    /// The session was killed by the proxy (`K`), e.g. `on-marked-down shutdown-sessions`.
    Killed,
}

/// How far the stream had got: the second character of the termination state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Normal end (`-`).
    Done,
    /// Waiting for the request (`R`).
    Request,
    /// Waiting in a queue for a server slot (`Q`).
    Queue,
    /// Connecting to the server (`C`).
    Connect,
    /// Waiting for the response head (`H`).
    Headers,
    /// Transferring data (`D`).
    Data,
    /// Held by `http-request tarpit` (`T`).
    Tarpit,
}

/// The two termination characters, e.g. `--`, `CD`, `sH`, `SC`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Termination {
    /// Who ended it.
    pub cause: Cause,
    /// Where it was.
    pub phase: Phase,
}

impl Termination {
    /// A stream that ended normally.
    pub const NORMAL: Termination = Termination {
        cause: Cause::Normal,
        phase: Phase::Done,
    };

    /// The two characters of the log line.
    pub fn chars(self) -> [char; 2] {
        let cause = match self.cause {
            Cause::Normal => '-',
            Cause::ClientAbort => 'C',
            Cause::ServerAbort => 'S',
            Cause::Proxy => 'P',
            Cause::ClientTimeout => 'c',
            Cause::ServerTimeout => 's',
            Cause::Resource => 'R',
            Cause::Local => 'L',
            Cause::Killed => 'K',
        };
        let phase = match self.phase {
            Phase::Done => '-',
            Phase::Request => 'R',
            Phase::Queue => 'Q',
            Phase::Connect => 'C',
            Phase::Headers => 'H',
            Phase::Data => 'D',
            Phase::Tarpit => 'T',
        };
        [cause, phase]
    }
}

/// The timers of one stream; `None` where the step never happened (printed as `-1`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timers {
    /// `TR`: receiving the request head.
    pub request: Option<Duration>,
    /// `Tw`: waiting in queues.
    pub queue: Option<Duration>,
    /// `Tc`: connecting to the server (0 for a reused connection).
    pub connect: Option<Duration>,
    /// `Tr`: from the request sent to the response head received.
    pub response: Option<Duration>,
    /// `Ta` (HTTP) / `Tt` (TCP): the whole stream.
    pub total: Duration,
}

/// The two ends of the stream's server connection, as `%bi:%bp` and `%si:%sp` log them:
/// kept only for a frontend whose log line prints them (`FrontendLog::logs_server_ends`),
/// since reading them costs two system calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerEnds {
    /// The connection's own address (`%bi`, `bc_src`).
    pub local: Option<SocketAddr>,
    /// The server's address (`%si`, `bc_dst`).
    pub server: Option<SocketAddr>,
    /// The connection was made: false for an attempt that failed, whose ends say where it
    /// was tried from and at (`bc_err` then has no value, as in HAProxy).
    pub connected: bool,
}

/// What happened to one stream (one HTTP request/response, or one TCP session).
#[derive(Clone, Copy, Debug)]
pub struct StreamRecord<'a> {
    /// When the stream started (the accept for TCP, the request's start for HTTP).
    pub start: SystemTime,
    /// The client's address.
    pub client: Option<SocketAddr>,
    /// The frontend's name.
    pub frontend: &'a str,
    /// The backend's name, if one was chosen.
    pub backend: Option<&'a str>,
    /// The server's name, if one was chosen.
    pub server: Option<&'a str>,
    /// Timers.
    pub timers: Timers,
    /// The HTTP status sent to the client (HTTP only).
    pub status: Option<u16>,
    /// Bytes sent to the client.
    pub bytes_to_client: u64,
    /// Bytes received from the client.
    pub bytes_from_client: u64,
    /// How it ended.
    pub termination: Termination,
    /// Connection retries made.
    pub retries: u32,
    /// The request line as received (HTTP only).
    pub request_line: Option<&'a [u8]>,
    /// The version of the server's response, `HTTP/1.1`, when one came (HTTP only).
    pub response_version: Option<&'static [u8]>,
    /// Connection and queue counts when the stream ended.
    pub counts: Counts,
    /// Captured headers and samples (HTTP only; `None` or empty prints nothing).
    pub captures: Option<&'a CaptureSet>,
    /// Logged before the stream ended (`option logasap`): the total time and the bytes are
    /// only those so far, printed with a `+` as HAProxy does.
    pub early: bool,
    /// The server connection's addresses, when the log line needs them.
    pub server_ends: ServerEnds,
    /// An HTTP stream (a request and its response), not a TCP session.
    pub http: bool,
    /// The request went over a server connection an earlier one left open (`bc_reused`).
    pub reused: bool,
    /// The algorithm the proxy compressed the response with (`res.comp_algo`).
    pub compression: Option<&'static str>,
}

/// The connection and queue counts a log line shows (`%ac/%fc/%bc/%sc` and `%sq/%bq`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Connections of the process.
    pub process: u64,
    /// Connections of the frontend.
    pub frontend: u64,
    /// Connections of the backend.
    pub backend: u64,
    /// Connections of the server.
    pub server: u64,
    /// Requests waiting in the server's queue.
    pub server_queue: u64,
    /// Requests waiting in the backend's queues.
    pub backend_queue: u64,
}

/// A record as the sample engine's log-format aliases read it (`%Tw`, `%ts`, `%B`...).
pub struct RecordFacts<'r> {
    record: &'r StreamRecord<'r>,
    termination: [u8; 2],
    termination_cookie: [u8; 4],
    unique_id: Option<Vec<u8>>,
    connection_error: Option<(u8, &'static str)>,
}

impl<'r> RecordFacts<'r> {
    /// The facts of `record`.
    pub fn new(record: &'r StreamRecord<'r>) -> Self {
        let [a, b] = record.termination.chars();
        let (a, b) = (a as u8, b as u8);
        RecordFacts {
            record,
            termination: [a, b],
            termination_cookie: [a, b, b'-', b'-'],
            unique_id: None,
            connection_error: None,
        }
    }

    /// The same facts for a connection that failed before it became a stream (`fc_err`).
    pub fn with_connection_error(self, error: (u8, &'static str)) -> Self {
        RecordFacts {
            connection_error: Some(error),
            ..self
        }
    }

    /// The same facts with the request's unique id (`%ID`).
    pub fn with_unique_id(self, unique_id: Option<Vec<u8>>) -> Self {
        RecordFacts { unique_id, ..self }
    }
}

impl LogFacts for RecordFacts<'_> {
    fn accept_date(&self) -> Option<SystemTime> {
        Some(self.record.start)
    }

    fn request_date(&self) -> Option<SystemTime> {
        Some(self.record.start)
    }

    fn number(&self, which: LogNumber) -> Option<i64> {
        let r = self.record;
        let t = &r.timers;
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as i64);
        match which {
            LogNumber::RequestHead | LogNumber::Request => ms(t.request),
            LogNumber::Handshake | LogNumber::Idle => Some(0),
            LogNumber::Queue => ms(t.queue).or(Some(-1)),
            LogNumber::Connect => ms(t.connect).or(Some(-1)),
            LogNumber::Response => ms(t.response).or(Some(-1)),
            LogNumber::Active | LogNumber::Total | LogNumber::User => ms(Some(t.total)),
            // The data phase starts with the response head in HTTP, once connected in TCP:
            // without it, -1 (HAProxy's).
            LogNumber::Data => {
                let started = if r.http { t.response } else { t.connect };
                if started.is_none() {
                    return Some(-1);
                }
                let before: u128 = [t.request, t.queue, t.connect, t.response]
                    .iter()
                    .flatten()
                    .map(Duration::as_millis)
                    .sum();
                Some(t.total.as_millis().saturating_sub(before) as i64)
            }
            LogNumber::BytesFromClient => Some(r.bytes_from_client as i64),
            LogNumber::BytesToClient => Some(r.bytes_to_client as i64),
            LogNumber::ProcessConnections => Some(r.counts.process as i64),
            LogNumber::FrontendConnections => Some(r.counts.frontend as i64),
            LogNumber::BackendQueue => Some(r.counts.backend_queue as i64),
            LogNumber::ServerQueue => Some(r.counts.server_queue as i64),
            LogNumber::Retries => Some(i64::from(r.retries)),
            LogNumber::Pid => Some(i64::from(std::process::id())),
            // An HTTP request the proxy closed unanswered (`reject`): HAProxy's -1.
            LogNumber::Status => Some(r.status.map_or(-1, i64::from)),
            _ => None,
        }
    }

    fn connection_error(&self) -> Option<(u8, &'static str)> {
        self.connection_error
    }

    fn backend_source(&self) -> Option<SocketAddr> {
        self.record.server_ends.local
    }

    fn server_connected(&self) -> bool {
        self.record.server_ends.connected
    }

    fn reused_server_connection(&self) -> bool {
        self.record.reused
    }

    fn compression(&self) -> Option<&str> {
        self.record.compression
    }

    fn server_address(&self) -> Option<SocketAddr> {
        self.record.server_ends.server
    }

    fn incomplete(&self, which: LogNumber) -> bool {
        self.record.early
            && matches!(
                which,
                LogNumber::Active | LogNumber::Total | LogNumber::User | LogNumber::BytesToClient
            )
    }

    fn text(&self, which: LogText) -> Option<&[u8]> {
        match which {
            LogText::TerminationState => Some(&self.termination),
            LogText::TerminationStateCookie => Some(&self.termination_cookie),
            LogText::UniqueId => self.unique_id.as_deref(),
            LogText::ResponseVersion => self.record.response_version,
            LogText::RequestCookie => self.record.captures?.cookie(false),
            LogText::ResponseCookie => self.record.captures?.cookie(true),
            _ => None,
        }
    }

    fn captured_header_count(&self, response: bool) -> usize {
        self.record.captures.map_or(0, |c| c.count(response))
    }

    fn captured_header(&self, response: bool, index: usize) -> Option<&[u8]> {
        self.record.captures?.get(response, index)
    }
}

/// Where finished streams are reported.
pub trait StreamLog: Send + Sync + std::fmt::Debug {
    /// Reports one finished HTTP stream.
    fn http(&self, record: &StreamRecord<'_>);
    /// Reports one finished TCP session.
    fn tcp(&self, record: &StreamRecord<'_>);
}

/// The `-d` debug log: one line per stream on stderr, in HAProxy's default formats.
#[derive(Debug)]
pub struct StderrLog;

impl StreamLog for StderrLog {
    fn http(&self, record: &StreamRecord<'_>) {
        let mut line = String::with_capacity(200);
        record.write_http_line(&mut line);
        eprintln!("{line}");
    }

    fn tcp(&self, record: &StreamRecord<'_>) {
        let mut line = String::with_capacity(160);
        record.write_tcp_line(&mut line);
        eprintln!("{line}");
    }
}

impl StreamRecord<'_> {
    /// Whether the stream counts as an error for `option log-separate-errors` and `option
    /// dontlog-normal`, as HAProxy counts it: it ended otherwise than normally or by an answer
    /// of the proxy's own, or needed retries, or got a 5xx status.
    pub fn is_error(&self) -> bool {
        let cause = self.termination.cause;
        self.status.is_some_and(|s| s >= 500)
            || !matches!(cause, Cause::Normal | Cause::Local)
            || (cause == Cause::Normal && self.retries > 0)
    }

    /// `option httplog`'s line: `client:port [date] frontend backend/server
    /// TR/Tw/Tc/Tr/Ta status bytes - - term counts queues {captures} {captures} "request"`
    /// (the two cookies `capture cookie` took, `-` when none; each `{...}` only when the
    /// frontend declares captures of that side).
    pub fn write_http_line(&self, out: &mut String) {
        self.write_prefix(out);
        let t = &self.timers;
        let cookie = |response: bool| {
            self.captures
                .and_then(|c| c.cookie(response))
                .map_or(std::borrow::Cow::Borrowed("-"), String::from_utf8_lossy)
        };
        let _ = write!(
            out,
            " {}/{}/{}/{}/{}{} {} {}{} {} {} {}{}-- {}/{}/{}/{}/{} {}/{} \"",
            ms(t.request),
            ms(t.queue),
            ms(t.connect),
            ms(t.response),
            self.plus(),
            t.total.as_millis(),
            self.status.map_or(-1, i32::from),
            self.plus(),
            self.bytes_to_client,
            cookie(false),
            cookie(true),
            self.termination.chars()[0],
            self.termination.chars()[1],
            self.counts.process,
            self.counts.frontend,
            self.counts.backend,
            self.counts.server,
            self.retries,
            self.counts.server_queue,
            self.counts.backend_queue,
        );
        if let Some(captures) = self.captures {
            for response in [false, true] {
                write_captures(captures, response, out);
            }
        }
        if let Some(line) = self.request_line {
            out.push_str(&String::from_utf8_lossy(line));
        } else {
            out.push_str("<BADREQ>");
        }
        out.push('"');
    }

    /// `option tcplog`'s line: `client:port [date] frontend backend/server Tw/Tc/Tt bytes
    /// term counts queues`.
    pub fn write_tcp_line(&self, out: &mut String) {
        self.write_prefix(out);
        let t = &self.timers;
        let _ = write!(
            out,
            " {}/{}/{}{} {}{} {}{} {}/{}/{}/{}/{} {}/{}",
            ms(t.queue),
            ms(t.connect),
            self.plus(),
            t.total.as_millis(),
            self.plus(),
            self.bytes_to_client,
            self.termination.chars()[0],
            self.termination.chars()[1],
            self.counts.process,
            self.counts.frontend,
            self.counts.backend,
            self.counts.server,
            self.retries,
            self.counts.server_queue,
            self.counts.backend_queue,
        );
    }

    /// `option httplog clf`'s line: the Common Log Format, then HAProxy's extra fields.
    pub fn write_clf_line(&self, out: &mut String) {
        match self.client {
            Some(addr) => {
                let _ = write!(out, "{}", addr.ip());
            }
            None => out.push_str("unix"),
        }
        out.push_str(" - - [");
        let mut date = String::with_capacity(24);
        write_date(self.start, &mut date);
        // The CLF date has no milliseconds and names its zone.
        out.push_str(date.split('.').next().unwrap_or(&date));
        out.push_str(" +0000] \"");
        match self.request_line {
            Some(line) => out.push_str(&String::from_utf8_lossy(line)),
            None => out.push_str("<BADREQ>"),
        }
        let t = &self.timers;
        let c = &self.counts;
        let since = self.start.duration_since(UNIX_EPOCH).unwrap_or_default();
        let _ = write!(
            out,
            "\" {} {}{} \"\" \"\" {} {} \"{}\" \"{}\" \"{}\" {} {} {} {} {}{} {}{}-- {} {} {} {} {} {} {} \"\" \"\" ",
            self.status.map_or(-1, i32::from),
            self.plus(),
            self.bytes_to_client,
            self.client.map_or(0, |a| a.port()),
            since.subsec_millis(),
            self.frontend,
            self.backend.unwrap_or(self.frontend),
            self.server.unwrap_or("<NOSRV>"),
            ms(t.request),
            ms(t.queue),
            ms(t.connect),
            ms(t.response),
            self.plus(),
            t.total.as_millis(),
            self.termination.chars()[0],
            self.termination.chars()[1],
            c.process,
            c.frontend,
            c.backend,
            c.server,
            self.retries,
            c.server_queue,
            c.backend_queue,
        );
    }

    /// `+` before the numbers that are only values so far (`option logasap`).
    fn plus(&self) -> &'static str {
        if self.early { "+" } else { "" }
    }

    fn write_prefix(&self, out: &mut String) {
        match self.client {
            Some(addr) => {
                let _ = write!(out, "{}:{}", addr.ip(), addr.port());
            }
            None => out.push_str("unix:0"),
        }
        out.push_str(" [");
        write_date(self.start, out);
        let _ = write!(
            out,
            "] {} {}/{}",
            self.frontend,
            self.backend.unwrap_or(self.frontend),
            self.server.unwrap_or("<NOSRV>")
        );
    }
}

/// ` {a|b}` for the captures of one side, escaped as HAProxy's header captures are (bytes
/// outside 32..=126 and `"`, `#`, `{`, `|`, `}` as `#XX`), placed before the request's
/// opening quote already written.
fn write_captures(captures: &CaptureSet, response: bool, out: &mut String) {
    let count = captures.count(response);
    if count == 0 {
        return;
    }
    // The opening quote of the request is the last character written.
    out.pop();
    out.push('{');
    for index in 0..count {
        if index > 0 {
            out.push('|');
        }
        for &b in captures.get(response, index).unwrap_or_default() {
            if (32..=126).contains(&b) && !b"\"#{|}".contains(&b) {
                out.push(char::from(b));
            } else {
                let _ = write!(out, "#{b:02X}");
            }
        }
    }
    out.push_str("} \"");
}

fn ms(d: Option<Duration>) -> i128 {
    d.map_or(-1, |d| d.as_millis() as i128)
}

/// HAProxy's log date, `22/Nov/2026:03:24:22.123`, in UTC.
pub fn write_date(when: SystemTime, out: &mut String) {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let since = when.duration_since(UNIX_EPOCH).unwrap_or_default();
    let c = civil(i64::try_from(since.as_secs()).unwrap_or(i64::MAX));
    let _ = write!(
        out,
        "{:02}/{}/{}:{:02}:{:02}:{:02}.{:03}",
        c.day,
        MONTHS[c.month % 12],
        c.year,
        c.hour,
        c.minute,
        c.second,
        since.subsec_millis()
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn record() -> StreamRecord<'static> {
        StreamRecord {
            start: UNIX_EPOCH + Duration::from_millis(1_795_318_662_123),
            client: Some("127.0.0.1:41892".parse().unwrap_or_else(|_| unreachable!())),
            frontend: "fe",
            backend: Some("be"),
            server: Some("s1"),
            timers: Timers {
                request: Some(Duration::from_millis(2)),
                queue: Some(Duration::ZERO),
                connect: Some(Duration::from_millis(1)),
                response: Some(Duration::from_millis(5)),
                total: Duration::from_millis(9),
            },
            status: Some(200),
            bytes_to_client: 146,
            bytes_from_client: 80,
            termination: Termination::NORMAL,
            retries: 0,
            request_line: Some(b"GET / HTTP/1.1"),
            response_version: Some(b"HTTP/1.1"),
            counts: Counts::default(),
            captures: None,
            early: false,
            server_ends: ServerEnds::default(),
            http: true,
            reused: false,
            compression: None,
        }
    }

    #[test]
    fn errors_are_what_haproxy_counts_as_errors() {
        let ended = |cause, status: Option<u16>, retries| StreamRecord {
            termination: Termination {
                cause,
                phase: Phase::Done,
            },
            status,
            retries,
            ..record()
        };
        assert!(!ended(Cause::Normal, Some(200), 0).is_error());
        assert!(!ended(Cause::Local, Some(302), 0).is_error());
        assert!(!ended(Cause::Normal, Some(404), 0).is_error());
        assert!(!ended(Cause::Normal, None, 0).is_error());
        assert!(ended(Cause::Normal, Some(503), 0).is_error());
        assert!(ended(Cause::Normal, Some(200), 1).is_error());
        assert!(ended(Cause::ClientAbort, Some(200), 0).is_error());
        assert!(ended(Cause::Proxy, Some(403), 0).is_error());
        assert!(ended(Cause::ServerTimeout, None, 0).is_error());
    }

    #[test]
    fn the_data_time_starts_with_the_response_or_the_connection() {
        let data = |r: &StreamRecord<'_>| RecordFacts::new(r).number(LogNumber::Data);
        // 9 ms in all, of which 2 + 0 + 1 + 5 before the response's body.
        let answered = record();
        assert_eq!(data(&answered), Some(1));
        // No response head (the proxy answered, the server timed out): none, -1.
        let mut unanswered = record();
        unanswered.timers.response = None;
        assert_eq!(data(&unanswered), Some(-1));
        // A TCP session's data phase starts once connected.
        let mut tcp = record();
        tcp.http = false;
        tcp.timers.request = None;
        tcp.timers.response = None;
        assert_eq!(data(&tcp), Some(8));
        tcp.timers.connect = None;
        assert_eq!(data(&tcp), Some(-1));
    }

    #[test]
    fn early_lines_mark_partial_numbers() {
        // configuration.txt `option logasap`: the total time and the bytes get a `+`.
        let mut r = record();
        r.early = true;
        let mut line = String::new();
        r.write_http_line(&mut line);
        assert!(line.contains(" 2/0/1/5/+9 200 +146 - - ---- "), "{line}");
        let mut line = String::new();
        r.write_tcp_line(&mut line);
        assert!(line.ends_with(" 0/1/+9 +146 -- 0/0/0/0/0 0/0"), "{line}");
        let facts = RecordFacts::new(&r);
        assert!(facts.incomplete(LogNumber::BytesToClient));
        assert!(facts.incomplete(LogNumber::Active));
        assert!(!facts.incomplete(LogNumber::Connect));
    }

    #[test]
    fn http_line_has_haproxy_fields_in_order() {
        let mut line = String::new();
        record().write_http_line(&mut line);
        assert_eq!(
            line,
            "127.0.0.1:41892 [22/Nov/2026:03:37:42.123] fe be/s1 2/0/1/5/9 200 146 - - ---- 0/0/0/0/0 0/0 \"GET / HTTP/1.1\""
        );
    }

    #[test]
    fn http_line_shows_captures_like_haproxy() {
        // The values and their escaping as HAProxy 2.6 logged them.
        let mut captures = CaptureSet::default();
        captures.reset(4, 2);
        captures.store(false, 0, b"www.example.com", 5);
        captures.store(false, 2, b"/x/y/zzzzzzzz", 8);
        captures.store(false, 3, b"\"|{x}", 4);
        captures.store(true, 0, b"text/html; charset=utf-8", 20);
        captures.store(true, 1, b"va|lue{x}", 6);
        let mut r = record();
        r.captures = Some(&captures);
        let mut line = String::new();
        r.write_http_line(&mut line);
        assert!(
            line.ends_with(
                " 0/0 {www.e||/x/y/zzz|#22#7C#7Bx} {text/html; charset=u|va#7Clue} \"GET / HTTP/1.1\""
            ),
            "{line}"
        );
        // Only the sides with slots are shown; a set without slots shows nothing.
        let mut one = CaptureSet::default();
        one.reset(1, 0);
        let mut line = String::new();
        r.captures = Some(&one);
        r.write_http_line(&mut line);
        assert!(line.ends_with(" 0/0 {} \"GET / HTTP/1.1\""), "{line}");
        let none = CaptureSet::default();
        r.captures = Some(&none);
        let mut line = String::new();
        r.write_http_line(&mut line);
        assert!(line.ends_with(" 0/0 \"GET / HTTP/1.1\""), "{line}");
    }

    #[test]
    fn tcp_line_and_termination_codes() {
        let mut r = record();
        r.server = None;
        r.timers.connect = None;
        r.termination = Termination {
            cause: Cause::ServerAbort,
            phase: Phase::Connect,
        };
        let mut line = String::new();
        r.write_tcp_line(&mut line);
        assert_eq!(
            line,
            "127.0.0.1:41892 [22/Nov/2026:03:37:42.123] fe be/<NOSRV> 0/-1/9 146 SC 0/0/0/0/0 0/0"
        );
    }

    #[test]
    fn clf_line_has_haproxy_fields_in_order() {
        let mut line = String::new();
        record().write_clf_line(&mut line);
        let date_end = line.find(']').unwrap();
        assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
        assert!(line[..date_end].ends_with(" +0000"), "{line}");
        assert!(
            line[date_end..].starts_with("] \"GET / HTTP/1.1\" 200 "),
            "{line}"
        );
        assert!(line.ends_with(" \"\" \"\" "), "{line}");
    }

    #[test]
    fn dates_across_leap_years() {
        let mut out = String::new();
        write_date(UNIX_EPOCH + Duration::from_secs(951_782_400), &mut out); // 2000-02-29
        assert_eq!(out, "29/Feb/2000:00:00:00.000");
    }
}
