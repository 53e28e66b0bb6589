//! Fetch tests: every keyword against a parsed request (values checked against HAProxy
//! 2.6 where noted).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::testing::{GET, TestCtx, eval, parse_err, s, text};
use crate::{BackendStat, Sample, ServerStat};

fn get() -> TestCtx {
    TestCtx::request(GET)
}

#[test]
fn constants() {
    let ctx = TestCtx::new();
    assert_eq!(eval("always_true", &ctx), Some(Sample::Bool(true)));
    assert_eq!(eval("always_false", &ctx), Some(Sample::Bool(false)));
    assert_eq!(eval("str(hello world)", &ctx), Some(s("hello world")));
    assert_eq!(eval("str()", &ctx), Some(s("")));
    assert_eq!(eval("int(-42)", &ctx), Some(Sample::Int(-42)));
    assert_eq!(eval("bool(true)", &ctx), Some(Sample::Bool(true)));
    assert_eq!(eval("bool(0)", &ctx), Some(Sample::Bool(false)));
    assert_eq!(text("bin(48656c6c6f)", &ctx).as_deref(), Some("Hello"));
    assert_eq!(text("ipv4(10.1.2.3)", &ctx).as_deref(), Some("10.1.2.3"));
    assert_eq!(text("ipv6(::1)", &ctx).as_deref(), Some("::1"));
    assert_eq!(text("meth(PURGE)", &ctx).as_deref(), Some("PURGE"));
    assert_eq!(eval("proc", &ctx), Some(Sample::Int(1)));
}

#[test]
fn constant_argument_errors() {
    assert_eq!(
        parse_err("int(x)"),
        "fetch method 'int' : failed to parse 'x' as type 'integer' at position 1"
    );
    assert_eq!(
        parse_err("int()"),
        "fetch method 'int' : failed to parse '' as type 'integer' at position 1"
    );
    assert_eq!(
        parse_err("str"),
        "fetch method 'str' : missing arguments (got 0/1)"
    );
    assert_eq!(
        parse_err("str(a,b)"),
        "fetch method 'str' : too many arguments (got 2, at most 1)"
    );
    assert_eq!(
        parse_err("bool(yes)"),
        "fetch method 'bool' : failed to parse 'yes' as type 'boolean' at position 1"
    );
    assert_eq!(
        parse_err("bin(4)"),
        "fetch method 'bin' : failed to parse '4' as type 'binary' at position 1"
    );
    assert_eq!(
        parse_err("ipv4(1.2.3)"),
        "fetch method 'ipv4' : failed to parse '1.2.3' as type 'ipv4' at position 1"
    );
    assert_eq!(
        parse_err("src(1)"),
        "fetch method 'src' : too many arguments (got 1, at most 0)"
    );
    assert_eq!(parse_err("foo"), "unknown fetch method 'foo'");
    assert_eq!(
        parse_err("date(1,h)"),
        "fetch method 'date' : invalid time unit 'h' (expected 's', 'ms' or 'us')"
    );
    assert_eq!(
        parse_err("var(foo)"),
        "fetch method 'var' : invalid variable name 'foo' at position 1 (expected proc., sess., txn., req., res. or check. followed by a name)"
    );
}

#[test]
fn environment_time_and_randomness() {
    let mut ctx = TestCtx::new();
    ctx.env.insert("HOME".into(), "/root".into());
    assert_eq!(text("env(HOME)", &ctx).as_deref(), Some("/root"));
    assert_eq!(eval("env(NOPE)", &ctx), None);
    assert_eq!(eval("date", &ctx), Some(Sample::Int(1_704_164_645)));
    assert_eq!(eval("date(3600)", &ctx), Some(Sample::Int(1_704_168_245)));
    assert_eq!(eval("date(-5)", &ctx), Some(Sample::Int(1_704_164_640)));
    assert_eq!(
        eval("date(0,ms)", &ctx),
        Some(Sample::Int(1_704_164_645_678))
    );
    assert_eq!(
        eval("date(1,us)", &ctx),
        Some(Sample::Int(1_704_164_645_678_902))
    );
    // The microseconds of the same second.
    assert_eq!(eval("date_us", &ctx), Some(Sample::Int(678_901)));
    // Half of 2^32 scaled onto the range.
    assert_eq!(eval("rand", &ctx), Some(Sample::Int(0x8000_0000)));
    assert_eq!(eval("rand(10)", &ctx), Some(Sample::Int(5)));
    ctx.random = u64::MAX;
    assert_eq!(eval("rand(10)", &ctx), Some(Sample::Int(9)));
    ctx.now = std::time::UNIX_EPOCH - Duration::from_secs(10);
    assert_eq!(eval("date", &ctx), Some(Sample::Int(0)));
}

#[test]
fn backend_and_server_counters() {
    let mut ctx = TestCtx::new();
    ctx.backend_stats
        .insert((None, BackendStat::UsableServers), 3);
    ctx.backend_stats
        .insert((Some("static".into()), BackendStat::UsableServers), 1);
    ctx.backend_stats
        .insert((None, BackendStat::Connections), 7);
    ctx.backend_stats
        .insert((Some("b".into()), BackendStat::Queued), 2);
    ctx.backend_stats.insert((None, BackendStat::FreeSlots), -1);
    ctx.server_stats
        .insert((None, "s1".into(), ServerStat::Connections), 4);
    ctx.server_stats
        .insert((Some("b".into()), "s2".into(), ServerStat::Queued), 5);
    ctx.server_stats
        .insert((Some("b".into()), "s2".into(), ServerStat::Up), 1);
    assert_eq!(eval("nbsrv", &ctx), Some(Sample::Int(3)));
    assert_eq!(eval("nbsrv(static)", &ctx), Some(Sample::Int(1)));
    assert_eq!(eval("nbsrv(other)", &ctx), None);
    assert_eq!(eval("be_conn", &ctx), Some(Sample::Int(7)));
    assert_eq!(eval("queue(b)", &ctx), Some(Sample::Int(2)));
    assert_eq!(eval("connslots", &ctx), Some(Sample::Int(-1)));
    assert_eq!(eval("srv_conn(s1)", &ctx), Some(Sample::Int(4)));
    assert_eq!(eval("srv_queue(b/s2)", &ctx), Some(Sample::Int(5)));
    assert_eq!(eval("srv_is_up(b/s2)", &ctx), Some(Sample::Bool(true)));
    assert_eq!(eval("srv_is_up(s2)", &ctx), None);
    assert_eq!(
        parse_err("srv_conn(b/)"),
        "fetch method 'srv_conn' : failed to parse 'b/' as type 'server' at position 1"
    );
}

#[test]
fn variables() {
    let ctx = TestCtx::new()
        .var("txn.n", Sample::Int(5))
        .var("txn.s", s("x"));
    assert_eq!(eval("var(txn.n)", &ctx), Some(Sample::Int(5)));
    assert_eq!(eval("var(txn.s)", &ctx), Some(s("x")));
    assert_eq!(eval("var(txn.none)", &ctx), None);
    assert_eq!(eval("var(txn.none,fallback)", &ctx), Some(s("fallback")));
    assert_eq!(eval("var(txn.n),add(1)", &ctx), Some(Sample::Int(6)));
}

#[test]
fn wait_end_and_buffer() {
    let mut ctx = get();
    assert_eq!(eval("wait_end", &ctx), Some(Sample::Bool(true)));
    assert_eq!(eval("req.len", &ctx), Some(Sample::Int(GET.len() as i64)));
    assert_eq!(eval("req.proto_http", &ctx), Some(Sample::Bool(true)));
    // The names HAProxy keeps from before the `req.` prefix.
    assert_eq!(eval("req_len", &ctx), eval("req.len", &ctx));
    assert_eq!(eval("req_proto_http", &ctx), Some(Sample::Bool(true)));
    assert_eq!(eval("fc_http_major", &ctx), Some(Sample::Int(1)));
    assert_eq!(eval("fc_http_major", &TestCtx::new()), None);
    ctx.inspection_ended = false;
    assert_eq!(eval("wait_end", &ctx), None);
    assert_eq!(
        eval("req.proto_http", &TestCtx::new()),
        Some(Sample::Bool(false))
    );
    assert_eq!(eval("req.len", &TestCtx::new()), None);
    // Before the end of the inspection: a valid beginning waits, other bytes are not HTTP.
    let mut waiting = TestCtx::new();
    waiting.inspection_ended = false;
    waiting.payload = Some(b"GET / HT".to_vec());
    assert_eq!(eval("req.proto_http", &waiting), None);
    waiting.payload = Some(b"PO".to_vec());
    assert_eq!(eval("req.proto_http", &waiting), None);
    waiting.payload = Some(vec![0x16, 0x03, 0x01, 0x00]);
    assert_eq!(eval("req.proto_http", &waiting), Some(Sample::Bool(false)));
    waiting.payload = Some(b" GET / HTTP/1.1".to_vec());
    assert_eq!(eval("req.proto_http", &waiting), Some(Sample::Bool(false)));
}

#[test]
fn connection() {
    let mut ctx = TestCtx::new();
    assert_eq!(text("src", &ctx).as_deref(), Some("192.168.1.10"));
    assert_eq!(eval("src_port", &ctx), Some(Sample::Int(40000)));
    assert_eq!(text("dst", &ctx).as_deref(), Some("10.0.0.1"));
    assert_eq!(eval("dst_port", &ctx), Some(Sample::Int(8080)));
    assert_eq!(text("fe_name", &ctx).as_deref(), Some("fe_main"));
    // No backend yet: the frontend is the stream's backend.
    assert_eq!(text("be_name", &ctx).as_deref(), Some("fe_main"));
    assert_eq!(eval("srv_name", &ctx), None);
    ctx.backend = Some("be_app".into());
    ctx.server = Some("s1".into());
    ctx.src = Some("[2001:db8::1]:1234".parse().unwrap());
    assert_eq!(text("be_name", &ctx).as_deref(), Some("be_app"));
    assert_eq!(text("srv_name", &ctx).as_deref(), Some("s1"));
    assert_eq!(text("src", &ctx).as_deref(), Some("2001:db8::1"));
    ctx.src = None;
    assert_eq!(eval("src", &ctx), None);
    assert_eq!(eval("src_port", &ctx), None);
}

#[test]
fn request_line() {
    let ctx = get();
    assert_eq!(text("method", &ctx).as_deref(), Some("GET"));
    assert!(matches!(eval("method", &ctx), Some(Sample::Meth(_))));
    // The `capture.req.*` forms, as text, the version whole.
    assert_eq!(eval("capture.req.method", &ctx), Some(Sample::str(b"GET")));
    assert_eq!(
        text("capture.req.uri", &ctx).as_deref(),
        Some("/images/png/logo.png?x=1&y=2")
    );
    assert_eq!(text("capture.req.ver", &ctx).as_deref(), Some("HTTP/1.1"));
    assert_eq!(text("path", &ctx).as_deref(), Some("/images/png/logo.png"));
    assert_eq!(
        text("pathq", &ctx).as_deref(),
        Some("/images/png/logo.png?x=1&y=2")
    );
    assert_eq!(text("query", &ctx).as_deref(), Some("x=1&y=2"));
    assert_eq!(text("query(with_qm)", &ctx).as_deref(), Some("?x=1&y=2"));
    assert_eq!(
        text("url", &ctx).as_deref(),
        Some("/images/png/logo.png?x=1&y=2")
    );
    assert_eq!(
        text("base", &ctx).as_deref(),
        Some("www.example.com/images/png/logo.png")
    );
    assert_eq!(
        text("baseq", &ctx).as_deref(),
        Some("www.example.com/images/png/logo.png?x=1&y=2")
    );
    assert_eq!(text("req.ver", &ctx).as_deref(), Some("1.1"));
    assert_eq!(text("req_ver", &ctx).as_deref(), Some("1.1"));
    assert_eq!(
        parse_err("query(foo)"),
        "fetch method 'query' : unknown option 'foo' (only 'with_qm' is supported)"
    );
}

#[test]
fn request_line_forms() {
    let abs = TestCtx::request("GET http://h/a?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(text("path", &abs).as_deref(), Some("/a"));
    assert_eq!(text("pathq", &abs).as_deref(), Some("/a?x=1"));
    assert_eq!(text("query", &abs).as_deref(), Some("x=1"));
    assert_eq!(text("url", &abs).as_deref(), Some("http://h/a?x=1"));
    assert_eq!(text("base", &abs).as_deref(), Some("h/a"));
    // HAProxy 2.6: no path in "http://h" or "*", and base is then the host alone.
    let bare = TestCtx::request("GET http://h HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(eval("path", &bare), None);
    assert_eq!(eval("pathq", &bare), None);
    assert_eq!(text("base", &bare).as_deref(), Some("h"));
    let star = TestCtx::request("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(eval("path", &star), None);
    assert_eq!(text("url", &star).as_deref(), Some("*"));
    assert_eq!(text("base", &star).as_deref(), Some("h"));
    let no_query = TestCtx::request("GET /a? HTTP/1.0\r\n\r\n");
    assert_eq!(text("query", &no_query).as_deref(), Some(""));
    assert_eq!(text("query(with_qm)", &no_query).as_deref(), Some(""));
    assert_eq!(text("req.ver", &no_query).as_deref(), Some("1.0"));
    // No Host: base is the path.
    assert_eq!(text("base", &no_query).as_deref(), Some("/a"));
    let plain = TestCtx::request("GET /a HTTP/1.0\r\n\r\n");
    assert_eq!(eval("query", &plain), None);
    // No request at all.
    assert_eq!(eval("path", &TestCtx::new()), None);
    assert_eq!(eval("method", &TestCtx::new()), None);
}

#[test]
fn url_parameters() {
    let ctx = TestCtx::request("GET /x?a&b=2&c=;d=4&B=5&b=6 HTTP/1.0\r\n\r\n");
    assert_eq!(text("url_param(b)", &ctx).as_deref(), Some("2"));
    assert_eq!(text("urlp(c)", &ctx).as_deref(), Some(""));
    assert_eq!(text("urlp(d)", &ctx).as_deref(), Some("4"));
    // A parameter without '=' is no parameter (HAProxy 2.6 behaves the same).
    assert_eq!(eval("urlp(a)", &ctx), None);
    assert_eq!(text("urlp()", &ctx).as_deref(), Some("2"));
    assert_eq!(text("urlp", &ctx).as_deref(), Some("2"));
    assert_eq!(text("urlp(B)", &ctx).as_deref(), Some("5"));
    assert_eq!(text("urlp(B,,i)", &ctx).as_deref(), Some("2"));
    assert_eq!(eval("urlp_val(d)", &ctx), Some(Sample::Int(4)));
    let semi = TestCtx::request("GET /x;jsessionid=abc HTTP/1.0\r\n\r\n");
    assert_eq!(eval("urlp(jsessionid)", &semi), None);
    assert_eq!(text("urlp(jsessionid,;)", &semi).as_deref(), Some("abc"));
    assert_eq!(
        parse_err("urlp(a,&,x)"),
        "fetch method 'urlp' : invalid third argument 'x' (only 'i' is supported)"
    );
}

#[test]
fn headers_split_at_commas() {
    let ctx = get();
    // Checked against HAProxy 2.6 with the same fields.
    assert_eq!(text("req.hdr(x-a)", &ctx).as_deref(), Some("e"));
    assert_eq!(text("req.hdr(X-A,1)", &ctx).as_deref(), Some("a"));
    assert_eq!(text("req.hdr(x-a,2)", &ctx).as_deref(), Some("\"b,c\""));
    assert_eq!(text("req.hdr(x-a,-2)", &ctx).as_deref(), Some("d"));
    assert_eq!(text("req.hdr(x-a,-4)", &ctx).as_deref(), Some("a"));
    assert_eq!(eval("req.hdr(x-a,5)", &ctx), None);
    assert_eq!(eval("req.hdr(x-a,-5)", &ctx), None);
    assert_eq!(text("hdr(host)", &ctx).as_deref(), Some("www.example.com"));
    assert_eq!(eval("req.hdr(nope)", &ctx), None);
    assert_eq!(eval("req.hdr_cnt(x-a)", &ctx), Some(Sample::Int(4)));
    assert_eq!(eval("hdr_cnt(nope)", &ctx), Some(Sample::Int(0)));
    // Every value of every field: Host, User-Agent (2), X-A (3+1), Cookie (1+1), CL.
    assert_eq!(eval("hdr_cnt", &ctx), Some(Sample::Int(10)));
    assert_eq!(text("req.hdr()", &ctx).as_deref(), Some("0"));
    assert_eq!(
        text("req.fhdr(x-a,1)", &ctx).as_deref(),
        Some("a, \"b,c\" , d")
    );
    assert_eq!(
        text("req.fhdr(user-agent)", &ctx).as_deref(),
        Some("curl/8.0, (compatible)")
    );
    assert_eq!(eval("req.fhdr_cnt(x-a)", &ctx), Some(Sample::Int(2)));
    assert_eq!(eval("req.fhdr_cnt", &ctx), Some(Sample::Int(7)));
    assert_eq!(
        text("req.hdr_names", &ctx).as_deref(),
        Some("host,user-agent,x-a,x-a,cookie,cookie,content-length")
    );
    assert_eq!(
        text("req.hdr_names(;)", &ctx)
            .as_deref()
            .map(|n| n.starts_with("host;user")),
        Some(true)
    );
    assert_eq!(
        parse_err("req.hdr(a,x)"),
        "fetch method 'req.hdr' : failed to parse 'x' as type 'integer' at position 2"
    );
}

#[test]
fn header_values_and_addresses() {
    let ctx = TestCtx::request(
        "GET / HTTP/1.1\r\nHost: h\r\nX-V: 12abc, -3\r\nX-Ip: 1.2.3.4:80\r\nX-Ip: ::1\r\n\
         X-Ip: bad\r\nX-Ip6: [::1]:80\r\n\r\n",
    );
    assert_eq!(eval("req.hdr_val(x-v)", &ctx), Some(Sample::Int(-3)));
    assert_eq!(eval("hdr_val(x-v,1)", &ctx), Some(Sample::Int(12)));
    assert_eq!(text("req.hdr_ip(x-ip,1)", &ctx).as_deref(), Some("1.2.3.4"));
    assert_eq!(text("hdr_ip(x-ip,2)", &ctx).as_deref(), Some("::1"));
    assert_eq!(eval("req.hdr_ip(x-ip)", &ctx), None);
    assert_eq!(eval("req.hdr_ip(x-ip6)", &ctx), None);
}

#[test]
fn response_fields() {
    let ctx = get().response(
        "HTTP/1.1 302 Found\r\nLocation: /x\r\nSet-Cookie: sid=abc; Path=/\r\n\
         Set-Cookie: lang = fr ; HttpOnly\r\nSet-Cookie: sid=def\r\nVary: a, b\r\n\r\n",
    );
    assert_eq!(eval("status", &ctx), Some(Sample::Int(302)));
    assert_eq!(text("res.ver", &ctx).as_deref(), Some("1.1"));
    assert_eq!(text("resp_ver", &ctx).as_deref(), Some("1.1"));
    assert_eq!(text("res.hdr(vary)", &ctx).as_deref(), Some("b"));
    assert_eq!(text("shdr(vary,1)", &ctx).as_deref(), Some("a"));
    assert_eq!(text("res.fhdr(vary)", &ctx).as_deref(), Some("a, b"));
    assert_eq!(eval("res.hdr_cnt(vary)", &ctx), Some(Sample::Int(2)));
    assert_eq!(eval("res.fhdr_cnt(set-cookie)", &ctx), Some(Sample::Int(3)));
    assert_eq!(text("res.cook(sid)", &ctx).as_deref(), Some("def"));
    assert_eq!(text("scook(lang)", &ctx).as_deref(), Some("fr"));
    assert_eq!(text("res.cook", &ctx).as_deref(), Some("abc"));
    assert_eq!(eval("res.cook_cnt(sid)", &ctx), Some(Sample::Int(2)));
    assert_eq!(eval("res.cook(Path)", &ctx), None);
    assert_eq!(
        text("res.cook_names", &ctx).as_deref(),
        Some("sid,lang,sid")
    );
    assert_eq!(
        text("res.hdr_names(:)", &ctx).as_deref(),
        Some("location:set-cookie:set-cookie:set-cookie:vary")
    );
    assert_eq!(eval("status", &get()), None);
    assert_eq!(eval("res.hdr(vary)", &get()), None);
    // A server's response: no cache built it.
    assert_eq!(eval("res.cache_hit", &ctx), Some(Sample::Bool(false)));
    assert_eq!(text("res.cache_name", &ctx).as_deref(), Some(""));
}

#[test]
fn request_cookies() {
    let ctx = get();
    // HAProxy 2.6: "a=1; b = 2 ;a=3" and "c=4".
    assert_eq!(text("req.cook(a)", &ctx).as_deref(), Some("3"));
    assert_eq!(text("cook(b)", &ctx).as_deref(), Some("2"));
    assert_eq!(text("req.cook(c)", &ctx).as_deref(), Some("4"));
    assert_eq!(text("req.cook", &ctx).as_deref(), Some("1"));
    assert_eq!(eval("req.cook(A)", &ctx), None);
    assert_eq!(eval("req.cook_cnt(a)", &ctx), Some(Sample::Int(2)));
    assert_eq!(eval("cook_cnt", &ctx), Some(Sample::Int(4)));
    assert_eq!(eval("req.cook_val(a)", &ctx), Some(Sample::Int(3)));
    assert_eq!(text("req.cook_names", &ctx).as_deref(), Some("a,b,a,c"));
    let commas = TestCtx::request("GET / HTTP/1.0\r\nCookie: a=1, b=2; flag; e=\r\n\r\n");
    assert_eq!(text("req.cook(b)", &commas).as_deref(), Some("2"));
    assert_eq!(text("req.cook(a)", &commas).as_deref(), Some("1"));
    assert_eq!(text("req.cook(e)", &commas).as_deref(), Some(""));
    assert_eq!(eval("req.cook(flag)", &commas), None);
}

#[test]
fn iteration_for_acls() {
    let ctx = get();
    let all = |text: &str| {
        let expr = crate::Expr::parse(text, &crate::MapStore::new()).unwrap();
        let mut seen = Vec::new();
        expr.eval_each(&ctx, &mut |s| {
            seen.push(String::from_utf8_lossy(&s.to_bytes()).into_owned());
            false
        });
        seen
    };
    assert_eq!(all("req.hdr(x-a)"), ["a", "\"b,c\"", "d", "e"]);
    assert_eq!(all("req.hdr(x-a,2)"), ["\"b,c\""]);
    assert_eq!(all("req.fhdr(x-a)"), ["a, \"b,c\" , d", "e"]);
    assert_eq!(all("req.cook(a)"), ["1", "3"]);
    assert_eq!(all("req.cook"), ["1", "2", "3", "4"]);
    assert_eq!(all("urlp"), ["1", "2"]);
    assert_eq!(all("req.hdr_val(x-a)"), ["0", "0", "0", "0"]);
    assert_eq!(all("req.hdr(x-a),upper"), ["A", "\"B,C\"", "D", "E"]);
    assert_eq!(all("path"), ["/images/png/logo.png"]);
    // Stops when the sink says so.
    let expr = crate::Expr::parse("req.hdr(x-a)", &crate::MapStore::new()).unwrap();
    let mut count = 0;
    assert!(expr.eval_each(&ctx, &mut |_| {
        count += 1;
        count == 2
    }));
    assert_eq!(count, 2);
}

fn tcp(payload: &[u8]) -> TestCtx {
    let mut ctx = TestCtx::new();
    ctx.payload = Some(payload.to_vec());
    ctx
}

#[test]
fn payload_blocks() {
    let ctx = tcp(b"\x00\x03abcdef");
    assert_eq!(text("req.payload(2,3)", &ctx).as_deref(), Some("abc"));
    assert_eq!(text("req.payload(4,0)", &ctx).as_deref(), Some("cdef"));
    assert_eq!(text("payload(0,2),hex", &ctx).as_deref(), Some("0003"));
    // Not all there (yet): no sample.
    assert_eq!(eval("req.payload(6,3)", &ctx), None);
    assert_eq!(eval("req.payload(9,0)", &ctx), None);
    assert_eq!(text("req.payload(8,0)", &ctx).as_deref(), Some(""));
    assert_eq!(text("req.payload_lv(0,2)", &ctx).as_deref(), Some("abc"));
    assert_eq!(text("req.payload_lv(0,2,5)", &ctx).as_deref(), Some("def"));
    assert_eq!(text("req.payload_lv(0,2,+1)", &ctx).as_deref(), Some("bcd"));
    assert_eq!(text("payload_lv(0,2,-1)", &ctx).as_deref(), Some("\x03ab"));
    assert_eq!(eval("req.payload_lv(0,2,+4)", &ctx), None);
    assert_eq!(eval("req.payload_lv(0,2,-3)", &ctx), None);
    assert_eq!(eval("req.len", &ctx), Some(Sample::Int(8)));
    assert_eq!(eval("req.payload(0,1)", &TestCtx::new()), None);
    assert_eq!(
        parse_err("req.payload(-1,2)"),
        "fetch method 'req.payload' : failed to parse '-1' as type 'positive integer' at position 1"
    );
    assert_eq!(
        parse_err("req.payload_lv(0,9)"),
        "fetch method 'req.payload_lv' : length size must be between 1 and 8 bytes (got 9)"
    );
    assert_eq!(
        parse_err("req.payload_lv(0,1,+x)"),
        "fetch method 'req.payload_lv' : failed to parse '+x' as type 'integer' at position 3"
    );
    // ACLs match payloads as hexadecimal binary by default.
    assert!(crate::testing::matches("req.payload(0,2) 0003", &ctx));
    assert!(!crate::testing::matches("req.payload(0,2) 0004", &ctx));
}

#[test]
fn tls_hello_fetches() {
    let hello = super::tls_hello::tests::client_hello();
    let ctx = tcp(&hello);
    assert_eq!(
        text("req.ssl_sni", &ctx).as_deref(),
        Some("www.example.com")
    );
    assert_eq!(
        text("req_ssl_sni,upper", &ctx).as_deref(),
        Some("WWW.EXAMPLE.COM")
    );
    assert_eq!(eval("req.ssl_hello_type", &ctx), Some(Sample::Int(1)));
    assert_eq!(eval("req_ssl_hello_type", &ctx), Some(Sample::Int(1)));
    assert_eq!(eval("req.ssl_ver", &ctx), Some(Sample::Int(0x30003)));
    assert_eq!(eval("req_ssl_ver", &ctx), Some(Sample::Int(0x30003)));
    assert_eq!(text("req.ssl_alpn", &ctx).as_deref(), Some("h2"));
    assert_eq!(eval("req.ssl_ec_ext", &ctx), Some(Sample::Bool(true)));
    assert_eq!(eval("req.ssl_st_ext", &ctx), Some(Sample::Int(1)));
    // An ACL sees every ALPN protocol.
    assert!(crate::testing::matches("req.ssl_alpn http/1.1", &ctx));
    assert!(crate::testing::matches(
        "req.ssl_sni -i WWW.example.com",
        &ctx
    ));
    assert!(crate::testing::matches("req.ssl_hello_type 1", &ctx));
    // Half a hello: nothing yet.
    let half = tcp(&hello[..hello.len() / 2]);
    for fetch in [
        "req.ssl_sni",
        "req.ssl_hello_type",
        "req.ssl_ver",
        "req.ssl_alpn",
        "req.ssl_ec_ext",
        "req.ssl_st_ext",
    ] {
        assert_eq!(eval(fetch, &half), None, "{fetch}");
    }
    // Plain HTTP is not TLS.
    assert_eq!(eval("req.ssl_sni", &tcp(b"GET / HTTP/1.1\r\n\r\n")), None);
}

#[test]
fn body_fetches() {
    let mut ctx = TestCtx::request("POST /form HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n");
    ctx.body = Some(b"user=bob&Pass=a%20b&flag&user=alice&x=".to_vec());
    assert_eq!(
        text("req.body", &ctx).as_deref(),
        Some("user=bob&Pass=a%20b&flag&user=alice&x=")
    );
    assert_eq!(eval("req.body_len", &ctx), Some(Sample::Int(38)));
    assert_eq!(eval("req.body_size", &ctx), Some(Sample::Int(40)));
    assert_eq!(text("req.body_param(user)", &ctx).as_deref(), Some("bob"));
    assert_eq!(text("req.body_param(pass)", &ctx), None);
    assert_eq!(
        text("req.body_param(pass,i)", &ctx).as_deref(),
        Some("a%20b")
    );
    assert_eq!(text("req.body_param", &ctx).as_deref(), Some("bob"));
    assert_eq!(text("req.body_param(x)", &ctx).as_deref(), Some(""));
    assert_eq!(text("req.body_param(flag)", &ctx), None);
    assert!(crate::testing::matches("req.body_param(user) alice", &ctx));
    assert!(crate::testing::matches("req.body_param alice", &ctx));
    assert_eq!(
        parse_err("req.body_param(a,x)"),
        "fetch method 'req.body_param' : failed to parse 'x' as type ''i'' at position 2"
    );
    // Chunked (no Content-Length): the size is what is there.
    let mut chunked =
        TestCtx::request("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    chunked.body = Some(b"abc".to_vec());
    assert_eq!(eval("req.body_size", &chunked), Some(Sample::Int(3)));
    assert_eq!(eval("req.body", &get()), None);
    assert_eq!(eval("req.body_len", &get()), None);
}

#[test]
fn payload_fetches_are_request_content_fetches() {
    use crate::{Expr, MapStore, Stages};
    for fetch in ["req.ssl_sni", "req.payload(0,1)", "req.body"] {
        let mut expr = Expr::parse(fetch, &MapStore::new()).unwrap();
        assert!(
            expr.check_stages(Stages::TCP_REQ_CONTENT).is_ok(),
            "{fetch}"
        );
        assert!(expr.check_stages(Stages::HTTP_RES).is_err(), "{fetch}");
    }
}

#[test]
fn response_body_fetches() {
    let mut ctx = get().response("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
    ctx.res_body = Some(b"abcdef".to_vec());
    assert_eq!(text("res.body", &ctx).as_deref(), Some("abcdef"));
    assert_eq!(eval("res.body_len", &ctx), Some(Sample::Int(6)));
    // The announced length, whatever came of it.
    assert_eq!(eval("res.body_size", &ctx), Some(Sample::Int(10)));
    // Chunked: the size is what is there.
    let mut chunked = get().response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    chunked.res_body = Some(b"abc".to_vec());
    assert_eq!(eval("res.body_size", &chunked), Some(Sample::Int(3)));
    assert_eq!(eval("res.body", &get()), None);
    // The response's body, not the request's.
    let mut request = get();
    request.body = Some(b"request".to_vec());
    assert_eq!(eval("res.body_len", &request), None);
    // `http-response` rules only.
    use crate::{Expr, MapStore, Stages};
    for fetch in ["res.body", "res.body_len", "res.body_size"] {
        let mut expr = Expr::parse(fetch, &MapStore::new()).unwrap();
        assert!(expr.check_stages(Stages::HTTP_RES).is_ok(), "{fetch}");
        assert!(
            expr.check_stages(Stages::TCP_RES_CONTENT).is_err(),
            "{fetch}"
        );
        assert!(expr.check_stages(Stages::HTTP_REQ).is_err(), "{fetch}");
    }
}

/// A store holding user list "L": tiger (pw1, groups G1) and scott (elgato, G1 and G2).
fn auth_store() -> crate::MapStore {
    use crate::{Password, User, Userlist};
    let maps = crate::MapStore::new();
    let user = |name: &str, pw: &str, groups: &[&str]| User {
        name: name.into(),
        password: Password::Clear(pw.into()),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    };
    maps.add_userlist(Userlist {
        name: "L".into(),
        users: vec![
            user("tiger", "pw1", &["G1"]),
            user("scott", "elgato", &["G1", "G2"]),
        ],
        groups: vec!["G1".into(), "G2".into()],
    });
    maps
}

fn auth_ctx(authorization: &str) -> TestCtx {
    TestCtx::request(&format!(
        "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: {authorization}\r\n\r\n"
    ))
}

fn auth_eval(text: &str, ctx: &TestCtx) -> Option<Sample<'static>> {
    crate::Expr::parse(text, &auth_store())
        .unwrap()
        .eval(ctx)
        .map(Sample::into_owned)
}

#[test]
fn http_auth_checks_credentials_against_the_list() {
    // "scott:elgato", "scott:nope", "tiger:pw1".
    let good = auth_ctx("Basic c2NvdHQ6ZWxnYXRv");
    let bad = auth_ctx("Basic c2NvdHQ6bm9wZQ==");
    assert_eq!(auth_eval("http_auth(L)", &good), Some(Sample::Bool(true)));
    assert_eq!(auth_eval("http_auth(L)", &bad), Some(Sample::Bool(false)));
    assert_eq!(auth_eval("http_auth_group(L)", &good), Some(s("scott")));
    assert_eq!(auth_eval("http_auth_group(L)", &bad), None);
    assert_eq!(auth_eval("http_auth_user", &bad), Some(s("scott")));
    assert_eq!(auth_eval("http_auth_pass", &bad), Some(s("nope")));
    assert_eq!(auth_eval("http_auth_type", &bad), Some(s("Basic")));
    assert_eq!(auth_eval("http_auth_bearer", &bad), None);
    let bearer = auth_ctx("Bearer abc.def");
    assert_eq!(auth_eval("http_auth_bearer", &bearer), Some(s("abc.def")));
    assert_eq!(auth_eval("http_auth_user", &bearer), None);
    assert_eq!(
        auth_eval("http_auth(L)", &TestCtx::request(GET)),
        None,
        "no Authorization field, no sample"
    );
}

#[test]
fn proxied_requests_carry_credentials_in_proxy_authorization() {
    // `option http-use-proxy-header` and an absolute target: HAProxy reads
    // Proxy-Authorization, and Authorization is the origin's business.
    let mut ctx = TestCtx::request(
        "GET http://x/ HTTP/1.1\r\nHost: x\r\nAuthorization: Basic dGlnZXI6cHcx\r\n\
         Proxy-Authorization: Basic c2NvdHQ6ZWxnYXRv\r\nX-Token: Bearer t\r\n\r\n",
    );
    assert_eq!(auth_eval("http_auth_user", &ctx), Some(s("tiger")));
    ctx.proxy_credentials = true;
    assert_eq!(auth_eval("http_auth_user", &ctx), Some(s("scott")));
    assert_eq!(auth_eval("http_auth_group(L)", &ctx), Some(s("scott")));
    assert_eq!(auth_eval("http_auth_bearer", &ctx), None);
    // A named field is read whatever the option says.
    assert_eq!(auth_eval("http_auth_bearer(X-Token)", &ctx), Some(s("t")));
}

#[test]
fn http_auth_group_acls_match_groups() {
    let maps = auth_store();
    let mut set = crate::AclSet::new(maps);
    set.add(&crate::testing::words("g2 http_auth_group(L) G2 G3"))
        .unwrap();
    let cond = crate::Condition::parse(&crate::testing::words("if g2"), &set).unwrap();
    assert!(cond.eval(&auth_ctx("Basic c2NvdHQ6ZWxnYXRv")));
    // tiger:pw1 is valid but only in G1.
    assert!(!cond.eval(&auth_ctx("Basic dGlnZXI6cHcx")));
    assert!(!cond.eval(&auth_ctx("Basic c2NvdHQ6bm9wZQ==")));
}

#[test]
fn http_auth_needs_a_declared_list() {
    assert_eq!(
        parse_err("http_auth(nowhere)"),
        "fetch method 'http_auth' : unable to find userlist 'nowhere'"
    );
    assert_eq!(
        parse_err("http_auth"),
        "fetch method 'http_auth' : missing arguments (got 0/1)"
    );
}

#[test]
fn capture_fetches_read_the_context_slots() {
    // The test context has no captures: no sample.
    assert_eq!(eval("capture.req.hdr(0)", &get()), None);
    assert_eq!(eval("capture.res.hdr(3)", &get()), None);
    assert_eq!(
        parse_err("capture.req.hdr(-1)"),
        "fetch method 'capture.req.hdr' : expects a capture slot number (0 or more)"
    );
    assert_eq!(
        parse_err("capture.res.hdr"),
        "fetch method 'capture.res.hdr' : missing arguments (got 0/1)"
    );
    // Request captures outlive the request head; response ones are response-only.
    let mut req = crate::Expr::parse("capture.req.hdr(0)", &crate::MapStore::new()).unwrap();
    assert!(req.check_stages(crate::Stages::HTTP_RES).is_ok());
    let mut res = crate::Expr::parse("capture.res.hdr(0)", &crate::MapStore::new()).unwrap();
    assert!(res.check_stages(crate::Stages::HTTP_REQ).is_err());
}

#[test]
fn response_buffer_fetches() {
    let mut ctx = TestCtx::new();
    assert_eq!(eval("res.len", &ctx), None);
    ctx.res_payload = Some(b"HELLO".to_vec());
    assert_eq!(eval("res.len", &ctx), Some(Sample::Int(5)));
    assert_eq!(text("res.payload(1,3)", &ctx).as_deref(), Some("ELL"));
    assert_eq!(text("res.payload(2,0)", &ctx).as_deref(), Some("LLO"));
    assert_eq!(eval("res.payload(3,5)", &ctx), None, "not all there yet");
    ctx.res_payload = Some(b"\x00\x03abcdef".to_vec());
    assert_eq!(text("res.payload_lv(0,2)", &ctx).as_deref(), Some("abc"));
    assert_eq!(text("res.payload_lv(0,2,+1)", &ctx).as_deref(), Some("bcd"));
    assert_eq!(
        eval("res.payload_lv(0,2,+4)", &ctx),
        None,
        "not all there yet"
    );
    // A TLS record (22: handshake) holding a ServerHello (handshake type 2).
    ctx.res_payload = Some(vec![22, 3, 3, 0, 4, 2, 0, 0, 0]);
    assert_eq!(eval("res.ssl_hello_type", &ctx), Some(Sample::Int(2)));
    assert_eq!(eval("rep_ssl_hello_type", &ctx), Some(Sample::Int(2)));
    ctx.res_payload = Some(b"HTTP/1.1 200 OK\r\n".to_vec());
    assert_eq!(eval("res.ssl_hello_type", &ctx), None);
    let mut expr = crate::Expr::parse("res.len", &crate::MapStore::new()).unwrap();
    assert!(expr.check_stages(crate::Stages::TCP_RES_CONTENT).is_ok());
    assert!(expr.check_stages(crate::Stages::HTTP_RES).is_err());
}

/// `decide` over one anonymous ACL.
fn decide(acl: &str, ctx: &TestCtx) -> Option<bool> {
    let set = crate::AclSet::new(crate::MapStore::new());
    crate::Condition::parse(&crate::testing::words(&format!("if {acl}")), &set)
        .unwrap()
        .decide(ctx)
}

#[test]
fn conditions_wait_for_data_that_may_still_arrive() {
    let mut ctx = TestCtx::new();
    ctx.inspection_ended = false;
    ctx.res_payload = Some(b"BA".to_vec());
    // A block not all there, or a length not reached yet: wait.
    assert_eq!(decide("{ res.payload(0,3) -m bin 424144 }", &ctx), None);
    assert_eq!(decide("{ res.len ge 4 }", &ctx), None);
    assert_eq!(decide("!{ res.len ge 4 }", &ctx), None);
    // A match decides at once; so does a false term beside a missing one.
    assert_eq!(decide("{ res.len ge 2 }", &ctx), Some(true));
    assert_eq!(
        decide("{ res.len ge 4 } || { always_true }", &ctx),
        Some(true)
    );
    assert_eq!(
        decide("{ res.len ge 4 } { always_false }", &ctx),
        Some(false)
    );
    // A complete block that differs is a definite no.
    ctx.res_payload = Some(b"GOOD".to_vec());
    assert_eq!(
        decide("{ res.payload(0,3) -m bin 424144 }", &ctx),
        Some(false)
    );
    // Once inspection is over, nothing waits.
    ctx.res_payload = Some(b"BA".to_vec());
    ctx.inspection_ended = true;
    assert_eq!(decide("{ res.len ge 4 }", &ctx), Some(false));
    assert_eq!(decide("!{ res.len ge 4 }", &ctx), Some(true));
}

#[test]
fn url_hashes_match_haproxy() {
    // Values from HAProxy 2.6 for the same requests.
    let origin = TestCtx::request("GET /p?q=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(eval("base32", &origin), Some(Sample::Int(256_689_826)));
    assert_eq!(eval("url32", &origin), Some(Sample::Int(1_854_676_743)));
    assert_eq!(eval("base32", &origin), eval("base,sdbm(1)", &origin));
    assert_eq!(eval("url32", &origin), eval("baseq,sdbm(1)", &origin));
    let absolute =
        TestCtx::request("GET http://1.2.3.4:8080/p?x HTTP/1.1\r\nHost: 1.2.3.4:8080\r\n\r\n");
    assert_eq!(eval("base32", &absolute), Some(Sample::Int(1_418_847_217)));
    assert_eq!(eval("url32", &absolute), Some(Sample::Int(2_835_733_485)));
    let no_host = TestCtx::request("GET /a?b HTTP/1.0\r\n\r\n");
    assert_eq!(eval("base32", &no_host), Some(Sample::Int(1_743_195_586)));
    assert_eq!(eval("url32", &no_host), Some(Sample::Int(3_300_911_741)));
    // The +src forms: the hash's four bytes, then the client's address (192.168.1.10).
    assert_eq!(
        text("base32+src,hex", &origin).as_deref(),
        Some("0F4CC6A2C0A8010A")
    );
    assert_eq!(
        text("url32+src,hex", &origin).as_deref(),
        Some("6E8C1F07C0A8010A")
    );
    let mut v6 = TestCtx::request("GET /p?q=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    v6.src = Some("[2001:db8::1]:4000".parse().unwrap());
    assert_eq!(
        text("base32+src,hex", &v6).as_deref(),
        Some("0F4CC6A220010DB8000000000000000000000001")
    );
    assert_eq!(eval("base32", &TestCtx::new()), None);
}

#[test]
fn url_address_needs_an_ipv4_host_in_an_absolute_url() {
    let with_port =
        TestCtx::request("GET http://1.2.3.4:8080/p HTTP/1.1\r\nHost: 1.2.3.4:8080\r\n\r\n");
    assert_eq!(text("url_ip", &with_port).as_deref(), Some("1.2.3.4"));
    assert_eq!(eval("url_port", &with_port), Some(Sample::Int(8080)));
    let https = TestCtx::request("GET HTTPS://9.9.9.9/?x HTTP/1.1\r\nHost: 9.9.9.9\r\n\r\n");
    assert_eq!(text("url_ip", &https).as_deref(), Some("9.9.9.9"));
    assert_eq!(eval("url_port", &https), Some(Sample::Int(443)));
    let plain = TestCtx::request("GET http://1.2.3.4/ HTTP/1.1\r\nHost: 1.2.3.4\r\n\r\n");
    assert_eq!(eval("url_port", &plain), Some(Sample::Int(80)));
    // HAProxy 2.6 gives nothing for names, IPv6 literals and origin-form targets.
    for raw in [
        "GET http://example.com:81/p HTTP/1.1\r\nHost: example.com:81\r\n\r\n",
        "GET https://[::1]:82/p HTTP/1.1\r\nHost: [::1]:82\r\n\r\n",
        "GET /p HTTP/1.1\r\nHost: 1.2.3.4\r\n\r\n",
    ] {
        let ctx = TestCtx::request(raw);
        assert_eq!(eval("url_ip", &ctx), None, "{raw}");
        assert_eq!(eval("url_port", &ctx), None, "{raw}");
    }
}

#[test]
fn whole_request_head_fields() {
    let long = "a".repeat(300);
    let ctx = TestCtx::request(&format!(
        "GET / HTTP/1.1\r\nHost: h\r\nX-Long:  {long} \r\n\r\n"
    ));
    assert_eq!(
        text("req.hdrs", &ctx),
        Some(format!("host: h\r\nx-long: {long}\r\n\r\n"))
    );
    // Lengths as SPOE variable-length integers: 300 is FC 03 (HAProxy 2.6's encoding).
    let mut expected = b"\x04host\x01h\x06x-long\xFC\x03".to_vec();
    expected.extend_from_slice(long.as_bytes());
    expected.extend_from_slice(&[0, 0]);
    assert_eq!(
        eval("req.hdrs_bin", &ctx),
        Some(Sample::Bin(std::borrow::Cow::Owned(expected)))
    );
    let bare = TestCtx::request("GET / HTTP/1.0\r\n\r\n");
    assert_eq!(text("req.hdrs", &bare).as_deref(), Some("\r\n"));
    assert_eq!(eval("req.hdrs", &TestCtx::new()), None);
}

#[test]
fn process_state() {
    let ctx = TestCtx::new();
    assert_eq!(eval("stopping", &ctx), Some(Sample::Bool(false)));
    assert_eq!(eval("thread", &ctx), Some(Sample::Int(0)));
}

#[test]
fn tls_fetches_describe_a_clear_connection() {
    let ctx = TestCtx::request(GET);
    for falsy in ["ssl_fc", "ssl_fc_has_sni", "ssl_fc_is_resumed"] {
        assert_eq!(eval(falsy, &ctx), Some(Sample::Bool(false)), "{falsy}");
    }
    for absent in [
        "ssl_fc_sni",
        "ssl_fc_protocol",
        "ssl_fc_err",
        "ssl_c_used",
        "ssl_c_err",
        "ssl_c_ca_err",
        "ssl_c_s_dn(CN)",
    ] {
        assert_eq!(eval(absent, &ctx), None, "{absent}");
    }
    // `redirect scheme https unless { ssl_fc }`: the ACL is false, the redirection applies.
    let set = crate::AclSet::new(crate::MapStore::new());
    let cond = crate::Condition::parse(&crate::testing::words("unless { ssl_fc }"), &set).unwrap();
    assert!(cond.eval(&ctx));
    // The SNI's ACL derivatives exist too, and find no name to match.
    for derived in [
        "if { ssl_fc_sni_end .example.com }",
        "if { ssl_fc_sni_reg ^www\\. }",
    ] {
        let cond = crate::Condition::parse(&crate::testing::words(derived), &set).unwrap();
        assert!(!cond.eval(&ctx), "{derived}");
    }
}

#[test]
fn uuid_is_a_version_4_uuid() {
    let ctx = TestCtx::request(GET);
    let Some(Sample::Str(text)) = eval("uuid", &ctx) else {
        panic!("no uuid");
    };
    let text = String::from_utf8(text.to_vec()).unwrap();
    let parts: Vec<&str> = text.split('-').collect();
    assert_eq!(
        parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
        [8, 4, 4, 4, 12],
        "{text}"
    );
    assert!(
        text.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
        "{text}"
    );
    assert!(parts[2].starts_with('4'), "version 4: {text}");
    assert!("89ab".contains(&parts[3][..1]), "variant 10: {text}");
    assert!(eval("uuid(4)", &ctx).is_some());
    assert!(parse_err("uuid(7)").contains("only 4"));
    // Every other bit comes from the random draws.
    assert_eq!(
        super::internal::uuid_v4(0, 0),
        "00000000-0000-4000-8000-000000000000"
    );
    assert_eq!(
        super::internal::uuid_v4(u64::MAX, u64::MAX),
        "ffffffff-ffff-4fff-bfff-ffffffffffff"
    );
}
