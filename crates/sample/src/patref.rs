//! Pattern references: the runtime-editable contents of pattern and map files and of the
//! values written on `acl` lines (management.txt §9.3 `show map`, `add acl`...).
//!
//! A [`PatRef`] is one list of entries (key, optional value) with a process-wide id: one per
//! file, shared by every ACL `-f` and `map*` converter naming that file, and one per ACL
//! line for its inline values. Each user compiles the entries for its matching method into
//! a *view* ([`MapView`] for converters, [`AclView`] for ACLs); views of the same method are
//! shared. The CLI edits the entries through the reference, which updates every view
//! before answering, so the next lookup of any thread sees the change.
//!
//! Why locks and where: a view is read without any lock until the CLI first edits it, so
//! configured maps and ACLs cost the data path nothing more than before (map converters
//! return values borrowed from the map, which a swappable map could not lend). The first
//! edit builds a second copy behind a `std::sync::RwLock` and flips a flag; from then on
//! lookups take the read side (one atomic operation; writers are rare operator commands)
//! and map values are copied out while it is held (see [`MapView`]). An added entry is inserted
//! into the views' indexes in place; a deletion rebuilds the views from the entries.
//! Read [`PatRef::add`] first.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};

use crate::map::{Map, MapOutput};
use crate::pattern::{IntOp, MatchMethod, PatternList};
use crate::value::Sample;

/// Entry ids are unique in the process, as HAProxy's entry addresses are: `del map <m>
/// #<id>` can never hit an entry of another reference.
static NEXT_ENTRY: AtomicU64 = AtomicU64::new(0x1000);

/// One entry of a reference.
#[derive(Clone, Debug)]
pub struct RefEntry {
    /// The id `show map` prints (`0x...`) and `#<id>` names.
    pub id: u64,
    /// The line as written: a one-column ACL matches all of it.
    text: String,
    /// Where the key (the first word) ends in `text`.
    key_end: usize,
    /// Where the value is in `text`; `None` for a pattern added by `add acl`.
    value: Option<(usize, usize)>,
    /// The file line it came from (0 for the CLI and inline values), for diagnostics.
    line: usize,
    /// The integer operator in force when it was written on an `acl` line.
    op: IntOp,
}

impl RefEntry {
    /// A pattern: one column.
    fn pattern_entry(text: &str, line: usize, op: IntOp) -> RefEntry {
        RefEntry {
            id: NEXT_ENTRY.fetch_add(0x10, Ordering::Relaxed),
            text: text.to_string(),
            key_end: text.len(),
            value: None,
            line,
            op,
        }
    }

    /// A file line: the key is the first word, the value the rest without the blanks
    /// around it.
    pub(crate) fn file_line(text: &str, line: usize) -> RefEntry {
        let blank = |c: char| c == ' ' || c == '\t';
        let key_end = text.find(blank).unwrap_or(text.len());
        let rest = &text[key_end..];
        let start = key_end + (rest.len() - rest.trim_start_matches(blank).len());
        let end = text.trim_end_matches(blank).len().max(start);
        RefEntry {
            value: Some((start, end)),
            key_end,
            ..RefEntry::pattern_entry(text, line, IntOp::Eq)
        }
    }

    /// A key and its value (`add map`).
    fn pair(key: &str, value: &str) -> RefEntry {
        let text = format!("{key} {value}");
        RefEntry {
            value: Some((key.len() + 1, text.len())),
            key_end: key.len(),
            ..RefEntry::pattern_entry(&text, 0, IntOp::Eq)
        }
    }

    /// The key (map) or pattern (ACL).
    pub fn key(&self) -> &str {
        &self.text[..self.key_end]
    }

    /// The value of a map line; `None` for a pattern added by `add acl`.
    pub fn value(&self) -> Option<&str> {
        self.value.map(|(start, end)| &self.text[start..end])
    }

    /// The whole line, as a one-column ACL matches it.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text an ACL view matches: the whole line, or only the key under `-M`.
    fn pattern(&self, key_only: bool) -> &str {
        if key_only { self.key() } else { &self.text }
    }

    /// The entry with another value (`set map`), same id.
    fn with_value(&self, value: &str) -> RefEntry {
        RefEntry {
            id: self.id,
            ..RefEntry::pair(self.key(), value)
        }
    }
}

/// A map converter's compiled entries.
///
/// Until the runtime API first edits it, lookups read `initial` without any lock and
/// return values borrowed from it, so a configured map costs a request no allocation. The
/// first edit builds `live` and raises `edited`; from then on lookups take the read side
/// of `live` and copy out what they keep. `initial` stays allocated after that, since a
/// request may still be borrowing from it.
#[derive(Debug)]
pub(crate) struct MapView {
    pub method: MatchMethod,
    pub output: MapOutput,
    initial: Map,
    edited: AtomicBool,
    live: RwLock<Map>,
}

/// The map a lookup reads: the configured one, borrowed for as long as the view lives, or
/// the edited one under its read lock.
pub(crate) enum MapRead<'a> {
    Initial(&'a Map),
    Live(RwLockReadGuard<'a, Map>),
}

impl std::ops::Deref for MapRead<'_> {
    type Target = Map;
    fn deref(&self) -> &Map {
        match self {
            MapRead::Initial(map) => map,
            MapRead::Live(guard) => guard,
        }
    }
}

impl MapView {
    fn new(method: MatchMethod, output: MapOutput, initial: Map) -> MapView {
        MapView {
            method,
            output,
            initial,
            edited: AtomicBool::new(false),
            live: RwLock::new(Map::new(method)),
        }
    }

    /// The map to look up in.
    pub fn read(&self) -> MapRead<'_> {
        if !self.edited.load(Ordering::Acquire) {
            return MapRead::Initial(&self.initial);
        }
        // Updates replace or extend the map whole under the write lock; a panic there
        // leaves either the old or the new contents, both usable.
        MapRead::Live(self.live.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Applies an edit: `extend` on the live map when there is one already, else the whole
    /// `entries` (the contents after the edit) become the live map.
    fn edit(&self, entries: &[RefEntry], file: &str, extend: Option<&[RefEntry]>) {
        let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
        if let (Some(new), true) = (extend, self.edited.load(Ordering::Acquire)) {
            for e in new {
                // Checked by the caller before any view changed.
                let _ = live.add(e.key(), e.value().unwrap_or(""), self.output);
            }
            return;
        }
        // The entries were all accepted before, so compiling cannot fail; a view that
        // would is left as it was rather than emptied.
        if let Ok(map) = build_map(self.method, self.output, entries, file) {
            *live = map;
            self.edited.store(true, Ordering::Release);
        }
    }
}

/// An ACL's compiled patterns from one reference, read the same way as a [`MapView`]:
/// without a lock until the first edit, under the read lock of `live` after it.
#[derive(Debug)]
pub(crate) struct AclView {
    pub method: MatchMethod,
    pub icase: bool,
    /// `-M`: only the first word of each line is a pattern.
    key_only: bool,
    initial: PatternList,
    edited: AtomicBool,
    live: RwLock<PatternList>,
}

impl AclView {
    fn new(method: MatchMethod, icase: bool, key_only: bool, initial: PatternList) -> AclView {
        AclView {
            method,
            icase,
            key_only,
            initial,
            edited: AtomicBool::new(false),
            live: RwLock::new(PatternList::new(method)),
        }
    }

    /// Runs `f` on the patterns in force.
    fn with<R>(&self, f: impl FnOnce(&PatternList) -> R) -> R {
        if !self.edited.load(Ordering::Acquire) {
            return f(&self.initial);
        }
        // Edits replace or extend the list whole under the write lock.
        f(&self.live.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether `sample` matches one of the patterns.
    pub fn matches(&self, sample: &Sample<'_>) -> bool {
        self.with(|list| list.matches(sample))
    }

    /// True when no pattern was given.
    pub fn is_empty(&self) -> bool {
        self.with(PatternList::is_empty)
    }

    /// Applies an edit, like [`MapView::edit`].
    fn edit(&self, entries: &[RefEntry], file: &str, extend: Option<&[RefEntry]>) {
        let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
        if let (Some(new), true) = (extend, self.edited.load(Ordering::Acquire)) {
            for e in new {
                // Checked by the caller before any view changed.
                let _ = live.add(e.pattern(self.key_only), self.icase, e.op);
            }
            return;
        }
        if let Ok(list) = build_list(self.method, self.icase, self.key_only, entries, file) {
            *live = list;
            self.edited.store(true, Ordering::Release);
        }
    }
}

#[derive(Clone, Debug)]
enum View {
    Map(Arc<MapView>),
    Acl(Arc<AclView>),
}

#[derive(Debug, Default)]
struct RefState {
    entries: Vec<RefEntry>,
    views: Vec<View>,
    acl: bool,
    map: bool,
    /// "used by acl at file 'f' line n", one per user.
    users: Vec<String>,
}

/// One pattern reference (see the module documentation).
#[derive(Debug)]
pub struct PatRef {
    id: usize,
    /// The file; empty for an ACL line's inline values.
    file: String,
    /// For inline values: "acl 'src' file 'f' line n".
    inline: Option<String>,
    state: Mutex<RefState>,
}

/// What `get map` or `get acl` finds in one view of a reference.
#[derive(Debug)]
pub struct Probe {
    /// The matching method's name (`str`, `beg`, `ip`...).
    pub method: &'static str,
    /// `-i`.
    pub icase: bool,
    /// Whether the view is a tree (HAProxy's words: exact strings, addresses, prefixes) or
    /// a list.
    pub tree: bool,
    /// The matching entry: key and, for a map, the value and its type name.
    pub found: Option<(String, Option<(String, &'static str)>)>,
}

impl PatRef {
    pub(crate) fn new_file(id: usize, file: &str, entries: Vec<RefEntry>) -> PatRef {
        PatRef {
            id,
            file: file.to_string(),
            inline: None,
            state: Mutex::new(RefState {
                entries,
                ..RefState::default()
            }),
        }
    }

    pub(crate) fn new_inline(id: usize, description: String, values: &[(&str, IntOp)]) -> PatRef {
        PatRef {
            id,
            file: String::new(),
            inline: Some(description),
            state: Mutex::new(RefState {
                acl: true,
                entries: values
                    .iter()
                    .map(|(v, op)| RefEntry::pattern_entry(v, 0, *op))
                    .collect(),
                ..RefState::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, RefState> {
        // Every update leaves the entries and views consistent before it can fail.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The id `#<id>` names.
    pub fn id(&self) -> usize {
        self.id
    }

    /// The file, empty for inline values.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Whether an ACL uses it (`show acl` lists it).
    pub fn is_acl(&self) -> bool {
        self.lock().acl
    }

    /// Whether a map converter (or an ACL's `-M`) uses it (`show map` lists it).
    pub fn is_map(&self) -> bool {
        self.lock().map
    }

    /// Where it comes from and who uses it, as `show map` describes it.
    pub fn description(&self) -> String {
        if let Some(inline) = &self.inline {
            return inline.clone();
        }
        let state = self.lock();
        let mut text = format!("pattern loaded from file '{}'", self.file);
        for (i, user) in state.users.iter().enumerate() {
            text.push_str(if i == 0 { " used " } else { ", " });
            text.push_str(user);
        }
        text
    }

    /// The number of compiled entries, over all views, as HAProxy counts them.
    pub fn entry_count(&self) -> usize {
        let state = self.lock();
        state.entries.len() * state.views.len().max(1)
    }

    /// A copy of the entries, in order.
    pub fn entries(&self) -> Vec<RefEntry> {
        self.lock().entries.clone()
    }

    pub(crate) fn note_user(&self, user: String, acl: bool, map: bool) {
        let mut state = self.lock();
        state.users.push(user);
        state.acl |= acl;
        state.map |= map;
    }

    /// The shared map view for `method` and `output`, compiled on first use.
    pub(crate) fn map_view(
        &self,
        method: MatchMethod,
        output: MapOutput,
    ) -> Result<Arc<MapView>, String> {
        let mut state = self.lock();
        let existing = state.views.iter().find_map(|v| match v {
            View::Map(m) if m.method == method && m.output == output => Some(Arc::clone(m)),
            _ => None,
        });
        if let Some(view) = existing {
            return Ok(view);
        }
        let map = build_map(method, output, &state.entries, &self.file)?;
        let view = Arc::new(MapView::new(method, output, map));
        state.views.push(View::Map(Arc::clone(&view)));
        Ok(view)
    }

    /// The shared ACL view for `method`, `-i` and `-M`, compiled on first use.
    pub(crate) fn acl_view(
        &self,
        method: MatchMethod,
        icase: bool,
        key_only: bool,
    ) -> Result<Arc<AclView>, String> {
        let mut state = self.lock();
        let existing = state.views.iter().find_map(|v| match v {
            View::Acl(a) if a.method == method && a.icase == icase && a.key_only == key_only => {
                Some(Arc::clone(a))
            }
            _ => None,
        });
        if let Some(view) = existing {
            return Ok(view);
        }
        let list = build_list(method, icase, key_only, &state.entries, &self.file)?;
        let view = Arc::new(AclView::new(method, icase, key_only, list));
        state.views.push(View::Acl(Arc::clone(&view)));
        Ok(view)
    }

    /// Adds entries (`add map`, `add acl`): every view must accept every entry, else
    /// nothing changes and the error names the first refusal.
    pub fn add(&self, items: &[(String, Option<String>)]) -> Result<(), String> {
        self.add_to(&mut self.lock(), items)
    }

    fn add_to(
        &self,
        state: &mut RefState,
        items: &[(String, Option<String>)],
    ) -> Result<(), String> {
        let new: Vec<RefEntry> = items
            .iter()
            .map(|(k, v)| match v {
                Some(v) => RefEntry::pair(k, v),
                None => RefEntry::pattern_entry(k, 0, IntOp::Eq),
            })
            .collect();
        // Check first, so that a refused entry leaves every view as it was.
        for view in &state.views {
            match view {
                View::Map(m) => {
                    build_map(m.method, m.output, &new, "")?;
                }
                View::Acl(a) => {
                    build_list(a.method, a.icase, a.key_only, &new, "")?;
                }
            }
        }
        state.entries.extend(new.iter().cloned());
        for view in &state.views {
            match view {
                View::Map(m) => m.edit(&state.entries, &self.file, Some(&new)),
                View::Acl(a) => a.edit(&state.entries, &self.file, Some(&new)),
            }
        }
        Ok(())
    }

    /// Adds the pattern `key` unless an entry has it (`add-acl`), in one hold of the lock, so
    /// two threads adding it at once add it once.
    pub fn add_if_absent(&self, key: &str) -> Result<(), String> {
        let mut state = self.lock();
        if state.entries.iter().any(|e| e.key() == key) {
            return Ok(());
        }
        self.add_to(&mut state, &[(key.to_owned(), None)])
    }

    /// Sets the value of the entries whose key is `key`, or adds one (`set-map`), in one hold
    /// of the lock. Entries that already have the value change nothing: the views are not
    /// rebuilt (a rule may set the same value on every request).
    pub fn set_or_add(&self, key: &str, value: &str) -> Result<(), String> {
        let mut state = self.lock();
        let mut found = state.entries.iter().filter(|e| e.key() == key).peekable();
        if found.peek().is_none() {
            return self.add_to(&mut state, &[(key.to_owned(), Some(value.to_owned()))]);
        }
        if found.all(|e| e.value() == Some(value)) {
            return Ok(());
        }
        self.set_in(&mut state, key, None, value).map(drop)
    }

    /// Deletes the entries whose key is `key`, or the entry `#<id>`; false when none was.
    pub fn delete(&self, key: &str) -> bool {
        self.delete_where(key, parse_entry_id(key))
    }

    /// Deletes the entries whose key is `key`, even one that reads `#<id>` (what a rule
    /// computed from a request: it names no entry by number); false when none was.
    pub fn delete_key(&self, key: &str) -> bool {
        self.delete_where(key, None)
    }

    fn delete_where(&self, key: &str, target: Option<u64>) -> bool {
        let mut state = self.lock();
        let before = state.entries.len();
        state.entries.retain(|e| match target {
            Some(id) => e.id != id,
            None => e.key() != key,
        });
        if state.entries.len() == before {
            return false;
        }
        rebuild(&state, &self.file);
        true
    }

    /// Sets the value of the entries whose key is `key`, or of the entry `#<id>` (`set
    /// map`). `Ok(false)` when none matched; an error when a view refuses the value.
    pub fn set(&self, key: &str, value: &str) -> Result<bool, String> {
        self.set_where(key, parse_entry_id(key), value)
    }

    /// Sets the value of the entries whose key is `key`, even one that reads `#<id>` (see
    /// [`PatRef::delete_key`]).
    pub fn set_key(&self, key: &str, value: &str) -> Result<bool, String> {
        self.set_where(key, None, value)
    }

    fn set_where(&self, key: &str, target: Option<u64>, value: &str) -> Result<bool, String> {
        self.set_in(&mut self.lock(), key, target, value)
    }

    fn set_in(
        &self,
        state: &mut RefState,
        key: &str,
        target: Option<u64>,
        value: &str,
    ) -> Result<bool, String> {
        let hit = |e: &RefEntry| match target {
            Some(id) => e.id == id,
            None => e.key() == key,
        };
        if !state.entries.iter().any(hit) {
            return Ok(false);
        }
        for view in &state.views {
            if let View::Map(m) = view {
                build_map(m.method, m.output, &[RefEntry::pair("", value)], "")
                    .map_err(|_| format!("unable to parse '{value}'."))?;
            }
        }
        for e in state.entries.iter_mut().filter(|e| hit(e)) {
            *e = e.with_value(value);
        }
        rebuild(state, &self.file);
        Ok(true)
    }

    /// Removes every entry (`clear map`, `clear acl`).
    pub fn clear(&self) {
        let mut state = self.lock();
        state.entries.clear();
        rebuild(&state, &self.file);
    }

    /// What each view finds for `input` (`get map`, `get acl`).
    pub fn probe(&self, input: &str) -> Vec<Probe> {
        let state = self.lock();
        let sample = Sample::str(input.as_bytes());
        state
            .views
            .iter()
            .map(|view| match view {
                View::Map(m) => {
                    let map = m.read();
                    let found = map.lookup(&sample).map(|e| {
                        let (value, ty) = e.value_text();
                        (
                            String::from_utf8_lossy(&e.key).into_owned(),
                            Some((value, ty)),
                        )
                    });
                    Probe {
                        method: m.method.name(),
                        icase: false,
                        tree: is_tree(m.method, false),
                        found,
                    }
                }
                View::Acl(a) => {
                    // The first entry that matches on its own; addresses take the longest
                    // network, as the tree would.
                    let found = if a.method == MatchMethod::Ip {
                        let entries: Vec<RefEntry> = state
                            .entries
                            .iter()
                            .map(|e| RefEntry::pattern_entry(e.pattern(a.key_only), e.line, e.op))
                            .collect();
                        build_map(MatchMethod::Ip, MapOutput::Key, &entries, "")
                            .ok()
                            .and_then(|map| {
                                map.lookup(&sample)
                                    .map(|e| String::from_utf8_lossy(&e.key).into_owned())
                            })
                    } else {
                        state.entries.iter().find_map(|e| {
                            let text = e.pattern(a.key_only);
                            let mut one = PatternList::new(a.method);
                            one.add(text, a.icase, e.op).ok()?;
                            one.matches(&sample).then(|| text.to_string())
                        })
                    };
                    Probe {
                        method: a.method.name(),
                        icase: a.icase,
                        tree: is_tree(a.method, a.icase),
                        found: found.map(|k| (k, None)),
                    }
                }
            })
            .collect()
    }
}

/// HAProxy keeps case-sensitive exact strings and prefixes, and addresses, in trees.
fn is_tree(method: MatchMethod, icase: bool) -> bool {
    matches!(method, MatchMethod::Ip)
        || (!icase && matches!(method, MatchMethod::Str | MatchMethod::Beg))
}

/// `#0x1230` (or `#1230`, hexadecimal either way) as an entry id.
fn parse_entry_id(word: &str) -> Option<u64> {
    let hex = word.strip_prefix('#')?;
    let hex = hex.strip_prefix("0x").unwrap_or(hex);
    u64::from_str_radix(hex, 16).ok()
}

fn at_line(e: &RefEntry, file: &str, err: String) -> String {
    if e.line == 0 {
        err
    } else {
        format!("{err} at line {} of file '{file}'", e.line)
    }
}

fn build_map(
    method: MatchMethod,
    output: MapOutput,
    entries: &[RefEntry],
    file: &str,
) -> Result<Map, String> {
    let mut map = Map::new(method);
    for e in entries {
        map.add(e.key(), e.value().unwrap_or(""), output)
            .map_err(|err| at_line(e, file, err))?;
    }
    Ok(map)
}

fn build_list(
    method: MatchMethod,
    icase: bool,
    key_only: bool,
    entries: &[RefEntry],
    file: &str,
) -> Result<PatternList, String> {
    let mut list = PatternList::new(method);
    for e in entries {
        list.add(e.pattern(key_only), icase, e.op)
            .map_err(|err| at_line(e, file, err))?;
    }
    Ok(list)
}

/// Compiles every view again from the entries (after a deletion or a new value). The
/// entries were all accepted before, so compiling cannot fail; a view that would is left
/// as it was rather than emptied.
fn rebuild(state: &RefState, file: &str) {
    for view in &state.views {
        match view {
            View::Map(m) => m.edit(&state.entries, file, None),
            View::Acl(a) => a.edit(&state.entries, file, None),
        }
    }
}

/// The entries of a file's lines: one-column users (`-f` without `-M`) match whole lines,
/// two-column users (maps, `-M`) the key, with the rest as the value.
pub(crate) fn file_entries(lines: &[(usize, String)]) -> Vec<RefEntry> {
    lines
        .iter()
        .map(|(number, line)| RefEntry::file_line(line, *number))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::map::MapStore;

    #[test]
    fn edits_reach_every_view() {
        let store = MapStore::new();
        store.set_contents("m", "a 1\nb 2\n");
        let ints = store.map("m", MatchMethod::Str, MapOutput::Int).unwrap();
        let strs = store.map("m", MatchMethod::Beg, MapOutput::Str).unwrap();
        let r = store.find_ref("m", true).unwrap();
        let lookup = |v: &MapView, k: &str| {
            v.read()
                .lookup(&Sample::str(k.as_bytes()))
                .map(|e| e.value_text().0)
        };
        r.add(&[("c".into(), Some("3".into()))]).unwrap();
        assert_eq!(lookup(&ints, "c").as_deref(), Some("3"));
        assert_eq!(lookup(&strs, "cc").as_deref(), Some("3"));
        // An integer map refuses a word: nothing is added anywhere.
        assert!(r.add(&[("d".into(), Some("x".into()))]).is_err());
        assert_eq!(lookup(&strs, "d"), None);
        assert!(r.set("a", "9").unwrap());
        assert!(!r.set("zz", "9").unwrap());
        assert!(r.set("a", "x").is_err());
        assert_eq!(lookup(&ints, "a").as_deref(), Some("9"));
        let id = r.entries()[1].id;
        assert!(r.delete(&format!("#0x{id:x}")));
        assert_eq!(lookup(&ints, "b"), None);
        assert!(!r.delete("b"));
        assert!(r.delete("c"));
        assert_eq!(r.entries().len(), 1);
        r.clear();
        assert_eq!(lookup(&ints, "a"), None);
        assert_eq!(r.entry_count(), 0);
    }

    #[test]
    fn file_lines_keep_their_text() {
        let e = RefEntry::file_line("^a  b\tc  ", 3);
        assert_eq!(
            (e.key(), e.value(), e.text()),
            ("^a", Some("b\tc"), "^a  b\tc  ")
        );
        let e = RefEntry::file_line("alone", 1);
        assert_eq!((e.key(), e.value()), ("alone", Some("")));
        let e = RefEntry::pair("k", "v w").with_value("x");
        assert_eq!((e.key(), e.value(), e.text()), ("k", Some("x"), "k x"));
        // A one-column ACL matches whole lines, blanks included.
        let store = MapStore::new();
        store.set_contents("re", "^a  b$\n");
        let view = store
            .acl_file_view("re", MatchMethod::Reg, false, false)
            .unwrap();
        assert!(view.matches(&Sample::str(b"a  b")));
        assert!(!view.matches(&Sample::str(b"a b")));
    }

    #[test]
    fn probes_report_like_haproxy() {
        let store = MapStore::new();
        store.set_contents("n", "10.0.0.0/8\n10.1.0.0/16\n");
        let view = store
            .acl_file_view("n", MatchMethod::Ip, false, false)
            .unwrap();
        assert!(view.matches(&Sample::Ip("10.1.2.3".parse().unwrap())));
        let r = store.find_ref("n", false).unwrap();
        let probes = r.probe("10.1.2.3");
        assert_eq!(probes.len(), 1);
        assert_eq!(probes[0].method, "ip");
        assert!(probes[0].tree);
        assert_eq!(probes[0].found.as_ref().unwrap().0, "10.1.0.0/16");
        assert!(r.probe("11.0.0.1")[0].found.is_none());
        assert!(r.add(&[("notanip".into(), None)]).is_err());
        // Edits reach the view: first one (the configured list is left behind), then more.
        let ip = |a: &str| Sample::Ip(a.parse().unwrap());
        r.add(&[("11.0.0.0/8".into(), None)]).unwrap();
        assert!(view.matches(&ip("11.1.1.1")));
        r.add(&[("12.0.0.0/8".into(), None)]).unwrap();
        assert!(view.matches(&ip("12.1.1.1")));
        assert!(r.delete("10.0.0.0/8"));
        assert!(!view.matches(&ip("10.2.2.2")));
        assert!(view.matches(&ip("10.1.2.2")));
        r.clear();
        assert!(view.is_empty() && !view.matches(&ip("11.1.1.1")));
        assert_eq!(parse_entry_id("#0x1a"), Some(0x1a));
        assert_eq!(parse_entry_id("key"), None);
    }
}
