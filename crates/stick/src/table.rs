//! One stick table: entries by key, their expiry, and the purge of the least recently used
//! entries when the table is full (configuration.txt §4.2 `stick-table`).
//!
//! Entries live in a slab (`slots`) indexed by a hash map from key; a stream tracking an
//! entry holds its slot number ([`EntryId`]) and a reference count keeps the entry (and so
//! the slot number) alive until the stream lets it go. Entries nobody references sit in an
//! ordered set by expiry date, which is also their order of last use: expired entries are
//! taken from its front, and when the table is full the front entry is the oldest one to
//! purge. Referenced entries are not in that set, so they can neither expire nor be purged.
//! Every call takes the current time in milliseconds of the caller's monotonic clock.
//!
//! The table is shared by every event-loop thread, so its state sits behind one `Mutex`:
//! each operation is a hash lookup and a few additions, far shorter than the system calls
//! around it, and a single lock keeps the LRU order of the whole table exact, which
//! sharding would lose.

use crate::data::{Data, Layout, Value};
use crate::key::KeyType;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

/// A table's settings (`stick-table type ... size ... expire ... store ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableConf {
    /// The table's name: the name of the section declaring it.
    pub name: String,
    /// The type of its keys.
    pub key: KeyType,
    /// The most entries it holds.
    pub size: usize,
    /// How long an unused entry lives, in milliseconds; `None`: until purged.
    pub expire: Option<u64>,
    /// `nopurge`: when full, refuse new entries instead of purging old ones.
    pub nopurge: bool,
    /// The data stored in each entry.
    pub layout: Layout,
}

/// The slot of an entry a stream references; valid until [`Table::release`].
#[derive(Debug, PartialEq, Eq)]
pub struct EntryId(usize);

struct Entry {
    key: Box<[u8]>,
    /// Streams tracking the entry.
    refs: u32,
    /// When it expires (or was last used, without `expire`), in milliseconds.
    expire: u64,
    /// A number naming the entry in `show table` output.
    serial: u64,
    values: Box<[Value]>,
}

#[derive(Default)]
struct Inner {
    map: HashMap<Box<[u8]>, usize>,
    slots: Vec<Option<Entry>>,
    free: Vec<usize>,
    /// Unreferenced entries by (expiry, slot): oldest first.
    idle: BTreeSet<(u64, usize)>,
    serial: u64,
}

/// What `show table` prints of one entry.
pub struct EntryView<'a> {
    /// A number naming the entry.
    pub serial: u64,
    /// The key's bytes.
    pub key: &'a [u8],
    /// Streams tracking the entry (`use=`).
    pub refs: u32,
    /// Milliseconds before it expires (`exp=`), 0 without `expire`.
    pub expires_in: u64,
    /// Its values.
    pub data: Data<'a>,
}

/// A stick table shared by every thread.
pub struct Table {
    conf: TableConf,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("conf", &self.conf).finish()
    }
}

impl Table {
    /// An empty table.
    pub fn new(conf: TableConf) -> Table {
        Table {
            conf,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The table's settings.
    pub fn conf(&self) -> &TableConf {
        &self.conf
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves consistent data (every update is
        // a few assignments), so a poisoned lock is used as it is.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn expiry(&self, now: u64) -> u64 {
        now.saturating_add(self.conf.expire.unwrap_or(0))
    }

    /// Entries in use now (expired ones are removed first).
    pub fn used(&self, now: u64) -> usize {
        let mut inner = self.lock();
        self.purge_expired(&mut inner, now);
        inner.map.len()
    }

    fn purge_expired(&self, inner: &mut Inner, now: u64) {
        if self.conf.expire.is_none() {
            return;
        }
        while let Some(&(expire, slot)) = inner.idle.first() {
            if expire > now {
                break;
            }
            inner.remove_slot(slot);
        }
    }

    /// The slot of `key`, created (purging the oldest idle entry of a full table) when
    /// `create`; `None` if absent, or if the table is full and may not purge.
    fn find(&self, inner: &mut Inner, key: &[u8], now: u64, create: bool) -> Option<usize> {
        self.purge_expired(inner, now);
        if let Some(&slot) = inner.map.get(key) {
            return Some(slot);
        }
        if !create || self.conf.size == 0 {
            return None;
        }
        if inner.map.len() >= self.conf.size {
            if self.conf.nopurge {
                return None;
            }
            let &(_, oldest) = inner.idle.first()?;
            inner.remove_slot(oldest);
        }
        inner.serial += 1;
        let entry = Entry {
            key: key.into(),
            refs: 0,
            expire: self.expiry(now),
            serial: inner.serial,
            values: self.conf.layout.fresh(),
        };
        let slot = match inner.free.pop() {
            Some(slot) => {
                inner.slots[slot] = Some(entry);
                slot
            }
            None => {
                inner.slots.push(Some(entry));
                inner.slots.len() - 1
            }
        };
        inner.map.insert(key.into(), slot);
        inner.idle.insert((self.expiry(now), slot));
        Some(slot)
    }

    /// Refreshes the entry's expiry, keeping the idle order in step.
    fn touch(&self, inner: &mut Inner, slot: usize, now: u64) {
        let expire = self.expiry(now);
        let Some(entry) = inner.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let (old, refs) = (entry.expire, entry.refs);
        entry.expire = expire;
        if refs == 0 {
            inner.idle.remove(&(old, slot));
            inner.idle.insert((expire, slot));
        }
    }

    fn with_slot<R>(
        &self,
        inner: &mut Inner,
        slot: usize,
        now: u64,
        f: impl FnOnce(&mut Data<'_>, u32) -> R,
    ) -> Option<R> {
        let entry = inner.slots.get_mut(slot).and_then(Option::as_mut)?;
        let refs = entry.refs;
        let mut data = Data {
            layout: &self.conf.layout,
            values: &mut entry.values,
            now,
        };
        Some(f(&mut data, refs))
    }

    /// Starts tracking `key` (creating its entry): the entry stays until [`Table::release`].
    /// `None` when the table is full of entries in use (or `nopurge`).
    pub fn track(&self, key: &[u8], now: u64) -> Option<EntryId> {
        let mut inner = self.lock();
        let slot = self.find(&mut inner, key, now, true)?;
        self.touch(&mut inner, slot, now);
        let entry = inner.slots.get_mut(slot).and_then(Option::as_mut)?;
        if entry.refs == 0 {
            let expire = entry.expire;
            inner.idle.remove(&(expire, slot));
        }
        if let Some(entry) = inner.slots.get_mut(slot).and_then(Option::as_mut) {
            entry.refs += 1;
        }
        Some(EntryId(slot))
    }

    /// Updates a tracked entry with `f` (which also sees the number of trackers).
    pub fn update<R>(
        &self,
        id: &EntryId,
        now: u64,
        f: impl FnOnce(&mut Data<'_>, u32) -> R,
    ) -> Option<R> {
        let mut inner = self.lock();
        self.touch(&mut inner, id.0, now);
        self.with_slot(&mut inner, id.0, now, f)
    }

    /// Reads or updates a tracked entry without refreshing its expiry.
    pub fn peek<R>(
        &self,
        id: &EntryId,
        now: u64,
        f: impl FnOnce(&mut Data<'_>, u32) -> R,
    ) -> Option<R> {
        let mut inner = self.lock();
        self.with_slot(&mut inner, id.0, now, f)
    }

    /// Stops tracking: `f` updates the entry last (`conn_cur`), then it may expire again.
    pub fn release(&self, id: EntryId, now: u64, f: impl FnOnce(&mut Data<'_>)) {
        let mut inner = self.lock();
        let slot = id.0;
        self.with_slot(&mut inner, slot, now, |d, _| f(d));
        let expire = self.expiry(now);
        if let Some(entry) = inner.slots.get_mut(slot).and_then(Option::as_mut) {
            entry.refs = entry.refs.saturating_sub(1);
            entry.expire = expire;
            if entry.refs == 0 {
                inner.idle.insert((expire, slot));
            }
        }
    }

    /// Reads (or updates) the entry of `key` if there is one, refreshing its expiry when
    /// `touch`.
    pub fn lookup<R>(
        &self,
        key: &[u8],
        now: u64,
        touch: bool,
        f: impl FnOnce(&mut Data<'_>, u32) -> R,
    ) -> Option<R> {
        let mut inner = self.lock();
        let slot = self.find(&mut inner, key, now, false)?;
        if touch {
            self.touch(&mut inner, slot, now);
        }
        self.with_slot(&mut inner, slot, now, f)
    }

    /// Updates the entry of `key`, creating it if needed (`src_inc_gpc0`, `set table`);
    /// `None` when the table cannot take a new entry.
    pub fn upsert<R>(
        &self,
        key: &[u8],
        now: u64,
        f: impl FnOnce(&mut Data<'_>, u32) -> R,
    ) -> Option<R> {
        let mut inner = self.lock();
        let slot = self.find(&mut inner, key, now, true)?;
        self.touch(&mut inner, slot, now);
        self.with_slot(&mut inner, slot, now, f)
    }

    /// Hands every entry to `f`, in key order for a stable output.
    pub fn for_each(&self, now: u64, mut f: impl FnMut(EntryView<'_>)) {
        let mut inner = self.lock();
        self.purge_expired(&mut inner, now);
        let mut order: Vec<(Box<[u8]>, usize)> =
            inner.map.iter().map(|(k, &s)| (k.clone(), s)).collect();
        order.sort();
        let has_expire = self.conf.expire.is_some();
        for (_, slot) in order {
            let Some(entry) = inner.slots.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            f(EntryView {
                serial: entry.serial,
                key: &entry.key,
                refs: entry.refs,
                expires_in: if has_expire {
                    entry.expire.saturating_sub(now)
                } else {
                    0
                },
                data: Data {
                    layout: &self.conf.layout,
                    values: &mut entry.values,
                    now,
                },
            });
        }
    }

    /// Removes the entries nobody tracks for which `remove` is true; returns how many.
    pub fn remove_where(
        &self,
        now: u64,
        mut remove: impl FnMut(&[u8], &mut Data<'_>) -> bool,
    ) -> usize {
        let mut inner = self.lock();
        self.purge_expired(&mut inner, now);
        let idle: Vec<(u64, usize)> = inner.idle.iter().copied().collect();
        let mut removed = 0;
        for (_, slot) in idle {
            let Some(entry) = inner.slots.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            let mut data = Data {
                layout: &self.conf.layout,
                values: &mut entry.values,
                now,
            };
            if remove(&entry.key, &mut data) {
                inner.remove_slot(slot);
                removed += 1;
            }
        }
        removed
    }
}

impl Inner {
    fn remove_slot(&mut self, slot: usize) {
        if let Some(entry) = self.slots.get_mut(slot).and_then(Option::take) {
            self.idle.remove(&(entry.expire, slot));
            self.map.remove(&entry.key);
            self.free.push(slot);
        }
    }
}

#[cfg(test)]
mod tests;
