//! The consistent-hash ring under `hash-type consistent` and `balance random`
//! (configuration.txt §4.2 "hash-type", "hash-balance-factor", "balance" "random").
//!
//! Each member server owns `16 × weight` points on a 32-bit ring; a key's hash goes to the
//! nearest point (the earlier one on a tie), so when a server leaves only the keys nearest to its
//! points move, about 1/N of them, and a weight change adds or removes only that server's
//! highest-numbered points. Point `j` of the server with id `id` sits at
//! `avalanche(id × 4096 + j)`: with the default ids (position in the backend, from 1) this places
//! the points where HAProxy places them, and Sluice sends every key to the server HAProxy 2.6
//! would (checked in the crate's `tests/compat.rs`), so caches behind a migrated farm stay warm.
//!
//! The ring is rebuilt on server events only (O(P log P) for P points, at most 4096 per
//! server); a lookup is a binary search. `hash-balance-factor` bounds each server's load to
//! `factor`% of the average, weighted: a server already at its share is skipped for the next
//! point clockwise. `balance random` looks random numbers up on the same ring and keeps the least
//! loaded of its draws.

use crate::balancer::Loads;
use crate::hash::avalanche;

/// Ring points per weight unit (weight 1 → 16 points, weight 256 → 4096).
pub(crate) const POINTS_PER_WEIGHT: u32 = 16;

/// Node keys of consecutive ids are this far apart: room for the 4096 points of a weight-256
/// server.
const POINT_RANGE: u32 = 4096;

/// The most draws `random(<draws>)` makes per pick. Past a few draws the result is already the
/// least loaded server of the tier (the manual: high values "converge towards the leastconn's
/// result"), so this bounds a pick's cost without changing its outcome in any measurable way.
pub(crate) const MAX_DRAWS: u32 = 64;

/// The consistent-hash ring of one tier (active or backup servers).
#[derive(Clone, Debug)]
pub(crate) struct Ring {
    /// Member weight per server; 0 = not a member.
    weight: Vec<u32>,
    /// Server ids, which place the points.
    ids: Vec<u32>,
    /// (position on the ring, server), sorted.
    points: Vec<(u32, u32)>,
    total_weight: u64,
    /// The next point the round-robin fallback (missing key) uses.
    cursor: usize,
}

impl Ring {
    /// A ring for servers with the given ids (`ids[i]` is server `i`'s id).
    pub(crate) fn new(ids: &[u32]) -> Self {
        Ring {
            weight: vec![0; ids.len()],
            ids: ids.to_vec(),
            points: Vec::new(),
            total_weight: 0,
            cursor: 0,
        }
    }

    /// Sets `server`'s weight (0 takes it out) and rebuilds the ring if anything changed.
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
        self.points.clear();
        self.total_weight = 0;
        for (server, (&weight, &id)) in self.weight.iter().zip(&self.ids).enumerate() {
            if weight == 0 {
                continue;
            }
            self.total_weight += u64::from(weight);
            let base = id.wrapping_mul(POINT_RANGE);
            self.points.extend(
                (0..weight.saturating_mul(POINTS_PER_WEIGHT))
                    .map(|j| (avalanche(base.wrapping_add(j)), server as u32)),
            );
        }
        self.points.sort_unstable();
        self.cursor %= self.points.len().max(1);
    }

    /// The index of the point nearest to `hash`, the earlier one on a tie; the ring must not be
    /// empty.
    fn nearest(&self, hash: u32) -> usize {
        let len = self.points.len();
        let after = self.points.partition_point(|p| p.0 < hash);
        let next = if after == len { 0 } else { after };
        let prev = if after == 0 { len - 1 } else { after - 1 };
        let to_next = self.points[next].0.wrapping_sub(hash);
        let from_prev = hash.wrapping_sub(self.points[prev].0);
        if from_prev <= to_next { prev } else { next }
    }

    /// Whether `server` may take one more connection under `hash-balance-factor`: its
    /// connections must stay below its weighted share of `factor`% of (all connections + 1),
    /// rounded up and at least 1. With a factor of 100 or more some member always qualifies.
    fn within_bound(&self, server: usize, loads: &Loads<'_>) -> bool {
        let Some(factor) = loads.balance_factor() else {
            return true;
        };
        if self.total_weight == 0 {
            return true;
        }
        let weight = u128::from(self.weight.get(server).copied().unwrap_or(0));
        let all_slots = ((u128::from(loads.total()) + 1) * u128::from(factor)).div_ceil(100);
        let slots = (all_slots * weight)
            .div_ceil(u128::from(self.total_weight))
            .max(1);
        u128::from(loads.connections(server)) < slots
    }

    /// The server for `hash`: the nearest point's, or walking clockwise past `avoid` and past
    /// servers over their `hash-balance-factor` bound. When no server qualifies, the nearest
    /// point's server (or the first one that is not `avoid`) is returned anyway: a hash keeps its
    /// affinity, and the caller queues. `None` only for an empty ring.
    pub(crate) fn by_hash(
        &self,
        hash: u32,
        avoid: Option<usize>,
        loads: &Loads<'_>,
    ) -> Option<usize> {
        if self.points.is_empty() {
            return None;
        }
        let start = self.nearest(hash);
        let first = self.points[start].1 as usize;
        if Some(first) != avoid && self.within_bound(first, loads) {
            return Some(first);
        }
        let len = self.points.len();
        let mut not_avoided = None;
        for step in 1..len {
            let server = self.points[(start + step) % len].1 as usize;
            if Some(server) == avoid || server == first {
                continue;
            }
            if self.within_bound(server, loads) {
                return Some(server);
            }
            not_avoided.get_or_insert(server);
        }
        if Some(first) != avoid {
            Some(first)
        } else {
            not_avoided.or(Some(first))
        }
    }

    /// The round robin used when the key is missing: the points in ring order, skipping full
    /// servers and `avoid` (unless it is the only one with room). Points are proportional to
    /// weights, so the rotation is too.
    pub(crate) fn next(&mut self, avoid: Option<usize>, loads: &Loads<'_>) -> Option<usize> {
        let len = self.points.len();
        let mut fallback = None;
        for _ in 0..len {
            let server = self.points[self.cursor % len].1 as usize;
            self.cursor = (self.cursor + 1) % len;
            if !loads.has_room(server) {
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

    /// `balance random(<draws>)`: `draws` random positions on the ring (each a weighted random
    /// server), the least loaded relative to its weight wins, the earlier draw on a tie. The
    /// random positions are derived from `seed` (see [`draw`]).
    pub(crate) fn random(
        &self,
        seed: u64,
        draws: u32,
        avoid: Option<usize>,
        loads: &Loads<'_>,
    ) -> Option<usize> {
        let mut best: Option<usize> = None;
        for k in 0..draws.clamp(1, MAX_DRAWS) {
            let server = self.by_hash(draw(seed, k), avoid, loads)?;
            best = match best {
                Some(b) if !self.less_loaded(server, b, loads) => Some(b),
                _ => Some(server),
            };
        }
        best
    }

    /// Whether `a` has fewer connections per weight unit than `b` (cross-multiplied, exact).
    fn less_loaded(&self, a: usize, b: usize, loads: &Loads<'_>) -> bool {
        let weight = |s: usize| u64::from(self.weight.get(s).copied().unwrap_or(0).max(1));
        u64::from(loads.connections(a)) * weight(b) < u64::from(loads.connections(b)) * weight(a)
    }
}

/// The `k`-th 32-bit random number of a pick, from the caller's 64-bit `seed`: SplitMix64's
/// output function over `seed + (k + 1) × golden ratio`. The caller may pass any seed, even a
/// counter; the mixing makes the draws independent-looking and uniform.
fn draw(seed: u64, k: u32) -> u32 {
    let mut z = seed.wrapping_add((u64::from(k) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 32) as u32
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ServerState;

    fn ring(weights: &[u32]) -> Ring {
        let ids: Vec<u32> = (1..=weights.len() as u32).collect();
        let mut r = Ring::new(&ids);
        for (s, &w) in weights.iter().enumerate() {
            r.store(s, w);
        }
        r.rebuild();
        r
    }

    fn states(n: usize) -> Vec<ServerState> {
        vec![ServerState::new(1); n]
    }

    #[test]
    fn points_per_weight() {
        let r = ring(&[1, 3, 0, 256]);
        assert_eq!(r.points.len(), 16 * (1 + 3 + 256));
        assert!(r.points.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(r.points.iter().filter(|p| p.1 == 2).count(), 0);
    }

    #[test]
    fn nearest_point_wraps_around() {
        let mut r = ring(&[1]);
        r.points = vec![(100, 0), (200, 1), (u32::MAX - 10, 2)];
        assert_eq!(r.nearest(0), 2);
        assert_eq!(r.nearest(100), 0);
        assert_eq!(r.nearest(149), 0);
        assert_eq!(r.nearest(150), 0);
        assert_eq!(r.nearest(151), 1);
        assert_eq!(r.nearest(u32::MAX), 2);
        r.points = vec![(7, 0)];
        assert_eq!(r.nearest(u32::MAX / 2), 0);
    }

    #[test]
    fn avoid_walks_to_another_server() {
        let r = ring(&[1, 1, 1]);
        let s = states(3);
        let conns = [0; 3];
        let loads = Loads::new(&s, &conns, 0, None);
        for h in (0..u32::MAX).step_by(9_999_991) {
            let first = r.by_hash(h, None, &loads).unwrap();
            let other = r.by_hash(h, Some(first), &loads).unwrap();
            assert_ne!(first, other);
        }
        let single = ring(&[0, 2, 0]);
        assert_eq!(single.by_hash(5, Some(1), &loads), Some(1));
        assert_eq!(ring(&[0, 0]).by_hash(5, None, &loads), None);
    }

    #[test]
    fn draws_are_spread() {
        let mut seen = [0u32; 16];
        for seed in 0..16_000u64 {
            seen[(draw(seed, 0) >> 28) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        assert_ne!(draw(1, 0), draw(1, 1));
    }
}
