//! `http-request use-service prometheus-exporter` over a real socket: the answer's content
//! type, a strict check of the Prometheus text format (every sample follows its family's
//! `# HELP`/`# TYPE`, no family appears twice, names and labels are well formed, values are
//! numbers), and HAProxy's metric names and labels carrying live values.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, ok_backend};
use common::{fd_bind, frontend, sluice};
use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

fn get(addr: SocketAddr, target: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(common::GENEROUS)).unwrap();
    s.write_all(
        format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.to_owned(), body.to_owned())
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parses the exposition strictly; returns each sample as "name{labels}" → value.
fn parse(text: &str) -> HashMap<String, f64> {
    let mut samples = HashMap::new();
    let mut seen_families = HashSet::new();
    let mut family: Option<String> = None;
    let mut helped: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, _) = rest.split_once(' ').unwrap();
            assert!(valid_name(name), "{line}");
            helped = Some(name.to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(helped.as_deref(), Some(name), "TYPE after its HELP: {line}");
            assert!(["gauge", "counter"].contains(&kind), "{line}");
            assert!(
                seen_families.insert(name.to_owned()),
                "family twice: {name}"
            );
            family = Some(name.to_owned());
        } else {
            assert!(!line.starts_with('#') && !line.is_empty(), "{line:?}");
            let (series, value) = line.rsplit_once(' ').unwrap();
            let name = series.split('{').next().unwrap();
            assert_eq!(
                family.as_deref(),
                Some(name),
                "sample outside its family: {line}"
            );
            if let Some(labels) = series.strip_prefix(name)
                && !labels.is_empty()
            {
                let inner = labels.strip_prefix('{').unwrap().strip_suffix('}').unwrap();
                for pair in inner.split("\",") {
                    let (k, v) = pair.split_once("=\"").unwrap();
                    assert!(valid_name(k), "{line}");
                    assert!(!v.trim_end_matches('"').contains('\n'), "{line}");
                }
            }
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}"));
            assert!(
                samples.insert(series.to_owned(), value).is_none(),
                "twice: {line}"
            );
        }
    }
    samples
}

#[test]
fn metrics_have_haproxys_names_and_live_values() {
    let (backend, _) = ok_backend();
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    http-request use-service prometheus-exporter if {{ path /metrics }}\n    default_backend be\nbackend be\n    server s1 {} check inter 100ms\n    server s2 127.0.0.1:9 disabled\n",
        fd_bind(&listener),
        backend.addr()
    );
    let _proxy = sluice(&config).inherit(listener).start();
    for _ in 0..3 {
        let (head, body) = get(addr, "/");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(body, "ok");
    }
    // The first check result may not be in yet: wait for it rather than guess a delay.
    let mut metrics = HashMap::new();
    assert!(common::wait_until(common::GENEROUS, || {
        let (head, body) = get(addr, "/metrics");
        assert!(
            head.contains("Content-Type: text/plain; version=0.0.4"),
            "{head}"
        );
        metrics = parse(&body);
        metrics
            .contains_key("haproxy_server_check_status{proxy=\"be\",server=\"s1\",state=\"L4OK\"}")
    }));
    let at = |k: &str| *metrics.get(k).unwrap_or_else(|| panic!("no {k}"));
    assert_eq!(at("haproxy_process_nbproc"), 1.0);
    assert!(at("haproxy_process_uptime_seconds") >= 0.0);
    assert_eq!(
        at("haproxy_frontend_status{proxy=\"fe\",state=\"UP\"}"),
        1.0
    );
    assert_eq!(
        at("haproxy_frontend_http_responses_total{proxy=\"fe\",code=\"2xx\"}"),
        3.0
    );
    assert!(at("haproxy_frontend_sessions_total{proxy=\"fe\"}") >= 3.0);
    // At least the three requests of a moment ago (and the scrapes).
    assert!(at("haproxy_frontend_http_requests_rate_max{proxy=\"fe\"}") >= 2.0);
    assert!(at("haproxy_frontend_max_session_rate{proxy=\"fe\"}") >= 1.0);
    assert_eq!(at("haproxy_frontend_limit_session_rate{proxy=\"fe\"}"), 0.0);
    assert!(at("haproxy_server_max_session_rate{proxy=\"be\",server=\"s1\"}") >= 1.0);
    assert!(at("haproxy_backend_total_time_average_seconds{proxy=\"be\"}") >= 0.0);
    assert_eq!(
        at("haproxy_backend_max_queue_time_seconds{proxy=\"be\"}"),
        0.0
    );
    assert_eq!(at("haproxy_backend_status{proxy=\"be\",state=\"UP\"}"), 1.0);
    assert_eq!(at("haproxy_backend_active_servers{proxy=\"be\"}"), 1.0);
    assert_eq!(at("haproxy_backend_loadbalanced_total{proxy=\"be\"}"), 3.0);
    // Three requests, each on a connection of its own (one per client, `http-reuse safe`),
    // none cut short.
    assert_eq!(
        at("haproxy_server_connection_attempts_total{proxy=\"be\",server=\"s1\"}"),
        3.0
    );
    assert_eq!(
        at("haproxy_backend_connection_reuses_total{proxy=\"be\"}"),
        0.0
    );
    assert_eq!(at("haproxy_backend_server_aborts_total{proxy=\"be\"}"), 0.0);
    assert_eq!(
        at("haproxy_frontend_failed_header_rewriting_total{proxy=\"fe\"}"),
        0.0
    );
    assert_eq!(
        at("haproxy_server_internal_errors_total{proxy=\"be\",server=\"s1\"}"),
        0.0
    );
    assert_eq!(
        at("haproxy_server_http_responses_total{proxy=\"be\",server=\"s1\",code=\"2xx\"}"),
        3.0
    );
    // The pooled server connections: none in use now, the idle ones safe or not, and no
    // limit shown without `pool-max-conn`.
    let s1 = |metric: &str| format!("haproxy_server_{metric}{{proxy=\"be\",server=\"s1\"}}");
    assert_eq!(at(&s1("used_connections_current")), 0.0);
    assert_eq!(
        at(&s1("idle_connections_current")),
        at(&s1("unsafe_idle_connections_current")) + at(&s1("safe_idle_connections_current"))
    );
    assert!(at(&s1("need_connections_current")) >= 0.0);
    assert!(!metrics.contains_key(&s1("idle_connections_limit")));
    assert_eq!(
        at("haproxy_server_status{proxy=\"be\",server=\"s1\",state=\"UP\"}"),
        1.0
    );
    assert_eq!(
        at("haproxy_server_status{proxy=\"be\",server=\"s2\",state=\"MAINT\"}"),
        1.0
    );
    assert_eq!(
        at("haproxy_server_status{proxy=\"be\",server=\"s2\",state=\"UP\"}"),
        0.0
    );
    assert_eq!(
        at("haproxy_server_check_status{proxy=\"be\",server=\"s1\",state=\"L4OK\"}"),
        1.0
    );
    assert_eq!(
        at("haproxy_server_check_failures_total{proxy=\"be\",server=\"s1\"}"),
        0.0
    );
    assert!(
        metrics
            .keys()
            .any(|k| k.starts_with("haproxy_process_build_info{version="))
    );
}
