//! `cpu-map` (configuration.txt §3.1): the CPUs each event-loop thread may run on.
//!
//! A line names threads, `[auto:]<group>[/<thread-set>]`, and CPUs, numbers and ranges
//! separated by commas or spaces. Sluice runs one thread group, so a line names threads only
//! when its group set holds group 1 (`1` alone is `1/all`); the others are ignored, as
//! HAProxy ignores groups beyond `thread-groups`. Sets are `all`, `odd`, `even`, `N`, `N-M`
//! (either way round) or `N-`, threads up to 64 (the word size, as in HAProxy); CPUs go up
//! to 1023 (Linux's `CPU_SETSIZE`), and CPU ranges `N-` end at 63 as the manual says.
//! With `auto:` the n-th thread of the set gets the n-th CPU, in increasing order, and both
//! sets must be of one size. When lines overlap, the last one wins for the threads they
//! share.

/// The largest thread number, and the bound of open CPU ranges (plus one).
const WORD: u32 = 64;

/// The largest CPU number (Linux's `CPU_SETSIZE` less one).
const MAX_CPU: u32 = 1023;

/// One `cpu-map` line, as it applies to thread group 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuMap {
    /// The threads it names (numbered from 1), in increasing order.
    threads: Vec<u32>,
    /// Its CPUs, in increasing order, without repeats.
    cpus: Vec<usize>,
    /// `auto:`: the n-th thread gets the n-th CPU only.
    auto: bool,
}

/// Parses the words after `cpu-map`; `None` when the line names no thread of group 1.
pub fn parse(words: &[String]) -> Result<Option<CpuMap>, String> {
    let (first, cpu_words) = match words {
        [first, cpus @ ..] if !cpus.is_empty() => (first.as_str(), cpus),
        _ => return Err("expects a thread set and at least one CPU set".to_owned()),
    };
    let (auto, spec) = match first.strip_prefix("auto:") {
        Some(spec) => (true, spec),
        None => (false, first),
    };
    let (group_spec, thread_spec) = match spec.split_once('/') {
        Some((group, threads)) => (group, Some(threads)),
        None => (spec, None),
    };
    let groups = number_set(group_spec, (1, WORD), WORD)
        .ok_or_else(|| format!("invalid thread group set '{group_spec}'"))?;
    let threads = match thread_spec {
        Some(text) => number_set(text, (1, WORD), WORD)
            .ok_or_else(|| format!("invalid thread set '{text}'"))?,
        None => (1..=WORD).collect(),
    };
    let mut cpus = Vec::new();
    for word in cpu_words.iter().flat_map(|w| w.split(',')) {
        let set = number_set(word, (0, MAX_CPU), WORD - 1)
            .filter(|_| !matches!(word, "all" | "odd" | "even"))
            .ok_or_else(|| format!("invalid CPU set '{word}'"))?;
        cpus.extend(set.into_iter().map(|c| c as usize));
    }
    cpus.sort_unstable();
    cpus.dedup();
    let Some(group_position) = groups.iter().position(|&g| g == 1) else {
        return Ok(None);
    };
    if !auto {
        return Ok(Some(CpuMap {
            threads,
            cpus,
            auto: false,
        }));
    }
    match thread_spec {
        Some(_) if groups.len() > 1 => {
            Err("'auto:' takes a range of groups or of threads, not both".to_owned())
        }
        Some(_) if threads.len() != cpus.len() => Err(format!(
            "'auto:' needs as many CPUs as threads ({} threads, {} CPUs)",
            threads.len(),
            cpus.len()
        )),
        Some(_) => Ok(Some(CpuMap {
            threads,
            cpus,
            auto: true,
        })),
        // A range of groups: group 1 (every thread) takes the CPU in its position.
        None if groups.len() != cpus.len() => Err(format!(
            "'auto:' needs as many CPUs as groups ({} groups, {} CPUs)",
            groups.len(),
            cpus.len()
        )),
        None => Ok(Some(CpuMap {
            threads,
            cpus: vec![cpus[group_position]],
            auto: false,
        })),
    }
}

/// The CPUs thread `thread` (numbered from 1) may run on, by the last line naming it; `None`
/// when no line does (the system's choice).
pub fn cpus_of(maps: &[CpuMap], thread: u32) -> Option<Vec<usize>> {
    maps.iter().rev().find_map(|map| {
        let position = map.threads.iter().position(|&t| t == thread)?;
        Some(if map.auto {
            vec![map.cpus[position]]
        } else {
            map.cpus.clone()
        })
    })
}

/// `all`, `odd`, `even`, `N`, `N-M` (or `M-N`) within `low..=high`, or `N-` up to
/// `open_end`, in increasing order.
/// The threads a `bind ... thread` line lets accept its connections: `[1/]<set>[,<set>...]`,
/// sets as `cpu-map`'s, resolved once the number of threads is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadSet(Vec<String>);

impl ThreadSet {
    /// Checks the words of a set (the group, if given, must be 1: Sluice runs one).
    pub fn parse(text: &str) -> Result<ThreadSet, String> {
        let mut parts = Vec::new();
        for part in text.split(',') {
            let set = match part.split_once('/') {
                Some(("1", set)) => set,
                Some((group, _)) => {
                    return Err(format!(
                        "thread group '{group}' does not exist (only group 1)"
                    ));
                }
                None => part,
            };
            number_set(set, (1, WORD), WORD)
                .ok_or_else(|| format!("invalid thread set '{part}'"))?;
            parts.push(set.to_owned());
        }
        Ok(ThreadSet(parts))
    }

    /// The threads of the set (numbered from 1, increasing) among `nbthread`: `all`, `odd`,
    /// `even` and open ranges stop at the last thread; a thread named beyond it is an error.
    pub fn threads(&self, nbthread: u32) -> Result<Vec<u32>, String> {
        let mut threads = Vec::new();
        for part in &self.0 {
            let set = match part.as_str() {
                "all" | "odd" | "even" => number_set(part, (1, nbthread), nbthread),
                _ => number_set(part, (1, WORD), nbthread),
            }
            .unwrap_or_default();
            if let Some(beyond) = set.iter().find(|&&t| t > nbthread) {
                return Err(format!(
                    "'thread' names thread {beyond}, which does not exist ({nbthread} threads)"
                ));
            }
            threads.extend(set);
        }
        threads.sort_unstable();
        threads.dedup();
        if threads.is_empty() {
            return Err("'thread' names no thread".to_owned());
        }
        Ok(threads)
    }
}

fn number_set(text: &str, (low, high): (u32, u32), open_end: u32) -> Option<Vec<u32>> {
    let all = low..=high.min(open_end);
    let set: Vec<u32> = match text {
        "all" => all.collect(),
        "odd" => all.filter(|n| n % 2 == 1).collect(),
        "even" => all.filter(|n| n % 2 == 0).collect(),
        _ => {
            let number = |s: &str| s.parse::<u32>().ok().filter(|n| (low..=high).contains(n));
            match text.split_once('-') {
                None => vec![number(text)?],
                Some((from, "")) => (number(from)?..=open_end).collect(),
                // Given the wrong way round, a range is taken the right way, as HAProxy does.
                Some((from, to)) => {
                    let (from, to) = (number(from)?, number(to)?);
                    (from.min(to)..=from.max(to)).collect()
                }
            }
        }
    };
    Some(set)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn maps(lines: &[&str]) -> Vec<CpuMap> {
        lines
            .iter()
            .filter_map(|line| {
                let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
                parse(&words).unwrap()
            })
            .collect()
    }

    fn cpus(maps: &[CpuMap], thread: u32) -> Option<Vec<usize>> {
        cpus_of(maps, thread)
    }

    #[test]
    fn bind_thread_sets_resolve_against_the_thread_count() {
        let set = |text: &str, n: u32| ThreadSet::parse(text).unwrap().threads(n);
        assert_eq!(set("all", 4), Ok(vec![1, 2, 3, 4]));
        assert_eq!(set("odd", 4), Ok(vec![1, 3]));
        assert_eq!(set("1/even", 4), Ok(vec![2, 4]));
        assert_eq!(set("2-", 4), Ok(vec![2, 3, 4]));
        assert_eq!(set("4,1-2,2", 4), Ok(vec![1, 2, 4]));
        assert!(set("3", 2).is_err(), "thread 3 of 2");
        assert!(set("2-3", 2).is_err());
        assert!(ThreadSet::parse("2/1").is_err(), "a second group");
        assert!(ThreadSet::parse("x").is_err());
        assert!(ThreadSet::parse("0").is_err());
    }

    #[test]
    fn the_manuals_examples() {
        let all = maps(&["1/all 0-3"]);
        assert_eq!(cpus(&all, 1), Some(vec![0, 1, 2, 3]));
        assert_eq!(cpus(&all, 64), Some(vec![0, 1, 2, 3]));
        for line in [
            "auto:1/1-4 0-3",
            "auto:1/1-4 0-1 2-3",
            "auto:1/1-4 3 2 1 0",
            "auto:1/1-4 3,2,1,0",
        ] {
            let m = maps(&[line]);
            let got: Vec<_> = (1..=5).map(|t| cpus(&m, t)).collect();
            assert_eq!(
                got,
                [
                    Some(vec![0]),
                    Some(vec![1]),
                    Some(vec![2]),
                    Some(vec![3]),
                    None
                ],
                "{line}"
            );
        }
        let even = maps(&["auto:1/even 0-31"]);
        assert_eq!(cpus(&even, 2), Some(vec![0]));
        assert_eq!(cpus(&even, 4), Some(vec![1]));
        assert_eq!(cpus(&even, 3), None);
        let open = maps(&["1/1- 0-"]);
        assert_eq!(cpus(&open, 64).map(|c| c.len()), Some(64));
    }

    #[test]
    fn a_lone_group_is_all_its_threads_and_other_groups_are_ignored() {
        let m = maps(&["1 2,5"]);
        assert_eq!(cpus(&m, 7), Some(vec![2, 5]));
        assert_eq!(maps(&["2/1 0"]), []);
        // Groups 1-2 on CPUs 4-5: group 1's threads get CPU 4.
        assert_eq!(cpus(&maps(&["auto:1-2 4-5"]), 3), Some(vec![4]));
    }

    #[test]
    fn big_machines_and_ranges_the_wrong_way_round() {
        // The manual's example for a machine with 160 CPUs.
        let m = maps(&["1/1 0-39,80-119"]);
        assert_eq!(
            cpus(&m, 1).map(|c| (c.len(), c[39], c[40])),
            Some((80, 39, 80))
        );
        assert_eq!(cpus(&maps(&["1/3-2 5-4"]), 2), Some(vec![4, 5]));
    }

    #[test]
    fn the_last_line_wins_where_lines_overlap() {
        let m = maps(&["1/all 0-1", "1/2 3"]);
        assert_eq!(cpus(&m, 1), Some(vec![0, 1]));
        assert_eq!(cpus(&m, 2), Some(vec![3]));
    }

    #[test]
    fn mistakes_are_refused() {
        let err = |line: &str| {
            let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
            parse(&words).unwrap_err()
        };
        assert_eq!(
            err("1/all"),
            "expects a thread set and at least one CPU set"
        );
        assert_eq!(err("x/1 0"), "invalid thread group set 'x'");
        assert_eq!(err("1/0 0"), "invalid thread set '0'");
        assert_eq!(err("1/65 0"), "invalid thread set '65'");
        assert_eq!(err("1/1 1024"), "invalid CPU set '1024'");
        assert_eq!(err("1/1 all"), "invalid CPU set 'all'");
        assert_eq!(
            err("auto:1/1-4 0-2"),
            "'auto:' needs as many CPUs as threads (4 threads, 3 CPUs)"
        );
        assert_eq!(
            err("auto:1-2/1-2 0-1"),
            "'auto:' takes a range of groups or of threads, not both"
        );
    }
}
