//! Custom log format strings (configuration.txt §8.2.6): the `<fmt>` argument of
//! `log-format`, `unique-id-format`, `http-request set-header`, `return lf-string`,
//! `redirect location` and every other directive that assembles text from the stream.
//!
//! A format is literal text mixed with items: `%%` is a percent sign, `%[expr]` a sample
//! expression compiled with [`Expr::parse`], and `%name` one of the aliases of §8.2.6's table
//! (`%ci`, `%HM`, `%Tt`...). Flags in braces before an item change how it is written: `+Q`
//! quotes it, `+X` writes addresses, ports, `%Ts`, `%ms`, `%rt` and `%pid` in hexadecimal,
//! `+E` escapes `"`, `\` and `]`, `+M` writes `-` for a missing or empty string; `%{...}o`
//! makes flags the default for the items after it. Everything is checked once by
//! [`LogFormat::parse`] (or [`LogFormat::parse_log`] for log lines, where runs of spaces are
//! merged and `+M` is the default); [`LogFormat::render`] appends the text for one stream.
//! Aliases read the [`Context`]; what only the proxy knows at logging time (timers, byte
//! counts, termination state, captures) comes from a [`LogFacts`]. A string nobody knows
//! prints `-` in a log line and nothing in a header, as in HAProxy. Read
//! [`LogFormat::parse`] first.

use std::fmt;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::context::{BackendStat, Context, ServerStat};
use crate::expr::Expr;
use crate::fetch::path_query;
use crate::map::MapStore;
use crate::stages::{Source, Stages};
use crate::time::{civil, write_log_date, write_offset};
use crate::value::{Sample, ip_text};

/// A number only the proxy knows about a stream, for the log-format aliases that show it.
/// Times are in milliseconds; as in HAProxy, -1 stands for an event that never happened
/// (configuration.txt §8.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogNumber {
    /// `%Th`: the connection handshake time (TLS, PROXY protocol).
    Handshake,
    /// `%Ti`: the idle time before the request's first byte.
    Idle,
    /// `%TR`: the time to receive the full request head from its first byte.
    RequestHead,
    /// `%Tq`: `Th + Ti + TR`.
    Request,
    /// `%Tw`: the time spent in queues.
    Queue,
    /// `%Tc`: the time to establish the server connection.
    Connect,
    /// `%Tr`: the server's response time (until its head was received).
    Response,
    /// `%Td`: the data transfer time, `Tt - (Tq + Tw + Tc + Tr)`.
    Data,
    /// `%Ta`: the request's active time, from `TR`'s start to the end.
    Active,
    /// `%Tt`: the stream's total time.
    Total,
    /// `%Tu`: the total time seen by the user, `Tt - Ti`.
    User,
    /// `%U`: bytes received from the client.
    BytesFromClient,
    /// `%B`: bytes sent to the client.
    BytesToClient,
    /// `%ac`: connections of the process when the stream was logged.
    ProcessConnections,
    /// `%fc`: connections of the frontend.
    FrontendConnections,
    /// `%bq`: streams that were ahead of this one in the backend's queue.
    BackendQueue,
    /// `%sq`: streams that were ahead of this one in the server's queue.
    ServerQueue,
    /// `%rc`: connection retries.
    Retries,
    /// `%lc`: the frontend's log counter.
    LogCounter,
    /// `%rt`: the request (or TCP session) counter.
    RequestCounter,
    /// `%pid`: the process id.
    Pid,
    /// `%ST`: the status sent to the client, when the proxy produced it or changed it; the
    /// server's status from [`Context::response`] is used otherwise.
    Status,
}

/// A text only the proxy knows about a stream, for the log-format aliases that show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogText {
    /// `%H`: the host name of the machine.
    Hostname,
    /// `%ID`: the stream's unique id (`unique-id-format`).
    UniqueId,
    /// `%ts`: the two-letter termination state (§8.5).
    TerminationState,
    /// `%tsc`: the termination state with the two cookie letters.
    TerminationStateCookie,
    /// `%CC`: the captured request cookie.
    RequestCookie,
    /// `%CS`: the captured response cookie.
    ResponseCookie,
    /// `%sslc`: the TLS cipher of the client connection.
    TlsCipher,
    /// `%sslv`: the TLS version of the client connection.
    TlsVersion,
    /// The server's response version, `HTTP/1.1` (`capture.res.ver`).
    ResponseVersion,
}

/// What the proxy knows about a stream at logging time, beyond what [`Context`] answers.
///
/// Every method has a default meaning "unknown"; the aliases reading it then print `-`. The
/// proxy implements it for its log records and returns it from [`Context::log_facts`].
pub trait LogFacts {
    /// When the connection was accepted (`%t`, `%T`, `%Tl`, `%Ts`, `%ms`).
    fn accept_date(&self) -> Option<SystemTime> {
        None
    }

    /// When the request's first byte arrived (`%tr`, `%trg`, `%trl`).
    fn request_date(&self) -> Option<SystemTime> {
        None
    }

    /// A timer or counter of the stream.
    fn number(&self, _which: LogNumber) -> Option<i64> {
        None
    }

    /// A text about the stream.
    fn text(&self, _which: LogText) -> Option<&[u8]> {
        None
    }

    /// The local address of the server connection (`%bi`, `%bp`).
    fn backend_source(&self) -> Option<SocketAddr> {
        None
    }

    /// True if the server connection was made (a failed attempt has ends, not a connection).
    fn server_connected(&self) -> bool {
        false
    }

    /// True if the request went over a server connection an earlier request left open
    /// (`bc_reused`).
    fn reused_server_connection(&self) -> bool {
        false
    }

    /// The algorithm the proxy compressed the response with (`res.comp_algo`); `None` for a
    /// response it did not compress (`res.comp` false).
    fn compression(&self) -> Option<&str> {
        None
    }

    /// The server address connected to (`%si`, `%sp`).
    fn server_address(&self) -> Option<SocketAddr> {
        None
    }

    /// True if the client connection uses TLS (`%ft` adds `~` to the frontend's name).
    fn frontend_tls(&self) -> bool {
        false
    }

    /// True if the stream was redispatched to another server (`%rc` gets a `+`).
    fn redispatched(&self) -> bool {
        false
    }

    /// The error that ended the client connection before it became a stream (`fc_err`,
    /// `fc_err_str`): HAProxy's error number and message; `None` when there was none.
    fn connection_error(&self) -> Option<(u8, &'static str)> {
        None
    }

    /// True if `which` is only a value so far because the line is logged before the stream
    /// ended (`option logasap`); HAProxy prints such numbers with a `+`.
    fn incomplete(&self, _which: LogNumber) -> bool {
        false
    }

    /// How many header captures the frontend declares for requests (`response` false) or
    /// responses (`%hr`, `%hs`...).
    fn captured_header_count(&self, _response: bool) -> usize {
        0
    }

    /// Capture `index`; `None` when the header was absent.
    fn captured_header(&self, _response: bool, _index: usize) -> Option<&[u8]> {
        None
    }
}

/// Item flags (§8.2.6 "Supported item flags").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Flags {
    /// `Q`: surround strings with double quotes.
    quote: bool,
    /// `X`: hexadecimal addresses, ports and a few numbers.
    hex: bool,
    /// `E`: backslash before `"`, `\` and `]`.
    escape: bool,
    /// `M`: a missing or empty string is written `-` rather than nothing. On by default in
    /// log lines only: a header built from an absent sample is empty, as in HAProxy.
    mandatory: bool,
}

/// Which characters are replaced by a prefix and two hexadecimal digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Enc {
    /// Log lines (§8.6): anything outside 32..=126 becomes `#XX`.
    Log,
    /// The request line in logs: also `"` and `#`.
    Url,
    /// Captured headers and cookies in logs: also `{`, `|` and `}`.
    Header,
    /// Header fields and payloads: the bytes a field value may not hold become `%XX`
    /// (controls but HTAB, and DEL), §8.2.6 "When used to form header fields...".
    Http,
}

impl Enc {
    /// The escape prefix for `b`, if it must be escaped.
    fn prefix(self, b: u8) -> Option<u8> {
        let unprintable = !(32..=126).contains(&b);
        let escaped = match self {
            Enc::Log => unprintable,
            Enc::Url => unprintable || matches!(b, b'"' | b'#'),
            Enc::Header => unprintable || matches!(b, b'"' | b'#' | b'{' | b'|' | b'}'),
            Enc::Http => (b < 32 && b != b'\t') || b == 127,
        };
        escaped.then_some(if self == Enc::Http { b'%' } else { b'#' })
    }
}

/// Which address an address alias shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AddrOf {
    Client,
    Frontend,
    BackendSource,
    Server,
}

/// How a date alias writes its date.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DateStyle {
    /// `%t`: local, `dd/Mon/yyyy:hh:mm:ss.mmm`.
    LocalMillis,
    /// `%T`: UTC with `+0000`.
    Utc,
    /// `%Tl`: local with its offset.
    Local,
    /// `%Ts`: seconds since the epoch.
    Unix,
    /// `%ms`: the milliseconds of the date.
    Millis,
}

/// A part of the request line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HttpPart {
    /// `%r`: the whole request line.
    Line,
    /// `%HM`.
    Method,
    /// `%HU`: the URI as received.
    Uri,
    /// `%HP`: the URI without its query string.
    UriPath,
    /// `%HPO`: the path only (no scheme, host or query).
    PathOnly,
    /// `%HQ`: the query string with its `?`.
    Query,
    /// `%HV`.
    Version,
}

/// What an alias shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Alias {
    /// `%o`: no output, sets the default flags.
    Defaults,
    Ip(AddrOf),
    Port(AddrOf),
    FrontendName,
    FrontendTransport,
    BackendName,
    ServerName,
    Date {
        request: bool,
        style: DateStyle,
    },
    Number(LogNumber),
    BackendConnections,
    ServerConnections,
    Status,
    Retries,
    Text(LogText),
    Captures {
        response: bool,
        list: bool,
    },
    Http(HttpPart),
}

/// A date alias (table shorthand).
const fn date(request: bool, style: DateStyle) -> Alias {
    Alias::Date { request, style }
}

/// A header-capture alias (table shorthand).
const fn captures(response: bool, list: bool) -> Alias {
    Alias::Captures { response, list }
}

/// The aliases of §8.2.6's table.
const ALIASES: &[(&str, Alias)] = &[
    ("o", Alias::Defaults),
    ("t", date(false, DateStyle::LocalMillis)),
    ("T", date(false, DateStyle::Utc)),
    ("Tl", date(false, DateStyle::Local)),
    ("Ts", date(false, DateStyle::Unix)),
    ("ms", date(false, DateStyle::Millis)),
    ("tr", date(true, DateStyle::LocalMillis)),
    ("trg", date(true, DateStyle::Utc)),
    ("trl", date(true, DateStyle::Local)),
    ("Ta", Alias::Number(LogNumber::Active)),
    ("Tc", Alias::Number(LogNumber::Connect)),
    ("Td", Alias::Number(LogNumber::Data)),
    ("Th", Alias::Number(LogNumber::Handshake)),
    ("Ti", Alias::Number(LogNumber::Idle)),
    ("Tq", Alias::Number(LogNumber::Request)),
    ("TR", Alias::Number(LogNumber::RequestHead)),
    ("Tr", Alias::Number(LogNumber::Response)),
    ("Tt", Alias::Number(LogNumber::Total)),
    ("Tu", Alias::Number(LogNumber::User)),
    ("Tw", Alias::Number(LogNumber::Queue)),
    ("B", Alias::Number(LogNumber::BytesToClient)),
    ("U", Alias::Number(LogNumber::BytesFromClient)),
    ("ac", Alias::Number(LogNumber::ProcessConnections)),
    ("fc", Alias::Number(LogNumber::FrontendConnections)),
    ("bq", Alias::Number(LogNumber::BackendQueue)),
    ("sq", Alias::Number(LogNumber::ServerQueue)),
    ("lc", Alias::Number(LogNumber::LogCounter)),
    ("rt", Alias::Number(LogNumber::RequestCounter)),
    ("pid", Alias::Number(LogNumber::Pid)),
    ("rc", Alias::Retries),
    ("ST", Alias::Status),
    ("bc", Alias::BackendConnections),
    ("sc", Alias::ServerConnections),
    ("CC", Alias::Text(LogText::RequestCookie)),
    ("CS", Alias::Text(LogText::ResponseCookie)),
    ("H", Alias::Text(LogText::Hostname)),
    ("ID", Alias::Text(LogText::UniqueId)),
    ("ts", Alias::Text(LogText::TerminationState)),
    ("tsc", Alias::Text(LogText::TerminationStateCookie)),
    ("sslc", Alias::Text(LogText::TlsCipher)),
    ("sslv", Alias::Text(LogText::TlsVersion)),
    ("r", Alias::Http(HttpPart::Line)),
    ("HM", Alias::Http(HttpPart::Method)),
    ("HU", Alias::Http(HttpPart::Uri)),
    ("HP", Alias::Http(HttpPart::UriPath)),
    ("HPO", Alias::Http(HttpPart::PathOnly)),
    ("HQ", Alias::Http(HttpPart::Query)),
    ("HV", Alias::Http(HttpPart::Version)),
    ("ci", Alias::Ip(AddrOf::Client)),
    ("cp", Alias::Port(AddrOf::Client)),
    ("fi", Alias::Ip(AddrOf::Frontend)),
    ("fp", Alias::Port(AddrOf::Frontend)),
    ("bi", Alias::Ip(AddrOf::BackendSource)),
    ("bp", Alias::Port(AddrOf::BackendSource)),
    ("si", Alias::Ip(AddrOf::Server)),
    ("sp", Alias::Port(AddrOf::Server)),
    ("f", Alias::FrontendName),
    ("ft", Alias::FrontendTransport),
    ("b", Alias::BackendName),
    ("s", Alias::ServerName),
    ("hr", captures(false, false)),
    ("hrl", captures(false, true)),
    ("hs", captures(true, false)),
    ("hsl", captures(true, true)),
];

/// One piece of a format.
#[derive(Clone, Debug)]
enum Item {
    /// Literal text.
    Text(Vec<u8>),
    /// A run of spaces in a log format: one space, unless the output already ends with one.
    Separator,
    /// `%[expr]`.
    Expr(Expr, Flags),
    /// `%alias`.
    Alias(Alias, Flags),
}

/// The aliases HAProxy 2.6 reserves for proxies in `mode http` (a `mode tcp` proxy's formats
/// may not use them).
const HTTP_ONLY_ALIASES: &[&str] = &[
    "CC", "CS", "Ta", "Ti", "Tq", "Tr", "TR", "HM", "HP", "HPO", "HQ", "HU", "HV", "r", "tr",
    "trg", "trl",
];

/// A compiled custom log format. Cloning is cheap but for the literal text.
#[derive(Clone)]
pub struct LogFormat {
    text: String,
    items: Vec<Item>,
    /// Log lines (`parse_log`) rather than header fields and payloads.
    log: bool,
    /// The first alias it uses that only means something in HTTP, if any.
    http_alias: Option<&'static str>,
}

impl fmt::Debug for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogFormat")
            .field("text", &self.text)
            .field("log", &self.log)
            .finish()
    }
}

impl LogFormat {
    /// Compiles `text` for a header field, a payload, a redirect location or a variable:
    /// spaces are kept as written, bytes a header field may not contain are
    /// written as `%XX`, and a missing or empty string is written as nothing (`-` with
    /// `+M`).
    ///
    /// Rejects a `%` at the end or before an unexpected character, an unclosed `%{` or
    /// `%[`, an empty `%[]`, an invalid sample expression (with [`Expr::parse`]'s message)
    /// and an unknown alias ("no such log-format alias '%xy'...").
    pub fn parse(text: &str, maps: &MapStore) -> Result<LogFormat, String> {
        LogFormat::compile(text, maps, false, false)
    }

    /// Compiles a `unique-id-format`: written for a header field as with
    /// [`LogFormat::parse`], but with runs of spaces merged as in a log line (HAProxy
    /// does both).
    pub fn parse_unique_id(text: &str, maps: &MapStore) -> Result<LogFormat, String> {
        LogFormat::compile(text, maps, true, false)
    }

    /// Compiles `text` for a log line (`log-format`, `error-log-format`): as
    /// [`LogFormat::parse`], except that runs of spaces are merged into one separator
    /// (§8.2.6 "spaces are considered as delimiters and are merged"), non-printable bytes
    /// are written as `#XX` (§8.6), and a missing or empty string is written `-` (`-M`
    /// turns that off).
    pub fn parse_log(text: &str, maps: &MapStore) -> Result<LogFormat, String> {
        LogFormat::compile(text, maps, true, true)
    }

    /// `merge_spaces`: spaces are separators; `log`: written for a log line (`#XX`, `+M`).
    fn compile(
        text: &str,
        maps: &MapStore,
        merge_spaces: bool,
        log: bool,
    ) -> Result<LogFormat, String> {
        let bytes = text.as_bytes();
        let mut items = Vec::new();
        let mut literal = Vec::new();
        let mut defaults = Flags {
            mandatory: log,
            ..Flags::default()
        };
        let mut http_alias = None;
        let mut pos = 0;
        while let Some(&b) = bytes.get(pos) {
            if b != b'%' {
                if merge_spaces && b == b' ' {
                    flush(&mut literal, &mut items);
                    if !matches!(items.last(), Some(Item::Separator)) {
                        items.push(Item::Separator);
                    }
                    while bytes.get(pos) == Some(&b' ') {
                        pos += 1;
                    }
                } else {
                    literal.push(b);
                    pos += 1;
                }
                continue;
            }
            pos += 1;
            if bytes.get(pos) == Some(&b'%') {
                literal.push(b'%');
                pos += 1;
                continue;
            }
            let mut flags = defaults;
            if bytes.get(pos) == Some(&b'{') {
                let close = bytes
                    .iter()
                    .skip(pos)
                    .position(|&c| c == b'}')
                    .map(|n| n + pos)
                    .ok_or_else(|| format!("missing '}}' after '%{{' at position {pos}"))?;
                parse_flags(text.get(pos + 1..close).unwrap_or(""), &mut flags);
                pos = close + 1;
            }
            match bytes.get(pos) {
                Some(b'[') => {
                    let start = pos + 1;
                    let end = expr_end(bytes, start).ok_or_else(|| {
                        format!(
                            "missing ']' after sample expression '{}'",
                            text.get(start..).unwrap_or("")
                        )
                    })?;
                    let source = text.get(start..end).unwrap_or("");
                    if source.is_empty() {
                        return Err(format!("empty sample expression at position {pos}"));
                    }
                    let expr = Expr::parse(source, maps).map_err(|e| {
                        format!("failed to parse sample expression '{source}' : {e}")
                    })?;
                    flush(&mut literal, &mut items);
                    items.push(Item::Expr(expr, flags));
                    pos = end + 1;
                }
                Some(c) if c.is_ascii_alphabetic() => {
                    let start = pos;
                    while bytes.get(pos).is_some_and(u8::is_ascii_alphabetic) {
                        pos += 1;
                    }
                    let name = text.get(start..pos).unwrap_or("");
                    let &(name, alias) =
                        ALIASES.iter().find(|(n, _)| *n == name).ok_or_else(|| {
                            format!(
                                "no such log-format alias '%{name}' (write '%%' for a literal '%')"
                            )
                        })?;
                    if HTTP_ONLY_ALIASES.contains(&name) {
                        http_alias = http_alias.or(Some(name));
                    }
                    if alias == Alias::Defaults {
                        defaults = flags;
                    } else {
                        flush(&mut literal, &mut items);
                        items.push(Item::Alias(alias, flags));
                    }
                }
                Some(_) => {
                    let c = text
                        .get(pos..)
                        .and_then(|t| t.chars().next())
                        .unwrap_or('?');
                    return Err(format!(
                        "unexpected character '{c}' after '%' at position {pos} (write '%%' for a literal '%')"
                    ));
                }
                None => {
                    return Err(
                        "'%' at the end of the format (write '%%' for a literal '%')".to_string(),
                    );
                }
            }
        }
        flush(&mut literal, &mut items);
        Ok(LogFormat {
            text: text.to_string(),
            items,
            log,
            http_alias,
        })
    }

    /// The first alias the format uses that HAProxy reserves for HTTP (`%r`, `%HM`, `%Ta`,
    /// `%CC`...), which a `mode tcp` proxy may not use; `None` if there is none.
    pub fn http_only_alias(&self) -> Option<&'static str> {
        self.http_alias
    }

    /// The format as it was written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// True if the format has no item: it renders the same text for every stream.
    pub fn is_constant(&self) -> bool {
        self.items
            .iter()
            .all(|item| matches!(item, Item::Text(_) | Item::Separator))
    }

    /// The stages where every sample expression of the format can produce a sample
    /// ([`Stages::ALL`] without expressions; aliases print `-` where they have no value).
    pub fn stages(&self) -> Stages {
        self.exprs()
            .fold(Stages::ALL, |stages, expr| stages & expr.stages())
    }

    /// Checks every sample expression with [`Expr::check_stages`]; the first error is
    /// returned.
    pub fn check_stages(&mut self, where_: Stages) -> Result<(), String> {
        self.items.iter_mut().try_for_each(|item| match item {
            Item::Expr(expr, _) => expr.check_stages(where_),
            _ => Ok(()),
        })
    }

    /// True if the format prints the server connection's addresses (`%bi`, `%bp`, `%si`,
    /// `%sp`, `bc_src`...), which a stream then has to keep for its log line.
    pub fn uses_server_connection(&self) -> bool {
        self.items.iter().any(|item| match item {
            Item::Expr(expr, _) => expr.source() == Source::ServerConnection,
            Item::Alias(Alias::Ip(which) | Alias::Port(which), _) => {
                matches!(which, AddrOf::BackendSource | AddrOf::Server)
            }
            _ => false,
        })
    }

    fn exprs(&self) -> impl Iterator<Item = &Expr> {
        self.items.iter().filter_map(|item| match item {
            Item::Expr(expr, _) => Some(expr),
            _ => None,
        })
    }

    /// Appends the text for the stream `ctx` to `out`. Nothing is allocated but `out`'s
    /// growth, except where a converter or an IPv6 address needs a buffer.
    pub fn render(&self, ctx: &dyn Context, out: &mut Vec<u8>) {
        // A separator is dropped at the start and after another one, as in HAProxy.
        let mut spaced = true;
        let enc = if self.log { Enc::Log } else { Enc::Http };
        for item in &self.items {
            let before = out.len();
            match item {
                Item::Text(text) => out.extend_from_slice(text),
                Item::Separator => {
                    if !spaced {
                        out.push(b' ');
                        spaced = true;
                    }
                    continue;
                }
                Item::Expr(expr, flags) => render_sample(expr.eval(ctx), *flags, enc, out),
                Item::Alias(alias, flags) => render_alias(*alias, *flags, enc, ctx, out),
            }
            if out.len() != before {
                spaced = false;
            }
        }
    }
}

/// Moves pending literal text into an item.
fn flush(literal: &mut Vec<u8>, items: &mut Vec<Item>) {
    if !literal.is_empty() {
        items.push(Item::Text(std::mem::take(literal)));
    }
}

/// Applies `+F` / `-F` flags separated by commas. Unknown flags (and arguments without a
/// sign) are ignored, as HAProxy ignores them.
fn parse_flags(list: &str, flags: &mut Flags) {
    for arg in list.split(',') {
        let (on, name) = match arg.split_at_checked(1) {
            Some(("+", name)) => (true, name),
            Some(("-", name)) => (false, name),
            _ => continue,
        };
        match name {
            "Q" => flags.quote = on,
            "X" => flags.hex = on,
            "E" => flags.escape = on,
            "M" => flags.mandatory = on,
            _ => {}
        }
    }
}

/// The position of the `]` closing a sample expression starting at `pos`: the first one
/// outside parentheses and quotes, with the quoting rules of expression arguments (quotes
/// count inside parentheses, `\` escapes outside single quotes).
fn expr_end(bytes: &[u8], mut pos: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    while let Some(&b) = bytes.get(pos) {
        match (quote, b) {
            (Some(b'\''), b'\'') => quote = None,
            (Some(b'\''), _) => {}
            (_, b'\\') => pos += 1,
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') if depth > 0 => quote = Some(b),
            (None, b'(') => depth += 1,
            (None, b')') => depth = depth.saturating_sub(1),
            (None, b']') if depth == 0 => return Some(pos),
            (None, _) => {}
        }
        pos += 1;
    }
    None
}

/// Writes `bytes` with the encoding and the `E` flag, without quotes.
fn put_encoded(out: &mut Vec<u8>, bytes: &[u8], escape: bool, enc: Enc) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if let Some(prefix) = enc.prefix(b) {
            out.push(prefix);
            out.push(DIGITS[usize::from(b >> 4)]);
            out.push(DIGITS[usize::from(b & 15)]);
        } else {
            if escape && matches!(b, b'"' | b'\\' | b']') {
                out.push(b'\\');
            }
            out.push(b);
        }
    }
}

/// Writes a string item: quoted with `Q`; a missing or empty value is `""` when quoted,
/// `-` when mandatory (`M`, log lines), and nothing otherwise.
fn put_text(out: &mut Vec<u8>, value: Option<&[u8]>, flags: Flags, enc: Enc) {
    match value {
        Some(v) if !v.is_empty() => {
            quote_open(out, flags);
            put_encoded(out, v, flags.escape, enc);
            quote_open(out, flags);
        }
        _ if flags.quote => out.extend_from_slice(b"\"\""),
        _ if flags.mandatory => out.push(b'-'),
        _ => {}
    }
}

/// Writes a quote if the item is quoted (used to open and to close).
fn quote_open(out: &mut Vec<u8>, flags: Flags) {
    if flags.quote {
        out.push(b'"');
    }
}

/// Writes a number item, `-` when unknown; `hex_width` is the `X` form's width, `None`
/// for numbers HAProxy never writes in hexadecimal.
fn put_number(out: &mut Vec<u8>, value: Option<i64>, flags: Flags, hex_width: Option<usize>) {
    let _ = match (value, hex_width) {
        (None, _) => write!(out, "-"),
        (Some(v), Some(width)) if flags.hex => write!(out, "{:0width$X}", v.max(0)),
        (Some(v), _) => {
            put_int(out, v);
            Ok(())
        }
    };
}

/// Writes `n` in decimal, as `{n}` would, without the formatting machinery: numbers and
/// addresses are rendered on every request by header rewrites.
fn put_int(out: &mut Vec<u8>, n: i64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = n.unsigned_abs();
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[start..]);
}

/// Writes an address: hexadecimal bytes with `X`, its usual notation (quoted with `Q`)
/// otherwise.
fn put_ip(out: &mut Vec<u8>, ip: IpAddr, flags: Flags) {
    if flags.hex {
        let octets = match ip {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        for o in octets {
            let _ = write!(out, "{o:02X}");
        }
        return;
    }
    quote_open(out, flags);
    match ip {
        IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                put_int(out, i64::from(octet));
            }
        }
        IpAddr::V6(_) => out.extend_from_slice(ip_text(ip).as_bytes()),
    }
    quote_open(out, flags);
}

/// Writes the value of a sample expression, cast to text.
fn render_sample(sample: Option<Sample<'_>>, flags: Flags, enc: Enc, out: &mut Vec<u8>) {
    match sample {
        None => put_text(out, None, flags, enc),
        Some(Sample::Int(i)) => {
            quote_open(out, flags);
            put_int(out, i);
            quote_open(out, flags);
        }
        Some(Sample::Bool(b)) => put_text(out, Some(if b { b"1" } else { b"0" }), flags, enc),
        Some(Sample::Ip(ip)) => {
            // Expressions are cast to strings: no hexadecimal form.
            put_ip(
                out,
                ip,
                Flags {
                    hex: false,
                    ..flags
                },
            );
        }
        Some(Sample::Str(b) | Sample::Bin(b) | Sample::Meth(b)) => {
            put_text(out, Some(&b), flags, enc);
        }
    }
}

/// Seconds and microseconds since the epoch (0 for a date before it).
fn epoch(at: SystemTime) -> (i64, u32) {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    (
        i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        since.subsec_micros(),
    )
}

fn render_date(
    at: Option<SystemTime>,
    style: DateStyle,
    flags: Flags,
    ctx: &dyn Context,
    out: &mut Vec<u8>,
) {
    let Some(at) = at else {
        out.push(b'-');
        return;
    };
    let (secs, micros) = epoch(at);
    let millis = micros / 1000;
    let local = || {
        let offset = ctx.utc_offset(at);
        (civil(secs.saturating_add(i64::from(offset))), offset)
    };
    match style {
        DateStyle::LocalMillis => {
            write_log_date(&local().0, out);
            let _ = write!(out, ".{millis:03}");
        }
        DateStyle::Utc => {
            write_log_date(&civil(secs), out);
            out.extend_from_slice(b" +0000");
        }
        DateStyle::Local => {
            let (date, offset) = local();
            write_log_date(&date, out);
            out.push(b' ');
            write_offset(offset, out);
        }
        DateStyle::Unix => put_number(out, Some(secs), flags, Some(8)),
        DateStyle::Millis => {
            let _ = if flags.hex {
                write!(out, "{millis:02X}")
            } else {
                write!(out, "{millis:03}")
            };
        }
    }
}

fn render_http(part: HttpPart, flags: Flags, ctx: &dyn Context, out: &mut Vec<u8>) {
    let Some((buf, head)) = ctx.request() else {
        // HAProxy's text for a stream without a (valid) request.
        put_text(out, Some(b"<BADREQ>"), flags, Enc::Url);
        return;
    };
    // The line as logs keep it (`tune.http.logurilen`): each part is what of it is left.
    let method = head.method_bytes(buf);
    let full_target = head.target_bytes(buf);
    let room = ctx.logged_request_line_len();
    let target_room = room.saturating_sub(method.len() + 1);
    let target = &full_target[..full_target.len().min(target_room)];
    let kept_of_version = room.saturating_sub(method.len() + full_target.len() + 2);
    let version = &head.version.as_bytes()[..kept_of_version.min(8)];
    // A line cut before its version reads as HTTP/0.9 (one without a version), as HAProxy
    // reads what it kept; `%r` shows only what was kept.
    let version_part: &[u8] = if version.is_empty() {
        b"HTTP/0.9"
    } else {
        version
    };
    let method = &method[..method.len().min(room)];
    let spaces: [&[u8]; 2] = [
        if room > method.len() { b" " } else { b"" },
        if room > method.len() + 1 + full_target.len() {
            b" "
        } else {
            b""
        },
    ];
    let before_query =
        |t: &'_ [u8]| -> usize { t.iter().position(|&b| b == b'?').unwrap_or(t.len()) };
    let pieces: [&[u8]; 5] = match part {
        HttpPart::Line => [method, spaces[0], target, spaces[1], version],
        HttpPart::Method => [method, b"", b"", b"", b""],
        HttpPart::Uri => [target, b"", b"", b"", b""],
        HttpPart::UriPath => [
            target.get(..before_query(target)).unwrap_or(target),
            b"",
            b"",
            b"",
            b"",
        ],
        HttpPart::PathOnly => {
            let pq = path_query(target, head.form).unwrap_or(target);
            [pq.get(..before_query(pq)).unwrap_or(pq), b"", b"", b"", b""]
        }
        HttpPart::Query => [
            target.get(before_query(target)..).unwrap_or_default(),
            b"",
            b"",
            b"",
            b"",
        ],
        HttpPart::Version => [version_part, b"", b"", b"", b""],
    };
    // Request-line parts are written even when empty (an absent query shows as nothing).
    quote_open(out, flags);
    for piece in pieces {
        put_encoded(out, piece, flags.escape, Enc::Url);
    }
    quote_open(out, flags);
}

fn render_captures(
    response: bool,
    list: bool,
    flags: Flags,
    facts: Option<&dyn LogFacts>,
    out: &mut Vec<u8>,
) {
    let Some(facts) = facts else {
        return;
    };
    let count = facts.captured_header_count(response);
    if count == 0 {
        return;
    }
    if list {
        for index in 0..count {
            if index > 0 {
                out.push(b' ');
            }
            put_text(
                out,
                facts.captured_header(response, index),
                flags,
                Enc::Header,
            );
        }
    } else {
        quote_open(out, flags);
        out.push(b'{');
        for index in 0..count {
            if index > 0 {
                out.push(b'|');
            }
            if let Some(value) = facts.captured_header(response, index) {
                put_encoded(out, value, flags.escape, Enc::Header);
            }
        }
        out.push(b'}');
        quote_open(out, flags);
    }
}

fn render_alias(alias: Alias, flags: Flags, enc: Enc, ctx: &dyn Context, out: &mut Vec<u8>) {
    let facts = ctx.log_facts();
    let address = |which: AddrOf| match which {
        AddrOf::Client => ctx.src(),
        AddrOf::Frontend => ctx.dst(),
        AddrOf::BackendSource => ctx.server_connection_src(),
        AddrOf::Server => ctx.server_connection_dst(),
    };
    match alias {
        Alias::Defaults => {}
        Alias::Ip(which) => match address(which) {
            Some(addr) => put_ip(out, addr.ip(), flags),
            // The client side without an address is a unix socket, which HAProxy names.
            None if matches!(which, AddrOf::Client | AddrOf::Frontend) => {
                put_text(out, Some(b"unix"), flags, enc);
            }
            None => out.push(b'-'),
        },
        Alias::Port(which) => match address(which) {
            Some(addr) if flags.hex => {
                let _ = write!(out, "{:04X}", addr.port());
            }
            Some(addr) => {
                let _ = write!(out, "{}", addr.port());
            }
            None => out.push(b'-'),
        },
        Alias::FrontendName => put_text(out, Some(ctx.frontend_name().as_bytes()), flags, enc),
        Alias::FrontendTransport => {
            quote_open(out, flags);
            put_encoded(out, ctx.frontend_name().as_bytes(), flags.escape, enc);
            if facts.is_some_and(|f| f.frontend_tls()) {
                out.push(b'~');
            }
            quote_open(out, flags);
        }
        // Until a backend is chosen, the stream's backend is its frontend.
        Alias::BackendName => put_text(
            out,
            Some(ctx.backend_name().unwrap_or(ctx.frontend_name()).as_bytes()),
            flags,
            enc,
        ),
        Alias::ServerName => put_text(
            out,
            Some(ctx.server_name().map_or(&b"<NOSRV>"[..], str::as_bytes)),
            flags,
            enc,
        ),
        Alias::Date { request, style } => {
            let at = facts.and_then(|f| {
                if request {
                    f.request_date()
                } else {
                    f.accept_date()
                }
            });
            // Before the log line, the request's date is the stream's start.
            render_date(at.or_else(|| ctx.stream_start()), style, flags, ctx, out);
        }
        Alias::Number(which) => {
            let hex_width = match which {
                LogNumber::Pid | LogNumber::RequestCounter => Some(4),
                _ => None,
            };
            if facts.is_some_and(|f| f.incomplete(which)) {
                out.push(b'+');
            }
            put_number(out, ctx.log_number(which), flags, hex_width);
        }
        Alias::BackendConnections => {
            put_number(
                out,
                ctx.backend_stat(None, BackendStat::Connections),
                flags,
                None,
            );
        }
        Alias::ServerConnections => {
            // No server, no connection: HAProxy logs 0.
            let value = match ctx.server_name() {
                Some(server) => ctx.server_stat(None, server, ServerStat::Connections),
                None => Some(0),
            };
            put_number(out, value, flags, None);
        }
        Alias::Status => {
            let status = facts
                .and_then(|f| f.number(LogNumber::Status))
                .or_else(|| ctx.response().map(|(_, head)| i64::from(head.status)));
            put_number(out, status, flags, None);
        }
        Alias::Retries => {
            if facts.is_some_and(|f| f.redispatched()) {
                out.push(b'+');
            }
            put_number(
                out,
                facts.and_then(|f| f.number(LogNumber::Retries)),
                flags,
                None,
            );
        }
        Alias::Text(which) => {
            let enc = match which {
                LogText::RequestCookie | LogText::ResponseCookie if enc == Enc::Log => Enc::Header,
                _ => enc,
            };
            let text = facts.and_then(|f| f.text(which)).or_else(|| match which {
                LogText::Hostname => ctx.hostname().map(str::as_bytes),
                _ => None,
            });
            put_text(out, text, flags, enc);
        }
        Alias::Captures { response, list } => render_captures(response, list, flags, facts, out),
        Alias::Http(part) => render_http(part, flags, ctx, out),
    }
}

#[cfg(test)]
mod tests;
