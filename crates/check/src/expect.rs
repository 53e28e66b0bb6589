//! `expect` rules compiled for matching, and their evaluation against what a server answered:
//! an HTTP response (status, reason, header fields, body) for `http-check expect`, or the bytes
//! received so far for `tcp-check expect`.
//!
//! Everything here is pure so every form can be tested without sockets. Regular expressions
//! were validated by the configuration reader; should one fail to compile here anyway it
//! matches nothing (a check failing is safer than a process stopping). `!` inverts a rule.

use regex::bytes::Regex;
use sluice_config::checks::{Expect, ExpectKind, TextMatch, TextMethod};

/// A text pattern ready to use.
#[derive(Clone, Debug)]
pub enum Text {
    /// Exact (case-insensitive for header names).
    Str(String),
    /// Prefix.
    Beg(String),
    /// Suffix.
    End(String),
    /// Substring.
    Sub(String),
    /// Regular expression (or `None` if it did not compile: matches nothing).
    Reg(Option<Regex>),
}

impl Text {
    fn compile(t: &TextMatch) -> Text {
        let p = t.pattern.clone();
        match t.method {
            TextMethod::Str => Text::Str(p),
            TextMethod::Beg => Text::Beg(p),
            TextMethod::End => Text::End(p),
            TextMethod::Sub => Text::Sub(p),
            TextMethod::Reg => Text::Reg(Regex::new(&p).ok()),
        }
    }

    /// Whether `s` matches; `fold` compares ASCII case-insensitively (header names).
    pub fn matches(&self, s: &str, fold: bool) -> bool {
        let norm = |x: &str| {
            if fold {
                x.to_ascii_lowercase()
            } else {
                x.to_owned()
            }
        };
        match self {
            Text::Str(p) => norm(s) == norm(p),
            Text::Beg(p) => norm(s).starts_with(&norm(p)),
            Text::End(p) => norm(s).ends_with(&norm(p)),
            Text::Sub(p) => norm(s).contains(&norm(p)),
            Text::Reg(r) => r.as_ref().is_some_and(|r| r.is_match(s.as_bytes())),
        }
    }
}

/// What a rule looks for, compiled.
#[derive(Clone, Debug)]
pub enum Pattern {
    /// Status in one of these ranges.
    Status(Vec<(u16, u16)>),
    /// Status code text matches.
    RStatus(Option<Regex>),
    /// Contains these bytes.
    Bytes(Vec<u8>, Kind),
    /// Matches this expression (on the hexadecimal form for `rbinary`).
    Regex(Option<Regex>, Kind),
    /// A header field.
    Header {
        /// Whole value (`fhdr`) rather than comma-separated elements.
        full: bool,
        /// Field name.
        name: Text,
        /// Field value.
        value: Option<Text>,
    },
}

/// How the rule was written, for messages and `rbinary`'s hexadecimal form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `string` / `rstring`.
    Text,
    /// `binary` / `rbinary`.
    Binary,
}

/// One compiled `expect` rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// `!`.
    pub negate: bool,
    /// The pattern.
    pub pattern: Pattern,
    /// The pattern as written, for messages.
    pub source: String,
}

impl Rule {
    /// Compiles a configuration rule.
    pub fn compile(e: &Expect) -> Rule {
        let regex = |s: &str| Regex::new(s).ok();
        let (pattern, source) = match &e.kind {
            ExpectKind::Status(list) => (Pattern::Status(list.clone()), String::new()),
            ExpectKind::RStatus(r) => (Pattern::RStatus(regex(r)), r.clone()),
            ExpectKind::String(s) => (
                Pattern::Bytes(s.clone(), Kind::Text),
                String::from_utf8_lossy(s).into_owned(),
            ),
            ExpectKind::RString(r) => (Pattern::Regex(regex(r), Kind::Text), r.clone()),
            ExpectKind::Binary(b) => (Pattern::Bytes(b.clone(), Kind::Binary), hex(b)),
            ExpectKind::RBinary(r) => (Pattern::Regex(regex(r), Kind::Binary), r.clone()),
            ExpectKind::Header { full, name, value } => (
                Pattern::Header {
                    full: *full,
                    name: Text::compile(name),
                    value: value.as_ref().map(Text::compile),
                },
                name.pattern.clone(),
            ),
        };
        Rule {
            negate: e.negate,
            pattern,
            source,
        }
    }

    /// Whether an HTTP check must read the body for this rule.
    pub fn needs_body(&self) -> bool {
        matches!(self.pattern, Pattern::Bytes(..) | Pattern::Regex(..))
    }
}

/// Lower-case hexadecimal text of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `data` contains `needle`.
fn contains(data: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || data.windows(needle.len()).any(|w| w == needle)
}

/// Matches a byte pattern (string, binary, or their regular expressions) against `data`.
pub fn match_bytes(pattern: &Pattern, data: &[u8]) -> bool {
    match pattern {
        Pattern::Bytes(b, _) => contains(data, b),
        Pattern::Regex(Some(r), Kind::Text) => r.is_match(data),
        // configuration.txt: rbinary is matched against the response written in hexadecimal.
        Pattern::Regex(Some(r), Kind::Binary) => {
            r.is_match(hex(data).to_ascii_uppercase().as_bytes())
        }
        _ => false,
    }
}

/// The parts of an HTTP response the rules look at.
#[derive(Clone, Debug, Default)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Reason phrase.
    pub reason: String,
    /// Header fields in order.
    pub headers: Vec<(String, String)>,
    /// The body, as much as was read.
    pub body: Vec<u8>,
}

/// Whether `rule` (before `!`) matches `r`.
pub fn match_http(rule: &Rule, r: &HttpResponse) -> bool {
    let found = match &rule.pattern {
        Pattern::Status(list) => list.iter().any(|&(lo, hi)| (lo..=hi).contains(&r.status)),
        Pattern::RStatus(re) => re
            .as_ref()
            .is_some_and(|re| re.is_match(r.status.to_string().as_bytes())),
        Pattern::Header { full, name, value } => r.headers.iter().any(|(n, v)| {
            if !name.matches(n, true) {
                return false;
            }
            let Some(value) = value else { return true };
            if *full {
                value.matches(v.trim(), false)
            } else {
                v.split(',').any(|elem| value.matches(elem.trim(), false))
            }
        }),
        p => match_bytes(p, &r.body),
    };
    found != rule.negate
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rule(negate: bool, kind: ExpectKind) -> Rule {
        Rule::compile(&Expect { negate, kind })
    }

    fn text(method: TextMethod, p: &str) -> TextMatch {
        TextMatch {
            method,
            pattern: p.into(),
        }
    }

    fn response() -> HttpResponse {
        HttpResponse {
            status: 503,
            reason: "Service Unavailable".into(),
            headers: vec![
                ("Content-Type".into(), "text/plain".into()),
                ("X-State".into(), "a, b,c".into()),
            ],
            body: b"state: maintenance\n".to_vec(),
        }
    }

    #[test]
    fn http_forms() {
        let r = response();
        assert!(match_http(
            &rule(false, ExpectKind::Status(vec![(500, 599)])),
            &r
        ));
        assert!(!match_http(
            &rule(false, ExpectKind::Status(vec![(200, 200)])),
            &r
        ));
        assert!(match_http(
            &rule(true, ExpectKind::Status(vec![(200, 200)])),
            &r
        ));
        assert!(match_http(
            &rule(false, ExpectKind::RStatus("^5".into())),
            &r
        ));
        assert!(!match_http(
            &rule(true, ExpectKind::RStatus("^5".into())),
            &r
        ));
        assert!(match_http(
            &rule(false, ExpectKind::String(b"maint".to_vec())),
            &r
        ));
        assert!(!match_http(
            &rule(true, ExpectKind::String(b"maint".to_vec())),
            &r
        ));
        assert!(match_http(
            &rule(false, ExpectKind::RString("state: +m".into())),
            &r
        ));
        let hdr = |full, name, value| ExpectKind::Header { full, name, value };
        assert!(match_http(
            &rule(
                false,
                hdr(false, text(TextMethod::Str, "content-type"), None)
            ),
            &r
        ));
        assert!(match_http(
            &rule(
                false,
                hdr(
                    false,
                    text(TextMethod::Beg, "x-st"),
                    Some(text(TextMethod::Str, "b"))
                )
            ),
            &r
        ));
        // fhdr compares the whole value: "b" alone is not it.
        assert!(!match_http(
            &rule(
                false,
                hdr(
                    true,
                    text(TextMethod::Str, "x-state"),
                    Some(text(TextMethod::Str, "b"))
                )
            ),
            &r
        ));
        assert!(match_http(
            &rule(
                false,
                hdr(
                    true,
                    text(TextMethod::Str, "x-state"),
                    Some(text(TextMethod::Reg, "^a, b"))
                )
            ),
            &r
        ));
        assert!(match_http(
            &rule(
                false,
                hdr(
                    false,
                    text(TextMethod::End, "type"),
                    Some(text(TextMethod::Sub, "plain"))
                )
            ),
            &r
        ));
        assert!(match_http(
            &rule(true, hdr(false, text(TextMethod::Str, "x-absent"), None)),
            &r
        ));
    }

    #[test]
    fn tcp_forms() {
        let data = b"+PONG\r\n\x00\xff";
        let m = |kind| {
            let r = rule(false, kind);
            match_bytes(&r.pattern, data)
        };
        assert!(m(ExpectKind::String(b"+PONG".to_vec())));
        assert!(!m(ExpectKind::String(b"+PANG".to_vec())));
        assert!(m(ExpectKind::RString("^\\+PO".into())));
        assert!(m(ExpectKind::Binary(vec![0x00, 0xff])));
        assert!(m(ExpectKind::RBinary("00FF$".into())));
        assert!(!m(ExpectKind::RBinary("^00".into())));
        // A regex that does not compile matches nothing instead of failing.
        assert!(!m(ExpectKind::RString("(".into())));
    }
}
