//! The rise/fall hysteresis of one check, without time or I/O (configuration.txt §5.2 "rise",
//! "fall", "inter", "fastinter", "downinter").
//!
//! As in HAProxy, a health counter runs from 0 to `rise + fall - 1` and the server is up while
//! it is at least `rise`. A server starts up with the counter at `rise`, so a server that is
//! dead at start-up goes down at its first failed check; once a server has risen the counter is
//! at its top and it takes `fall` consecutive failures to bring it down. A failure while going
//! up starts the rise over. The interval to the next check follows the state: `inter` when
//! stably up, `downinter` when fully down, `fastinter` in between.

use std::time::Duration;

/// Up or down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Taking traffic.
    Up,
    /// Not taking traffic.
    Down,
}

/// What one result changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Nothing visible.
    None,
    /// The server just went up.
    WentUp,
    /// The server just went down.
    WentDown,
}

/// The counters of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Machine {
    rise: u32,
    fall: u32,
    health: u32,
}

/// The three intervals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intervals {
    /// Stably up.
    pub inter: Duration,
    /// Changing state.
    pub fastinter: Duration,
    /// Fully down.
    pub downinter: Duration,
}

impl Machine {
    /// A machine for `rise` and `fall` (each at least 1), starting up.
    pub fn new(rise: u32, fall: u32) -> Self {
        let rise = rise.max(1);
        Machine {
            rise,
            fall: fall.max(1),
            health: rise,
        }
    }

    fn top(&self) -> u32 {
        self.rise + self.fall - 1
    }

    /// Up or down.
    pub fn phase(&self) -> Phase {
        if self.health >= self.rise {
            Phase::Up
        } else {
            Phase::Down
        }
    }

    /// The counter, for `show stat`-like reports ("3/3").
    pub fn health(&self) -> u32 {
        self.health
    }

    /// `rise`.
    pub fn rise(&self) -> u32 {
        self.rise
    }

    /// `fall`.
    pub fn fall(&self) -> u32 {
        self.fall
    }

    /// Counts one check result.
    pub fn record(&mut self, passed: bool) -> Change {
        let before = self.phase();
        if passed {
            if self.health < self.top() {
                self.health += 1;
                if self.health >= self.rise {
                    self.health = self.top();
                }
            }
        } else if self.health > 0 {
            self.health -= 1;
            if self.health < self.rise {
                self.health = 0;
            }
        }
        match (before, self.phase()) {
            (Phase::Down, Phase::Up) => Change::WentUp,
            (Phase::Up, Phase::Down) => Change::WentDown,
            _ => Change::None,
        }
    }

    /// Forces the state (an agent's `down`/`up`): down empties the counter, up fills it.
    pub fn force(&mut self, phase: Phase) -> Change {
        let before = self.phase();
        self.health = match phase {
            Phase::Up => self.top(),
            Phase::Down => 0,
        };
        match (before, phase) {
            (Phase::Down, Phase::Up) => Change::WentUp,
            (Phase::Up, Phase::Down) => Change::WentDown,
            _ => Change::None,
        }
    }

    /// `on-error sudden-death`: an up server is left one failure from down.
    pub fn sudden_death(&mut self) {
        if self.health > self.rise {
            self.health = self.rise;
        }
    }

    /// The time until the next check.
    pub fn interval(&self, i: &Intervals) -> Duration {
        if self.health == self.top() {
            i.inter
        } else if self.health == 0 {
            i.downinter
        } else {
            i.fastinter
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_server_goes_down_at_the_first_failure() {
        let mut m = Machine::new(2, 3);
        assert_eq!(m.phase(), Phase::Up);
        assert_eq!(m.record(false), Change::WentDown);
    }

    #[test]
    fn rise_then_fall() {
        let mut m = Machine::new(2, 3);
        m.record(false);
        assert_eq!(m.record(true), Change::None);
        assert_eq!(m.phase(), Phase::Down);
        assert_eq!(m.record(true), Change::WentUp);
        assert_eq!(m.health(), 4);
        assert_eq!(m.record(false), Change::None);
        assert_eq!(m.record(false), Change::None);
        assert_eq!(m.phase(), Phase::Up);
        assert_eq!(m.record(false), Change::WentDown);
        assert_eq!(m.health(), 0);
    }

    #[test]
    fn a_failure_while_rising_starts_over_and_a_success_while_falling_restores() {
        let mut m = Machine::new(3, 2);
        m.record(false);
        m.record(true);
        m.record(true);
        m.record(false);
        assert_eq!(m.health(), 0);
        m.record(true);
        m.record(true);
        assert_eq!(m.record(true), Change::WentUp);
        m.record(false);
        m.record(true);
        assert_eq!(m.health(), 4);
    }

    #[test]
    fn intervals_follow_the_state() {
        let i = Intervals {
            inter: Duration::from_millis(100),
            fastinter: Duration::from_millis(10),
            downinter: Duration::from_millis(1000),
        };
        let mut m = Machine::new(2, 2);
        // Starting at `rise`, not at the top: the first checks are fast.
        assert_eq!(m.interval(&i), i.fastinter);
        m.record(true);
        assert_eq!(m.interval(&i), i.inter);
        m.record(false);
        assert_eq!(m.interval(&i), i.fastinter);
        m.record(false);
        assert_eq!(m.interval(&i), i.downinter);
    }

    #[test]
    fn sudden_death_leaves_one_failure() {
        let mut m = Machine::new(2, 3);
        m.record(true);
        m.sudden_death();
        assert_eq!(m.phase(), Phase::Up);
        assert_eq!(m.record(false), Change::WentDown);
    }

    #[test]
    fn forcing() {
        let mut m = Machine::new(2, 3);
        assert_eq!(m.force(Phase::Down), Change::WentDown);
        assert_eq!(m.force(Phase::Down), Change::None);
        assert_eq!(m.force(Phase::Up), Change::WentUp);
    }
}
