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
use sluice_stick::{ArrayType, DEFAULT_KEY_LEN, DataType, Gpc, KeyType, Layout, TableConf};

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
    /// `sc-inc-gpc0(N)`, `sc-inc-gpc1(N)`, `sc-inc-gpc(I,N)`: increments a general-purpose
    /// counter (and its rate).
    IncGpc {
        /// Which counter.
        which: Gpc,
        /// The stick counter.
        counter: usize,
    },
    /// `sc-add-gpc(I,N) <int|expr>` (HAProxy 2.7): adds the value to element `I` of the
    /// counters and of their rates.
    AddGpc {
        /// The element of `gpc(N)` and `gpc_rate(N,period)`.
        index: u8,
        /// The stick counter.
        counter: usize,
        /// The value added.
        value: GptValue,
    },
    /// `sc-set-gpt0(N) <int|expr>`, `sc-set-gpt(I,N) <int|expr>`: sets one of the entry's
    /// tags.
    SetGpt {
        /// `gpt0`, or an element of `gpt(N)`.
        tag: DataType,
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
    let mut key = Expr::parse(key, maps)?;
    let stages = if kind == StickKind::StoreResponse {
        Stages::HTTP_RES | Stages::TCP_RES_CONTENT
    } else {
        Stages::USE_SERVER
    };
    key.check_stages(stages)?;
    Ok(StickRule { kind, key, table })
}

/// The value `sc-set-gpt0` or `sc-set-gpt` stores, or `sc-add-gpc` adds.
#[derive(Clone, Debug)]
pub enum GptValue {
    /// A constant.
    Int(i64),
    /// An expression evaluated per stream (cast to an integer).
    Expr(Expr),
}

/// Parses `stick-table ...` (the words after the keyword) for the section `name`, adding
/// to `warnings` what HAProxy only warns about.
pub fn parse_stick_table(
    name: &str,
    args: &[String],
    warnings: &mut Vec<String>,
) -> Result<TableConf, String> {
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
                let time = units::parse_time(text, TimeUnit::Ms)
                    .map_err(|e| format!("invalid expire '{text}': {e}"))?;
                warnings.extend(time.warning);
                let t = time.duration;
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
                for item in store_items(list) {
                    store_item(item, &mut layout, warnings)?;
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

/// The items of a `store` list: split at the commas outside parentheses
/// (`gpc_rate(2,10s)` is one item).
fn store_items(list: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0usize;
    list.split(move |c: char| {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        c == ',' && depth == 0
    })
}

/// Adds one `store` item to `layout`: `conn_cnt`, `http_req_rate(10s)`, `gpc(3)`,
/// `gpc_rate(3,10s)`... A type stored already is ignored with a warning, as in HAProxy.
fn store_item(item: &str, layout: &mut Layout, warnings: &mut Vec<String>) -> Result<(), String> {
    let (name, args) = match item.split_once('(') {
        Some((name, rest)) => {
            let text = rest
                .strip_suffix(')')
                .ok_or_else(|| format!("missing ')' after '{item}'"))?;
            (name, Some(text))
        }
        None => (item, None),
    };
    if let Some(array) = ArrayType::from_name(name) {
        let usage = if array == ArrayType::GpcRate {
            format!("'{name}(<count>,<period>)'")
        } else {
            format!("'{name}(<count>)'")
        };
        let args: Vec<&str> = args.map_or_else(Vec::new, |a| a.split(',').collect());
        let (len, period) = match (array == ArrayType::GpcRate, args.as_slice()) {
            (true, [len, period]) => (len, Some(*period)),
            (false, [len]) => (len, None),
            _ => return Err(format!("data type '{name}' expects {usage}")),
        };
        let len = len
            .parse::<u64>()
            .map_err(|_| format!("invalid element count '{len}' for '{name}'"))?;
        let period = period.map_or(Ok(0), |p| rate_period(name, p, warnings))?;
        if layout.stores(name) {
            warnings.push(already_stored(name));
            return Ok(());
        }
        return layout.add_array(array, len, period);
    }
    let Some(data) = DataType::from_name(name) else {
        if DataType::is_known_unsupported(name) {
            return Err(format!("data type '{name}' is not supported by Sluice"));
        }
        return Err(format!("unknown data type '{name}'"));
    };
    let period = match (data.is_rate(), args) {
        (true, Some(text)) => rate_period(name, text, warnings)?,
        (true, None) => {
            return Err(format!(
                "data type '{name}' expects a period: '{name}(<period>)'"
            ));
        }
        (false, Some(_)) => return Err(format!("data type '{name}' takes no period")),
        (false, None) => 0,
    };
    if layout.stores(name) {
        warnings.push(already_stored(name));
        return Ok(());
    }
    layout.add(data, period)
}

fn already_stored(name: &str) -> String {
    format!("store option '{name}' already enabled, ignored")
}

/// A rate's period in milliseconds.
fn rate_period(name: &str, text: &str, warnings: &mut Vec<String>) -> Result<u64, String> {
    let time = units::parse_time(text, TimeUnit::Ms)
        .map_err(|e| format!("invalid period '{text}' for '{name}': {e}"))?;
    warnings.extend(time.warning);
    let t = time.duration;
    let ms = u64::try_from(t.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 || ms > units::MAX_TIMEOUT_MS {
        return Err(format!("invalid period '{text}' for '{name}'"));
    }
    Ok(ms)
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
    // `(<idx>,<counter>)` of the array forms.
    let indexed = |args: &str| -> Result<(u8, usize), String> {
        let (index, counter) = args
            .split_once(',')
            .ok_or_else(|| format!("'{action}' expects '(<index>,<stick counter>)'"))?;
        Ok((
            sluice_stick::array_index(index)?,
            counter_of(counter.trim())?,
        ))
    };
    let inc = if let Some(n) = paren("sc-inc-gpc0") {
        Some(counter_of(n).map(|counter| (Gpc::Legacy(0), counter)))
    } else if let Some(n) = paren("sc-inc-gpc1") {
        Some(counter_of(n).map(|counter| (Gpc::Legacy(1), counter)))
    } else {
        paren("sc-inc-gpc").map(|args| indexed(args).map(|(i, c)| (Gpc::Element(i), c)))
    };
    if let Some(parsed) = inc {
        return Some(
            no_more(0)
                .and(parsed)
                .map(|(which, counter)| StickAction::IncGpc { which, counter }),
        );
    }
    // The actions that take a value: `sc-set-gpt0`, `sc-set-gpt`, `sc-add-gpc`.
    let value = || -> Result<GptValue, String> {
        let name = action.split('(').next().unwrap_or(action);
        let text = rest
            .first()
            .ok_or_else(|| format!("'{name}' expects a value"))?;
        no_more(1)?;
        Ok(match text.parse::<i64>() {
            Ok(v) => GptValue::Int(v),
            Err(_) => {
                let mut expr = Expr::parse(text, maps)?;
                expr.check_stages(stages)?;
                GptValue::Expr(expr)
            }
        })
    };
    if let Some(args) = paren("sc-add-gpc") {
        return Some(indexed(args).and_then(|(index, counter)| {
            Ok(StickAction::AddGpc {
                index,
                counter,
                value: value()?,
            })
        }));
    }
    let set = if let Some(n) = paren("sc-set-gpt0") {
        Some(counter_of(n).map(|counter| (DataType::Gpt0, counter)))
    } else {
        paren("sc-set-gpt").map(|args| indexed(args).map(|(i, c)| (DataType::Gpt(i), c)))
    };
    if let Some(parsed) = set {
        return Some(parsed.and_then(|(tag, counter)| {
            Ok(StickAction::SetGpt {
                tag,
                counter,
                value: value()?,
            })
        }));
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
    let mut key = Expr::parse(key, maps)?;
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
    let mut warnings = Vec::new();
    let parsed = parse_stick_table(name, &words[1..], &mut warnings);
    for warning in warnings {
        diags.push(d.warning(warning));
    }
    match parsed {
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
            &mut Vec::new(),
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
        let s = parse_stick_table(
            "b",
            &words("type string len 12 size 10 nopurge"),
            &mut Vec::new(),
        )
        .expect("table");
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
            ("type ip len 4 size 1", "takes no length"),
            ("type ip size 1 peers p", "not supported by Sluice"),
            (
                "type ip size 1 store server_name",
                "not supported by Sluice",
            ),
            (
                "type ip size 1 store gpc0,gpc(2)",
                "may not be stored in the same table",
            ),
            (
                "type ip size 1 store gpt(1),gpt0",
                "may not be stored in the same table",
            ),
            (
                "type ip size 1 store gpc_rate(2,1s),gpc1_rate(1s)",
                "may not be stored in the same table",
            ),
            ("type ip size 1 store gpc(0)", "between 1 and 100 elements"),
            (
                "type ip size 1 store gpc(101)",
                "between 1 and 100 elements",
            ),
            ("type ip size 1 store gpc", "expects 'gpc(<count>)'"),
            (
                "type ip size 1 store gpc_rate(2)",
                "'gpc_rate(<count>,<period>)'",
            ),
        ] {
            let err = parse_stick_table("x", &words(text), &mut Vec::new()).expect_err(text);
            assert!(err.contains(message), "{text}: {err}");
        }
    }

    #[test]
    fn parses_arrays_and_ignores_a_type_stored_twice() {
        let mut warnings = Vec::new();
        let t = parse_stick_table(
            "fe",
            &words("type ip size 1 store gpc_rate(2,10s),gpt(1),http_fail_cnt,gpc0 store gpc0"),
            &mut warnings,
        )
        .expect("table");
        assert_eq!(
            t.layout.stored(),
            &[
                (DataType::Gpc0, 0),
                (DataType::HttpFailCnt, 0),
                (DataType::Gpt(0), 0),
                (DataType::GpcRate(0), 10_000),
                (DataType::GpcRate(1), 10_000),
            ]
        );
        assert_eq!(warnings, ["store option 'gpc0' already enabled, ignored"]);
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
                which: Gpc::Legacy(1),
                counter: 2
            })
        ));
        assert!(matches!(
            parse("sc-inc-gpc(7,1)", ""),
            Ok(StickAction::IncGpc {
                which: Gpc::Element(7),
                counter: 1
            })
        ));
        // Past the largest array: names nothing, as in HAProxy.
        assert!(matches!(
            parse("sc-inc-gpc(100,0)", ""),
            Ok(StickAction::IncGpc {
                which: Gpc::Element(100),
                ..
            })
        ));
        assert!(parse("sc-inc-gpc(0)", "").is_err());
        assert!(matches!(
            parse("sc-add-gpc(1,2)", "req.hdr_cnt(x)"),
            Ok(StickAction::AddGpc {
                index: 1,
                counter: 2,
                value: GptValue::Expr(_),
            })
        ));
        assert!(parse("sc-add-gpc(1,2)", "").is_err());
        assert!(parse("sc-inc-gpc(0,3)", "").is_err());
        assert!(matches!(
            parse("sc-set-gpt0(0)", "42"),
            Ok(StickAction::SetGpt {
                tag: DataType::Gpt0,
                value: GptValue::Int(42),
                ..
            })
        ));
        assert!(matches!(
            parse("sc-set-gpt(2,1)", "req.hdr_cnt(x)"),
            Ok(StickAction::SetGpt {
                tag: DataType::Gpt(2),
                counter: 1,
                value: GptValue::Expr(_),
            })
        ));
        assert!(parse("track-sc3", "src").is_err());
        assert!(parse("track-sc0", "res.hdr(x)").is_err());
        assert!(parse_action("deny", &[], &maps, stages).is_none());
    }
}
