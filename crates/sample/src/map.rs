//! Pattern and map files (configuration.txt §7.1 `-f`/`-M`, §7.3.1 `map`): read once at
//! configuration time and shared by every ACL and converter naming the same file.
//!
//! [`MapStore`] is the configuration's file cache: [`MapStore::lines`] reads a file into its
//! meaningful lines (leading blanks stripped, empty lines and `#` comments skipped), and
//! [`MapStore::map`] compiles a file into a [`Map`] for one matching method and value type,
//! once per combination. A map line is a key (the first word) and a value (the rest, trailing
//! blanks removed). [`Map::lookup`] follows the manual: exact strings and addresses find the
//! first of the finest match (the longest network for addresses), every other method the
//! first matching line. The store is a cheap handle (`Clone` shares it); compiled maps are
//! `Arc`s that expressions keep after the store is gone. Read [`MapStore`] first.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::pattern::{IntOp, MatchMethod, Pattern, Prepared, with_prepared};
use crate::value::{Sample, parse_int_exact, parse_ip};

/// The meaningful lines of one file: 1-based line number and text.
#[derive(Debug)]
pub(crate) struct FileLines {
    pub lines: Vec<(usize, String)>,
}

/// The type of a map's values (`map_<method>_<type>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum MapOutput {
    /// `str` (the default).
    Str,
    /// `int`.
    Int,
    /// `ip`.
    Ip,
    /// `key`: the matching line's key.
    Key,
}

/// A value of a map line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MapValue {
    Str(Vec<u8>),
    Int(i64),
    Ip(IpAddr),
}

/// One line of a map.
#[derive(Debug)]
pub(crate) struct MapEntry {
    pub key: Vec<u8>,
    pub value: MapValue,
    /// The compiled key; `None` for exact strings, looked up in the hash table.
    pattern: Option<Pattern>,
}

/// A compiled map.
#[derive(Debug)]
pub(crate) struct Map {
    method: MatchMethod,
    exact: HashMap<Vec<u8>, usize>,
    entries: Vec<MapEntry>,
}

impl Map {
    /// The line whose key matches `sample` (see the module documentation for which one).
    pub fn lookup(&self, sample: &Sample<'_>) -> Option<&MapEntry> {
        let mut found = None;
        with_prepared(self.method, sample, |prepared| {
            found = self.find(prepared);
            found.is_some()
        });
        found.and_then(|i| self.entries.get(i))
    }

    fn find(&self, s: Prepared<'_>) -> Option<usize> {
        let first = match s {
            Prepared::Bytes(b) => self.exact.get(b).copied(),
            _ => None,
        };
        let rest = || {
            self.entries.iter().enumerate().filter(|(_, e)| {
                e.pattern
                    .as_ref()
                    .is_some_and(|p| p.matches(self.method, s))
            })
        };
        match (first, self.method) {
            (Some(i), _) => Some(i),
            (None, MatchMethod::Ip) => rest()
                .max_by_key(|(i, e)| match &e.pattern {
                    // Longest prefix first, then the earliest line.
                    Some(Pattern::Ip(net)) => (net.prefix_len(), usize::MAX - i),
                    _ => (0, usize::MAX - i),
                })
                .map(|(i, _)| i),
            (None, _) => rest().map(|(i, _)| i).next(),
        }
    }

    /// For `map_regm`: the value of the first line whose regex matches, with `\N` replaced
    /// by the match's groups.
    pub fn lookup_regm(&self, input: &[u8]) -> Option<Vec<u8>> {
        self.entries.iter().find_map(|e| {
            let Some(Pattern::Regex(re)) = &e.pattern else {
                return None;
            };
            let caps = re.captures(input)?;
            let MapValue::Str(template) = &e.value else {
                return None;
            };
            let subst = crate::conv::parse_subst(&String::from_utf8_lossy(template));
            let mut out = Vec::new();
            crate::conv::expand(&subst, &caps, &mut out);
            Some(out)
        })
    }
}

#[derive(Default)]
struct Inner {
    contents: HashMap<String, String>,
    files: HashMap<String, Arc<FileLines>>,
    maps: HashMap<(String, MatchMethod, MapOutput), Arc<Map>>,
    /// The configuration's `userlist` sections, by name (the store is the one handle every
    /// expression compiler gets, so it carries them too).
    userlists: HashMap<String, Arc<crate::auth::Userlist>>,
}

/// The cache of pattern and map files of one configuration.
#[derive(Clone, Default)]
pub struct MapStore {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for MapStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("MapStore")
            .field("files", &inner.files.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl MapStore {
    /// An empty store.
    pub fn new() -> MapStore {
        MapStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-built (they are
        // inserted whole), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `path` read as `contents` instead of from the file system (for files the
    /// configuration receives another way, and for tests).
    pub fn set_contents(&self, path: &str, contents: &str) {
        self.lock()
            .contents
            .insert(path.to_string(), contents.to_string());
    }

    /// Declares a user list for `http_auth(name)`; a second list of the same name replaces
    /// the first (the configuration reports the duplicate).
    pub fn add_userlist(&self, list: crate::auth::Userlist) {
        self.lock()
            .userlists
            .insert(list.name.clone(), Arc::new(list));
    }

    /// The user list `name`, if declared.
    pub fn userlist(&self, name: &str) -> Option<Arc<crate::auth::Userlist>> {
        self.lock().userlists.get(name).cloned()
    }

    /// The paths read so far.
    pub fn loaded_files(&self) -> Vec<String> {
        let mut paths: Vec<_> = self.lock().files.keys().cloned().collect();
        paths.sort();
        paths
    }

    /// The meaningful lines of `path`, read on first use. `what` names the file in errors
    /// ("pattern", "map").
    pub(crate) fn lines(&self, path: &str, what: &str) -> Result<Arc<FileLines>, String> {
        let mut inner = self.lock();
        if let Some(lines) = inner.files.get(path) {
            return Ok(Arc::clone(lines));
        }
        let text = match inner.contents.get(path) {
            Some(text) => text.clone(),
            None => {
                let bytes = std::fs::read(path)
                    .map_err(|e| format!("failed to open {what} file <{path}>: {e}"))?;
                String::from_utf8_lossy(&bytes).into_owned()
            }
        };
        let lines = text
            .split('\n')
            .enumerate()
            .filter_map(|(i, line)| {
                let line = line.strip_suffix('\r').unwrap_or(line);
                let line = line.trim_start_matches([' ', '\t']);
                (!line.is_empty() && !line.starts_with('#')).then(|| (i + 1, line.to_string()))
            })
            .collect();
        let lines = Arc::new(FileLines { lines });
        inner.files.insert(path.to_string(), Arc::clone(&lines));
        Ok(lines)
    }

    /// The map compiled from `path` for `method` with values of type `output`.
    pub(crate) fn map(
        &self,
        path: &str,
        method: MatchMethod,
        output: MapOutput,
    ) -> Result<Arc<Map>, String> {
        let key = (path.to_string(), method, output);
        if let Some(map) = self.lock().maps.get(&key) {
            return Ok(Arc::clone(map));
        }
        let lines = self.lines(path, "map")?;
        let mut map = Map {
            method,
            exact: HashMap::new(),
            entries: Vec::new(),
        };
        for (number, line) in &lines.lines {
            let at = |e: String| format!("{e} at line {number} of file '{path}'");
            let (key, value) = split_map_line(line);
            let value =
                match output {
                    MapOutput::Str | MapOutput::Key => MapValue::Str(value.as_bytes().to_vec()),
                    MapOutput::Int => MapValue::Int(
                        parse_int_exact(value)
                            .ok_or_else(|| at(format!("'{value}' is not a valid integer")))?,
                    ),
                    MapOutput::Ip => MapValue::Ip(parse_ip(value.as_bytes()).ok_or_else(|| {
                        at(format!("'{value}' is not a valid IPv4 or IPv6 address"))
                    })?),
                };
            let index = map.entries.len();
            let pattern = if method == MatchMethod::Str {
                map.exact.entry(key.as_bytes().to_vec()).or_insert(index);
                None
            } else {
                Some(Pattern::parse(method, key, false, IntOp::Eq).map_err(at)?)
            };
            map.entries.push(MapEntry {
                key: key.as_bytes().to_vec(),
                value,
                pattern,
            });
        }
        let map = Arc::new(map);
        self.lock().maps.insert(key, Arc::clone(&map));
        Ok(map)
    }
}

/// Splits a map line into its key (first word) and value (the rest, without the blanks
/// around it).
pub(crate) fn split_map_line(line: &str) -> (&str, &str) {
    match line.find([' ', '\t']) {
        Some(at) => (&line[..at], line[at..].trim_matches([' ', '\t'])),
        None => (line, ""),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lines_skip_comments_and_blanks() {
        let store = MapStore::new();
        store.set_contents(
            "f",
            "# comment\n\n  a b  \r\n\t#x\n  # not a comment?\nlast",
        );
        let lines = store.lines("f", "pattern").unwrap();
        let texts: Vec<_> = lines.lines.iter().map(|(n, l)| (*n, l.as_str())).collect();
        assert_eq!(texts, [(3, "a b  "), (6, "last")]);
        assert_eq!(split_map_line("key   the value \t"), ("key", "the value"));
        assert_eq!(split_map_line("alone"), ("alone", ""));
        assert_eq!(store.loaded_files(), ["f"]);
    }

    #[test]
    fn missing_file() {
        let err = MapStore::new()
            .lines("/nonexistent/x.lst", "pattern")
            .unwrap_err();
        assert!(
            err.starts_with("failed to open pattern file </nonexistent/x.lst>: "),
            "{err}"
        );
    }

    #[test]
    fn maps_are_shared_and_typed() {
        let store = MapStore::new();
        store.set_contents("m", "a 1\nb 2\na 3\n");
        let m1 = store.map("m", MatchMethod::Str, MapOutput::Int).unwrap();
        let m2 = store
            .clone()
            .map("m", MatchMethod::Str, MapOutput::Int)
            .unwrap();
        assert!(Arc::ptr_eq(&m1, &m2));
        let hit = m1.lookup(&Sample::str(b"a")).unwrap();
        assert_eq!(hit.value, MapValue::Int(1));
        assert!(m1.lookup(&Sample::str(b"c")).is_none());
        store.set_contents("bad", "a x\n");
        assert_eq!(
            store
                .map("bad", MatchMethod::Str, MapOutput::Int)
                .unwrap_err(),
            "'x' is not a valid integer at line 1 of file 'bad'"
        );
    }

    #[test]
    fn longest_prefix_wins() {
        let store = MapStore::new();
        store.set_contents(
            "ips",
            "10.0.0.0/8 wide\n10.1.0.0/16 narrow\n10.1.2.3 host\n",
        );
        let map = store.map("ips", MatchMethod::Ip, MapOutput::Str).unwrap();
        let value = |ip: &str| {
            map.lookup(&Sample::Ip(ip.parse().unwrap()))
                .map(|e| e.value.clone())
        };
        assert_eq!(value("10.1.2.3"), Some(MapValue::Str(b"host".to_vec())));
        assert_eq!(value("10.1.9.9"), Some(MapValue::Str(b"narrow".to_vec())));
        assert_eq!(value("10.9.9.9"), Some(MapValue::Str(b"wide".to_vec())));
        assert_eq!(value("11.0.0.1"), None);
    }
}
