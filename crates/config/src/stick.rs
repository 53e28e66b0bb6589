//! Stick tables and stream tracking in the configuration (configuration.txt §4.2
//! `stick-table`, `track-sc0|1|2`, `sc-inc-gpc0|1`, `sc-set-gpt0`).
//!
//! `stick-table` lines become a [`TableConf`] of the pure `sluice-stick` crate, named after
//! their section; the tracking actions of `tcp-request`, `http-request` and `http-response`
//! rules become a [`StickAction`], compiled here once for every rule keyword. Which table a
//! `track-sc` action without `table NAME` uses (its own section's) is settled by the plan
//! ([`resolve_tables`]), which knows every section and reports tables that do not exist.

use crate::diag::{Diagnostic, Diagnostics};
use crate::directive::Directive;
use crate::rules::{HttpAction, ProxyRules, TcpAction};
use crate::units::{self, TimeUnit};
use sluice_sample::{Expr, MapStore, Stages};
use sluice_stick::{DEFAULT_KEY_LEN, DataType, KeyType, Layout, TableConf};

/// The number of stick counters a stream has (`track-sc0` to `track-sc2`, HAProxy's default
/// `tune.stick-counters`).
pub const STICK_COUNTERS: usize = 3;

/// A tracking action of a rule.
#[derive(Clone, Debug)]
pub enum StickAction {
    /// `track-scN <key> [table <name>]`: the stream tracks the entry of the key.
    Track {
        /// The stick counter (0 to 2).
        counter: usize,
        /// The expression giving the key.
        key: Expr,
        /// The table; `None` until the plan fills in the rule's own section.
        table: Option<String>,
    },
    /// `sc-inc-gpc0(N)` / `sc-inc-gpc1(N)`: increments a general-purpose counter (and its rate).
    IncGpc {
        /// 0 for `gpc0`, 1 for `gpc1`.
        which: u8,
        /// The stick counter.
        counter: usize,
    },
    /// `sc-set-gpt0(N) <int|expr>`: sets the entry's tag.
    SetGpt0 {
        /// The stick counter.
        counter: usize,
        /// The value.
        value: GptValue,
    },
}

/// What a `stick` rule does (configuration.txt §4.2 `stick on|match|store-request|
/// store-response`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StickKind {
    /// `stick match`: a request whose key has an entry goes to the entry's server.
    Match,
    /// `stick on`: `match`, then `store-request` with the same key.
    On,
    /// `stick store-request`: the server chosen for the request is stored under the key.
    StoreRequest,
    /// `stick store-response`: the server is stored under a key read from the response.
    StoreResponse,
}

impl StickKind {
    /// True if the rule looks a server up before balancing.
    pub fn matches(self) -> bool {
        matches!(self, StickKind::Match | StickKind::On)
    }

    /// True if the rule stores the server chosen for the request.
    pub fn stores_request(self) -> bool {
        matches!(self, StickKind::On | StickKind::StoreRequest)
    }
}

/// A `stick` rule of a backend.
#[derive(Clone, Debug)]
pub struct StickRule {
    /// What it does.
    pub kind: StickKind,
    /// The key.
    pub key: Expr,
    /// The table; `None` until the plan fills in the backend's own.
    pub table: Option<String>,
}

/// Parses `stick on|match|store-request|store-response <pattern> [table <name>]` (the words
/// after `stick`, without the condition).
pub(crate) fn parse_stick_rule(args: &[String], maps: &MapStore) -> Result<StickRule, String> {
    let kind = match args.first().map(String::as_str) {
        Some("on") => StickKind::On,
        Some("match") => StickKind::Match,
        Some("store-request") => StickKind::StoreRequest,
        Some("store-response") => StickKind::StoreResponse,
        _ => return Err("expects 'on', 'match', 'store-request' or 'store-response'".to_owned()),
    };
    let (key, table) = match &args[1..] {
        [key] => (key, None),
        [key, kw, name] if kw == "table" => (key, Some(name.clone())),
        [] => return Err("expects a sample expression".to_owned()),
        [_, extra, ..] => {
            return Err(format!(
                "unexpected argument '{extra}' (expected 'table <name>')"
            ));
        }
    };
    let key = Expr::parse(key, maps)?;
    let stages = if kind == StickKind::StoreResponse {
        Stages::HTTP_RES | Stages::TCP_RES_CONTENT
    } else {
        Stages::USE_SERVER
    };
    key.check_stages(stages)?;
    Ok(StickRule { kind, key, table })
}

/// The value `sc-set-gpt0` stores.
#[derive(Clone, Debug)]
pub enum GptValue {
    /// A constant.
    Int(i64),
    /// An expression evaluated per stream (cast to an integer).
    Expr(Expr),
}

/// Parses `stick-table ...` (the words after the keyword) for the section `name`.
pub fn parse_stick_table(name: &str, args: &[String]) -> Result<TableConf, String> {
    let mut key = None;
    let mut size = None;
    let mut expire = None;
    let mut nopurge = false;
    let mut layout = Layout::default();
    let mut i = 0;
    let value = |i: usize, what: &str| {
        args.get(i + 1)
            .map(String::as_str)
            .ok_or_else(|| format!("'{}' expects {what}", args[i]))
    };
    while i < args.len() {
        match args[i].as_str() {
            "type" => {
                let ty = value(i, "a key type")?;
                let len = if args.get(i + 2).is_some_and(|w| w == "len") {
                    let text = args.get(i + 3).ok_or("'len' expects a key length")?;
                    let n = text
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=65_535).contains(n))
                        .ok_or_else(|| format!("invalid key length '{text}'"))?;
                    Some(n)
                } else {
                    None
                };
                key = Some(match (ty, len) {
                    ("ip", None) => KeyType::Ip,
                    ("ipv6", None) => KeyType::Ipv6,
                    ("integer", None) => KeyType::Integer,
                    ("string", len) => KeyType::String(len.unwrap_or(DEFAULT_KEY_LEN)),
                    ("binary", len) => KeyType::Binary(len.unwrap_or(DEFAULT_KEY_LEN)),
                    ("ip" | "ipv6" | "integer", Some(_)) => {
                        return Err(format!("key type '{ty}' takes no length"));
                    }
                    _ => {
                        return Err(format!(
                            "unknown key type '{ty}' (ip, ipv6, integer, string or binary)"
                        ));
                    }
                });
                i += if len.is_some() { 4 } else { 2 };
            }
            "size" => {
                let text = value(i, "a number of entries")?;
                let n =
                    units::parse_size(text).map_err(|e| format!("invalid size '{text}': {e}"))?;
                size = Some(usize::try_from(n).map_err(|_| format!("size '{text}' is too large"))?);
                i += 2;
            }
            "expire" => {
                let text = value(i, "a delay")?;
                let t = units::parse_time(text, TimeUnit::Ms)
                    .map_err(|e| format!("invalid expire '{text}': {e}"))?;
                let ms = u64::try_from(t.as_millis()).unwrap_or(u64::MAX);
                if ms > units::MAX_TIMEOUT_MS {
                    return Err(format!("expire '{text}' is too large (at most 24 days)"));
                }
                expire = Some(ms);
                i += 2;
            }
            "nopurge" => {
                nopurge = true;
                i += 1;
            }
            "store" => {
                let list = value(i, "a list of data types")?;
                for item in list.split(',') {
                    let (data, period) = parse_store_item(item)?;
                    layout.add(data, period)?;
                }
                i += 2;
            }
            "peers" | "srvkey" | "write-to" | "recv-only" => {
                return Err(format!("'{}' is not supported by Sluice", args[i]));
            }
            other => return Err(format!("unexpected argument '{other}'")),
        }
    }
    let key = key.ok_or("missing 'type'")?;
    let size = size.ok_or("missing 'size'")?;
    Ok(TableConf {
        name: name.to_owned(),
        key,
        size,
        expire,
        nopurge,
        layout,
    })
}

/// One `store` item: `conn_cnt`, `http_req_rate(10s)`...
fn parse_store_item(item: &str) -> Result<(DataType, u64), String> {
    let (name, period) = match item.split_once('(') {
        Some((name, rest)) => {
            let text = rest
                .strip_suffix(')')
                .ok_or_else(|| format!("missing ')' after '{item}'"))?;
            (name, Some(text))
        }
        None => (item, None),
    };
    let Some(data) = DataType::from_name(name) else {
        if DataType::is_known_unsupported(name) {
            return Err(format!("data type '{name}' is not supported by Sluice"));
        }
        return Err(format!("unknown data type '{name}'"));
    };
    match (data.is_rate(), period) {
        (true, Some(text)) => {
            let t = units::parse_time(text, TimeUnit::Ms)
                .map_err(|e| format!("invalid period '{text}' for '{name}': {e}"))?;
            let ms = u64::try_from(t.as_millis()).unwrap_or(u64::MAX);
            if ms == 0 || ms > units::MAX_TIMEOUT_MS {
                return Err(format!("invalid period '{text}' for '{name}'"));
            }
            Ok((data, ms))
        }
        (true, None) => Err(format!(
            "data type '{name}' expects a period: '{name}(<period>)'"
        )),
        (false, Some(_)) => Err(format!("data type '{name}' takes no period")),
        (false, None) => Ok((data, 0)),
    }
}

/// The stick counter of an action word (`track-sc1`, `sc-inc-gpc0(2)`).
fn counter_of(text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|&n| n < STICK_COUNTERS)
        .ok_or_else(|| {
            format!(
                "invalid stick counter '{text}' (0 to {})",
                STICK_COUNTERS - 1
            )
        })
}

/// Parses a tracking action (`action` and its arguments `rest`); `None` if `action` is not
/// one.
pub(crate) fn parse_action(
    action: &str,
    rest: &[String],
    maps: &MapStore,
    stages: Stages,
) -> Option<Result<StickAction, String>> {
    if let Some(n) = action.strip_prefix("track-sc") {
        return Some(parse_track(n, rest, maps, stages));
    }
    let paren = |prefix: &str| {
        action
            .strip_prefix(prefix)?
            .strip_prefix('(')?
            .strip_suffix(')')
    };
    let no_more = |n: usize| match rest.get(n) {
        None => Ok(()),
        Some(extra) => Err(format!("unexpected argument '{extra}'")),
    };
    for (prefix, which) in [("sc-inc-gpc0", 0), ("sc-inc-gpc1", 1)] {
        if let Some(n) = paren(prefix) {
            return Some(no_more(0).and_then(|()| {
                Ok(StickAction::IncGpc {
                    which,
                    counter: counter_of(n)?,
                })
            }));
        }
    }
    if let Some(n) = paren("sc-set-gpt0") {
        return Some((|| {
            let counter = counter_of(n)?;
            let text = rest.first().ok_or("'sc-set-gpt0' expects a value")?;
            no_more(1)?;
            let value = match text.parse::<i64>() {
                Ok(v) => GptValue::Int(v),
                Err(_) => {
                    let expr = Expr::parse(text, maps)?;
                    expr.check_stages(stages)?;
                    GptValue::Expr(expr)
                }
            };
            Ok(StickAction::SetGpt0 { counter, value })
        })());
    }
    None
}

fn parse_track(
    n: &str,
    rest: &[String],
    maps: &MapStore,
    stages: Stages,
) -> Result<StickAction, String> {
    let counter = counter_of(n)?;
    let (key, table) = match rest {
        [key] => (key, None),
        [key, kw, name] if kw == "table" => (key, Some(name.clone())),
        [] => return Err(format!("'track-sc{n}' expects a sample expression")),
        [_, extra, ..] => {
            return Err(format!(
                "unexpected argument '{extra}' (expected 'table <name>')"
            ));
        }
    };
    let key = Expr::parse(key, maps)?;
    key.check_stages(stages)?;
    Ok(StickAction::Track {
        counter,
        key,
        table,
    })
}

/// Gives every `track-sc` action of proxy `proxy` its table (its own when it names none) and
/// reports tables that do not exist; `tables` are the names of the sections with a table.
pub(crate) fn resolve_tables(
    rules: &mut ProxyRules,
    proxy: &str,
    tables: &[&str],
    diags: &mut Diagnostics,
) {
    for r in &mut rules.stick_rules {
        let name = r.action.table.get_or_insert_with(|| proxy.to_owned());
        if !tables.contains(&name.as_str()) {
            diags.push(Diagnostic::alert(
                &r.span,
                "stick",
                format!("unable to find table '{name}' referenced by proxy '{proxy}'"),
            ));
        }
    }
    let mut resolve = |keyword: &str, span: &crate::diag::Span, action: &mut StickAction| {
        if let StickAction::Track { table, counter, .. } = action {
            let name = table.get_or_insert_with(|| proxy.to_owned());
            if !tables.contains(&name.as_str()) {
                diags.push(Diagnostic::alert(
                    span,
                    keyword,
                    format!(
                        "track-sc{counter}: unable to find table '{name}' referenced by proxy '{proxy}'"
                    ),
                ));
            }
        }
    };
    let tcp = [
        ("tcp-request connection", &mut rules.tcp_connection),
        ("tcp-request session", &mut rules.tcp_session),
        ("tcp-request content", &mut rules.tcp_content),
    ];
    for (keyword, list) in tcp {
        for r in list.iter_mut() {
            if let TcpAction::Stick(a) = &mut r.action {
                resolve(keyword, &r.span, a);
            }
        }
    }
    let http = [
        ("http-request", &mut rules.http_request),
        ("http-response", &mut rules.http_response),
    ];
    for (keyword, list) in http {
        for r in list.iter_mut() {
            if let HttpAction::Stick(a) = &mut r.action {
                resolve(keyword, &r.span, a);
            }
        }
    }
}

/// Parses a `stick-table` line of section `name` into `slot`.
pub(crate) fn parse_line(
    slot: &mut Option<TableConf>,
    name: &str,
    d: &Directive<'_>,
    words: &[String],
    diags: &mut Diagnostics,
) {
    if slot.is_some() {
        diags.push(d.alert("only one stick-table per section"));
        return;
    }
    match parse_stick_table(name, &words[1..]) {
        Ok(conf) => *slot = Some(conf),
        Err(message) if message.ends_with("is not supported by Sluice") => {
            diags.push(Diagnostic::not_supported(
                d.span,
                format!(
                    "stick-table {}",
                    message
                        .trim_end_matches(" is not supported by Sluice")
                        .trim_matches('\'')
                ),
            ));
        }
        Err(message) => diags.push(d.alert(message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn parses_a_table() {
        let t = parse_stick_table(
            "fe",
            &words("type ip size 100k expire 30s store http_req_rate(10s),conn_cur store gpc0"),
        )
        .expect("table");
        assert_eq!(t.key, KeyType::Ip);
        assert_eq!(t.size, 102_400);
        assert_eq!(t.expire, Some(30_000));
        assert_eq!(
            t.layout.stored(),
            &[
                (DataType::Gpc0, 0),
                (DataType::ConnCur, 0),
                (DataType::HttpReqRate, 10_000)
            ]
        );
        let s =
            parse_stick_table("b", &words("type string len 12 size 10 nopurge")).expect("table");
        assert_eq!(s.key, KeyType::String(12));
        assert!(s.nopurge);
    }

    #[test]
    fn refuses_mistakes() {
        for (text, message) in [
            ("size 10", "missing 'type'"),
            ("type ip", "missing 'size'"),
            ("type ip size 1 store conn_rate", "expects a period"),
            ("type ip size 1 store conn_cnt(1s)", "takes no period"),
            ("type ip size 1 store foo", "unknown data type 'foo'"),
            ("type ip size 1 store gpc0,gpc0", "stored twice"),
            ("type ip len 4 size 1", "takes no length"),
            ("type ip size 1 peers p", "not supported by Sluice"),
            (
                "type ip size 1 store http_fail_cnt",
                "not supported by Sluice",
            ),
        ] {
            let err = parse_stick_table("x", &words(text)).expect_err(text);
            assert!(err.contains(message), "{text}: {err}");
        }
    }

    #[test]
    fn parses_actions() {
        let maps = MapStore::default();
        let stages = Stages::FE_HTTP_REQ;
        let parse = |a: &str, rest: &str| {
            parse_action(a, &words(rest), &maps, stages).expect("stick action")
        };
        assert!(matches!(
            parse("track-sc1", "src table other"),
            Ok(StickAction::Track { counter: 1, table: Some(ref t), .. }) if t == "other"
        ));
        assert!(matches!(
            parse("sc-inc-gpc1(2)", ""),
            Ok(StickAction::IncGpc {
                which: 1,
                counter: 2
            })
        ));
        assert!(matches!(
            parse("sc-set-gpt0(0)", "42"),
            Ok(StickAction::SetGpt0 {
                value: GptValue::Int(42),
                ..
            })
        ));
        assert!(parse("track-sc3", "src").is_err());
        assert!(parse("track-sc0", "res.hdr(x)").is_err());
        assert!(parse_action("deny", &[], &maps, stages).is_none());
    }
}
