//! The runtime API's maps, ACLs and sessions against a running process: `show map|acl`
//! listings and entries, `add|set|del|clear map` and `add|del|clear acl` changing where the
//! very next request goes, payloads after `<<`, `get map|acl`, and HAProxy's error words.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, http_backend};
use common::{Backend, fd_bind, frontend, sluice};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

/// A process routing by `Host` through `hosts.map` to backends `one` and `two` (each
/// answering its own name; `one` by default), denying paths listed in `blocked.lst`.
fn routed() -> (common::Sluice, SocketAddr, Backend, Backend) {
    let (one, _) = http_backend(|_| "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none".to_owned());
    let (two, _) = http_backend(|_| "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo".to_owned());
    let (listener, addr) = frontend();
    let builder = sluice("");
    let map = builder
        .dir()
        .write("hosts.map", "# hosts\na.example two\nb.example one\n");
    let blocked = builder.dir().write("blocked.lst", "/admin\n");
    let config = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    acl blocked path_beg -f {}\n    acl local src 127.0.0.1 ::1\n    http-request deny if blocked\n    use_backend %[req.hdr(host),map({},one)]\nbackend one\n    server s {}\nbackend two\n    server s {}\n",
        fd_bind(&listener),
        blocked.display(),
        map.display(),
        one.addr(),
        two.addr()
    );
    let proxy = builder.config(&config).inherit(listener).start();
    (proxy, addr, one, two)
}

/// Sends one request and returns the status and the body.
fn get(addr: SocketAddr, host: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(common::GENEROUS)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    (status, text.rsplit("\r\n\r\n").next().unwrap().to_owned())
}

/// The path of the running process's file `name`.
fn file(proxy: &common::Sluice, name: &str) -> String {
    proxy.dir().join(name).display().to_string()
}

/// Replaces the `0x...` entry ids of a listing by `ID`.
fn no_ids(listing: &str) -> String {
    listing
        .lines()
        .map(|l| match l.split_once(' ') {
            Some((id, rest)) if id.starts_with("0x") => format!("ID {rest}\n"),
            _ => format!("{l}\n"),
        })
        .collect()
}

#[test]
fn show_map_and_acl_list_references_and_entries() {
    let (proxy, _, _one, _two) = routed();
    let map = file(&proxy, "hosts.map");
    let blocked = file(&proxy, "blocked.lst");
    let cfg = proxy.config_text();
    let cfg_path = proxy.dir().join("sluice.cfg").display().to_string();
    let line_of = |needle: &str| cfg.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert_eq!(
        proxy.cli("show acl"),
        format!(
            "# id (file) description\n\
             0 ({blocked}) pattern loaded from file '{blocked}' used by acl at file '{cfg_path}' line {b}. curr_ver=0 next_ver=0 entry_cnt=1\n\
             1 () acl 'path_beg' file '{cfg_path}' line {b}. curr_ver=0 next_ver=0 entry_cnt=0\n\
             2 () acl 'src' file '{cfg_path}' line {l}. curr_ver=0 next_ver=0 entry_cnt=2\n\n",
            b = line_of("acl blocked"),
            l = line_of("acl local"),
        )
    );
    assert_eq!(
        proxy.cli("show map"),
        format!(
            "# id (file) description\n\
             3 ({map}) pattern loaded from file '{map}' used by map at file '{cfg_path}' line {u}. curr_ver=0 next_ver=0 entry_cnt=2\n\n",
            u = line_of("use_backend"),
        )
    );
    let entries = proxy.cli(&format!("show map {map}"));
    assert_eq!(no_ids(&entries), "ID a.example two\nID b.example one\n\n");
    assert!(entries.lines().all(|l| l.is_empty() || l.starts_with("0x")));
    assert_eq!(entries, proxy.cli("show map #3"));
    assert_eq!(
        no_ids(&proxy.cli("show acl #2")),
        "ID 127.0.0.1\nID ::1\n\n"
    );
    assert_eq!(
        proxy.cli("show map #0"),
        "Unknown map identifier. Please use #<id> or <file>.\n\n"
    );
    assert_eq!(
        proxy.cli("show acl /nowhere"),
        "Unknown ACL identifier. Please use #<id> or <file>.\n\n"
    );
}

#[test]
fn map_edits_route_the_next_request() {
    let (proxy, addr, _one, _two) = routed();
    let map = file(&proxy, "hosts.map");
    assert_eq!(get(addr, "c.example", "/").1, "one");
    assert_eq!(proxy.cli(&format!("add map {map} c.example two")), "\n");
    assert_eq!(get(addr, "c.example", "/").1, "two");
    assert_eq!(proxy.cli(&format!("set map {map} c.example one")), "\n");
    assert_eq!(get(addr, "c.example", "/").1, "one");
    assert_eq!(proxy.cli(&format!("set map {map} a.example one")), "\n");
    assert_eq!(get(addr, "a.example", "/").1, "one");
    // By entry id.
    let id = proxy
        .cli(&format!("show map {map}"))
        .lines()
        .find(|l| l.ends_with(" b.example one"))
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(proxy.cli(&format!("set map #3 #{id} two")), "\n");
    assert_eq!(get(addr, "b.example", "/").1, "two");
    assert_eq!(proxy.cli(&format!("del map {map} #{id}")), "\n");
    assert_eq!(get(addr, "b.example", "/").1, "one");
    assert_eq!(
        proxy.cli(&format!("del map {map} b.example")),
        "Key not found.\n\n"
    );
    assert_eq!(
        proxy.cli(&format!("set map {map} zz x")),
        "entry not found.\n\n"
    );
    // A payload of several lines.
    assert_eq!(
        proxy.cli(&format!("add map {map} <<\nd.example two\ne.example two\n")),
        "\n"
    );
    assert_eq!(get(addr, "e.example", "/").1, "two");
    assert_eq!(
        no_ids(&proxy.cli(&format!("show map {map}"))),
        "ID a.example one\nID c.example one\nID d.example two\nID e.example two\n\n"
    );
    assert_eq!(
        proxy.cli(&format!("get map {map} d.example")),
        "type=str, case=sensitive, found=yes, idx=tree, key=\"d.example\", value=\"two\", type=\"str\"\n\n"
    );
    assert_eq!(
        proxy.cli(&format!("get map {map} nothing")),
        "type=str, case=sensitive, found=no\n\n"
    );
    assert_eq!(proxy.cli("clear map #3"), "\n");
    assert_eq!(proxy.cli(&format!("show map {map}")), "\n");
    assert_eq!(get(addr, "e.example", "/").1, "one");
    assert_eq!(
        proxy.cli(&format!("add map {map} onlykey")),
        "'add map' expects three parameters (map identifier, key and value) or one parameter (map identifier) and a payload\n\n"
    );
    assert_eq!(
        proxy.cli("set map #3 k"),
        "'set map' expects three parameters: map identifier, key and value.\n\n"
    );
}

#[test]
fn acl_edits_apply_to_the_next_request() {
    let (proxy, addr, _one, _two) = routed();
    let blocked = file(&proxy, "blocked.lst");
    assert_eq!(get(addr, "x", "/admin/x").0, 403);
    assert_eq!(get(addr, "x", "/private").0, 200);
    assert_eq!(proxy.cli(&format!("add acl {blocked} /private")), "\n");
    assert_eq!(get(addr, "x", "/private").0, 403);
    assert_eq!(
        proxy.cli(&format!("get acl {blocked} /private/x")),
        "type=beg, case=sensitive, match=yes, idx=tree, pattern=\"/private\"\n\n"
    );
    assert_eq!(proxy.cli(&format!("del acl {blocked} /admin")), "\n");
    assert_eq!(get(addr, "x", "/admin/x").0, 200);
    assert_eq!(
        proxy.cli(&format!("get acl {blocked} /admin")),
        "type=beg, case=sensitive, match=no\n\n"
    );
    // The values written on the line are a reference of their own.
    assert_eq!(proxy.cli("add acl #1 /inline"), "\n");
    assert_eq!(get(addr, "x", "/inline").0, 403);
    assert_eq!(proxy.cli("clear acl #1"), "\n");
    assert_eq!(get(addr, "x", "/inline").0, 200);
    assert_eq!(proxy.cli(&format!("clear acl {blocked}")), "\n");
    assert_eq!(get(addr, "x", "/private").0, 200);
    assert_eq!(
        proxy.cli("add acl #2 notanip"),
        "'notanip' is not a valid IPv4 or IPv6 address.\n\n"
    );
    assert_eq!(
        proxy.cli("get acl #2 127.0.0.1"),
        "type=ip, case=sensitive, match=yes, idx=tree, pattern=\"127.0.0.1\"\n\n"
    );
    assert_eq!(
        proxy.cli("add acl #2"),
        "'add acl' expects two parameters: ACL identifier and pattern.\n\n"
    );
    assert_eq!(
        proxy.cli("del acl #2"),
        "This command expects two parameters: ACL identifier and key.\n\n"
    );
    assert_eq!(proxy.cli("clear acl"), "Missing ACL identifier.\n\n");
}

/// A TCP `listen` section `px` in front of an echo server, and a connection through it
/// that has already reached the server.
fn tcp_stream() -> (common::Sluice, Backend, TcpStream) {
    let echo = Backend::echo();
    let (listener, addr) = frontend();
    let config = format!(
        "defaults\n    mode tcp\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\nlisten px\n    bind {}\n    server s1 {}\n",
        fd_bind(&listener),
        echo.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    let mut client = common::connect(addr);
    client.write_all(b"ping").unwrap();
    assert_eq!(common::read_n(&mut client, 4), b"ping");
    (proxy, echo, client)
}

#[test]
fn show_sess_lists_streams_like_haproxy() {
    let (proxy, _echo, client) = tcp_stream();
    let local = client.local_addr().unwrap();
    let answer = proxy.cli("show sess");
    assert!(answer.ends_with("\n\n"), "{answer}");
    // Oldest first: the client's stream comes before the CLI connection asking (an earlier
    // CLI connection of the harness may still be finishing, among the GLOBAL ones).
    let lines: Vec<&str> = answer.lines().filter(|l| !l.is_empty()).collect();
    let client_line = lines.iter().position(|l| l.contains(" fe=px ")).unwrap();
    assert_eq!(
        lines.iter().filter(|l| l.contains(" fe=px ")).count(),
        1,
        "{answer}"
    );
    let (id, rest) = lines[client_line].split_once(": ").unwrap();
    assert!(id.starts_with("0x"), "{answer}");
    assert!(
        rest.starts_with(&format!(
            "proto=tcpv4 src={local} fe=px be=px srv=s1 ts=00 epoch=0 age="
        )),
        "{answer}"
    );
    assert!(rest.contains(" rq[f="), "{answer}");
    let asking = lines.last().unwrap();
    assert!(
        asking.contains(": proto=unix_stream src=unix:1 fe=GLOBAL be=<NONE> srv=<none> ts=00 "),
        "{answer}"
    );
    let detail = proxy.cli(&format!("show sess {id}"));
    assert!(detail.starts_with(&format!("{id}: [")), "{detail}");
    // `id=` counts streams from 0, the harness's own CLI connections included.
    assert!(
        detail.contains(&format!(" proto=tcpv4 source={local}\n")),
        "{detail}"
    );
    assert!(detail.contains("] id="), "{detail}");
    assert!(detail.contains("\n  backend=px (id="), "{detail}");
    assert!(detail.contains("\n  server=s1 (id=1)\n"), "{detail}");
    assert!(detail.ends_with(")\n\n\n"), "{detail}");
    let all = proxy.cli("show sess all");
    assert!(all.contains(&format!("{id}: [")), "{all}");
    assert!(
        all.contains("\n\n0x") && !all.contains(" fe=GLOBAL"),
        "{all}"
    );
    assert!(all.contains("  frontend=GLOBAL (id=0 mode=cli)"), "{all}");
    assert_eq!(proxy.cli("show sess 0x1"), "Session not found.\n\n");
}

#[test]
fn shutdown_session_closes_the_stream() {
    let (proxy, _echo, mut client) = tcp_stream();
    let answer = proxy.cli("show sess");
    let line = answer.lines().find(|l| l.contains(" fe=px ")).unwrap();
    let id = line.split(':').next().unwrap();
    assert_eq!(proxy.cli(&format!("shutdown session {id}")), "\n");
    assert!(common::read_to_close(&mut client, common::GENEROUS).is_closed());
    // Ended like `shutdown sessions server`: logged, killed during the data phase.
    assert!(
        common::wait_until(common::GENEROUS, || proxy.stderr().contains(" KD ")),
        "{}",
        proxy.stderr()
    );
    assert!(common::wait_until(common::GENEROUS, || {
        !proxy.cli("show sess").contains("fe=px")
    }));
    // The bytes it moved before it was killed are counted (bin, bout), as HAProxy counts them.
    let stat = proxy.cli("show stat");
    let row = stat
        .lines()
        .find(|l| l.starts_with("px,FRONTEND,"))
        .unwrap();
    let fields: Vec<&str> = row.split(',').collect();
    assert_eq!((fields[8], fields[9]), ("4", "4"), "{row}");
    assert_eq!(
        proxy.cli(&format!("shutdown session {id}")),
        "No such session (use 'show sess').\n\n"
    );
    assert_eq!(
        proxy.cli("shutdown session"),
        "Session pointer expected (use 'show sess').\n\n"
    );
}

#[test]
fn show_errors_keeps_the_last_invalid_request_and_response() {
    let (bad, _) =
        http_backend(|_| "HTTP/1.1 200 OK\r\nBad Header\r\nContent-Length: 0\r\n\r\n".to_owned());
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    default_backend be\nbackend be\n    server s1 {}\n",
        fd_bind(&listener),
        bad.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    let empty = proxy.cli("show errors");
    assert!(empty.starts_with("Total events captured on ["), "{empty}");
    assert!(empty.ends_with("] : 0\n\n"), "{empty}");

    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(common::GENEROUS)).unwrap();
    s.write_all(b"GET /a b c HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert_eq!(get(addr, "x", "/").0, 502);

    let answer = proxy.cli("show errors");
    let client = |a: &str| a.contains(", src 127.0.0.1:");
    // Dates and client ports vary: compare the rest.
    let lines: Vec<&str> = answer.lines().collect();
    assert!(lines[0].ends_with("] : 2"), "{answer}");
    assert_eq!(lines[1], " ");
    assert!(
        lines[2].starts_with('[') && lines[2].ends_with("] frontend fe (#2): invalid request"),
        "{answer}"
    );
    assert!(
        lines[3]
            .starts_with("  backend <NONE> (#-1), server <NONE> (#-1), event #0, src 127.0.0.1:"),
        "{answer}"
    );
    assert!(client(lines[3]));
    assert_eq!(
        lines[4..11].join("\n"),
        "  buffer starts at 0 (including 0 out), 16340 free,\n  len 44, wraps at 16336, error at position 7\n  \n  00000  GET /a b c HTTP/1.1\\r\\n\n  00021  Host: x\\r\\n\n  00030  Bad Header\\r\\n\n  00042  \\r\\n"
    );
    assert_eq!(lines[11], " ");
    assert!(
        lines[12].ends_with("] backend be (#3): invalid response"),
        "{answer}"
    );
    assert!(
        lines[13].starts_with("  frontend fe (#2), server s1 (#1), event #1, src 127.0.0.1:"),
        "{answer}"
    );
    assert_eq!(
        lines[14..].join("\n"),
        "  buffer starts at 0 (including 0 out), 16334 free,\n  len 50, wraps at 16336, error at position 20\n  \n  00000  HTTP/1.1 200 OK\\r\\n\n  00017  Bad Header\\r\\n\n  00029  Content-Length: 0\\r\\n\n  00048  \\r\\n\n"
    );
    // Filters: by proxy and direction.
    let only = proxy.cli("show errors be request");
    assert!(only.ends_with("] : 2\n\n"), "{only}");
    let only = proxy.cli("show errors 3 response");
    assert!(only.contains("backend be (#3): invalid response"), "{only}");
    assert!(!only.contains("invalid request"), "{only}");
    assert_eq!(proxy.cli("show errors nowhere"), "No such proxy.\n\n");
}

#[test]
fn show_info_and_stat_in_json_and_typed() {
    let (proxy, addr, _one, _two) = routed();
    let typed = proxy.cli("show info typed");
    assert!(
        typed.starts_with("0.Name.1:POS:str:Sluice\n1.Version.1:POS:str:"),
        "{typed}"
    );
    assert!(
        typed.contains(&format!("\n6.Pid.1:SGP:u32:{}\n", proxy.pid())),
        "{typed}"
    );
    assert!(typed.contains("\n17.CurrConns.1:MGP:u32:"), "{typed}");
    // Every field of the plain form has its HAProxy position in the typed form.
    let plain = proxy.cli("show info");
    let names: Vec<&str> = plain
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(n, _)| n))
        .collect();
    let typed_names: Vec<&str> = typed
        .lines()
        .filter_map(|l| l.split(':').next()?.split('.').nth(1))
        .collect();
    assert_eq!(names, typed_names, "{plain}\n{typed}");
    // Requests and sessions are counted process-wide, rates and their maxima too. Each CLI
    // connection is a connection and a request too, as in HAProxy: the next one, and those
    // made so far.
    let count = |info: &str, name: &str| -> u64 {
        common::info_field(info, name).unwrap().parse().unwrap()
    };
    let before = proxy.cli("show info");
    let cli_so_far = count(&before, "CumConns");
    assert_eq!(count(&before, "CumReq"), cli_so_far, "{before}");
    assert_eq!(get(addr, "a.example", "/").0, 200);
    assert_eq!(get(addr, "b.example", "/admin").0, 403);
    let typed = proxy.cli("show info typed");
    let total = cli_so_far + 3;
    for line in [
        &format!("\n18.CumConns.1:MCP:u32:{total}\n"),
        &format!("\n19.CumReq.1:MCP:u32:{total}\n"),
        "\n26.ConnRate.1:MRP:u32:2\n",
        "\n28.MaxConnRate.1:MMP:u32:2\n",
        "\n31.MaxSessRate.1:MRP:u32:2\n",
        "\n58.DroppedLogs.1:MGP:u32:0\n",
    ] {
        assert!(typed.contains(line), "{line} in {typed}");
    }
    let json = proxy.cli("show info json");
    assert!(json.starts_with("[{\"field\":{\"pos\":0,\"name\":\"Name\"},\"processNum\":1,\"tags\":{\"origin\":\"Product\",\"nature\":\"Output\",\"scope\":\"Service\"},\"value\":{\"type\":\"str\",\"value\":\"Sluice\"}},"), "{json}");
    assert!(json.contains(&format!("{{\"field\":{{\"pos\":6,\"name\":\"Pid\"}},\"processNum\":1,\"tags\":{{\"origin\":\"Status\",\"nature\":\"Gauge\",\"scope\":\"Process\"}},\"value\":{{\"type\":\"u32\",\"value\":{}}}}}", proxy.pid())), "{json}");
    assert!(json.ends_with("}]\n\n"), "{json}");

    let json = proxy.cli("show stat json");
    assert!(json.starts_with("[[{\"objType\":\"Frontend\",\"proxyId\":2,\"id\":0,\"field\":{\"pos\":0,\"name\":\"pxname\"},\"processNum\":1,\"tags\":{\"origin\":\"Key\",\"nature\":\"Name\",\"scope\":\"Service\"},\"value\":{\"type\":\"str\",\"value\":\"fe\"}},"), "{json}");
    assert!(json.contains("{\"objType\":\"Server\",\"proxyId\":3,\"id\":1,\"field\":{\"pos\":1,\"name\":\"svname\"},\"processNum\":1,\"tags\":{\"origin\":\"Key\",\"nature\":\"Name\",\"scope\":\"Service\"},\"value\":{\"type\":\"str\",\"value\":\"s\"}}"), "{json}");
    assert!(json.contains("\"field\":{\"pos\":7,\"name\":\"stot\"},\"processNum\":1,\"tags\":{\"origin\":\"Metric\",\"nature\":\"Counter\",\"scope\":\"Process\"},\"value\":{\"type\":\"u64\",\"value\":0}}"), "{json}");
    assert!(json.ends_with("}]]\n\n"), "{json}");
    // Rows are separated as arrays: frontend, backend one (and its server), backend two.
    assert_eq!(json.matches("],[").count(), 4, "{json}");
    // The filters of the CSV form apply.
    let one = proxy.cli("show stat one 2 -1 json");
    assert!(
        one.starts_with("[[{\"objType\":\"Backend\",\"proxyId\":3,"),
        "{one}"
    );
    assert_eq!(one.matches("],[").count(), 0, "{one}");
}

#[test]
fn get_var_reads_process_variables() {
    let (one, _) = http_backend(|_| "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_owned());
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    http-request set-var(proc.greeting) str(hello)\n    http-request set-var(proc.count) int(42)\n    http-request set-var(proc.client) src\n    http-request set-var(proc.flag) bool(1)\n    default_backend be\nbackend be\n    server s1 {}\n",
        fd_bind(&listener),
        one.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    assert_eq!(
        proxy.cli("get var proc.greeting"),
        "Variable not found.\n\n"
    );
    assert_eq!(get(addr, "x", "/").0, 200);
    assert_eq!(
        proxy.cli("get var proc.greeting"),
        "proc.greeting: type=str value=<hello>\n\n"
    );
    assert_eq!(
        proxy.cli("get var proc.count"),
        "proc.count: type=sint value=<42>\n\n"
    );
    assert_eq!(
        proxy.cli("get var proc.client"),
        "proc.client: type=ipv4 value=<127.0.0.1>\n\n"
    );
    assert_eq!(
        proxy.cli("get var proc.flag"),
        "proc.flag: type=bool value=<1>\n\n"
    );
    assert_eq!(proxy.cli("get var txn.x"), "Variable not found.\n\n");
    assert_eq!(
        proxy.cli("get var"),
        "Missing process-wide variable identifier.\n\n"
    );
}

#[test]
fn show_servers_conn_and_modes() {
    let (proxy, addr, _one, _two) = routed();
    let answer = proxy.cli("show servers conn one");
    let mut lines = answer.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("# bkname/svname bkid/svid addr port - purge_delay used_cur used_max need_est unsafe_nb safe_nb idle_lim idle_cur idle_per_thr["),
        "{answer}"
    );
    let row = lines.next().unwrap();
    assert!(row.starts_with("one/s 3/1 127.0.0.1 "), "{answer}");
    assert!(row.contains(" - 5000 0 0 0 0 0 -1 0"), "{answer}");
    assert_eq!(
        proxy.cli("show servers conn nope"),
        "Can't find backend.\n\n"
    );
    // After a request, the server connection waits in its thread's pool (it gets there as
    // the session ends, which the client may see a moment before).
    assert_eq!(get(addr, "a.example", "/").1, "two");
    let mut answer = String::new();
    assert!(common::wait_until(common::GENEROUS, || {
        answer = proxy.cli("show servers conn two");
        answer
            .lines()
            .nth(1)
            .is_some_and(|row| row.contains(" -1 1 "))
    }));
    let row = answer.lines().nth(1).unwrap();
    let fields: Vec<&str> = row.split(' ').collect();
    // used_cur 0, used_max 1, need_est 1 (the one connection the request used), unsafe_nb 1,
    // safe_nb 0, idle_lim -1, idle_cur 1.
    assert_eq!(
        fields[5..13],
        ["5000", "0", "1", "1", "1", "0", "-1", "1"],
        "{answer}"
    );
    let per_thread: usize = fields[13..]
        .iter()
        .map(|n| n.parse::<usize>().unwrap())
        .sum();
    assert_eq!(per_thread, 1, "{answer}");
    assert_eq!(
        proxy.cli("experimental-mode"),
        "experimental-mode is OFF\n\n"
    );
    // The modes belong to the connection: one line, several commands.
    assert_eq!(
        proxy.cli("experimental-mode on; experimental-mode; expert-mode on; expert-mode; expert-mode off; expert-mode"),
        "\nexperimental-mode is ON\n\n\nexpert-mode is ON\n\n\nexpert-mode is OFF\n\n"
    );
}

#[test]
fn rate_limit_holds_connections_back() {
    let (proxy, addr, _one, _two) = routed();
    assert!(proxy.cli("show info").contains("\nConnRateLimit: 0\n"));
    assert_eq!(proxy.cli("set rate-limit connections global 1"), "\n");
    assert!(proxy.cli("show info").contains("\nConnRateLimit: 1\n"));
    // One connection per second: the second waits for the next second at least, the
    // third for the one after, so three take more than a second whenever they start.
    let start = std::time::Instant::now();
    for _ in 0..3 {
        assert_eq!(get(addr, "a.example", "/").1, "two");
    }
    assert!(start.elapsed() >= std::time::Duration::from_secs(1));
    assert_eq!(proxy.cli("set rate-limit sessions global 0"), "\n");
    assert_eq!(
        proxy.cli("set rate-limit connections global -1"),
        "Value out of range.\n\n"
    );
    assert_eq!(
        proxy.cli("set rate-limit connections global"),
        "Expects an integer value.\n\n"
    );
    assert!(
        proxy
            .cli("set rate-limit bogus global 1")
            .starts_with("'set rate-limit' only supports :\n")
    );
}

#[test]
fn a_file_shared_by_an_acl_and_a_map_is_edited_as_a_map() {
    let (one, _) = http_backend(|_| "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none".to_owned());
    let (listener, addr) = frontend();
    let builder = sluice("");
    let map = builder.dir().write("hosts.map", "a.example one\n");
    let config = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    acl known req.hdr(host) -M -f {m}\n    http-request deny unless known\n    http-request set-header X-Backend %[req.hdr(host),map({m})]\n    default_backend one\nbackend one\n    server s {}\n",
        fd_bind(&listener),
        one.addr(),
        m = map.display(),
    );
    let proxy = builder.config(&config).inherit(listener).start();
    let map = map.display().to_string();
    assert_eq!(get(addr, "b.example", "/").0, 403);
    assert_eq!(
        proxy.cli(&format!("add acl {map} b.example")),
        "This ACL is shared with a map: use 'add map' to add to it.\n\n"
    );
    // The ACL matches the key only.
    assert_eq!(proxy.cli(&format!("add map {map} b.example one")), "\n");
    assert_eq!(get(addr, "b.example", "/").0, 200);
    // Listed by both, described by both users.
    let acls = proxy.cli("show acl");
    assert!(
        acls.contains(&format!(
            "0 ({map}) pattern loaded from file '{map}' used by map at file '"
        )),
        "{acls}"
    );
    let cfg = proxy.config_text();
    let line_of = |needle: &str| cfg.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert!(
        acls.contains(&format!(
            "' line {}, by map at file '",
            line_of("acl known")
        )),
        "{acls}"
    );
    assert!(proxy.cli("show map").contains(&format!("0 ({map}) ")));
    assert_eq!(
        proxy.cli(&format!("get acl {map} b.example")),
        // One line per user, in HAProxy's `get acl` words for both.
        "type=str, case=sensitive, match=yes, idx=tree, pattern=\"b.example\"\ntype=str, case=sensitive, match=yes, idx=tree, pattern=\"b.example\"\n\n"
    );
    assert_eq!(proxy.cli(&format!("del acl {map} b.example")), "\n");
    assert_eq!(get(addr, "b.example", "/").0, 403);
    assert!(!proxy.cli("help").contains("expert-mode"));
}

#[test]
fn show_sess_follows_http_requests_to_their_backend() {
    let (proxy, addr, _one, _two) = routed();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(common::GENEROUS)).unwrap();
    // A keep-alive request: the stream stays, showing where its last request went.
    s.write_all(b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
        .unwrap();
    let response = common::read_n(&mut s, 41);
    assert!(
        response.ends_with(b"two"),
        "{}",
        String::from_utf8_lossy(&response)
    );
    let local = s.local_addr().unwrap();
    let answer = proxy.cli("show sess");
    assert!(
        answer.contains(&format!(
            ": proto=tcpv4 src={local} fe=fe be=two srv=s ts=00 "
        )),
        "{answer}"
    );
}

#[test]
fn maxconnrate_and_maxsessrate_set_the_starting_limits() {
    let (listener, _) = frontend();
    let config = format!(
        "global\n    maxconnrate 7\n    maxsessrate 9\ndefaults\n    mode tcp\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\nlisten px\n    bind {}\n    server s1 127.0.0.1:9\n",
        fd_bind(&listener)
    );
    let proxy = sluice(&config).inherit(listener).start();
    let info = proxy.cli("show info");
    assert_eq!(common::info_field(&info, "ConnRateLimit"), Some("7"));
    assert_eq!(common::info_field(&info, "SessRateLimit"), Some("9"));
    assert_eq!(proxy.cli("set rate-limit connections global 0"), "\n");
    assert_eq!(
        common::info_field(&proxy.cli("show info"), "ConnRateLimit"),
        Some("0")
    );
}

/// `ConnRate` counts the connections accepted, those a `tcp-request connection` rule
/// refuses included, and `SessRate` the sessions, as HAProxy counts them; neither counts the
/// runtime API's connections, and `clear counters` forgets their maxima.
#[test]
fn connection_rate_counts_refused_connections_and_session_rate_does_not() {
    let (listener, addr) = frontend();
    let config = format!(
        "defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\nfrontend refusing\n    bind {}\n    tcp-request connection reject\n",
        fd_bind(&listener)
    );
    let proxy = sluice(&config).inherit(listener).start();
    for _ in 0..3 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(common::GENEROUS)).unwrap();
        // Refused: closed without a byte (a reset reads as an error, also an end).
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty());
    }
    let info = proxy.cli("show info");
    let field = |name| common::info_field(&info, name);
    assert_eq!(field("ConnRate"), Some("3"), "{info}");
    assert_eq!(field("MaxConnRate"), Some("3"), "{info}");
    assert_eq!(field("SessRate"), Some("0"), "{info}");
    assert_eq!(field("MaxSessRate"), Some("0"), "{info}");
    assert_eq!(proxy.cli("clear counters"), "\n");
    let info = proxy.cli("show info");
    assert_eq!(
        common::info_field(&info, "MaxConnRate"),
        Some("0"),
        "{info}"
    );
}
