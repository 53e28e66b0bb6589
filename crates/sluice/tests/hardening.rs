//! The process's own protections, as HAProxy 2.6 sets them: once running it may create no
//! process (`RLIMIT_NPROC` 0) and no program it runs may gain privileges (`no_new_privs`),
//! unless `insecure-fork-wanted` / `insecure-setuid-wanted` allow it; `set-dumpable` raises the
//! core size limit so that a crash leaves a core. Read from /proc, as the kernel applies them.
#![allow(clippy::unwrap_used)]

mod common;

use common::sluice;

/// The line of /proc/PID/`file` starting with `name`, its words after the name.
fn proc_line(pid: u32, file: &str, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap();
    let line = text.lines().find(|l| l.starts_with(name)).unwrap();
    line[name.len()..]
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// `no_new_privs` and the soft and hard process limits of `pid`.
fn protections(pid: u32) -> (String, Vec<String>) {
    let no_new_privs = proc_line(pid, "status", "NoNewPrivs:").join("");
    let processes = proc_line(pid, "limits", "Max processes")
        .into_iter()
        .take(2)
        .collect();
    (no_new_privs, processes)
}

#[test]
fn a_running_process_may_not_fork_nor_gain_privileges_unless_allowed() {
    let strict = sluice("").start();
    assert_eq!(
        protections(strict.pid()),
        ("1".to_owned(), vec!["0".to_owned(), "0".to_owned()])
    );
    let lax = sluice("global\n    insecure-fork-wanted\n    insecure-setuid-wanted\n").start();
    let (no_new_privs, processes) = protections(lax.pid());
    assert_eq!(no_new_privs, "0");
    assert_ne!(processes, vec!["0".to_owned(), "0".to_owned()]);
    // The `no` forms restore the protections.
    let config = "global\n    insecure-fork-wanted\n    no insecure-fork-wanted\n";
    let restored = sluice(config).start();
    assert_eq!(
        protections(restored.pid()).1,
        vec!["0".to_owned(), "0".to_owned()]
    );
}

#[test]
fn set_dumpable_raises_the_core_size_limit() {
    let core_limit = |pid| proc_line(pid, "limits", "Max core file size");
    let plain = sluice("").after_shell("ulimit -S -c 0").start();
    assert_eq!(core_limit(plain.pid())[0], "0");
    let dumpable = sluice("global\n    set-dumpable\n")
        .after_shell("ulimit -S -c 0")
        .start();
    let limit = core_limit(dumpable.pid());
    assert_ne!(limit[0], "0");
    assert_eq!(limit[0], limit[1], "the soft limit is the hard one");
}
