//! The original selector the runtime uses today: [`RoundRobin`] over a slice of [`Candidate`]s,
//! smooth weighted round robin recomputed on every pick (O(n)), with the first usable backup
//! taking over when no active server is usable.
//!
//! Kept unchanged so that `crates/runtime` (`Backend::pick_server`) compiles until it moves to
//! [`Balancer`](crate::Balancer), which implements every algorithm incrementally; remove this
//! module then.

/// What the selector needs to know about one server right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Current weight, 0 to 256; a weight of 0 takes no new traffic.
    pub weight: u32,
    /// False while the server is in maintenance (or, later, down).
    pub usable: bool,
    /// True for `backup` servers.
    pub backup: bool,
}

impl Candidate {
    fn eligible(&self) -> bool {
        self.usable && self.weight > 0
    }
}

/// Smooth weighted round robin: over any window of `sum(weights)` picks, each server is
/// chosen `weight` times, and picks of a heavy server are spread out rather than bunched
/// (each pick raises every eligible server's credit by its weight and lowers the winner's by
/// the total).
#[derive(Clone, Debug, Default)]
pub struct RoundRobin {
    credit: Vec<i64>,
}

impl RoundRobin {
    /// A selector for a backend of `servers` servers.
    pub fn new(servers: usize) -> Self {
        RoundRobin {
            credit: vec![0; servers],
        }
    }

    /// Picks a server among `candidates` (indexed like the backend's servers), or `None` if
    /// none is usable.
    pub fn pick(&mut self, candidates: &[Candidate]) -> Option<usize> {
        if self.credit.len() != candidates.len() {
            self.credit.resize(candidates.len(), 0);
        }
        if candidates.iter().any(|c| !c.backup && c.eligible()) {
            self.pick_among(candidates, |c| !c.backup && c.eligible())
        } else {
            candidates.iter().position(|c| c.backup && c.eligible())
        }
    }

    fn pick_among(
        &mut self,
        candidates: &[Candidate],
        take: impl Fn(&Candidate) -> bool,
    ) -> Option<usize> {
        let mut total = 0i64;
        let mut best: Option<usize> = None;
        for (i, c) in candidates.iter().enumerate() {
            if !take(c) {
                continue;
            }
            let weight = i64::from(c.weight);
            self.credit[i] += weight;
            total += weight;
            if best.is_none_or(|b| self.credit[i] > self.credit[b]) {
                best = Some(i);
            }
        }
        let chosen = best?;
        self.credit[chosen] -= total;
        Some(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn active(weight: u32) -> Candidate {
        Candidate {
            weight,
            usable: true,
            backup: false,
        }
    }

    fn picks(rr: &mut RoundRobin, c: &[Candidate], n: usize) -> Vec<Option<usize>> {
        (0..n).map(|_| rr.pick(c)).collect()
    }

    #[test]
    fn equal_weights_alternate() {
        let c = [active(1), active(1), active(1)];
        let mut rr = RoundRobin::new(3);
        assert_eq!(
            picks(&mut rr, &c, 6),
            [Some(0), Some(1), Some(2), Some(0), Some(1), Some(2)]
        );
    }

    #[test]
    fn weights_are_honoured_and_spread() {
        let c = [active(5), active(1), active(1)];
        let mut rr = RoundRobin::new(3);
        let got = picks(&mut rr, &c, 7);
        assert_eq!(got.iter().filter(|p| **p == Some(0)).count(), 5);
        assert_eq!(got.iter().filter(|p| **p == Some(1)).count(), 1);
        // The heavy server is never picked more than 3 times in a row.
        assert_eq!(
            got,
            [
                Some(0),
                Some(0),
                Some(1),
                Some(0),
                Some(2),
                Some(0),
                Some(0)
            ]
        );
    }

    #[test]
    fn unusable_and_zero_weight_servers_are_skipped() {
        let mut down = active(1);
        down.usable = false;
        let c = [down, active(0), active(1)];
        let mut rr = RoundRobin::new(3);
        assert_eq!(picks(&mut rr, &c, 3), [Some(2), Some(2), Some(2)]);
    }

    #[test]
    fn first_backup_takes_over_only_when_no_active_is_usable() {
        let backup = Candidate {
            weight: 1,
            usable: true,
            backup: true,
        };
        let mut rr = RoundRobin::new(3);
        assert_eq!(rr.pick(&[active(1), backup, backup]), Some(0));
        let mut maint = active(1);
        maint.usable = false;
        assert_eq!(rr.pick(&[maint, backup, backup]), Some(1));
        assert_eq!(rr.pick(&[maint, backup, backup]), Some(1));
    }

    #[test]
    fn nothing_usable_gives_none() {
        let mut rr = RoundRobin::new(0);
        assert_eq!(rr.pick(&[]), None);
        let mut maint = active(1);
        maint.usable = false;
        assert_eq!(rr.pick(&[maint]), None);
    }
}
