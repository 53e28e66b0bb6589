//! `balance leastconn` (configuration.txt §4.2 "balance"): the server with the fewest
//! connections relative to its weight gets the next one, and "round-robin is performed within
//! groups of servers of the same load to ensure that all servers will be used".
//!
//! Servers sit in an [`IndexedHeap`] keyed by (load, sequence). The load is `connections / weight`
//! as a 32.32 fixed-point number, exact enough that two different ratios of weights up to 256
//! never compare equal. The sequence number is renewed each time a server's load changes, so a
//! server that just took (or finished) a connection goes behind the others of its new load:
//! that is the round robin among equals. The [`Balancer`](crate::Balancer) re-keys a server on
//! every `connection_started`/`connection_ended`, O(log n); a pick only reads the top. Servers
//! at their `maxconn` leave the heap until a slot frees up.

use crate::heap::IndexedHeap;

/// Connections per weight unit, 32.32 fixed point.
pub(crate) fn load(connections: u32, weight: u32) -> u64 {
    (u64::from(connections) << 32) / u64::from(weight.max(1))
}

/// The least-connections selector of one tier (active or backup servers).
#[derive(Clone, Debug)]
pub(crate) struct LeastConn {
    heap: IndexedHeap<(u64, u64)>,
    /// Member weight per server; 0 = not a member.
    weight: Vec<u32>,
    /// Source of the sequence numbers that order equally loaded servers.
    sequence: u64,
}

impl LeastConn {
    pub(crate) fn new(servers: usize) -> Self {
        LeastConn {
            heap: IndexedHeap::new(servers),
            weight: vec![0; servers],
            sequence: 0,
        }
    }

    /// Sets `server`'s weight (0 takes it out), with its current connection count and whether it
    /// is below its `maxconn`.
    pub(crate) fn set_weight(&mut self, server: usize, weight: u32, connections: u32, room: bool) {
        let Some(w) = self.weight.get_mut(server) else {
            return;
        };
        *w = weight;
        self.refresh(server, connections, room);
    }

    /// Re-keys `server` after its connection count or `maxconn` changed.
    pub(crate) fn refresh(&mut self, server: usize, connections: u32, room: bool) {
        let weight = self.weight.get(server).copied().unwrap_or(0);
        if weight == 0 || !room {
            self.heap.remove(server);
            return;
        }
        self.sequence += 1;
        self.heap
            .set(server, (load(connections, weight), self.sequence));
    }

    /// The least loaded server, avoiding `avoid` unless it is the only one; `None` when every
    /// member is full or there is none.
    pub(crate) fn pick(&self, avoid: Option<usize>) -> Option<usize> {
        self.heap.min_avoiding(avoid)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn load_compares_ratios_exactly() {
        assert_eq!(load(1, 2), load(2, 4));
        assert!(load(1, 3) < load(1, 2));
        assert!(load(85, 256) < load(86, 256));
        assert!(load(255, 256) < load(1, 1));
        assert_eq!(load(0, 0), 0);
        assert_eq!(load(u32::MAX, 1), u64::from(u32::MAX) << 32);
    }

    #[test]
    fn equals_are_served_in_turn() {
        let mut lc = LeastConn::new(3);
        let mut conns = [0u32; 3];
        for s in 0..3 {
            lc.set_weight(s, 1, 0, true);
        }
        // Each pick is followed by its connection start; short connections end at once.
        let mut seq = Vec::new();
        for _ in 0..6 {
            let s = lc.pick(None).unwrap();
            seq.push(s);
            conns[s] += 1;
            lc.refresh(s, conns[s], true);
            conns[s] -= 1;
            lc.refresh(s, conns[s], true);
        }
        assert_eq!(seq, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn least_loaded_relative_to_weight() {
        let mut lc = LeastConn::new(2);
        lc.set_weight(0, 1, 0, true);
        lc.set_weight(1, 3, 0, true);
        let mut conns = [0u32; 2];
        for _ in 0..8 {
            let s = lc.pick(None).unwrap();
            conns[s] += 1;
            lc.refresh(s, conns[s], true);
        }
        assert_eq!(conns, [2, 6]);
        assert_eq!(lc.pick(Some(0)), Some(1));
        lc.refresh(1, conns[1], false);
        assert_eq!(lc.pick(Some(0)), Some(0));
        lc.set_weight(0, 0, conns[0], true);
        assert_eq!(lc.pick(None), None);
    }
}
