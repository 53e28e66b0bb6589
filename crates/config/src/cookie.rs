//! Persistence keywords of backends (configuration.txt §4.2): `cookie`, `option persist`,
//! `option redispatch`, `force-persist` and `ignore-persist`, and the server's `cookie VALUE`
//! (§5.2), parsed into [`PersistConf`].
//!
//! Cookie persistence sends a client back to the server that served it before: the server is
//! named by a cookie value the proxy inserts (`insert`), writes over the server's own cookie
//! (`rewrite`) or prepends to it (`prefix`), or only reads (no mode). Everything about the
//! cookie is checked here, once, so the data path (`sluice_proxy::http::persist`) only
//! matches and formats: a name or value that could break a header is refused at start-up,
//! never sent. `dynamic` is refused as "not supported".

use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::directive::Directive;
use crate::preprocess::Line;
use crate::proxy::{self, Allowed};
use crate::rules::Rule;
use crate::sections::SectionKind;
use crate::units::{self, TimeUnit};
use sluice_sample::{AclSet, Condition, MapStore, Stages};

/// How the persistence cookie is managed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CookieMode {
    /// No mode: the cookie is only read to choose the server; responses are left alone.
    Passive,
    /// The proxy adds `Set-Cookie: NAME=VALUE` to responses.
    Insert,
    /// The server sets the cookie; the proxy replaces its value with the server's.
    Rewrite,
    /// The server sets the cookie; the proxy prepends `VALUE~` to it, and strips that prefix
    /// from requests.
    Prefix,
}

/// The `cookie` line of a backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CookieConf {
    /// Where it was declared.
    pub span: Span,
    /// The cookie's name.
    pub name: String,
    /// How it is managed.
    pub mode: CookieMode,
    /// `indirect`: no cookie is sent to a client that already has the right one, and in
    /// insert mode the cookie is removed from requests.
    pub indirect: bool,
    /// `nocache`: a response carrying an inserted cookie is marked `Cache-control: private`
    /// when it would otherwise be cacheable.
    pub nocache: bool,
    /// `postonly`: the cookie is inserted only in responses to POST requests.
    pub postonly: bool,
    /// `preserve`: a cookie of the same name set by the server is left untouched (and no
    /// cookie is inserted then).
    pub preserve: bool,
    /// `httponly`: the inserted cookie carries `HttpOnly`.
    pub httponly: bool,
    /// `secure`: the inserted cookie carries `Secure`.
    pub secure: bool,
    /// `domain D`, in order: one `domain=` attribute each.
    pub domains: Vec<String>,
    /// `attr VALUE`, in order: extra attributes of the inserted cookie.
    pub attrs: Vec<String>,
    /// `maxidle`: seconds after which a cookie not refreshed is ignored (insert mode).
    pub maxidle: Option<u32>,
    /// `maxlife`: seconds after its first emission when a cookie is ignored (insert mode).
    pub maxlife: Option<u32>,
}

/// What a `force-persist` or `ignore-persist` rule does when its condition holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PersistAction {
    /// `force-persist`: a persisted server is used even when it is down.
    Force,
    /// `ignore-persist`: the persistence cookie does not choose the server.
    Ignore,
}

/// What a section says about persistence. `None` fields are inherited (from `defaults`).
#[derive(Clone, Debug, Default)]
pub struct PersistConf {
    /// `cookie`.
    pub cookie: Option<CookieConf>,
    /// `option persist` / `no option persist`.
    pub persist: Option<bool>,
    /// `option redispatch [interval]`: the interval (-1 by default); 0 for
    /// `no option redispatch`, as HAProxy treats them alike.
    pub redispatch: Option<i32>,
    /// `force-persist` and `ignore-persist` rules, in order (the first that applies wins).
    pub rules: Vec<Rule<PersistAction>>,
    /// `persist rdp-cookie[(<name>)]`: the cookie's name (`msts` by default).
    pub rdp_cookie: Option<String>,
}

/// The persistence settings of a backend, as the runtime uses them.
#[derive(Clone, Debug, Default)]
pub struct PersistPlan {
    /// The cookie, in `mode http` only.
    pub cookie: Option<CookieConf>,
    /// `option persist`: a cookie naming a down server still sends the request there.
    pub persist: bool,
    /// `option redispatch`: the interval of retries after which another server is tried
    /// (negative: counted back from the last retry); `None` when disabled.
    pub redispatch: Option<i32>,
    /// `force-persist` and `ignore-persist` rules.
    pub rules: Vec<Rule<PersistAction>>,
    /// `persist rdp-cookie`, in `mode tcp` only: the name of the cookie in which a
    /// redirecting terminal server wrote the address of the server to go back to.
    pub rdp_cookie: Option<String>,
}

impl PersistConf {
    /// The plan of a backend in `mode`-`http` (`http` true) or TCP.
    pub fn plan(&self, http: bool) -> PersistPlan {
        PersistPlan {
            cookie: self.cookie.clone().filter(|_| http),
            persist: self.persist.unwrap_or(false),
            redispatch: self.redispatch.filter(|&n| n != 0),
            rules: self.rules.clone(),
            rdp_cookie: self.rdp_cookie.clone().filter(|_| !http),
        }
    }
}

const BACKEND_ONLY: Allowed = Allowed {
    defaults: false,
    frontend: false,
    backend: true,
};

/// Applies a persistence line to `conf`; false if the line is not one of ours.
pub(crate) fn parse_persist_line(
    conf: &mut PersistConf,
    acls: &mut Option<AclSet>,
    kind: SectionKind,
    line: &Line,
    maps: &MapStore,
    diags: &mut Diagnostics,
) -> bool {
    let words: Vec<&str> = line.words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["cookie", ..] => {
            let d = Directive::new(line, 1);
            if proxy::applies(&d, kind, proxy::BACK, diags)
                && let Some(cookie) = parse_cookie(&d, diags)
            {
                conf.cookie = Some(cookie);
            }
        }
        [keyword @ ("force-persist" | "ignore-persist"), ..] => {
            let d = Directive::new(line, 1);
            if kind == SectionKind::Defaults {
                diags.push(d.alert("not allowed in a 'defaults' section"));
            } else if proxy::applies(&d, kind, BACKEND_ONLY, diags) {
                let action = if *keyword == "force-persist" {
                    PersistAction::Force
                } else {
                    PersistAction::Ignore
                };
                let acls = acls.get_or_insert_with(|| AclSet::new(maps.clone()));
                parse_persist_rule(conf, action, &d, acls, diags);
            }
        }
        ["option", "persist", ..] | ["no", "option", "persist", ..] => {
            let enable = words[0] == "option";
            let skip = usize::from(!enable);
            let d = Directive::new(line, skip + 2);
            if proxy::applies(&d, kind, proxy::BACK, diags) && d.no_more_than(skip + 2, diags) {
                conf.persist = Some(enable);
            }
        }
        ["persist", rdp, ..] if rdp.starts_with("rdp-cookie") => {
            let d = Directive::new(line, 1);
            let name = match rdp.strip_prefix("rdp-cookie") {
                Some("") => Some("msts"),
                Some(rest) => rest
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .filter(|n| !n.is_empty()),
                None => None,
            };
            match name {
                None => diags.push(d.alert("expects 'rdp-cookie' or 'rdp-cookie(<name>)'")),
                Some(name) => {
                    if proxy::applies(&d, kind, proxy::BACK, diags) && d.no_more_than(2, diags) {
                        conf.rdp_cookie = Some(name.to_owned());
                    }
                }
            }
        }
        ["option", "redispatch", ..] => {
            let d = Directive::new(line, 2);
            if proxy::applies(&d, kind, proxy::BACK, diags)
                && let Some(interval) = redispatch_interval(&d, diags)
            {
                conf.redispatch = Some(interval);
            }
        }
        ["no", "option", "redispatch", ..] => {
            let d = Directive::new(line, 3);
            if proxy::applies(&d, kind, proxy::BACK, diags) && d.no_more_than(3, diags) {
                conf.redispatch = Some(0);
            }
        }
        _ => return false,
    }
    true
}

/// `option redispatch [interval]`: -1 (the last retry) unless given.
fn redispatch_interval(d: &Directive<'_>, diags: &mut Diagnostics) -> Option<i32> {
    if !d.no_more_than(3, diags) {
        return None;
    }
    let Some(word) = d.words.get(2) else {
        return Some(-1);
    };
    // HAProxy reads the interval with atoi(), so a typo silently becomes 0 (disabled);
    // Sluice refuses it instead.
    match word.parse::<i32>() {
        Ok(n) => Some(n),
        Err(_) => {
            diags.push(d.alert(format!("expects an integer interval, not '{word}'")));
            None
        }
    }
}

fn parse_persist_rule(
    conf: &mut PersistConf,
    action: PersistAction,
    d: &Directive<'_>,
    acls: &AclSet,
    diags: &mut Diagnostics,
) {
    let words = &d.words[1..];
    if !matches!(words.first().map(String::as_str), Some("if" | "unless")) {
        diags.push(d.alert("requires either 'if' or 'unless' followed by a condition"));
        return;
    }
    match Condition::parse(words, acls) {
        Ok(mut cond) => {
            // The rules run once the backend is known, before a server is chosen.
            if let Some(warning) = cond.confine(Stages::USE_SERVER, None) {
                diags.push(d.warning(warning));
            }
            conf.rules.push(Rule {
                action,
                cond: Some(cond),
                span: d.span.clone(),
            });
        }
        Err(message) => diags.push(d.alert(message)),
    }
}

/// True for the characters of an HTTP token (RFC 9110 §5.6.2), which a cookie name is.
fn is_token(text: &str) -> bool {
    sluice_http::is_token(text.as_bytes())
}

/// True for a value made of RFC 6265 §4.1.1 cookie-octets: no blanks, quotes, commas,
/// semicolons, backslashes or control characters, so it can never end the cookie early.
pub fn is_cookie_value(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b',' | b';' | b'\\'))
}

/// An attribute (`domain`, `attr`) must not end the attribute or the field early.
fn check_attribute(option: &str, value: &str) -> Result<(), String> {
    match value.chars().find(|&c| c == ';' || c.is_control()) {
        Some(c) => Err(format!(
            "'{option}' value '{}' contains '{}', which is not permitted",
            value.escape_debug(),
            c.escape_debug()
        )),
        None if value.is_empty() => Err(format!("'{option}' expects a non-empty value")),
        None => Ok(()),
    }
}

fn parse_cookie(d: &Directive<'_>, diags: &mut Diagnostics) -> Option<CookieConf> {
    let Some(name) = d.words.get(1) else {
        diags.push(d.alert("expects a cookie name"));
        return None;
    };
    if !is_token(name) {
        diags.push(d.alert(format!("invalid cookie name '{}'", name.escape_debug())));
        return None;
    }
    let mut cookie = CookieConf {
        span: d.span.clone(),
        name: name.clone(),
        mode: CookieMode::Passive,
        indirect: false,
        nocache: false,
        postonly: false,
        preserve: false,
        httponly: false,
        secure: false,
        domains: Vec::new(),
        attrs: Vec::new(),
        maxidle: None,
        maxlife: None,
    };
    let mut i = 2;
    while let Some(option) = d.words.get(i) {
        let option = option.as_str();
        let mode = match option {
            "rewrite" => Some(CookieMode::Rewrite),
            "insert" => Some(CookieMode::Insert),
            "prefix" => Some(CookieMode::Prefix),
            _ => None,
        };
        if let Some(mode) = mode {
            if cookie.mode != CookieMode::Passive && cookie.mode != mode {
                diags.push(d.alert("the 'rewrite', 'insert' and 'prefix' modes are incompatible"));
                return None;
            }
            cookie.mode = mode;
            i += 1;
            continue;
        }
        match option {
            "indirect" => cookie.indirect = true,
            "nocache" => cookie.nocache = true,
            "postonly" => cookie.postonly = true,
            "preserve" => cookie.preserve = true,
            "httponly" => cookie.httponly = true,
            "secure" => cookie.secure = true,
            "domain" | "attr" => {
                let value = d.word(i + 1, &format!("a value after '{option}'"), diags)?;
                if let Err(message) = check_attribute(option, value) {
                    diags.push(d.alert(message));
                    return None;
                }
                let list = if option == "domain" {
                    &mut cookie.domains
                } else {
                    &mut cookie.attrs
                };
                list.push(value.to_owned());
                i += 1;
            }
            "maxidle" | "maxlife" => {
                let word = d.word(i + 1, &format!("a time after '{option}'"), diags)?;
                // Seconds by default; 0 disables, as in HAProxy.
                let seconds =
                    match units::parse_time(word, TimeUnit::S).map(|t| d.duration(t, diags)) {
                        Ok(t) if t.as_secs() <= u64::from(u32::MAX) => t.as_secs() as u32,
                        Ok(_) => {
                            diags.push(d.alert(format!("'{option}' value '{word}' is too large")));
                            return None;
                        }
                        Err(err) => {
                            diags.push(d.alert(format!("invalid time value '{word}': {err}")));
                            return None;
                        }
                    };
                let slot = if option == "maxidle" {
                    &mut cookie.maxidle
                } else {
                    &mut cookie.maxlife
                };
                *slot = (seconds > 0).then_some(seconds);
                i += 1;
            }
            "dynamic" => {
                diags.push(Diagnostic::not_supported(
                    d.span,
                    format!("cookie {option}"),
                ));
                return None;
            }
            other => {
                diags.push(d.alert(format!(
                    "unknown option '{other}' (expected 'rewrite', 'insert', 'prefix', 'indirect', 'nocache', 'postonly', 'preserve', 'httponly', 'secure', 'domain', 'maxidle', 'maxlife' or 'attr')"
                )));
                return None;
            }
        }
        i += 1;
    }
    if cookie.preserve && cookie.mode != CookieMode::Insert && !cookie.indirect {
        diags.push(d.alert("'preserve' requires at least 'insert' or 'indirect'"));
        return None;
    }
    Some(cookie)
}

/// The value of a server's `cookie VALUE` option at `index`.
pub(crate) fn server_cookie(
    d: &Directive<'_>,
    index: usize,
    diags: &mut Diagnostics,
) -> Option<String> {
    let value = d.word(index, "a value after 'cookie'", diags)?;
    if value.is_empty() || !is_cookie_value(value) {
        diags.push(d.alert(format!(
            "invalid cookie value '{}' (expected visible characters other than '\"', ',', ';' and '\\')",
            value.escape_debug()
        )));
        return None;
    }
    Some(value.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn line(text: &str) -> Line {
        Line {
            span: Span::new(&Arc::from("t.cfg"), 1),
            words: text.split(' ').map(str::to_owned).collect(),
        }
    }

    fn parse(kind: SectionKind, text: &str) -> (PersistConf, Vec<String>) {
        let mut conf = PersistConf::default();
        let mut acls = None;
        let mut diags = Vec::new();
        assert!(parse_persist_line(
            &mut conf,
            &mut acls,
            kind,
            &line(text),
            &MapStore::new(),
            &mut diags
        ));
        (conf, diags.iter().map(ToString::to_string).collect())
    }

    fn cookie(text: &str) -> CookieConf {
        let (conf, diags) = parse(SectionKind::Backend, text);
        assert!(diags.is_empty(), "{diags:?}");
        conf.cookie.unwrap()
    }

    fn error(kind: SectionKind, text: &str) -> String {
        let (_, diags) = parse(kind, text);
        assert_eq!(diags.len(), 1, "{diags:?}");
        diags[0].clone()
    }

    #[test]
    fn cookie_options_are_read() {
        let c = cookie(
            "cookie SRV insert indirect nocache postonly preserve httponly secure domain .a.com domain b.com attr SameSite=Lax",
        );
        assert_eq!(c.name, "SRV");
        assert_eq!(c.mode, CookieMode::Insert);
        assert!(c.indirect && c.nocache && c.postonly && c.preserve && c.httponly && c.secure);
        assert_eq!(c.domains, [".a.com", "b.com"]);
        assert_eq!(c.attrs, ["SameSite=Lax"]);
        let c = cookie("cookie S insert maxidle 30m maxlife 3600");
        assert_eq!((c.maxidle, c.maxlife), (Some(1800), Some(3600)));
        assert_eq!(cookie("cookie S insert maxidle 0").maxidle, None);
        assert_eq!(cookie("cookie JS").mode, CookieMode::Passive);
        assert_eq!(cookie("cookie JS prefix").mode, CookieMode::Prefix);
        assert_eq!(
            cookie("cookie JS rewrite rewrite").mode,
            CookieMode::Rewrite
        );
    }

    #[test]
    fn cookie_mistakes_are_alerts() {
        let b = SectionKind::Backend;
        assert!(error(b, "cookie").ends_with("cookie: expects a cookie name"));
        assert!(error(b, "cookie S insert rewrite").contains("incompatible"));
        assert!(error(b, "cookie S preserve").contains("'preserve' requires"));
        assert!(error(b, "cookie S insert domain").contains("expects a value after 'domain'"));
        assert!(error(b, "cookie S insert attr a;b").contains("not permitted"));
        assert!(error(b, "cookie S insert frob").contains("unknown option 'frob'"));
        assert!(error(b, "cookie S;x insert").contains("invalid cookie name"));
        assert!(error(b, "cookie S insert maxidle").contains("expects a time after 'maxidle'"));
        assert!(error(b, "cookie S insert maxlife 3x").contains("invalid time value '3x'"));
        assert!(error(b, "cookie S dynamic").ends_with("cookie dynamic: not supported by Sluice"));
    }

    #[test]
    fn cookie_in_a_frontend_is_ignored_with_a_warning() {
        let (conf, diags) = parse(SectionKind::Frontend, "cookie S insert");
        assert!(conf.cookie.is_none());
        assert!(diags[0].starts_with("[WARNING]"), "{diags:?}");
    }

    #[test]
    fn options_and_rules() {
        let (conf, diags) = parse(SectionKind::Backend, "option redispatch");
        assert!(diags.is_empty());
        assert_eq!(conf.redispatch, Some(-1));
        assert_eq!(
            parse(SectionKind::Backend, "option redispatch 3")
                .0
                .redispatch,
            Some(3)
        );
        assert_eq!(
            parse(SectionKind::Backend, "no option redispatch")
                .0
                .redispatch,
            Some(0)
        );
        assert!(error(SectionKind::Backend, "option redispatch x").contains("integer"));
        assert_eq!(
            parse(SectionKind::Listen, "option persist").0.persist,
            Some(true)
        );
        assert_eq!(
            parse(SectionKind::Defaults, "no option persist").0.persist,
            Some(false)
        );
        assert!(error(SectionKind::Backend, "option persist x").contains("unexpected argument"));
        let (conf, diags) = parse(SectionKind::Backend, "force-persist if TRUE");
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(conf.rules[0].action, PersistAction::Force);
        assert!(error(SectionKind::Backend, "ignore-persist").contains("requires either 'if'"));
        assert!(error(SectionKind::Defaults, "ignore-persist if TRUE").contains("defaults"));
        assert!(error(SectionKind::Backend, "ignore-persist if nope").contains("no such ACL"));
    }

    #[test]
    fn plan_drops_the_cookie_outside_http_and_a_zero_interval() {
        let (conf, _) = parse(SectionKind::Backend, "cookie S insert");
        assert!(conf.plan(true).cookie.is_some());
        assert!(conf.plan(false).cookie.is_none());
        let conf = PersistConf {
            redispatch: Some(0),
            ..PersistConf::default()
        };
        assert_eq!(conf.plan(true).redispatch, None);
    }

    #[test]
    fn cookie_values() {
        assert!(is_cookie_value("abc-1.2_~x"));
        for bad in ["a b", "a;b", "a,b", "a\"b", "a\\b", "a\u{1}"] {
            assert!(!is_cookie_value(bad), "{bad}");
        }
    }
}
