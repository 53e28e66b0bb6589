//! The statistics page over real sockets: the HTML table (status, content type, server names
//! and statuses), `;csv` equal to the CLI's `show stat` apart from live counters, `;json`
//! parsed and matching `show stat json`, `stats auth`
//! (401 without or with wrong credentials, 200 with them), `stats admin` (a POSTed action
//! changes the server state seen by `show stat`; refused when the condition does not hold),
//! `stats scope`, and `http-request deny` protecting the page.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::HTTP_DEFAULTS;
use common::{fd_bind, frontend, sluice};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

/// Sends `request` and reads the whole answer (the page always closes the connection).
fn exchange(addr: SocketAddr, request: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(common::GENEROUS)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    (status, head.to_owned(), body.to_owned())
}

fn get(addr: SocketAddr, target: &str, extra: &str) -> (u16, String, String) {
    exchange(
        addr,
        &format!("GET {target} HTTP/1.1\r\nHost: x\r\n{extra}\r\n"),
    )
}

fn post(addr: SocketAddr, target: &str, extra: &str, form: &str) -> (u16, String, String) {
    exchange(
        addr,
        &format!(
            "POST {target} HTTP/1.1\r\nHost: x\r\n{extra}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
            form.len()
        ),
    )
}

fn start(stats_lines: &str) -> (common::Sluice, SocketAddr) {
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten st\n    bind {}\n{stats_lines}\n    server web1 127.0.0.1:9\n    server web2 127.0.0.1:10 disabled\nbackend other\n    description <the> other one\n    server o1 127.0.0.1:11\n",
        fd_bind(&listener)
    );
    (sluice(&config).inherit(listener).start(), addr)
}

/// Every line's fields, with the counters that move between two reads blanked.
fn stable(csv: &str) -> Vec<Vec<String>> {
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let moving = [
        "scur",
        "smax",
        "stot",
        "bin",
        "bout",
        "lastchg",
        "hrsp_2xx",
        "req_tot",
        "conn_tot",
        "lbtot",
        "rate",
        "rate_max",
        "req_rate",
        "req_rate_max",
        "conn_rate",
        "conn_rate_max",
        "qtime",
        "ctime",
        "rtime",
        "ttime",
        "qtime_max",
        "ctime_max",
        "rtime_max",
        "ttime_max",
    ];
    csv.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split(',')
                .zip(&header)
                .map(|(v, h)| {
                    if moving.contains(h) {
                        String::new()
                    } else {
                        v.to_owned()
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn the_page_lists_every_proxy_and_server() {
    let (proxy, addr) = start(
        "    stats enable\n    stats uri /st\n    stats refresh 5s\n    stats show-legends\n    stats show-desc <Europe> & Asia",
    );
    let (status, head, body) = get(addr, "/st", "");
    assert_eq!(status, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/html"),
        "{head}"
    );
    assert!(head.contains("Refresh: 5"), "{head}");
    assert!(body.contains("<caption>st</caption>"), "{body}");
    // A proxy's `description` follows its name, escaped.
    assert!(
        body.contains(
            "<caption>other <span class=\"desc\">(&lt;the&gt; other one)</span></caption>"
        ),
        "{body}"
    );
    assert!(body.contains("<td class=\"name\">web1</td>"));
    assert!(
        body.contains("<tr class=\"maint\" data-name=\"web2\">"),
        "{body}"
    );
    assert!(body.contains("<td class=\"status\">MAINT</td>"));
    assert!(body.contains("<td class=\"status\">no check</td>"));
    assert!(body.contains("Sluice"));
    assert!(body.contains("maintenance"), "legends");
    // `stats show-desc`: the description in the page's header, escaped.
    assert!(body.contains("· &lt;Europe&gt; &amp; Asia</div>"), "{body}");
    assert!(
        !body.contains("<form"),
        "no admin form without 'stats admin'"
    );
    // Other URIs go to the servers as usual (none listens here: 503). The client asks to
    // close and keeps its side open: the proxy counts and logs its own answer before it ends
    // the connection, so the count is there once the client sees the end, while the proxy
    // still drains what the client might send.
    let request = b"GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let (answer, client) = common::http::until_proxy_ends(addr, request);
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    // The page's own answer counts as a 2xx of the frontend, the 503 as a 5xx.
    let stat = proxy.cli("show stat st 1 -1");
    let fields: Vec<&str> = stat.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(
        (fields[17], fields[40], fields[43]),
        ("OPEN", "1", "1"),
        "{stat}"
    );
    drop(client);
}

#[test]
fn csv_export_equals_show_stat() {
    let (proxy, addr) = start("    stats uri /st");
    let (status, head, csv) = get(addr, "/st;csv", "");
    assert_eq!(status, 200);
    assert!(head.contains("Content-Type: text/plain"), "{head}");
    let cli = proxy.cli("show stat");
    assert_eq!(
        stable(&csv),
        stable(cli.trim_end_matches('\n')),
        "{csv}\n{cli}"
    );
}

#[test]
fn json_export_is_show_stat_json_for_the_scope() {
    let (proxy, addr) = start("    stats uri /st\n    stats scope .");
    let (status, head, body) = get(addr, "/st;json", "");
    assert_eq!(status, 200);
    assert!(head.contains("Content-Type: application/json"), "{head}");
    let rows: serde_json::Value = serde_json::from_str(&body).unwrap();
    let rows = rows.as_array().unwrap();
    // The `st` proxy's frontend, backend and two servers; `other` is out of scope.
    let names: Vec<(String, String)> = rows
        .iter()
        .map(|row| {
            let field = |pos: u64| {
                row.as_array()
                    .unwrap()
                    .iter()
                    .find(|f| f["field"]["pos"] == pos)
                    .map(|f| f["value"]["value"].as_str().unwrap().to_owned())
                    .unwrap()
            };
            (field(0), field(1))
        })
        .collect();
    let expected = [
        ("st", "FRONTEND"),
        ("st", "web1"),
        ("st", "web2"),
        ("st", "BACKEND"),
    ];
    assert_eq!(
        names,
        expected.map(|(p, s)| (p.to_owned(), s.to_owned())),
        "{body}"
    );
    // Field for field the CLI's form: same objects, same types, same status values.
    let cli: serde_json::Value =
        serde_json::from_str(&proxy.cli("show stat json").replace("\n\n", "")).unwrap();
    let cli_st: Vec<&serde_json::Value> = cli
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row[0]["value"]["value"] == "st")
        .collect();
    assert_eq!(cli_st.len(), rows.len());
    for (page_row, cli_row) in rows.iter().zip(cli_st) {
        let status = |row: &serde_json::Value| {
            row.as_array()
                .unwrap()
                .iter()
                .find(|f| f["field"]["name"] == "status")
                .map(|f| f["value"].clone())
        };
        assert_eq!(status(page_row), status(cli_row));
        assert_eq!(page_row[0]["objType"], cli_row[0]["objType"]);
    }
}

#[test]
fn auth_is_required_when_configured() {
    let (_proxy, addr) = start(
        "    stats uri /st\n    stats realm Ops\n    stats auth admin:pw\n    stats auth ro:other",
    );
    let (status, head, _) = get(addr, "/st", "");
    assert_eq!(status, 401);
    assert!(
        head.contains("WWW-Authenticate: Basic realm=\"Ops\""),
        "{head}"
    );
    // admin:wrong
    let (status, _, _) = get(addr, "/st", "Authorization: Basic YWRtaW46d3Jvbmc=\r\n");
    assert_eq!(status, 401);
    let (status, _, _) = get(addr, "/st", "Authorization: Basic !!!\r\n");
    assert_eq!(status, 401);
    // admin:pw, then ro:other
    let (status, _, _) = get(addr, "/st", "Authorization: Basic YWRtaW46cHc=\r\n");
    assert_eq!(status, 200);
    let (status, _, _) = get(addr, "/st", "Authorization: basic cm86b3RoZXI=\r\n");
    assert_eq!(status, 200);
}

#[test]
fn admin_actions_change_server_states() {
    let (proxy, addr) =
        start("    stats uri /st\n    acl local src 127.0.0.1\n    stats admin if local");
    let (_, _, body) = get(addr, "/st", "");
    assert!(body.contains("<form method=\"post\">"), "{body}");
    assert!(body.contains("name=\"s\" value=\"web1\""));
    let (status, head, _) = post(addr, "/st", "", "s=web1&action=maint&b=st");
    assert_eq!(status, 303);
    assert!(head.contains("Location: /st;st=DONE"), "{head}");
    assert!(proxy.cli("show stat st 4 1").contains("\nst,web1,"));
    assert!(
        proxy.cli("show stat st 4 1").contains(",MAINT,"),
        "{}",
        proxy.cli("show stat")
    );
    let (_, _, body) = get(addr, "/st;st=DONE", "");
    assert!(body.contains("Action processed successfully."));
    // By proxy id, two servers at once.
    let (_, head, _) = post(addr, "/st", "", "s=web1&s=web2&action=drain&b=%232");
    assert!(head.contains(";st=DONE"), "{head}");
    let servers = proxy.cli("show stat st 4 -1");
    assert_eq!(servers.matches(",DRAIN,").count(), 2, "{servers}");
    // Bad forms change nothing.
    for form in [
        "s=web1&action=explode&b=st",
        "s=nope&action=maint&b=st",
        "action=maint&b=zz",
        "garbage",
    ] {
        let (_, head, _) = post(addr, "/st", "", form);
        assert!(head.contains(";st=ERRP"), "{form}: {head}");
    }
    let (_, head, _) = post(addr, "/st", "", "action=maint&b=st");
    assert!(head.contains(";st=NONE"), "{head}");
    assert_eq!(proxy.cli("show stat st 4 -1").matches(",DRAIN,").count(), 2);
}

#[test]
fn admin_is_refused_when_the_condition_fails() {
    let (proxy, addr) = start("    stats uri /st\n    stats admin if FALSE");
    let (_, _, body) = get(addr, "/st", "");
    assert!(!body.contains("<form"));
    let (status, head, _) = post(addr, "/st", "", "s=web1&action=maint&b=st");
    assert_eq!(status, 303);
    assert!(head.contains(";st=DENY"), "{head}");
    assert!(!proxy.cli("show stat st 4 1").contains(",MAINT,"));
}

#[test]
fn scope_and_rules_limit_the_page() {
    let (_proxy, addr) = start(
        "    stats uri /st\n    stats scope .\n    http-request deny if { hdr(x-block) -m found }",
    );
    let (_, _, csv) = get(addr, "/st;csv", "");
    assert!(csv.contains("\nst,BACKEND,"));
    assert!(!csv.contains("\nother,"), "{csv}");
    // A denied request's connection goes on (HAProxy 2.6): this one asks to close.
    let (status, _, _) = get(addr, "/st", "X-Block: 1\r\nConnection: close\r\n");
    assert_eq!(status, 403);
}

#[test]
fn a_page_from_defaults_or_in_a_backend() {
    let (listener, addr) = frontend();
    let config = format!(
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n    stats enable\n    stats uri /from-defaults\n\
         frontend fe\n    bind {}\n    use_backend admin if {{ path_beg /admin }}\n    default_backend web\n\
         backend web\n    server w1 127.0.0.1:9\n\
         backend admin\n    stats uri /admin\n    stats scope .\n",
        fd_bind(&listener)
    );
    let _proxy = sluice(&config).inherit(listener).start();
    // The frontend inherited the defaults' page.
    let (status, _, body) = get(addr, "/from-defaults", "");
    assert_eq!(status, 200);
    assert!(body.contains("<caption>web</caption>"), "{body}");
    // The backend's own page, reached through use_backend, scoped to itself.
    let (status, _, csv) = get(addr, "/admin;csv", "");
    assert_eq!(status, 200, "{csv}");
    assert!(csv.contains("\nadmin,BACKEND,"), "{csv}");
    assert!(!csv.contains("\nweb,"), "{csv}");
}
