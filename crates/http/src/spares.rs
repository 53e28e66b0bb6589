//! A thread's spare values (span lists, byte buffers) for what every request takes and drops:
//! a busy thread reuses the ones it has instead of allocating new ones.
//!
//! A thread keeps as many as its busiest moment held at once (up to [`MOST_KEPT`]), since
//! with many connections served in one round of the event loop, that many are taken at the
//! same time, round after round. What a burst leaves behind does not stay: [`Spares::trim`],
//! called on a period, frees those that no take reached during the whole period.

/// The most spares kept, whatever the burst.
pub const MOST_KEPT: usize = 256;

/// Spare values, taken and given back last-in first-out.
#[derive(Debug)]
pub struct Spares<T> {
    kept: Vec<T>,
    /// The fewest kept since the last trim: the bottom ones no take has reached.
    low_water: usize,
}

impl<T> Spares<T> {
    /// None kept (allocates nothing: usable in a `const` thread-local).
    pub const fn new() -> Spares<T> {
        Spares {
            kept: Vec::new(),
            low_water: 0,
        }
    }

    /// The spare given back last, if any.
    pub fn take(&mut self) -> Option<T> {
        let taken = self.kept.pop();
        self.low_water = self.low_water.min(self.kept.len());
        taken
    }

    /// Keeps `value` for a later take (drops it if [`MOST_KEPT`] are kept).
    pub fn give(&mut self, value: T) {
        if self.kept.len() < MOST_KEPT {
            self.kept.push(value);
        }
    }

    /// Frees the spares that stayed unused since the last trim.
    pub fn trim(&mut self) {
        self.kept.drain(..self.low_water);
        self.low_water = self.kept.len();
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

impl<T> Default for Spares<T> {
    fn default() -> Self {
        Spares::new()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_last_in_first_out() {
        let mut spares = Spares::new();
        spares.give(1);
        spares.give(2);
        assert_eq!(spares.take(), Some(2));
        assert_eq!(spares.take(), Some(1));
        assert_eq!(spares.take(), None);
    }

    #[test]
    fn a_burst_is_kept_whole_up_to_the_bound() {
        let mut spares = Spares::new();
        (0..MOST_KEPT + 10).for_each(|n| spares.give(n));
        assert_eq!(spares.len(), MOST_KEPT);
    }

    #[test]
    fn a_trim_frees_only_what_the_period_left_unused() {
        let mut spares = Spares::new();
        (0..10).for_each(|n| spares.give(n));
        // The first trim after the burst sets the mark; the period that follows takes up to
        // three at once.
        spares.trim();
        assert_eq!(spares.len(), 10);
        for _ in 0..5 {
            let taken: Vec<_> = (0..3).map(|_| spares.take().unwrap()).collect();
            taken.into_iter().for_each(|n| spares.give(n));
        }
        spares.trim();
        assert_eq!(spares.len(), 3, "the seven never reached are freed");
        // The three in use are kept as long as each period uses them.
        let taken: Vec<_> = (0..3).map(|_| spares.take().unwrap()).collect();
        taken.into_iter().for_each(|n| spares.give(n));
        spares.trim();
        assert_eq!(spares.len(), 3);
        // A period without any take frees them all.
        spares.trim();
        assert!(spares.is_empty());
    }
}
