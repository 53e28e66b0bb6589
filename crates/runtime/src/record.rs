//! What happened to one stream, recorded when it ends: the raw material of HAProxy's log
//! lines (configuration.txt §8.2.2 "TCP log format", §8.2.3 "HTTP log format").
//!
//! The data path fills a [`StreamRecord`] (borrowed names, no allocation) and hands it to the
//! process's [`StreamLog`]. Today the only log is the `-d` debug output on stderr; the
//! logging issue adds syslog targets and `log-format`. [`StreamRecord::write_http_line`] and
//! [`StreamRecord::write_tcp_line`] already produce the default `option httplog` and
//! `option tcplog` lines, field for field (without captures, which do not exist yet).

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
    /// Connecting to the server (`C`).
    Connect,
    /// Waiting for the response head (`H`).
    Headers,
    /// Transferring data (`D`).
    Data,
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
            Cause::Killed => 'K',
        };
        let phase = match self.phase {
            Phase::Done => '-',
            Phase::Request => 'R',
            Phase::Connect => 'C',
            Phase::Headers => 'H',
            Phase::Data => 'D',
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
    /// `option httplog`'s line: `client:port [date] frontend backend/server
    /// TR/Tw/Tc/Tr/Ta status bytes - - term retries "request"` (captures and connection
    /// counts, which need the logging issue, are printed as `-` and `0`).
    pub fn write_http_line(&self, out: &mut String) {
        self.write_prefix(out);
        let t = &self.timers;
        let _ = write!(
            out,
            " {}/{}/{}/{}/{} {} {} - - {}{}-- 0/0/0/0/{} 0/0 \"",
            ms(t.request),
            ms(t.queue),
            ms(t.connect),
            ms(t.response),
            t.total.as_millis(),
            self.status.map_or(-1, i32::from),
            self.bytes_to_client,
            self.termination.chars()[0],
            self.termination.chars()[1],
            self.retries,
        );
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
            " {}/{}/{} {} {}{} 0/0/0/0/{} 0/0",
            ms(t.queue),
            ms(t.connect),
            t.total.as_millis(),
            self.bytes_to_client,
            self.termination.chars()[0],
            self.termination.chars()[1],
            self.retries,
        );
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

fn ms(d: Option<Duration>) -> i128 {
    d.map_or(-1, |d| d.as_millis() as i128)
}

/// HAProxy's log date, `22/Nov/2026:03:24:22.123`, in UTC.
pub fn write_date(when: SystemTime, out: &mut String) {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let since = when.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (year, month, day) = civil_from_days((secs / 86400) as i64);
    let _ = write!(
        out,
        "{day:02}/{}/{year}:{:02}:{:02}:{:02}.{:03}",
        MONTHS[(month - 1) as usize],
        secs % 86400 / 3600,
        secs % 3600 / 60,
        secs % 60,
        since.subsec_millis()
    );
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31), proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days` algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
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
        }
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
    fn dates_across_leap_years() {
        let mut out = String::new();
        write_date(UNIX_EPOCH + Duration::from_secs(951_782_400), &mut out); // 2000-02-29
        assert_eq!(out, "29/Feb/2000:00:00:00.000");
    }
}
