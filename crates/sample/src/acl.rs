//! ACLs (configuration.txt §7.1, §7.4): `acl <name> <criterion> [flags] [operator]
//! [<value>] ...` compiled into named tests that conditions refer to.
//!
//! [`AclSet::add`] parses one `acl` line: the criterion is a sample expression or an
//! ACL-specific keyword (`path_beg`, `hdr_dom(host)`, `method`...); the flags `-i`, `-f`,
//! `-m`, `-M`, `-n`, `-u`, `--` come next, then the values, parsed by the matching method
//! (`crate::pattern`). Several lines with one name form one ACL that matches when any line
//! matches, and a line added after a condition already refers to the ACL still counts, as
//! in HAProxy: conditions share the [`Acl`], whose lines are frozen the first time it is
//! evaluated. The predefined ACLs of §7.4 (`TRUE`, `HTTP_1.1`, `METH_GET`, `LOCALHOST`...)
//! are found by [`AclSet::get`] when no user ACL has the name.
//!
//! Evaluation follows HAProxy's "missing sample" rule: when the fetch (or a converter)
//! produces no sample, the line does not match, so `!acl` is then true; `-m found` matches
//! exactly when a sample exists, whatever its value. Read [`AclSet::add`] first.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use crate::args::split_chain;
use crate::context::Context;
use crate::expr::Expr;
use crate::fetch;
use crate::map::MapStore;
use crate::patref::AclView;
use crate::pattern::{IntOp, MatchMethod};
use crate::stages::{Source, Stages};

/// One `acl` line (or anonymous ACL): an expression and its patterns.
#[derive(Debug)]
pub(crate) struct AclExpr {
    expr: Expr,
    method: MatchMethod,
    /// One view per `-f` file and one for the values on the line, each editable at run
    /// time through its pattern reference (`crate::patref`).
    patterns: Vec<Arc<AclView>>,
}

impl AclExpr {
    /// True when the method needs values and none was given (yet).
    fn lacks_patterns(&self) -> bool {
        self.method.takes_patterns() && self.patterns.iter().all(|v| v.is_empty())
    }

    fn any_matches(&self, sample: &crate::value::Sample<'_>) -> bool {
        self.patterns.iter().any(|v| v.matches(sample))
    }

    /// Whether any value of the expression matches any pattern.
    fn matches(&self, ctx: &dyn Context) -> bool {
        // Without values, only the methods that need none can match (§7.1: an ACL
        // without patterns never matches).
        if self.lacks_patterns() {
            return false;
        }
        self.expr
            .eval_each(ctx, &mut |sample| self.any_matches(&sample))
    }

    /// Like [`AclExpr::matches`], but `None` ("missing data", HAProxy's `ACL_TEST_MISS`)
    /// when the line reads a buffer still being filled by content inspection and its
    /// result may change as more bytes arrive: a payload not all there yet, or a length
    /// that does not match yet.
    fn decide(&self, ctx: &dyn Context) -> Option<bool> {
        if self.lacks_patterns() {
            return Some(false);
        }
        let mut produced = false;
        let matched = self.expr.eval_each(ctx, &mut |sample| {
            produced = true;
            self.any_matches(&sample)
        });
        let growing = matches!(
            self.expr.source(),
            Source::RequestBuffer | Source::ResponseBuffer
        ) && !ctx.inspection_ended();
        let may_change = !produced || matches!(self.expr.fetch_name(), "req.len" | "res.len");
        if !matched && growing && may_change {
            None
        } else {
            Some(matched)
        }
    }
}

struct AclCell {
    /// `None` for an anonymous ACL.
    name: Option<String>,
    /// Lines added so far, while the configuration is read.
    pending: Mutex<Vec<Arc<AclExpr>>>,
    /// The lines, fixed at the first evaluation.
    frozen: OnceLock<Vec<Arc<AclExpr>>>,
}

/// A named or anonymous ACL: one or more tests, true when any of them matches. Cloning
/// shares it.
#[derive(Clone)]
pub struct Acl {
    cell: Arc<AclCell>,
}

impl fmt::Debug for Acl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acl")
            .field("name", &self.cell.name)
            .finish()
    }
}

impl Acl {
    fn new(name: Option<String>, first: AclExpr) -> Acl {
        Acl {
            cell: Arc::new(AclCell {
                name,
                pending: Mutex::new(vec![Arc::new(first)]),
                frozen: OnceLock::new(),
            }),
        }
    }

    fn lines(&self) -> Vec<Arc<AclExpr>> {
        match self.cell.frozen.get() {
            Some(lines) => lines.clone(),
            None => self
                .cell
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    fn push(&self, line: AclExpr) {
        self.cell
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::new(line));
    }

    /// The ACL's name; `None` for an anonymous ACL (`{ ... }`).
    pub fn name(&self) -> Option<&str> {
        self.cell.name.as_deref()
    }

    /// Whether one of the ACL's lines matches. The first call fixes the set of lines.
    pub fn eval(&self, ctx: &dyn Context) -> bool {
        let lines = self.cell.frozen.get_or_init(|| self.lines());
        lines.iter().any(|line| line.matches(ctx))
    }

    /// Like [`Acl::eval`], `None` when no line matched and one may still match once more
    /// data arrived (see `tcp-request|tcp-response inspect-delay`).
    pub fn decide(&self, ctx: &dyn Context) -> Option<bool> {
        let lines = self.cell.frozen.get_or_init(|| self.lines());
        let mut missing = false;
        for line in lines {
            match line.decide(ctx) {
                Some(true) => return Some(true),
                Some(false) => {}
                None => missing = true,
            }
        }
        (!missing).then_some(false)
    }

    /// The stages where at least one line can find its data.
    pub fn stages(&self) -> Stages {
        self.lines()
            .iter()
            .fold(Stages::NONE, |acc, line| acc | line.expr.stages())
    }

    /// Whether one of the ACL's lines reads `source` (the data path waits for client data
    /// only for rules that read it).
    pub fn uses(&self, source: crate::stages::Source) -> bool {
        self.lines().iter().any(|line| line.expr.source() == source)
    }

    /// The fetch keyword of the first line, for diagnostics about anonymous ACLs.
    pub(crate) fn first_keyword(&self) -> String {
        self.lines()
            .first()
            .map(|l| l.expr.fetch_name().to_string())
            .unwrap_or_default()
    }
}

/// The ACLs of one proxy, in the order they were declared. A clone shares the ACLs: a line
/// added to one of them through either set is seen by both.
#[derive(Clone, Debug)]
pub struct AclSet {
    maps: MapStore,
    acls: HashMap<String, Acl>,
}

/// ACL-only keywords: a fetch with a matching-method suffix (§7.3.6 "ACL derivatives").
fn derived_keyword(name: &str) -> Option<(&'static str, MatchMethod)> {
    const SUFFIXES: [(&str, MatchMethod); 7] = [
        ("_beg", MatchMethod::Beg),
        ("_dir", MatchMethod::Dir),
        ("_dom", MatchMethod::Dom),
        ("_end", MatchMethod::End),
        ("_len", MatchMethod::Len),
        ("_reg", MatchMethod::Reg),
        ("_sub", MatchMethod::Sub),
    ];
    const BASES: [&str; 14] = [
        "ssl_fc_sni",
        "path",
        "url",
        "base",
        "hdr",
        "req.hdr",
        "res.hdr",
        "shdr",
        "urlp",
        "url_param",
        "cook",
        "req.cook",
        "res.cook",
        "scook",
    ];
    SUFFIXES.iter().find_map(|(suffix, method)| {
        let base = name.strip_suffix(suffix)?;
        BASES.iter().find(|b| **b == base).map(|b| (*b, *method))
    })
}

/// Parses an ACL expression: `criterion [flags] [operator] [values...]`, the words after
/// the ACL's name (or between the braces of an anonymous ACL).
pub(crate) fn parse_acl_expr(words: &[String], maps: &MapStore) -> Result<AclExpr, String> {
    let criterion = words.first().map(String::as_str).unwrap_or("");
    let in_expr = |e: String| format!("{e} in ACL expression '{criterion}'");
    if criterion.is_empty() {
        return Err(in_expr("missing fetch method".to_string()));
    }
    let mut calls = split_chain(criterion).map_err(in_expr)?;
    let mut derived = None;
    if let Some(first) = calls.first_mut()
        && fetch::lookup(&first.name).is_none()
        && let Some((base, method)) = derived_keyword(&first.name)
    {
        first.name = base.to_string();
        derived = Some(method);
    }
    let expr = Expr::from_calls(criterion, calls, maps).map_err(in_expr)?;
    // The payload fetches match hexadecimal binary patterns by default (§7.3.5 "ACL
    // derivatives").
    if derived.is_none()
        && matches!(
            expr.fetch_name(),
            "req.payload" | "payload" | "req.payload_lv" | "payload_lv" | "res.payload"
        )
    {
        derived = Some(MatchMethod::Bin);
    }

    let mut icase = false;
    let mut map_mode = false;
    let mut forced: Option<MatchMethod> = None;
    let mut method: Option<MatchMethod> = None;
    let mut patterns = Vec::new();
    // The method is settled the first time a value is read (from a file or the line).
    let settle = |forced: Option<MatchMethod>| -> Result<MatchMethod, String> {
        let ty = expr.out_type();
        let method = match (forced, derived) {
            (Some(m), _) if !m.accepts(ty) => {
                return Err(format!("matching method '{}' cannot be used with a '{ty}' sample", m.name()));
            }
            (Some(m), _) => m,
            (None, Some(d)) if !expr.has_converters() => d,
            _ => MatchMethod::default_for(ty).ok_or_else(|| {
                format!(
                    "matching method must be specified first (using '-m') when using a sample fetch of this type ('{ty}')"
                )
            })?,
        };
        Ok(method)
    };
    let mut i = 1;
    while let Some(word) = words.get(i) {
        if !word.starts_with('-') {
            break;
        }
        i += 1;
        match word.as_str() {
            "-i" => icase = true,
            "-M" => map_mode = true,
            "-n" => {}
            "-u" => i += 1,
            "--" => break,
            "-m" => {
                let name = words.get(i).map(String::as_str).unwrap_or("");
                i += 1;
                if method.is_some() {
                    return Err("'-m' must be placed before '-f'".to_string());
                }
                if forced.is_some() {
                    return Err("'-m' may only be given once".to_string());
                }
                forced = Some(MatchMethod::from_name(name).ok_or_else(|| {
                    format!("unknown matching method '{name}' when parsing ACL expression")
                })?);
            }
            "-f" => {
                let path = words.get(i).map(String::as_str).unwrap_or("");
                i += 1;
                let m = match method {
                    Some(m) => m,
                    None => *method.insert(settle(forced)?),
                };
                patterns.push(maps.acl_file_view(path, m, icase, map_mode)?);
            }
            other => {
                return Err(format!(
                    "'{other}' is not a valid ACL option. Please use '--' before any pattern beginning with a '-'."
                ));
            }
        }
    }
    let method = match method {
        Some(m) => m,
        None => settle(forced)?,
    };
    // Like HAProxy, every line has a reference for its own values, even with none, so
    // that `add acl #<id>` can reach it.
    let keyword = criterion.split(['(', ',']).next().unwrap_or(criterion);
    let mut op = IntOp::Eq;
    let mut values = Vec::new();
    for value in words.iter().skip(i) {
        if method.takes_integers()
            && let Some(new_op) = IntOp::from_name(value)
        {
            op = new_op;
            continue;
        }
        values.push((value.as_str(), op));
    }
    patterns.push(maps.inline_ref(keyword, method, icase, &values)?);
    Ok(AclExpr {
        expr,
        method,
        patterns,
    })
}

/// An anonymous ACL (`{ criterion ... }` in a condition).
pub(crate) fn anonymous(words: &[String], maps: &MapStore) -> Result<Acl, String> {
    let line = parse_acl_expr(words, maps)?;
    Ok(Acl::new(None, line))
}

/// True for a valid ACL name: letters, digits, `-`, `_`, `.` and `:`.
fn valid_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("missing ACL name".to_string());
    }
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':')))
    {
        Some(c) => Err(format!(
            "ACL name '{name}' contains an invalid character '{c}' (only letters, digits, '-', '_', '.' and ':')"
        )),
        None => Ok(()),
    }
}

/// The predefined ACLs of §7.4.
const PREDEFINED: [(&str, &[&str]); 23] = [
    ("FALSE", &["always_false"]),
    ("HTTP", &["req.proto_http"]),
    ("HTTP_1.0", &["req.ver", "1.0"]),
    ("HTTP_1.1", &["req.ver", "1.1"]),
    ("HTTP_2.0", &["req.ver", "2.0"]),
    ("HTTP_3.0", &["req.ver", "3.0"]),
    ("HTTP_CONTENT", &["req.hdr_val(content-length)", "gt", "0"]),
    ("HTTP_URL_ABS", &["url_reg", "^[^/:]*://"]),
    ("HTTP_URL_SLASH", &["url_beg", "/"]),
    ("HTTP_URL_STAR", &["url", "*"]),
    ("LOCALHOST", &["src", "127.0.0.1/8", "::1"]),
    ("METH_CONNECT", &["method", "CONNECT"]),
    ("METH_DELETE", &["method", "DELETE"]),
    ("METH_GET", &["method", "GET", "HEAD"]),
    ("METH_HEAD", &["method", "HEAD"]),
    ("METH_OPTIONS", &["method", "OPTIONS"]),
    ("METH_POST", &["method", "POST"]),
    ("METH_PUT", &["method", "PUT"]),
    ("METH_TRACE", &["method", "TRACE"]),
    ("RDP_COOKIE", &["req.rdp_cookie_cnt", "gt", "0"]),
    ("REQ_CONTENT", &["req.len", "gt", "0"]),
    ("TRUE", &["always_true"]),
    ("WAIT_END", &["wait_end"]),
];

fn predefined() -> &'static HashMap<&'static str, Acl> {
    static ACLS: OnceLock<HashMap<&'static str, Acl>> = OnceLock::new();
    ACLS.get_or_init(|| {
        let maps = MapStore::new();
        PREDEFINED
            .iter()
            .filter_map(|(name, words)| {
                let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
                // The definitions are constants checked by the tests; one that failed to
                // compile would simply be unknown.
                let line = parse_acl_expr(&words, &maps).ok()?;
                Some((*name, Acl::new(Some(name.to_string()), line)))
            })
            .collect()
    })
}

impl AclSet {
    /// An empty set whose ACLs load their `-f` files and maps through `maps`.
    pub fn new(maps: MapStore) -> AclSet {
        AclSet {
            maps,
            acls: HashMap::new(),
        }
    }

    /// The file cache the set's ACLs (and conditions parsed with it) use.
    pub fn maps(&self) -> &MapStore {
        &self.maps
    }

    /// Adds one `acl` line: `words` are the words after `acl` (name, criterion, flags,
    /// values). A name seen before gets one more line.
    ///
    /// Rejects: an invalid name; an unknown keyword ("unknown fetch method 'foo' in ACL
    /// expression 'foo'"); an unknown flag ("'-x' is not a valid ACL option. Please use
    /// '--' before any pattern beginning with a '-'."); an unknown or unsuitable matching
    /// method; a binary sample without `-m`; an unreadable `-f` file; a value the method
    /// cannot parse ("'foo' is not a number", "'x' is not a valid IPv4 or IPv6 address",
    /// "regex '(x' is invalid (...)").
    pub fn add(&mut self, words: &[String]) -> Result<(), String> {
        let name = words.first().map(String::as_str).unwrap_or("");
        valid_name(name)?;
        let line = parse_acl_expr(words.get(1..).unwrap_or_default(), &self.maps)?;
        match self.acls.get(name) {
            Some(acl) => acl.push(line),
            None => {
                self.acls
                    .insert(name.to_string(), Acl::new(Some(name.to_string()), line));
            }
        }
        Ok(())
    }

    /// The ACL named `name`: a declared one, else a predefined one (§7.4).
    pub fn get(&self, name: &str) -> Option<Acl> {
        self.acls
            .get(name)
            .or_else(|| predefined().get(name))
            .cloned()
    }

    /// The predefined ACL named `name` (§7.4), if Sluice has it.
    pub fn predefined(name: &str) -> Option<Acl> {
        predefined().get(name).cloned()
    }
}

#[cfg(test)]
mod tests;
