//! An indexed binary min-heap of server indices, the ordered structure under `roundrobin`
//! (keyed by virtual deadline, [`crate::rr`]) and `leastconn` (keyed by load, [`crate::leastconn`]).
//!
//! "Indexed" means the heap knows where each server sits, so a server event (weight change,
//! connection started or ended) re-keys that one server in O(log n) instead of rebuilding
//! anything. Storage is sized for the backend's servers once; pushes never reallocate, so picks
//! and events do not allocate. Equal keys are ordered by server index, which makes every choice
//! deterministic (and testable).

/// Marks a server that is not in the heap.
const ABSENT: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub(crate) struct IndexedHeap<K> {
    /// The heap array: (key, server), the minimum first.
    slots: Vec<(K, u32)>,
    /// Server index → position in `slots`, or `ABSENT`.
    pos: Vec<u32>,
}

impl<K: Ord + Copy> IndexedHeap<K> {
    /// An empty heap for servers `0..servers`.
    pub(crate) fn new(servers: usize) -> Self {
        IndexedHeap {
            slots: Vec::with_capacity(servers),
            pos: vec![ABSENT; servers],
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn contains(&self, server: usize) -> bool {
        self.pos.get(server).is_some_and(|&p| p != ABSENT)
    }

    /// The key of `server`, if it is in the heap.
    pub(crate) fn key(&self, server: usize) -> Option<K> {
        let p = *self.pos.get(server)?;
        self.slots.get(p as usize).map(|slot| slot.0)
    }

    /// Inserts `server` with `key`, or changes its key if it is already in. Servers outside
    /// `0..servers` are ignored.
    pub(crate) fn set(&mut self, server: usize, key: K) {
        let Some(&p) = self.pos.get(server) else {
            return;
        };
        if p == ABSENT {
            let at = self.slots.len();
            self.slots.push((key, server as u32));
            self.pos[server] = at as u32;
            self.sift_up(at);
        } else {
            let p = p as usize;
            let old = self.slots[p].0;
            self.slots[p].0 = key;
            if key < old {
                self.sift_up(p);
            } else {
                self.sift_down(p);
            }
        }
    }

    /// Takes `server` out of the heap (no effect if it is not in).
    pub(crate) fn remove(&mut self, server: usize) {
        let Some(&p) = self.pos.get(server) else {
            return;
        };
        if p == ABSENT {
            return;
        }
        let p = p as usize;
        let last = self.slots.len() - 1;
        self.swap(p, last);
        self.slots.pop();
        self.pos[server] = ABSENT;
        if p < self.slots.len() {
            // The element moved into the hole may belong higher or lower.
            self.sift_up(p);
            self.sift_down(p);
        }
    }

    /// Empties the heap.
    #[cfg(test)]
    pub(crate) fn clear(&mut self) {
        for &(_, server) in &self.slots {
            self.pos[server as usize] = ABSENT;
        }
        self.slots.clear();
    }

    /// The server with the smallest key other than `avoid`, falling back to `avoid` itself when
    /// it is the only one. O(1): when the root is to be avoided, the next smallest is one of the
    /// root's two children.
    pub(crate) fn min_avoiding(&self, avoid: Option<usize>) -> Option<usize> {
        let top = self.slots.first()?.1 as usize;
        if Some(top) != avoid {
            return Some(top);
        }
        let second = match (self.slots.get(1), self.slots.get(2)) {
            (Some(a), Some(b)) => Some(if a <= b { a.1 } else { b.1 }),
            (Some(a), None) => Some(a.1),
            _ => None,
        };
        Some(second.map_or(top, |s| s as usize))
    }

    fn sift_up(&mut self, mut p: usize) {
        while p > 0 {
            let parent = (p - 1) / 2;
            if self.slots[p] < self.slots[parent] {
                self.swap(p, parent);
                p = parent;
            } else {
                break;
            }
        }
    }

    fn sift_down(&mut self, mut p: usize) {
        let len = self.slots.len();
        loop {
            let left = 2 * p + 1;
            if left >= len {
                break;
            }
            let right = left + 1;
            let child = if right < len && self.slots[right] < self.slots[left] {
                right
            } else {
                left
            };
            if self.slots[child] < self.slots[p] {
                self.swap(p, child);
                p = child;
            } else {
                break;
            }
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.slots.swap(a, b);
        self.pos[self.slots[a].1 as usize] = a as u32;
        self.pos[self.slots[b].1 as usize] = b as u32;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Pops everything in order (by repeatedly removing the minimum).
    fn drain(heap: &mut IndexedHeap<u32>) -> Vec<usize> {
        let mut out = Vec::new();
        while let Some(top) = heap.min_avoiding(None) {
            out.push(top);
            heap.remove(top);
        }
        out
    }

    #[test]
    fn orders_by_key_then_index() {
        let mut heap = IndexedHeap::new(6);
        for (server, key) in [(0, 5), (1, 3), (2, 9), (3, 3), (4, 1), (5, 7)] {
            heap.set(server, key);
        }
        assert_eq!(heap.len(), 6);
        assert_eq!(drain(&mut heap), [4, 1, 3, 0, 5, 2]);
        assert_eq!(heap.len(), 0);
    }

    #[test]
    fn rekeying_and_removal_keep_the_order() {
        // A small deterministic generator, so the test covers many shapes without a crate.
        let mut seed = 0x1234_5678u32;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        let n = 50;
        let mut heap = IndexedHeap::new(n);
        let mut model: Vec<Option<u32>> = vec![None; n];
        for _ in 0..5000 {
            let server = (next() as usize) % n;
            if next() % 4 == 0 {
                heap.remove(server);
                model[server] = None;
            } else {
                let key = next() % 100;
                heap.set(server, key);
                model[server] = Some(key);
            }
            let expected = model
                .iter()
                .enumerate()
                .filter_map(|(s, k)| k.map(|k| (k, s)))
                .min()
                .map(|(_, s)| s);
            assert_eq!(heap.min_avoiding(None), expected);
            for (s, k) in model.iter().enumerate() {
                assert_eq!(heap.key(s), *k);
                assert_eq!(heap.contains(s), k.is_some());
            }
        }
    }

    #[test]
    fn avoiding_the_minimum_gives_the_second() {
        let mut heap = IndexedHeap::new(4);
        heap.set(0, 10);
        assert_eq!(heap.min_avoiding(Some(0)), Some(0));
        heap.set(1, 20);
        heap.set(2, 15);
        heap.set(3, 30);
        assert_eq!(heap.min_avoiding(Some(0)), Some(2));
        assert_eq!(heap.min_avoiding(Some(1)), Some(0));
        heap.clear();
        assert_eq!(heap.min_avoiding(None), None);
        assert!(!heap.contains(0));
    }

    #[test]
    fn out_of_range_servers_are_ignored() {
        let mut heap = IndexedHeap::new(2);
        heap.set(5, 1);
        heap.remove(7);
        assert_eq!(heap.len(), 0);
        assert_eq!(heap.key(9), None);
    }
}
