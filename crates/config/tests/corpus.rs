//! The configuration corpus: every file of `tests/cfg/ok/` must be accepted and every file of
//! `tests/cfg/err/` rejected, each with exactly the diagnostics listed in the `.expect` file
//! beside it (one per line, file names shown relative to the corpus directory).
//!
//! The environment is fixed (`SLUICE_TEST_SET=yes`, everything else unset) so `.if` blocks are
//! decided the same way on every machine.
#![allow(clippy::unwrap_used)]

use sluice_config::cond::CondContext;
use sluice_config::plan;
use sluice_config::reader::read_sources;
use std::path::{Path, PathBuf};

fn corpus_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/cfg")
        .join(kind)
}

fn lookup(name: &str) -> Option<String> {
    (name == "SLUICE_TEST_SET").then(|| "yes".to_owned())
}

/// The diagnostics of one file, with its directory stripped from the file names.
fn diagnostics_of(path: &Path) -> (bool, Vec<String>) {
    let mut diags = Vec::new();
    let sources = read_sources(&[path.to_path_buf()], &mut diags);
    let ctx = CondContext {
        lookup: &lookup,
        features: &["THREAD"],
        enabled: &[],
        version: "2.6",
    };
    let checked = plan::check(&sources, &ctx);
    diags.extend(checked.diagnostics);
    let dir = format!("{}/", path.parent().unwrap().display());
    let lines = diags
        .iter()
        .map(|d| d.to_string().replace(&dir, ""))
        .collect();
    (checked.plan.is_some(), lines)
}

fn cfg_files(kind: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir(kind))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cfg"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no configuration in tests/cfg/{kind}");
    files
}

fn expected(path: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(path.with_extension("expect")).ok()?;
    Some(text.lines().map(str::to_owned).collect())
}

#[test]
fn good_configurations_are_accepted() {
    let mut failures = Vec::new();
    for path in cfg_files("ok") {
        let (valid, lines) = diagnostics_of(&path);
        let want = expected(&path).unwrap_or_default();
        if !valid || lines != want {
            failures.push(format!(
                "{}:\n  got:  {lines:#?}\n  want: {want:#?}",
                path.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn broken_configurations_are_rejected_with_their_diagnostics() {
    let mut failures = Vec::new();
    for path in cfg_files("err") {
        let (valid, lines) = diagnostics_of(&path);
        let Some(want) = expected(&path) else {
            failures.push(format!(
                "{}: missing .expect file; got {lines:#?}",
                path.display()
            ));
            continue;
        };
        if valid || lines != want {
            failures.push(format!(
                "{} (valid: {valid}):\n  got:  {lines:#?}\n  want: {want:#?}",
                path.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
