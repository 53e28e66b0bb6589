//! The statistics and server-management commands of the runtime API against a running
//! process: `show stat` (header, row order, statuses, filters, HTTP response counters),
//! `show servers state`, `show backend`, `disable|enable server` and `set server ... state`
//! steering the traffic, `set weight`/`get weight`, `clear counters`, `disable frontend`,
//! `set maxconn global`, and the socket levels (a `level user` socket is refused admin
//! commands).
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, http_backend};
use common::{Backend, fd_bind, frontend, sluice};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};

/// A process with an HTTP frontend `fe` in front of backend `be` (servers `a` and `b`, each
/// answering its own name), and a second, user-level stats socket.
fn two_servers() -> (Running, SocketAddr, Backend, Backend) {
    let (a, _) = http_backend(|_| "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na".to_owned());
    let (b, _) = http_backend(|_| "HTTP/1.1 404 No\r\nContent-Length: 1\r\n\r\nb".to_owned());
    let (listener, addr) = frontend();
    let dir = common::TempDir::new();
    let user_sock = dir.join("user.sock");
    let config = format!(
        "global\n    stats socket \"{}\" level user\n{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    default_backend be\nbackend be\n    server a {} weight 20\n    server b {} maxconn 7\n",
        user_sock.display(),
        fd_bind(&listener),
        a.addr(),
        b.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    (Running { proxy, dir }, addr, a, b)
}

/// The process and the directory of its user-level socket.
struct Running {
    proxy: common::Sluice,
    dir: common::TempDir,
}

impl std::ops::Deref for Running {
    type Target = common::Sluice;

    fn deref(&self) -> &common::Sluice {
        &self.proxy
    }
}

/// Sends one request on a new connection and returns the response body's first byte.
fn get(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(common::GENEROUS)).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.rsplit("\r\n\r\n").next().unwrap().to_owned()
}

/// The rows of a `show stat` answer as maps from field name to value.
fn rows(csv: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap()
        .strip_prefix("# ")
        .unwrap()
        .split(',')
        .collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            header
                .iter()
                .zip(l.split(','))
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn row<'a>(
    rows: &'a [std::collections::HashMap<String, String>],
    px: &str,
    sv: &str,
) -> &'a std::collections::HashMap<String, String> {
    rows.iter()
        .find(|r| r["pxname"] == px && r["svname"] == sv)
        .unwrap_or_else(|| panic!("no row {px}/{sv} in {rows:?}"))
}

#[test]
fn show_stat_lists_every_row_in_haproxys_format() {
    let (proxy, addr, _a, _b) = two_servers();
    // Weights 20 and 1: round robin sends 20 requests to a and one to b.
    for _ in 0..21 {
        get(addr);
    }
    let csv = proxy.cli("show stat");
    assert!(csv.starts_with("# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight,act,bck,"), "{csv}");
    assert!(csv.ends_with(",\n\n"), "{csv:?}");
    let names: Vec<String> = csv
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').take(2).collect::<Vec<_>>().join("/"))
        .collect();
    assert_eq!(names, ["fe/FRONTEND", "be/a", "be/b", "be/BACKEND"]);
    let all = rows(&csv);
    let fe = row(&all, "fe", "FRONTEND");
    assert_eq!(fe["status"], "OPEN");
    assert_eq!(fe["iid"], "2");
    assert_eq!(fe["type"], "0");
    assert_eq!(fe["stot"], "21");
    assert_eq!(fe["hrsp_2xx"], "20", "{fe:?}");
    assert_eq!(fe["hrsp_4xx"], "1");
    assert_eq!(fe["mode"], "http");
    // Rates: 21 sessions and requests a moment ago, over at most two seconds (the exact
    // figure depends on when the second turned; `rate::tests` checks the arithmetic).
    let per_second = |r: &std::collections::HashMap<String, String>, field: &str| -> u64 {
        r[field]
            .parse()
            .unwrap_or_else(|_| panic!("{field}: {r:?}"))
    };
    for field in ["rate_max", "req_rate_max", "conn_rate_max"] {
        let n = per_second(fe, field);
        assert!((6..=21).contains(&n), "{field} {n}: {fe:?}");
    }
    assert!(per_second(fe, "rate") <= 21);
    assert_eq!(fe["rate_lim"], "0");
    let a = row(&all, "be", "a");
    assert!((1..=20).contains(&per_second(a, "rate_max")), "{a:?}");
    // Timings of the requests the servers took: no queue; total at least the response time.
    let be_row = row(&all, "be", "BACKEND");
    assert_eq!(be_row["qtime"], "0");
    assert!(per_second(be_row, "ttime_max") >= per_second(be_row, "rtime_max"));
    assert!(per_second(a, "ttime") <= per_second(a, "ttime_max").max(1));
    assert_eq!(a["status"], "no check");
    assert_eq!(a["weight"], "20");
    assert_eq!(a["lbtot"], "20");
    assert_eq!(a["hrsp_2xx"], "20");
    assert_eq!(a["sid"], "1");
    assert_eq!(a["iid"], "3");
    let b = row(&all, "be", "b");
    assert_eq!(b["slim"], "7");
    assert_eq!(b["hrsp_4xx"], "1");
    let be = row(&all, "be", "BACKEND");
    assert_eq!(be["status"], "UP");
    assert_eq!(be["weight"], "21");
    assert_eq!(be["act"], "2");
    assert_eq!(be["algo"], "roundrobin");
    assert_eq!(be["lbtot"], "21");
    assert_eq!(be["hrsp_4xx"], "1");
    // Filters: proxy by name, type mask 4 (servers), server id 2.
    let only_b = proxy.cli("show stat be 4 2");
    assert_eq!(rows(&only_b).len(), 1, "{only_b}");
    assert_eq!(rows(&only_b)[0]["svname"], "b");
    let backends = proxy.cli("show stat -1 2 -1");
    assert_eq!(rows(&backends).len(), 1, "{backends}");
    assert_eq!(proxy.cli("show stat nosuch 7 -1"), "No such proxy.\n\n");
    let unknown_id = proxy.cli("show stat 99 -1 -1");
    assert_eq!(rows(&unknown_id).len(), 0, "{unknown_id}");
    // typed: one field per line, after the filters or alone.
    let typed = proxy.cli("show stat be 4 2 typed");
    assert!(
        typed.starts_with("S.3.2.0.pxname.1:KNS:str:be\nS.3.2.1.svname.1:KNS:str:b\n"),
        "{typed}"
    );
    assert!(typed.contains("\nS.3.2.6.slim.1:CLP:u32:7\n"), "{typed}");
    assert!(
        proxy
            .cli("show stat typed")
            .starts_with("F.2.0.0.pxname.1:KNS:str:fe\n")
    );
}

/// The proxy's own error answer is counted before the client sees its connection end, even
/// while the proxy still drains what that client might send (the client here keeps its side
/// open): the count is read once, at once.
#[test]
fn an_error_answer_is_counted_before_its_connection_ends() {
    let (proxy, addr, _a, _b) = two_servers();
    let request = b"GET / HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n";
    let (answer, client) = common::http::until_proxy_ends(addr, request);
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    let all = rows(&proxy.cli("show stat"));
    let fe = row(&all, "fe", "FRONTEND");
    assert_eq!(
        (fe["ereq"].as_str(), fe["hrsp_4xx"].as_str()),
        ("1", "1"),
        "{fe:?}"
    );
    drop(client);
}

/// The proxy's own answers are traffic too, as HAProxy counts it: a denied request's bytes
/// and its 403 on the frontend, a 503's on the frontend, the backend and the server that
/// refused the connection.
#[test]
fn the_proxys_own_answers_count_as_traffic() {
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    http-request deny if {{ path /deny }}\n    \
         default_backend be\nbackend be\n    server dead {}\n",
        fd_bind(&listener),
        common::refused_addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    let mut sent = [0u64; 2];
    let mut answered = [0u64; 2];
    for (i, path) in ["/deny", "/dead"].into_iter().enumerate() {
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let common::Closed::Eof(answer) = common::http::one_shot(addr, request.as_bytes()) else {
            panic!("{path}: no clean end");
        };
        let status = if i == 0 { "403" } else { "503" };
        assert!(answer.starts_with(format!("HTTP/1.1 {status} ").as_bytes()));
        sent[i] = request.len() as u64;
        answered[i] = answer.len() as u64;
    }
    let all = rows(&proxy.cli("show stat"));
    let traffic = |r: &std::collections::HashMap<String, String>| {
        (
            r["bin"].parse::<u64>().unwrap(),
            r["bout"].parse::<u64>().unwrap(),
        )
    };
    let fe = row(&all, "fe", "FRONTEND");
    assert_eq!(
        traffic(fe),
        (sent[0] + sent[1], answered[0] + answered[1]),
        "{fe:?}"
    );
    for name in ["BACKEND", "dead"] {
        let r = row(&all, "be", name);
        assert_eq!(traffic(r), (sent[1], answered[1]), "{r:?}");
    }
}

#[test]
fn disabled_and_drained_servers_get_no_traffic() {
    let (proxy, addr, _a, _b) = two_servers();
    assert_eq!(proxy.cli("disable server be/b"), "\n");
    assert!(proxy.cli("show stat").contains("\nbe,b,"));
    let stat = proxy.cli("show stat be 4 2");
    assert_eq!(rows(&stat)[0]["status"], "MAINT");
    for _ in 0..4 {
        assert_eq!(get(addr), "a");
    }
    assert_eq!(proxy.cli("enable server be/b"), "\n");
    assert_eq!(proxy.cli("set server be/a state drain"), "\n");
    assert_eq!(rows(&proxy.cli("show stat be 4 1"))[0]["status"], "DRAIN");
    for _ in 0..3 {
        assert_eq!(get(addr), "b");
    }
    assert_eq!(proxy.cli("set server be/a state maint"), "\n");
    assert_eq!(proxy.cli("set server be/a state ready"), "\n");
    assert_eq!(
        proxy.cli("set server be/a state sleepy"),
        "'set server <srv> state' expects 'ready', 'drain' and 'maint'.\n\n"
    );
    assert_eq!(proxy.cli("disable server be/zz"), "No such server.\n\n");
    assert_eq!(proxy.cli("disable server zz/a"), "No such backend.\n\n");
    assert_eq!(
        proxy.cli("disable server be"),
        "Require 'backend/server'.\n\n"
    );
    // lastchg restarted when the state changed.
    let a = &rows(&proxy.cli("show stat be 4 1"))[0];
    assert_eq!(a["status"], "no check");
    assert!(a["lastchg"].parse::<u64>().unwrap() < 5);
}

#[test]
fn weights_are_set_and_read_back() {
    let (proxy, addr, _a, _b) = two_servers();
    assert_eq!(proxy.cli("get weight be/a"), "20 (initial 20)\n\n");
    assert_eq!(proxy.cli("set weight be/a 50%"), "\n");
    assert_eq!(proxy.cli("get weight be/a"), "10 (initial 20)\n\n");
    assert_eq!(proxy.cli("set server be/a weight 3"), "\n");
    assert_eq!(proxy.cli("get weight be/a"), "3 (initial 20)\n\n");
    assert_eq!(
        proxy.cli("set server be/a weight 300"),
        "Absolute weight can only be between 0 and 256 inclusive.\n\n"
    );
    assert_eq!(proxy.cli("set weight be/b 0"), "\n");
    assert_eq!(rows(&proxy.cli("show stat be 4 2"))[0]["status"], "DRAIN");
    for _ in 0..3 {
        assert_eq!(get(addr), "a");
    }
}

#[test]
fn servers_state_and_backend_list() {
    let (proxy, _addr, a, _b) = two_servers();
    proxy.cli("disable server be/b");
    let state = proxy.cli("show servers state");
    let mut lines = state.lines();
    assert_eq!(lines.next(), Some("1"));
    assert!(lines.next().unwrap().starts_with(
        "# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight"
    ));
    let a_line = lines.next().unwrap();
    let words: Vec<&str> = a_line.split(' ').collect();
    assert_eq!(words.len(), 25, "{a_line}");
    assert_eq!(
        &words[..9],
        ["3", "be", "1", "a", "127.0.0.1", "2", "0", "20", "20"]
    );
    assert_eq!(words[18], a.addr().port().to_string());
    let b_words: Vec<&str> = lines.next().unwrap().split(' ').collect();
    assert_eq!(
        &b_words[5..7],
        ["0", "1"],
        "stopped, in maintenance from the CLI"
    );
    assert_eq!(
        proxy.cli("show servers state nope"),
        "Can't find backend.\n\n"
    );
    assert_eq!(proxy.cli("show backend"), "# name\nbe\n\n");
}

#[test]
fn clear_counters_and_frontend_switches() {
    let (proxy, addr, _a, _b) = two_servers();
    get(addr);
    // The client has its answer; the session ends on the proxy's thread an instant later.
    assert!(common::wait_until(common::GENEROUS, || {
        rows(&proxy.cli("show stat fe 1 -1"))[0]["scur"] == "0"
    }));
    proxy.cli("clear counters");
    let fe = rows(&proxy.cli("show stat fe 1 -1"))[0].clone();
    assert_eq!((fe["stot"].as_str(), fe["smax"].as_str()), ("1", "0"));
    proxy.cli("clear counters all");
    let fe = rows(&proxy.cli("show stat fe 1 -1"))[0].clone();
    assert_eq!((fe["stot"].as_str(), fe["hrsp_2xx"].as_str()), ("0", "0"));

    assert_eq!(proxy.cli("disable frontend nope"), "No such frontend.\n\n");
    assert_eq!(
        proxy.cli("enable frontend fe"),
        "All sockets are already enabled.\n\n"
    );
    assert_eq!(proxy.cli("disable frontend fe"), "\n");
    assert_eq!(rows(&proxy.cli("show stat fe 1 -1"))[0]["status"], "PAUSED");
    // A connection made now waits in the kernel's queue until the frontend is enabled.
    let mut waiting = TcpStream::connect(addr).unwrap();
    waiting
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(proxy.cli("enable frontend fe"), "\n");
    waiting.set_read_timeout(Some(common::GENEROUS)).unwrap();
    let mut status = String::new();
    BufReader::new(waiting).read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 "), "{status}");

    assert_eq!(proxy.cli("set maxconn global 10"), "\n");
    assert_eq!(
        common::info_field(&proxy.cli("show info"), "Maxconn"),
        Some("10")
    );
    assert_eq!(
        proxy.cli("set maxconn global x"),
        "Expects an integer value.\n\n"
    );
    assert_eq!(
        proxy.cli("set maxconn global 4000000000"),
        "Value out of range.\n\n"
    );
}

#[test]
fn a_user_socket_cannot_change_anything() {
    let (proxy, _addr, _a, _b) = two_servers();
    let user = proxy.dir.join("user.sock");
    for command in [
        "disable server be/a",
        "set server be/a state maint",
        "set weight be/a 1",
        "clear counters",
        "disable frontend fe",
        "set maxconn global 1",
    ] {
        assert_eq!(
            common::cli_at(&user, command).unwrap(),
            "Permission denied\n\n",
            "{command}"
        );
    }
    assert!(
        common::cli_at(&user, "show stat")
            .unwrap()
            .starts_with("# pxname")
    );
    assert_eq!(
        common::cli_at(&user, "get weight be/a").unwrap(),
        "20 (initial 20)\n\n"
    );
    assert!(proxy.cli("show stat be 4 1").contains(",no check,"));
}

/// `chkfail` counts the checks that failed while the server was up (management.txt §9.1): the
/// one that took it down, not those of a server already down, however many run.
#[test]
fn chkfail_counts_only_the_failures_of_an_up_server() {
    let (listener, _addr) = frontend();
    let failing = common::http::answering(b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n");
    let config = format!(
        "{}\nbackend be\n    option httpchk\n    server s {} check inter 50ms fall 1\nfrontend fe\n    bind {}\n    default_backend be\n",
        HTTP_DEFAULTS,
        failing.addr(),
        fd_bind(&listener)
    );
    let proxy = sluice(&config).inherit(listener).start();
    // Each check is one connection to the server: five of them have failed.
    assert!(common::wait_until(common::GENEROUS, || failing.accepted() >= 6));
    let all = rows(&proxy.cli("show stat"));
    let s = row(&all, "be", "s");
    // A check every 50 ms may be running as the row is read: its status then shows the last
    // result with `* ` (the next test), which is not what this test is about.
    let last = s["check_status"].trim_start_matches("* ");
    assert_eq!((s["status"].as_str(), last), ("DOWN", "L7STS"));
    assert_eq!(s["chkfail"], "1", "{s:?}");
    assert_eq!(s["chkdown"], "1");
    // What the check found, in words: the reason phrase of the status.
    assert_eq!(s["last_chk"], "Oops");
}

/// A check running now shows the last status with `* ` (management.txt §9.1): here the
/// server answers its first check and keeps the second waiting.
#[test]
fn a_running_check_marks_the_last_status() {
    let (listener, _addr) = frontend();
    let checks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&checks);
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = std::sync::Mutex::new(held);
    let server = Backend::start(move |mut s| {
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        } else {
            // Held until the test ends.
            let _ = held.lock().unwrap().recv();
        }
    });
    let config = format!(
        "{HTTP_DEFAULTS}    timeout check 30s\nbackend be\n    option httpchk\n    server s {} check inter 50ms\nfrontend fe\n    bind {}\n    default_backend be\n",
        server.addr(),
        fd_bind(&listener)
    );
    let proxy = sluice(&config).inherit(listener).start();
    assert!(common::wait_until(common::GENEROUS, || server.accepted() >= 2));
    let all = rows(&proxy.cli("show stat"));
    assert_eq!(row(&all, "be", "s")["check_status"], "* L7OK");
    drop(release);
}

#[test]
fn check_results_show_in_stats() {
    let (listener, _addr) = frontend();
    let up = Backend::echo();
    let config = format!(
        "{}\nlisten app\n    bind {}\n    server dead {} check inter 100ms rise 2 fall 3\n    server live {} check inter 100ms\n",
        common::TCP_DEFAULTS,
        fd_bind(&listener),
        common::refused_addr(),
        up.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    // Both servers checked: the dead one is down, the live one has passed a check.
    assert!(
        common::wait_until(common::GENEROUS, || {
            let all = rows(&proxy.cli("show stat"));
            row(&all, "app", "dead")["status"] == "DOWN"
                && row(&all, "app", "live")["check_status"] == "L4OK"
        }),
        "{}",
        proxy.cli("show stat")
    );
    let all = rows(&proxy.cli("show stat"));
    let dead = row(&all, "app", "dead");
    assert_eq!(dead["status"], "DOWN");
    assert_eq!(dead["check_status"], "L4CON");
    assert_eq!(dead["last_chk"], "Connection refused");
    assert_eq!(
        dead["chkdown"], "1",
        "down at the first failure, as HAProxy"
    );
    assert_eq!(
        (dead["check_rise"].as_str(), dead["check_fall"].as_str()),
        ("2", "3")
    );
    assert_eq!(dead["check_health"], "0");
    assert_eq!(dead["mode"], "tcp");
    assert_eq!(dead["hrsp_2xx"], "", "no HTTP counters in mode tcp");
    let live = row(&all, "app", "live");
    assert_eq!(live["status"], "UP");
    assert_eq!(live["check_status"], "L4OK");
    assert_eq!(live["chkfail"], "0");
    let be = row(&all, "app", "BACKEND");
    assert_eq!((be["status"].as_str(), be["act"].as_str()), ("UP", "1"));
    // `disable health`: no check status is shown any more, as in HAProxy.
    assert_eq!(proxy.cli("disable health app/dead"), "\n");
    let dead = rows(&proxy.cli("show stat app 4 1"))[0].clone();
    assert_eq!(dead["check_status"], "");
    assert_eq!(proxy.cli("enable health app/dead"), "\n");
    let state = proxy.cli("show servers state app");
    let dead_line: Vec<&str> = state.lines().nth(2).unwrap().split(' ').collect();
    // Stopped, L4CON (8), failed (2), health 0, check configured and enabled (6).
    assert_eq!(dead_line[5], "0");
    assert_eq!(&dead_line[10..14], ["8", "2", "0", "6"], "{state}");
}
