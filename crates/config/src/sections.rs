//! Groups preprocessed lines into sections, the third stage of the reader.
//!
//! A section starts at a line whose first word is a section keyword and ends at the next one or
//! at the end of its file (configuration.txt §2.1: a file cannot continue a section begun in
//! another file). Section kinds Sluice does not implement are reported once, at their header,
//! and their lines are skipped. Read [`Section`] and [`group_sections`].

use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::preprocess::Line;

/// The kinds of section Sluice implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SectionKind {
    /// `global`: process-wide settings; may appear several times.
    Global,
    /// `defaults [NAME] [from OTHER]`: settings inherited by later proxies.
    Defaults,
    /// `frontend NAME`: accepts connections.
    Frontend,
    /// `backend NAME`: holds servers.
    Backend,
    /// `listen NAME`: a frontend and a backend of the same name in one.
    Listen,
    /// `http-errors NAME`: error pages that proxies import with `errorfiles`.
    HttpErrors,
    /// `userlist NAME`: users and groups for HTTP authentication.
    Userlist,
    /// `ring NAME`: an in-memory buffer of log events.
    Ring,
    /// `mailers NAME`: SMTP servers for email alerts.
    Mailers,
    /// `cache NAME`: a store of small responses (`cache-use`, `cache-store`).
    Cache,
}

impl SectionKind {
    /// The keyword that opens this kind of section.
    pub fn keyword(self) -> &'static str {
        match self {
            SectionKind::Global => "global",
            SectionKind::Defaults => "defaults",
            SectionKind::Frontend => "frontend",
            SectionKind::Backend => "backend",
            SectionKind::Listen => "listen",
            SectionKind::HttpErrors => "http-errors",
            SectionKind::Userlist => "userlist",
            SectionKind::Ring => "ring",
            SectionKind::Mailers => "mailers",
            SectionKind::Cache => "cache",
        }
    }

    /// True for sections that accept connections (`frontend`, `listen`).
    pub fn has_frontend(self) -> bool {
        matches!(self, SectionKind::Frontend | SectionKind::Listen)
    }

    /// True for sections that hold servers (`backend`, `listen`).
    pub fn has_backend(self) -> bool {
        matches!(self, SectionKind::Backend | SectionKind::Listen)
    }
}

/// Section keywords of HAProxy that Sluice recognises but does not implement.
const UNSUPPORTED_SECTIONS: &[&str] = &[
    "peers",
    "resolvers",
    "program",
    "log-forward",
    "crt-store",
    "traces",
    "acme",
    "fcgi-app",
];

/// One section: its header and the lines that follow it.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    /// What kind of section.
    pub kind: SectionKind,
    /// The section's name (`frontend NAME`); `None` for `global` and anonymous `defaults`.
    pub name: Option<String>,
    /// The named `defaults` section given with `from`, if any.
    pub from: Option<String>,
    /// Where the header is.
    pub span: Span,
    /// The section's lines, header excluded.
    pub lines: Vec<Line>,
}

/// True if `word` opens a section, implemented or not.
pub fn is_section_keyword(word: &str) -> bool {
    section_kind(word).is_some() || UNSUPPORTED_SECTIONS.contains(&word)
}

fn section_kind(word: &str) -> Option<SectionKind> {
    Some(match word {
        "global" => SectionKind::Global,
        "defaults" => SectionKind::Defaults,
        "frontend" => SectionKind::Frontend,
        "backend" => SectionKind::Backend,
        "listen" => SectionKind::Listen,
        "http-errors" => SectionKind::HttpErrors,
        "userlist" => SectionKind::Userlist,
        "ring" => SectionKind::Ring,
        "mailers" => SectionKind::Mailers,
        "cache" => SectionKind::Cache,
        _ => return None,
    })
}

/// Splits one file's lines into sections. Lines before the first section header, and lines
/// of unsupported sections, are reported and dropped.
pub fn group_sections(lines: Vec<Line>, diags: &mut Diagnostics) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    // Inside a section Sluice does not implement: its lines are skipped silently.
    let mut skipping = false;
    let mut orphan_reported = false;
    for line in lines {
        let Some(first) = line.words.first() else {
            continue;
        };
        if let Some(kind) = section_kind(first) {
            skipping = false;
            if let Some(section) = open_section(kind, line, diags) {
                sections.push(section);
            } else {
                // A broken header: skip its body rather than attach it to the previous section.
                skipping = true;
            }
        } else if UNSUPPORTED_SECTIONS.contains(&first.as_str()) {
            diags.push(Diagnostic::not_supported(&line.span, first.clone()));
            skipping = true;
        } else if skipping {
            continue;
        } else if let Some(section) = sections.last_mut() {
            section.lines.push(line);
        } else if !orphan_reported {
            orphan_reported = true;
            diags.push(Diagnostic::alert(
                &line.span,
                first.clone(),
                "keyword outside of any section (each file must start with a section)",
            ));
        }
    }
    sections
}

fn open_section(kind: SectionKind, line: Line, diags: &mut Diagnostics) -> Option<Section> {
    let keyword = kind.keyword();
    let mut args = line.words.into_iter().skip(1);
    let mut name = None;
    let mut from = None;
    let mut extra: Vec<String> = Vec::new();
    match kind {
        SectionKind::Global => extra.extend(args),
        _ => {
            let first = args.next();
            match first.as_deref() {
                None if kind == SectionKind::Defaults => {}
                None => {
                    diags.push(Diagnostic::alert(
                        &line.span,
                        keyword,
                        format!("'{keyword}' needs a name"),
                    ));
                    return None;
                }
                Some("from") if kind == SectionKind::Defaults => {
                    // `defaults from OTHER`: an anonymous section inheriting OTHER.
                    from = args.next();
                }
                Some(given) => {
                    if let Err(msg) = check_proxy_name(given) {
                        diags.push(Diagnostic::alert(&line.span, keyword, msg));
                        return None;
                    }
                    name = first;
                }
            }
            let rest: Vec<String> = args.collect();
            let mut rest = rest.into_iter().peekable();
            if from.is_none() && rest.peek().map(String::as_str) == Some("from") {
                rest.next();
                from = rest.next();
                if from.is_none() {
                    diags.push(Diagnostic::alert(
                        &line.span,
                        keyword,
                        "'from' needs the name of a defaults section",
                    ));
                }
            }
            extra.extend(rest);
        }
    }
    if let Some(first) = extra.first() {
        // HAProxy 1.x accepted `listen NAME ADDR`; 2.x requires a `bind` line.
        let message = if kind.has_frontend() && first.contains(':') {
            format!(
                "unexpected argument '{first}': please use the 'bind' keyword for listening addresses"
            )
        } else {
            format!("unexpected argument '{first}'")
        };
        diags.push(Diagnostic::alert(&line.span, keyword, message));
    }
    Some(Section {
        kind,
        name,
        from,
        span: line.span,
        lines: Vec::new(),
    })
}

/// Proxy names are made of letters, digits, '-', '_', '.' and ':' (configuration.txt §4).
fn check_proxy_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty name".into());
    }
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':')))
    {
        Some(bad) => Err(format!(
            "character '{bad}' is not permitted in name '{name}'"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn lines(text: &[&[&str]]) -> Vec<Line> {
        let file: Arc<str> = Arc::from("t.cfg");
        text.iter()
            .enumerate()
            .map(|(i, words)| Line {
                span: Span::new(&file, i as u32 + 1),
                words: words.iter().map(|w| w.to_string()).collect(),
            })
            .collect()
    }

    #[test]
    fn groups_lines_under_their_headers() {
        let mut diags = Vec::new();
        let sections = group_sections(
            lines(&[
                &["global"],
                &["maxconn", "10"],
                &["defaults", "base"],
                &["mode", "tcp"],
                &["frontend", "fe", "from", "base"],
                &["bind", ":80"],
            ]),
            &mut diags,
        );
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(sections.len(), 3);
        assert_eq!(sections[1].name.as_deref(), Some("base"));
        assert_eq!(sections[2].from.as_deref(), Some("base"));
        assert_eq!(sections[2].lines[0].words, ["bind", ":80"]);
    }

    #[test]
    fn unsupported_section_is_reported_and_skipped() {
        let mut diags = Vec::new();
        let sections = group_sections(
            lines(&[
                &["peers", "p"],
                &["peer", "a", "1.2.3.4:1"],
                &["backend", "b"],
            ]),
            &mut diags,
        );
        assert_eq!(diags.len(), 1);
        assert_eq!(
            diags[0].to_string(),
            "[ALERT] t.cfg:1: peers: not supported by Sluice"
        );
        assert_eq!(sections.len(), 1);
        assert!(sections[0].lines.is_empty());
    }

    #[test]
    fn lines_before_any_section_are_an_error() {
        let mut diags = Vec::new();
        group_sections(lines(&[&["maxconn", "1"], &["global"]]), &mut diags);
        assert_eq!(diags.len(), 1);
        assert!(diags[0].message.contains("outside of any section"));
    }

    #[test]
    fn bad_names_and_missing_names() {
        let mut diags = Vec::new();
        group_sections(
            lines(&[
                &["frontend"],
                &["backend", "a/b"],
                &["defaults", "d", "from"],
            ]),
            &mut diags,
        );
        let msgs: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
        assert_eq!(
            msgs,
            [
                "[ALERT] t.cfg:1: frontend: 'frontend' needs a name",
                "[ALERT] t.cfg:2: backend: character '/' is not permitted in name 'a/b'",
                "[ALERT] t.cfg:3: defaults: 'from' needs the name of a defaults section",
            ]
        );
    }

    #[test]
    fn listen_header_address_is_refused_as_in_haproxy_2() {
        let mut diags = Vec::new();
        let s = group_sections(lines(&[&["listen", "l", ":8080"]]), &mut diags);
        assert_eq!(s.len(), 1);
        assert_eq!(
            diags[0].to_string(),
            "[ALERT] t.cfg:1: listen: unexpected argument ':8080': please use the 'bind' keyword for listening addresses"
        );
    }
}
