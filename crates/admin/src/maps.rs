//! Runtime maps and ACLs (management.txt §9.3 `show map`, `add map`, `del acl`...).
//!
//! The commands work on the configuration's pattern references
//! ([`sluice_sample::PatRef`]): one per pattern or map file, named by its path or `#<id>`,
//! and one per `acl` line for the values written on it, named by `#<id>`. An edit changes
//! every ACL and converter using the reference before the command answers. Listings,
//! answers and errors use HAProxy 2.6's words and layout, which scripts parse. Versioned
//! updates (`@<ver>`, `prepare`/`commit`) are refused as not supported.

use crate::commands::{CliState, Flow};
use sluice_runtime::process::Process;
use sluice_sample::PatRef;
use std::fmt::Write;
use std::sync::Arc;

/// Which kind of reference a command names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Map,
    Acl,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Map => "map",
            Kind::Acl => "ACL",
        }
    }
}

/// The reference `name` designates, or HAProxy's error written to `out`.
fn find(process: &Process, kind: Kind, name: &str, out: &mut String) -> Option<Arc<PatRef>> {
    let found = process.maps.find_ref(name, kind == Kind::Map);
    if found.is_none() {
        let _ = writeln!(
            out,
            "Unknown {} identifier. Please use #<id> or <file>.",
            kind.word()
        );
    }
    found
}

/// Refuses `@<ver>` arguments, which Sluice does not implement.
fn versioned(args: &[String], out: &mut String) -> bool {
    let v = args.first().is_some_and(|a| a.starts_with('@'));
    if v {
        out.push_str("Versioned map and ACL updates (@<ver>) are not supported by Sluice.\n");
    }
    v
}

fn show(process: &Process, kind: Kind, args: &[String], out: &mut String) {
    if versioned(args, out) {
        return;
    }
    let Some(name) = args.first() else {
        out.push_str("# id (file) description\n");
        for r in process.maps.refs() {
            let listed = match kind {
                Kind::Map => r.is_map(),
                Kind::Acl => r.is_acl(),
            };
            if listed {
                let _ = writeln!(
                    out,
                    "{} ({}) {}. curr_ver=0 next_ver=0 entry_cnt={}",
                    r.id(),
                    r.file(),
                    r.description(),
                    r.entry_count()
                );
            }
        }
        return;
    };
    let Some(r) = find(process, kind, name, out) else {
        return;
    };
    // A file shared with a map (or read with `-M`) has two columns, shown as key and value;
    // otherwise each line is one pattern, shown as written.
    let two_columns = r.is_map();
    for e in r.entries() {
        let _ = match e.value() {
            Some(v) if two_columns => writeln!(out, "0x{:x} {} {v}", e.id, e.key()),
            _ => writeln!(out, "0x{:x} {}", e.id, e.text()),
        };
    }
}

/// `show map [<map>]`: the maps, or one map's entries.
pub fn show_map(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    show(process, Kind::Map, args, out);
    Flow::Continue
}

/// `show acl [<acl>]`: the ACL references, or one reference's patterns.
pub fn show_acl(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    show(process, Kind::Acl, args, out);
    Flow::Continue
}

fn get(process: &Process, kind: Kind, args: &[String], out: &mut String) {
    let (Some(name), Some(value)) = (args.first(), args.get(1)) else {
        let _ = writeln!(out, "Missing {} identifier and/or key.", kind.word());
        return;
    };
    let Some(r) = find(process, kind, name, out) else {
        return;
    };
    for probe in r.probe(value) {
        let case = if probe.icase {
            "insensitive"
        } else {
            "sensitive"
        };
        let _ = write!(out, "type={}, case={case}, ", probe.method);
        let hit = if kind == Kind::Map { "found" } else { "match" };
        let Some((key, value)) = probe.found else {
            let _ = writeln!(out, "{hit}=no");
            continue;
        };
        let idx = if probe.tree { "tree" } else { "list" };
        let _ = write!(out, "{hit}=yes, idx={idx}, ");
        let _ = match (kind, value) {
            (Kind::Map, Some((value, ty))) => {
                writeln!(out, "key=\"{key}\", value=\"{value}\", type=\"{ty}\"")
            }
            _ => writeln!(out, "pattern=\"{key}\""),
        };
    }
}

/// `get map <map> <value>`: what each converter using the map finds for `value`.
pub fn get_map(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    get(process, Kind::Map, args, out);
    Flow::Continue
}

/// `get acl <acl> <value>`: which pattern of each ACL using the reference matches `value`.
pub fn get_acl(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    get(process, Kind::Acl, args, out);
    Flow::Continue
}

/// Parses a payload of map lines (`key value` each, blank lines skipped).
pub fn payload_entries(payload: &str) -> Vec<(String, Option<String>)> {
    payload
        .lines()
        .map(|line| line.trim_matches([' ', '\t', '\r']))
        .filter(|line| !line.is_empty())
        .map(|line| match line.split_once([' ', '\t']) {
            Some((k, v)) => (k.to_string(), Some(v.trim_matches([' ', '\t']).to_string())),
            None => (line.to_string(), Some(String::new())),
        })
        .collect()
}

fn report(result: Result<(), String>, out: &mut String) {
    if let Err(e) = result {
        out.push_str(&e);
        if !e.ends_with('.') {
            out.push('.');
        }
        out.push('\n');
    }
}

/// `add map <map> <key> <value>`, or `add map <map>` with a payload of `key value` lines.
pub fn add_map(process: &Process, args: &[String], state: &mut CliState, out: &mut String) -> Flow {
    if versioned(args, out) {
        return Flow::Continue;
    }
    let entries = match (args, state.payload.as_deref()) {
        ([_, key, value], None) => vec![(key.clone(), Some(value.clone()))],
        ([_], Some(payload)) => payload_entries(payload),
        _ => {
            out.push_str(
                "'add map' expects three parameters (map identifier, key and value) or one parameter (map identifier) and a payload\n",
            );
            return Flow::Continue;
        }
    };
    let Some(r) = find(process, Kind::Map, &args[0], out) else {
        return Flow::Continue;
    };
    report(r.add(&entries).map_err(|_| value_error(&entries)), out);
    Flow::Continue
}

/// HAProxy names the value it could not read, whichever part was wrong.
fn value_error(entries: &[(String, Option<String>)]) -> String {
    let value = entries
        .first()
        .and_then(|(_, v)| v.clone())
        .unwrap_or_default();
    format!("unable to parse '{value}'.")
}

/// `add acl <acl> <pattern>`.
pub fn add_acl(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    if versioned(args, out) {
        return Flow::Continue;
    }
    let [name, pattern] = args else {
        out.push_str("'add acl' expects two parameters: ACL identifier and pattern.\n");
        return Flow::Continue;
    };
    let Some(r) = find(process, Kind::Acl, name, out) else {
        return Flow::Continue;
    };
    // An entry of a file shared with a map needs a value: `add map` gives it one.
    if r.is_map() {
        out.push_str("This ACL is shared with a map: use 'add map' to add to it.\n");
        return Flow::Continue;
    }
    report(r.add(&[(pattern.clone(), None)]), out);
    Flow::Continue
}

fn del(process: &Process, kind: Kind, args: &[String], out: &mut String) {
    let [name, key] = args else {
        let _ = writeln!(
            out,
            "This command expects two parameters: {} identifier and key.",
            kind.word()
        );
        return;
    };
    let Some(r) = find(process, kind, name, out) else {
        return;
    };
    if !r.delete(key) {
        out.push_str("Key not found.\n");
    }
}

/// `del map <map> <key>|#<ref>`.
pub fn del_map(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    del(process, Kind::Map, args, out);
    Flow::Continue
}

/// `del acl <acl> <key>|#<ref>`.
pub fn del_acl(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    del(process, Kind::Acl, args, out);
    Flow::Continue
}

/// `set map <map> <key>|#<ref> <value>`.
pub fn set_map(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    let [name, key, value] = args else {
        out.push_str("'set map' expects three parameters: map identifier, key and value.\n");
        return Flow::Continue;
    };
    let Some(r) = find(process, Kind::Map, name, out) else {
        return Flow::Continue;
    };
    match r.set(key, value) {
        Ok(true) => {}
        Ok(false) => out.push_str("entry not found.\n"),
        Err(e) => report(Err(e), out),
    }
    Flow::Continue
}

fn clear(process: &Process, kind: Kind, args: &[String], out: &mut String) {
    if versioned(args, out) {
        return;
    }
    let Some(name) = args.first() else {
        let _ = writeln!(out, "Missing {} identifier.", kind.word());
        return;
    };
    if let Some(r) = find(process, kind, name, out) {
        r.clear();
    }
}

/// `clear map <map>`.
pub fn clear_map(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    clear(process, Kind::Map, args, out);
    Flow::Continue
}

/// `clear acl <acl>`.
pub fn clear_acl(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    clear(process, Kind::Acl, args, out);
    Flow::Continue
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_lines_split_into_keys_and_values() {
        assert_eq!(
            payload_entries("a.com be1\n\n  b.com   two words \nalone\n"),
            vec![
                ("a.com".to_string(), Some("be1".to_string())),
                ("b.com".into(), Some("two words".into())),
                ("alone".into(), Some(String::new())),
            ]
        );
    }
}
