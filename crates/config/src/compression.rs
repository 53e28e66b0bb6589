//! `compression algo`, `compression type` and `compression offload` (configuration.txt §4.2
//! "compression"), and `filter compression`: which responses a proxy compresses, and how.
//!
//! As in HAProxy, each `algo` and `type` line adds to the section's lists, those of a
//! `defaults` section included (a proxy inheriting `algo identity` and saying `algo gzip`
//! offers both). `offload` has no meaning in a `defaults` section: it is ignored there with a
//! warning, as HAProxy does. The forms of later HAProxy versions (`algo-req`, `type-req`,
//! `minsize-*`, `direction`) are not supported.

use crate::diag::Diagnostics;
use crate::directive::Directive;
use crate::preprocess::Line;
use crate::sections::SectionKind;

/// A compression algorithm of `compression algo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    /// Passes the data unchanged (the response is still re-chunked).
    Identity,
    /// gzip (RFC 1952).
    Gzip,
    /// zlib-wrapped deflate (RFC 1950), asked for as `deflate`.
    Deflate,
    /// Bare deflate (RFC 1951), also asked for as `deflate`, which browsers read better.
    RawDeflate,
}

impl Algo {
    fn parse(word: &str) -> Option<Algo> {
        [Algo::Identity, Algo::Gzip, Algo::Deflate, Algo::RawDeflate]
            .into_iter()
            .find(|algo| algo.name() == word)
    }

    /// Its name in `compression algo`, as `res.comp_algo` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Algo::Identity => "identity",
            Algo::Gzip => "gzip",
            Algo::Deflate => "deflate",
            Algo::RawDeflate => "raw-deflate",
        }
    }

    /// The `Accept-Encoding` coding that asks for it.
    pub fn token(self) -> &'static str {
        match self {
            Algo::Identity => "identity",
            Algo::Gzip => "gzip",
            Algo::Deflate | Algo::RawDeflate => "deflate",
        }
    }

    /// The `Content-Encoding` of what it produces; none for identity.
    pub fn content_encoding(self) -> Option<&'static str> {
        match self {
            Algo::Identity => None,
            other => Some(other.token()),
        }
    }
}

/// A section's compression settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompressionConf {
    /// `compression algo`, in the order given.
    pub algos: Vec<Algo>,
    /// `compression type`: the media types compressed (all when empty).
    pub types: Vec<String>,
    /// `compression offload`: `Accept-Encoding` is removed from requests the proxy will
    /// compress the answer of, so the server sends it uncompressed.
    pub offload: bool,
}

/// Parses a `compression` or `filter` line into `conf`; false if the line is neither.
pub(crate) fn parse_line(
    conf: &mut CompressionConf,
    kind: SectionKind,
    line: &Line,
    diags: &mut Diagnostics,
) -> bool {
    match line.words.first().map(String::as_str) {
        Some("compression") => {}
        Some("filter") => {
            let d = Directive::new(line, 2);
            // Compression and the cache are the filters Sluice has, always in that order
            // (the response stored before it is compressed, which is also the only order
            // HAProxy allows): declaring them changes nothing.
            match line.words.get(1).map(String::as_str) {
                // configuration.txt: `filter` has no place in a `defaults` section.
                Some("compression" | "cache") if kind == SectionKind::Defaults => {
                    diags.push(d.alert("not allowed in a 'defaults' section"));
                }
                Some("compression") => {
                    d.no_more_than(2, diags);
                }
                // Its cache and its place are checked with the `cache` sections
                // (`cache::check_cache_references`).
                Some("cache") => {}
                Some(other) => diags.push(crate::diag::Diagnostic::not_supported(
                    &line.span,
                    format!("filter {other}"),
                )),
                None => diags.push(d.alert("expects a filter name")),
            }
            return true;
        }
        _ => return false,
    }
    let d = Directive::new(line, 2);
    let args = line.words.get(2..).unwrap_or(&[]);
    match line.words.get(1).map(String::as_str) {
        Some("algo") => {
            if args.is_empty() {
                diags.push(d.alert("expects at least one algorithm"));
            }
            for word in args {
                match Algo::parse(word) {
                    Some(algo) => conf.algos.push(algo),
                    None => diags.push(d.alert(format!(
                        "unknown algorithm '{word}' (expects identity, gzip, deflate or raw-deflate)"
                    ))),
                }
            }
        }
        Some("type") => {
            if args.is_empty() {
                diags.push(d.alert("expects at least one media type"));
            }
            conf.types.extend(args.iter().cloned());
        }
        Some("offload") => {
            if d.no_more_than(2, diags) {
                if kind == SectionKind::Defaults {
                    diags.push(d.warning("ignored in a 'defaults' section, as HAProxy does"));
                } else {
                    conf.offload = true;
                }
            }
        }
        Some(other) => diags.push(crate::diag::Diagnostic::not_supported(
            &line.span,
            format!("compression {other}"),
        )),
        None => diags.push(d.alert("expects 'algo', 'type' or 'offload'")),
    }
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::diag::Span;

    fn parse(kind: SectionKind, lines: &[&str]) -> (CompressionConf, Diagnostics) {
        let mut conf = CompressionConf::default();
        let mut diags = Diagnostics::default();
        let file: std::sync::Arc<str> = "t.cfg".into();
        for (n, text) in (1..).zip(lines) {
            let line = Line {
                words: text.split_whitespace().map(str::to_owned).collect(),
                span: Span::new(&file, n),
            };
            assert!(parse_line(&mut conf, kind, &line, &mut diags), "{text}");
        }
        (conf, diags)
    }

    #[test]
    fn algorithms_and_types_add_up_over_lines() {
        let (conf, diags) = parse(
            SectionKind::Backend,
            &[
                "compression algo gzip",
                "compression algo raw-deflate identity",
                "compression type text/html text/plain",
                "compression offload",
                "filter compression",
            ],
        );
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(
            conf.algos,
            [Algo::Gzip, Algo::RawDeflate, Algo::Identity],
            "in order"
        );
        assert_eq!(conf.types, ["text/html", "text/plain"]);
        assert!(conf.offload);
        assert_eq!(Algo::RawDeflate.token(), "deflate");
        assert_eq!(Algo::Identity.content_encoding(), None);
    }

    #[test]
    fn bad_and_later_forms_are_refused_and_offload_is_ignored_in_defaults() {
        let (conf, diags) = parse(
            SectionKind::Defaults,
            &[
                "compression algo brotli",
                "compression minsize-res 100",
                "compression offload",
                "filter trace",
                "filter compression",
            ],
        );
        assert!(!conf.offload);
        let text = format!("{diags:?}");
        assert!(text.contains("unknown algorithm 'brotli'"), "{text}");
        assert!(text.contains("compression minsize-res"), "{text}");
        assert!(text.contains("ignored in a 'defaults' section"), "{text}");
        assert!(text.contains("filter trace"), "{text}");
        assert!(
            text.contains("not allowed in a 'defaults' section"),
            "{text}"
        );
    }
}
