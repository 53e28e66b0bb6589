//! Pattern and map files (configuration.txt §7.1 `-f`/`-M`, §7.3.1 `map`): read once at
//! configuration time and shared by every ACL and converter naming the same file.
//!
//! [`MapStore`] is the configuration's file cache: [`MapStore::lines`] reads a file into its
//! meaningful lines (leading blanks stripped, empty lines and `#` comments skipped), and
//! [`MapStore::map`] compiles a file into a [`Map`] for one matching method and value type,
//! once per combination. A map line is a key (the first word) and a value (the rest, trailing
//! blanks removed). [`Map::lookup`] follows the manual (§7.3.1: "IP addresses and strings
//! are stored in trees, so the first of the finest match will be used. Other keys are stored
//! in lists, so the first matching occurrence will be used"): exact strings are hashed (first
//! line of equal keys); addresses find the longest network, HAProxy's way (the sample's
//! family first, then the other one through the mapped address, then IPv4 networks with
//! non-contiguous masks in file order); every other method finds the first matching line in
//! file order. `ip`, `beg`, `end`, `dom` and `dir` maps answer from an index
//! (`pattern::PatternIndex`: radix and byte tries) that returns exactly that line, so a
//! lookup costs the input's length, not the map's; `sub`, `reg`, `int`, `len` and `bin` keep
//! the scan (a substring or regex can match anywhere, ranges and blocks are few), which also
//! stays as the reference the index is tested against. Note that HAProxy 2.6's source keeps
//! case-sensitive `beg` keys in a prefix tree and so returns the *longest* matching prefix;
//! Sluice follows the manual, which lists only addresses and exact strings as trees. The store
//! is a cheap handle (`Clone` shares it); compiled maps are `Arc`s that expressions keep after
//! the store is gone. Read [`MapStore`] first.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::pattern::{
    IntOp, IpPattern, MatchMethod, Pattern, PatternIndex, Prepared, with_prepared,
};
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
    /// The keys of `ip`, `beg`, `end`, `dom` and `dir` maps, by line index; `None` for the
    /// other methods, scanned in file order.
    index: Option<PatternIndex>,
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
        match (&self.index, s) {
            (_, Prepared::Bytes(b)) if self.method == MatchMethod::Str => {
                self.exact.get(b).copied()
            }
            (Some(index), _) => index.find(s),
            (None, _) => self.find_linear(s),
        }
    }

    /// The reference lookup, one line after the other: what the index must answer, and
    /// what the methods without an index do.
    fn find_linear(&self, s: Prepared<'_>) -> Option<usize> {
        if let Prepared::Bytes(b) = s
            && let Some(&i) = self.exact.get(b)
        {
            return Some(i);
        }
        let mut matching = self.entries.iter().enumerate().filter(|(_, e)| {
            e.pattern
                .as_ref()
                .is_some_and(|p| p.matches(self.method, s))
        });
        match (self.method, s) {
            // Best rank first, then the earliest line.
            (MatchMethod::Ip, Prepared::Ip(ip)) => matching
                .max_by_key(|(i, e)| match &e.pattern {
                    Some(Pattern::Ip(net)) => (ip_rank(*net, ip), usize::MAX - i),
                    _ => ((0, 0), usize::MAX - i),
                })
                .map(|(i, _)| i),
            _ => matching.next().map(|(i, _)| i),
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

/// Benchmark support (`benches/maps.rs`), not part of the API: one map compiled from text,
/// looked up through its index or through the reference scan.
#[doc(hidden)]
#[derive(Debug)]
pub struct MapProbe {
    map: Arc<Map>,
}

impl MapProbe {
    /// Compiles `contents` as a map for `method` with string values.
    pub fn new(contents: &str, method: MatchMethod) -> Result<MapProbe, String> {
        let store = MapStore::new();
        store.set_contents("probe", contents);
        let map = store.map("probe", method, MapOutput::Str)?;
        Ok(MapProbe { map })
    }

    /// The index of the line [`Map::lookup`] finds.
    pub fn indexed(&self, sample: &Sample<'_>) -> Option<usize> {
        let mut found = None;
        with_prepared(self.map.method, sample, |s| {
            found = self.map.find(s);
            found.is_some()
        });
        found
    }

    /// The index of the line the linear scan finds.
    pub fn linear(&self, sample: &Sample<'_>) -> Option<usize> {
        let mut found = None;
        with_prepared(self.map.method, sample, |s| {
            found = self.map.find_linear(s);
            found.is_some()
        });
        found
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
    /// The names of the configuration's stick tables, once declared; `None` (a store not
    /// made by a configuration) checks no table name.
    tables: Option<std::collections::HashSet<String>>,
    /// The proxy whose lines are being compiled: its table is the default one of `src_*`
    /// fetches and `table_avl`/`table_cnt`.
    current_proxy: Option<String>,
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

    /// Declares the configuration's stick tables, so that fetches and converters naming
    /// another table are refused when compiled.
    pub fn declare_tables(&self, names: impl IntoIterator<Item = String>) {
        self.lock()
            .tables
            .get_or_insert_with(Default::default)
            .extend(names);
    }

    /// Names the proxy whose lines are compiled next (`None` outside proxies).
    pub fn set_current_proxy(&self, name: Option<&str>) {
        self.lock().current_proxy = name.map(str::to_owned);
    }

    /// The proxy whose lines are being compiled.
    pub(crate) fn current_proxy(&self) -> Option<String> {
        self.lock().current_proxy.clone()
    }

    /// Checks that stick table `name` exists (when the tables were declared).
    pub(crate) fn check_table(&self, name: &str) -> Result<(), String> {
        match &self.lock().tables {
            Some(tables) if !tables.contains(name) => Err(format!("unable to find table '{name}'")),
            _ => Ok(()),
        }
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
            index: PatternIndex::for_method(method),
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
            // A key the index refuses (none today) sends the whole map back to the scan:
            // the index answers for all lines or for none.
            if let (Some(tree), Some(p)) = (&mut map.index, &pattern)
                && !tree.insert(p, index)
            {
                map.index = None;
            }
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

/// How well the network `net` matches the address `ip`, HAProxy's way (`pat_match_ip`): a
/// network of the sample's family beats one of the other family (reached through
/// `::ffff:a.b.c.d` or the IPv4 address an IPv6 sample embeds), which beats an IPv4 network
/// with a non-contiguous mask; within the first two tiers the longest prefix wins.
fn ip_rank(net: IpPattern, ip: IpAddr) -> (u8, u32) {
    match (net, ip) {
        (IpPattern::V4 { mask, .. }, _) if mask.leading_ones() != mask.count_ones() => (0, 0),
        (IpPattern::V4 { .. }, IpAddr::V4(_)) | (IpPattern::V6 { .. }, IpAddr::V6(_)) => {
            (2, net.prefix_len())
        }
        _ => (1, net.prefix_len()),
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
    use crate::testing::Rng;

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

    /// Builds random maps for every indexed method and checks that the index finds the
    /// same line as the reference scan for many random inputs.
    #[test]
    fn indexes_agree_with_the_linear_scan() {
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        let store = MapStore::new();
        // Lookups that find a line, per method: the inputs must hit, not only miss.
        let mut hits = HashMap::<MatchMethod, usize>::new();
        for round in 0..60 {
            let lines = 1 + rng.below(if round % 2 == 0 { 12 } else { 200 });
            for method in [
                MatchMethod::Ip,
                MatchMethod::Beg,
                MatchMethod::End,
                MatchMethod::Dom,
                MatchMethod::Dir,
            ] {
                let text: String = (0..lines)
                    .map(|i| match method {
                        MatchMethod::Ip => format!("{} v{i}\n", rng.network()),
                        _ => format!("{} v{i}\n", rng.word(1, 5)),
                    })
                    .collect();
                let path = format!("{round}-{}", method.name());
                store.set_contents(&path, &text);
                let map = store.map(&path, method, MapOutput::Str).unwrap();
                assert!(map.index.is_some(), "{path} not indexed");
                let probe = MapProbe {
                    map: Arc::clone(&map),
                };
                for _ in 0..300 {
                    let (indexed, linear, input) = if method == MatchMethod::Ip {
                        let ip = rng.address();
                        let s = Sample::Ip(ip);
                        (probe.indexed(&s), probe.linear(&s), ip.to_string())
                    } else {
                        let word = rng.word(0, 12);
                        let s = Sample::str(word.as_bytes());
                        (probe.indexed(&s), probe.linear(&s), word)
                    };
                    assert_eq!(indexed, linear, "{method:?} <{input}> in\n{text}");
                    *hits.entry(method).or_default() += usize::from(indexed.is_some());
                }
            }
        }
        for (method, n) in hits {
            // 60 rounds of 300 lookups: well over a tenth must find a line.
            assert!(n > 1_800, "{method:?}: only {n} hits");
        }
    }

    #[test]
    fn address_families_rank_like_haproxy() {
        let store = MapStore::new();
        store.set_contents(
            "fam",
            "::ffff:10.0.0.0/104 mapped\n10.0.0.0/8 v4\n10.0.0.1/255.0.0.255 odd\n\
             2002::/16 sixtofour\n",
        );
        let map = store.map("fam", MatchMethod::Ip, MapOutput::Key).unwrap();
        let key = |ip: &str| {
            map.lookup(&Sample::Ip(ip.parse().unwrap()))
                .map(|e| String::from_utf8_lossy(&e.key).into_owned())
        };
        // The sample's own family first, however long the other family's prefix.
        assert_eq!(key("10.1.1.1").as_deref(), Some("10.0.0.0/8"));
        assert_eq!(
            key("::ffff:10.1.1.1").as_deref(),
            Some("::ffff:10.0.0.0/104")
        );
        // The other family through the embedded address.
        assert_eq!(key("2002:0a01:0101::").as_deref(), Some("2002::/16"));
        assert_eq!(key("::10.1.1.1").as_deref(), Some("10.0.0.0/8"));
        // Non-contiguous masks last.
        assert_eq!(key("11.0.0.1"), None);
        store.set_contents("odd", "10.0.0.1/255.0.0.255 odd\n11.0.0.0/8 eleven\n");
        let map = store.map("odd", MatchMethod::Ip, MapOutput::Str).unwrap();
        let hit = map
            .lookup(&Sample::Ip("10.9.9.1".parse().unwrap()))
            .unwrap();
        assert_eq!(hit.value, MapValue::Str(b"odd".to_vec()));
    }

    #[test]
    fn string_methods_return_the_first_matching_line() {
        let store = MapStore::new();
        store.set_contents(
            "s",
            "/api first\n/api/v2 longer\n/ root\nexample.com dom\nwww.example.com sub\n",
        );
        let value = |method, input: &str| {
            let map = store.map("s", method, MapOutput::Str).unwrap();
            map.lookup(&Sample::str(input.as_bytes()))
                .map(|e| e.value.clone())
        };
        let v = |s: &str| Some(MapValue::Str(s.as_bytes().to_vec()));
        // The manual's "first matching occurrence", not the longest prefix.
        assert_eq!(value(MatchMethod::Beg, "/api/v2/x"), v("first"));
        assert_eq!(value(MatchMethod::Beg, "/static"), v("root"));
        assert_eq!(value(MatchMethod::Dom, "www.example.com"), v("dom"));
        assert_eq!(value(MatchMethod::End, "mail.example.com"), v("dom"));
        assert_eq!(value(MatchMethod::Dir, "/x/api/y"), v("first"));
        assert_eq!(value(MatchMethod::Dom, "example.org"), None);
    }
}
