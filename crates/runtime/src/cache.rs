//! The stores of the `cache` sections (configuration.txt §6): whole responses kept in memory
//! under the key of the request that fetched them, shared by every event loop.
//!
//! A store counts what it holds in 1 KiB blocks, as HAProxy counts it, and makes room for a
//! new response by dropping the oldest ones first, whether fresh or not. An expired response
//! is dropped when a lookup meets it. Entries are immutable once stored (`Arc`), so a
//! response being served is never changed under its reader, and the lock is held only to
//! look up, insert or list. The proxy decides what may be stored and serves it
//! (`sluice_proxy::http::cache`); read [`Cache`] first.
//!
//! With `process-vary on`, one URI may have several responses, each a [`Variant`]: the
//! request fields its `Vary` named (`Accept-Encoding`, `Referer`) and what they had to be.
//! A lookup serves the oldest variant the request fits ([`Variant::fits`]); a URI holds at
//! most `max-secondary-entries` of them, and a response without `Vary` replaces them all.

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

/// What a stored response varies on (`process-vary on`), and the values of the request
/// that fetched it. The default varies on nothing: every request of its URI fits it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Variant {
    /// `Vary` names `Accept-Encoding`: the request must accept every content coding in
    /// `codings`.
    pub by_coding: bool,
    /// The response's content codings ([`crate::cache`]'s callers build the bit sets).
    pub codings: u16,
    /// `Vary` names `Referer`: the request's `Referer` must hash to `referer`.
    pub by_referer: bool,
    /// The hash of the `Referer` of the request that fetched it (0 without one).
    pub referer: u32,
}

/// The fields of a request a [`Variant`] is chosen by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestVariant {
    /// The content codings the request accepts, as a bit set.
    pub accepted: u16,
    /// The hash of its `Referer` (0 without one).
    pub referer: u32,
}

impl Variant {
    /// True if the response varies on some field of the request.
    pub fn varies(&self) -> bool {
        self.by_coding || self.by_referer
    }

    /// Whether a request may be served this variant: it accepts the variant's codings and
    /// has its referer, for the fields the variant varies on. `None` (a request whose fields
    /// could not be read, or a cache without `process-vary`) fits only a response that
    /// varies on nothing.
    pub fn fits(&self, request: Option<&RequestVariant>) -> bool {
        match request {
            None => !self.varies(),
            Some(request) => {
                (!self.by_coding || self.codings & !request.accepted == 0)
                    && (!self.by_referer || self.referer == request.referer)
            }
        }
    }

    /// The 8 bytes `show cache` prints: the codings, then the referer's hash, each as 4
    /// little-endian bytes and 0 when not varied on (HAProxy 2.6 prints its secondary key
    /// this way).
    fn shown(&self) -> u64 {
        let codings = if self.by_coding {
            u32::from(self.codings)
        } else {
            0
        };
        let referer = if self.by_referer { self.referer } else { 0 };
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&codings.to_le_bytes());
        bytes[4..].copy_from_slice(&referer.to_le_bytes());
        u64::from_be_bytes(bytes)
    }
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
    /// The responses of each URI: one, or with `process-vary` its variants, oldest first.
    entries: HashMap<CacheKey, Vec<Stored>>,
    /// Keys in the order they were stored (a replaced key's old place stays until it comes
    /// first, then is skipped: its serial no longer matches).
    order: VecDeque<(CacheKey, u64)>,
    used_blocks: u64,
    next_serial: u64,
}

#[derive(Debug)]
struct Stored {
    response: Arc<CachedResponse>,
    variant: Variant,
    serial: u64,
}

impl Store {
    /// Drops the variants of `key` that `drop` picks, and the key once it has none.
    fn remove_where(&mut self, key: &CacheKey, drop: impl Fn(&Stored) -> bool) {
        let Some(variants) = self.entries.get_mut(key) else {
            return;
        };
        let mut freed = 0;
        variants.retain(|s| {
            let dropped = drop(s);
            if dropped {
                freed += s.response.blocks();
            }
            !dropped
        });
        self.used_blocks -= freed;
        if variants.is_empty() {
            self.entries.remove(key);
        }
    }
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

    /// The oldest response stored under `key` that `request` fits ([`Variant::fits`]), if
    /// it is still fresh at `now` (seconds since the epoch); the stale variants of the key
    /// are dropped.
    pub fn lookup(
        &self,
        key: &CacheKey,
        request: Option<&RequestVariant>,
        now: u64,
    ) -> Option<Arc<CachedResponse>> {
        let mut store = self.lock();
        store.remove_where(key, |s| s.response.expires_at <= now);
        let variants = store.entries.get(key)?;
        let found = variants.iter().find(|s| s.variant.fits(request))?;
        Some(Arc::clone(&found.response))
    }

    /// Stores `response` under `key` after dropping the oldest responses until it fits, and
    /// says whether it did. A response that varies on nothing replaces every response of
    /// its key; a variant replaces one with the same requirements (and one that varies on
    /// nothing), and is refused when its key already has `max-secondary-entries` fresh
    /// variants at `now`, or when it is larger than `max-object-size`.
    pub fn insert(
        &self,
        key: CacheKey,
        response: CachedResponse,
        variant: Variant,
        now: u64,
    ) -> bool {
        if response.size() > self.conf.max_object_size {
            return false;
        }
        let blocks = response.blocks();
        let total = self.total_blocks();
        let mut store = self.lock();
        if variant.varies() {
            store.remove_where(&key, |s| {
                s.response.expires_at <= now || !s.variant.varies() || s.variant == variant
            });
            let count = store.entries.get(&key).map_or(0, Vec::len);
            if count >= self.conf.max_secondary_entries as usize {
                return false;
            }
        } else {
            store.remove_where(&key, |_| true);
        }
        while store.used_blocks + blocks > total {
            let Some((oldest, serial)) = store.order.pop_front() else {
                break;
            };
            store.remove_where(&oldest, |s| s.serial == serial);
        }
        let serial = store.next_serial;
        store.next_serial += 1;
        store.order.push_back((key, serial));
        store.used_blocks += blocks;
        let response = Arc::new(response);
        let stored = Stored {
            response,
            variant,
            serial,
        };
        store.entries.entry(key).or_default().push(stored);
        // The order list keeps a place per insertion: trimmed when it outgrows the entries
        // by much, so a key stored again and again does not grow it for ever.
        if store.order.len() > 2 * store.entries.len() + 64 {
            let Store { order, entries, .. } = &mut *store;
            order.retain(|(k, s)| {
                entries
                    .get(k)
                    .is_some_and(|variants| variants.iter().any(|e| e.serial == *s))
            });
        }
        true
    }

    /// How many responses are stored.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().entries.values().map(Vec::len).sum()
    }

    /// `show cache`: the cache's line, then one per fresh response at `now`, in HAProxy's
    /// layout (the addresses are those of Sluice's objects; `vary` is the variant's
    /// requirements, 0 for a response that varies on nothing). Every variant of a URI is
    /// listed, where HAProxy lists only its first.
    pub fn show(&self, now: u64, out: &mut String) {
        let store = self.lock();
        let available = self.total_blocks().saturating_sub(store.used_blocks);
        let _ = writeln!(
            out,
            "{:p}: {} (shctx:{:p}, available blocks:{available})",
            self, self.conf.name, &self.store
        );
        for (key, serial) in &store.order {
            let Some(stored) = store
                .entries
                .get(key)
                .and_then(|variants| variants.iter().find(|s| s.serial == *serial))
            else {
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
                stored.variant.shown(),
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

    /// A response that varies on nothing.
    const NONE: Variant = Variant {
        by_coding: false,
        codings: 0,
        by_referer: false,
        referer: 0,
    };

    fn cache(total_kib: u64, max_object: u64) -> Cache {
        Cache::new(CacheConf {
            name: "c".into(),
            total_size: total_kib * 1024,
            max_object_size: max_object,
            max_age: 60,
            process_vary: true,
            max_secondary_entries: 2,
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
        assert!(c.insert([1; 20], response(100, 1000, 10), NONE, 1000));
        assert_eq!(c.lookup(&[1; 20], None, 1009).unwrap().body.len(), 81);
        assert!(c.lookup(&[1; 20], None, 1010).is_none());
        assert_eq!(c.len(), 0, "the stale response is gone");
        assert!(c.lookup(&[2; 20], None, 1000).is_none());
    }

    #[test]
    fn the_oldest_make_room() {
        // Four blocks: two responses of two blocks each fill it.
        let c = cache(4, 2048);
        for (i, key) in [[1; 20], [2; 20], [3; 20]].into_iter().enumerate() {
            assert!(c.insert(key, response(1500, 1000 + i as u64, 60), NONE, 1000));
        }
        assert!(
            c.lookup(&[1; 20], None, 1005).is_none(),
            "the oldest was dropped"
        );
        assert!(c.lookup(&[2; 20], None, 1005).is_some());
        assert!(c.lookup(&[3; 20], None, 1005).is_some());
        let mut shown = String::new();
        c.show(1005, &mut shown);
        assert!(shown.contains("available blocks:0"), "{shown}");
        assert_eq!(shown.matches("size:1500 (2 blocks)").count(), 2, "{shown}");
    }

    #[test]
    fn replacing_a_key_frees_its_blocks_and_keeps_the_order_short() {
        let c = cache(4, 2048);
        for second in 0..500 {
            assert!(c.insert([7; 20], response(1500, second, 60), NONE, second));
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
        assert!(!c.insert([1; 20], response(1001, 0, 60), NONE, 0));
        assert!(c.insert([1; 20], response(1000, 0, 60), NONE, 0));
    }

    #[test]
    fn age_adds_the_servers() {
        let mut r = response(10, 100, 60);
        r.origin_age = 5;
        assert_eq!(r.age(130), 35);
    }

    #[test]
    fn variants_are_chosen_by_the_request_and_bounded_per_uri() {
        const GZIP: u16 = 0x1;
        const BR: u16 = 0x4;
        const IDENTITY: u16 = 0x100;
        let c = cache(64, 2048);
        let key = [3; 20];
        let by_coding = |codings| Variant {
            by_coding: true,
            codings,
            ..NONE
        };
        let accepting = |accepted| RequestVariant {
            accepted,
            referer: 0,
        };
        assert!(c.insert(key, response(100, 0, 60), by_coding(GZIP), 0));
        assert!(c.insert(key, response(200, 0, 60), by_coding(IDENTITY), 0));
        // A request is served the oldest variant whose codings it all accepts.
        let found = |accepted| c.lookup(&key, Some(&accepting(accepted)), 1);
        assert_eq!(found(GZIP | IDENTITY).unwrap().size(), 100);
        assert_eq!(found(BR | IDENTITY).unwrap().size(), 200);
        assert!(found(BR).is_none());
        // Without its fields (no process-vary), only a response varying on nothing fits.
        assert!(c.lookup(&key, None, 1).is_none());
        // The same requirements replace a variant; a third one is over the limit of 2.
        assert!(c.insert(key, response(150, 0, 60), by_coding(GZIP), 0));
        assert!(!c.insert(key, response(100, 0, 60), by_coding(BR), 0));
        assert_eq!(c.len(), 2);
        // Referers must be equal.
        let by_referer = Variant {
            by_referer: true,
            referer: 7,
            ..NONE
        };
        assert!(c.insert([4; 20], response(100, 0, 60), by_referer, 0));
        let from = |referer| RequestVariant {
            accepted: u16::MAX,
            referer,
        };
        assert!(c.lookup(&[4; 20], Some(&from(7)), 1).is_some());
        assert!(c.lookup(&[4; 20], Some(&from(8)), 1).is_none());
        // A response varying on nothing replaces every variant of its URI.
        assert!(c.insert(key, response(300, 0, 60), NONE, 0));
        assert_eq!(found(BR).unwrap().size(), 300);
        assert_eq!(c.len(), 2);
        let mut shown = String::new();
        c.show(1, &mut shown);
        assert!(shown.contains("vary:0x0000000007000000 "), "{shown}");
    }
}
