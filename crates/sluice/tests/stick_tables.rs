//! End-to-end behaviour of stick tables (configuration.txt §4.2 `stick-table`, `track-sc*`,
//! `stick on`; §7.3.3 stick-counter fetches; management.txt `show|clear|set table`): the
//! classic per-address rate limit answering 429, `conn_cur` following live connections and
//! limiting them, general-purpose counters read through fetches and converters,
//! `tcp-request session` rules, persistence with `stick on src`, and the table commands of
//! the stats socket in HAProxy 2.6's format.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, http_backend, ok_backend, one_shot, status_of};
use common::{Backend, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, sluice};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Instant;

/// Starts Sluice with one HTTP listen section `px` (with `lines`) in front of `backend`.
fn http_proxy(backend: SocketAddr, lines: &str) -> (common::Sluice, SocketAddr) {
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten px\n    bind {}\n{lines}\n    server s1 {backend}\n",
        fd_bind(&listener)
    );
    (sluice(&config).inherit(listener).start(), addr)
}

/// One request on its own connection; the status and the body.
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let raw = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let closed = one_shot(addr, raw.as_bytes());
    let text = String::from_utf8_lossy(closed.data()).into_owned();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status_of(closed.data()), body)
}

/// The entry lines of `show table NAME`, with the entry's number replaced by `0x#` (it names
/// the entry, its value is not meaningful).
fn entries(proxy: &common::Sluice, command: &str) -> Vec<String> {
    proxy
        .cli(command)
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| match l.split_once(": ") {
            Some((_, rest)) => format!("0x#: {rest}"),
            None => l.to_owned(),
        })
        .collect()
}

/// Asks the CLI until `command`'s answer contains `needle` (the proxy updates counters when
/// a connection ends, shortly after the client sees it close).
fn cli_until(proxy: &common::Sluice, command: &str, needle: &str) -> String {
    let deadline = Instant::now() + GENEROUS;
    loop {
        let answer = proxy.cli(command);
        if answer.contains(needle) {
            return answer;
        }
        assert!(Instant::now() < deadline, "no {needle:?} in {answer:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Drops the `exp=N` field, which counts down.
fn without_exp(line: &str) -> String {
    line.split(' ')
        .filter(|w| !w.starts_with("exp="))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn rate_limit_answers_429_over_the_limit() {
    let (backend, log) = ok_backend();
    let (proxy, addr) = http_proxy(
        backend.addr(),
        "    stick-table type ip size 100k expire 30s store http_req_rate(10s)\n    http-request track-sc0 src\n    http-request deny deny_status 429 if { sc_http_req_rate(0) gt 3 }",
    );
    let statuses: Vec<u16> = (0..5).map(|_| get(addr, "/").0).collect();
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
    assert_eq!(log.lock().unwrap().len(), 3);
    // A denied session lingers until the client's own close reaches it (the client may ask
    // the CLI first, from another thread of the proxy): its entry is freed then.
    cli_until(&proxy, "show table px", "use=0");
    let lines = entries(&proxy, "show table px");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        without_exp(&lines[0]),
        "0x#: key=127.0.0.1 use=0 http_req_rate(10000)=5"
    );
}

/// A tracked entry counts the bytes of an answer of the proxy's own once: the request it
/// read and the answer it sent.
#[test]
fn a_denied_request_counts_its_bytes_once() {
    let (backend, _log) = ok_backend();
    let (proxy, addr) = http_proxy(
        backend.addr(),
        "    stick-table type ip size 10 store bytes_in_cnt,bytes_out_cnt\n    http-request track-sc0 src\n    http-request deny",
    );
    let raw = "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let answer = one_shot(addr, raw.as_bytes());
    assert_eq!(status_of(answer.data()), 403);
    cli_until(&proxy, "show table px", "use=0");
    let lines = entries(&proxy, "show table px");
    assert_eq!(
        without_exp(&lines[0]),
        format!(
            "0x#: key=127.0.0.1 use=0 bytes_in_cnt={} bytes_out_cnt={}",
            raw.len(),
            answer.data().len()
        )
    );
}

#[test]
fn keep_alive_requests_are_counted_one_by_one() {
    let (backend, _log) = ok_backend();
    let (proxy, addr) = http_proxy(
        backend.addr(),
        "    stick-table type ip size 10 expire 30s store conn_cnt,conn_cur,http_req_cnt,http_err_cnt\n    http-request track-sc0 src\n    http-request deny if { path /deny }",
    );
    let mut s = connect(addr);
    s.write_all(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /deny HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while !text.contains("403") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {text:?}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    drop(s);
    // As in HAProxy, an `http-request` rule tracks each request again: two connections
    // counted, none live once the transactions ended, one of the two requests an error.
    let answer = cli_until(&proxy, "show table px", "conn_cnt=2 conn_cur=0");
    assert!(
        answer.contains("conn_cnt=2 conn_cur=0 http_req_cnt=2 http_err_cnt=1"),
        "{answer}"
    );
}

#[test]
fn content_rules_of_an_http_proxy_count_each_request() {
    let (backend, _log) = ok_backend();
    let (proxy, addr) = http_proxy(
        backend.addr(),
        "    stick-table type ip size 10 expire 30s store conn_cnt,sess_cnt,http_req_cnt\n    tcp-request content track-sc0 src",
    );
    get(addr, "/");
    get(addr, "/");
    // Tracked after the session started: no session counted, each request is (HAProxy 2.6).
    cli_until(
        &proxy,
        "show table px",
        "conn_cnt=2 sess_cnt=0 http_req_cnt=2",
    );
}

#[test]
fn conn_cur_follows_live_connections_and_limits_them() {
    let backend = Backend::echo();
    let (listener, addr) = frontend();
    let config = format!(
        "{TCP_DEFAULTS}\nlisten px\n    bind {}\n    stick-table type ip size 10 expire 30s store conn_cur,conn_cnt,sess_cnt\n    tcp-request connection track-sc0 src\n    tcp-request connection reject if {{ sc0_conn_cur gt 2 }}\n    server s1 {}\n",
        fd_bind(&listener),
        backend.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    let echo = |s: &mut std::net::TcpStream| {
        s.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        s.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
    };
    let mut first = connect(addr);
    echo(&mut first);
    let mut second = connect(addr);
    echo(&mut second);
    cli_until(&proxy, "show table px", "conn_cnt=2 conn_cur=2 sess_cnt=2");
    // A third connection from the same address is one too many.
    let mut third = connect(addr);
    let closed = common::read_to_close(&mut third, GENEROUS);
    assert!(closed.is_closed() && closed.data().is_empty(), "{closed:?}");
    cli_until(&proxy, "show table px", "conn_cnt=3 conn_cur=2 sess_cnt=2");
    assert!(proxy.cli("show table px").contains("use=2 "));
    drop(first);
    cli_until(&proxy, "show table px", "conn_cnt=3 conn_cur=1 sess_cnt=2");
    drop(second);
    let answer = cli_until(&proxy, "show table px", "conn_cur=0");
    assert!(answer.contains("use=0 "), "{answer}");
}

/// A request the proxy answers itself and closes after, read whole with nothing after it,
/// leaves nothing to drain: the session ends with its answer and its `conn_cur` is let go
/// while the client still holds its socket, as in HAProxy (it used to linger until the
/// client closed).
#[test]
fn a_denied_connection_is_no_longer_counted_once_answered() {
    let (backend, _) = ok_backend();
    let (proxy, addr) = http_proxy(
        backend.addr(),
        "    stick-table type ip size 10 expire 30s store conn_cur\n    tcp-request connection track-sc0 src\n    http-request deny",
    );
    let (answer, _still_open) = common::http::until_proxy_ends(
        addr,
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    let table = cli_until(&proxy, "show table px", "conn_cur=0");
    assert!(table.contains("use=0 "), "{table}");
}

#[test]
fn general_purpose_counters_through_actions_fetches_and_converters() {
    let (backend, _log) = ok_backend();
    let (proxy, addr) = http_proxy(
        backend.addr(),
        "    stick-table type ip size 10 expire 30s store gpc0,gpt0\n    http-request track-sc1 src\n    http-request sc-inc-gpc0(1)\n    http-request sc-set-gpt0(1) req.hdr_cnt(x-n)\n    http-request return status 200 content-type text/plain lf-string \"%[sc1_get_gpc0] %[src_get_gpc0] %[src,table_gpc0(px)] %[sc_get_gpt0(1)] %[sc1_tracked] %[sc0_tracked] %[sc1_trackers] %[table_cnt]\"",
    );
    assert_eq!(get(addr, "/").1, "1 1 1 0 1 0 1 1");
    assert_eq!(get(addr, "/").1, "2 2 2 0 1 0 1 1");
    let raw = b"GET / HTTP/1.1\r\nHost: t\r\nX-N: 1\r\nX-N: 2\r\nConnection: close\r\n\r\n";
    let text = String::from_utf8_lossy(one_shot(addr, raw).data()).into_owned();
    assert!(text.ends_with("3 3 3 2 1 0 1 1"), "{text}");
    let lines = entries(&proxy, "show table px");
    assert_eq!(
        without_exp(&lines[0]),
        "0x#: key=127.0.0.1 use=0 gpt0=2 gpc0=3"
    );
}

#[test]
fn content_inspection_resumes_at_the_rule_that_waited() {
    let backend = Backend::echo();
    let (listener, addr) = frontend();
    let config = format!(
        "{TCP_DEFAULTS}\nlisten px\n    bind {}\n    stick-table type ip size 10 store gpc0\n    tcp-request inspect-delay 10s\n    tcp-request content track-sc0 src\n    tcp-request content sc-inc-gpc0(0)\n    tcp-request content accept if {{ req.payload(0,4) -m str GOGO }}\n    server s1 {}\n",
        fd_bind(&listener),
        backend.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    let mut s = connect(addr);
    s.write_all(b"GO").unwrap();
    // The rules ran over the first two bytes and wait at the `accept` rule.
    cli_until(&proxy, "show table px", "use=1 exp=0 gpc0=1");
    s.write_all(b"GO").unwrap();
    let mut got = [0u8; 4];
    s.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"GOGO");
    // More data did not run the rules before the waiting one again.
    assert!(proxy.cli("show table px").contains(" gpc0=1\n"));
}

#[test]
fn tcp_request_session_rules_run_after_the_connection_rules() {
    let backend = Backend::echo();
    let (listener, addr) = frontend();
    let config = format!(
        "{TCP_DEFAULTS}\nlisten px\n    bind {}\n    stick-table type ip size 10 store sess_cnt,gpc0\n    tcp-request session track-sc2 src\n    tcp-request session sc-inc-gpc0(2)\n    tcp-request session reject if {{ sc2_get_gpc0 gt 1 }}\n    server s1 {}\n",
        fd_bind(&listener),
        backend.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    let mut s = connect(addr);
    s.write_all(b"hi").unwrap();
    let mut got = [0u8; 2];
    s.read_exact(&mut got).unwrap();
    drop(s);
    let mut refused = connect(addr);
    let closed = common::read_to_close(&mut refused, GENEROUS);
    assert!(closed.is_closed() && closed.data().is_empty(), "{closed:?}");
    cli_until(&proxy, "show table px", "gpc0=2 sess_cnt=1");
    let stat = proxy.cli("show stat");
    let header: Vec<&str> = stat.lines().next().unwrap().split(',').collect();
    let dses = header.iter().position(|f| *f == "dses").unwrap();
    let frontend_row = stat
        .lines()
        .find(|l| l.starts_with("px,FRONTEND,"))
        .unwrap();
    assert_eq!(frontend_row.split(',').nth(dses), Some("1"));
}

#[test]
fn stick_on_src_keeps_a_client_on_its_server() {
    let one = http_backend(|_| "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none".to_owned());
    let two = http_backend(|_| "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo".to_owned());
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten px\n    bind {}\n    balance roundrobin\n    stick-table type ip size 10 expire 1m\n    stick on src\n    server one {}\n    server two {}\n",
        fd_bind(&listener),
        one.0.addr(),
        two.0.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    let first = get(addr, "/").1;
    for _ in 0..3 {
        assert_eq!(get(addr, "/").1, first);
    }
    let lines = entries(&proxy, "show table px");
    let id = if first == "one" { 1 } else { 2 };
    assert_eq!(
        without_exp(&lines[0]),
        format!("0x#: key=127.0.0.1 use=0 server_id={id} server_key={first}")
    );
    // Without the entry, round robin picks the other server, which then sticks.
    assert_eq!(proxy.cli("clear table px"), "\n");
    let other = get(addr, "/").1;
    assert_ne!(other, first);
    assert_eq!(get(addr, "/").1, other);
}

#[test]
fn nothing_is_stored_for_a_request_no_server_took() {
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten px\n    bind {}\n    retries 0\n    stick-table type ip size 10 expire 1m\n    stick on src\n    server dead {}\n",
        fd_bind(&listener),
        common::refused_addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    assert_eq!(get(addr, "/").0, 503);
    assert_eq!(
        proxy.cli("show table px"),
        "# table: px, type: ip, size:10, used:0\n\n"
    );
}

#[test]
fn stick_on_src_in_tcp_mode() {
    let one = Backend::named("one");
    let two = Backend::named("two");
    let (listener, addr) = frontend();
    let config = format!(
        "{TCP_DEFAULTS}\nlisten px\n    bind {}\n    balance roundrobin\n    stick-table type ip size 10 expire 1m\n    stick on src\n    server one {}\n    server two {}\n",
        fd_bind(&listener),
        one.addr(),
        two.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    let name = || {
        let mut s = connect(addr);
        String::from_utf8(common::read_to_close(&mut s, GENEROUS).data().to_vec()).unwrap()
    };
    let first = name();
    for _ in 0..3 {
        assert_eq!(name(), first);
    }
    let answer = proxy.cli("show table px");
    assert!(
        answer.contains(&format!("server_key={first}\n")),
        "{answer}"
    );
}

#[test]
fn table_commands_on_the_stats_socket() {
    let (backend, _log) = ok_backend();
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nbackend names\n    stick-table type string len 8 size 5 store gpc0\n\nlisten px\n    bind {}\n    stick-table type ip size 100 expire 30s store gpc0,conn_cnt,http_req_rate(10s)\n    server s1 {}\n",
        fd_bind(&listener),
        backend.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    let _ = addr;
    // Listed in reverse declaration order, as HAProxy lists them.
    assert_eq!(
        proxy.cli("show table"),
        "# table: px, type: ip, size:100, used:0\n# table: names, type: string, size:5, used:0\n\n"
    );
    assert_eq!(
        proxy.cli("set table px key 10.0.0.1 data.gpc0 5 data.conn_cnt 7"),
        "\n"
    );
    assert_eq!(
        proxy.cli("set table px key 10.0.0.2 data.http_req_rate 3"),
        "\n"
    );
    assert_eq!(
        proxy.cli("set table names key abcdefghijk data.gpc0 1"),
        "\n"
    );
    assert_eq!(
        entries(&proxy, "show table px")
            .iter()
            .map(|l| without_exp(l))
            .collect::<Vec<_>>(),
        [
            "0x#: key=10.0.0.1 use=0 gpc0=5 conn_cnt=7 http_req_rate(10000)=0",
            "0x#: key=10.0.0.2 use=0 gpc0=0 conn_cnt=0 http_req_rate(10000)=3",
        ]
    );
    // String keys are cut at the table's length; tables without expire show exp=0.
    assert_eq!(
        entries(&proxy, "show table names"),
        ["0x#: key=abcdefgh use=0 exp=0 gpc0=1"]
    );
    let header = "# table: px, type: ip, size:100, used:2\n";
    let filtered = proxy.cli("show table px data.gpc0 gt 1 data.conn_cnt lt 10");
    assert!(
        filtered.starts_with(header) && filtered.contains("key=10.0.0.1 "),
        "{filtered}"
    );
    assert!(!filtered.contains("10.0.0.2"), "{filtered}");
    let by_key = proxy.cli("show table px key 10.0.0.2");
    assert!(
        by_key.contains("key=10.0.0.2 ") && !by_key.contains("10.0.0.1"),
        "{by_key}"
    );
    for (command, answer) in [
        ("show table nope", "No such table\n\n"),
        (
            "show table px data.foo gt 1",
            "Filter entry #1: Unknown data type\n\n",
        ),
        (
            "show table px data.gpt0 gt 1",
            "Filter entry #1: Data type not stored in this table\n\n",
        ),
        (
            "show table px data.gpc0 gt 1 data.gpc0",
            "Filter entry #2: Require and operator among \"eq\", \"ne\", \"le\", \"ge\", \"lt\", \"gt\"\n\n",
        ),
        (
            "show table px data.gpc0 gt x",
            "Filter entry #1: Require a valid integer value to compare against\n\n",
        ),
        ("show table px key", "Key value expected\n\n"),
        // A key without an entry (or that is no address) prints nothing, not even the header.
        ("show table px key 10.9.9.9", "\n"),
        ("show table px key abc", "\n"),
        (
            "set table px key 1.2.3.4 data.gpc0 x",
            "Require a valid integer value to store\n\n",
        ),
        (
            "set table px key 1.2.3.4 data.gpt0 1",
            "Data type not stored in this table\n\n",
        ),
        (
            "set table px",
            "Required arguments: <table> key <key> [data.<store_data_type> <value>]*\n\n",
        ),
        ("clear table nope", "No such table\n\n"),
    ] {
        assert_eq!(proxy.cli(command), answer, "{command}");
    }
    assert_eq!(proxy.cli("clear table px data.gpc0 eq 5"), "\n");
    assert_eq!(entries(&proxy, "show table px").len(), 1);
    assert_eq!(proxy.cli("clear table px key 10.0.0.2"), "\n");
    assert_eq!(
        proxy.cli("show table px"),
        "# table: px, type: ip, size:100, used:0\n\n"
    );
}

#[test]
fn user_level_sockets_see_tables_but_not_their_entries() {
    let (backend, _log) = ok_backend();
    let (listener, _addr) = frontend();
    let dir = common::TempDir::new();
    let user_sock = dir.join("user.sock");
    let config = format!(
        "global\n    stats socket {} level user\n{HTTP_DEFAULTS}\nlisten px\n    bind {}\n    stick-table type ip size 10 store gpc0\n    server s1 {}\n",
        user_sock.display(),
        fd_bind(&listener),
        backend.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    proxy.cli("set table px key 1.1.1.1 data.gpc0 1");
    let user = |line: &str| common::cli_at(&user_sock, line).unwrap();
    assert_eq!(
        user("show table px"),
        "# table: px, type: ip, size:10, used:1\n# contents not dumped due to insufficient privileges\n\n"
    );
    assert_eq!(
        user("set table px key 1.1.1.1 data.gpc0 2"),
        "Permission denied\n\n"
    );
    assert_eq!(user("clear table px key 1.1.1.1"), "Permission denied\n\n");
    // As in HAProxy 2.6, clearing a whole table from a user-level socket says nothing and
    // does nothing.
    assert_eq!(user("clear table px"), "\n");
    assert_eq!(user("clear table nope"), "No such table\n\n");
    assert!(proxy.cli("show table px").contains("key=1.1.1.1 "));
}

/// `sc-add-gpc` (HAProxy 2.7; Debian's 2.6 lacks it): the value, written or computed, is
/// added to the element and to its rate; an element the table does not store takes nothing.
#[test]
fn sc_add_gpc_adds_its_value_to_the_element_and_its_rate() {
    let (backend, _log) = ok_backend();
    let (proxy, addr) = http_proxy(
        backend.addr(),
        "    stick-table type ip size 10 store gpc(2),gpc_rate(1,10s)\n    http-request track-sc0 src\n    http-request sc-add-gpc(1,0) 5\n    http-request sc-add-gpc(0,0) req.hdr(x-add)\n    http-request sc-add-gpc(7,0) 3\n    http-request return status 200 content-type text/plain lf-string \"%[sc_get_gpc(0,0)]/%[sc_get_gpc(1,0)]/%[sc_gpc_rate(0,0)]\"",
    );
    let ask = |add: &str| {
        let raw = format!("GET / HTTP/1.1\r\nHost: t\r\nX-Add: {add}\r\nConnection: close\r\n\r\n");
        let closed = one_shot(addr, raw.as_bytes());
        let text = String::from_utf8_lossy(closed.data()).into_owned();
        text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned()
    };
    assert_eq!(ask("2"), "2/5/2");
    assert_eq!(ask("40"), "42/10/42");
    // Not an integer: nothing added.
    assert_eq!(ask("many"), "42/15/42");
    cli_until(&proxy, "show table px", "use=0");
    let lines = entries(&proxy, "show table px");
    assert_eq!(
        without_exp(&lines[0]),
        "0x#: key=127.0.0.1 use=0 gpc0=42 gpc1=15 gpc0_rate(10000)=42"
    );
}
