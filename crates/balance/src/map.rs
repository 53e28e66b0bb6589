//! The static map under `balance static-rr` and `hash-type map-based` (configuration.txt §4.2
//! "balance", "hash-type"): an array holding each usable server as many times as its weight,
//! interleaved. `static-rr` walks it with a cursor; a map-based hash takes slot `hash % length`.
//!
//! The map is built when the tier's membership changes (a server event), never per request:
//! picks are O(1) (plus skipping full servers). It is filled the way HAProxy fills its map, so a
//! map-based hash sends every key to the same server as HAProxy does (checked against HAProxy 2.6
//! with weights 3,1,2 and 5,1,1, see the crate's `tests/compat.rs`): for each slot, every member's
//! score grows by its weight, the member whose `(score + total) / total` is highest takes the slot
//! (the lowest index among equals) and gives back `total`. Building costs O(members × total
//! weight), which is why only events rebuild.
//!
//! Weights here are static by design ("changing a server's weight on the fly will have no
//! effect"); the [`Balancer`](crate::Balancer) passes the configured weight, or 0 when the
//! server is down or set to weight 0.

/// The static map of one tier (active or backup servers).
#[derive(Clone, Debug)]
pub(crate) struct StaticMap {
    /// Member weight per server; 0 = not a member.
    weight: Vec<u32>,
    /// Slot → server.
    map: Vec<u32>,
    /// The next slot `static-rr` (or a missing hash key) uses.
    cursor: usize,
    /// Scratch space for [`Self::rebuild`], kept to avoid reallocating on every event.
    members: Vec<u32>,
    score: Vec<i64>,
}

impl StaticMap {
    pub(crate) fn new(servers: usize) -> Self {
        StaticMap {
            weight: vec![0; servers],
            map: Vec::new(),
            cursor: 0,
            members: Vec::with_capacity(servers),
            score: vec![0; servers],
        }
    }

    /// Sets `server`'s weight (0 takes it out) and rebuilds the map if anything changed.
    pub(crate) fn set_weight(&mut self, server: usize, weight: u32) {
        if self.store(server, weight) {
            self.rebuild();
        }
    }

    /// Sets a weight without rebuilding; returns whether it changed. For bulk set-up, followed by
    /// [`Self::rebuild`].
    pub(crate) fn store(&mut self, server: usize, weight: u32) -> bool {
        match self.weight.get_mut(server) {
            Some(w) if *w != weight => {
                *w = weight;
                true
            }
            _ => false,
        }
    }

    pub(crate) fn rebuild(&mut self) {
        self.members.clear();
        self.members.extend(
            self.weight
                .iter()
                .enumerate()
                .filter(|(_, w)| **w > 0)
                .map(|(i, _)| i as u32),
        );
        let total: i64 = self.weight.iter().map(|&w| i64::from(w)).sum();
        self.map.clear();
        self.score.fill(0);
        if total == 0 {
            self.cursor = 0;
            return;
        }
        self.map.reserve(total as usize);
        for _ in 0..total {
            let mut best: Option<(u32, i64)> = None;
            for &m in &self.members {
                let m_at = m as usize;
                self.score[m_at] += i64::from(self.weight[m_at]);
                let rank = (self.score[m_at] + total).div_euclid(total);
                if best.is_none_or(|(_, top)| rank > top) {
                    best = Some((m, rank));
                }
            }
            if let Some((m, _)) = best {
                self.score[m as usize] -= total;
                self.map.push(m);
            }
        }
        self.cursor %= self.map.len().max(1);
    }

    /// The next server of the static rotation that has room, avoiding `avoid` unless it is the
    /// only one with room; `None` when every member is full or there is none.
    pub(crate) fn next(
        &mut self,
        avoid: Option<usize>,
        has_room: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let len = self.map.len();
        let mut fallback = None;
        for _ in 0..len {
            let server = self.map[self.cursor % len] as usize;
            self.cursor = (self.cursor + 1) % len;
            if !has_room(server) {
                continue;
            }
            if Some(server) == avoid {
                fallback = Some(server);
                continue;
            }
            return Some(server);
        }
        fallback
    }

    /// The server of slot `hash % length`, or, when that is `avoid`, the next slot's server that
    /// is not. Full servers are not skipped: a hash keeps its affinity (§4.2
    /// "hash-preserve-affinity", default `always`), and the caller queues on the server.
    pub(crate) fn by_hash(&self, hash: u32, avoid: Option<usize>) -> Option<usize> {
        let len = self.map.len();
        if len == 0 {
            return None;
        }
        let at = (u64::from(hash) % len as u64) as usize;
        let first = self.map[at] as usize;
        if Some(first) != avoid {
            return Some(first);
        }
        (1..len)
            .map(|step| self.map[(at + step) % len] as usize)
            .find(|&s| Some(s) != avoid)
            .or(Some(first))
    }

    #[cfg(test)]
    pub(crate) fn slots(&self) -> Vec<usize> {
        self.map.iter().map(|&s| s as usize).collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn map(weights: &[u32]) -> StaticMap {
        let mut m = StaticMap::new(weights.len());
        for (i, &w) in weights.iter().enumerate() {
            m.store(i, w);
        }
        m.rebuild();
        m
    }

    #[test]
    fn fills_like_haproxy() {
        // Slot orders observed on HAProxy 2.6 (`balance hdr` with keys hashing to each slot).
        assert_eq!(map(&[3, 1, 2]).slots(), [0, 0, 2, 0, 1, 2]);
        assert_eq!(map(&[5, 1, 1]).slots(), [0, 0, 0, 1, 0, 0, 2]);
        assert_eq!(map(&[1, 1, 1]).slots(), [0, 1, 2]);
        assert_eq!(map(&[0, 2, 0]).slots(), [1, 1]);
        assert_eq!(map(&[0, 0]).slots(), Vec::<usize>::new());
    }

    #[test]
    fn counts_match_weights() {
        let weights = [13, 7, 0, 256, 1];
        let slots = map(&weights).slots();
        assert_eq!(slots.len(), 277);
        for (s, &w) in weights.iter().enumerate() {
            assert_eq!(slots.iter().filter(|&&x| x == s).count(), w as usize);
        }
    }

    #[test]
    fn rotation_skips_full_and_avoided_servers() {
        let mut m = map(&[1, 1, 1]);
        let seq: Vec<_> = (0..6).map(|_| m.next(None, |_| true).unwrap()).collect();
        assert_eq!(seq, [0, 1, 2, 0, 1, 2]);
        let seq: Vec<_> = (0..4).map(|_| m.next(None, |s| s != 1).unwrap()).collect();
        assert_eq!(seq, [0, 2, 0, 2]);
        assert_eq!(m.next(Some(0), |s| s == 0), Some(0));
        assert_eq!(m.next(None, |_| false), None);
    }

    #[test]
    fn hash_slots_and_avoidance() {
        let mut m = map(&[3, 1, 2]);
        assert_eq!(m.by_hash(2, None), Some(2));
        assert_eq!(m.by_hash(8, None), Some(2));
        assert_eq!(m.by_hash(2, Some(2)), Some(0));
        assert_eq!(
            m.by_hash(u32::MAX, None),
            Some(m.slots()[(u32::MAX % 6) as usize])
        );
        m.set_weight(0, 0);
        m.set_weight(2, 0);
        assert_eq!(m.by_hash(7, Some(1)), Some(1));
        m.set_weight(1, 0);
        assert_eq!(m.by_hash(7, None), None);
    }
}
