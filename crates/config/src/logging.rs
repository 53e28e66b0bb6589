//! Logging keywords (configuration.txt §3.1 and §4.2 `log`, §8 "Logging"): where log lines go
//! (`log` targets in `global` and proxies, `log global`, `no log`), what they look like
//! (`option httplog [clf]`, `option tcplog`, `log-format`, `log-format-sd`,
//! `error-log-format`, `log-tag`), which streams are logged (`option dontlognull`, `option
//! dontlog-normal`, `option log-separate-errors`) and when (`option logasap`).
//!
//! A target is a UDP syslog address (port 514 by default), a unix datagram socket path,
//! `stdout`/`stderr`/`fd@N` or a `ring@NAME` buffer ([`crate::ring`]), with a syslog header
//! format (`local` by default, `rfc3164`, `rfc5424`, `short`, `timed`, `iso`, `priority`,
//! `raw`), a facility and optional level bounds. The stream-address forms are refused as not
//! supported.
//! Read [`parse_log_target`] first.

use crate::diag::{Diagnostic, Diagnostics};
use crate::directive::Directive;
use crate::preprocess::Line;
use sluice_sample::{LogFormat, MapStore, Stages};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// Where a log target sends its lines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LogAddr {
    /// A syslog server over UDP.
    Udp(SocketAddr),
    /// A unix datagram socket (e.g. `/dev/log`).
    Unix(PathBuf),
    /// An inherited file descriptor (`stdout` is fd 1, `stderr` fd 2).
    Fd(i32),
    /// A `ring` section's buffer, by name.
    Ring(String),
}

/// The header written before each message (configuration.txt §4.2 `log` `format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyslogFormat {
    /// No `format` given: `local`, or `rfc3164` under `log-send-hostname` (as HAProxy
    /// switches its default then).
    Default,
    /// `<PRI>Mmm dd hh:mm:ss tag[pid]: ` (RFC 3164 without the host name).
    Local,
    /// RFC 3164 with the host name.
    Rfc3164,
    /// `<PRI>1 ISO-DATE host tag pid - - ` (RFC 5424).
    Rfc5424,
    /// `<PRI>` with the facility.
    Priority,
    /// `<LEVEL>` alone.
    Short,
    /// `<LEVEL>ISO-DATE `.
    Timed,
    /// `ISO-DATE `.
    Iso,
    /// Nothing: the message alone.
    Raw,
}

/// One `log` target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogTarget {
    /// Where lines go.
    pub addr: LogAddr,
    /// `len`: longest line sent (longer ones are truncated); 1024 by default.
    pub max_len: usize,
    /// `format`.
    pub format: SyslogFormat,
    /// `sample RANGES:SIZE`: send only the lines whose number (from 1, modulo SIZE) falls
    /// in one of the ranges.
    pub sample: Option<(Vec<(u32, u32)>, u32)>,
    /// Syslog facility code (0..=23).
    pub facility: u8,
    /// Lines above this severity (a larger number) are not sent; `debug` (7) by default.
    pub max_level: u8,
    /// Lines below this severity are raised to it; `emerg` (0) by default.
    pub min_level: u8,
}

/// The default longest line (configuration.txt §4.2 `log` `len`).
pub const DEFAULT_LOG_LEN: usize = 1024;

/// What a proxy logs per stream.
#[derive(Clone, Debug, Default)]
pub enum LineFormat {
    /// No `option httplog`/`tcplog`/`log-format`: HAProxy's minimal connection line.
    #[default]
    Minimal,
    /// `option tcplog`.
    Tcp,
    /// `option httplog`.
    Http,
    /// `option httplog clf`.
    HttpClf,
    /// `option httpslog`: [`HTTPS_LOG_FORMAT`]. A TCP proxy logs the `tcplog` line instead,
    /// as HAProxy falls back to it.
    Https(LogFormat),
    /// `log-format`.
    Custom(LogFormat),
}

/// The default longest line of a `ring` section's events (configuration.txt §3.10 `maxlen`).
pub const DEFAULT_RING_MAXLEN: usize = 1024;

/// A proxy's logging settings.
#[derive(Clone, Debug, Default)]
pub struct ProxyLogConf {
    /// `log global` was given: the global targets apply.
    pub use_global: bool,
    /// The proxy's own targets.
    pub targets: Vec<LogTarget>,
    /// The line format.
    pub format: LineFormat,
    /// Where `option httplog` or `option httpslog` set the format, for the warning a TCP
    /// proxy gets (it logs the `tcplog` line instead).
    pub http_format_line: Option<crate::diag::Span>,
    /// `option dontlognull`: streams that carried no data are not logged.
    pub dont_log_null: bool,
    /// `option dontlog-normal`: only streams that ended in error (a timeout, an abort, a
    /// retry, a 5xx...) are logged.
    pub dont_log_normal: bool,
    /// `option http-ignore-probes`: an HTTP connection that sent nothing before it closed or
    /// timed out gets no 400/408, no log line and no error count.
    pub ignore_probes: bool,
    /// `option log-separate-errors`: errors are logged at `err` instead of `info`.
    pub separate_errors: bool,
    /// `option logasap`: an HTTP stream is logged once the response head is sent, a TCP
    /// session once its server connection is established.
    pub logasap: bool,
    /// `error-log-format`: the line of a connection that failed before it became a stream
    /// (a bad PROXY protocol header).
    pub error_format: Option<LogFormat>,
    /// `log-format-sd`: the RFC 5424 structured data of the stream lines, for the targets
    /// in `format rfc5424`.
    pub structured_format: Option<LogFormat>,
    /// `log-tag`: the syslog tag of this proxy's lines.
    pub tag: Option<String>,
    /// `unique-id-format`: how each request's unique id is built.
    pub unique_id_format: Option<LogFormat>,
    /// `unique-id-header`: the request field carrying the unique id to the server.
    pub unique_id_header: Option<String>,
    /// Where each format directive (`log-format`, `log-format-sd`, `error-log-format`,
    /// `unique-id-format`) was last given, inherited from `defaults` with the formats: a
    /// `mode tcp` proxy's format using an HTTP alias is refused at that line.
    pub format_lines: Vec<(&'static str, crate::diag::Span)>,
}

impl ProxyLogConf {
    /// Notes that `keyword` was given on `line`.
    fn given_at(&mut self, keyword: &'static str, line: &Line) {
        self.format_lines.retain(|(k, _)| *k != keyword);
        self.format_lines.push((keyword, line.span.clone()));
    }

    /// The formats the proxy was given, with their directive and where it was: what a
    /// `mode tcp` proxy checks for HTTP aliases.
    pub fn given_formats(&self) -> Vec<(&'static str, &LogFormat, Option<&crate::diag::Span>)> {
        let custom = match &self.format {
            LineFormat::Custom(fmt) => Some(fmt),
            _ => None,
        };
        let formats = [
            ("log-format", custom),
            ("log-format-sd", self.structured_format.as_ref()),
            ("error-log-format", self.error_format.as_ref()),
            ("unique-id-format", self.unique_id_format.as_ref()),
        ];
        formats
            .into_iter()
            .filter_map(|(keyword, fmt)| {
                let line = self.format_lines.iter().find(|(k, _)| *k == keyword);
                fmt.map(|fmt| (keyword, fmt, line.map(|(_, span)| span)))
            })
            .collect()
    }
}

impl ProxyLogConf {
    /// True if the proxy sends its lines anywhere.
    pub fn enabled(&self) -> bool {
        self.use_global || !self.targets.is_empty()
    }
}

const FACILITIES: [&str; 24] = [
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "auth2",
    "ftp", "ntp", "audit", "alert", "cron2", "local0", "local1", "local2", "local3", "local4",
    "local5", "local6", "local7",
];

const LEVELS: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

/// The syslog code of a severity name.
pub fn level_code(name: &str) -> Option<u8> {
    LEVELS.iter().position(|l| *l == name).map(|i| i as u8)
}

/// Parses the words after `log` (not `global`): `TARGET [len N] [format F] [sample R:S]
/// FACILITY [LEVEL [MINLEVEL]]`.
pub fn parse_log_target(words: &[String]) -> Result<LogTarget, String> {
    let Some(target) = words.first() else {
        return Err("expects a target, 'global', or use 'no log'".to_owned());
    };
    let addr = parse_log_addr(target)?;
    let mut t = LogTarget {
        addr,
        max_len: DEFAULT_LOG_LEN,
        format: SyslogFormat::Default,
        sample: None,
        facility: 0,
        max_level: 7,
        min_level: 0,
    };
    let mut i = 1;
    loop {
        let (Some(word), value) = (words.get(i), words.get(i + 1)) else {
            return Err("expects a facility after the target".to_owned());
        };
        match word.as_str() {
            "len" => {
                t.max_len = value
                    .and_then(|v| v.parse::<usize>().ok())
                    .filter(|n| (80..=65535).contains(n))
                    .ok_or("'len' expects a length between 80 and 65535")?;
            }
            "format" => t.format = parse_syslog_format(value.map_or("", |s| s.as_str()))?,
            "sample" => t.sample = Some(parse_sample(value.map_or("", |s| s.as_str()))?),
            "profile" => return Err("'profile' is not supported by Sluice".to_owned()),
            _ => break,
        }
        i += 2;
    }
    let facility = &words[i];
    t.facility = FACILITIES
        .iter()
        .position(|f| f == facility)
        .map(|f| f as u8)
        .ok_or_else(|| format!("unknown log facility '{facility}'"))?;
    if let Some(level) = words.get(i + 1) {
        t.max_level = level_code(level).ok_or_else(|| format!("unknown log level '{level}'"))?;
    }
    if let Some(level) = words.get(i + 2) {
        t.min_level = level_code(level).ok_or_else(|| format!("unknown log level '{level}'"))?;
    }
    if let Some(extra) = words.get(i + 3) {
        return Err(format!("unexpected argument '{extra}'"));
    }
    Ok(t)
}

/// A syslog header format's name (`log ... format F`, a ring's `format F`).
pub fn parse_syslog_format(name: &str) -> Result<SyslogFormat, String> {
    Ok(match name {
        "local" => SyslogFormat::Local,
        "rfc3164" => SyslogFormat::Rfc3164,
        "rfc5424" => SyslogFormat::Rfc5424,
        "priority" => SyslogFormat::Priority,
        "short" => SyslogFormat::Short,
        "timed" => SyslogFormat::Timed,
        "iso" => SyslogFormat::Iso,
        "raw" => SyslogFormat::Raw,
        other => {
            return Err(format!(
                "unknown log format '{other}' (local, rfc3164, rfc5424, priority, short, timed, iso or raw)"
            ));
        }
    })
}

fn parse_log_addr(text: &str) -> Result<LogAddr, String> {
    match text {
        "stdout" => return Ok(LogAddr::Fd(1)),
        "stderr" => return Ok(LogAddr::Fd(2)),
        _ => {}
    }
    if let Some(fd) = text.strip_prefix("fd@") {
        return match fd.parse::<i32>() {
            Ok(fd @ (1 | 2)) => Ok(LogAddr::Fd(fd)),
            Ok(_) => Err(format!(
                "'{text}': log targets on file descriptors other than 1 and 2 are not supported by Sluice"
            )),
            Err(_) => Err(format!("invalid file descriptor in '{text}'")),
        };
    }
    if let Some(path) = text.strip_prefix("unix@") {
        return Ok(LogAddr::Unix(PathBuf::from(path)));
    }
    if text.starts_with('/') {
        return Ok(LogAddr::Unix(PathBuf::from(text)));
    }
    if let Some(name) = text.strip_prefix("ring@") {
        if name.is_empty() {
            return Err("'ring@' expects the name of a ring".to_owned());
        }
        return Ok(LogAddr::Ring(name.to_owned()));
    }
    for prefix in ["tcp@", "tcp4@", "tcp6@", "uxst@", "backend@"] {
        if text.starts_with(prefix) {
            return Err(format!(
                "'{prefix}' log targets are not supported by Sluice"
            ));
        }
    }
    // The prefix may restrict the family a host name resolves to.
    let (inet, family) = [
        ("udp@", None),
        ("udp4@", Some(true)),
        ("udp6@", Some(false)),
        ("ipv4@", Some(true)),
        ("ipv6@", Some(false)),
    ]
    .iter()
    .find_map(|(p, v4)| Some((text.strip_prefix(p)?, *v4)))
    .unwrap_or((text, None));
    parse_udp(inet, family).ok_or_else(|| format!("invalid log target '{text}'"))
}

/// `ADDR[:PORT]`, `[ADDR6]:PORT`, or a bare IPv6 address; port 514 by default. A host name
/// is resolved now, once, as HAProxy does when it reads the line: its first address (of the
/// family `v4` asks for, if any).
fn parse_udp(text: &str, v4: Option<bool>) -> Option<LogAddr> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(LogAddr::Udp(addr));
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(LogAddr::Udp(SocketAddr::new(ip, 514)));
    }
    let (host, port) = match text.rsplit_once(':') {
        Some((host, "")) => (host, 514),
        Some((host, port)) => (host, port.parse().ok()?),
        None => (text, 514),
    };
    let ip = match host.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) if host.is_empty() || host.starts_with('[') => return None,
        Err(_) => {
            use std::net::ToSocketAddrs;
            (host, port)
                .to_socket_addrs()
                .ok()?
                .map(|addr| addr.ip())
                .find(|ip| v4.is_none_or(|v4| ip.is_ipv4() == v4))?
        }
    };
    Some(LogAddr::Udp(SocketAddr::new(ip, port)))
}

fn parse_sample(text: &str) -> Result<(Vec<(u32, u32)>, u32), String> {
    let err = || format!("'sample' expects RANGES:SIZE, not '{text}'");
    let (ranges, size) = text.split_once(':').ok_or_else(err)?;
    let size: u32 = size.parse().ok().filter(|n| *n > 0).ok_or_else(err)?;
    let mut out = Vec::new();
    for range in ranges.split(',') {
        let (low, high) = match range.split_once('-') {
            Some((l, h)) => (l.parse().ok(), h.parse().ok()),
            None => (range.parse().ok(), range.parse().ok()),
        };
        match (low, high) {
            (Some(l), Some(h)) if l >= 1 && l <= h && h <= size => out.push((l, h)),
            _ => return Err(err()),
        }
    }
    Ok((out, size))
}

/// Parses the logging keywords of a proxy section; false if `line` is not one.
pub(crate) fn parse_proxy_log_line(
    conf: &mut ProxyLogConf,
    line: &Line,
    maps: &MapStore,
    diags: &mut Diagnostics,
) -> bool {
    let words = &line.words;
    let first = words.first().map(String::as_str);
    let second = words.get(1).map(String::as_str);
    match (first, second) {
        (Some("log"), Some("global")) => {
            let d = Directive::new(line, 2);
            if d.no_more_than(2, diags) {
                conf.use_global = true;
            }
        }
        (Some("no"), Some("log")) => {
            let d = Directive::new(line, 2);
            if d.no_more_than(2, diags) {
                conf.use_global = false;
                conf.targets.clear();
            }
        }
        (Some("log"), _) => match parse_log_target(&words[1..]) {
            Ok(target) => conf.targets.push(target),
            Err(message) => diags.push(Directive::new(line, 1).alert(message)),
        },
        (Some("log-format"), _) => {
            if let Some(fmt) = log_format_line(line, maps, true, diags) {
                conf.format = LineFormat::Custom(fmt);
                conf.given_at("log-format", line);
            }
        }
        (Some("log-format-sd"), _) => {
            if let Some(fmt) = log_format_line(line, maps, true, diags) {
                conf.structured_format = Some(fmt);
                conf.given_at("log-format-sd", line);
            }
        }
        (Some("error-log-format"), _) => {
            if let Some(fmt) = log_format_line(line, maps, false, diags) {
                conf.error_format = Some(fmt);
                conf.given_at("error-log-format", line);
            }
        }
        (Some("unique-id-format"), _) => {
            let d = Directive::new(line, 1);
            let Some(text) = d.word(1, "a log format", diags) else {
                return true;
            };
            if !d.no_more_than(2, diags) {
                return true;
            }
            match LogFormat::parse_unique_id(text, maps) {
                Ok(fmt) => {
                    conf.unique_id_format = Some(fmt);
                    conf.given_at("unique-id-format", line);
                }
                Err(message) => diags.push(d.alert(message)),
            }
        }
        (Some("unique-id-header"), _) => {
            let d = Directive::new(line, 1);
            if let Some(name) = d.word(1, "a header name", diags)
                && d.no_more_than(2, diags)
            {
                conf.unique_id_header = Some(name.to_owned());
            }
        }
        (Some("log-tag"), _) => {
            let d = Directive::new(line, 1);
            if let Some(tag) = d.word(1, "a tag", diags)
                && d.no_more_than(2, diags)
            {
                conf.tag = Some(tag.to_owned());
            }
        }
        _ => return false,
    }
    true
}

/// The format of a `log-format`, `log-format-sd` or `error-log-format` line (its one
/// argument); `None` after an alert. With `stream_fetches`, a fetch that cannot see its data
/// at log time is warned about, as HAProxy warns, not fails.
fn log_format_line(
    line: &Line,
    maps: &MapStore,
    stream_fetches: bool,
    diags: &mut Diagnostics,
) -> Option<LogFormat> {
    let d = Directive::new(line, 1);
    let text = d.word(1, "a log format", diags)?;
    if !d.no_more_than(2, diags) {
        return None;
    }
    match LogFormat::parse_log(text, maps) {
        Ok(mut fmt) => {
            if stream_fetches && let Err(message) = fmt.check_stages(Stages::LOG) {
                diags.push(d.warning(message));
            }
            Some(fmt)
        }
        Err(message) => {
            diags.push(d.alert(message));
            None
        }
    }
}

/// `option httpslog`'s line (configuration.txt §8.2.4): `option httplog`'s fields, then the
/// TLS ones, which a clear connection shows as `0/-/-/-/0 -/-/-` (the connection error code,
/// the TLS and certificate errors, whether the session was resumed; SNI, version, cipher).
pub const HTTPS_LOG_FORMAT: &str = "%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC \
    %CS %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq %hr %hs %{+Q}r \
    %[fc_err]/%[ssl_fc_err,hex]/%[ssl_c_err]/%[ssl_c_ca_err]/%[ssl_fc_is_resumed] \
    %[ssl_fc_sni]/%sslv/%sslc";

/// Applies `option httplog [clf]`, `httpslog`, `tcplog`, `dontlognull`, `http-ignore-probes`,
/// `log-separate-errors`, `logasap` (`enable` false for the `no option` form, which the
/// format options do not take); false if `name` is not a logging option.
pub(crate) fn apply_log_option(
    conf: &mut ProxyLogConf,
    d: &Directive<'_>,
    name: &str,
    args_at: usize,
    enable: bool,
    diags: &mut Diagnostics,
) -> bool {
    match name {
        "httplog" => {
            let clf = d.words.get(args_at).map(String::as_str) == Some("clf");
            if d.no_more_than(args_at + usize::from(clf), diags) {
                conf.format = if clf {
                    LineFormat::HttpClf
                } else {
                    LineFormat::Http
                };
                conf.http_format_line = Some(d.span.clone());
            }
        }
        "httpslog" => {
            if d.no_more_than(args_at, diags) {
                let fmt = LogFormat::parse_log(HTTPS_LOG_FORMAT, &MapStore::new());
                conf.format = LineFormat::Https(fmt.expect("the HTTPS log format compiles"));
                conf.http_format_line = Some(d.span.clone());
            }
        }
        "tcplog" => {
            if d.no_more_than(args_at, diags) {
                conf.format = LineFormat::Tcp;
            }
        }
        "dontlognull" => {
            if d.no_more_than(args_at, diags) {
                conf.dont_log_null = enable;
            }
        }
        "dontlog-normal" => {
            if d.no_more_than(args_at, diags) {
                conf.dont_log_normal = enable;
            }
        }
        "http-ignore-probes" => {
            if d.no_more_than(args_at, diags) {
                conf.ignore_probes = enable;
            }
        }
        "log-separate-errors" => {
            if d.no_more_than(args_at, diags) {
                conf.separate_errors = enable;
            }
        }
        "logasap" => {
            if d.no_more_than(args_at, diags) {
                conf.logasap = enable;
            }
        }
        _ => return false,
    }
    true
}

/// Reports a `log` line in the `global` section into `targets`.
pub(crate) fn parse_global_log_line(
    targets: &mut Vec<LogTarget>,
    line: &Line,
    diags: &mut Diagnostics,
) {
    match parse_log_target(&line.words[1..]) {
        Ok(target) => targets.push(target),
        Err(message) => diags.push(Diagnostic::alert(&line.span, "log", message)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn target(text: &str) -> Result<LogTarget, String> {
        let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        parse_log_target(&words)
    }

    #[test]
    fn targets_and_their_options() {
        let t = target("127.0.0.1 local0").unwrap();
        assert_eq!(t.addr, LogAddr::Udp("127.0.0.1:514".parse().unwrap()));
        assert_eq!(
            (t.facility, t.max_level, t.format),
            (16, 7, SyslogFormat::Default)
        );
        assert_eq!(
            target("127.0.0.1 format local local0").unwrap().format,
            SyslogFormat::Local
        );
        let t = target("10.0.0.1:1514 len 2048 format rfc5424 daemon notice err").unwrap();
        assert_eq!(t.addr, LogAddr::Udp("10.0.0.1:1514".parse().unwrap()));
        assert_eq!((t.max_len, t.format), (2048, SyslogFormat::Rfc5424));
        assert_eq!((t.facility, t.max_level, t.min_level), (3, 5, 3));
        assert_eq!(
            target("/dev/log local7").unwrap().addr,
            LogAddr::Unix("/dev/log".into())
        );
        assert_eq!(
            target("stdout format raw daemon").unwrap().addr,
            LogAddr::Fd(1)
        );
        assert_eq!(target("fd@2 user").unwrap().addr, LogAddr::Fd(2));
        assert_eq!(
            target("[::1]:5514 local1").unwrap().addr,
            LogAddr::Udp("[::1]:5514".parse().unwrap())
        );
        let t = target("127.0.0.1 sample 1-2,5:10 local0").unwrap();
        assert_eq!(t.sample, Some((vec![(1, 2), (5, 5)], 10)));
    }

    #[test]
    fn bad_targets_are_named() {
        assert_eq!(
            target("127.0.0.1 local9").unwrap_err(),
            "unknown log facility 'local9'"
        );
        assert_eq!(
            target("127.0.0.1 local0 loud").unwrap_err(),
            "unknown log level 'loud'"
        );
        assert_eq!(
            target("127.0.0.1").unwrap_err(),
            "expects a facility after the target"
        );
        assert_eq!(
            target("ring@buf local0").unwrap().addr,
            LogAddr::Ring("buf".into())
        );
        assert!(
            target("tcp@127.0.0.1:514 local0")
                .unwrap_err()
                .contains("not supported")
        );
        assert!(
            target("127.0.0.1 len 10 local0")
                .unwrap_err()
                .contains("between 80")
        );
        assert!(target("127.0.0.1 sample 3:2 local0").is_err());
        assert!(
            target("127.0.0.1:99999 local0")
                .unwrap_err()
                .contains("invalid log target")
        );
        // A host name is resolved as the line is read (here from the system's hosts file),
        // within the family a prefix asks for.
        let any = target("localhost:5140 local0").unwrap().addr;
        assert!(
            matches!(any, LogAddr::Udp(a) if a.ip().is_loopback() && a.port() == 5140),
            "{any:?}"
        );
        let local = SocketAddr::from(([127, 0, 0, 1], 5140));
        assert_eq!(
            target("udp4@localhost:5140 local0").unwrap().addr,
            LogAddr::Udp(local)
        );
    }
}
