//! `balance roundrobin` (configuration.txt §4.2 "balance"): each server in turn according to its
//! weight, with weights that change at run time (slowstart, `set weight`, agent checks).
//!
//! The rotation is earliest-deadline-first on a virtual clock: a server of weight `w` is due
//! every `1/w` units, its first turn a fraction of a period after it joins (staggered by
//! position, see [`Wrr::join`]), and each pick takes the server due first and moves its deadline
//! one period on. Over any window of `sum(weights)` picks
//! each server is chosen its weight's worth of times (± 1), and a heavy server's turns are
//! interleaved with the others' instead of bunched (5,1,1 gives A A A B C A A). Picks and events
//! cost O(log n) on an [`IndexedHeap`]; nothing is rebuilt. A weight change keeps the server's
//! progress through its current period, so slowstart steps do not reset it, and a server that
//! comes back (up again, or below its `maxconn` again) rejoins at the current virtual time rather
//! than with a backlog of turns.

use crate::heap::IndexedHeap;

/// Virtual time per weight unit: a server of weight `w` is due every `SCALE / w`. 2⁴⁰ keeps the
/// rounding of that division far below one turn (the error is under 2⁻³² of a period), and the
/// clock is a u128, which no process lives long enough to overflow.
const SCALE: u128 = 1 << 40;

fn period(weight: u32) -> u128 {
    SCALE / u128::from(weight.max(1))
}

/// The dynamic weighted round robin of one tier (active or backup servers).
#[derive(Clone, Debug)]
pub(crate) struct Wrr {
    /// The servers in the rotation (members with a free slot), keyed by their next deadline.
    heap: IndexedHeap<u128>,
    /// Member weight per server; 0 = not a member.
    weight: Vec<u32>,
    /// The deadline of the last pick.
    now: u128,
}

impl Wrr {
    pub(crate) fn new(servers: usize) -> Self {
        Wrr {
            heap: IndexedHeap::new(servers),
            weight: vec![0; servers],
            now: 0,
        }
    }

    /// Sets `server`'s weight in this tier (0 takes it out); `room` says whether it is below its
    /// `maxconn`.
    pub(crate) fn set_weight(&mut self, server: usize, weight: u32, room: bool) {
        let Some(old) = self.weight.get(server).copied() else {
            return;
        };
        self.weight[server] = weight;
        if weight == 0 || !room {
            self.heap.remove(server);
            return;
        }
        match self.heap.key(server) {
            Some(deadline) if old > 0 && old != weight => {
                // Keep the fraction of the period still to wait: a server halfway to its turn
                // stays halfway, measured in its new period.
                let left = deadline.saturating_sub(self.now);
                let scaled = left * u128::from(old) / u128::from(weight);
                self.heap.set(server, self.now + scaled);
            }
            Some(_) => {}
            None => self.join(server, weight),
        }
    }

    /// Called when `server`'s connection count or `maxconn` changed: a full server leaves the
    /// rotation (HAProxy skips saturated servers rather than queueing on them) and rejoins when a
    /// slot frees up.
    pub(crate) fn set_room(&mut self, server: usize, room: bool) {
        let weight = self.weight.get(server).copied().unwrap_or(0);
        if weight == 0 {
            return;
        }
        if !room {
            self.heap.remove(server);
        } else if !self.heap.contains(server) {
            self.join(server, weight);
        }
    }

    /// Puts `server` in the rotation at the current virtual time plus a phase: server `i` of `n`
    /// waits `(i + ½) / n` of its period. Staggering the phases by position keeps servers of equal
    /// weight from falling due together (with one common phase, weights 10,1,1,1 would give the
    /// three light servers back to back, then ten picks of the heavy one); it also makes equal
    /// weights rotate in declaration order.
    fn join(&mut self, server: usize, weight: u32) {
        let n = self.weight.len().max(1) as u128;
        let phase = period(weight) * (2 * server as u128 + 1) / (2 * n);
        self.heap.set(server, self.now + phase);
    }

    /// The next server in the rotation, avoiding `avoid` unless it is the only one; `None` when
    /// every member is full (or there is none).
    pub(crate) fn pick(&mut self, avoid: Option<usize>) -> Option<usize> {
        let server = self.heap.min_avoiding(avoid)?;
        let deadline = self.heap.key(server)?;
        let weight = self.weight.get(server).copied().unwrap_or(1);
        self.now = self.now.max(deadline);
        self.heap.set(server, deadline + period(weight));
        Some(server)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn wrr(weights: &[u32]) -> Wrr {
        let mut rr = Wrr::new(weights.len());
        for (i, &w) in weights.iter().enumerate() {
            rr.set_weight(i, w, true);
        }
        rr
    }

    fn picks(rr: &mut Wrr, n: usize) -> Vec<usize> {
        (0..n).map(|_| rr.pick(None).unwrap()).collect()
    }

    fn count(seq: &[usize], server: usize) -> usize {
        seq.iter().filter(|&&s| s == server).count()
    }

    #[test]
    fn heavy_server_is_interleaved() {
        let mut rr = wrr(&[5, 1, 1]);
        assert_eq!(picks(&mut rr, 7), [0, 0, 0, 1, 0, 0, 2]);
        assert_eq!(picks(&mut rr, 7), [0, 0, 0, 1, 0, 0, 2]);
    }

    #[test]
    fn every_window_is_proportional() {
        let weights = [7, 3, 1, 5];
        let total: u32 = weights.iter().sum();
        let mut rr = wrr(&weights);
        let seq = picks(&mut rr, 50 * total as usize);
        for window in seq.windows(total as usize) {
            for (s, &w) in weights.iter().enumerate() {
                let got = count(window, s) as i64;
                assert!((got - i64::from(w)).abs() <= 1, "server {s}: {got} vs {w}");
            }
        }
    }

    #[test]
    fn weight_change_takes_effect_without_reset() {
        let mut rr = wrr(&[1, 1]);
        let _ = picks(&mut rr, 10);
        rr.set_weight(0, 3, true);
        let seq = picks(&mut rr, 400);
        assert!((299..=301).contains(&count(&seq, 0)));
        rr.set_weight(0, 0, true);
        assert!(picks(&mut rr, 10).iter().all(|&s| s == 1));
    }

    #[test]
    fn full_servers_leave_and_rejoin() {
        let mut rr = wrr(&[1, 1, 1]);
        rr.set_room(1, false);
        assert!(picks(&mut rr, 6).iter().all(|&s| s != 1));
        rr.set_room(1, true);
        assert_eq!(count(&picks(&mut rr, 30), 1), 10);
        for s in 0..3 {
            rr.set_room(s, false);
        }
        assert_eq!(rr.pick(None), None);
    }

    #[test]
    fn avoid_is_a_preference() {
        let mut rr = wrr(&[1, 1]);
        for _ in 0..10 {
            assert_eq!(rr.pick(Some(0)), Some(1));
        }
        let mut alone = wrr(&[1, 0]);
        assert_eq!(alone.pick(Some(0)), Some(0));
    }
}
