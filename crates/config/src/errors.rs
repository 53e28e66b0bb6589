//! Custom error answers: `errorfile`, `errorloc`/`errorloc302`/`errorloc303`, `errorfiles`,
//! `http-error` and `http-errors` sections (configuration.txt §4.2 and §12.4).
//!
//! Files are read with the configuration, checked, and kept in memory (HAProxy reads them
//! before any chroot, and so do we). Directives apply in order, later ones overriding earlier
//! ones for the same status, so each proxy keeps an ordered list of [`ErrorDirective`]s that
//! [`crate::plan`] resolves (an `errorfiles` import needs every `http-errors` section parsed
//! first) into the final [`ErrorPages`].

use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::directive::Directive;
use crate::preprocess::Line;
use crate::rules::Reply;
use sluice_sample::MapStore;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The statuses HAProxy can produce itself, the only ones an error page may replace.
pub const CUSTOMIZABLE_STATUSES: [u16; 19] = [
    200, 400, 401, 403, 404, 405, 407, 408, 410, 413, 414, 425, 429, 431, 500, 501, 502, 503, 504,
];

/// An answer sent instead of a built-in error.
#[derive(Clone, Debug)]
pub enum ErrorPage {
    /// A complete raw HTTP response, sent as it is; empty means "close without answering"
    /// (`errorfile 408 /dev/null`).
    Fixed(Arc<[u8]>),
    /// `http-error` with `lf-string`, `lf-file` or a `hdr` value with `%`: built for each
    /// answer, from the stream it answers.
    Formatted(Arc<Reply>),
}

impl ErrorPage {
    /// A fixed page of `bytes`.
    pub fn fixed(bytes: impl Into<Arc<[u8]>>) -> ErrorPage {
        ErrorPage::Fixed(bytes.into())
    }
}

/// Fixed pages compare by their bytes, formatted ones by identity (formats have no equality).
impl PartialEq for ErrorPage {
    fn eq(&self, other: &ErrorPage) -> bool {
        match (self, other) {
            (ErrorPage::Fixed(a), ErrorPage::Fixed(b)) => a == b,
            (ErrorPage::Formatted(a), ErrorPage::Formatted(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for ErrorPage {}

/// Error pages by status.
pub type ErrorPages = BTreeMap<u16, ErrorPage>;

/// True if one of `pages` is built per answer, and so may read the request it answers.
pub fn any_formatted(pages: &ErrorPages) -> bool {
    pages
        .values()
        .any(|page| matches!(page, ErrorPage::Formatted(_)))
}

/// One error-page directive of a proxy, in declaration order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorDirective {
    /// `errorfile` or `errorloc*`: one status, one page.
    Page(u16, ErrorPage),
    /// `http-error status CODE default-errorfiles`: back to the built-in page (or, in a
    /// backend, the frontend's).
    Reset(u16),
    /// `errorfiles NAME [CODE…]`: the pages of an `http-errors` section (all, or the listed
    /// statuses).
    Import {
        /// Where it was declared.
        span: Span,
        /// The `http-errors` section's name.
        section: String,
        /// The statuses to import; empty means all.
        codes: Vec<u16>,
    },
}

/// The largest error page: it must fit a buffer minus the rewrite reserve (configuration.txt
/// §4.2 "errorfile"), 15360 bytes with the default tune settings.
pub const MAX_PAGE: usize = 15360;

/// Parses `errorfile`, `errorloc`, `errorloc302`, `errorloc303`, `errorfiles` or `http-error`
/// (whose formats may use `maps`); `None` if the line is not one of them.
pub(crate) fn parse_error_directive(
    line: &Line,
    maps: &MapStore,
    diags: &mut Diagnostics,
) -> Option<Option<ErrorDirective>> {
    let d = Directive::new(line, 1);
    let keyword = line.words.first()?.as_str();
    Some(match keyword {
        "errorfile" => parse_errorfile(&d, diags),
        "errorloc" | "errorloc302" | "errorloc303" => {
            let code = status(&d, diags)?;
            let url = d.word(2, "a URL", diags)?;
            d.no_more_than(3, diags);
            if url.bytes().any(|b| b.is_ascii_control() || b == b' ') {
                diags.push(d.alert(format!("invalid URL '{url}'")));
                return Some(None);
            }
            let (redirect, reason) = if keyword == "errorloc303" {
                (303, "See Other")
            } else {
                (302, "Found")
            };
            let page = format!(
                "HTTP/1.1 {redirect} {reason}\r\ncontent-length: 0\r\nlocation: {url}\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
            );
            Some(ErrorDirective::Page(
                code,
                ErrorPage::fixed(page.into_bytes()),
            ))
        }
        "errorfiles" => {
            let section = d
                .word(1, "the name of an http-errors section", diags)?
                .to_owned();
            let mut codes = Vec::new();
            for (i, word) in line.words.iter().enumerate().skip(2) {
                match word.parse::<u16>() {
                    Ok(code) if CUSTOMIZABLE_STATUSES.contains(&code) => codes.push(code),
                    _ => {
                        diags.push(
                            d.alert(format!("status {word} (argument {i}) cannot be customized")),
                        );
                        return Some(None);
                    }
                }
            }
            Some(ErrorDirective::Import {
                span: line.span.clone(),
                section,
                codes,
            })
        }
        "http-error" => parse_http_error(line, &d, maps, diags),
        _ => return None,
    })
}

/// `http-error status CODE [content-type T] [default-errorfiles | errorfile F | errorfiles N |
/// file F | string S | lf-file F | lf-string FMT] [hdr NAME VALUE]*`: a fixed page is made
/// here, once; one with a format (`lf-string`, `lf-file`, a `hdr` value with `%`) is built
/// for each answer.
fn parse_http_error(
    line: &Line,
    d: &Directive<'_>,
    maps: &MapStore,
    diags: &mut Diagnostics,
) -> Option<ErrorDirective> {
    let words = &line.words;
    if words.get(1).map(String::as_str) != Some("status") {
        diags.push(d.alert("expects 'status' and a status code"));
        return None;
    }
    let code = status_at(d, 2, diags)?;
    if has_format(&words[3..]) {
        return match crate::rules::parse_error_reply(&words[3..], code, maps) {
            Ok(reply) => Some(ErrorDirective::Page(
                code,
                ErrorPage::Formatted(Arc::new(reply)),
            )),
            Err(message) => {
                diags.push(d.alert(message));
                None
            }
        };
    }
    let mut content_type = None;
    let mut body: Option<Vec<u8>> = None;
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut reset = false;
    let mut i = 3;
    while i < words.len() {
        let word = words[i].as_str();
        if word == "default-errorfiles" {
            reset = true;
            i += 1;
            continue;
        }
        let Some(value) = words.get(i + 1) else {
            diags.push(d.alert(format!("'{word}' expects a value")));
            return None;
        };
        match word {
            "content-type" => content_type = Some(value.clone()),
            "errorfile" => return parse_errorfile_at(d, code, value, diags),
            "errorfiles" => {
                return Some(ErrorDirective::Import {
                    span: line.span.clone(),
                    section: value.clone(),
                    codes: vec![code],
                });
            }
            "file" => match std::fs::read(value) {
                Ok(bytes) => body = Some(bytes),
                Err(err) => {
                    diags.push(d.alert(format!("cannot read file '{value}': {err}")));
                    return None;
                }
            },
            "string" => body = Some(value.clone().into_bytes()),
            "hdr" => {
                let Some(field) = words.get(i + 2) else {
                    diags.push(d.alert("'hdr' expects a name and a value"));
                    return None;
                };
                headers.push((value.to_ascii_lowercase(), field.clone()));
                i += 1;
            }
            other => {
                diags.push(d.alert(format!("unknown argument '{other}'")));
                return None;
            }
        }
        i += 2;
    }
    if reset {
        if body.is_some() || !headers.is_empty() {
            diags.push(d.alert("'default-errorfiles' takes no payload nor fields"));
            return None;
        }
        return Some(ErrorDirective::Reset(code));
    }
    let body = body.unwrap_or_default();
    if !body.is_empty() && content_type.is_none() {
        diags.push(d.alert("a payload needs a 'content-type'"));
        return None;
    }
    // HAProxy's order: the added fields, then the length and the type.
    let mut page = format!("HTTP/1.1 {code} {}\r\n", sluice_http::reason_phrase(code));
    for (name, value) in &headers {
        page.push_str(&format!("{name}: {value}\r\n"));
    }
    page.push_str(&format!("content-length: {}\r\n", body.len()));
    if let Some(t) = content_type.filter(|_| !body.is_empty()) {
        page.push_str(&format!("content-type: {t}\r\n"));
    }
    page.push_str("\r\n");
    let mut bytes = page.into_bytes();
    bytes.extend_from_slice(&body);
    if let Err(problem) = check_page(&bytes) {
        diags.push(d.alert(problem));
        return None;
    }
    Some(ErrorDirective::Page(code, ErrorPage::fixed(bytes)))
}

/// Whether the arguments after `http-error status CODE` ask for a page built per answer:
/// `lf-string`, `lf-file`, or a `hdr` value with a `%`.
fn has_format(args: &[String]) -> bool {
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "lf-string" | "lf-file" => return true,
            "hdr" if args.get(i + 2).is_some_and(|v| v.contains('%')) => return true,
            "hdr" => i += 3,
            "default-errorfiles" => i += 1,
            _ => i += 2,
        }
    }
    false
}

fn status(d: &Directive<'_>, diags: &mut Diagnostics) -> Option<u16> {
    status_at(d, 1, diags)
}

/// The customizable status at word `index`.
fn status_at(d: &Directive<'_>, index: usize, diags: &mut Diagnostics) -> Option<u16> {
    let word = d.word(index, "a status code", diags)?;
    match word.parse::<u16>() {
        Ok(code) if CUSTOMIZABLE_STATUSES.contains(&code) => Some(code),
        _ => {
            diags.push(d.alert(format!(
                "status '{word}' cannot be customized (HAProxy produces only 200, 400, 401, 403, 404, 405, 407, 408, 410, 413, 414, 425, 429, 431, 500, 501, 502, 503 and 504)"
            )));
            None
        }
    }
}

fn parse_errorfile(d: &Directive<'_>, diags: &mut Diagnostics) -> Option<ErrorDirective> {
    let code = status(d, diags)?;
    let path = d.word(2, "a file name", diags)?;
    d.no_more_than(3, diags);
    parse_errorfile_at(d, code, path, diags)
}

/// The page of status `code` read from the file at `path`, checked.
fn parse_errorfile_at(
    d: &Directive<'_>,
    code: u16,
    path: &str,
    diags: &mut Diagnostics,
) -> Option<ErrorDirective> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) => {
            diags.push(d.alert(format!("cannot read error file '{path}': {err}")));
            return None;
        }
    };
    if let Err(problem) = check_page(&bytes) {
        diags.push(d.alert(format!("error file '{path}': {problem}")));
        return None;
    }
    Some(ErrorDirective::Page(code, ErrorPage::fixed(bytes)))
}

/// An error page must be empty or a complete HTTP/1.x response head (body optional) that fits
/// in [`MAX_PAGE`].
pub fn check_page(bytes: &[u8]) -> Result<(), String> {
    if bytes.is_empty() {
        return Ok(());
    }
    if bytes.len() > MAX_PAGE {
        return Err(format!(
            "{} bytes, more than the {MAX_PAGE} a response may have",
            bytes.len()
        ));
    }
    let status_line_ok = bytes.len() > 12
        && (bytes.starts_with(b"HTTP/1.0 ") || bytes.starts_with(b"HTTP/1.1 "))
        && bytes[9..12].iter().all(u8::is_ascii_digit)
        && matches!(bytes.get(12), Some(b' ' | b'\r' | b'\n'));
    if !status_line_ok {
        return Err("does not start with an HTTP/1.x status line".into());
    }
    let has_end_of_head =
        bytes.windows(4).any(|w| w == b"\r\n\r\n") || bytes.windows(2).any(|w| w == b"\n\n");
    if !has_end_of_head {
        return Err("the response head does not end with an empty line".into());
    }
    Ok(())
}

/// The pages of every `http-errors` section, by name.
pub type HttpErrorSections = HashMap<String, ErrorPages>;

/// Parses the lines of an `http-errors` section: only `errorfile` lines.
pub fn parse_http_errors_section(lines: &[Line], diags: &mut Diagnostics) -> ErrorPages {
    let mut pages = ErrorPages::new();
    for line in lines {
        let Some(first) = line.words.first() else {
            continue;
        };
        if first != "errorfile" {
            diags.push(Diagnostic::alert(
                &line.span,
                first.clone(),
                "only 'errorfile' is allowed in an 'http-errors' section",
            ));
            continue;
        }
        if let Some(ErrorDirective::Page(code, page)) =
            parse_errorfile(&Directive::new(line, 1), diags)
        {
            pages.insert(code, page);
        }
    }
    pages
}

/// Applies a proxy's directives in order over an empty set of pages.
pub fn resolve(
    directives: &[ErrorDirective],
    sections: &HttpErrorSections,
    diags: &mut Diagnostics,
) -> ErrorPages {
    let mut pages = ErrorPages::new();
    for directive in directives {
        match directive {
            ErrorDirective::Page(code, page) => {
                pages.insert(*code, page.clone());
            }
            ErrorDirective::Reset(code) => {
                pages.remove(code);
            }
            ErrorDirective::Import {
                span,
                section,
                codes,
            } => match sections.get(section) {
                None => diags.push(Diagnostic::alert(
                    span,
                    "errorfiles",
                    format!("unknown http-errors section '{section}'"),
                )),
                Some(found) => {
                    for (code, page) in found {
                        if codes.is_empty() || codes.contains(code) {
                            pages.insert(*code, page.clone());
                        }
                    }
                }
            },
        }
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_formats_make_a_page_built_per_answer() {
        let words = |text: &str| -> Vec<String> { text.split(' ').map(String::from).collect() };
        // A fixed string may hold a `%`: it is not a format.
        assert!(!has_format(&words("content-type text/plain string 100%")));
        assert!(!has_format(&words("default-errorfiles")));
        assert!(!has_format(&words(
            "content-type text/plain string x hdr x-a b"
        )));
        assert!(has_format(&words("content-type text/plain lf-string x")));
        assert!(has_format(&words("content-type text/plain lf-file /f")));
        assert!(has_format(&words("hdr x-a b hdr x-c %[src]")));
        // A field named like a keyword is still a field.
        assert!(has_format(&words("hdr lf-string %[src]")));
        assert!(!has_format(&words("hdr lf-string fixed")));
    }

    #[test]
    fn a_page_with_a_format_is_kept_to_be_built() {
        let line = |text: &str| Line {
            span: Span::new(&Arc::from("t.cfg"), 1),
            words: text.split(' ').map(String::from).collect(),
        };
        let maps = MapStore::new();
        let mut diags = Vec::new();
        let parsed = parse_error_directive(
            &line("http-error status 503 content-type text/plain lf-string %[src] hdr x-a b"),
            &maps,
            &mut diags,
        );
        assert!(diags.is_empty(), "{diags:?}");
        let Some(Some(ErrorDirective::Page(503, ErrorPage::Formatted(reply)))) = parsed else {
            panic!("{parsed:?}");
        };
        assert_eq!(reply.status, 503);
        assert_eq!(reply.content_type.as_deref(), Some("text/plain"));
        assert_eq!(reply.headers.len(), 1);
        // Without a format the page is made once.
        let parsed = parse_error_directive(
            &line("http-error status 503 content-type text/plain string down hdr x-a b"),
            &maps,
            &mut diags,
        );
        assert!(matches!(
            parsed,
            Some(Some(ErrorDirective::Page(503, ErrorPage::Fixed(_))))
        ));
        assert!(diags.is_empty(), "{diags:?}");
    }

    #[test]
    fn pages_must_be_responses() {
        assert!(check_page(b"").is_ok());
        assert!(check_page(b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n").is_ok());
        assert!(check_page(b"HTTP/1.0 503\r\n\r\nbody").is_ok());
        assert!(check_page(b"<html>oops</html>").is_err());
        assert!(check_page(b"HTTP/1.1 503 Busy\r\nno end").is_err());
        assert!(check_page(b"HTTP/1.1 5x3 Busy\r\n\r\n").is_err());
        assert!(check_page(&vec![b'a'; MAX_PAGE + 1]).is_err());
    }

    #[test]
    fn later_directives_override_earlier_ones() {
        let page = |s: &str| ErrorPage::fixed(s.as_bytes());
        let span = Span::new(&Arc::from("t.cfg"), 1);
        let mut sections = HttpErrorSections::new();
        sections.insert(
            "site".into(),
            ErrorPages::from([(503, page("imported 503")), (404, page("imported 404"))]),
        );
        let directives = [
            ErrorDirective::Page(503, page("first")),
            ErrorDirective::Import {
                span: span.clone(),
                section: "site".into(),
                codes: vec![503],
            },
            ErrorDirective::Page(400, page("own 400")),
        ];
        let mut diags = Vec::new();
        let pages = resolve(&directives, &sections, &mut diags);
        assert!(diags.is_empty());
        assert_eq!(pages[&503], page("imported 503"));
        assert_eq!(pages[&400], page("own 400"));
        assert!(
            !pages.contains_key(&404),
            "only the listed status is imported"
        );
        let unknown = [ErrorDirective::Import {
            span,
            section: "nope".into(),
            codes: vec![],
        }];
        resolve(&unknown, &sections, &mut diags);
        assert_eq!(diags.len(), 1);
    }
}
