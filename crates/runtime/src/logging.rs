//! Log lines on their way out (configuration.txt §4.2 `log`, §8.1): syslog headers, level
//! filters, sampling, truncation, and one writer thread that owns every target.
//!
//! The data path never waits for a log target: it formats the message, then each
//! [`ProxyLogger`] builds the framed line for each of its targets and hands it to the
//! [`LogHub`]'s bounded queue with `try_send`. When the queue is full (a slow or absent
//! syslog server) the line is dropped and counted in [`LogHub::dropped`], as HAProxy drops
//! and counts. The writer thread sends UDP datagrams, unix datagrams (`/dev/log`), writes
//! to stdout/stderr and stores events in `ring` buffers ([`crate::ring`]).

use crate::counters::Counter;
use crate::ring::Ring;
use sluice_config::logging::{LogAddr, LogTarget, SyslogFormat};
use sluice_sample::civil;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::UdpSocket;
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::time::{SystemTime, UNIX_EPOCH};

/// Lines waiting for the writer thread; past this, lines are dropped.
const QUEUE_DEPTH: usize = 4096;

/// Syslog severities used for traffic logs.
pub mod level {
    /// `alert`: something the administrator must fix (`option checkcache` blocking a
    /// response).
    pub const ALERT: u8 = 1;
    /// `err`: streams that ended in error with `option log-separate-errors`.
    pub const ERR: u8 = 3;
    /// `info`: traffic.
    pub const INFO: u8 = 6;
}

/// The process's log output: the writer thread's queue and the targets it serves.
#[derive(Debug)]
pub struct LogHub {
    sender: SyncSender<(usize, Vec<u8>)>,
    /// Lines dropped because the queue was full or a target failed.
    pub dropped: Arc<Counter>,
    /// The targets, and the lines each lost (`show events` per sink).
    targets: Vec<LogAddr>,
    dropped_by_target: Arc<Vec<Counter>>,
    pid: u32,
    /// The host names the headers carry, read once.
    hosts: Hosts,
}

/// The host name of the syslog headers.
#[derive(Debug)]
struct Hosts {
    /// `log-send-hostname`: the name the formats with the field send (and the default
    /// format becomes `rfc3164`); without it, `rfc3164` says `localhost`, as HAProxy 2.6 does.
    sent: Option<String>,
}

impl LogHub {
    /// Starts the writer thread for `targets` (indices into it are the target ids used by
    /// [`ProxyLogger`]s); `ring@NAME` targets are found in `rings`. `send_hostname` is
    /// `log-send-hostname`: `Some(None)` sends the system's name.
    pub fn start(
        targets: Vec<LogAddr>,
        rings: &[Arc<Ring>],
        send_hostname: Option<Option<String>>,
    ) -> std::io::Result<Arc<LogHub>> {
        let sinks = targets
            .iter()
            .cloned()
            .map(|addr| Sink::open(addr, rings))
            .collect::<std::io::Result<Vec<_>>>()?;
        let (sender, receiver) = mpsc::sync_channel::<(usize, Vec<u8>)>(QUEUE_DEPTH);
        let dropped = Arc::new(Counter::default());
        let dropped_by_target: Arc<Vec<Counter>> =
            Arc::new(targets.iter().map(|_| Counter::default()).collect());
        let (failures, failures_by_target) = (Arc::clone(&dropped), Arc::clone(&dropped_by_target));
        std::thread::Builder::new()
            .name("sluice-log".to_owned())
            .spawn(move || {
                for (target, line) in receiver {
                    let sent = sinks.get(target).is_some_and(|sink| sink.send(&line));
                    if !sent {
                        failures.incr();
                        if let Some(counter) = failures_by_target.get(target) {
                            counter.incr();
                        }
                    }
                }
            })?;
        Ok(Arc::new(LogHub {
            sender,
            dropped,
            targets,
            dropped_by_target,
            pid: std::process::id(),
            hosts: Hosts {
                // An empty name is the system's, as HAProxy takes it.
                sent: send_hostname.map(|name| {
                    name.filter(|n| !n.is_empty())
                        .unwrap_or_else(|| hostname().to_owned())
                }),
            },
        }))
    }

    fn push(&self, target: usize, line: Vec<u8>) {
        match self.sender.try_send((target, line)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.incr();
                if let Some(counter) = self.dropped_by_target.get(target) {
                    counter.incr();
                }
            }
        }
    }

    /// The lines `addr` lost (0 for a target the hub does not serve).
    pub fn dropped_for(&self, addr: &LogAddr) -> u64 {
        self.targets
            .iter()
            .position(|a| a == addr)
            .and_then(|i| self.dropped_by_target.get(i))
            .map_or(0, Counter::get)
    }
}

/// An open log target.
enum Sink {
    Udp(UdpSocket, std::net::SocketAddr),
    Unix(UnixDatagram, std::path::PathBuf),
    Stdout,
    Stderr,
    Ring(Arc<Ring>),
}

impl Sink {
    fn open(addr: LogAddr, rings: &[Arc<Ring>]) -> std::io::Result<Sink> {
        Ok(match addr {
            LogAddr::Udp(to) => {
                let local = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
                Sink::Udp(UdpSocket::bind(local)?, to)
            }
            LogAddr::Unix(path) => Sink::Unix(UnixDatagram::unbound()?, path),
            LogAddr::Fd(2) => Sink::Stderr,
            LogAddr::Fd(_) => Sink::Stdout,
            LogAddr::Ring(name) => Sink::Ring(
                rings
                    .iter()
                    .find(|r| r.name == name)
                    .cloned()
                    .ok_or_else(|| {
                        std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            format!("no ring named '{name}'"),
                        )
                    })?,
            ),
        })
    }

    fn send(&self, line: &[u8]) -> bool {
        match self {
            Sink::Udp(socket, to) => socket.send_to(line, to).is_ok(),
            Sink::Unix(socket, path) => socket.send_to(line, path).is_ok(),
            Sink::Stdout => std::io::stdout().lock().write_all(line).is_ok(),
            Sink::Stderr => std::io::stderr().lock().write_all(line).is_ok(),
            // A ring holds events without their line ends; `show events` adds them back.
            Sink::Ring(ring) => {
                ring.push(line.strip_suffix(b"\n").unwrap_or(line));
                true
            }
        }
    }
}

/// The log targets of one proxy and how its lines are framed.
#[derive(Debug)]
pub struct ProxyLogger {
    hub: Arc<LogHub>,
    targets: Vec<(usize, LogTarget)>,
    tag: String,
    /// Lines emitted, for `sample` ranges.
    emitted: AtomicU64,
}

impl ProxyLogger {
    /// A logger sending to `targets` (hub id, settings) with the syslog tag `tag`.
    pub fn new(hub: Arc<LogHub>, targets: Vec<(usize, LogTarget)>, tag: String) -> Self {
        ProxyLogger {
            hub,
            targets,
            tag,
            emitted: AtomicU64::new(0),
        }
    }

    /// Sends `message` at severity `level` to every target that accepts it.
    pub fn emit(&self, level: u8, message: &[u8]) {
        self.emit_with_data(level, message, None);
    }

    /// [`emit`](Self::emit), with `structured` as the RFC 5424 structured data of the
    /// targets in that format (`log-format-sd`; the others ignore it).
    pub fn emit_with_data(&self, level: u8, message: &[u8], structured: Option<&[u8]>) {
        let number = self.emitted.fetch_add(1, Ordering::Relaxed);
        let now = SystemTime::now();
        for (id, target) in &self.targets {
            if level > target.max_level || !sampled(target, number) {
                continue;
            }
            let level = level.max(target.min_level);
            let mut line = Vec::with_capacity(message.len() + 64);
            let header = Header {
                level,
                tag: &self.tag,
                pid: self.hub.pid,
                now,
                structured,
                hosts: &self.hub.hosts,
            };
            write_header(target, &header, &mut line);
            let room = target.max_len.saturating_sub(line.len() + 1);
            line.extend_from_slice(&message[..message.len().min(room)]);
            line.push(b'\n');
            self.hub.push(*id, line);
        }
    }
}

/// Whether line `number` (from 0) falls in the target's `sample` ranges.
fn sampled(target: &LogTarget, number: u64) -> bool {
    match &target.sample {
        None => true,
        Some((ranges, size)) => {
            let position = (number % u64::from(*size)) + 1;
            ranges
                .iter()
                .any(|(low, high)| (u64::from(*low)..=u64::from(*high)).contains(&position))
        }
    }
}

/// What a line's syslog header says besides its target's settings.
struct Header<'a> {
    level: u8,
    tag: &'a str,
    pid: u32,
    now: SystemTime,
    /// RFC 5424 structured data (`log-format-sd`), `-` when none.
    structured: Option<&'a [u8]>,
    hosts: &'a Hosts,
}

/// Writes the syslog header of `target`'s format, as HAProxy 2.6 writes them.
fn write_header(target: &LogTarget, header: &Header<'_>, out: &mut Vec<u8>) {
    let Header {
        level,
        tag,
        pid,
        now,
        structured,
        hosts,
    } = *header;
    let priority = u32::from(target.facility) * 8 + u32::from(level);
    let mut text = String::with_capacity(64);
    match target.format {
        SyslogFormat::Default | SyslogFormat::Local | SyslogFormat::Rfc3164 => {
            let _ = write!(text, "<{priority}>");
            write_bsd_date(now, &mut text);
            // `local` has no host name; the default format has one under
            // `log-send-hostname` (it is `rfc3164` then).
            let host = match target.format {
                SyslogFormat::Rfc3164 => Some(hosts.sent.as_deref().unwrap_or("localhost")),
                SyslogFormat::Default => hosts.sent.as_deref(),
                _ => None,
            };
            if let Some(host) = host {
                text.push(' ');
                text.push_str(host);
            }
            let _ = write!(text, " {tag}[{pid}]: ");
        }
        SyslogFormat::Rfc5424 => {
            let _ = write!(text, "<{priority}>1 ");
            write_iso_date(now, &mut text);
            let host = hosts.sent.as_deref().unwrap_or("-");
            let _ = write!(text, " {host} {tag} {pid} - ");
            // The structured data goes between the header's text and the message.
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(structured.filter(|d| !d.is_empty()).unwrap_or(b"-"));
            out.push(b' ');
            return;
        }
        SyslogFormat::Priority => {
            let _ = write!(text, "<{priority}>");
        }
        SyslogFormat::Short => {
            let _ = write!(text, "<{level}>");
        }
        SyslogFormat::Timed => {
            let _ = write!(text, "<{level}>");
            write_iso_date(now, &mut text);
            text.push(' ');
        }
        SyslogFormat::Iso => {
            write_iso_date(now, &mut text);
            text.push(' ');
        }
        SyslogFormat::Raw => {}
    }
    out.extend_from_slice(text.as_bytes());
}

/// `Mmm dd hh:mm:ss` (RFC 3164 §4.1.2: the day padded with a space), in UTC.
fn write_bsd_date(now: SystemTime, out: &mut String) {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let c = civil(i64::try_from(secs).unwrap_or(i64::MAX));
    let _ = write!(
        out,
        "{} {:2} {:02}:{:02}:{:02}",
        MONTHS[c.month % 12],
        c.day,
        c.hour,
        c.minute,
        c.second
    );
}

/// `2026-11-22T05:57:25.116877+00:00`, in UTC.
fn write_iso_date(now: SystemTime, out: &mut String) {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let c = civil(i64::try_from(since.as_secs()).unwrap_or(i64::MAX));
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        c.year,
        c.month + 1,
        c.day,
        c.hour,
        c.minute,
        c.second,
        since.subsec_micros()
    );
}

/// The machine's host name (RFC 3164 headers, the default `node`, the `hostname` fetch), read
/// once: HAProxy too keeps the name it found at start-up.
pub fn hostname() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "localhost".to_owned())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn target(format: SyslogFormat) -> LogTarget {
        LogTarget {
            addr: LogAddr::Fd(1),
            max_len: 1024,
            format,
            sample: None,
            facility: 16,
            max_level: 7,
            min_level: 0,
        }
    }

    /// The header `format` writes for tag `tag`, pid 42, level info, at 2026-11-06
    /// 05:57:25.116877 UTC, with `structured` data and `log-send-hostname` `sent`.
    fn written(
        format: SyslogFormat,
        tag: &str,
        structured: Option<&[u8]>,
        sent: Option<&str>,
    ) -> String {
        let mut out = Vec::new();
        let hosts = Hosts {
            sent: sent.map(str::to_owned),
        };
        let header = Header {
            level: 6,
            tag,
            pid: 42,
            now: UNIX_EPOCH + Duration::from_micros(1_793_944_645_116_877),
            structured,
            hosts: &hosts,
        };
        write_header(&target(format), &header, &mut out);
        String::from_utf8(out).unwrap()
    }

    fn header(format: SyslogFormat) -> String {
        written(format, "haproxy", None, None)
    }

    #[test]
    fn structured_data_goes_only_to_rfc5424_headers() {
        let with = |format| written(format, "edge", Some(br#"[id@1 bytes="54"]"#), None);
        assert_eq!(
            with(SyslogFormat::Rfc5424),
            "<134>1 2026-11-06T05:57:25.116877+00:00 - edge 42 - [id@1 bytes=\"54\"] "
        );
        assert_eq!(with(SyslogFormat::Local), "<134>Nov  6 05:57:25 edge[42]: ");
    }

    #[test]
    fn log_send_hostname_names_the_host_in_every_format_with_the_field() {
        let with = |format| written(format, "haproxy", None, Some("myhost"));
        // As HAProxy 2.6 writes them with `log-send-hostname myhost`: the default format is
        // `rfc3164` then, `format local` still has no host name.
        for (format, expected) in [
            (
                SyslogFormat::Default,
                "<134>Nov  6 05:57:25 myhost haproxy[42]: ",
            ),
            (SyslogFormat::Local, "<134>Nov  6 05:57:25 haproxy[42]: "),
            (
                SyslogFormat::Rfc3164,
                "<134>Nov  6 05:57:25 myhost haproxy[42]: ",
            ),
            (
                SyslogFormat::Rfc5424,
                "<134>1 2026-11-06T05:57:25.116877+00:00 myhost haproxy 42 - - ",
            ),
            (SyslogFormat::Short, "<6>"),
        ] {
            assert_eq!(with(format), expected, "{format:?}");
        }
    }

    #[test]
    fn headers_of_every_format() {
        // Without `log-send-hostname`, HAProxy 2.6 names no host but `localhost`.
        for (format, expected) in [
            (SyslogFormat::Default, "<134>Nov  6 05:57:25 haproxy[42]: "),
            (SyslogFormat::Local, "<134>Nov  6 05:57:25 haproxy[42]: "),
            (
                SyslogFormat::Rfc3164,
                "<134>Nov  6 05:57:25 localhost haproxy[42]: ",
            ),
            (
                SyslogFormat::Rfc5424,
                "<134>1 2026-11-06T05:57:25.116877+00:00 - haproxy 42 - - ",
            ),
            (SyslogFormat::Priority, "<134>"),
            (SyslogFormat::Short, "<6>"),
            (SyslogFormat::Timed, "<6>2026-11-06T05:57:25.116877+00:00 "),
            (SyslogFormat::Iso, "2026-11-06T05:57:25.116877+00:00 "),
            (SyslogFormat::Raw, ""),
        ] {
            assert_eq!(header(format), expected, "{format:?}");
        }
    }

    #[test]
    fn sampling_keeps_the_ranges_of_each_period() {
        let mut t = target(SyslogFormat::Raw);
        t.sample = Some((vec![(1, 1), (3, 4)], 5));
        let kept: Vec<u64> = (0..10).filter(|n| sampled(&t, *n)).collect();
        assert_eq!(kept, [0, 2, 3, 5, 7, 8]);
    }

    #[test]
    fn lines_are_framed_filtered_and_truncated() {
        let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let addr = receiver.local_addr().unwrap();
        let hub = LogHub::start(vec![LogAddr::Udp(addr)], &[], None).unwrap();
        let mut quiet = target(SyslogFormat::Raw);
        quiet.addr = LogAddr::Udp(addr);
        quiet.max_level = 5;
        let mut short = target(SyslogFormat::Short);
        short.addr = LogAddr::Udp(addr);
        short.max_len = 80;
        let logger = ProxyLogger::new(hub, vec![(0, quiet), (0, short)], "t".to_owned());
        logger.emit(level::INFO, &[b'x'; 200]);
        let mut buf = [0u8; 2048];
        let n = receiver.recv(&mut buf).unwrap();
        // Only the short-format target accepts info; the line is cut to 80 bytes.
        assert_eq!(n, 80);
        assert!(buf[..n].starts_with(b"<6>xxx"));
        assert_eq!(buf[n - 1], b'\n');
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod drop_tests {
    use super::*;

    #[test]
    fn a_stuck_target_costs_dropped_lines_never_a_wait() {
        // A unix datagram receiver that never reads: once its queue is full, the writer
        // thread blocks on it, the hub's queue fills, and further lines are dropped.
        let dir = std::env::temp_dir().join(format!("sluice-logdrop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stuck.sock");
        let _ = std::fs::remove_file(&path);
        let _receiver = UnixDatagram::bind(&path).unwrap();
        let hub = LogHub::start(vec![LogAddr::Unix(path.clone())], &[], None).unwrap();
        let target = LogTarget {
            addr: LogAddr::Unix(path),
            max_len: 1024,
            format: SyslogFormat::Raw,
            sample: None,
            facility: 16,
            max_level: 7,
            min_level: 0,
        };
        let logger = ProxyLogger::new(Arc::clone(&hub), vec![(0, target)], "t".to_owned());
        let lines = 3 * QUEUE_DEPTH as u64;
        for _ in 0..lines {
            logger.emit(level::INFO, b"a line nobody reads");
        }
        assert_eq!(
            hub.dropped_for(&LogAddr::Unix(dir.join("stuck.sock"))),
            hub.dropped.get()
        );
        assert_eq!(hub.dropped_for(&LogAddr::Fd(1)), 0);
        // Every emit returned (this point is reached) and the excess was counted: the writer
        // took at most the queue, plus what the kernel queued for the socket before blocking
        // (`net.unix.max_dgram_qlen` and the send buffer: a few hundred at most).
        let dropped = hub.dropped.get();
        assert!(dropped >= lines - QUEUE_DEPTH as u64 - 1024, "{dropped}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod ring_tests {
    use super::*;

    #[test]
    fn ring_targets_store_framed_events_without_line_ends() {
        let ring = Arc::new(Ring::new("buf", "buf", 4096));
        let mut watch = ring.watch();
        let hub = LogHub::start(
            vec![LogAddr::Ring("buf".into())],
            &[Arc::clone(&ring)],
            None,
        )
        .unwrap();
        let target = LogTarget {
            addr: LogAddr::Ring("buf".into()),
            max_len: 1024,
            format: SyslogFormat::Short,
            sample: None,
            facility: 16,
            max_level: 7,
            min_level: 0,
        };
        let logger = ProxyLogger::new(hub, vec![(0, target)], "t".to_owned());
        logger.emit(level::INFO, b"hello");
        // The writer thread stores it; wait for the ring's signal, not for time.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime
            .block_on(async {
                tokio::time::timeout(std::time::Duration::from_secs(5), watch.changed()).await
            })
            .unwrap()
            .unwrap();
        let mut out = Vec::new();
        ring.read_from(0, &mut out);
        assert_eq!(out, b"<6>hello\n");
        assert!(LogHub::start(vec![LogAddr::Ring("nope".into())], &[], None).is_err());
    }
}
