//! Finds and reads the configuration files named by `-f`, the first stage of the reader.
//!
//! `-f` takes files and directories and may be repeated (management.txt §3): a directory
//! contributes the `*.cfg` files directly inside it, in lexical order of their names, and the
//! order of `-f` options is kept. Every file that cannot be read becomes an alert; the others are
//! still returned so the later stages can report their own problems too. Read [`read_sources`].

use crate::diag::{Diagnostic, Diagnostics, Severity};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The text of one configuration file and the name diagnostics will show for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The path as given, or as found in a `-f` directory.
    pub name: Arc<str>,
    /// The file's contents.
    pub text: String,
}

/// Reads every file named in `paths`, expanding directories, in command-line order.
///
/// Unreadable paths and non-UTF-8 files are reported as alerts in `diags`.
pub fn read_sources(paths: &[PathBuf], diags: &mut Diagnostics) -> Vec<Source> {
    let mut sources = Vec::new();
    for path in paths {
        if path.is_dir() {
            match cfg_files_in(path) {
                Ok(files) => {
                    for file in files {
                        read_one(&file, &mut sources, diags);
                    }
                }
                Err(err) => diags.push(file_error(path, &err.to_string())),
            }
        } else {
            read_one(path, &mut sources, diags);
        }
    }
    sources
}

/// The `*.cfg` regular files directly inside `dir`, sorted by name.
fn cfg_files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_file() && path.extension().is_some_and(|ext| ext == "cfg") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn read_one(path: &Path, sources: &mut Vec<Source>, diags: &mut Diagnostics) {
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => sources.push(Source {
                name: Arc::from(path.display().to_string()),
                text,
            }),
            Err(_) => diags.push(file_error(path, "file is not valid UTF-8 text")),
        },
        Err(err) => diags.push(file_error(path, &err.to_string())),
    }
}

fn file_error(path: &Path, reason: &str) -> Diagnostic {
    Diagnostic {
        severity: Severity::Alert,
        span: None,
        keyword: None,
        message: format!(
            "could not open configuration file '{}': {reason}",
            path.display()
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sluice-reader-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn directory_gives_cfg_files_in_lexical_order() {
        let dir = scratch_dir("order");
        std::fs::write(dir.join("b.cfg"), "backend b\n").unwrap();
        std::fs::write(dir.join("a.cfg"), "global\n").unwrap();
        std::fs::write(dir.join("notes.txt"), "ignored").unwrap();
        let mut diags = Vec::new();
        let sources = read_sources(std::slice::from_ref(&dir), &mut diags);
        assert!(diags.is_empty());
        let texts: Vec<&str> = sources.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(texts, ["global\n", "backend b\n"]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn missing_file_is_an_alert_and_others_still_read() {
        let dir = scratch_dir("missing");
        let good = dir.join("good.cfg");
        std::fs::write(&good, "global\n").unwrap();
        let mut diags = Vec::new();
        let sources = read_sources(&[dir.join("nope.cfg"), good], &mut diags);
        assert_eq!(sources.len(), 1);
        assert_eq!(diags.len(), 1);
        assert!(diags[0].is_fatal());
        assert!(
            diags[0].message.contains("nope.cfg"),
            "{}",
            diags[0].message
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
