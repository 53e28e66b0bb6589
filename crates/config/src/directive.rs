//! One configuration line seen as a keyword and its arguments, with typed argument readers.
//!
//! The keyword parsers of [`crate::global`] and [`crate::proxy`] read their arguments through
//! [`Directive`], so every bad value is reported the same way: at the line's span, naming the
//! keyword, saying what was expected. Each reader returns `None` after pushing its diagnostic,
//! which lets a parser skip the line and go on to the next one.

use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::preprocess::Line;
use crate::units;
use std::time::Duration;

/// A line being parsed: its span, its words and the keyword name used in diagnostics.
pub(crate) struct Directive<'a> {
    pub span: &'a Span,
    pub words: &'a [String],
    /// The keyword as diagnostics show it (`timeout client`, `option tcpka`, `bind`).
    pub keyword: String,
}

impl<'a> Directive<'a> {
    /// A directive whose keyword is the line's first `keyword_words` words.
    pub fn new(line: &'a Line, keyword_words: usize) -> Self {
        let n = keyword_words.min(line.words.len());
        Directive {
            span: &line.span,
            words: &line.words,
            keyword: line.words[..n].join(" "),
        }
    }

    /// An alert about this directive.
    pub fn alert(&self, message: impl Into<String>) -> Diagnostic {
        Diagnostic::alert(self.span, self.keyword.clone(), message)
    }

    /// A warning about this directive.
    pub fn warning(&self, message: impl Into<String>) -> Diagnostic {
        Diagnostic::warning(self.span, self.keyword.clone(), message)
    }

    /// The duration of a time value read on this line, after passing on its warning (text
    /// ignored after the unit).
    pub fn duration(&self, time: units::Time, diags: &mut Diagnostics) -> Duration {
        if let Some(warning) = time.warning {
            diags.push(self.warning(warning));
        }
        time.duration
    }

    /// The word at `index`, or an alert naming what was expected there.
    pub fn word(&self, index: usize, what: &str, diags: &mut Diagnostics) -> Option<&'a str> {
        match self.words.get(index) {
            Some(word) => Some(word.as_str()),
            None => {
                diags.push(self.alert(format!("expects {what}")));
                None
            }
        }
    }

    /// Reports words after `count` as unexpected; true if there were none.
    pub fn no_more_than(&self, count: usize, diags: &mut Diagnostics) -> bool {
        match self.words.get(count) {
            None => true,
            Some(extra) => {
                diags.push(self.alert(format!("unexpected argument '{extra}'")));
                false
            }
        }
    }

    /// The word at `index` as an integer within `min..=max`.
    pub fn integer(
        &self,
        index: usize,
        what: &str,
        min: u64,
        max: u64,
        diags: &mut Diagnostics,
    ) -> Option<u64> {
        let word = self.word(index, what, diags)?;
        match word.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                diags.push(self.alert(format!(
                    "expects {what} between {min} and {max}, not '{word}'"
                )));
                None
            }
        }
    }

    /// The word at `index` as a timeout (milliseconds by default, configuration.txt §2.5).
    pub fn timeout(&self, index: usize, diags: &mut Diagnostics) -> Option<Duration> {
        let word = self.word(index, "a time value", diags)?;
        match units::parse_timeout(word) {
            Ok(time) => Some(self.duration(time, diags)),
            Err(err) => {
                diags.push(self.alert(format!("invalid time value '{word}': {err}")));
                None
            }
        }
    }
}
