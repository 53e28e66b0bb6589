//! `ring` sections (configuration.txt §3.10): named in-memory buffers of events that `log
//! ring@NAME` lines write to and the CLI's `show events NAME` reads.
//!
//! A ring keeps its newest events within `size` bytes (16 KiB at least, as in HAProxy), each
//! cut to `maxlen` bytes (at most the size) and framed in the ring's `format` (raw by default). `description` is shown by `show events`; `timeout
//! connect|server` are accepted because they only matter for `server` lines, which forward a
//! ring to TCP syslog servers and are not supported by Sluice (nor is `backing-file`). Rings
//! are read before the proxies, so a `log ring@NAME` line can name a ring declared later; read
//! [`parse_rings`] first.

use crate::diag::{Diagnostic, Diagnostics};
use crate::directive::Directive;
use crate::logging::{self, SyslogFormat};
use crate::sections::{Section, SectionKind};
use crate::units;

/// HAProxy's default ring size (`size`): one buffer.
pub const DEFAULT_RING_SIZE: usize = 16384;

/// One `ring` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingConf {
    /// The ring's name (`ring@NAME`, `show events NAME`).
    pub name: String,
    /// `description`; the name by default.
    pub description: String,
    /// `format`: the header of each stored event.
    pub format: SyslogFormat,
    /// `maxlen`: the longest event stored, header included.
    pub maxlen: usize,
    /// `size`: bytes of events kept; older events make room for newer ones.
    pub size: usize,
}

/// Reads every `ring` section; two rings of one name are an error.
pub fn parse_rings(sections: &[Section], diags: &mut Diagnostics) -> Vec<RingConf> {
    let mut rings: Vec<RingConf> = Vec::new();
    for section in sections.iter().filter(|s| s.kind == SectionKind::Ring) {
        let Some(name) = section.name.clone() else {
            continue;
        };
        if rings.iter().any(|r| r.name == name) {
            diags.push(Diagnostic::alert(
                &section.span,
                "ring",
                format!("ring '{name}' is declared twice"),
            ));
            continue;
        }
        let mut ring = RingConf {
            description: name.clone(),
            name,
            format: SyslogFormat::Raw,
            maxlen: DEFAULT_RING_SIZE,
            size: DEFAULT_RING_SIZE,
        };
        let mut maxlen_set = false;
        for line in &section.lines {
            let d = Directive::new(line, 1);
            match line.words.first().map_or("", String::as_str) {
                "description" => {
                    if line.words.len() < 2 {
                        diags.push(d.alert("expects a text"));
                    } else {
                        ring.description = line.words[1..].join(" ");
                    }
                }
                "format" => {
                    if let Some(word) = d.word(1, "a format", diags)
                        && d.no_more_than(2, diags)
                    {
                        match logging::parse_syslog_format(word) {
                            Ok(format) => ring.format = format,
                            Err(message) => diags.push(d.alert(message)),
                        }
                    }
                }
                "maxlen" => {
                    if let Some(n) = d.integer(1, "a length in bytes", 1, 1 << 20, diags)
                        && d.no_more_than(2, diags)
                    {
                        ring.maxlen = n as usize;
                        maxlen_set = true;
                    }
                }
                "size" => {
                    let Some(word) = d.word(1, "a size in bytes", diags) else {
                        continue;
                    };
                    match units::parse_size(word) {
                        // As in HAProxy, a ring never shrinks below its default size.
                        Ok(n) if (n as usize) < DEFAULT_RING_SIZE => diags.push(d.warning(format!(
                            "ignoring size {n}, smaller than the ring's current size {DEFAULT_RING_SIZE}"
                        ))),
                        Ok(n) if n <= 1 << 30 => {
                            if d.no_more_than(2, diags) {
                                ring.size = n as usize;
                            }
                        }
                        _ => diags.push(d.alert(format!(
                            "expects a size in bytes up to 1 GiB, not '{word}'"
                        ))),
                    }
                }
                "timeout" => {
                    let d = Directive::new(line, 2);
                    match line.words.get(1).map(String::as_str) {
                        Some("connect" | "server") => {
                            if d.timeout(2, diags).is_some() {
                                d.no_more_than(3, diags);
                            }
                        }
                        Some(_) => {
                            diags.push(Diagnostic::not_supported(&line.span, d.keyword.clone()))
                        }
                        None => diags.push(d.alert("expects 'connect' or 'server'")),
                    }
                }
                "server" => diags.push(Diagnostic::alert(
                    &line.span,
                    "server",
                    "forwarding a ring to servers is not supported by Sluice",
                )),
                other => diags.push(Diagnostic::not_supported(
                    &line.span,
                    format!("ring {other}"),
                )),
            }
        }
        if maxlen_set && ring.maxlen > ring.size {
            diags.push(Diagnostic::warning(
                &section.span,
                "ring",
                format!(
                    "ring '{}': maxlen {} exceeds the ring's size, reduced to {}",
                    ring.name, ring.maxlen, ring.size
                ),
            ));
        }
        if !maxlen_set || ring.maxlen > ring.size {
            ring.maxlen = ring.size;
        }
        rings.push(ring);
    }
    rings
}

/// Reports every `log ring@NAME` line (in `global` and proxies) naming no ring.
pub fn check_ring_targets(sections: &[Section], rings: &[RingConf], diags: &mut Diagnostics) {
    let proxy_or_global = sections.iter().filter(|s| {
        matches!(
            s.kind,
            SectionKind::Global
                | SectionKind::Defaults
                | SectionKind::Frontend
                | SectionKind::Backend
                | SectionKind::Listen
        )
    });
    for line in proxy_or_global.flat_map(|s| &s.lines) {
        if line.words.first().map(String::as_str) != Some("log") {
            continue;
        }
        let Some(name) = line.words.get(1).and_then(|w| w.strip_prefix("ring@")) else {
            continue;
        };
        if !rings.iter().any(|r| r.name == name) {
            diags.push(Diagnostic::alert(
                &line.span,
                "log",
                format!("no ring named '{name}' (declare it in a 'ring' section)"),
            ));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::preprocess::Line;
    use crate::sections::group_sections;

    fn lines(text: &str) -> Vec<Line> {
        let file: std::sync::Arc<str> = "t.cfg".into();
        text.lines()
            .enumerate()
            .map(|(i, l)| Line {
                span: crate::diag::Span::new(&file, i as u32 + 1),
                words: l.split_whitespace().map(str::to_owned).collect(),
            })
            .collect()
    }

    fn parse(text: &str) -> (Vec<RingConf>, Vec<String>) {
        let mut diags = Diagnostics::new();
        let sections = group_sections(lines(text), &mut diags);
        let rings = parse_rings(&sections, &mut diags);
        check_ring_targets(&sections, &rings, &mut diags);
        (rings, diags.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn ring_settings_and_defaults() {
        let (rings, diags) = parse(
            "ring a\n description my events\n format rfc3164\n maxlen 1200\n size 32k\n timeout connect 5s\n timeout server 10s\nring b\nglobal\n log ring@a local0\n",
        );
        assert_eq!(diags, Vec::<String>::new());
        assert_eq!(
            rings[0],
            RingConf {
                name: "a".into(),
                description: "my events".into(),
                format: SyslogFormat::Rfc3164,
                maxlen: 1200,
                size: 32768,
            }
        );
        assert_eq!(
            (rings[1].description.as_str(), rings[1].format),
            ("b", SyslogFormat::Raw)
        );
        assert_eq!((rings[1].maxlen, rings[1].size), (16384, 16384));
    }

    #[test]
    fn ring_errors_are_named() {
        let (_, diags) = parse(
            "ring a\n server s 127.0.0.1:514\n backing-file /tmp/x\n maxlen 50000\n size 4096\nring a\nglobal\n log ring@nope local0\n",
        );
        assert_eq!(
            diags,
            [
                "[ALERT] t.cfg:2: server: forwarding a ring to servers is not supported by Sluice",
                "[ALERT] t.cfg:3: ring backing-file: not supported by Sluice",
                "[WARNING] t.cfg:5: size: ignoring size 4096, smaller than the ring's current size 16384",
                "[WARNING] t.cfg:1: ring: ring 'a': maxlen 50000 exceeds the ring's size, reduced to 16384",
                "[ALERT] t.cfg:6: ring: ring 'a' is declared twice",
                "[ALERT] t.cfg:8: log: no ring named 'nope' (declare it in a 'ring' section)",
            ]
        );
    }
}
