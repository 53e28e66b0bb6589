//! The rule keywords of proxies (configuration.txt §4.2, §7): `acl`, `http-request`,
//! `http-response`, `http-after-response`, `redirect`, `use_backend`, `use-server`, `stick`,
//! `tcp-request connection`, `tcp-request session`,
//! `tcp-request content`, `tcp-request inspect-delay`, `monitor-uri` and `monitor fail`.
//!
//! Each line is compiled here, once, with the sample engine (`sluice-sample`): conditions,
//! expressions and log-format strings are parsed and checked against the stages where the
//! rule runs (a response fetch in a request rule is an error, as in HAProxy), so the data path
//! only evaluates. An action Sluice does not implement is "not supported", never ignored.
//! Rules are evaluated in the order of the file within each rule set; [`ProxyRules`] holds a
//! proxy's sets. Read [`parse_rule_line`] first.

use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::directive::Directive;
use crate::preprocess::Line;
use crate::sections::SectionKind;
use crate::stick::StickAction;
use regex::bytes::Regex;
use sluice_sample::{AclSet, Condition, Expr, LogFormat, MapStore, Stages};
use std::sync::Arc;
use std::time::Duration;

/// A rule: what to do, when, and where it was declared.
#[derive(Clone, Debug)]
pub struct Rule<A> {
    /// The action.
    pub action: A,
    /// The `if`/`unless` guard; `None` applies always.
    pub cond: Option<Condition>,
    /// Where the rule was declared.
    pub span: Span,
}

impl<A> Rule<A> {
    /// True if the rule applies: no guard, or a guard that holds for `ctx`.
    pub fn applies(&self, ctx: &dyn sluice_sample::Context) -> bool {
        self.cond.as_ref().is_none_or(|c| c.eval(ctx))
    }

    /// Like [`Rule::applies`] during content inspection: `None` while the guard waits for
    /// data that has not arrived yet.
    pub fn decide(&self, ctx: &dyn sluice_sample::Context) -> Option<bool> {
        self.cond.as_ref().map_or(Some(true), |c| c.decide(ctx))
    }
}

/// A proxy's rule sets, in the order HAProxy evaluates them.
#[derive(Clone, Debug, Default)]
pub struct ProxyRules {
    /// The proxy's named ACLs (created at the first `acl` or rule line).
    pub acls: Option<AclSet>,
    /// `tcp-request connection` rules (frontends), before anything is read.
    pub tcp_connection: Vec<Rule<TcpAction>>,
    /// `tcp-request session` rules (frontends), once the PROXY header is read and before
    /// any content.
    pub tcp_session: Vec<Rule<TcpAction>>,
    /// `tcp-request inspect-delay`: how long `tcp-request content` rules may wait for data.
    pub inspect_delay: Option<Duration>,
    /// `tcp-request content` rules.
    pub tcp_content: Vec<Rule<TcpAction>>,
    /// `tcp-response inspect-delay`: how long `tcp-response content` rules may wait for the
    /// server's data.
    pub response_inspect_delay: Option<Duration>,
    /// `tcp-response content` rules (backends, `mode tcp`).
    pub tcp_response: Vec<Rule<TcpAction>>,
    /// `monitor-uri`: requests for this exact URI are answered by the proxy itself.
    pub monitor_uri: Option<String>,
    /// `monitor fail` conditions: when one holds, the monitor URI answers 503.
    pub monitor_fail: Vec<Condition>,
    /// `http-request` rules.
    pub http_request: Vec<Rule<HttpAction>>,
    /// `redirect` rules, evaluated after the `http-request` ones.
    pub redirects: Vec<Rule<Redirect>>,
    /// `use_backend` rules (frontends).
    pub use_backend: Vec<Rule<BackendTarget>>,
    /// `stick on|match|store-request|store-response` rules (backends), in declaration order.
    pub stick_rules: Vec<Rule<crate::stick::StickRule>>,
    /// `use-server` rules (backends): the server's name.
    pub use_server: Vec<Rule<String>>,
    /// `http-response` rules.
    pub http_response: Vec<Rule<HttpAction>>,
    /// `http-after-response` rules: run last on every response, the proxy's own answers
    /// included.
    pub http_after_response: Vec<Rule<HttpAction>>,
    /// Request capture slots (`capture request header`, `declare capture request`,
    /// `http-request capture ... len`), numbered in declaration order.
    pub request_captures: Vec<CaptureSlot>,
    /// Response capture slots (`capture response header`, `declare capture response`).
    pub response_captures: Vec<CaptureSlot>,
    /// `capture cookie NAME len N`: the first request cookie, and the first cookie the
    /// server sets, whose name starts with `NAME`, cut to `N` bytes (`%CC`, `%CS`).
    pub cookie_capture: Option<(String, usize)>,
    /// The statistics page (`stats *`, see [`crate::stats_page`]), served after the frontend's
    /// `http-request` rules.
    pub stats_page: Option<crate::stats_page::StatsPage>,
}

/// A numbered capture slot of a frontend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureSlot {
    /// The header captured in every message (`capture request|response header NAME`);
    /// `None` for slots that rules fill.
    pub header: Option<String>,
    /// The longest value kept, in bytes.
    pub len: usize,
}

impl ProxyRules {
    /// True if a `tcp-request content switch-mode http` rule may upgrade the connection.
    pub fn switches_to_http(&self) -> bool {
        self.tcp_content
            .iter()
            .any(|r| matches!(r.action, TcpAction::SwitchModeHttp))
    }

    /// True if the proxy has rules that only make sense in `mode http`.
    pub fn has_http_rules(&self) -> bool {
        !self.http_request.is_empty()
            || !self.http_response.is_empty()
            || !self.http_after_response.is_empty()
            || !self.redirects.is_empty()
            || self.monitor_uri.is_some()
            || self.stats_page.is_some()
    }

    /// True if an `http-response` or `http-after-response` rule may read the request, which
    /// the response side must then keep a copy of.
    pub fn response_rules_read_request(&self) -> bool {
        self.http_response
            .iter()
            .chain(&self.http_after_response)
            .any(may_read_request)
    }
}

/// False only for a rule that certainly reads nothing of the request: no condition reading
/// it, and an action without computed values or with constant ones.
fn may_read_request(rule: &Rule<HttpAction>) -> bool {
    use sluice_sample::Source;
    let reads = [
        Source::Request,
        Source::RequestHeaders,
        Source::RequestBuffer,
    ];
    if let Some(cond) = &rule.cond
        && reads.into_iter().any(|source| cond.uses(source))
    {
        return true;
    }
    match &rule.action {
        HttpAction::SetHeader { value, .. } | HttpAction::AddHeader { value, .. } => {
            !value.is_constant()
        }
        HttpAction::DelHeader(_) | HttpAction::SetStatus { .. } | HttpAction::Allow => false,
        _ => true,
    }
}

/// Where `use_backend` sends the traffic.
#[derive(Clone, Debug)]
pub enum BackendTarget {
    /// A backend named in the file; the plan resolves it to an index.
    Named(String),
    /// A backend whose name a log-format string computes per request (`%[...]`).
    Dynamic(LogFormat),
}

/// A `tcp-request connection|content` action.
#[derive(Clone, Debug)]
pub enum TcpAction {
    /// Stop evaluating this rule set and go on.
    Accept,
    /// Close the connection at once.
    Reject,
    /// Set a variable from an expression (`set-var`) or a log-format string (`set-var-fmt`).
    SetVar {
        /// `scope.name`.
        name: String,
        /// The value.
        value: VarValue,
    },
    /// Remove a variable.
    UnsetVar {
        /// `scope.name`.
        name: String,
    },
    /// `expect-proxy layer4` (`tcp-request connection` only): the connection starts with a
    /// PROXY protocol header, read before anything else, as with `bind ... accept-proxy`.
    ExpectProxy,
    /// `switch-mode http` (`tcp-request content` of a frontend): the connection is parsed as
    /// HTTP from here on, with the frontend's HTTP rules, and goes to an HTTP backend.
    SwitchModeHttp,
    /// `capture <sample> len <N>` (`tcp-request content`): the sample, as text, into the
    /// request capture slot the rule declared.
    Capture {
        /// What to capture.
        expr: Expr,
        /// The slot, numbered with the frontend's other request captures.
        slot: usize,
    },
    /// `track-scN`, `sc-inc-gpc0|1`, `sc-inc-gpc(I,N)`, `sc-add-gpc(I,N)`, `sc-set-gpt0`,
    /// `sc-set-gpt(I,N)`.
    Stick(StickAction),
    /// `set-log-level` (content rules only).
    SetLogLevel(LogLevelChange),
    /// `silent-drop`: the client's connection disappears without telling it (a reset that
    /// cannot leave this host), as the HTTP action does.
    SilentDrop,
    /// `set-priority-class|offset` (content rules only).
    SetPriority(PriorityPart, Expr),
    /// `set-fc-tos|set-fc-mark` (old names `set-tos|set-mark`): a field of the packets sent
    /// to the client.
    MarkClientPackets(PacketField, IntValue),
}

/// The field of the packets sent to the client that `set-fc-tos` or `set-fc-mark` sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketField {
    /// The IP TOS byte (IPv6: the traffic class), `IP_TOS`.
    Tos,
    /// The firewall mark (`SO_MARK`), which netfilter and routing rules can match.
    Mark,
}

/// An integer written in a rule, or an expression giving one when the rule runs.
#[derive(Clone, Debug)]
pub enum IntValue {
    /// Written in the rule.
    Fixed(i64),
    /// Computed; no value, or one that is not an integer, changes nothing.
    Expr(Expr),
}

/// Which part of a request's queue priority a `set-priority-*` action sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PriorityPart {
    /// `set-priority-class`: -2047 (first) to 2047.
    Class,
    /// `set-priority-offset`: milliseconds added to the time queued, -524287 to 524287.
    Offset,
}

/// The change a pattern-editing action makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternEdit {
    /// `set-map`: the value of the key's entries, or a new entry.
    SetMap,
    /// `del-map`: the key's entries go.
    DelMap,
    /// `add-acl`: a new pattern, unless it is there.
    AddAcl,
    /// `del-acl`: the pattern's entries go.
    DelAcl,
}

impl PatternEdit {
    /// The action's name.
    pub fn keyword(self) -> &'static str {
        match self {
            PatternEdit::SetMap => "set-map",
            PatternEdit::DelMap => "del-map",
            PatternEdit::AddAcl => "add-acl",
            PatternEdit::DelAcl => "del-acl",
        }
    }

    /// Whether it edits a map (else an ACL).
    pub fn of_map(self) -> bool {
        matches!(self, PatternEdit::SetMap | PatternEdit::DelMap)
    }
}

/// What `set-src`, `set-src-port`, `set-dst` and `set-dst-port` change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressPart {
    /// The client's address (its port kept when the family allows, else 0).
    SourceIp,
    /// The client's port.
    SourcePort,
    /// The address the client connected to.
    DestinationIp,
    /// The port the client connected to.
    DestinationPort,
}

/// A timeout `set-timeout` changes for one stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamTimeout {
    /// `timeout server`.
    Server,
    /// `timeout tunnel`.
    Tunnel,
}

/// The value `set-timeout` gives.
#[derive(Clone, Debug)]
pub enum TimeoutValue {
    /// A time written in the rule.
    Fixed(std::time::Duration),
    /// An expression giving milliseconds.
    Expr(Expr),
}

/// `set-log-level`: the level the stream's log line is sent at, or none at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevelChange {
    /// `silent`: no log line.
    Silent,
    /// A syslog severity, 0 (`emerg`) to 7 (`debug`).
    Level(u8),
}

/// The argument of `set-log-level`.
fn parse_log_level(rest: &[String]) -> Result<LogLevelChange, String> {
    match rest {
        [level] if level == "silent" => Ok(LogLevelChange::Silent),
        [level] => crate::logging::level_code(level)
            .map(LogLevelChange::Level)
            .ok_or_else(|| {
                format!("'set-log-level' expects a syslog level or 'silent', not '{level}'")
            }),
        _ => Err("'set-log-level' expects a syslog level or 'silent'".to_owned()),
    }
}

/// How `del-header -m` compares names.
#[derive(Clone, Debug)]
pub enum NameMatch {
    /// Exact, ignoring case (the default).
    Str(String),
    /// Prefix, ignoring case.
    Beg(String),
    /// Suffix, ignoring case.
    End(String),
    /// Substring, ignoring case.
    Sub(String),
    /// Regular expression.
    Reg(Regex),
}

impl NameMatch {
    /// True if the field name `name` matches.
    pub fn matches(&self, name: &[u8]) -> bool {
        fn lower_contains(hay: &[u8], needle: &str, at: fn(&[u8], &[u8]) -> bool) -> bool {
            at(hay, needle.as_bytes())
        }
        match self {
            NameMatch::Str(n) => name.eq_ignore_ascii_case(n.as_bytes()),
            NameMatch::Beg(n) => lower_contains(name, n, |h, n| {
                h.len() >= n.len() && h[..n.len()].eq_ignore_ascii_case(n)
            }),
            NameMatch::End(n) => lower_contains(name, n, |h, n| {
                h.len() >= n.len() && h[h.len() - n.len()..].eq_ignore_ascii_case(n)
            }),
            NameMatch::Sub(n) => lower_contains(name, n, |h, n| {
                n.is_empty() || h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
            }),
            NameMatch::Reg(re) => re.is_match(name),
        }
    }
}

/// The body of a `return` or `deny` answer.
#[derive(Clone, Debug)]
pub enum ReplyBody {
    /// No body (or the built-in error page for `deny`).
    Empty,
    /// Fixed bytes (`string`, `file`).
    Fixed(Arc<[u8]>),
    /// A log-format string evaluated per request (`lf-string`, `lf-file`).
    Format(LogFormat),
    /// A complete raw HTTP response (`errorfile`), sent as it is.
    Raw(Arc<[u8]>),
    /// The proxy's error page for the status (`default-errorfiles`, and `deny` without body).
    ErrorPage,
}

/// A response built by the proxy (`http-request return|deny`, `http-response return|deny`).
#[derive(Clone, Debug)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// `content-type`, required with a body.
    pub content_type: Option<String>,
    /// The body.
    pub body: ReplyBody,
    /// `hdr NAME FMT` fields.
    pub headers: Vec<(String, LogFormat)>,
}

/// What a redirect builds its Location from.
#[derive(Clone, Debug)]
pub enum RedirectKind {
    /// `location`: the value itself.
    Location(LogFormat),
    /// `prefix`: the value followed by the request's URI.
    Prefix(LogFormat),
    /// `scheme`: `scheme://host` followed by the request's URI.
    Scheme(LogFormat),
}

/// A redirect (`redirect`, `http-request redirect`, `http-response redirect`).
#[derive(Clone, Debug)]
pub struct Redirect {
    /// How the Location is built.
    pub kind: RedirectKind,
    /// 301, 302 (default), 303, 307 or 308.
    pub code: u16,
    /// `drop-query`: no query string after a prefix or scheme.
    pub drop_query: bool,
    /// `append-slash`: add a `/` to a path that does not end with one.
    pub append_slash: bool,
    /// `ignore-empty`: skip the rule when the location is empty.
    pub ignore_empty: bool,
    /// `set-cookie NAME[=value]` / `clear-cookie NAME[=]`: a Set-Cookie field value.
    pub cookie: Option<String>,
}

/// An `http-request` or `http-response` action.
#[derive(Clone, Debug)]
pub enum HttpAction {
    /// Stop evaluating the rules of this set.
    Allow,
    /// `use-service prometheus-exporter`: answer with the metrics.
    PrometheusExporter,
    /// Refuse with a reply (403 by default) and close.
    Deny(Reply),
    /// Answer with a reply (200 by default).
    Return(Reply),
    /// Answer with a redirect.
    Redirect(Redirect),
    /// Hold the request for `timeout tarpit`, then answer with a reply (500 by default)
    /// and close.
    Tarpit(Reply),
    /// `set-src`, `set-src-port`, `set-dst`, `set-dst-port`: the transaction's addresses as
    /// fetches, logs and the forwarded headers see them from then on.
    SetAddress {
        /// Which part changes.
        part: AddressPart,
        /// The new value (an address, or a port).
        expr: Expr,
    },
    /// `set-map(file)`, `del-map(file)`, `add-acl(file)`, `del-acl(file)`: change the entries
    /// of a map or ACL file loaded by the configuration, as the CLI's `set map`... do.
    EditPatterns {
        /// Which change.
        edit: PatternEdit,
        /// The file, as the map or ACL that loads it names it.
        file: String,
        /// The entry's key.
        key: LogFormat,
        /// The value (`set-map` only).
        value: Option<LogFormat>,
    },
    /// `reject`: close the connection without an answer.
    Reject,
    /// `silent-drop`: make the connection disappear, the client not told (a reset that
    /// goes no further than the next hop).
    SilentDrop,
    /// `set-log-level`.
    SetLogLevel(LogLevelChange),
    /// `disable-l7-retry`: a failure of the request other than a failed connection is not
    /// retried (`retry-on`).
    DisableL7Retry,
    /// `set-priority-class|offset <expr>`: the request's place in a server queue.
    SetPriority(PriorityPart, Expr),
    /// `set-fc-tos|set-fc-mark` (old names `set-tos|set-mark`): a field of the packets sent
    /// to the client.
    MarkClientPackets(PacketField, IntValue),
    /// `early-hint <name> <fmt>`: a field of the 103 (Early Hints) interim answer sent to
    /// the client before any other (RFC 8297); consecutive rules share one answer.
    EarlyHint {
        /// Field name.
        name: String,
        /// Field value.
        value: LogFormat,
    },
    /// `cache-use NAME` (requests): answer from the cache when it holds a fresh copy of the
    /// response, and remember the request's key so that `cache-store` may fill it.
    CacheUse(String),
    /// `cache-store NAME` (responses): keep this response, as the rules before left it, in
    /// the cache when it may be kept.
    CacheStore(String),
    /// `strict-mode on|off`: whether a failed rewrite of the following rules of the set is
    /// an internal error (500) or is ignored (only counted).
    StrictMode(bool),
    /// `set-timeout server|tunnel <timeout>|<expr>` (requests of proxies with a backend).
    SetTimeout {
        /// Which timeout.
        which: StreamTimeout,
        /// Its value for this stream.
        value: TimeoutValue,
    },
    /// `wait-for-body`: hold the rules until the body is whole, `at_least` bytes of it came
    /// (0: no such bound) or the buffer is full; 408 when `time` passes first.
    WaitForBody {
        /// The longest wait.
        time: std::time::Duration,
        /// Enough body bytes to go on with.
        at_least: u64,
    },
    /// Normalize the request's URI (`normalize-uri`, experimental in HAProxy 2.6).
    NormalizeUri(UriNormalizer),
    /// Store a sample in a capture slot of the frontend (`capture <sample> len|id N`).
    Capture {
        /// The sample, stored as text.
        expr: Expr,
        /// The slot (request slots for `http-request`, response slots for `http-response`).
        slot: usize,
    },
    /// Ask for credentials: a 401 with `WWW-Authenticate: Basic realm="..."`.
    Auth {
        /// The realm; `None` means the name of the proxy whose rule this is.
        realm: Option<String>,
    },
    /// Replace every field `name` with one of value `value`.
    SetHeader {
        /// Field name.
        name: String,
        /// Field value.
        value: LogFormat,
    },
    /// Append a field.
    AddHeader {
        /// Field name.
        name: String,
        /// Field value.
        value: LogFormat,
    },
    /// Remove the fields whose name matches.
    DelHeader(NameMatch),
    /// Replace the whole value of each field `name` that `regex` matches.
    ReplaceHeader {
        /// Field name.
        name: String,
        /// What the value must match.
        regex: Regex,
        /// The new value; `\1`..`\9` name the regex's groups.
        replacement: LogFormat,
    },
    /// Like `ReplaceHeader`, for each comma-separated element of the values.
    ReplaceValue {
        /// Field name.
        name: String,
        /// What each element must match.
        regex: Regex,
        /// The new element; `\1`..`\9` name the regex's groups.
        replacement: LogFormat,
    },
    /// Change a part of the request line.
    SetLine {
        /// Which part.
        part: LinePart,
        /// The new value.
        value: LogFormat,
    },
    /// Replace a part of the request line that `regex` matches.
    ReplaceLine {
        /// Which part (path, pathq or uri).
        part: LinePart,
        /// What the part must match.
        regex: Regex,
        /// The new value; `\1`..`\9` name the regex's groups.
        replacement: LogFormat,
    },
    /// Change the response status (and reason).
    SetStatus {
        /// The new status.
        status: u16,
        /// The new reason phrase, if given.
        reason: Option<String>,
    },
    /// Set a variable from an expression (`set-var`) or a log-format string (`set-var-fmt`).
    SetVar {
        /// `scope.name`.
        name: String,
        /// The value.
        value: VarValue,
    },
    /// Remove a variable.
    UnsetVar {
        /// `scope.name`.
        name: String,
    },
    /// `track-scN`, `sc-inc-gpc0|1`, `sc-inc-gpc(I,N)`, `sc-add-gpc(I,N)`, `sc-set-gpt0`,
    /// `sc-set-gpt(I,N)`.
    Stick(StickAction),
}

/// A normalizer of `http-request normalize-uri` (configuration.txt §4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UriNormalizer {
    /// `fragment-encode`: `#` becomes `%23`.
    FragmentEncode,
    /// `fragment-strip`: the fragment is removed.
    FragmentStrip,
    /// `path-merge-slashes`: runs of `/` become one.
    MergeSlashes,
    /// `path-strip-dot`: `.` segments are removed.
    StripDot,
    /// `path-strip-dotdot [full]`: `..` segments are resolved; `full` also drops those
    /// that would climb above the root.
    StripDotDot {
        /// `full` was given.
        full: bool,
    },
    /// `percent-decode-unreserved [strict]`.
    PercentDecodeUnreserved {
        /// `strict`: a malformed sequence gets 400.
        strict: bool,
    },
    /// `percent-to-uppercase [strict]`.
    PercentToUppercase {
        /// `strict`: a malformed sequence gets 400.
        strict: bool,
    },
    /// `query-sort-by-name`.
    QuerySortByName,
}

impl UriNormalizer {
    fn parse(args: &[String]) -> Result<UriNormalizer, String> {
        let name = args.first().ok_or("'normalize-uri' expects a normalizer")?;
        let option = |word: &str| -> Result<bool, String> {
            match &args[1..] {
                [] => Ok(false),
                [w] if w == word => Ok(true),
                [other, ..] => Err(format!("unexpected argument '{other}'")),
            }
        };
        let plain = |n: UriNormalizer| match args.get(1) {
            None => Ok(n),
            Some(other) => Err(format!("unexpected argument '{other}'")),
        };
        match name.as_str() {
            "fragment-encode" => plain(UriNormalizer::FragmentEncode),
            "fragment-strip" => plain(UriNormalizer::FragmentStrip),
            "path-merge-slashes" => plain(UriNormalizer::MergeSlashes),
            "path-strip-dot" => plain(UriNormalizer::StripDot),
            "query-sort-by-name" => plain(UriNormalizer::QuerySortByName),
            "path-strip-dotdot" => Ok(UriNormalizer::StripDotDot {
                full: option("full")?,
            }),
            "percent-decode-unreserved" => Ok(UriNormalizer::PercentDecodeUnreserved {
                strict: option("strict")?,
            }),
            "percent-to-uppercase" => Ok(UriNormalizer::PercentToUppercase {
                strict: option("strict")?,
            }),
            other => Err(format!("unknown normalizer '{other}'")),
        }
    }
}

/// The value a `set-var` action stores.
#[derive(Clone, Debug)]
pub enum VarValue {
    /// A sample expression, keeping its type.
    Expr(Expr),
    /// A log-format string, stored as a string.
    Format(LogFormat),
}

/// The part of the request line a `set-*` or `replace-*` action changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinePart {
    /// The method.
    Method,
    /// The path (query string kept).
    Path,
    /// The path and the query string.
    PathQ,
    /// The query string (without `?`).
    Query,
    /// The whole target.
    Uri,
}

/// Where a rule line sits: its section kind decides the stages its fetches must exist at.
#[derive(Clone, Copy)]
struct Place {
    kind: SectionKind,
}

impl Place {
    fn stages(self, front: Stages, back: Stages) -> Stages {
        match self.kind {
            SectionKind::Frontend => front,
            SectionKind::Backend => back,
            _ => front | back,
        }
    }
}

/// Parses a rule keyword line into `rules`. Returns false if the first word is not a rule
/// keyword (the caller goes on with its own keywords).
pub(crate) fn parse_rule_line(
    rules: &mut ProxyRules,
    kind: SectionKind,
    line: &Line,
    maps: &MapStore,
    diags: &mut Diagnostics,
) -> bool {
    let Some(first) = line.words.first() else {
        return false;
    };
    let second = line.words.get(1).map(String::as_str);
    let keyword_words = match (first.as_str(), second) {
        (
            "acl"
            | "http-request"
            | "http-response"
            | "http-after-response"
            | "redirect"
            | "use_backend"
            | "use-server",
            _,
        )
        | ("monitor-uri" | "capture" | "declare", _) => 1,
        ("tcp-request", Some("connection" | "content" | "inspect-delay" | "session")) => 2,
        ("tcp-response", Some("content" | "inspect-delay")) => 2,
        ("monitor", Some("fail")) => 2,
        ("stick", Some("on" | "match" | "store-request" | "store-response")) => 2,
        _ => return false,
    };
    let d = Directive::new(line, keyword_words);
    if kind == SectionKind::Defaults {
        diags.push(Diagnostic::not_supported(
            d.span,
            format!("'{}' in a defaults section", d.keyword),
        ));
        return true;
    }
    let place = Place { kind };
    let mut warnings = Vec::new();
    let acls = rules.acls.get_or_insert_with(|| AclSet::new(maps.clone()));
    let result = match d.keyword.as_str() {
        "acl" => acls.add(&line.words[1..]),
        // HAProxy ignores these, with a warning, in a section without the side they act on.
        "capture" if lacks(kind, Side::Frontend).is_some() => {
            warnings.extend(lacks(kind, Side::Frontend));
            Ok(())
        }
        "capture" => parse_capture_header(rules, &line.words),
        "declare" => frontend_only(kind).and_then(|()| parse_declare(rules, &line.words)),
        "monitor-uri" => {
            if let Some(warning) = lacks(kind, Side::Frontend) {
                warnings.push(warning);
                Ok(())
            } else {
                match (line.words.get(1), line.words.len()) {
                    (Some(uri), 2) => {
                        rules.monitor_uri = Some(uri.clone());
                        Ok(())
                    }
                    _ => Err("expects exactly one URI".to_owned()),
                }
            }
        }
        "monitor fail" if lacks(kind, Side::Frontend).is_some() => {
            warnings.extend(lacks(kind, Side::Frontend));
            Ok(())
        }
        "monitor fail" => Condition::parse(&line.words[2..], acls).map(|mut c| {
            let stages = place.stages(Stages::FE_HTTP_REQ, Stages::NONE);
            check_cond(&mut c, stages, None, &mut warnings);
            rules.monitor_fail.push(c);
        }),
        "use_backend" if lacks(kind, Side::Frontend).is_some() => {
            warnings.extend(lacks(kind, Side::Frontend));
            Ok(())
        }
        "use_backend" => (|| {
            let (args, mut cond) = split_condition(&line.words[1..], acls)?;
            let target = match args {
                [name] if name.contains("%[") => {
                    let mut fmt = LogFormat::parse(name, maps)?;
                    fmt.check_stages(Stages::USE_BACKEND)?;
                    BackendTarget::Dynamic(fmt)
                }
                [name] => BackendTarget::Named(name.clone()),
                [] => return Err("expects a backend name".to_owned()),
                [_, extra, ..] => return Err(format!("unexpected argument '{extra}'")),
            };
            if let Some(c) = &mut cond {
                check_cond(c, Stages::USE_BACKEND, None, &mut warnings);
            }
            rules.use_backend.push(rule(target, cond, d.span));
            Ok(())
        })(),
        // HAProxy warns too, but keeps the rule and then finds no such server in a frontend:
        // an error either way.
        "use-server" => backend_only(kind).and_then(|()| {
            let (args, cond) = split_condition(&line.words[1..], acls)?;
            let name = match args {
                [name] => name.clone(),
                [] => return Err("expects a server name".to_owned()),
                [_, extra, ..] => return Err(format!("unexpected argument '{extra}'")),
            };
            let Some(mut cond) = cond else {
                return Err("expects 'if' or 'unless' and a condition".to_owned());
            };
            check_cond(&mut cond, Stages::USE_SERVER, None, &mut warnings);
            rules.use_server.push(rule(name, Some(cond), d.span));
            Ok(())
        }),
        "redirect" => {
            let (args, mut cond) = match split_condition(&line.words[1..], acls) {
                Ok(v) => v,
                Err(e) => {
                    diags.push(d.alert(e));
                    return true;
                }
            };
            let stages = place.stages(Stages::FE_HTTP_REQ, Stages::BE_HTTP_REQ);
            parse_redirect(args, maps, stages, false).map(|r| {
                if let Some(c) = &mut cond {
                    check_cond(c, stages, None, &mut warnings);
                }
                rules.redirects.push(rule(r, cond, d.span));
            })
        }
        "http-after-response" => {
            let stages = place.stages(Stages::FE_HTTP_RES, Stages::BE_HTTP_RES);
            split_condition(&line.words[1..], acls).and_then(|(args, mut cond)| {
                let action = if args.first().is_some_and(|a| a == "capture") {
                    parse_capture_action(args, rules, kind, maps, stages, true)?
                } else {
                    parse_after_response_action(args, maps, stages, &mut warnings)?
                };
                if let Some(c) = &mut cond {
                    check_cond(c, stages, None, &mut warnings);
                }
                let previous = rules.http_after_response.last();
                warnings.extend(unreachable_after(previous, ends_http_rules));
                rules.http_after_response.push(rule(action, cond, d.span));
                Ok(())
            })
        }
        "http-request" | "http-response" => {
            let response = d.keyword == "http-response";
            let stages = if response {
                place.stages(Stages::FE_HTTP_RES, Stages::BE_HTTP_RES)
            } else {
                place.stages(Stages::FE_HTTP_REQ, Stages::BE_HTTP_REQ)
            };
            let parsed = split_condition(&line.words[1..], acls).and_then(|(args, mut cond)| {
                let mut action = if args.first().is_some_and(|a| a == "capture") {
                    parse_capture_action(args, rules, kind, maps, stages, response)?
                } else {
                    // The timeouts it sets are the server side's: a backend's only.
                    if !response && args.first().is_some_and(|a| a == "set-timeout") {
                        backend_only(kind)?;
                    }
                    parse_http_action(args, maps, stages, response, &mut warnings)?
                };
                warnings.extend(drop_idle_content_type(&mut action));
                if let Some(c) = &mut cond {
                    check_cond(c, stages, None, &mut warnings);
                }
                Ok((action, cond))
            });
            parsed.map(|(action, cond)| {
                let list = if response {
                    &mut rules.http_response
                } else {
                    &mut rules.http_request
                };
                warnings.extend(unreachable_after(list.last(), ends_http_rules));
                list.push(rule(action, cond, d.span));
            })
        }
        "stick on" | "stick match" | "stick store-request" | "stick store-response"
            if lacks(kind, Side::Backend).is_some() =>
        {
            warnings.extend(lacks(kind, Side::Backend));
            Ok(())
        }
        "stick on" | "stick match" | "stick store-request" | "stick store-response" => {
            split_condition(&line.words[1..], acls).and_then(|(args, mut cond)| {
                let stick = crate::stick::parse_stick_rule(args, maps)?;
                if let Some(c) = &mut cond {
                    let stages = if stick.kind == crate::stick::StickKind::StoreResponse {
                        Stages::HTTP_RES | Stages::TCP_RES_CONTENT
                    } else {
                        Stages::USE_SERVER
                    };
                    check_cond(c, stages, None, &mut warnings);
                }
                rules.stick_rules.push(rule(stick, cond, d.span));
                Ok(())
            })
        }
        "tcp-request inspect-delay" => {
            if let Some(delay) = d.timeout(2, diags) {
                rules.inspect_delay = Some(delay);
            }
            Ok(())
        }
        "tcp-response inspect-delay" => backend_only(kind).map(|()| {
            if let Some(delay) = d.timeout(2, diags) {
                rules.response_inspect_delay = Some(delay);
            }
        }),
        "tcp-response content" => backend_only(kind)
            .and_then(|()| split_condition(&line.words[2..], acls))
            .and_then(|(args, mut cond)| {
                let stages = Stages::TCP_RES_CONTENT;
                let action = parse_tcp_action(args, maps, stages)?;
                if let Some(c) = &mut cond {
                    check_cond(c, stages, Some(d.keyword.as_str()), &mut warnings);
                }
                rules.tcp_response.push(rule(action, cond, d.span));
                Ok(())
            }),
        "tcp-request connection" | "tcp-request session" | "tcp-request content" => {
            let content = d.keyword == "tcp-request content";
            let stages = match d.keyword.as_str() {
                "tcp-request content" => {
                    place.stages(Stages::FE_TCP_REQ_CONTENT, Stages::BE_TCP_REQ_CONTENT)
                }
                "tcp-request session" => Stages::TCP_REQ_SESS,
                _ => Stages::TCP_REQ_CONN,
            };
            let checked = if content { Ok(()) } else { frontend_only(kind) };
            checked
                .and_then(|()| split_condition(&line.words[2..], acls))
                .and_then(|(args, mut cond)| {
                    let action = if args.first().is_some_and(|a| a == "capture") {
                        parse_tcp_capture(args, rules, kind, maps, stages, content)?
                    } else {
                        parse_tcp_action(args, maps, stages)?
                    };
                    if let Some(c) = &mut cond {
                        check_cond(c, stages, Some(d.keyword.as_str()), &mut warnings);
                    }
                    let list = match d.keyword.as_str() {
                        "tcp-request content" => &mut rules.tcp_content,
                        "tcp-request session" => &mut rules.tcp_session,
                        _ => &mut rules.tcp_connection,
                    };
                    list.push(rule(action, cond, d.span));
                    Ok(())
                })
        }
        _ => Ok(()),
    };
    for warning in warnings {
        diags.push(d.warning(warning));
    }
    match result {
        Ok(()) => {}
        Err(message) if message == "not supported by Sluice" => {
            diags.push(Diagnostic::not_supported(d.span, d.keyword.clone()));
        }
        Err(message) if message.starts_with(UNSUPPORTED) => {
            let what = message.trim_start_matches(UNSUPPORTED);
            diags.push(Diagnostic::not_supported(
                d.span,
                format!("{} {what}", d.keyword),
            ));
        }
        Err(message) => diags.push(d.alert(message)),
    }
    true
}

/// Marks an error message as "this action is not supported" (the rest names it).
const UNSUPPORTED: &str = "\u{0}unsupported:";

/// HAProxy's rule actions that Sluice does not implement yet: refused as "not supported",
/// while a word in no list is an unknown action (a typo).
const KNOWN_ACTIONS: &[&str] = &[
    "add-acl",
    "del-acl",
    "del-map",
    "do-resolve",
    "expect-netscaler-cip",
    "expect-proxy",
    "reject",
    "send-proxy-v2",
    "send-spoe-group",
    "set-bandwidth-limit",
    "set-bc-mark",
    "set-bc-tos",
    "set-dst",
    "set-dst-port",
    "set-log-level",
    "set-map",
    "set-nice",
    "set-src",
    "set-src-port",
    "set-timeout",
    "silent-drop",
    "strict-mode",
    "switch-mode",
    "use-service",
    "wait-for-body",
    "wait-for-handshake",
    "attach-srv",
    "close",
];

/// The rule lists a stream goes through, in the order it goes through them, named as
/// HAProxy names them in its warnings.
const RULE_ORDER: [&str; 8] = [
    "tcp-request connection",
    "tcp-request session",
    "tcp-request content",
    "monitor fail",
    "http-request",
    "redirect",
    "use_backend",
    "use-server",
];

/// Warns, as HAProxy does, about a rule written after one that runs later: it still runs
/// first, whatever the order of the lines (`http-request` after `use_backend`...).
pub fn check_rule_order(lines: &[Line], diags: &mut Diagnostics) {
    let mut seen = [false; RULE_ORDER.len()];
    for line in lines {
        let words: Vec<&str> = line.words.iter().take(2).map(String::as_str).collect();
        let rank = match words.as_slice() {
            [
                "tcp-request",
                stage @ ("connection" | "session" | "content"),
                ..,
            ] => RULE_ORDER.iter().position(|r| r.ends_with(stage)),
            ["monitor", "fail", ..] => Some(3),
            ["http-request", ..] => Some(4),
            ["redirect", ..] => Some(5),
            ["use_backend", ..] => Some(6),
            ["use-server", ..] => Some(7),
            _ => None,
        };
        let Some(rank) = rank else {
            continue;
        };
        if let Some(later) = (rank + 1..RULE_ORDER.len()).find(|&r| seen[r]) {
            let (this, that) = (RULE_ORDER[rank], RULE_ORDER[later]);
            diags.push(Diagnostic::warning(
                &line.span,
                this,
                format!(
                    "a '{this}' rule placed after a '{that}' rule will still be processed before"
                ),
            ));
        }
        seen[rank] = true;
    }
}

/// `capture request|response header NAME len N` (`capture cookie` is not supported).
fn parse_capture_header(rules: &mut ProxyRules, words: &[String]) -> Result<(), String> {
    let side = words.get(1).map(String::as_str);
    let slots = match side {
        Some("request") => &mut rules.request_captures,
        Some("response") => &mut rules.response_captures,
        Some("cookie") => {
            return match &words[2..] {
                [name, len_kw, len] if len_kw == "len" => {
                    rules.cookie_capture = Some((name.clone(), capture_len(len)?));
                    Ok(())
                }
                _ => Err("expects 'capture cookie <name> len <length>'".to_owned()),
            };
        }
        _ => return Err("expects 'request header', 'response header' or 'cookie'".to_owned()),
    };
    match &words[2..] {
        [kw, name, len_kw, len] if kw == "header" && len_kw == "len" => {
            let len = capture_len(len)?;
            slots.push(CaptureSlot {
                header: Some(field_name(name)?),
                len,
            });
            Ok(())
        }
        _ => Err(format!(
            "expects 'capture {} header <name> len <length>'",
            side.unwrap_or_default()
        )),
    }
}

/// `declare capture request|response len N`.
fn parse_declare(rules: &mut ProxyRules, words: &[String]) -> Result<(), String> {
    match &words[1..] {
        [kw, side, len_kw, len] if kw == "capture" && len_kw == "len" => {
            let slots = match side.as_str() {
                "request" => &mut rules.request_captures,
                "response" => &mut rules.response_captures,
                other => return Err(format!("expects 'request' or 'response', not '{other}'")),
            };
            slots.push(CaptureSlot {
                header: None,
                len: capture_len(len)?,
            });
            Ok(())
        }
        _ => Err("expects 'declare capture request|response len <length>'".to_owned()),
    }
}

/// A capture's length. Any is taken, as HAProxy takes it: a value is cut to it, never
/// padded, so a large one costs nothing beyond the value itself.
fn capture_len(text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .map_err(|_| format!("invalid capture length '{text}' (a number of bytes)"))
}

/// The length of a `capture ... len <N>` action, which declares its slot: 0 is refused, as
/// HAProxy refuses it.
fn action_capture_len(text: &str) -> Result<usize, String> {
    match capture_len(text)? {
        0 => Err("'capture' expects a positive length".to_owned()),
        len => Ok(len),
    }
}

/// `http-request capture <sample> len <N> | id <N>`, `http-response capture <sample> id <N>`.
fn parse_capture_action(
    args: &[String],
    rules: &mut ProxyRules,
    kind: SectionKind,
    maps: &MapStore,
    stages: Stages,
    response: bool,
) -> Result<HttpAction, String> {
    let [_, sample, how, n] = args else {
        return Err(
            "'capture' expects a sample expression, then 'len <length>' or 'id <slot>'".to_owned(),
        );
    };
    let mut expr = Expr::parse(sample, maps)?;
    expr.check_stages(stages)?;
    let slot = match how.as_str() {
        "len" if response => {
            return Err("a response 'capture' expects 'id <slot>' (declare the slot with 'declare capture response')".to_owned());
        }
        "len" => {
            let len = action_capture_len(n)?;
            if !kind.has_frontend() {
                return Err(format!(
                    "'capture ... len' needs a frontend capability, which a '{}' section has not (use 'id')",
                    kind.keyword()
                ));
            }
            rules
                .request_captures
                .push(CaptureSlot { header: None, len });
            rules.request_captures.len() - 1
        }
        "id" => n
            .parse::<usize>()
            .map_err(|_| format!("invalid capture id '{n}'"))?,
        other => return Err(format!("expects 'len' or 'id', not '{other}'")),
    };
    Ok(HttpAction::Capture { expr, slot })
}

/// `tcp-request content capture <sample> len <N>`: the sample, as text, in a new request
/// capture slot of the frontend (read with `capture.req.hdr(N)` and `%hr`).
fn parse_tcp_capture(
    args: &[String],
    rules: &mut ProxyRules,
    kind: SectionKind,
    maps: &MapStore,
    stages: Stages,
    content: bool,
) -> Result<TcpAction, String> {
    if !content {
        return Err("'capture' is allowed in 'tcp-request content' rules only".to_owned());
    }
    if !kind.has_frontend() {
        return Err(format!(
            "'capture' needs a frontend capability, which a '{}' section has not",
            kind.keyword()
        ));
    }
    let [_, sample, len, n] = args else {
        return Err("'capture' expects a sample expression, then 'len <length>'".to_owned());
    };
    if len != "len" {
        return Err(format!("'capture' expects 'len <length>', not '{len}'"));
    }
    let len = action_capture_len(n)?;
    let mut expr = Expr::parse(sample, maps)?;
    expr.check_stages(stages)?;
    rules
        .request_captures
        .push(CaptureSlot { header: None, len });
    let slot = rules.request_captures.len() - 1;
    Ok(TcpAction::Capture { expr, slot })
}

/// Capture rules naming a slot their frontend does not declare (checked once every slot is
/// known, since slots may be declared after the rules using them). A backend's rules use
/// the slots of whichever frontend sends the request, which only the run time knows.
pub(crate) fn check_capture_ids(
    rules: &ProxyRules,
    kind: SectionKind,
    proxy: &str,
) -> Vec<Diagnostic> {
    if !kind.has_frontend() {
        return Vec::new();
    }
    let sides = [
        (
            "http-request",
            &rules.http_request,
            rules.request_captures.len(),
        ),
        (
            "http-response",
            &rules.http_response,
            rules.response_captures.len(),
        ),
        (
            "http-after-response",
            &rules.http_after_response,
            rules.response_captures.len(),
        ),
    ];
    let mut diags = Vec::new();
    for (keyword, list, count) in sides {
        for r in list {
            if let HttpAction::Capture { slot, .. } = r.action
                && slot >= count
            {
                diags.push(Diagnostic::alert(
                    &r.span,
                    keyword,
                    format!("proxy '{proxy}': unable to find capture id '{slot}' referenced by {keyword} capture rule"),
                ));
            }
        }
    }
    diags
}

/// The pattern-editing actions name a map or ACL file that the configuration loads (a
/// converter or an ACL's `-f`), as in HAProxy: checked once every line was read, since the
/// file may be loaded after the rule.
pub(crate) fn check_pattern_edits(rules: &ProxyRules, maps: &MapStore) -> Vec<Diagnostic> {
    let all = [
        ("http-request", &rules.http_request),
        ("http-response", &rules.http_response),
        ("http-after-response", &rules.http_after_response),
    ];
    let mut diags = Vec::new();
    for (keyword, list) in all {
        for r in list {
            if let HttpAction::EditPatterns { edit, file, .. } = &r.action
                && maps.find_ref(file, edit.of_map()).is_none()
            {
                let kind = if edit.of_map() { "map" } else { "ACL" };
                diags.push(Diagnostic::alert(
                    &r.span,
                    keyword,
                    format!(
                        "'{}({file})': no {kind} of the configuration loads '{file}'",
                        edit.keyword()
                    ),
                ));
            }
        }
    }
    diags
}

/// HAProxy 2.6 refuses its experimental actions (`normalize-uri`) unless the global
/// section says `expose-experimental-directives`; so does Sluice, to accept the same files.
pub(crate) fn check_experimental(rules: &ProxyRules) -> Vec<Diagnostic> {
    rules
        .http_request
        .iter()
        .filter(|r| matches!(r.action, HttpAction::NormalizeUri(_)))
        .map(|r| {
            Diagnostic::alert(
                &r.span,
                "http-request",
                "'normalize-uri' is experimental: it must be allowed with 'expose-experimental-directives' in the global section",
            )
        })
        .collect()
}

/// The error for an action this rule keyword does not know.
fn unsupported(what: &str) -> String {
    // `del-acl(file)`, `do-resolve(var,resolvers)`: known by the name before the argument.
    let name = what.split('(').next().unwrap_or(what);
    if KNOWN_ACTIONS.contains(&name) || what.starts_with("lua.") || what.starts_with("sc-") {
        format!("{UNSUPPORTED}{name}")
    } else {
        format!("unknown action '{what}'")
    }
}

fn rule<A>(action: A, cond: Option<Condition>, span: &Span) -> Rule<A> {
    Rule {
        action,
        cond,
        span: span.clone(),
    }
}

/// The side of a proxy a keyword acts on.
#[derive(Clone, Copy)]
enum Side {
    Frontend,
    Backend,
}

/// The warning for a keyword of `side` in a section without that side (a `capture` in a
/// backend, a `stick` rule in a frontend), which HAProxy ignores rather than refuses.
fn lacks(kind: SectionKind, side: Side) -> Option<String> {
    let (capable, name) = match side {
        Side::Frontend => (kind.has_frontend(), "frontend"),
        Side::Backend => (kind.has_backend(), "backend"),
    };
    (!capable).then(|| {
        format!(
            "ignored because a '{}' section has no {name} capability",
            kind.keyword()
        )
    })
}

fn frontend_only(kind: SectionKind) -> Result<(), String> {
    if kind.has_frontend() {
        Ok(())
    } else {
        Err(format!(
            "not allowed in a '{}' section (only in frontend and listen sections)",
            kind.keyword()
        ))
    }
}

fn backend_only(kind: SectionKind) -> Result<(), String> {
    if kind.has_backend() {
        Ok(())
    } else {
        Err(format!(
            "not allowed in a '{}' section (only in backend and listen sections)",
            kind.keyword()
        ))
    }
}

/// Splits the words after the keyword into the action's arguments and the condition.
fn split_condition<'w>(
    words: &'w [String],
    acls: &AclSet,
) -> Result<(&'w [String], Option<Condition>), String> {
    match words.iter().position(|w| w == "if" || w == "unless") {
        Some(at) => {
            let cond = Condition::parse(&words[at..], acls)?;
            Ok((&words[..at], Some(cond)))
        }
        None => Ok((words, None)),
    }
}

/// The actions that end an HTTP rule set whatever follows, for [`unreachable_after`]: those
/// HAProxy 2.6 marks final (`reject`, `silent-drop` and services it does not).
fn ends_http_rules(action: &HttpAction) -> bool {
    matches!(
        action,
        HttpAction::Allow
            | HttpAction::Deny(_)
            | HttpAction::Tarpit(_)
            | HttpAction::Redirect(_)
            | HttpAction::Return(_)
            | HttpAction::Auth { .. }
    )
}

/// HAProxy's warning for a rule that follows one ending its rule set unconditionally: it
/// can never run.
pub(crate) fn unreachable_after<A>(
    previous: Option<&Rule<A>>,
    ends: impl Fn(&A) -> bool,
) -> Option<String> {
    let previous = previous.filter(|p| p.cond.is_none() && ends(&p.action))?;
    Some(format!(
        "never evaluated: the rule at line {} before it applies always and ends the rule set",
        previous.span.line
    ))
}

/// Parses a `stats http-request` rule (the words after the keyword) of a section of `kind`:
/// `allow`, `deny` or `auth` (the actions the manual lists for it), with an optional
/// condition.
pub(crate) fn parse_stats_rule(
    words: &[String],
    acls: &AclSet,
    maps: &MapStore,
    kind: SectionKind,
    span: &Span,
    warnings: &mut Vec<String>,
) -> Result<Rule<HttpAction>, String> {
    let (args, mut cond) = split_condition(words, acls)?;
    match args.first().map(String::as_str) {
        Some("allow" | "deny" | "auth") => {}
        Some(other) => {
            return Err(format!(
                "action '{other}' is not supported by Sluice in 'stats http-request' (allow, \
                 deny and auth are)"
            ));
        }
        None => return Err("expects 'allow', 'deny' or 'auth'".to_owned()),
    }
    let place = Place { kind };
    let stages = place.stages(Stages::FE_HTTP_REQ, Stages::BE_HTTP_REQ);
    let action = parse_http_action(args, maps, stages, false, warnings)?;
    if let Some(c) = &mut cond {
        check_cond(c, stages, None, warnings);
    }
    Ok(rule(action, cond, span))
}

/// An ACL that can never match where its rule runs is a warning, as in HAProxy, and never
/// matches (the rule stays; HAProxy's fetch finds nothing there). `rule` names a content
/// inspection rule, which HAProxy's warning names too.
fn check_cond(
    cond: &mut Condition,
    stages: Stages,
    rule: Option<&str>,
    warnings: &mut Vec<String>,
) {
    warnings.extend(cond.confine(stages, rule));
}

fn fmt_arg(text: &str, maps: &MapStore, stages: Stages) -> Result<LogFormat, String> {
    let mut fmt = LogFormat::parse(text, maps)?;
    fmt.check_stages(stages)?;
    Ok(fmt)
}

/// Splits `name(arg)` action words (`set-var(txn.x)`).
fn paren_arg<'w>(word: &'w str, action: &str) -> Option<&'w str> {
    word.strip_prefix(action)?
        .strip_prefix('(')?
        .strip_suffix(')')
}

/// Checks a variable name: `proc.`, `sess.`, `txn.`, `req.` or `res.` and a name of
/// letters, digits, `.` and `_` (configuration.txt §2.8).
fn var_name(text: &str) -> Result<String, String> {
    // set-var accepts conditions after the name (`set-var(txn.x,ifempty)`) since 2.7; 2.6
    // has none.
    let name = text.trim();
    let scoped = ["proc.", "sess.", "txn.", "req.", "res."]
        .iter()
        .any(|scope| name.len() > scope.len() && name.starts_with(scope));
    let valid_chars = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_');
    if scoped && valid_chars {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "invalid variable name '{name}' (expected proc., sess., txn., req. or res. followed by a name)"
        ))
    }
}

fn parse_tcp_action(args: &[String], maps: &MapStore, stages: Stages) -> Result<TcpAction, String> {
    let Some(action) = args.first() else {
        return Err("expects an action".to_owned());
    };
    let rest = &args[1..];
    let no_args = |a: TcpAction| match rest.first() {
        None => Ok(a),
        Some(extra) => Err(format!("unexpected argument '{extra}'")),
    };
    if let Some(name) = paren_arg(action, "set-var") {
        let name = var_name(name)?;
        let [expr] = rest else {
            return Err("expects exactly one sample expression".to_owned());
        };
        let mut expr = Expr::parse(expr, maps)?;
        expr.check_stages(stages)?;
        let value = VarValue::Expr(expr);
        return Ok(TcpAction::SetVar { name, value });
    }
    if let Some(name) = paren_arg(action, "set-var-fmt") {
        let name = var_name(name)?;
        let [text] = rest else {
            return Err("expects exactly one log-format string".to_owned());
        };
        let value = VarValue::Format(fmt_arg(text, maps, stages)?);
        return Ok(TcpAction::SetVar { name, value });
    }
    if let Some(stick) = crate::stick::parse_action(action, rest, maps, stages) {
        return stick.map(TcpAction::Stick);
    }
    if let Some(name) = paren_arg(action, "unset-var") {
        return no_args(TcpAction::UnsetVar {
            name: var_name(name)?,
        });
    }
    match action.as_str() {
        "accept" => no_args(TcpAction::Accept),
        "reject" => no_args(TcpAction::Reject),
        // `rst-ttl` (HAProxy 3.0) is refused by `no_args`: the reset's TTL is always 1.
        "silent-drop" => no_args(TcpAction::SilentDrop),
        "switch-mode" if stages.contains(Stages::FE_TCP_REQ_CONTENT) => match rest {
            [mode] if mode == "http" => Ok(TcpAction::SwitchModeHttp),
            [mode, proto, h1] if mode == "http" && proto == "proto" && h1 == "h1" => {
                Ok(TcpAction::SwitchModeHttp)
            }
            _ => Err("'switch-mode' expects 'http' (and optionally 'proto h1')".to_owned()),
        },
        "expect-proxy" if stages == Stages::TCP_REQ_CONN => match rest {
            [layer] if layer == "layer4" => Ok(TcpAction::ExpectProxy),
            _ => Err("'expect-proxy' expects 'layer4'".to_owned()),
        },
        // Content rules run within a stream, which has a log line; connection and session
        // rules do not.
        "set-log-level" if !stages.intersects(Stages::TCP_REQ_CONN | Stages::TCP_REQ_SESS) => {
            parse_log_level(rest).map(TcpAction::SetLogLevel)
        }
        // A request's place in a queue: `tcp-request content` only, as in HAProxy.
        "set-priority-class" | "set-priority-offset"
            if stages.intersects(Stages::TCP_REQ_CONTENT) =>
        {
            parse_priority(action, rest, maps, stages)
                .map(|(part, expr)| TcpAction::SetPriority(part, expr))
        }
        "set-fc-tos" | "set-tos" | "set-fc-mark" | "set-mark" => {
            parse_packet_field(action, rest, maps, stages)
                .map(|(field, value)| TcpAction::MarkClientPackets(field, value))
        }
        other => Err(unsupported(other)),
    }
}

/// `set-fc-tos|set-fc-mark <value>|<expr>` (and the old names `set-tos`, `set-mark`): a number,
/// decimal or hexadecimal (`0x`), within the field's range, or a sample expression.
fn parse_packet_field(
    action: &str,
    rest: &[String],
    maps: &MapStore,
    stages: Stages,
) -> Result<(PacketField, IntValue), String> {
    let [arg] = rest else {
        return Err(format!(
            "'{action}' expects a number or a sample expression"
        ));
    };
    let (field, max) = if action.ends_with("tos") {
        (PacketField::Tos, i64::from(u8::MAX))
    } else {
        (PacketField::Mark, i64::from(u32::MAX))
    };
    if arg.starts_with(|c: char| c.is_ascii_digit()) {
        let number = match arg.strip_prefix("0x").or_else(|| arg.strip_prefix("0X")) {
            Some(hex) => i64::from_str_radix(hex, 16),
            None => arg.parse::<i64>(),
        };
        return match number {
            Ok(value) if value <= max => Ok((field, IntValue::Fixed(value))),
            _ => Err(format!(
                "'{action}' expects a number from 0 to {max} (or 0x{max:x}), not '{arg}'"
            )),
        };
    }
    let mut expr = Expr::parse(arg, maps)?;
    expr.check_stages(stages)?;
    Ok((field, IntValue::Expr(expr)))
}

/// `set-priority-class|offset <expr>`.
fn parse_priority(
    action: &str,
    rest: &[String],
    maps: &MapStore,
    stages: Stages,
) -> Result<(PriorityPart, Expr), String> {
    let [expr] = rest else {
        return Err(format!("'{action}' expects exactly one sample expression"));
    };
    let mut expr = Expr::parse(expr, maps)?;
    expr.check_stages(stages)?;
    let part = if action == "set-priority-class" {
        PriorityPart::Class
    } else {
        PriorityPart::Offset
    };
    Ok((part, expr))
}

fn parse_http_action(
    args: &[String],
    maps: &MapStore,
    stages: Stages,
    response: bool,
    warnings: &mut Vec<String>,
) -> Result<HttpAction, String> {
    let Some(action) = args.first() else {
        return Err("expects an action".to_owned());
    };
    let rest = &args[1..];
    let fmt = |text: &str| fmt_arg(text, maps, stages);
    let exactly = |n: usize, what: &str| -> Result<(), String> {
        if rest.len() == n {
            Ok(())
        } else {
            Err(format!("'{action}' expects {what}"))
        }
    };
    if let Some(name) = paren_arg(action, "set-var") {
        let name = var_name(name)?;
        exactly(1, "exactly one sample expression")?;
        let mut expr = Expr::parse(&rest[0], maps)?;
        expr.check_stages(stages)?;
        return Ok(HttpAction::SetVar {
            name,
            value: VarValue::Expr(expr),
        });
    }
    if let Some(name) = paren_arg(action, "set-var-fmt") {
        let name = var_name(name)?;
        exactly(1, "exactly one log-format string")?;
        return Ok(HttpAction::SetVar {
            name,
            value: VarValue::Format(fmt(&rest[0])?),
        });
    }
    if let Some(stick) = crate::stick::parse_action(action, rest, maps, stages) {
        return stick.map(HttpAction::Stick);
    }
    for edit in [
        PatternEdit::SetMap,
        PatternEdit::DelMap,
        PatternEdit::AddAcl,
        PatternEdit::DelAcl,
    ] {
        let Some(file) = paren_arg(action, edit.keyword()).filter(|f| !f.is_empty()) else {
            continue;
        };
        let value = if edit == PatternEdit::SetMap {
            exactly(2, "a key and a value (log-format strings)")?;
            Some(fmt(&rest[1])?)
        } else {
            exactly(1, "a key (a log-format string)")?;
            None
        };
        return Ok(HttpAction::EditPatterns {
            edit,
            file: file.to_owned(),
            key: fmt(&rest[0])?,
            value,
        });
    }
    if let Some(name) = paren_arg(action, "unset-var") {
        exactly(0, "no argument")?;
        return Ok(HttpAction::UnsetVar {
            name: var_name(name)?,
        });
    }
    let request_only = |a: HttpAction| {
        if response {
            Err(format!(
                "'{action}' is not allowed in 'http-response' rules"
            ))
        } else {
            Ok(a)
        }
    };
    match action.as_str() {
        "allow" => {
            exactly(0, "no argument")?;
            Ok(HttpAction::Allow)
        }
        // A denied response becomes a 502: the server answered, but not acceptably.
        "deny" => {
            let status = if response { 502 } else { 403 };
            parse_reply(rest, maps, stages, status, true).map(HttpAction::Deny)
        }
        "return" => parse_reply(rest, maps, stages, 200, false).map(HttpAction::Return),
        "normalize-uri" => UriNormalizer::parse(rest)
            .map(HttpAction::NormalizeUri)
            .and_then(request_only),
        "tarpit" => parse_reply(rest, maps, stages, 500, true)
            .map(HttpAction::Tarpit)
            .and_then(request_only),
        "use-service" => {
            exactly(1, "a service name")?;
            match rest[0].as_str() {
                "prometheus-exporter" => request_only(HttpAction::PrometheusExporter),
                other => Err(format!("unknown service '{other}'")),
            }
        }
        "redirect" => parse_redirect(rest, maps, stages, true).map(HttpAction::Redirect),
        "auth" => {
            let realm = match rest {
                [] => None,
                [kw, realm] if kw == "realm" => {
                    // The realm is written between double quotes in the answer.
                    if realm
                        .bytes()
                        .any(|b| b == b'"' || b == b'\\' || b.is_ascii_control())
                    {
                        return Err(format!(
                            "invalid realm '{realm}' (no double quote, backslash or control character)"
                        ));
                    }
                    Some(realm.clone())
                }
                [kw] if kw == "realm" => return Err("'realm' expects a value".to_owned()),
                [kw, _, extra, ..] if kw == "realm" => {
                    return Err(format!("unexpected argument '{extra}'"));
                }
                [other, ..] => return Err(format!("unexpected argument '{other}'")),
            };
            request_only(HttpAction::Auth { realm })
        }
        "set-header" | "add-header" => {
            exactly(2, "a field name and a value")?;
            let name = field_name(&rest[0])?;
            let value = fmt(&rest[1])?;
            Ok(if action == "set-header" {
                HttpAction::SetHeader { name, value }
            } else {
                HttpAction::AddHeader { name, value }
            })
        }
        "del-header" => {
            let name = rest.first().ok_or("'del-header' expects a field name")?;
            let matcher = match &rest[1..] {
                [] => NameMatch::Str(name.clone()),
                [flag, method] if flag == "-m" => match method.as_str() {
                    "str" => NameMatch::Str(name.clone()),
                    "beg" => NameMatch::Beg(name.clone()),
                    "end" => NameMatch::End(name.clone()),
                    "sub" => NameMatch::Sub(name.clone()),
                    "reg" => NameMatch::Reg(regex(&format!("(?i){name}"))?),
                    other => {
                        return Err(format!(
                            "'del-header' expects a matching method among str, beg, end, sub and reg, not '{other}'"
                        ));
                    }
                },
                [extra, ..] => return Err(format!("unexpected argument '{extra}'")),
            };
            Ok(HttpAction::DelHeader(matcher))
        }
        "replace-header" | "replace-value" => {
            exactly(3, "a field name, a regular expression and a replacement")?;
            let name = field_name(&rest[0])?;
            let regex = regex(&rest[1])?;
            let replacement = fmt(&rest[2])?;
            Ok(if action == "replace-header" {
                HttpAction::ReplaceHeader {
                    name,
                    regex,
                    replacement,
                }
            } else {
                HttpAction::ReplaceValue {
                    name,
                    regex,
                    replacement,
                }
            })
        }
        "set-method" | "set-path" | "set-pathq" | "set-query" | "set-uri" => {
            exactly(1, "exactly one log-format string")?;
            let part = match action.as_str() {
                "set-method" => LinePart::Method,
                "set-path" => LinePart::Path,
                "set-pathq" => LinePart::PathQ,
                "set-query" => LinePart::Query,
                _ => LinePart::Uri,
            };
            request_only(HttpAction::SetLine {
                part,
                value: fmt(&rest[0])?,
            })
        }
        "replace-path" | "replace-pathq" | "replace-uri" => {
            exactly(2, "a regular expression and a replacement")?;
            let part = match action.as_str() {
                "replace-path" => LinePart::Path,
                "replace-pathq" => LinePart::PathQ,
                _ => LinePart::Uri,
            };
            request_only(HttpAction::ReplaceLine {
                part,
                regex: regex(&rest[0])?,
                replacement: fmt(&rest[1])?,
            })
        }
        "set-status" if response => {
            let status = rest
                .first()
                .and_then(|s| s.parse::<u16>().ok())
                .filter(|s| (100..=999).contains(s))
                .ok_or("'set-status' expects a status code between 100 and 999")?;
            let reason = match &rest[1..] {
                [] => None,
                [kw, reason] if kw == "reason" => Some(reason.clone()),
                _ => {
                    return Err(
                        "'set-status' expects a status and optionally 'reason <text>'".to_owned(),
                    );
                }
            };
            if let Some(r) = &reason
                && r.bytes().any(|b| b.is_ascii_control() && b != b'\t')
            {
                return Err("the reason must not contain control characters".to_owned());
            }
            Ok(HttpAction::SetStatus { status, reason })
        }
        "reject" => {
            exactly(0, "no argument")?;
            request_only(HttpAction::Reject)
        }
        "set-src" | "set-src-port" | "set-dst" | "set-dst-port" => {
            exactly(1, "a sample expression")?;
            let mut expr = Expr::parse(&rest[0], maps)?;
            expr.check_stages(stages)?;
            let part = match action.as_str() {
                "set-src" => AddressPart::SourceIp,
                "set-src-port" => AddressPart::SourcePort,
                "set-dst" => AddressPart::DestinationIp,
                _ => AddressPart::DestinationPort,
            };
            request_only(HttpAction::SetAddress { part, expr })
        }
        "silent-drop" => match rest {
            [] => Ok(HttpAction::SilentDrop),
            _ => Err(format!("{UNSUPPORTED}silent-drop {}", rest.join(" "))),
        },
        "set-log-level" => parse_log_level(rest).map(HttpAction::SetLogLevel),
        "disable-l7-retry" => {
            exactly(0, "no argument")?;
            request_only(HttpAction::DisableL7Retry)
        }
        "set-priority-class" | "set-priority-offset" => parse_priority(action, rest, maps, stages)
            .map(|(part, expr)| HttpAction::SetPriority(part, expr))
            .and_then(request_only),
        "set-fc-tos" | "set-tos" | "set-fc-mark" | "set-mark" => {
            parse_packet_field(action, rest, maps, stages)
                .map(|(field, value)| HttpAction::MarkClientPackets(field, value))
        }
        "early-hint" => {
            exactly(2, "a field name and a value")?;
            let name = field_name(&rest[0])?;
            let value = fmt(&rest[1])?;
            request_only(HttpAction::EarlyHint { name, value })
        }
        "wait-for-body" => parse_wait_for_body(rest, warnings),
        "cache-use" | "cache-store" => {
            exactly(1, "a cache name")?;
            let name = rest[0].clone();
            match (action.as_str(), response) {
                ("cache-use", false) => Ok(HttpAction::CacheUse(name)),
                ("cache-store", true) => Ok(HttpAction::CacheStore(name)),
                (_, true) => Err("'cache-use' is not allowed in 'http-response' rules".to_owned()),
                (_, false) => {
                    Err("'cache-store' is not allowed in 'http-request' rules".to_owned())
                }
            }
        }
        "strict-mode" => match rest {
            [on] if on == "on" => Ok(HttpAction::StrictMode(true)),
            [off] if off == "off" => Ok(HttpAction::StrictMode(false)),
            _ => Err("'strict-mode' expects 'on' or 'off'".to_owned()),
        },
        "set-timeout" if !response => {
            let [which, value] = rest else {
                return Err("'set-timeout' expects 'server' or 'tunnel' and a value".to_owned());
            };
            let which = match which.as_str() {
                "server" => StreamTimeout::Server,
                "tunnel" => StreamTimeout::Tunnel,
                other => {
                    return Err(format!(
                        "'set-timeout' supports 'server' and 'tunnel', not '{other}'"
                    ));
                }
            };
            let value = match crate::units::parse_time(value, crate::units::TimeUnit::Ms) {
                Ok(time) => {
                    warnings.extend(time.warning);
                    TimeoutValue::Fixed(time.duration)
                }
                Err(_) => {
                    let mut expr = Expr::parse(value, maps)?;
                    expr.check_stages(stages)?;
                    TimeoutValue::Expr(expr)
                }
            };
            Ok(HttpAction::SetTimeout { which, value })
        }
        other => Err(unsupported(other)),
    }
}

/// `wait-for-body time <time> [at-least <bytes>]`.
fn parse_wait_for_body(args: &[String], warnings: &mut Vec<String>) -> Result<HttpAction, String> {
    const USAGE: &str = "'wait-for-body' expects 'time <time>' and optionally 'at-least <bytes>'";
    let mut time = None;
    let mut at_least = 0;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let value = words.next().ok_or(USAGE)?;
        match word.as_str() {
            "time" => {
                let limit = crate::units::parse_time(value, crate::units::TimeUnit::Ms)
                    .map_err(|e| format!("'wait-for-body': invalid time '{value}': {e}"))?;
                warnings.extend(limit.warning);
                time = Some(limit.duration);
            }
            "at-least" => {
                at_least = crate::units::parse_size(value)
                    .map_err(|e| format!("'wait-for-body': invalid size '{value}': {e}"))?;
            }
            _ => return Err(USAGE.to_owned()),
        }
    }
    let time = time.ok_or(USAGE)?;
    Ok(HttpAction::WaitForBody { time, at_least })
}

/// The actions `http-after-response` allows (configuration.txt §4.2, the "Aft" column):
/// the response actions that neither answer nor stop the response.
fn parse_after_response_action(
    args: &[String],
    maps: &MapStore,
    stages: Stages,
    warnings: &mut Vec<String>,
) -> Result<HttpAction, String> {
    let action = args.first().ok_or("expects an action")?;
    let name = action.split('(').next().unwrap_or_default();
    match name {
        "allow" | "set-header" | "add-header" | "del-header" | "replace-header"
        | "replace-value" | "set-status" | "set-var" | "set-var-fmt" | "unset-var"
        | "set-log-level" | "del-acl" | "del-map" | "set-map" | "strict-mode" => {
            parse_http_action(args, maps, stages, true, warnings)
        }
        "deny" | "return" | "redirect" | "auth" | "tarpit" | "set-path" | "set-query"
        | "set-uri" | "set-method" | "wait-for-body" | "set-fc-tos" | "set-tos" | "set-fc-mark"
        | "set-mark" => Err(format!(
            "'{name}' is not allowed in 'http-after-response' rules"
        )),
        other => Err(unsupported(other)),
    }
}

fn field_name(name: &str) -> Result<String, String> {
    if sluice_http::is_token(name.as_bytes()) {
        Ok(name.to_owned())
    } else {
        Err(format!("'{name}' is not a valid header field name"))
    }
}

fn regex(text: &str) -> Result<Regex, String> {
    Regex::new(text).map_err(|e| format!("regex '{text}' is invalid ({e})"))
}

/// The reason phrase of the statuses Sluice writes.
fn status_ok(status: u16) -> bool {
    (200..=599).contains(&status)
}

/// Parses the arguments of `return` and `deny` (configuration.txt §4.2 `http-request return`).
fn parse_reply(
    args: &[String],
    maps: &MapStore,
    stages: Stages,
    default_status: u16,
    is_deny: bool,
) -> Result<Reply, String> {
    let mut reply = Reply {
        status: default_status,
        content_type: None,
        body: if is_deny {
            ReplyBody::ErrorPage
        } else {
            ReplyBody::Empty
        },
        headers: Vec::new(),
    };
    let mut body_set = false;
    let mut i = 0;
    while i < args.len() {
        let word = args[i].as_str();
        let value = args.get(i + 1);
        let need = |what: &str| value.ok_or_else(|| format!("'{word}' expects {what}"));
        match word {
            "status" | "deny_status" => {
                if word == "deny_status" && !is_deny {
                    return Err("'deny_status' is only valid with 'deny'".to_owned());
                }
                let status = need("a status code")?
                    .parse::<u16>()
                    .ok()
                    .filter(|s| status_ok(*s))
                    .ok_or("expects a status code between 200 and 599")?;
                reply.status = status;
                i += 2;
            }
            "content-type" => {
                reply.content_type = Some(need("a content type")?.clone());
                i += 2;
            }
            "hdr" => {
                let name = field_name(need("a field name and a value")?)?;
                let fmt_text = args
                    .get(i + 2)
                    .ok_or("'hdr' expects a field name and a value")?;
                let lower = name.to_ascii_lowercase();
                if matches!(
                    lower.as_str(),
                    "content-length" | "content-type" | "transfer-encoding" | "connection"
                ) {
                    return Err(format!("'hdr' cannot set the '{name}' field"));
                }
                reply.headers.push((name, fmt_arg(fmt_text, maps, stages)?));
                i += 3;
            }
            "default-errorfiles" => {
                set_body(&mut reply, &mut body_set, ReplyBody::ErrorPage)?;
                i += 1;
            }
            "string" => {
                let body = ReplyBody::Fixed(need("a string")?.as_bytes().into());
                set_body(&mut reply, &mut body_set, body)?;
                i += 2;
            }
            "lf-string" => {
                let body = ReplyBody::Format(fmt_arg(need("a log-format string")?, maps, stages)?);
                set_body(&mut reply, &mut body_set, body)?;
                i += 2;
            }
            "file" | "lf-file" | "errorfile" => {
                let path = need("a file name")?;
                let bytes =
                    std::fs::read(path).map_err(|e| format!("cannot read file '{path}': {e}"))?;
                let body = match word {
                    "file" => ReplyBody::Fixed(bytes.into()),
                    "errorfile" => ReplyBody::Raw(bytes.into()),
                    _ => {
                        let text = String::from_utf8(bytes)
                            .map_err(|_| format!("file '{path}' is not text"))?;
                        ReplyBody::Format(fmt_arg(&text, maps, stages)?)
                    }
                };
                set_body(&mut reply, &mut body_set, body)?;
                i += 2;
            }
            "errorfiles" => return Err(unsupported("errorfiles")),
            other => return Err(format!("unexpected argument '{other}'")),
        }
    }
    let has_body = matches!(reply.body, ReplyBody::Fixed(_) | ReplyBody::Format(_));
    if has_body && reply.content_type.is_none() {
        return Err("a body needs a 'content-type'".to_owned());
    }
    if matches!(reply.body, ReplyBody::Raw(_)) && !reply.headers.is_empty() {
        return Err("'hdr' cannot be used with 'errorfile'".to_owned());
    }
    Ok(reply)
}

/// Parses the arguments of an `http-error status CODE` line whose page has a format
/// (`lf-string`, `lf-file`, a formatted `hdr`), built for each answer: its formats may read
/// the request (HAProxy 2.6 lets them, `path` say) and the response. The page is then a
/// complete answer of its own: neither an `errorfile` nor the built-in page, which have
/// fields of their own.
pub(crate) fn parse_error_reply(
    args: &[String],
    status: u16,
    maps: &MapStore,
) -> Result<Reply, String> {
    let stages = Stages::HTTP_REQ | Stages::HTTP_RES;
    let mut reply = parse_reply(args, maps, stages, status, false)?;
    match reply.body {
        ReplyBody::Raw(_) | ReplyBody::ErrorPage => Err(
            "'errorfile', 'errorfiles' and 'default-errorfiles' cannot take formatted fields"
                .to_owned(),
        ),
        // A content type with nothing to describe, as for a fixed page.
        ReplyBody::Empty => {
            reply.content_type = None;
            Ok(reply)
        }
        ReplyBody::Fixed(_) | ReplyBody::Format(_) => Ok(reply),
    }
}

/// A `content-type` without a body to describe (none, or an `errorfile`, which has its own
/// head): HAProxy ignores it with a warning, which this returns (the reply loses it).
fn drop_idle_content_type(action: &mut HttpAction) -> Option<String> {
    let (HttpAction::Deny(reply) | HttpAction::Return(reply) | HttpAction::Tarpit(reply)) = action
    else {
        return None;
    };
    let why = match reply.body {
        ReplyBody::Fixed(_) | ReplyBody::Format(_) => return None,
        // The file carries its own head.
        ReplyBody::Raw(_) => "when used with an errorfile",
        ReplyBody::Empty | ReplyBody::ErrorPage => "because neither errorfile nor payload defined",
    };
    let ignored = reply.content_type.take()?;
    Some(format!(
        "content-type '{ignored}' ignored by the http reply {why}"
    ))
}

/// Sets the reply's body: only one of the body keywords may be given.
fn set_body(reply: &mut Reply, body_set: &mut bool, body: ReplyBody) -> Result<(), String> {
    if std::mem::replace(body_set, true) {
        return Err("only one body may be given".to_owned());
    }
    reply.body = body;
    Ok(())
}

/// Parses `location|prefix|scheme VALUE [code N] [options]`, the options in any order
/// around the kind and its value, as HAProxy reads them (the last kind given wins).
fn parse_redirect(
    args: &[String],
    maps: &MapStore,
    stages: Stages,
    in_rule: bool,
) -> Result<Redirect, String> {
    let mut kind_at = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "location" | "prefix" | "scheme" => {
                kind_at = Some(i);
                i += 2;
            }
            // Options with a value: skip the value, which may spell a kind.
            "code" | "set-cookie" | "clear-cookie" => i += 2,
            _ => i += 1,
        }
    }
    let (Some(kind), Some(value)) = (
        kind_at.map(|k| &args[k]),
        kind_at.and_then(|k| args.get(k + 1)),
    ) else {
        return Err("expects 'location', 'prefix' or 'scheme' followed by a value".to_owned());
    };
    // The `redirect` keyword takes its value literally; rules take a log-format string.
    let value_fmt = if in_rule {
        fmt_arg(value, maps, stages)?
    } else {
        // Doubling `%` makes every character literal.
        LogFormat::parse(&value.replace('%', "%%"), maps)?
    };
    let kind = match kind.as_str() {
        "location" => RedirectKind::Location(value_fmt),
        "prefix" => RedirectKind::Prefix(value_fmt),
        _ => RedirectKind::Scheme(value_fmt),
    };
    let mut redirect = Redirect {
        kind,
        code: 302,
        drop_query: false,
        append_slash: false,
        ignore_empty: false,
        cookie: None,
    };
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            // Read above.
            "location" | "prefix" | "scheme" => i += 2,
            "code" => {
                redirect.code = args
                    .get(i + 1)
                    .and_then(|c| c.parse::<u16>().ok())
                    .filter(|c| matches!(c, 301 | 302 | 303 | 307 | 308))
                    .ok_or("'code' expects 301, 302, 303, 307 or 308")?;
                i += 2;
            }
            "drop-query" => {
                redirect.drop_query = true;
                i += 1;
            }
            "append-slash" => {
                redirect.append_slash = true;
                i += 1;
            }
            "ignore-empty" => {
                redirect.ignore_empty = true;
                i += 1;
            }
            "set-cookie" | "clear-cookie" => {
                let cookie = args
                    .get(i + 1)
                    .ok_or_else(|| format!("'{}' expects a cookie name", args[i]))?;
                if cookie.bytes().any(|b| b.is_ascii_control() || b == b';') {
                    return Err(format!("invalid cookie '{cookie}'"));
                }
                redirect.cookie = Some(if args[i] == "set-cookie" {
                    format!("{cookie}; path=/;")
                } else {
                    format!("{cookie}; path=/; Max-Age=0;")
                });
                i += 2;
            }
            other => return Err(format!("unexpected argument '{other}'")),
        }
    }
    Ok(redirect)
}
