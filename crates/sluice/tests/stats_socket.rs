//! The runtime API on `stats socket` (management.txt §9.3): `show info` fields (Name, Pid of
//! the process, Nbthread, CurrConns/CumConns following live sessions, Uptime_sec, Maxconn),
//! `help`, unknown commands answered with the list of valid ones, several `;`-separated
//! commands on one line, the `prompt` interactive mode and `quit`, `stats timeout` closing an
//! idle CLI connection, a stats socket inherited as `fd@N`, and a `level user` socket.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Backend, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, info_field, read_n};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

const HELP_HEADER: &str = "The following commands are valid at this level:\n";
const UNKNOWN_HEADER: &str =
    "Unknown command, but maybe one of the following ones is a better match:\n";

fn proxy_with(global: &str, backend: &Backend) -> (common::Sluice, SocketAddr) {
    let (fe, addr) = frontend();
    let cfg = format!(
        "{global}{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 {}\n",
        fd_bind(&fe),
        backend.addr()
    );
    (common::sluice(&cfg).inherit(fe).start(), addr)
}

/// Reads from `s` until the accumulated text ends with `suffix` (or panics after a while).
fn read_until(s: &mut UnixStream, suffix: &str) -> String {
    read_until_after(s, "", suffix)
}

/// Reads from `s` until the accumulated text contains `needle` and then ends with `suffix`.
fn read_until_after(s: &mut UnixStream, needle: &str, suffix: &str) -> String {
    let deadline = Instant::now() + GENEROUS;
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while !(text.ends_with(suffix)
        && text
            .find(needle)
            .is_some_and(|at| at + needle.len() <= text.len() - suffix.len()))
    {
        assert!(
            Instant::now() < deadline,
            "no {needle:?} then {suffix:?} in {text:?}"
        );
        s.set_read_timeout(Some(GENEROUS)).unwrap();
        let n = s.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "closed before {needle:?} then {suffix:?}; got {text:?}"
        );
        text.push_str(std::str::from_utf8(&buf[..n]).unwrap());
    }
    text
}

fn curr_conns(proxy: &common::Sluice) -> Option<u64> {
    info_field(&proxy.cli("show info"), "CurrConns").and_then(|v| v.parse().ok())
}

#[test]
fn show_info_describes_the_process() {
    let backend = Backend::echo();
    let (proxy, _addr) = proxy_with("global\n    nbthread 2\n    maxconn 500\n", &backend);
    let info = proxy.cli("show info");
    assert_eq!(info_field(&info, "Name"), Some("Sluice"), "{info}");
    assert_eq!(
        info_field(&info, "Pid"),
        Some(proxy.pid().to_string().as_str()),
        "{info}"
    );
    assert_eq!(info_field(&info, "Nbthread"), Some("2"), "{info}");
    assert_eq!(info_field(&info, "Maxconn"), Some("500"), "{info}");
    assert_eq!(info_field(&info, "CurrConns"), Some("0"), "{info}");
    let uptime: u64 = info_field(&info, "Uptime_sec").unwrap().parse().unwrap();
    assert!(uptime < 600, "{info}");
    assert!(
        info_field(&info, "Version").is_some_and(|v| !v.is_empty()),
        "{info}"
    );
    // Every line is "Field: value", and the answer ends with an empty line.
    assert!(info.ends_with("\n\n"), "{info:?}");
    for line in info.trim_end().lines() {
        assert!(line.contains(": "), "malformed line {line:?}");
    }
}

#[test]
fn show_info_counts_live_sessions() {
    let backend = Backend::echo();
    let (proxy, addr) = proxy_with("", &backend);
    let cum_before: u64 = info_field(&proxy.cli("show info"), "CumConns")
        .unwrap()
        .parse()
        .unwrap();
    let mut one = connect(addr);
    one.write_all(b"1").unwrap();
    assert_eq!(read_n(&mut one, 1), b"1");
    let mut two = connect(addr);
    two.write_all(b"2").unwrap();
    assert_eq!(read_n(&mut two, 1), b"2");
    assert_eq!(curr_conns(&proxy), Some(2));
    let info = proxy.cli("show info");
    let cum: u64 = info_field(&info, "CumConns").unwrap().parse().unwrap();
    assert!(cum >= cum_before + 2, "{info}");
    drop(one);
    assert!(
        common::wait_until(GENEROUS, || curr_conns(&proxy) == Some(1)),
        "CurrConns did not drop to 1 after a client left"
    );
    drop(two);
    assert!(common::wait_until(GENEROUS, || curr_conns(&proxy) == Some(0)));
}

#[test]
fn help_lists_the_commands() {
    let backend = Backend::echo();
    let (proxy, _addr) = proxy_with("", &backend);
    let help = proxy.cli("help");
    assert!(help.starts_with(HELP_HEADER), "{help}");
    for usage in ["show info", "help", "prompt", "quit"] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(usage) && l.contains(" : ")),
            "{usage} missing from help:\n{help}"
        );
    }
    assert!(help.ends_with("\n\n"), "{help:?}");
}

#[test]
fn unknown_command_suggests_the_valid_ones() {
    let backend = Backend::echo();
    let (proxy, _addr) = proxy_with("", &backend);
    let answer = proxy.cli("frobnicate the widgets");
    assert!(answer.starts_with(UNKNOWN_HEADER), "{answer}");
    // Then at least one suggestion, in the format of `help`, and the closing empty line.
    let suggestions: Vec<&str> = answer[UNKNOWN_HEADER.len()..].trim_end().lines().collect();
    assert!(!suggestions.is_empty(), "{answer}");
    for line in suggestions {
        assert!(
            line.starts_with("  ") && line.contains(" : "),
            "{line:?} in {answer}"
        );
    }
    assert!(answer.ends_with("\n\n"), "{answer:?}");
}

#[test]
fn semicolons_separate_commands_on_one_line() {
    let backend = Backend::echo();
    let (proxy, _addr) = proxy_with("", &backend);
    let answer = proxy.cli("show info;help");
    let info_at = answer.find("Pid: ").expect("show info output");
    let help_at = answer.find(HELP_HEADER).expect("help output");
    assert!(
        info_at < help_at,
        "commands answered out of order:\n{answer}"
    );
}

#[test]
fn non_interactive_connection_closes_after_one_line() {
    let backend = Backend::echo();
    let (proxy, _addr) = proxy_with("", &backend);
    let mut s = UnixStream::connect(proxy.stats_path()).unwrap();
    s.write_all(b"help\n").unwrap();
    // No second line is written: the connection must close on its own.
    s.set_read_timeout(Some(GENEROUS)).unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    assert!(all.starts_with(HELP_HEADER), "{all}");
}

#[test]
fn prompt_mode_keeps_the_connection_until_quit() {
    let backend = Backend::echo();
    let (proxy, _addr) = proxy_with("", &backend);
    let mut s = UnixStream::connect(proxy.stats_path()).unwrap();
    s.write_all(b"prompt\n").unwrap();
    read_until(&mut s, "> ");
    // Several commands on one line, then the prompt again.
    s.write_all(b"show info;help\n").unwrap();
    let answer = read_until_after(&mut s, HELP_HEADER, "\n> ");
    let pid_line = format!("Pid: {}\n", proxy.pid());
    assert!(answer.contains(&pid_line), "{answer}");
    assert!(answer.contains(HELP_HEADER), "{answer}");
    assert!(
        answer.find(&pid_line) < answer.find(HELP_HEADER),
        "{answer}"
    );
    // Still open: another command.
    s.write_all(b"show info\n").unwrap();
    let again = read_until(&mut s, "\n> ");
    assert!(again.contains(&pid_line), "{again}");
    // quit closes the connection without further output.
    s.write_all(b"quit\n").unwrap();
    let mut rest = Vec::new();
    s.set_read_timeout(Some(GENEROUS)).unwrap();
    s.read_to_end(&mut rest).unwrap();
    assert!(
        rest.is_empty(),
        "output after quit: {:?}",
        String::from_utf8_lossy(&rest)
    );
}

#[test]
fn quit_in_non_interactive_mode_closes_silently() {
    let backend = Backend::echo();
    let (proxy, _addr) = proxy_with("", &backend);
    assert_eq!(proxy.cli("quit"), "");
}

#[test]
fn stats_timeout_closes_an_idle_connection() {
    let backend = Backend::echo();
    let (proxy, _addr) = proxy_with("global\n    stats timeout 300ms\n", &backend);
    // A client that connects and never sends its command line.
    let mut s = UnixStream::connect(proxy.stats_path()).unwrap();
    let idle_from = Instant::now();
    s.set_read_timeout(Some(GENEROUS)).unwrap();
    let mut rest = Vec::new();
    let result = s.read_to_end(&mut rest);
    let idle = idle_from.elapsed();
    assert!(
        result.is_ok(),
        "the idle CLI connection was not closed: {result:?}"
    );
    assert!(
        idle >= Duration::from_millis(280),
        "closed after {idle:?}, before stats timeout"
    );
}

#[test]
fn stats_socket_can_be_an_inherited_fd() {
    let backend = Backend::echo();
    let dir = common::TempDir::new();
    let path = dir.join("inherited.sock");
    let cli = UnixListener::bind(&path).unwrap();
    let (fe, _addr) = frontend();
    let cfg = format!(
        "global\n    stats socket {} level admin\n{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 {}\n",
        fd_bind(&cli),
        fd_bind(&fe),
        backend.addr()
    );
    let proxy = common::sluice(&cfg).inherit(cli).inherit(fe).start();
    let info = common::cli_at(&path, "show info").unwrap();
    assert_eq!(
        info_field(&info, "Pid"),
        Some(proxy.pid().to_string().as_str()),
        "{info}"
    );
}

#[test]
fn user_level_socket_can_read_information() {
    let backend = Backend::echo();
    // A socket at level user, next to the harness's admin one.
    let dir = common::TempDir::new();
    let user_path = dir.join("user.sock");
    let (fe, _addr) = frontend();
    let cfg = format!(
        "global\n    stats socket \"{}\" level user\n{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 {}\n",
        user_path.display(),
        fd_bind(&fe),
        backend.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let user = |line: &str| common::cli_at(&user_path, line).unwrap();
    let info = user("show info");
    assert_eq!(
        info_field(&info, "Pid"),
        Some(proxy.pid().to_string().as_str()),
        "{info}"
    );
    let help = user("help");
    assert!(help.starts_with(HELP_HEADER), "{help}");
    assert!(help.contains("show info"), "{help}");
}

#[test]
fn shutdown_sessions_server_ends_the_servers_sessions() {
    let backend = Backend::echo();
    let (proxy, addr) = proxy_with("", &backend);
    let mut session = connect(addr);
    session.write_all(b"ping").unwrap();
    assert_eq!(read_n(&mut session, 4), b"ping");
    assert_eq!(
        proxy.cli("shutdown sessions server app/nope"),
        "No such server.\n\n"
    );
    proxy.cli("shutdown sessions server app/s1");
    assert!(
        common::read_to_close(&mut session, GENEROUS).is_closed(),
        "the session outlived the shutdown"
    );
}

#[test]
fn set_maxconn_frontend_changes_the_limit_while_sessions_run() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    maxconn 1\n    server s1 {}\n",
        fd_bind(&fe),
        backend.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let served = |s: &mut std::net::TcpStream| {
        s.write_all(b"ping").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut got = [0u8; 4];
        matches!(s.read_exact(&mut got), Ok(()))
    };
    let mut first = connect(addr);
    assert!(served(&mut first));
    // The second connection waits in the kernel's queue while the first holds the slot.
    let mut second = connect(addr);
    assert!(
        !served(&mut second),
        "maxconn 1: the second session must wait"
    );
    assert_eq!(proxy.cli("set maxconn frontend app 2"), "\n");
    second.set_read_timeout(Some(GENEROUS)).unwrap();
    let mut got = [0u8; 4];
    second.read_exact(&mut got).unwrap();
    assert_eq!(
        &got, b"ping",
        "the raised limit lets the waiting session in"
    );
    assert_eq!(
        proxy.cli("set maxconn frontend nope 2"),
        "No such frontend.\n\n"
    );
}

#[test]
fn a_session_can_lower_its_level_but_not_raise_it() {
    let backend = Backend::echo();
    let (proxy, _addr) = proxy_with("", &backend);
    // Answers as HAProxy 2.6 gives them: each command's output ends with an empty line.
    assert_eq!(proxy.cli("show cli level"), "admin\n\n");
    assert_eq!(
        proxy.cli("operator; show cli level; user; show cli level; operator"),
        "\noperator\n\n\nuser\n\nPermission denied\n\n"
    );
    assert_eq!(
        proxy.cli("user; disable frontend app"),
        "\nPermission denied\n\n"
    );
}

#[test]
fn a_stats_socket_and_a_checked_server_in_the_abstract_namespace() {
    // Names unique to this run: the abstract namespace is shared by the whole machine.
    let name = |what: &str| format!("sluice-test-{}-{what}", std::process::id());
    let (fe, addr) = frontend();
    let cfg = format!(
        "global\n    stats socket abns@{} level admin\n{}\nlisten app\n    bind {}\n    option httpchk\n    server inner abns@{} check inter 100ms\nlisten inner\n    bind abns@{}\n    http-request return status 200 content-type text/plain string inner\n",
        name("cli"),
        common::http::HTTP_DEFAULTS,
        fd_bind(&fe),
        name("inner"),
        name("inner"),
    );
    let mut proxy = common::sluice(&cfg).inherit(fe).start();
    let cli = |command: &str| common::cli_abstract(&name("cli"), command).unwrap();
    let row = || {
        cli("show stat")
            .lines()
            .find(|l| l.starts_with("app,inner,"))
            .map(str::to_owned)
            .unwrap_or_default()
    };
    assert!(
        common::wait_until(GENEROUS, || row().contains(",L7OK,")),
        "the check through the abstract socket did not pass: {}",
        row()
    );
    assert!(
        row().contains(&format!(",abns@{},", name("inner"))),
        "{}",
        row()
    );
    let mut client = connect(addr);
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("\r\n\r\ninner"), "{answer}");
    proxy.assert_alive();
}
