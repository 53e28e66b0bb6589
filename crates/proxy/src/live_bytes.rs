//! `option contstats`: a stream's bytes counted in the statistics while they move.
//!
//! By default the bytes of a stream reach the byte counters of its frontend, backend and
//! server, and of the stick counters it tracks, when its transfer ends: one addition per
//! counter, but a graph of long downloads or tunnels then jumps when they finish. Under
//! `option contstats` the relays hand what they moved to a [`LiveBytes`] each time they
//! wait for the network (as HAProxy updates its counters at each wake-up of the stream), and
//! the final count adds only the rest (what the shared `counted` cell holds). Without it, an
//! HTTP transfer still tallies what its bodies moved ([`LiveBytes::tally`]), so that one that
//! breaks off counts the bytes that went through, as HAProxy's do.

use crate::track::Trackers;
use sluice_runtime::counters::Traffic;
use std::cell::Cell;

/// The counters a stream's bytes go to, and how many it gave them along the way.
pub struct LiveBytes<'a> {
    traffic: [Option<&'a Traffic>; 4],
    trackers: Option<&'a Trackers>,
    counted: &'a Cell<(u64, u64)>,
}

impl std::fmt::Debug for LiveBytes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveBytes")
            .field("counted", &self.counted.get())
            .finish_non_exhaustive()
    }
}

impl<'a> LiveBytes<'a> {
    /// Counts into the frontend's, listener's, backend's and server's `traffic` and the
    /// `trackers`, and adds what it counted (from the client, to the client) to `counted`,
    /// which the final count reads to leave it out.
    pub fn new(
        traffic: [Option<&'a Traffic>; 4],
        trackers: &'a Trackers,
        counted: &'a Cell<(u64, u64)>,
    ) -> Self {
        LiveBytes {
            traffic,
            trackers: Some(trackers),
            counted,
        }
    }

    /// Counts into no counter, only adds to `tally` what moved (from the client, to the
    /// client).
    pub fn tally(tally: &'a Cell<(u64, u64)>) -> Self {
        LiveBytes {
            traffic: [None; 4],
            trackers: None,
            counted: tally,
        }
    }

    /// What it counted or tallied so far (from the client, to the client).
    pub fn counted(&self) -> (u64, u64) {
        self.counted.get()
    }

    /// Counts `up` more bytes from the client and `down` more to it.
    pub fn add(&self, up: u64, down: u64) {
        if up == 0 && down == 0 {
            return;
        }
        for traffic in self.traffic.iter().flatten() {
            traffic.bytes_in.add(up);
            traffic.bytes_out.add(down);
        }
        if let Some(trackers) = self.trackers {
            trackers.bytes(up, down);
        }
        let (counted_up, counted_down) = self.counted.get();
        self.counted.set((counted_up + up, counted_down + down));
    }

    /// Counts what moved since the last report, from running totals of the two directions;
    /// `reported` holds the totals already counted.
    pub fn catch_up(&self, reported: &mut (u64, u64), (up, down): (u64, u64)) {
        self.add(
            up.saturating_sub(reported.0),
            down.saturating_sub(reported.1),
        );
        *reported = (up.max(reported.0), down.max(reported.1));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bytes_reach_every_counter_once_and_are_remembered() {
        let (frontend, backend) = (Traffic::default(), Traffic::default());
        let trackers = Trackers::default();
        let counted = Cell::new((0, 0));
        let live = LiveBytes::new(
            [Some(&frontend), None, Some(&backend), None],
            &trackers,
            &counted,
        );
        let mut reported = (0, 0);
        live.catch_up(&mut reported, (10, 0));
        live.catch_up(&mut reported, (10, 5));
        live.catch_up(&mut reported, (25, 7));
        live.add(1, 1);
        for traffic in [&frontend, &backend] {
            assert_eq!(traffic.bytes_in.get(), 26);
            assert_eq!(traffic.bytes_out.get(), 8);
        }
        assert_eq!(counted.get(), (26, 8));
        assert_eq!(reported, (25, 7));
    }
}
