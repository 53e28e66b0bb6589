//! Process-level operating-system steps of start-up: file-descriptor limits, detaching into
//! the background, the pid file, dropping privileges (chroot, group, user), core dumps
//! (`set-dumpable`), and HAProxy's hardening once the process runs.
//!
//! They run in the order HAProxy uses (management.txt §3, configuration.txt §3.1): limits and
//! sockets first, while still privileged; then daemon; then the pid file (before the chroot,
//! so its path is the real one); then chroot, group and user; once every thread started,
//! the process may no longer create processes or let a program it runs gain privileges.

use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::unistd::{Gid, Group, Uid, User};
use sluice_config::global::Owner;
use std::io;
use std::path::Path;

/// File descriptors kept aside for the CLI, logs, checks and resolvers (listening sockets are
/// counted apart, see [`apply_limits`]).
const RESERVED_FDS: u64 = 64;

/// HAProxy caps the automatic descriptor limit here unless `fd-hard-limit` says otherwise
/// (configuration.txt §3.2).
const FD_HARD_LIMIT: u64 = 1_048_576;

/// The descriptor limit in force after [`apply_limits`], and the connection limit with it.
pub struct Limits {
    /// The process-wide connection limit: `maxconn`, else what the descriptors allow.
    pub maxconn: u32,
    /// The descriptor limit in force.
    pub ulimit_n: u64,
    /// The limit `maxconn` or `ulimit-n` asked for, when it could not be had (HAProxy's
    /// `strict-limits` refuses to start then).
    pub short_of: Option<u64>,
}

/// Raises the descriptor limit and works out the process-wide connection limit.
///
/// Each forwarded connection needs two descriptors (client and server), on top of the
/// `listening` sockets (one per thread for each TCP address bound, see `listeners`). With
/// `ulimit-n` set, that limit is applied; otherwise the soft limit is raised to the hard one
/// (capped at `fd_hard_limit`, if set). Without an explicit `maxconn`, it is derived from the
/// limit.
pub fn apply_limits(
    maxconn: Option<u32>,
    (ulimit_n, fd_hard_limit): (Option<u64>, Option<u64>),
    listening: u64,
) -> io::Result<Limits> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    let reserved = RESERVED_FDS + listening;
    let wanted = wanted_limit(maxconn, (ulimit_n, fd_hard_limit), reserved, (soft, hard));
    let limit = if wanted != soft {
        let new_hard = hard.max(wanted);
        match setrlimit(Resource::RLIMIT_NOFILE, wanted, new_hard) {
            Ok(()) => wanted,
            // Not allowed to raise the hard limit: keep what we have.
            Err(_) => match setrlimit(Resource::RLIMIT_NOFILE, wanted.min(hard), hard) {
                Ok(()) => wanted.min(hard),
                Err(_) => soft,
            },
        }
    } else {
        soft
    };
    let derived = (limit.saturating_sub(reserved) / 2).clamp(1, u64::from(u32::MAX)) as u32;
    Ok(Limits {
        maxconn: maxconn.unwrap_or(derived),
        ulimit_n: limit,
        short_of: (limit < wanted).then_some(wanted),
    })
}

/// The descriptor limit to ask for, given the current soft and hard ones: `ulimit-n` if set;
/// else what `maxconn` connections need beside the `reserved` descriptors (never lowering the
/// soft limit); else the hard limit, capped as HAProxy caps its automatic one: at
/// `fd-hard-limit`, below the soft limit too, as HAProxy lowers it, or at 1048576 without.
/// Only the first two can be out of reach.
fn wanted_limit(
    maxconn: Option<u32>,
    (ulimit_n, fd_hard_limit): (Option<u64>, Option<u64>),
    reserved: u64,
    (soft, hard): (u64, u64),
) -> u64 {
    match (ulimit_n, maxconn, fd_hard_limit) {
        (Some(n), _, _) => n,
        (None, Some(conns), _) => (u64::from(conns) * 2 + reserved).max(soft),
        (None, None, Some(cap)) => hard.min(cap),
        (None, None, None) => hard.min(FD_HARD_LIMIT).max(soft),
    }
}

/// Detaches from the terminal: fork, new session, standard streams to /dev/null.
pub fn daemonize() -> io::Result<()> {
    nix::unistd::daemon(true, false).map_err(io::Error::from)
}

/// Writes this process's pid followed by a newline.
pub fn write_pidfile(path: &Path) -> io::Result<()> {
    std::fs::write(path, format!("{}\n", std::process::id()))
}

/// Enters `chroot` (if any), then switches group and user (if any), in that order: the
/// lookups of names happen before the chroot hides /etc.
pub fn drop_privileges(
    chroot: Option<&str>,
    user: Option<&Owner>,
    group: Option<&Owner>,
) -> io::Result<()> {
    let uid = user.map(resolve_user).transpose()?;
    let gid = match group {
        Some(g) => Some(resolve_group(g)?),
        // Switching user without a group keeps the user's primary group, not root's.
        None => match user {
            Some(Owner::Name(name)) => User::from_name(name)
                .map_err(io::Error::from)?
                .map(|u| u.gid),
            _ => None,
        },
    };
    if let Some(dir) = chroot {
        nix::unistd::chroot(dir).map_err(io::Error::from)?;
        nix::unistd::chdir("/").map_err(io::Error::from)?;
    }
    if let Some(gid) = gid {
        nix::unistd::setgroups(&[gid]).map_err(io::Error::from)?;
        nix::unistd::setgid(gid).map_err(io::Error::from)?;
    }
    if let Some(uid) = uid {
        nix::unistd::setuid(uid).map_err(io::Error::from)?;
    }
    Ok(())
}

/// `set-dumpable`, before the privileges are dropped: the core and file size limits are
/// raised as far as allowed (unlimited while privileged, else the hard limits), so that a
/// crash leaves a whole core.
pub fn raise_core_limits() {
    for resource in [Resource::RLIMIT_CORE, Resource::RLIMIT_FSIZE] {
        let unlimited = nix::sys::resource::RLIM_INFINITY;
        if setrlimit(resource, unlimited, unlimited).is_err()
            && let Ok((_, hard)) = getrlimit(resource)
        {
            // Best effort, as HAProxy's: a refused limit leaves the one in force.
            let _ = setrlimit(resource, hard, hard);
        }
    }
}

/// `set-dumpable`, after the privileges are dropped: Linux makes a process that changed user
/// undumpable; this makes it dumpable again.
pub fn make_dumpable() -> io::Result<()> {
    nix::sys::prctl::set_dumpable(true).map_err(io::Error::from)
}

/// HAProxy's hardening of a running process (configuration.txt `insecure-fork-wanted`,
/// `insecure-setuid-wanted`), applied once every thread of the process started: unless
/// `fork` is allowed, no process nor thread may be created any more (`RLIMIT_NPROC` 0, which
/// privileged processes are exempt from), so that a flaw cannot start one; unless `setuid`
/// is allowed, no program the process might run can gain privileges (`no_new_privs`).
pub fn forbid_new_processes(fork: bool, setuid: bool) -> io::Result<()> {
    if !setuid {
        nix::sys::prctl::set_no_new_privs().map_err(io::Error::from)?;
    }
    if !fork {
        setrlimit(Resource::RLIMIT_NPROC, 0, 0).map_err(io::Error::from)?;
    }
    Ok(())
}

fn resolve_user(owner: &Owner) -> io::Result<Uid> {
    match owner {
        Owner::Id(id) => Ok(Uid::from_raw(*id)),
        Owner::Name(name) => User::from_name(name)
            .map_err(io::Error::from)?
            .map(|u| u.uid)
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("unknown user '{name}'"))
            }),
    }
}

fn resolve_group(owner: &Owner) -> io::Result<Gid> {
    match owner {
        Owner::Id(id) => Ok(Gid::from_raw(*id)),
        Owner::Name(name) => Group::from_name(name)
            .map_err(io::Error::from)?
            .map(|g| g.gid)
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("unknown group '{name}'"))
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_asked_for_follows_ulimit_n_then_maxconn_then_the_hard_limit() {
        let limits = (1024, 4096);
        assert_eq!(
            wanted_limit(Some(1000), (Some(5000), None), 64, limits),
            5000
        );
        // Two per connection, and the listening sockets and others beside.
        assert_eq!(
            wanted_limit(Some(1000), (None, None), 64 + 8, limits),
            2 * 1000 + 72
        );
        // Never below the soft limit for a small maxconn.
        assert_eq!(wanted_limit(Some(10), (None, None), 64, limits), 1024);
        assert_eq!(wanted_limit(None, (None, None), 64, limits), 4096);
        assert_eq!(
            wanted_limit(None, (None, None), 64, (1024, u64::MAX)),
            FD_HARD_LIMIT
        );
    }

    #[test]
    fn fd_hard_limit_caps_the_automatic_limit_only() {
        let limits = (1024, 1 << 30);
        assert_eq!(wanted_limit(None, (None, Some(50_000)), 64, limits), 50_000);
        // Below the soft limit too, as HAProxy lowers it.
        assert_eq!(wanted_limit(None, (None, Some(500)), 64, limits), 500);
        // Never above the hard limit.
        assert_eq!(
            wanted_limit(None, (None, Some(50_000)), 64, (1024, 4096)),
            4096
        );
        // `ulimit-n` and `maxconn` say how many themselves.
        assert_eq!(
            wanted_limit(None, (Some(9_000), Some(500)), 64, limits),
            9_000
        );
        assert_eq!(
            wanted_limit(Some(1000), (None, Some(500)), 64, limits),
            2064
        );
    }
}
