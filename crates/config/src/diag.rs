//! Diagnostics: every problem the configuration reader finds, with where it was found.
//!
//! The reader never stops at the first problem: each stage pushes [`Diagnostic`]s into a
//! shared list and goes on, so `sluice -c` reports everything at once. A diagnostic of
//! [`Severity::Alert`] makes the configuration invalid; the others are informative.

use std::fmt;
use std::sync::Arc;

/// A place in a configuration file: the file's name as given on the command line and a
/// 1-based line number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    /// File name as it was given (or found in a `-f` directory).
    pub file: Arc<str>,
    /// Line number, starting at 1.
    pub line: u32,
}

impl Span {
    /// A span for `line` of `file`.
    pub fn new(file: &Arc<str>, line: u32) -> Self {
        Span {
            file: Arc::clone(file),
            line,
        }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// How serious a diagnostic is, named after HAProxy's message levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Only shown in diagnostic mode (`.diag`).
    Diag,
    /// Informative (`.notice`).
    Notice,
    /// Suspicious but valid (`.warning`, missing timeouts, ...).
    Warning,
    /// Fatal: the configuration is rejected (`.alert`, any error).
    Alert,
}

impl Severity {
    /// The tag printed before the message, as HAProxy prints it.
    pub fn tag(self) -> &'static str {
        match self {
            Severity::Diag => "[DIAG]",
            Severity::Notice => "[NOTICE]",
            Severity::Warning => "[WARNING]",
            Severity::Alert => "[ALERT]",
        }
    }
}

/// One problem or message found while reading the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// How serious it is.
    pub severity: Severity,
    /// Where it was found; `None` for problems of the whole configuration (no file given...).
    pub span: Option<Span>,
    /// The keyword the problem is about (`bind`, `timeout client`, ...), if any.
    pub keyword: Option<String>,
    /// What is wrong, in a sentence without a final period.
    pub message: String,
}

impl Diagnostic {
    /// A fatal diagnostic at `span` about `keyword`.
    pub fn alert(span: &Span, keyword: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Alert,
            span: Some(span.clone()),
            keyword: Some(keyword.into()),
            message: message.into(),
        }
    }

    /// A warning at `span` about `keyword`.
    pub fn warning(span: &Span, keyword: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            span: Some(span.clone()),
            keyword: Some(keyword.into()),
            message: message.into(),
        }
    }

    /// The standard diagnostic for a keyword Sluice recognises but does not implement.
    pub fn not_supported(span: &Span, keyword: impl Into<String>) -> Self {
        Diagnostic::alert(span, keyword, "not supported by Sluice")
    }

    /// True if this diagnostic makes the configuration invalid.
    pub fn is_fatal(&self) -> bool {
        self.severity == Severity::Alert
    }
}

impl fmt::Display for Diagnostic {
    /// `[ALERT] file:line: keyword: message`, leaving out the parts that are absent.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.severity.tag())?;
        if let Some(span) = &self.span {
            write!(f, " {span}:")?;
        }
        if let Some(keyword) = &self.keyword {
            write!(f, " {keyword}:")?;
        }
        write!(f, " {}", self.message)
    }
}

/// The list every stage appends to.
pub type Diagnostics = Vec<Diagnostic>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_file_line_keyword_and_message() {
        let span = Span::new(&Arc::from("a.cfg"), 12);
        let d = Diagnostic::not_supported(&span, "peers");
        assert_eq!(
            d.to_string(),
            "[ALERT] a.cfg:12: peers: not supported by Sluice"
        );
        assert!(d.is_fatal());
    }

    #[test]
    fn display_without_span_or_keyword() {
        let d = Diagnostic {
            severity: Severity::Warning,
            span: None,
            keyword: None,
            message: "no configuration file".into(),
        };
        assert_eq!(d.to_string(), "[WARNING] no configuration file");
        assert!(!d.is_fatal());
    }
}
