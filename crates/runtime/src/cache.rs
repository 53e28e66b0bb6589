//! The stores of the `cache` sections (configuration.txt §6): whole responses kept in memory
//! under the key of the request that fetched them, shared by every event loop.
//!
//! A store counts what it holds in 1 KiB blocks, as HAProxy counts it, and makes room for a
//! new response by dropping the oldest ones first, whether fresh or not. An expired response
//! is dropped when a lookup meets it. Entries are immutable once stored (`Arc`), so a
//! response being served is never changed under its reader, and the lock is held only to
//! look up, insert or list. The proxy decides what may be stored and serves it
//! (`sluice_proxy::http::cache`); read [`Cache`] first.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};

use sluice_config::cache::{CACHE_BLOCK_SIZE, CacheConf};

/// The key of a cached response: the SHA-1 of the request's URI, made absolute with its
/// Host field when it was not (`https://` + host + path), as HAProxy keys it.
pub type CacheKey = [u8; 20];

/// The key of the concatenation of `parts` (HAProxy's hash of the absolute URI).
pub fn key_of(parts: &[&[u8]]) -> CacheKey {
    use sha1::Digest as _;
    let mut hasher = sha1::Sha1::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// One stored response.
#[derive(Debug)]
pub struct CachedResponse {
    /// The response head as the `cache-store` rule saw it (status line to the empty line),
    /// without any `Age` field.
    pub head: Box<[u8]>,
    /// The body as it was sent to the client: the payload for a response of known length,
    /// the chunked coding (trailers included) for a chunked one.
    pub body: Box<[u8]>,
    /// When it was stored (seconds since the epoch).
    pub stored_at: u64,
    /// When it stops being fresh (seconds since the epoch).
    pub expires_at: u64,
    /// The `Age` the server gave it, added to the time it spends here.
    pub origin_age: u64,
    /// Its `ETag` value, for `If-None-Match`.
    pub etag: Option<Box<[u8]>>,
    /// Its `Last-Modified` date (or else `Date`, or else the time it was stored), for
    /// `If-Modified-Since`.
    pub last_modified: u64,
}

impl CachedResponse {
    /// Head and body bytes.
    pub fn size(&self) -> u64 {
        (self.head.len() + self.body.len()) as u64
    }

    fn blocks(&self) -> u64 {
        self.size().div_ceil(CACHE_BLOCK_SIZE).max(1)
    }

    /// The `Age` to send at `now`: the time spent here plus the server's.
    pub fn age(&self, now: u64) -> u64 {
        now.saturating_sub(self.stored_at) + self.origin_age
    }
}

/// A `cache` section's store.
#[derive(Debug)]
pub struct Cache {
    /// The section.
    pub conf: CacheConf,
    store: Mutex<Store>,
}

#[derive(Debug, Default)]
struct Store {
    entries: HashMap<CacheKey, Stored>,
    /// Keys in the order they were stored (a replaced key's old place stays until it comes
    /// first, then is skipped: its serial no longer matches).
    order: VecDeque<(CacheKey, u64)>,
    used_blocks: u64,
    next_serial: u64,
}

#[derive(Debug)]
struct Stored {
    response: Arc<CachedResponse>,
    serial: u64,
}

impl Cache {
    /// An empty store for `conf`.
    pub fn new(conf: CacheConf) -> Cache {
        Cache {
            conf,
            store: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Store> {
        // Every change leaves the store whole before it can panic, so a poisoned lock is
        // still usable.
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn total_blocks(&self) -> u64 {
        self.conf.total_size / CACHE_BLOCK_SIZE
    }

    /// The response stored under `key`, if it is still fresh at `now` (seconds since the
    /// epoch); a stale one is dropped.
    pub fn lookup(&self, key: &CacheKey, now: u64) -> Option<Arc<CachedResponse>> {
        let mut store = self.lock();
        let stored = store.entries.get(key)?;
        if stored.response.expires_at > now {
            return Some(Arc::clone(&stored.response));
        }
        let blocks = stored.response.blocks();
        store.entries.remove(key);
        store.used_blocks -= blocks;
        None
    }

    /// Stores `response` under `key`, replacing what was there, after dropping the oldest
    /// responses until it fits; false if it is larger than `max-object-size`.
    pub fn insert(&self, key: CacheKey, response: CachedResponse) -> bool {
        if response.size() > self.conf.max_object_size {
            return false;
        }
        let blocks = response.blocks();
        let total = self.total_blocks();
        let mut store = self.lock();
        if let Some(old) = store.entries.remove(&key) {
            store.used_blocks -= old.response.blocks();
        }
        while store.used_blocks + blocks > total {
            let Some((oldest, serial)) = store.order.pop_front() else {
                break;
            };
            if store
                .entries
                .get(&oldest)
                .is_some_and(|s| s.serial == serial)
            {
                let removed = store.entries.remove(&oldest).map(|s| s.response.blocks());
                store.used_blocks -= removed.unwrap_or(0);
            }
        }
        let serial = store.next_serial;
        store.next_serial += 1;
        store.order.push_back((key, serial));
        store.used_blocks += blocks;
        let response = Arc::new(response);
        store.entries.insert(key, Stored { response, serial });
        // The order list keeps a place per insertion: trimmed when it outgrows the entries
        // by much, so a key stored again and again does not grow it for ever.
        if store.order.len() > 2 * store.entries.len() + 64 {
            let Store { order, entries, .. } = &mut *store;
            order.retain(|(k, s)| entries.get(k).is_some_and(|e| e.serial == *s));
        }
        true
    }

    /// How many responses are stored.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// `show cache`: the cache's line, then one per fresh response at `now`, in HAProxy's
    /// layout (the addresses are those of Sluice's objects; `vary` is always zero, since
    /// secondary keys are not supported).
    pub fn show(&self, now: u64, out: &mut String) {
        let store = self.lock();
        let available = self.total_blocks().saturating_sub(store.used_blocks);
        let _ = writeln!(
            out,
            "{:p}: {} (shctx:{:p}, available blocks:{available})",
            self, self.conf.name, &self.store
        );
        for (key, serial) in &store.order {
            let Some(stored) = store.entries.get(key).filter(|s| s.serial == *serial) else {
                continue;
            };
            let response = &stored.response;
            if response.expires_at <= now {
                continue;
            }
            let hash = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
            let _ = writeln!(
                out,
                "{:p} hash:{hash} vary:0x{:016x} size:{} ({} blocks), refcount:{}, expire:{}",
                Arc::as_ptr(response),
                0,
                response.size(),
                response.blocks(),
                Arc::strong_count(response) - 1,
                response.expires_at - now,
            );
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cache(total_kib: u64, max_object: u64) -> Cache {
        Cache::new(CacheConf {
            name: "c".into(),
            total_size: total_kib * 1024,
            max_object_size: max_object,
            max_age: 60,
        })
    }

    fn response(size: usize, stored_at: u64, fresh_for: u64) -> CachedResponse {
        CachedResponse {
            head: b"HTTP/1.1 200 OK\r\n\r\n".to_vec().into(),
            body: vec![b'x'; size.saturating_sub(19)].into(),
            stored_at,
            expires_at: stored_at + fresh_for,
            origin_age: 0,
            etag: None,
            last_modified: stored_at,
        }
    }

    #[test]
    fn serves_fresh_responses_and_drops_stale_ones() {
        let c = cache(4, 2048);
        assert!(c.insert([1; 20], response(100, 1000, 10)));
        assert_eq!(c.lookup(&[1; 20], 1009).unwrap().body.len(), 81);
        assert!(c.lookup(&[1; 20], 1010).is_none());
        assert_eq!(c.len(), 0, "the stale response is gone");
        assert!(c.lookup(&[2; 20], 1000).is_none());
    }

    #[test]
    fn the_oldest_make_room() {
        // Four blocks: two responses of two blocks each fill it.
        let c = cache(4, 2048);
        for (i, key) in [[1; 20], [2; 20], [3; 20]].into_iter().enumerate() {
            assert!(c.insert(key, response(1500, 1000 + i as u64, 60)));
        }
        assert!(c.lookup(&[1; 20], 1005).is_none(), "the oldest was dropped");
        assert!(c.lookup(&[2; 20], 1005).is_some());
        assert!(c.lookup(&[3; 20], 1005).is_some());
        let mut shown = String::new();
        c.show(1005, &mut shown);
        assert!(shown.contains("available blocks:0"), "{shown}");
        assert_eq!(shown.matches("size:1500 (2 blocks)").count(), 2, "{shown}");
    }

    #[test]
    fn replacing_a_key_frees_its_blocks_and_keeps_the_order_short() {
        let c = cache(4, 2048);
        for second in 0..500 {
            assert!(c.insert([7; 20], response(1500, second, 60)));
        }
        assert_eq!(c.len(), 1);
        assert!(c.lock().order.len() <= 2 + 64);
        assert_eq!(c.lock().used_blocks, 2);
        let mut shown = String::new();
        c.show(0, &mut shown);
        assert_eq!(shown.lines().count(), 2, "listed once: {shown}");
    }

    #[test]
    fn refuses_objects_over_the_limit() {
        let c = cache(4, 1000);
        assert!(!c.insert([1; 20], response(1001, 0, 60)));
        assert!(c.insert([1; 20], response(1000, 0, 60)));
    }

    #[test]
    fn age_adds_the_servers() {
        let mut r = response(10, 100, 60);
        r.origin_age = 5;
        assert_eq!(r.age(130), 35);
    }
}
