//! `cache` sections (configuration.txt §6): a named in-memory store of small responses that
//! proxies fill with `http-response cache-store NAME` and answer from with `http-request
//! cache-use NAME`.
//!
//! A cache has a size in megabytes (`total-max-size`, required, at most 4095), a largest
//! object (`max-object-size`, a 256th of the size by default, at most half of it) and a
//! longest freshness (`max-age`, 60 seconds by default). With `process-vary on`, a URI may
//! have several stored variants (`max-secondary-entries`, 10 by default), chosen by the
//! request fields their `Vary` names; with `process-vary off`, the default, a response
//! carrying `Vary` is never stored. 3.x's `early-hints` is not supported. Caches are read before the
//! proxies, and [`check_cache_references`] reports a rule naming no cache. Read
//! [`parse_caches`] first.

use crate::diag::{Diagnostic, Diagnostics};
use crate::directive::Directive;
use crate::sections::{Section, SectionKind};

/// The size of the blocks a cache is counted in (and `show cache` reports), as in HAProxy.
pub const CACHE_BLOCK_SIZE: u64 = 1024;

/// The largest `total-max-size`, in megabytes (HAProxy's limit: the block count fits 32 bits).
const MAX_TOTAL_MB: u64 = 4095;

/// One `cache` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheConf {
    /// The name rules and `show cache` use.
    pub name: String,
    /// `total-max-size`, in bytes.
    pub total_size: u64,
    /// `max-object-size`: the largest response stored (head and body), in bytes.
    pub max_object_size: u64,
    /// `max-age`: the longest a response stays fresh, in seconds, whatever it says.
    pub max_age: u32,
    /// `process-vary on`: a response whose `Vary` names only `Accept-Encoding` and
    /// `Referer` is stored as one of the variants of its URI, chosen by those fields.
    pub process_vary: bool,
    /// `max-secondary-entries`: the most variants one URI may have (10 by default).
    pub max_secondary_entries: u32,
}

/// HAProxy's default `max-secondary-entries`.
pub const DEFAULT_MAX_SECONDARY_ENTRIES: u32 = 10;

/// Reads every `cache` section; two caches of one name are an error.
pub fn parse_caches(sections: &[Section], diags: &mut Diagnostics) -> Vec<CacheConf> {
    let mut caches: Vec<CacheConf> = Vec::new();
    for section in sections.iter().filter(|s| s.kind == SectionKind::Cache) {
        let Some(name) = section.name.clone() else {
            continue;
        };
        if caches.iter().any(|c| c.name == name) {
            diags.push(Diagnostic::alert(
                &section.span,
                "cache",
                format!("duplicate cache name '{name}'"),
            ));
            continue;
        }
        let mut total_size = None;
        let mut max_object_size = None;
        let mut max_age = 60;
        let mut process_vary = false;
        let mut max_secondary_entries = DEFAULT_MAX_SECONDARY_ENTRIES;
        for line in &section.lines {
            let d = Directive::new(line, 1);
            match line.words.first().map_or("", String::as_str) {
                "total-max-size" => {
                    if let Some(mb) = d.integer(1, "a size in megabytes", 1, MAX_TOTAL_MB, diags)
                        && d.no_more_than(2, diags)
                    {
                        total_size = Some(mb * 1024 * 1024);
                    }
                }
                "max-object-size" => {
                    if let Some(n) = d.integer(1, "a size in bytes", 1, u64::from(u32::MAX), diags)
                        && d.no_more_than(2, diags)
                    {
                        max_object_size = Some(n);
                    }
                }
                "max-age" => {
                    if let Some(n) = d.integer(1, "a time in seconds", 0, i32::MAX as u64, diags)
                        && d.no_more_than(2, diags)
                    {
                        max_age = n as u32;
                    }
                }
                "process-vary" => match line.words.get(1).map(String::as_str) {
                    Some(word @ ("on" | "off")) => {
                        if d.no_more_than(2, diags) {
                            process_vary = word == "on";
                        }
                    }
                    // HAProxy 2.6 warns and leaves the setting as it was.
                    _ => diags.push(d.warning(
                        "expects 'on' or 'off': the line is ignored, as HAProxy 2.6 ignores it",
                    )),
                },
                // Only meaningful with `process-vary on`.
                "max-secondary-entries" => {
                    if let Some(n) = d.integer(
                        1,
                        "a strictly positive number",
                        1,
                        u64::from(u32::MAX),
                        diags,
                    ) && d.no_more_than(2, diags)
                    {
                        max_secondary_entries = n as u32;
                    }
                }
                other => diags.push(Diagnostic::not_supported(
                    &line.span,
                    format!("cache {other}"),
                )),
            }
        }
        let Some(total_size) = total_size else {
            diags.push(Diagnostic::alert(
                &section.span,
                "cache",
                format!("size not specified for cache '{name}' (total-max-size)"),
            ));
            continue;
        };
        let max_object_size = match max_object_size {
            None => total_size >> 8,
            Some(n) if n > total_size / 2 => {
                diags.push(Diagnostic::alert(
                    &section.span,
                    "cache",
                    format!(
                        "cache '{name}': max-object-size is limited to half of total-max-size ({})",
                        total_size / 2
                    ),
                ));
                continue;
            }
            Some(n) => n,
        };
        caches.push(CacheConf {
            name,
            total_size,
            max_object_size,
            max_age,
            process_vary,
            max_secondary_entries,
        });
    }
    caches
}

/// Reports every `http-request cache-use NAME` and `http-response cache-store NAME` rule
/// naming no cache, and the `filter cache NAME` lines of a proxy that name none, name one
/// twice, or come after its `filter compression` (a response is stored before it is
/// compressed, the one order HAProxy allows).
pub fn check_cache_references(sections: &[Section], caches: &[CacheConf], diags: &mut Diagnostics) {
    let proxies = sections
        .iter()
        .filter(|s| s.kind.has_frontend() || s.kind.has_backend());
    for section in proxies {
        check_cache_filters(section, caches, diags);
    }
    let proxies = sections.iter().filter(|s| {
        s.kind.has_frontend() || s.kind.has_backend() || s.kind == SectionKind::Defaults
    });
    for line in proxies.flat_map(|s| &s.lines) {
        let words = &line.words;
        let uses_cache = matches!(
            (
                words.first().map(String::as_str),
                words.get(1).map(String::as_str)
            ),
            (Some("http-request"), Some("cache-use"))
                | (Some("http-response"), Some("cache-store"))
        );
        let Some(name) = words.get(2).filter(|_| uses_cache) else {
            continue;
        };
        if !caches.iter().any(|c| &c.name == name) {
            diags.push(Diagnostic::alert(
                &line.span,
                format!("{} {}", words[0], words[1]),
                format!("no cache named '{name}' (declare it in a 'cache' section)"),
            ));
        }
    }
}

/// The `filter cache NAME` lines of one proxy section.
fn check_cache_filters(section: &Section, caches: &[CacheConf], diags: &mut Diagnostics) {
    let mut declared: Vec<&str> = Vec::new();
    let mut compression_before = false;
    for line in &section.lines {
        let words = &line.words;
        match (
            words.first().map(String::as_str),
            words.get(1).map(String::as_str),
        ) {
            (Some("filter"), Some("compression")) => compression_before = true,
            (Some("filter"), Some("cache")) => {
                let alert =
                    |message: String| Diagnostic::alert(&line.span, "filter cache", message);
                let Some(name) = words.get(2) else {
                    diags.push(alert("expects the name of a cache".to_owned()));
                    continue;
                };
                if let Some(extra) = words.get(3) {
                    diags.push(alert(format!("unexpected argument '{extra}'")));
                } else if !caches.iter().any(|c| &c.name == name) {
                    diags.push(alert(format!(
                        "no cache named '{name}' (declare it in a 'cache' section)"
                    )));
                } else if declared.contains(&name.as_str()) {
                    diags.push(alert(format!("the cache '{name}' is already declared")));
                } else if compression_before {
                    diags.push(alert(
                        "must come before 'filter compression': a response is stored before it \
                         is compressed"
                            .to_owned(),
                    ));
                }
                declared.push(name);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::preprocess::Line;
    use crate::sections::group_sections;

    fn parse(text: &str) -> (Vec<CacheConf>, Vec<String>) {
        let file: std::sync::Arc<str> = "t.cfg".into();
        let lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| Line {
                span: crate::diag::Span::new(&file, i as u32 + 1),
                words: l.split_whitespace().map(str::to_owned).collect(),
            })
            .collect();
        let mut diags = Diagnostics::new();
        let sections = group_sections(lines, &mut diags);
        let caches = parse_caches(&sections, &mut diags);
        check_cache_references(&sections, &caches, &mut diags);
        (caches, diags.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn sizes_default_from_the_total() {
        let (caches, diags) = parse("cache c\n total-max-size 4\n max-age 240\n");
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(
            caches,
            [CacheConf {
                name: "c".into(),
                total_size: 4 << 20,
                max_object_size: (4 << 20) / 256,
                max_age: 240,
                process_vary: false,
                max_secondary_entries: DEFAULT_MAX_SECONDARY_ENTRIES,
            }]
        );
    }

    #[test]
    fn refuses_what_haproxy_refuses() {
        let (caches, diags) = parse(
            "cache a\n max-age 10\ncache b\n total-max-size 1\n max-object-size 600000\n\
             cache c\n total-max-size 1\n process-vary on\n early-hints on\n\
             cache c\n total-max-size 2\n",
        );
        assert_eq!(caches.len(), 1, "only c is whole: {caches:?}");
        assert_eq!(
            diags,
            [
                "[ALERT] t.cfg:1: cache: size not specified for cache 'a' (total-max-size)",
                "[ALERT] t.cfg:3: cache: cache 'b': max-object-size is limited to half of \
                 total-max-size (524288)",
                "[ALERT] t.cfg:9: cache early-hints: not supported by Sluice",
                "[ALERT] t.cfg:10: cache: duplicate cache name 'c'",
            ]
        );
    }

    #[test]
    fn rules_must_name_a_cache() {
        let (_, diags) = parse(
            "backend b\n http-request cache-use c\n http-response cache-store nope\n\
             cache c\n total-max-size 1\n",
        );
        assert_eq!(
            diags,
            [
                "[ALERT] t.cfg:3: http-response cache-store: no cache named 'nope' (declare it in \
              a 'cache' section)"
            ]
        );
    }

    #[test]
    fn cache_filters_name_a_cache_once_and_come_before_compression() {
        let (_, diags) = parse(
            "backend ok\n filter cache c\n filter compression\n\
             backend bad\n filter cache\n filter cache nope\n filter cache c\n filter cache c\n\
             filter compression\n filter cache d\n filter cache d extra\n\
             cache c\n total-max-size 1\n cache d\n total-max-size 1\n",
        );
        assert_eq!(
            diags,
            [
                "[ALERT] t.cfg:5: filter cache: expects the name of a cache",
                "[ALERT] t.cfg:6: filter cache: no cache named 'nope' (declare it in a 'cache' \
                 section)",
                "[ALERT] t.cfg:8: filter cache: the cache 'c' is already declared",
                "[ALERT] t.cfg:10: filter cache: must come before 'filter compression': a \
                 response is stored before it is compressed",
                "[ALERT] t.cfg:11: filter cache: unexpected argument 'extra'",
            ]
        );
    }

    #[test]
    fn process_vary_takes_on_or_off_and_ignores_anything_else() {
        let (caches, diags) = parse(
            "cache c\n total-max-size 1\n process-vary on\n process-vary yes\n\
             max-secondary-entries 3\n",
        );
        assert_eq!(
            diags,
            [
                "[WARNING] t.cfg:4: process-vary: expects 'on' or 'off': the line is ignored, as \
              HAProxy 2.6 ignores it"
            ]
        );
        assert!(caches[0].process_vary, "still on");
        assert_eq!(caches[0].max_secondary_entries, 3);
    }
}
