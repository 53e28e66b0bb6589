//! Pattern and map files (configuration.txt §7.1 `-f`/`-M`, §7.3.1 `map`): read once at
//! configuration time and shared by every ACL and converter naming the same file.
//!
//! [`MapStore`] holds the configuration's pattern references (`crate::patref`): a file is
//! read once ([`MapStore::lines`]: leading blanks stripped, empty lines and `#` comments
//! skipped) into one reference, and [`MapStore::map`] gives the reference's view for one
//! matching method and value type, a [`Map`] compiled once per combination. A map line is a
//! key (the first word) and a value (the rest, blanks around it removed). [`Map::lookup`] follows the manual (§7.3.1: "IP addresses and strings
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
//! is a cheap handle (`Clone` shares it); views are `Arc`s that expressions keep after the
//! store is gone, and the runtime API edits them through the store's references. Read
//! [`MapStore`] first.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::patref::{AclView, MapView, PatRef, file_entries};
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

impl MapEntry {
    /// The value as `get map` prints it, and HAProxy's name of its type.
    pub fn value_text(&self) -> (String, &'static str) {
        match &self.value {
            MapValue::Str(s) => (String::from_utf8_lossy(s).into_owned(), "str"),
            MapValue::Int(i) => (i.to_string(), "sint"),
            MapValue::Ip(ip @ IpAddr::V4(_)) => (ip.to_string(), "ipv4"),
            MapValue::Ip(ip) => (ip.to_string(), "ipv6"),
        }
    }
}

impl Map {
    /// An empty map for `method`.
    pub fn new(method: MatchMethod) -> Map {
        Map {
            method,
            exact: HashMap::new(),
            index: PatternIndex::for_method(method),
            entries: Vec::new(),
        }
    }

    /// Appends the line `key value`, the value read as `output` says.
    pub fn add(&mut self, key: &str, value: &str, output: MapOutput) -> Result<(), String> {
        let value = match output {
            MapOutput::Str | MapOutput::Key => MapValue::Str(value.as_bytes().to_vec()),
            MapOutput::Int => MapValue::Int(
                parse_int_exact(value)
                    .ok_or_else(|| format!("'{value}' is not a valid integer"))?,
            ),
            MapOutput::Ip => MapValue::Ip(
                parse_ip(value.as_bytes())
                    .ok_or_else(|| format!("'{value}' is not a valid IPv4 or IPv6 address"))?,
            ),
        };
        let index = self.entries.len();
        let pattern = if self.method == MatchMethod::Str {
            self.exact.entry(key.as_bytes().to_vec()).or_insert(index);
            None
        } else {
            Some(Pattern::parse(self.method, key, false, IntOp::Eq)?)
        };
        // A key the index refuses (none today) sends the whole map back to the scan: the
        // index answers for all lines or for none.
        if let (Some(tree), Some(p)) = (&mut self.index, &pattern)
            && !tree.insert(p, index)
        {
            self.index = None;
        }
        self.entries.push(MapEntry {
            key: key.as_bytes().to_vec(),
            value,
            pattern,
        });
        Ok(())
    }

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
    map: Arc<MapView>,
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
        let map = self.map.read();
        let mut found = None;
        with_prepared(map.method, sample, |s| {
            found = map.find(s);
            found.is_some()
        });
        found
    }

    /// The index of the line the linear scan finds.
    pub fn linear(&self, sample: &Sample<'_>) -> Option<usize> {
        let map = self.map.read();
        let mut found = None;
        with_prepared(map.method, sample, |s| {
            found = map.find_linear(s);
            found.is_some()
        });
        found
    }
}

#[derive(Default)]
struct Inner {
    contents: HashMap<String, String>,
    /// Every pattern reference, by id.
    refs: Vec<Arc<PatRef>>,
    /// The references of files, by path.
    by_file: HashMap<String, Arc<PatRef>>,
    /// The configuration file and line being read.
    place: Option<(String, u32)>,
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
            .field("files", &inner.by_file.keys().collect::<Vec<_>>())
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

    /// The pattern and map files read so far.
    pub fn loaded_files(&self) -> Vec<String> {
        let mut paths: Vec<_> = self.lock().by_file.keys().cloned().collect();
        paths.sort();
        paths
    }

    /// The meaningful lines of `path`. `what` names the file in errors ("pattern", "map").
    /// Each file is read once: its reference keeps the entries (see `file_ref`).
    pub(crate) fn lines(&self, path: &str, what: &str) -> Result<FileLines, String> {
        let given = self.lock().contents.get(path).cloned();
        let text = match given {
            Some(text) => text,
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
        Ok(FileLines { lines })
    }

    /// Sets where the configuration is being read (`file`, `line`), for the descriptions
    /// `show map` and `show acl` print of the references created next.
    pub fn set_place(&self, file: &str, line: u32) {
        self.lock().place = Some((file.to_string(), line));
    }

    fn place_text(inner: &Inner) -> (String, u32) {
        inner.place.clone().unwrap_or_default()
    }

    /// The reference of file `path`, created (and the file read) on first use; `user`
    /// describes the new user ("acl", "map").
    fn file_ref(
        &self,
        path: &str,
        what: &str,
        user: &str,
        acl: bool,
    ) -> Result<Arc<PatRef>, String> {
        let existing = self.lock().by_file.get(path).cloned();
        let pat_ref = match existing {
            Some(r) => r,
            None => {
                let lines = self.lines(path, what)?;
                let mut inner = self.lock();
                match inner.by_file.get(path) {
                    // Another thread read it meanwhile: one reference per file.
                    Some(r) => Arc::clone(r),
                    None => {
                        let id = inner.refs.len();
                        let r = Arc::new(PatRef::new_file(id, path, file_entries(&lines.lines)));
                        inner.refs.push(Arc::clone(&r));
                        inner.by_file.insert(path.to_string(), Arc::clone(&r));
                        r
                    }
                }
            }
        };
        let (file, line) = Self::place_text(&self.lock());
        pat_ref.note_user(
            format!("by {user} at file '{file}' line {line}"),
            acl,
            user == "map",
        );
        Ok(pat_ref)
    }

    /// The view of map file `path` for `method` with values of type `output`, shared with
    /// every converter of the same kind.
    pub(crate) fn map(
        &self,
        path: &str,
        method: MatchMethod,
        output: MapOutput,
    ) -> Result<Arc<MapView>, String> {
        self.file_ref(path, "map", "map", false)?
            .map_view(method, output)
    }

    /// The view of pattern file `path` for an ACL (`-f`; `key_only` for `-M`).
    pub(crate) fn acl_file_view(
        &self,
        path: &str,
        method: MatchMethod,
        icase: bool,
        key_only: bool,
    ) -> Result<Arc<AclView>, String> {
        let user = if key_only { "map" } else { "acl" };
        self.file_ref(path, "pattern", user, true)?
            .acl_view(method, icase, key_only)
    }

    /// A new reference for the values written on an ACL line whose criterion is
    /// `keyword` (each value with the integer operator in force), and its view.
    pub(crate) fn inline_ref(
        &self,
        keyword: &str,
        method: MatchMethod,
        icase: bool,
        values: &[(&str, IntOp)],
    ) -> Result<Arc<AclView>, String> {
        let mut inner = self.lock();
        let (file, line) = Self::place_text(&inner);
        let id = inner.refs.len();
        let r = Arc::new(PatRef::new_inline(
            id,
            format!("acl '{keyword}' file '{file}' line {line}"),
            values,
        ));
        // A line whose values do not compile is refused, and so is its reference.
        let view = r.acl_view(method, icase, false)?;
        inner.refs.push(r);
        Ok(view)
    }

    /// Every reference, by id.
    pub fn refs(&self) -> Vec<Arc<PatRef>> {
        self.lock().refs.clone()
    }

    /// The reference `name` designates: `#<id>` or a file name, among those an ACL
    /// (`acl`) or a map uses.
    pub fn find_ref(&self, name: &str, map: bool) -> Option<Arc<PatRef>> {
        let inner = self.lock();
        let found = match name.strip_prefix('#') {
            Some(id) => id.parse::<usize>().ok().and_then(|id| inner.refs.get(id)),
            None => inner.by_file.get(name),
        }?;
        let found = Arc::clone(found);
        drop(inner);
        let usable = if map { found.is_map() } else { found.is_acl() };
        usable.then_some(found)
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
        let entry = crate::patref::RefEntry::file_line("key   the value \t", 1);
        assert_eq!((entry.key(), entry.value()), ("key", Some("the value")));
        store.map("f", MatchMethod::Str, MapOutput::Str).unwrap();
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
        let m1 = m1.read();
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
        let view = store.map("ips", MatchMethod::Ip, MapOutput::Str).unwrap();
        let map = view.read();
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
                assert!(map.read().index.is_some(), "{path} not indexed");
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
        let view = store.map("fam", MatchMethod::Ip, MapOutput::Key).unwrap();
        let map = view.read();
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
        let view = store.map("odd", MatchMethod::Ip, MapOutput::Str).unwrap();
        let map = view.read();
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
            let map = map.read();
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
