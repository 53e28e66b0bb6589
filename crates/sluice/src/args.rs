//! The command line, compatible with HAProxy's (management.txt §3).
//!
//! [`parse`] turns `argv` into [`Options`] or a usage error; [`worker_args`] is the command
//! line a master (`-W`, `-Ws`) gives its workers.

use std::path::PathBuf;

/// What the command line asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `-f` files and directories, and files after `--`, in order.
    pub config_paths: Vec<PathBuf>,
    /// `-c`: check the configuration and exit.
    pub check_only: bool,
    /// `-cc EXPR`: evaluate a condition and exit.
    pub eval_condition: Option<String>,
    /// `-d`: foreground, messages on stderr.
    pub debug: bool,
    /// `-db`: stay in the foreground.
    pub foreground: bool,
    /// `-D`: detach into the background.
    pub daemon: bool,
    /// `-p FILE`: write the pid there.
    pub pidfile: Option<PathBuf>,
    /// `-q`: no messages but alerts.
    pub quiet: bool,
    /// `-V`: verbose (undoes `-q`).
    pub verbose: bool,
    /// `-dD`: show `.diag` messages.
    pub diagnostic: bool,
    /// `-dW`: refuse to start if there is any warning.
    pub zero_warning: bool,
    /// `-dR`: as `noreuseport` in the configuration.
    pub no_reuseport: bool,
    /// `-v` (1) or `-vv` (2).
    pub version: u8,
    /// `-n N`: process-wide maxconn.
    pub maxconn: Option<u32>,
    /// `-N N`: default per-frontend maxconn.
    pub proxy_maxconn: Option<u32>,
    /// `-L NAME`: local peer name.
    pub local_peer: Option<String>,
    /// `-C DIR`: change directory before reading files.
    pub chdir: Option<PathBuf>,
    /// `-sf PID...` / `-st PID...`: the processes to stop once this one listens, and how.
    pub replaces: Option<(Replace, Vec<i32>)>,
    /// `-W`: master-worker mode.
    pub master_worker: bool,
    /// `-Ws`: master-worker mode with systemd notifications.
    pub systemd: bool,
    /// `-S ADDR[,OPTION,VALUE...]`: the master CLI socket.
    pub master_socket: Option<String>,
    /// `-x PATH`: take the listening sockets from the process serving this stats socket.
    pub transfer_socket: Option<PathBuf>,
}

/// How the processes named by `-sf`/`-st` are stopped once the new one listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replace {
    /// `-sf`: soft stop (SIGUSR1): they stop listening and finish their sessions.
    Finish,
    /// `-st`: terminate (SIGTERM) at once.
    Terminate,
}

/// A command line Sluice cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

/// Parses the arguments after the program name.
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Options, UsageError> {
    let mut opts = Options::default();
    let mut args = args.into_iter().peekable();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| UsageError(format!("option '{name}' expects a value")))
        };
        match arg.as_str() {
            "--" => {
                opts.config_paths.extend(args.by_ref().map(PathBuf::from));
                break;
            }
            "-f" => opts.config_paths.push(PathBuf::from(value("-f")?)),
            "-c" => opts.check_only = true,
            "-cc" => opts.eval_condition = Some(value("-cc")?),
            "-d" => opts.debug = true,
            "-db" => opts.foreground = true,
            "-D" => opts.daemon = true,
            "-p" => opts.pidfile = Some(PathBuf::from(value("-p")?)),
            "-q" => {
                opts.quiet = true;
                opts.verbose = false;
            }
            "-V" => {
                opts.verbose = true;
                opts.quiet = false;
            }
            "-dD" => opts.diagnostic = true,
            "-dW" => opts.zero_warning = true,
            "-dR" => opts.no_reuseport = true,
            "-v" => opts.version = opts.version.max(1),
            "-vv" => opts.version = 2,
            "-n" => opts.maxconn = Some(number("-n", &value("-n")?)?),
            "-N" => opts.proxy_maxconn = Some(number("-N", &value("-N")?)?),
            "-L" => opts.local_peer = Some(value("-L")?),
            "-C" => opts.chdir = Some(PathBuf::from(value("-C")?)),
            "-W" => opts.master_worker = true,
            "-Ws" => {
                opts.master_worker = true;
                opts.systemd = true;
            }
            "-S" => opts.master_socket = Some(value("-S")?),
            "-x" => opts.transfer_socket = Some(PathBuf::from(value("-x")?)),
            "-sf" | "-st" => {
                // As in HAProxy, the process ids are every following number.
                let mut pids = Vec::new();
                while let Some(pid) = args.peek().and_then(|a| a.parse::<i32>().ok()) {
                    args.next();
                    if pid > 0 {
                        pids.push(pid);
                    }
                }
                let how = if arg == "-sf" {
                    Replace::Finish
                } else {
                    Replace::Terminate
                };
                opts.replaces = Some((how, pids));
            }
            other if other.starts_with('-') => {
                return Err(UsageError(format!("unknown option '{other}'")));
            }
            // HAProxy takes a bare word as a configuration file too (old syntax).
            _ => opts.config_paths.push(PathBuf::from(arg)),
        }
    }
    if opts.eval_condition.is_none() && opts.version == 0 && opts.config_paths.is_empty() {
        return Err(UsageError("no configuration file given (use -f)".into()));
    }
    Ok(opts)
}

/// The command line of a worker: the master's (`args`, program name excluded) without the
/// options only the master acts on: `-W`, `-S`, `-D` (the master detaches), `-p` (the pid file
/// names the master), `-C` (the worker starts in the directory the master moved to), `-x` (the
/// master holds the sockets) and old `-sf`/`-st` lists (the master adds its own).
pub fn worker_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        match arg {
            "--" => {
                out.extend_from_slice(&args[i - 1..]);
                break;
            }
            "-W" | "-Ws" | "-D" => {}
            "-S" | "-p" | "-C" | "-x" => i += 1,
            "-sf" | "-st" => {
                while args.get(i).is_some_and(|a| a.parse::<i32>().is_ok()) {
                    i += 1;
                }
            }
            _ => out.push(arg.to_owned()),
        }
    }
    out
}

fn number(option: &str, text: &str) -> Result<u32, UsageError> {
    text.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| {
        UsageError(format!(
            "option '{option}' expects a positive number, not '{text}'"
        ))
    })
}

/// The usage text printed after a usage error.
pub const USAGE: &str = "\
Usage : sluice [-f <cfgfile|cfgdir>]* [ -vdVD ] [ -n <maxconn> ] [ -N <maxpconn> ]
        [ -p <pidfile> ] [ -C <dir> ] [ -c ] [ -cc <condition> ] [ -- <cfgfile>* ]
        -v displays version ; -vv shows known build options.
        -d enters debug mode ; -db only disables background mode.
        -dD diagnostic mode : shows .diag messages ; -dW refuses warnings.
        -V enters verbose mode (disables quiet mode)
        -D goes daemon ; -C changes to <dir> before loading files.
        -q quiet mode : don't display messages
        -c check mode : only check config files and exit
        -cc check condition : evaluate a condition and exit
        -n sets the maximum total # of connections
        -N sets the default, per-proxy maximum # of connections
        -L set local peer name
        -p writes pids of all children to this file
        -sf/-st [pid ]* finishes/terminates old pids once this process listens.
        -W master-worker mode ; -Ws with systemd notifications ; -S binds the master CLI socket.
        -x <unix_socket> takes the listening sockets of the old process (reload).
";

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Options, UsageError> {
        parse(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn files_from_f_and_double_dash_keep_their_order() {
        let o = args(&["-f", "a.cfg", "-c", "-f", "dir", "--", "b.cfg", "-x"]).unwrap();
        assert_eq!(
            o.config_paths,
            ["a.cfg", "dir", "b.cfg", "-x"].map(PathBuf::from)
        );
        assert!(o.check_only);
    }

    #[test]
    fn values_are_parsed() {
        let o = args(&[
            "-f",
            "x",
            "-n",
            "100",
            "-N",
            "10",
            "-p",
            "/run/s.pid",
            "-D",
            "-q",
            "-L",
            "me",
        ])
        .unwrap();
        assert_eq!(o.maxconn, Some(100));
        assert_eq!(o.proxy_maxconn, Some(10));
        assert_eq!(o.pidfile, Some(PathBuf::from("/run/s.pid")));
        assert!(o.daemon && o.quiet);
        assert_eq!(o.local_peer.as_deref(), Some("me"));
    }

    #[test]
    fn condition_and_version_need_no_file() {
        assert_eq!(
            args(&["-cc", "1"]).unwrap().eval_condition.as_deref(),
            Some("1")
        );
        assert_eq!(args(&["-vv"]).unwrap().version, 2);
    }

    #[test]
    fn errors_are_explained() {
        assert_eq!(
            args(&[]).unwrap_err().0,
            "no configuration file given (use -f)"
        );
        assert_eq!(args(&["-f"]).unwrap_err().0, "option '-f' expects a value");
        assert_eq!(
            args(&["-f", "x", "-n", "zero"]).unwrap_err().0,
            "option '-n' expects a positive number, not 'zero'"
        );
        assert_eq!(
            args(&["-f", "x", "-Z"]).unwrap_err().0,
            "unknown option '-Z'"
        );
        let o = args(&["-f", "x", "-Ws"]).unwrap();
        assert!(o.master_worker && o.systemd);
    }

    #[test]
    fn master_options_and_the_workers_command_line() {
        let o = args(&["-W", "-S", "/run/m.sock,mode,600", "-f", "x"]).unwrap();
        assert!(o.master_worker);
        assert_eq!(o.master_socket.as_deref(), Some("/run/m.sock,mode,600"));
        let raw: Vec<String> = [
            "-W", "-D", "-S", "/m", "-p", "pid", "-C", "/etc", "-f", "a.cfg", "-sf", "1", "2",
            "-d", "--", "-W", "b.cfg",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            worker_args(&raw),
            ["-f", "a.cfg", "-d", "--", "-W", "b.cfg"]
        );
    }

    #[test]
    fn replaced_processes_are_every_following_number() {
        let o = args(&["-f", "x", "-sf", "12", "34", "-p", "pid"]).unwrap();
        assert_eq!(o.replaces, Some((Replace::Finish, vec![12, 34])));
        assert_eq!(o.pidfile, Some(PathBuf::from("pid")));
        let o = args(&["-st", "7", "-f", "x"]).unwrap();
        assert_eq!(o.replaces, Some((Replace::Terminate, vec![7])));
        // An empty list (a pid file that was empty) is accepted: nothing to stop.
        let o = args(&["-f", "x", "-sf"]).unwrap();
        assert_eq!(o.replaces, Some((Replace::Finish, vec![])));
    }

    #[test]
    fn quiet_and_verbose_undo_each_other() {
        let o = args(&["-f", "x", "-q", "-V"]).unwrap();
        assert!(o.verbose && !o.quiet);
    }
}
