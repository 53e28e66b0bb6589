//! External checks (`option external-check`, configuration.txt §4.2): a program says whether
//! a server is healthy, as in HAProxy 2.6.
//!
//! The program (`external-check command`, run as written, relative to the working directory
//! when it has no `/`) gets four arguments: the proxy's first listening address and port
//! (`NOT_USED` for a backend, the path and `NOT_USED` for a unix socket), the server's address
//! and port; and a clean environment of `HAPROXY_PROXY_*`, `HAPROXY_SERVER_*` and `PATH`
//! (`external-check path`, empty by default), or the process's own environment beside them
//! under the global `external-check preserve-env`. Exit status 0 passes (`PROCOK`), another
//! fails with that status as its code (`PROCERR`); a program still running after the check's
//! interval is killed (`PROCTOUT`). Its standard input is empty; its output goes to the
//! process's.

use crate::status::{Outcome, Status};
use std::process::Stdio;
use std::time::Duration;

/// The program of a backend's external check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct External {
    /// `external-check command`.
    pub command: String,
    /// `external-check path`: the program's `PATH`.
    pub path: String,
}

/// What one run gets: its four arguments and its variables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Invocation {
    /// Proxy address, proxy port, server address, server port.
    pub args: [String; 4],
    /// `HAPROXY_*` variables, `PATH` added by [`run`].
    pub vars: Vec<(&'static str, String)>,
    /// The environment kept under `external-check preserve-env` (empty otherwise).
    pub preserved: Vec<(String, String)>,
}

/// Runs the program once, killed if it outlasts `limit`.
pub async fn run(external: &External, invocation: &Invocation, limit: Duration) -> Outcome {
    // As `execve` takes it: a name without `/` is in the working directory, not on `PATH`.
    let program = if external.command.contains('/') {
        external.command.clone()
    } else {
        format!("./{}", external.command)
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(&invocation.args)
        .env_clear()
        .envs(invocation.preserved.iter().map(|(k, v)| (k, v)))
        .envs(invocation.vars.iter().map(|(k, v)| (k, v)))
        .env("PATH", &external.path)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        // Forbidden (no `insecure-fork-wanted`), missing or not executable.
        Err(err) => return Outcome::new(Status::ProcErr).info(err.to_string()),
    };
    match tokio::time::timeout(limit, child.wait()).await {
        Ok(Ok(status)) if status.success() => Outcome::new(Status::ProcOk).code(0),
        Ok(Ok(status)) => {
            let code = status
                .code()
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(0);
            Outcome::new(Status::ProcErr).code(code)
        }
        Ok(Err(err)) => Outcome::new(Status::ProcErr).info(err.to_string()),
        // Dropped with the future: killed, and reaped in the background.
        Err(_) => Outcome::new(Status::ProcTout).code(0),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn shell(script: &str) -> (External, tempfile_path::Guard) {
        let guard = tempfile_path::Guard::new(script);
        let external = External {
            command: guard.path.clone(),
            path: "/usr/bin:/bin".into(),
        };
        (external, guard)
    }

    /// A script written to a temporary file, removed on drop.
    mod tempfile_path {
        use std::io::Write;

        pub struct Guard {
            pub path: String,
        }

        impl Guard {
            pub fn new(script: &str) -> Guard {
                use std::sync::atomic::{AtomicU32, Ordering};
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let path = std::env::temp_dir().join(format!(
                    "sluice-external-check-{}-{}.sh",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed)
                ));
                // Written by a child process: a file this process held open for writing
                // would be inherited by a process another test thread forks meanwhile, and
                // running it would then fail with ETXTBSY until that child execs.
                let mut writer = std::process::Command::new("sh")
                    .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
                    .arg(&path)
                    .stdin(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut stdin = writer.stdin.take().unwrap();
                stdin
                    .write_all(format!("#!/bin/sh\n{script}\n").as_bytes())
                    .unwrap();
                drop(stdin);
                assert!(writer.wait().unwrap().success());
                Guard {
                    path: path.display().to_string(),
                }
            }
        }

        impl Drop for Guard {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }

    fn invocation() -> Invocation {
        Invocation {
            args: ["NOT_USED", "NOT_USED", "192.0.2.1", "80"].map(str::to_owned),
            vars: vec![("HAPROXY_SERVER_NAME", "s1".to_owned())],
            preserved: Vec::new(),
        }
    }

    #[tokio::test]
    async fn exit_statuses_decide_and_arguments_and_variables_arrive() {
        let limit = Duration::from_secs(10);
        let (ok, _g) = shell(
            "[ \"$*\" = 'NOT_USED NOT_USED 192.0.2.1 80' ] && [ \"$HAPROXY_SERVER_NAME\" = s1 ] \
             && [ \"$PATH\" = /usr/bin:/bin ] && [ -z \"$HOME\" ]",
        );
        let outcome = run(&ok, &invocation(), limit).await;
        assert_eq!((outcome.status, outcome.code), (Status::ProcOk, Some(0)));
        let (failing, _g) = shell("exit 3");
        let outcome = run(&failing, &invocation(), limit).await;
        assert_eq!((outcome.status, outcome.code), (Status::ProcErr, Some(3)));
        let missing = External {
            command: "/nonexistent/check".into(),
            path: String::new(),
        };
        assert_eq!(
            run(&missing, &invocation(), limit).await.status,
            Status::ProcErr
        );
        // The kept environment goes along.
        let (kept, _g) = shell("[ \"$KEPT\" = yes ]");
        let mut with_env = invocation();
        with_env.preserved = vec![("KEPT".into(), "yes".into())];
        assert_eq!(run(&kept, &with_env, limit).await.status, Status::ProcOk);
    }

    #[tokio::test]
    async fn a_program_that_outlasts_its_limit_is_a_timeout() {
        let (slow, _g) = shell("exec sleep 30");
        let started = std::time::Instant::now();
        let outcome = run(&slow, &invocation(), Duration::from_millis(100)).await;
        assert_eq!(outcome.status, Status::ProcTout);
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
