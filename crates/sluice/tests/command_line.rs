//! The command line (management.txt §3): `-c` exit codes and diagnostics (`[ALERT]
//! file:line:` on stderr, unimplemented keywords named, "Configuration file is valid" with
//! `-V`, exit 2 when nothing would listen), `-q` and `-dW` on warnings, `-cc` (0 true, 1 false,
//! 2 error), `-v`/`-vv`, `-f DIR` loading the `*.cfg` files of a directory in lexical order,
//! several `-f` and `--`, `-D -p` daemon mode writing the daemon's pid, the `daemon`/`pidfile`
//! global keywords, `.if defined(VAR)` blocks and `${VAR}` expansion driven by the child's
//! environment, and usage errors (unknown options, the unimplemented reload options).
#![allow(clippy::unwrap_used)]

mod common;

use common::{GENEROUS, TCP_DEFAULTS, TempDir, fd_bind, frontend, run};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::Path;
use std::process::Output;

/// A valid configuration that would listen (checking never binds, so any port will do).
const GOOD: &str = "\
defaults
    mode tcp
    timeout connect 1s
    timeout client 1s
    timeout server 1s

listen app
    bind 127.0.0.1:8080
    server s1 127.0.0.1:8081
";

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn check(path: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["-c"];
    args.extend_from_slice(extra);
    args.push("-f");
    let p = path.to_str().unwrap();
    args.push(p);
    run(&args, &[])
}

#[test]
fn check_mode_accepts_a_valid_configuration() {
    let dir = TempDir::new();
    let cfg = dir.write("good.cfg", GOOD);
    let out = check(&cfg, &[]);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    assert!(!stderr(&out).contains("[ALERT]"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("[WARNING]"), "{}", stderr(&out));
}

#[test]
fn check_mode_with_verbose_says_the_configuration_is_valid() {
    let dir = TempDir::new();
    let cfg = dir.write("good.cfg", GOOD);
    let out = check(&cfg, &["-V"]);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    assert!(
        stdout(&out).contains("Configuration file is valid"),
        "stdout:\n{}",
        stdout(&out)
    );
}

#[test]
fn check_mode_rejects_an_unknown_keyword_with_file_and_line() {
    let dir = TempDir::new();
    let text = GOOD.replace("    server s1", "    no_such_keyword 1\n    server s1");
    let cfg = dir.write("bad.cfg", &text);
    let out = check(&cfg, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    // The keyword is on line 9 of the file.
    let want = format!("[ALERT] {}:9: no_such_keyword:", cfg.display());
    assert!(err.contains(&want), "expected {want:?} in stderr:\n{err}");
}

#[test]
fn check_mode_rejects_a_bad_value_with_file_and_line() {
    let dir = TempDir::new();
    let text = GOOD.replace("timeout client 1s", "timeout client soon");
    let cfg = dir.write("bad.cfg", &text);
    let out = check(&cfg, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let want = format!("[ALERT] {}:4:", cfg.display());
    assert!(err.contains(&want), "expected {want:?} in stderr:\n{err}");
}

#[test]
fn check_mode_rejects_a_bad_server_address() {
    let dir = TempDir::new();
    let text = GOOD.replace("server s1 127.0.0.1:8081", "server s1 127.0.0.1:99999");
    let cfg = dir.write("bad.cfg", &text);
    let out = check(&cfg, &[]);
    assert_eq!(out.status.code(), Some(1));
    let want = format!("[ALERT] {}:9: server:", cfg.display());
    assert!(
        stderr(&out).contains(&want),
        "expected {want:?} in:\n{}",
        stderr(&out)
    );
}

#[test]
fn check_mode_checks_bind_thread_sets_against_the_thread_count() {
    let dir = TempDir::new();
    let text = format!(
        "global\n    nbthread 2\n{}",
        GOOD.replace("bind 127.0.0.1:8080", "bind 127.0.0.1:8080 thread 2")
    );
    let cfg = dir.write("two.cfg", &text);
    assert_eq!(check(&cfg, &[]).status.code(), Some(0));
    let cfg = dir.write(
        "three.cfg",
        &text.replace("8080 thread 2", "8080 thread 1-3"),
    );
    let out = check(&cfg, &[]);
    assert_eq!(out.status.code(), Some(1));
    let want = format!(
        "[ALERT] {}:10: proxy 'app': 'thread' names thread 3, which does not exist (2 threads)",
        cfg.display()
    );
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));
}

#[test]
fn check_mode_rejects_an_unimplemented_keyword_by_name() {
    // A keyword HAProxy knows but Sluice does not implement is an error, never ignored.
    let dir = TempDir::new();
    let text = format!("global\n    lua-load /nonexistent/script.lua\n{GOOD}");
    let cfg = dir.write("lua.cfg", &text);
    let out = check(&cfg, &[]);
    assert_eq!(out.status.code(), Some(1));
    let want = format!(
        "[ALERT] {}:2: lua-load: not supported by Sluice",
        cfg.display()
    );
    assert!(
        stderr(&out).contains(&want),
        "expected {want:?} in:\n{}",
        stderr(&out)
    );
}

#[test]
fn check_mode_reports_a_missing_file() {
    let dir = TempDir::new();
    let out = check(&dir.join("absent.cfg"), &[]);
    assert!(stderr(&out).contains("absent.cfg"), "{}", stderr(&out));
    assert!(stderr(&out).contains("[ALERT]"), "{}", stderr(&out));
    // HAProxy: "Cannot open configuration file/directory", exit 1.
    assert_eq!(out.status.code(), Some(1), "stderr:\n{}", stderr(&out));
}

#[test]
fn missing_file_next_to_a_good_one_is_fatal() {
    let dir = TempDir::new();
    let good = dir.write("good.cfg", GOOD);
    let missing = dir.join("absent.cfg");
    let out = run(
        &[
            "-c",
            "-f",
            good.to_str().unwrap(),
            "-f",
            missing.to_str().unwrap(),
        ],
        &[],
    );
    assert!(stderr(&out).contains("absent.cfg"), "{}", stderr(&out));
    // HAProxy refuses to go on with part of the configuration missing: exit 1.
    assert_eq!(out.status.code(), Some(1), "stderr:\n{}", stderr(&out));
}

#[test]
fn check_mode_exits_2_when_nothing_would_listen() {
    let dir = TempDir::new();
    let cfg = dir.write("idle.cfg", "global\n    maxconn 10\n");
    let out = check(&cfg, &[]);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
}

#[test]
fn warnings_are_shown_but_do_not_fail_unless_zero_warning() {
    let dir = TempDir::new();
    // No timeouts at all: a warning, not an error.
    let cfg = dir.write(
        "warn.cfg",
        "listen app\n    mode tcp\n    bind 127.0.0.1:8080\n    server s1 127.0.0.1:8081\n",
    );
    let out = check(&cfg, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let want = format!("[WARNING] {}:1:", cfg.display());
    assert!(
        stderr(&out).contains(&want),
        "expected {want:?} in:\n{}",
        stderr(&out)
    );

    let quiet = check(&cfg, &["-q"]);
    assert_eq!(quiet.status.code(), Some(0));
    assert!(
        !stderr(&quiet).contains("[WARNING]"),
        "-q shows warnings:\n{}",
        stderr(&quiet)
    );

    let strict = check(&cfg, &["-dW"]);
    assert_eq!(
        strict.status.code(),
        Some(1),
        "-dW accepted warnings:\n{}",
        stderr(&strict)
    );
}

#[test]
fn condition_evaluation_exit_codes() {
    let true_ = run(&["-cc", "version_atleast(2.4) && !feature(OPENSSL)"], &[]);
    assert_eq!(true_.status.code(), Some(0), "{}", stderr(&true_));
    let false_ = run(&["-cc", "version_before(2.0)"], &[]);
    assert_eq!(false_.status.code(), Some(1), "{}", stderr(&false_));
    let error = run(&["-cc", "version_atleast("], &[]);
    assert_eq!(error.status.code(), Some(2), "{}", stderr(&error));
    let unknown = run(&["-cc", "no_such_predicate(1)"], &[]);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
}

#[test]
fn condition_evaluation_sees_the_environment() {
    let unset = run(&["-cc", "defined(SLUICE_IT_COND)"], &[]);
    assert_eq!(unset.status.code(), Some(1));
    let set = run(
        &["-cc", "defined(SLUICE_IT_COND)"],
        &[("SLUICE_IT_COND", "1")],
    );
    assert_eq!(set.status.code(), Some(0));
}

#[test]
fn condition_expression_expands_environment_variables() {
    // HAProxy splits the -cc expression like a configuration line, expanding "$VAR".
    let equal = run(
        &["-cc", "streq(\"$SLUICE_IT_COND\",\"abc\")"],
        &[("SLUICE_IT_COND", "abc")],
    );
    assert_eq!(equal.status.code(), Some(0), "{}", stderr(&equal));
}

#[test]
fn version_options_print_and_exit_zero() {
    let v = run(&["-v"], &[]);
    assert_eq!(v.status.code(), Some(0));
    let line = stdout(&v);
    assert!(line.to_lowercase().contains("version"), "{line}");
    assert_eq!(line.lines().count(), 1, "-v prints one line: {line:?}");

    let vv = run(&["-vv"], &[]);
    assert_eq!(vv.status.code(), Some(0));
    let report = stdout(&vv);
    assert!(
        report.starts_with(line.trim_end()),
        "-vv starts with the -v line:\n{report}"
    );
    assert!(report.contains("Feature list"), "{report}");
}

#[test]
fn usage_errors_exit_one() {
    let none = run(&[], &[]);
    assert_eq!(none.status.code(), Some(1));
    assert!(stderr(&none).contains("Usage"), "{}", stderr(&none));
    let unknown = run(&["-f", "x.cfg", "-Z"], &[]);
    assert_eq!(unknown.status.code(), Some(1));
}

#[test]
fn config_directory_is_read_in_lexical_order_and_only_cfg_files() {
    let (fe, _addr) = frontend();
    let builder = common::sluice("");
    let conf_dir = builder.dir().join("conf.d");
    std::fs::create_dir(&conf_dir).unwrap();
    // Created in reverse order so that directory order differs from name order.
    std::fs::write(
        conf_dir.join("zz-notes.txt"),
        "this is not a configuration\n",
    )
    .unwrap();
    std::fs::write(
        conf_dir.join("20-last.cfg"),
        "global\n    description from-20\n",
    )
    .unwrap();
    std::fs::write(
        conf_dir.join("10-first.cfg"),
        format!(
            "global\n    description from-10\n{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 127.0.0.1:9\n",
            fd_bind(&fe)
        ),
    )
    .unwrap();
    let proxy = builder
        .arg("-f")
        .arg(conf_dir.to_str().unwrap())
        .inherit(fe)
        .start();
    let info = proxy.cli("show info");
    // The later file's description wins: 20-last.cfg was read after 10-first.cfg.
    assert_eq!(
        common::info_field(&info, "description"),
        Some("from-20"),
        "{info}"
    );
}

#[test]
fn config_directory_errors_name_the_file() {
    let dir = TempDir::new();
    std::fs::write(dir.join("10-good.cfg"), GOOD).unwrap();
    std::fs::write(dir.join("20-bad.cfg"), "global\n    bogus_keyword\n").unwrap();
    let out = check(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let want = format!("{}:2:", dir.join("20-bad.cfg").display());
    assert!(
        stderr(&out).contains(&want),
        "expected {want:?} in:\n{}",
        stderr(&out)
    );
}

#[test]
fn several_files_and_double_dash() {
    let dir = TempDir::new();
    let proxies = dir.write("proxies.cfg", GOOD);
    let global = dir.write("global.cfg", "global\n    maxconn 100\n");
    let bad = dir.write("bad.cfg", "global\n    bogus_keyword\n");
    let ok = run(
        &[
            "-c",
            "-f",
            global.to_str().unwrap(),
            "--",
            proxies.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let ko = run(
        &[
            "-c",
            "-f",
            proxies.to_str().unwrap(),
            "--",
            global.to_str().unwrap(),
            bad.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(ko.status.code(), Some(1), "the file after -- was not read");
    assert!(stderr(&ko).contains("bad.cfg:2:"), "{}", stderr(&ko));
}

#[test]
fn if_defined_blocks_follow_the_childs_environment() {
    let dir = TempDir::new();
    let text = format!(".if defined(SLUICE_IT_BREAK)\nglobal\n    bogus_keyword\n.endif\n{GOOD}");
    let cfg = dir.write("cond.cfg", &text);
    let path = cfg.to_str().unwrap();
    let plain = run(&["-c", "-f", path], &[]);
    assert_eq!(plain.status.code(), Some(0), "{}", stderr(&plain));
    let broken = run(&["-c", "-f", path], &[("SLUICE_IT_BREAK", "1")]);
    assert_eq!(broken.status.code(), Some(1), "the .if block was ignored");
    assert!(
        stderr(&broken).contains("cond.cfg:3:"),
        "{}",
        stderr(&broken)
    );
}

/// A configuration whose `description` depends on `SLUICE_IT_SITE`.
fn site_config(bind: &str) -> String {
    format!(
        ".if defined(SLUICE_IT_SITE)\nglobal\n    description \"site ${{SLUICE_IT_SITE}}\"\n.else\nglobal\n    description nowhere\n.endif\n\
         {TCP_DEFAULTS}\nlisten app\n    bind {bind}\n    server s1 127.0.0.1:9\n"
    )
}

#[test]
fn environment_drives_conditions_and_expansion_in_a_running_process() {
    let (fe, _addr) = frontend();
    let proxy = common::sluice(&site_config(&fd_bind(&fe)))
        .env("SLUICE_IT_SITE", "paris")
        .inherit(fe)
        .start();
    let info = proxy.cli("show info");
    assert_eq!(
        common::info_field(&info, "description"),
        Some("site paris"),
        "{info}"
    );

    let (fe, _addr) = frontend();
    let proxy = common::sluice(&site_config(&fd_bind(&fe)))
        .inherit(fe)
        .start();
    let info = proxy.cli("show info");
    assert_eq!(
        common::info_field(&info, "description"),
        Some("nowhere"),
        "{info}"
    );
}

/// Kills the daemon (by pid) if the test ends early.
struct Daemon(i32);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0), Signal::SIGKILL);
    }
}

/// True while `pid` names a live (non-zombie) process.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next();
            !matches!(state, Some("Z" | "X"))
        }
        Err(_) => false,
    }
}

fn daemon_runs_and_writes_its_pid(extra_global: &str, args: &[&str]) {
    let dir = TempDir::new();
    let stats = dir.join("stats.sock");
    let pidfile = dir.join("sluice.pid");
    let front = dir.join("front.sock");
    let cfg = dir.write(
        "daemon.cfg",
        &format!(
            "global\n    stats socket \"{}\" level admin\n{}{TCP_DEFAULTS}\nlisten app\n    bind \"{}\"\n    server s1 127.0.0.1:9\n",
            stats.display(),
            extra_global.replace("PIDFILE", pidfile.to_str().unwrap()),
            front.display()
        ),
    );
    let mut all: Vec<&str> = args.to_vec();
    let pid_arg = pidfile.to_str().unwrap().to_owned();
    all.iter_mut().for_each(|a| {
        if *a == "PIDFILE" {
            *a = &pid_arg;
        }
    });
    all.extend(["-f", cfg.to_str().unwrap()]);
    // The launching process returns at once; the daemon goes on alone.
    let launcher = run(&all, &[]);
    assert_eq!(launcher.status.code(), Some(0), "{}", stderr(&launcher));

    let mut pid = None;
    assert!(
        common::wait_until(GENEROUS, || {
            pid = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|t| t.trim().parse::<i32>().ok());
            pid.is_some()
        }),
        "no pid file written"
    );
    let pid = pid.unwrap();
    let _guard = Daemon(pid);
    assert!(alive(pid), "the pid file names no running process");
    assert!(
        std::fs::read_to_string(&pidfile).unwrap().ends_with('\n'),
        "the pid file ends with a newline"
    );

    let mut info = String::new();
    assert!(
        common::wait_until(GENEROUS, || {
            info = common::cli_at(&stats, "show info").unwrap_or_default();
            info.contains("Pid:")
        }),
        "the daemon does not answer on its stats socket"
    );
    assert_eq!(
        common::info_field(&info, "Pid"),
        Some(pid.to_string().as_str()),
        "the pid file and the daemon disagree: {info}"
    );

    kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap();
    assert!(
        common::wait_until(GENEROUS, || !alive(pid)),
        "the daemon survived SIGTERM"
    );
}

#[test]
fn daemon_option_detaches_and_writes_the_pidfile() {
    daemon_runs_and_writes_its_pid("", &["-D", "-p", "PIDFILE"]);
}

#[test]
fn daemon_and_pidfile_keywords_do_the_same() {
    daemon_runs_and_writes_its_pid("    daemon\n    pidfile \"PIDFILE\"\n", &[]);
}

#[test]
fn bundled_demo_configuration_is_valid() {
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/demo.cfg");
    let out = common::run(&["-c", "-f", demo], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The systemd unit in `contrib/systemd` only uses options Sluice accepts: each of its
/// `sluice` command lines, run in check mode on the demo configuration, succeeds.
#[test]
fn the_systemd_unit_runs_commands_sluice_accepts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let unit = std::fs::read_to_string(root.join("contrib/systemd/sluice.service")).unwrap();
    let config = root.join("examples/demo.cfg");
    let dir = common::TempDir::new();
    let commands: Vec<&str> = unit
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.starts_with("Exec"))
        .map(|(_, v)| v)
        .filter(|v| v.starts_with("/usr/local/sbin/sluice "))
        .collect();
    assert_eq!(commands.len(), 3, "{unit}");
    assert!(unit.contains("Type=notify") && commands.iter().any(|c| c.contains("-Ws")));
    for command in commands {
        let mut args: Vec<String> = command
            .split_whitespace()
            .skip(1)
            .map(|w| match w {
                "$CONFIG" => config.display().to_string(),
                "$PIDFILE" => dir.join("pid").display().to_string(),
                w if w.starts_with("/run/") => dir.join("master.sock").display().to_string(),
                w => w.to_owned(),
            })
            .collect();
        if !args.iter().any(|a| a == "-c") {
            args.push("-c".to_owned());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = common::run(&args, &[]);
        assert!(out.status.success(), "{command}: {}", stderr(&out));
    }
}
