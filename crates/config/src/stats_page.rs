//! The statistics page keywords of a proxy (configuration.txt §4.2 `stats *`): `stats enable`,
//! `uri`, `realm`, `auth`, `refresh`, `hide-version`, `show-legends`, `show-node`, `show-desc`, `scope`,
//! `admin if|unless COND` and `http-request allow|deny|auth`.
//!
//! Any of them turns the page on, with HAProxy's defaults (`/haproxy?stats`, realm "HAProxy
//! Statistics"). The page is served by a frontend (or `listen`) after its `http-request`
//! rules, else by the backend the request reaches, after the backend's rules; lines in a
//! `defaults` section are inherited by the proxies that follow, like the rest of it. The page
//! needs `mode http`: a `mode tcp` proxy drops it. The `admin` and `http-request` conditions
//! are compiled with the proxy's named ACLs like any rule condition.

use crate::diag::Diagnostics;
use crate::directive::Directive;
use crate::preprocess::Line;
use crate::rules::{HttpAction, Rule};
use crate::sections::SectionKind;
use crate::units::{TimeUnit, parse_time};
use sluice_sample::{AclSet, Condition, MapStore, Stages};
use std::time::Duration;

/// HAProxy's default statistics URI.
pub const DEFAULT_URI: &str = "/haproxy?stats";

/// HAProxy's default authentication realm.
pub const DEFAULT_REALM: &str = "HAProxy Statistics";

/// Why `stats http-request` may not be mixed with `stats auth` or `stats realm`.
const RULES_AND_AUTH: &str = "'stats auth' and 'stats realm' cannot be used with 'stats http-request' (use its 'auth' action)";

/// A proxy's statistics page.
#[derive(Clone, Debug)]
pub struct StatsPage {
    /// `stats uri`: requests whose target starts with it get the page.
    pub uri: String,
    /// `stats realm`.
    pub realm: String,
    /// `stats auth user:password` lines; empty means no authentication.
    pub auth: Vec<(String, String)>,
    /// `stats refresh`: the page asks the browser to reload it this often.
    pub refresh: Option<Duration>,
    /// `stats hide-version`.
    pub hide_version: bool,
    /// `stats show-legends`.
    pub show_legends: bool,
    /// `stats show-node [name]`: `Some(None)` shows the global `node` (else the host name).
    pub show_node: Option<Option<String>>,
    /// `stats show-desc [text]`: `Some(None)` shows the global `description`.
    pub show_desc: Option<Option<String>>,
    /// `stats scope`: only these proxies are listed (`.` is the page's own proxy); empty: all.
    pub scope: Vec<String>,
    /// `stats admin if|unless COND`: when it holds, the page offers server actions.
    pub admin: Option<Condition>,
    /// `stats http-request allow|deny|auth`, in order: the first that applies decides who
    /// sees the page; when none does, the request sees it. They replace `stats auth`.
    pub rules: Vec<Rule<HttpAction>>,
}

impl Default for StatsPage {
    fn default() -> Self {
        StatsPage {
            uri: DEFAULT_URI.to_owned(),
            realm: DEFAULT_REALM.to_owned(),
            auth: Vec::new(),
            refresh: None,
            hide_version: false,
            show_legends: false,
            show_node: None,
            show_desc: None,
            scope: Vec::new(),
            admin: None,
            rules: Vec::new(),
        }
    }
}

/// Applies a `stats` line of a proxy section; false if the line is not one.
pub(crate) fn parse_stats_line(
    page: &mut Option<StatsPage>,
    acls: &mut Option<AclSet>,
    kind: SectionKind,
    line: &Line,
    maps: &MapStore,
    diags: &mut Diagnostics,
) -> bool {
    if line.words.first().map(String::as_str) != Some("stats") {
        return false;
    }
    let d = Directive::new(line, 2);
    let args = &line.words[2.min(line.words.len())..];
    let conf = page.get_or_insert_with(StatsPage::default);
    let one = |what: &str, diags: &mut Diagnostics| -> Option<String> {
        match args {
            [value] => Some(value.clone()),
            _ => {
                diags.push(d.alert(format!("expects exactly one argument: {what}")));
                None
            }
        }
    };
    let none = |diags: &mut Diagnostics| d.no_more_than(2, diags);
    match line.words.get(1).map(String::as_str) {
        Some("enable") => {
            none(diags);
        }
        Some("uri") => {
            if let Some(uri) = one("a URI prefix", diags) {
                conf.uri = uri;
            }
        }
        // HAProxy 2.6 takes the first word and says nothing of the others.
        Some("realm") => match args {
            [] => diags.push(d.alert("expects a realm")),
            [realm, rest @ ..] => {
                if !rest.is_empty() {
                    diags.push(d.warning(format!(
                        "the realm is '{realm}'; '{}' is ignored (quote the realm, or escape its \
                         spaces, to keep them)",
                        rest.join(" ")
                    )));
                }
                if !conf.rules.is_empty() {
                    diags.push(d.alert(RULES_AND_AUTH));
                }
                conf.realm = realm.clone();
            }
        },
        Some("http-request") => {
            if kind == SectionKind::Defaults {
                diags.push(d.alert("not allowed in a defaults section, as in HAProxy"));
                return true;
            }
            if !conf.auth.is_empty() || conf.realm != DEFAULT_REALM {
                diags.push(d.alert(RULES_AND_AUTH));
            }
            let acls = acls.get_or_insert_with(|| AclSet::new(maps.clone()));
            let mut warnings = Vec::new();
            match crate::rules::parse_stats_rule(args, acls, maps, kind, &line.span, &mut warnings)
            {
                Ok(rule) => {
                    // Each of its actions ends the rules.
                    let previous = conf.rules.last();
                    warnings.extend(crate::rules::unreachable_after(previous, |_| true));
                    conf.rules.push(rule);
                }
                Err(err) => diags.push(d.alert(err)),
            }
            for warning in warnings {
                diags.push(d.warning(warning));
            }
        }
        Some("auth") => {
            if !conf.rules.is_empty() {
                diags.push(d.alert(RULES_AND_AUTH));
            }
            if let Some(pair) = one("user:password", diags) {
                match pair.split_once(':') {
                    Some((user, pass)) if !user.is_empty() => {
                        conf.auth.push((user.to_owned(), pass.to_owned()));
                    }
                    _ => diags.push(d.alert("expects 'user:password'")),
                }
            }
        }
        Some("refresh") => {
            if let Some(text) = one("a delay", diags) {
                match parse_time(&text, TimeUnit::S) {
                    Ok(delay) => conf.refresh = Some(d.duration(delay, diags)),
                    Err(err) => diags.push(d.alert(format!("invalid delay '{text}': {err}"))),
                }
            }
        }
        Some("hide-version") => {
            if none(diags) {
                conf.hide_version = true;
            }
        }
        Some("show-legends") => {
            if none(diags) {
                conf.show_legends = true;
            }
        }
        Some("show-node") => match args {
            [] => conf.show_node = Some(None),
            [name] => conf.show_node = Some(Some(name.clone())),
            _ => diags.push(d.alert("expects at most one node name")),
        },
        // The description is the rest of the line, as the global `description` is.
        Some("show-desc") => {
            conf.show_desc = Some((!args.is_empty()).then(|| args.join(" ")));
        }
        Some("scope") => {
            if let Some(name) = one("a proxy name or '.'", diags) {
                conf.scope.push(name);
            }
        }
        Some("admin") => {
            if !matches!(args.first().map(String::as_str), Some("if" | "unless")) {
                diags.push(d.alert("expects 'if' or 'unless' and a condition"));
                return true;
            }
            let acls = acls.get_or_insert_with(|| AclSet::new(maps.clone()));
            match Condition::parse(args, acls) {
                Ok(mut cond) => {
                    if let Some(warning) = cond.confine(Stages::FE_HTTP_REQ, None) {
                        diags.push(d.warning(warning));
                    }
                    conf.admin = Some(cond);
                }
                Err(err) => diags.push(d.alert(err)),
            }
        }
        _ => diags.push(d.alert(
            "not supported by Sluice (supported: enable, uri, realm, auth, refresh, \
             hide-version, show-legends, show-node, show-desc, scope, admin, http-request)",
        )),
    }
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::diag::Span;
    use std::sync::Arc;

    fn parse(lines: &[&str], kind: SectionKind) -> (Option<StatsPage>, Diagnostics) {
        let mut page = None;
        let mut acls = None;
        let mut diags = Diagnostics::new();
        for (i, text) in lines.iter().enumerate() {
            let line = Line {
                span: Span {
                    file: Arc::from("t.cfg"),
                    line: i as u32 + 1,
                },
                words: text.split(' ').map(str::to_owned).collect(),
            };
            assert!(parse_stats_line(
                &mut page,
                &mut acls,
                kind,
                &line,
                &MapStore::new(),
                &mut diags
            ));
        }
        (page, diags)
    }

    #[test]
    fn keywords_fill_the_page() {
        let (page, diags) = parse(
            &[
                "stats enable",
                "stats uri /st",
                "stats realm Ops",
                "stats auth admin:s3cr:et",
                "stats refresh 10s",
                "stats hide-version",
                "stats show-legends",
                "stats show-node edge1",
                "stats show-desc Master node for Europe",
                "stats scope .",
                "stats admin if TRUE",
            ],
            SectionKind::Listen,
        );
        assert!(diags.is_empty(), "{diags:?}");
        let page = page.unwrap();
        assert_eq!(page.uri, "/st");
        assert_eq!(page.realm, "Ops");
        assert_eq!(page.auth, [("admin".to_owned(), "s3cr:et".to_owned())]);
        assert_eq!(page.refresh, Some(Duration::from_secs(10)));
        assert!(page.hide_version && page.show_legends);
        assert_eq!(page.show_node, Some(Some("edge1".to_owned())));
        assert_eq!(
            page.show_desc,
            Some(Some("Master node for Europe".to_owned()))
        );
        assert_eq!(page.scope, ["."]);
        assert!(page.admin.is_some());
    }

    #[test]
    fn http_request_rules_keep_their_order_and_conditions() {
        let (page, diags) = parse(
            &[
                "stats http-request deny deny_status 429 if TRUE",
                "stats http-request allow if FALSE",
                "stats http-request auth realm Ops unless FALSE",
            ],
            SectionKind::Backend,
        );
        assert!(diags.is_empty(), "{diags:?}");
        let rules = page.unwrap().rules;
        assert!(matches!(&rules[0].action, HttpAction::Deny(reply) if reply.status == 429));
        assert!(rules[0].cond.is_some());
        assert!(matches!(rules[1].action, HttpAction::Allow));
        assert!(rules[1].cond.is_some());
        assert!(
            matches!(&rules[2].action, HttpAction::Auth { realm } if realm.as_deref() == Some("Ops"))
        );
        assert_eq!(rules[2].span.line, 3);
        // A rule after one without a condition is never evaluated: said, as HAProxy says it.
        let (_, diags) = parse(
            &["stats http-request allow", "stats http-request deny"],
            SectionKind::Backend,
        );
        let said: Vec<String> = diags.iter().map(ToString::to_string).collect();
        assert_eq!(
            said,
            [
                "[WARNING] t.cfg:2: stats http-request: never evaluated: the rule at line 1 \
              before it applies always and ends the rule set"
            ]
        );
    }

    #[test]
    fn defaults_and_mistakes() {
        let (page, diags) = parse(&["stats enable"], SectionKind::Frontend);
        assert_eq!(page.unwrap().uri, DEFAULT_URI);
        assert!(diags.is_empty());
        for bad in [
            "stats auth nopassword",
            "stats refresh soon",
            "stats admin TRUE",
            "stats uri",
            "stats frobnicate",
        ] {
            let (_, diags) = parse(&[bad], SectionKind::Listen);
            assert!(!diags.is_empty(), "{bad}");
        }
        for kind in [SectionKind::Backend, SectionKind::Defaults] {
            let (page, diags) = parse(&["stats enable"], kind);
            assert!(page.is_some() && diags.is_empty());
        }
    }
}
