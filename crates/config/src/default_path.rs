//! `default-path` (configuration.txt §3.1): where the file names the configuration gives
//! without a leading `/` (error files, map and pattern files, `return file`...) are read
//! from while it is parsed.
//!
//! As HAProxy does, the process changes its working directory while it handles the lines a
//! `default-path` line governs, and comes back to the directory it started in once the
//! configuration is read ([`RelativeFiles`] is a guard): names used after parsing (`stats
//! socket`, unix `bind` paths, `server-state-file`) stay relative to the starting directory.
//! A `default-path` line governs the lines after it, in configuration order, up to the next
//! one; `config` and `parent` follow each file. Without any `default-path` line nothing
//! changes and no system call is made.

use crate::diag::{Diagnostics, Span};
use crate::directive::Directive;
use crate::reader::Source;
use crate::sections::{Section, SectionKind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a `default-path` line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Policy {
    /// `current`: the directory the process started in (the default).
    Current,
    /// `config`: the directory of the configuration file being read.
    Config,
    /// `parent`: the parent of that directory.
    Parent,
    /// `origin <path>`: that directory.
    Origin(PathBuf),
}

/// The working directory while the configuration is parsed; back to where it was when dropped.
pub struct RelativeFiles {
    /// The directory the process started in.
    start: Option<PathBuf>,
    /// The configuration files, in reading order.
    files: Vec<Arc<str>>,
    /// Each `default-path` line: its file's place in `files`, its line, and its policy.
    changes: Vec<(usize, u32, Policy)>,
    /// The directory the process is in now, if it moved.
    current: Option<PathBuf>,
}

impl RelativeFiles {
    /// Reads the `default-path` lines of the global sections; a bad one is an alert.
    pub fn scan(sections: &[Section], sources: &[Source], diags: &mut Diagnostics) -> Self {
        let files: Vec<Arc<str>> = sources.iter().map(|s| Arc::clone(&s.name)).collect();
        let mut changes = Vec::new();
        let lines = sections
            .iter()
            .filter(|s| s.kind == SectionKind::Global)
            .flat_map(|s| &s.lines)
            .filter(|l| l.words.first().is_some_and(|w| w == "default-path"));
        for line in lines {
            let d = Directive::new(line, 1);
            let policy = match line.words.get(1).map(String::as_str) {
                Some("current") => Some(Policy::Current),
                Some("config") => Some(Policy::Config),
                Some("parent") => Some(Policy::Parent),
                Some("origin") => match line.words.get(2) {
                    Some(path) if Path::new(path).is_dir() => {
                        Some(Policy::Origin(PathBuf::from(path)))
                    }
                    Some(path) => {
                        diags.push(d.alert(format!("'{path}' is not a directory")));
                        None
                    }
                    None => {
                        diags.push(d.alert("'origin' expects a directory"));
                        None
                    }
                },
                _ => {
                    diags.push(d.alert(
                        "expects 'current', 'config', 'parent' or 'origin' followed by a path",
                    ));
                    None
                }
            };
            let takes = if matches!(policy, Some(Policy::Origin(_))) {
                3
            } else {
                2
            };
            if let Some(policy) = policy
                && d.no_more_than(takes, diags)
            {
                let file = files.iter().position(|f| *f == line.span.file);
                changes.push((file.unwrap_or(0), line.span.line, policy));
            }
        }
        // Configuration order: by file, then by line.
        changes.sort_by_key(|(file, line, _)| (*file, *line));
        let start = if changes.is_empty() {
            None
        } else {
            std::env::current_dir().ok()
        };
        RelativeFiles {
            start,
            files,
            changes,
            current: None,
        }
    }

    /// Moves to the directory relative names resolve from at the line `span` (after the
    /// `default-path` line before it). Should the move fail, the names resolve from where
    /// the process is, and the file that is not found says so.
    pub fn enter(&mut self, span: &Span) {
        let Some(start) = &self.start else {
            return;
        };
        let file = self.files.iter().position(|f| *f == span.file).unwrap_or(0);
        let policy = self
            .changes
            .iter()
            .rev()
            .find(|(f, l, _)| (*f, *l) < (file, span.line))
            .map_or(&Policy::Current, |(_, _, p)| p);
        let config_dir = || match span.file.rfind('/') {
            Some(0) => PathBuf::from("/"),
            Some(slash) => start.join(&span.file[..slash]),
            None => start.clone(),
        };
        let dir = match policy {
            Policy::Current => start.clone(),
            Policy::Config => config_dir(),
            Policy::Parent => config_dir().join(".."),
            Policy::Origin(path) => start.join(path),
        };
        if self.current.as_ref() != Some(&dir) && std::env::set_current_dir(&dir).is_ok() {
            self.current = Some(dir);
        }
    }
}

impl Drop for RelativeFiles {
    fn drop(&mut self) {
        if let (Some(start), Some(_)) = (&self.start, &self.current) {
            let _ = std::env::set_current_dir(start);
        }
    }
}
