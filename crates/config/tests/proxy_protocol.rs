//! The PROXY protocol keywords reach the plan: `accept-proxy` on bind lines, `send-proxy`,
//! `send-proxy-v2`, `proxy-v2-options`, the SSL shorthands and their `no-` forms on server
//! lines (the corpus checks only that `tests/cfg/ok/proxy-protocol.cfg` is accepted; this
//! checks what it means).
#![allow(clippy::unwrap_used)]

use sluice_config::cond::CondContext;
use sluice_config::plan::{self, Plan};
use sluice_config::proxy::{ProxyV2Options, SendProxy};
use sluice_config::reader::Source;

fn plan_of(text: &str) -> Plan {
    let lookup = |_: &str| None;
    let ctx = CondContext {
        lookup: &lookup,
        features: &[],
        enabled: &[],
        version: "2.6",
    };
    let sources = [Source {
        name: "test.cfg".into(),
        text: text.to_owned(),
    }];
    let checked = plan::check(&sources, &ctx);
    assert!(
        checked.diagnostics.is_empty(),
        "{:?}",
        checked
            .diagnostics
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
    );
    checked.plan.unwrap()
}

#[test]
fn bind_and_server_options() {
    let plan = plan_of(
        "defaults\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n\
         listen app\n    bind 127.0.0.1:80 accept-proxy\n    bind 127.0.0.1:81\n\
         \x20   server a 127.0.0.1:1 send-proxy\n\
         \x20   server b 127.0.0.1:2 send-proxy-v2\n\
         \x20   server c 127.0.0.1:3 send-proxy send-proxy-v2\n\
         \x20   server d 127.0.0.1:4 send-proxy-v2 no-send-proxy-v2 send-proxy\n\
         \x20   server e 127.0.0.1:5 send-proxy no-send-proxy\n\
         \x20   server f 127.0.0.1:6\n",
    );
    let binds: Vec<bool> = plan.frontends[0]
        .binds
        .iter()
        .map(|b| b.accept_proxy)
        .collect();
    assert_eq!(binds, [true, false]);
    let servers: Vec<Option<SendProxy>> = plan.backends[0]
        .servers
        .iter()
        .map(|s| s.send_proxy())
        .collect();
    assert_eq!(
        servers,
        [
            Some(SendProxy::V1),
            Some(SendProxy::V2),
            Some(SendProxy::V2),
            Some(SendProxy::V1),
            None,
            None
        ]
    );
}

#[test]
fn proxy_v2_options_and_the_ssl_shorthands() {
    // The header each server gets, as HAProxy 2.6 sends it (checked side by side): the
    // `no-` forms of the SSL shorthands drop version 2 and their own options, and options
    // left without `send-proxy-v2` make a v1 line.
    let plan = plan_of(
        "defaults\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n\
         listen app\n    bind 127.0.0.1:80\n\
         \x20   default-server send-proxy-v2-ssl-cn\n\
         \x20   server a 127.0.0.1:1\n\
         \x20   server b 127.0.0.1:2 no-send-proxy-v2-ssl\n\
         \x20   server c 127.0.0.1:3 no-send-proxy-v2-ssl-cn\n\
         \x20   server d 127.0.0.1:4 no-send-proxy-v2\n\
         \x20   server e 127.0.0.1:5 no-send-proxy-v2-ssl-cn proxy-v2-options crc32c,unique-id\n\
         \x20   server f 127.0.0.1:6 no-send-proxy-v2-ssl-cn send-proxy-v2 proxy-v2-options authority\n",
    );
    let servers: Vec<(Option<SendProxy>, ProxyV2Options)> = plan.backends[0]
        .servers
        .iter()
        .map(|s| (s.send_proxy(), s.proxy_v2))
        .collect();
    let has = |i: usize, o: ProxyV2Options| servers[i].1.contains(o);
    let versions: Vec<Option<SendProxy>> = servers.iter().map(|s| s.0).collect();
    assert_eq!(
        versions,
        [
            Some(SendProxy::V2),
            Some(SendProxy::V1),
            None,
            Some(SendProxy::V1),
            Some(SendProxy::V1),
            Some(SendProxy::V2)
        ]
    );
    assert!(has(0, ProxyV2Options::SSL) && has(0, ProxyV2Options::CERT_CN));
    assert!(!has(1, ProxyV2Options::SSL) && has(1, ProxyV2Options::CERT_CN));
    assert!(servers[2].1.is_empty());
    assert!(has(3, ProxyV2Options::SSL) && has(3, ProxyV2Options::CERT_CN));
    assert!(has(4, ProxyV2Options::CRC32C) && has(4, ProxyV2Options::UNIQUE_ID));
    assert!(!has(4, ProxyV2Options::SSL));
    assert!(has(5, ProxyV2Options::AUTHORITY) && !has(5, ProxyV2Options::CRC32C));
}
