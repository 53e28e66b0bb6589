#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use super::*;
use crate::testing::{GET, TestCtx};

/// Facts answered from fields.
#[derive(Default)]
struct Facts {
    accept: Option<SystemTime>,
    request: Option<SystemTime>,
    numbers: HashMap<LogNumber, i64>,
    texts: HashMap<LogText, Vec<u8>>,
    backend_source: Option<SocketAddr>,
    server: Option<SocketAddr>,
    tls: bool,
    redispatched: bool,
    req_captures: Vec<Option<Vec<u8>>>,
}

impl LogFacts for Facts {
    fn accept_date(&self) -> Option<SystemTime> {
        self.accept
    }
    fn request_date(&self) -> Option<SystemTime> {
        self.request
    }
    fn number(&self, which: LogNumber) -> Option<i64> {
        self.numbers.get(&which).copied()
    }
    fn text(&self, which: LogText) -> Option<&[u8]> {
        self.texts.get(&which).map(Vec::as_slice)
    }
    fn backend_source(&self) -> Option<SocketAddr> {
        self.backend_source
    }
    fn server_address(&self) -> Option<SocketAddr> {
        self.server
    }
    fn frontend_tls(&self) -> bool {
        self.tls
    }
    fn redispatched(&self) -> bool {
        self.redispatched
    }
    fn captured_header_count(&self, response: bool) -> usize {
        if response { 0 } else { self.req_captures.len() }
    }
    fn captured_header(&self, response: bool, index: usize) -> Option<&[u8]> {
        if response {
            return None;
        }
        self.req_captures.get(index)?.as_deref()
    }
}

/// 2024-01-02T03:04:05.678901Z
fn date() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_micros(1_704_164_645_678_901)
}

fn facts() -> Facts {
    let mut f = Facts {
        accept: Some(date()),
        request: Some(date() + Duration::from_millis(12)),
        backend_source: Some("10.0.0.2:51000".parse().unwrap()),
        server: Some("10.0.1.5:80".parse().unwrap()),
        req_captures: vec![
            Some(b"www.example.com".to_vec()),
            None,
            Some(b"a|b\"#".to_vec()),
        ],
        ..Facts::default()
    };
    let numbers = [
        (LogNumber::Handshake, 0),
        (LogNumber::Idle, 1),
        (LogNumber::RequestHead, 2),
        (LogNumber::Request, 3),
        (LogNumber::Queue, 4),
        (LogNumber::Connect, 5),
        (LogNumber::Response, 6),
        (LogNumber::Data, 7),
        (LogNumber::Active, 8),
        (LogNumber::Total, 9),
        (LogNumber::User, 10),
        (LogNumber::BytesFromClient, 100),
        (LogNumber::BytesToClient, 2000),
        (LogNumber::ProcessConnections, 11),
        (LogNumber::FrontendConnections, 12),
        (LogNumber::BackendQueue, 13),
        (LogNumber::ServerQueue, 14),
        (LogNumber::Retries, 1),
        (LogNumber::LogCounter, 15),
        (LogNumber::RequestCounter, 255),
        (LogNumber::Pid, 4660),
    ];
    f.numbers.extend(numbers);
    let texts: [(LogText, &[u8]); 6] = [
        (LogText::Hostname, b"lb1"),
        (LogText::UniqueId, b"C0A8:1"),
        (LogText::TerminationState, b"--"),
        (LogText::TerminationStateCookie, b"--NI"),
        (LogText::RequestCookie, b"sid=1"),
        (LogText::TlsVersion, b"TLSv1.3"),
    ];
    f.texts.extend(texts.map(|(k, v)| (k, v.to_vec())));
    f
}

fn ctx_with_facts() -> TestCtx {
    let mut ctx = TestCtx::request(GET).response("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    ctx.backend = Some("be_app".to_string());
    ctx.server = Some("s1".to_string());
    ctx.facts = Some(Box::new(facts()));
    ctx
}

fn render(format: &str, ctx: &TestCtx) -> String {
    let lf = LogFormat::parse(format, &MapStore::new()).unwrap_or_else(|e| panic!("{format}: {e}"));
    let mut out = Vec::new();
    lf.render(ctx, &mut out);
    String::from_utf8(out).unwrap()
}

fn render_log(format: &str, ctx: &TestCtx) -> String {
    let lf =
        LogFormat::parse_log(format, &MapStore::new()).unwrap_or_else(|e| panic!("{format}: {e}"));
    let mut out = Vec::new();
    lf.render(ctx, &mut out);
    String::from_utf8(out).unwrap()
}

fn err(format: &str) -> String {
    LogFormat::parse(format, &MapStore::new()).unwrap_err()
}

#[test]
fn literal_text_and_percent() {
    let ctx = TestCtx::new();
    assert_eq!(render("plain text", &ctx), "plain text");
    assert_eq!(render("100%% sure", &ctx), "100% sure");
    assert_eq!(render("", &ctx), "");
    let lf = LogFormat::parse("a%%b", &MapStore::new()).unwrap();
    assert!(lf.is_constant());
    assert_eq!(lf.text(), "a%%b");
    assert!(
        !LogFormat::parse("%ci", &MapStore::new())
            .unwrap()
            .is_constant()
    );
    assert!(
        !LogFormat::parse("%[src]", &MapStore::new())
            .unwrap()
            .is_constant()
    );
    // %o sets flags but shows nothing: still constant.
    assert!(
        LogFormat::parse("%{+Q}o x", &MapStore::new())
            .unwrap()
            .is_constant()
    );
}

#[test]
fn sample_expressions() {
    let ctx = TestCtx::request(GET);
    assert_eq!(render("%[src]", &ctx), "192.168.1.10");
    assert_eq!(
        render("ip=%[src]:%[src_port]", &ctx),
        "ip=192.168.1.10:40000"
    );
    assert_eq!(render("%[path,upper]", &ctx), "/IMAGES/PNG/LOGO.PNG");
    // An absent or empty string is nothing in a header, `-` in a log line (`+M` / `-M`
    // change that either way); quoted, it is `""` in both.
    assert_eq!(render("<%[req.hdr(x-none)]>", &ctx), "<>");
    assert_eq!(render_log("<%[req.hdr(x-none)]>", &ctx), "<->");
    assert_eq!(render("<%{+M}[req.hdr(x-none)]>", &ctx), "<->");
    assert_eq!(render_log("<%{-M}[req.hdr(x-none)]>", &ctx), "<>");
    assert_eq!(render("%{+Q}[req.hdr(x-none)]", &ctx), "\"\"");
    assert_eq!(render_log("%{+Q}[req.hdr(x-none)]", &ctx), "\"\"");
    assert_eq!(render("<%[str()]>", &ctx), "<>");
    assert_eq!(render_log("<%[str()]>", &ctx), "<->");
    // A unique id merges spaces as a log line does, but leaves an absent value empty.
    let unique = LogFormat::parse_unique_id("<a>  <%[req.hdr(x-none)]>", &MapStore::new()).unwrap();
    let mut out = Vec::new();
    unique.render(&ctx, &mut out);
    assert_eq!(out, b"<a> <>");
    assert_eq!(render("%{+Q}[int(7)] %[bool(1)]", &ctx), "\"7\" 1");
    // A ']' and '%[' inside quoted arguments do not end the expression.
    assert_eq!(render("%[str(\"a]b\")]", &ctx), "a]b");
    assert_eq!(render("%[str('%[x]')]", &ctx), "%[x]");
    assert_eq!(render("<%[str(a),concat(\"]\",,)]>", &ctx), "<a]>");
    // A ']' outside an expression is text.
    assert_eq!(render("%[str(x)]]", &ctx), "x]");
}

#[test]
fn parse_errors() {
    assert_eq!(err("%[src"), "missing ']' after sample expression 'src'");
    assert_eq!(
        err("x %[str(\"a]\")"),
        "missing ']' after sample expression 'str(\"a]\")'"
    );
    assert_eq!(err("%[]"), "empty sample expression at position 1");
    assert_eq!(
        err("%[nope]"),
        "failed to parse sample expression 'nope' : unknown fetch method 'nope'"
    );
    assert_eq!(
        err("%[bin(00),add(1)]"),
        "failed to parse sample expression 'bin(00),add(1)' : converter 'add' cannot be applied to type 'binary' (it takes 'integer')"
    );
    assert_eq!(
        err("%xyz"),
        "no such log-format alias '%xyz' (write '%%' for a literal '%')"
    );
    assert_eq!(
        err("50%"),
        "'%' at the end of the format (write '%%' for a literal '%')"
    );
    assert_eq!(
        err("50% off"),
        "unexpected character ' ' after '%' at position 3 (write '%%' for a literal '%')"
    );
    assert_eq!(err("%{+Q"), "missing '}' after '%{' at position 1");
    assert_eq!(
        err("%{+Q}"),
        "'%' at the end of the format (write '%%' for a literal '%')"
    );
}

#[test]
fn quoting_escaping_and_hex() {
    let ctx = TestCtx::request(GET);
    assert_eq!(render("%{+Q}[path]", &ctx), "\"/images/png/logo.png\"");
    assert_eq!(render("%{+Q}ci %cp", &ctx), "\"192.168.1.10\" 40000");
    assert_eq!(render("%{+X}ci:%{+X}cp", &ctx), "C0A8010A:9C40");
    assert_eq!(render("%{+E}[str('a\"b\\c]d')]", &ctx), "a\\\"b\\\\c\\]d");
    assert_eq!(
        render("%{+Q,+E}[str('say \"hi\"')]", &ctx),
        "\"say \\\"hi\\\"\""
    );
    // %o makes flags the default of the items after it; an item can turn one off.
    assert_eq!(
        render("%f %{+Q}o%f %{-Q}f %[str(x)]", &ctx),
        "fe_main \"fe_main\" fe_main \"x\""
    );
    // Unknown flags are ignored, as in HAProxy.
    assert_eq!(render("%{+json,foo}f", &ctx), "fe_main");
    // Expressions are cast to text: no hexadecimal form.
    assert_eq!(render("%{+X}[src]", &ctx), "192.168.1.10");
}

#[test]
fn encoding_of_unsafe_bytes() {
    let ctx = TestCtx::request(GET);
    // Header fields: controls (but TAB) and DEL as %XX; '%' itself stays.
    assert_eq!(
        render("%[str(a\\nb\\tc%),concat(\x7f)]", &ctx),
        "a%0Ab\tc%%7F"
    );
    // Log lines: anything outside 32..126 as #XX.
    assert_eq!(render_log("%[str(a\\nb\\tc#)]", &ctx), "a#0Ab#09c#");
}

#[test]
fn connection_aliases() {
    let ctx = ctx_with_facts();
    assert_eq!(
        render("%ci:%cp %fi:%fp %bi:%bp %si:%sp", &ctx),
        "192.168.1.10:40000 10.0.0.1:8080 10.0.0.2:51000 10.0.1.5:80"
    );
    assert_eq!(render("%{+X}si:%{+X}sp", &ctx), "0A000105:0050");
    // The fetches read the same addresses as the aliases.
    assert_eq!(
        render("%[bc_src]:%[bc_src_port] %[bc_dst]:%[bc_dst_port]", &ctx),
        "10.0.0.2:51000 10.0.1.5:80"
    );
    assert_eq!(render("%f %ft %b %s", &ctx), "fe_main fe_main be_app s1");
    let mut tls = ctx_with_facts();
    tls.facts = Some(Box::new(Facts {
        tls: true,
        ..Facts::default()
    }));
    assert_eq!(render("%ft", &tls), "fe_main~");
    // Nothing chosen yet: the backend is the frontend, no server, no server connection.
    let mut bare = TestCtx::new();
    bare.src = None;
    bare.dst = None;
    assert_eq!(
        render("%b %s %si:%sp %ci:%cp %{+Q}fi", &bare),
        "fe_main <NOSRV> -:- unix:- \"unix\""
    );
    let v6 = {
        let mut c = TestCtx::new();
        c.src = Some("[2001:db8::1]:443".parse().unwrap());
        c
    };
    assert_eq!(
        render("%ci %{+X}ci", &v6),
        "2001:db8::1 20010DB8000000000000000000000001"
    );
}

#[test]
fn http_aliases() {
    let ctx = ctx_with_facts();
    assert_eq!(
        render("%r|%HM|%HU|%HP|%HPO|%HQ|%HV|%ST", &ctx),
        "GET /images/png/logo.png?x=1&y=2 HTTP/1.1|GET|/images/png/logo.png?x=1&y=2|\
/images/png/logo.png|/images/png/logo.png|?x=1&y=2|HTTP/1.1|200"
    );
    assert_eq!(
        render("%{+Q}r", &ctx),
        "\"GET /images/png/logo.png?x=1&y=2 HTTP/1.1\""
    );
    let abs = TestCtx::request("GET http://h.example/a/b?q HTTP/1.1\r\nHost: h.example\r\n\r\n");
    assert_eq!(
        render("%HU %HP %HPO %HQ", &abs),
        "http://h.example/a/b?q http://h.example/a/b /a/b ?q"
    );
    let no_query = TestCtx::request("GET /a HTTP/1.0\r\n\r\n");
    assert_eq!(
        render("[%HQ] %HV %r", &no_query),
        "[] HTTP/1.0 GET /a HTTP/1.0"
    );
    // Without a request (TCP, or a request that never parsed).
    let tcp = TestCtx::new();
    assert_eq!(render("%r %HM %ST", &tcp), "<BADREQ> <BADREQ> -");
    // The status the proxy sent wins over the server's.
    let mut sent = ctx_with_facts();
    let mut f = facts();
    f.numbers.insert(LogNumber::Status, 503);
    sent.facts = Some(Box::new(f));
    assert_eq!(render("%ST", &sent), "503");
}

#[test]
fn date_aliases() {
    let mut ctx = ctx_with_facts();
    assert_eq!(
        render("%t|%T|%Tl|%Ts|%ms", &ctx),
        "02/Jan/2024:03:04:05.678|02/Jan/2024:03:04:05 +0000|02/Jan/2024:03:04:05 +0000|1704164645|678"
    );
    assert_eq!(render("%{+X}Ts %{+X}ms", &ctx), "65937D25 2A6");
    ctx.utc_offset = -(3 * 3600 + 30 * 60);
    assert_eq!(
        render("%t|%T|%Tl", &ctx),
        "01/Jan/2024:23:34:05.678|02/Jan/2024:03:04:05 +0000|01/Jan/2024:23:34:05 -0330"
    );
    assert_eq!(
        render("%tr|%trg|%trl", &ctx),
        "01/Jan/2024:23:34:05.690|02/Jan/2024:03:04:05 +0000|01/Jan/2024:23:34:05 -0330"
    );
    let none = TestCtx::new();
    assert_eq!(render("%t %T %Ts %ms %tr", &none), "- - - - -");
}

#[test]
fn timer_and_counter_aliases() {
    let ctx = ctx_with_facts();
    assert_eq!(
        render("%Th/%Ti/%TR/%Tq/%Tw/%Tc/%Tr/%Td/%Ta/%Tt/%Tu", &ctx),
        "0/1/2/3/4/5/6/7/8/9/10"
    );
    assert_eq!(render("%U %B", &ctx), "100 2000");
    assert_eq!(
        render("%ac/%fc/%bc/%sc/%rc %bq/%sq %lc %rt %pid", &ctx),
        "11/12/-/-/1 13/14 15 255 4660"
    );
    assert_eq!(render("%{+X}rt %{+X}pid %{+X}B", &ctx), "00FF 1234 2000");
    let mut redispatched = ctx_with_facts();
    let mut f = facts();
    f.redispatched = true;
    redispatched.facts = Some(Box::new(f));
    assert_eq!(render("%rc", &redispatched), "+1");
    // %bc and %sc come from the context's counters.
    let mut counted = ctx_with_facts();
    counted
        .backend_stats
        .insert((None, BackendStat::Connections), 3);
    counted
        .server_stats
        .insert((None, "s1".to_string(), ServerStat::Connections), 2);
    assert_eq!(render("%bc %sc", &counted), "3 2");
    assert_eq!(render("%sc", &TestCtx::new()), "0");
    // No facts at all: every such alias is '-'.
    assert_eq!(
        render("%Tt %B %U %ac %fc %rc %lc %pid %bq", &TestCtx::new()),
        "- - - - - - - - -"
    );
}

#[test]
fn text_and_capture_aliases() {
    let ctx = ctx_with_facts();
    assert_eq!(
        render_log("%H %ID %ts %tsc %CC %CS %sslv %sslc", &ctx),
        "lb1 C0A8:1 -- --NI sid=1 - TLSv1.3 -"
    );
    assert_eq!(render("<%CS>", &ctx), "<>");
    assert_eq!(render("%{+Q}CS", &ctx), "\"\"");
    assert_eq!(
        render_log("%hr %hrl %hs %hsl|", &ctx),
        "{www.example.com||a#7Cb#22#23} www.example.com - a#7Cb#22#23 |"
    );
    assert_eq!(
        render("%{+Q}hr %{+Q}hrl", &ctx),
        "\"{www.example.com||a#7Cb#22#23}\" \"www.example.com\" \"\" \"a#7Cb#22#23\""
    );
    assert_eq!(render("[%hr%hsl]", &TestCtx::new()), "[]");
}

#[test]
fn log_formats_merge_spaces() {
    let ctx = ctx_with_facts();
    assert_eq!(
        render_log("  %ci   %f  x ", &ctx),
        "192.168.1.10 fe_main x "
    );
    // HAProxy's example: %o's separator is dropped at the start.
    assert_eq!(
        render_log("%{+Q}o %t %s %{-Q}r", &ctx),
        "02/Jan/2024:03:04:05.678 \"s1\" GET /images/png/logo.png?x=1&y=2 HTTP/1.1"
    );
    // An item with no output does not double the separator.
    assert_eq!(render_log("a %hs b", &ctx), "a b");
    // Outside logs, spaces are text.
    assert_eq!(render("a  %hs  b", &ctx), "a    b");
}

#[test]
fn stages_of_expressions() {
    let maps = MapStore::new();
    let mut lf = LogFormat::parse("%[req.hdr(host)] %[res.hdr(x)]", &maps).unwrap();
    assert!(lf.stages().is_empty());
    assert_eq!(
        lf.check_stages(Stages::HTTP_REQ).unwrap_err(),
        "fetch method 'res.hdr' extracts information from 'HTTP response headers', none of which is available here"
    );
    let mut req = LogFormat::parse("%ci %[path] %ST", &maps).unwrap();
    assert!(req.check_stages(Stages::HTTP_REQ).is_ok());
    assert!(req.check_stages(Stages::LOG).is_err());
    let mut any = LogFormat::parse("%Tt %[src]", &maps).unwrap();
    assert_eq!(any.stages(), Stages::ALL);
    assert!(any.check_stages(Stages::LOG).is_ok());
}

#[test]
fn formats_printing_the_server_connection_say_so() {
    let maps = MapStore::new();
    let uses = |text: &str| {
        LogFormat::parse_log(text, &maps)
            .unwrap()
            .uses_server_connection()
    };
    for text in [
        "%bi",
        "%{+X}bp",
        "x %si",
        "%sp",
        "%[bc_src]",
        "%[bc_dst_port,add(1)]",
    ] {
        assert!(uses(text), "{text}");
    }
    for text in ["%ci:%cp %fi:%fp %s %b", "%[src] %[srv_name]", "bi si"] {
        assert!(!uses(text), "{text}");
    }
    // The server connection exists in response rules and the log only.
    let mut rule = LogFormat::parse("%[bc_src]", &maps).unwrap();
    assert!(rule.check_stages(Stages::HTTP_REQ).is_err());
    assert!(rule.check_stages(Stages::HTTP_RES).is_ok());
}

#[test]
fn every_alias_renders_without_facts() {
    let ctx = TestCtx::new();
    for (name, _) in ALIASES {
        let mut out = Vec::new();
        LogFormat::parse(&format!("%{{+Q,+X,+E}}{name}"), &MapStore::new())
            .unwrap()
            .render(&ctx, &mut out);
        LogFormat::parse_log(&format!("%{name}"), &MapStore::new())
            .unwrap()
            .render(&ctx_with_facts(), &mut out);
    }
}

#[test]
fn numbers_and_addresses_are_written_as_their_display_forms() {
    for n in [0, 7, -7, 42, 1_000_000, i64::MAX, i64::MIN] {
        let mut out = Vec::new();
        put_int(&mut out, n);
        assert_eq!(out, n.to_string().into_bytes());
    }
    for ip in [
        "0.0.0.0",
        "10.1.2.3",
        "255.255.255.255",
        "192.0.2.10",
        "::1",
        "2001:db8::7",
    ] {
        let ip: IpAddr = ip.parse().unwrap();
        let mut out = Vec::new();
        put_ip(&mut out, ip, Flags::default());
        assert_eq!(out, ip.to_string().into_bytes());
    }
}

#[test]
fn the_first_alias_reserved_for_http_is_known() {
    let alias = |text: &str| {
        LogFormat::parse_log(text, &MapStore::new())
            .unwrap()
            .http_only_alias()
    };
    // The ones HAProxy 2.6 refuses in a `mode tcp` proxy.
    for name in HTTP_ONLY_ALIASES {
        assert_eq!(alias(&format!("%ci %{name}")), Some(*name), "{name}");
    }
    assert_eq!(alias("%{+Q}r %HM"), Some("r"));
    // The others, and what fetches read, are for any proxy.
    assert_eq!(
        alias("%ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts %ST %[path] %hr"),
        None
    );
}
