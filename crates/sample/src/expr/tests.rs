//! Expression tests: compilation, output types, stage checks, map converters, robustness.

#![allow(clippy::unwrap_used)]

use crate::testing::{GET, TestCtx, eval, parse_err, temp_file, text};
use crate::{Expr, MapStore, Sample, SampleType, Source, Stages};

fn parse(text: &str) -> Expr {
    Expr::parse(text, &MapStore::new()).unwrap()
}

#[test]
fn output_types() {
    assert_eq!(parse("path").out_type(), SampleType::Str);
    assert_eq!(parse("path,length").out_type(), SampleType::Int);
    assert_eq!(parse("src").out_type(), SampleType::Ip);
    assert_eq!(parse("src,ipmask(24)").out_type(), SampleType::Ip);
    assert_eq!(parse("str(x),sha1").out_type(), SampleType::Bin);
    assert_eq!(parse("str(x),sha1,base64").out_type(), SampleType::Str);
    assert_eq!(parse("int(1),bool").out_type(), SampleType::Bool);
    assert_eq!(parse("method").out_type(), SampleType::Meth);
    let e = parse("req.hdr(host),lower");
    assert_eq!(e.text(), "req.hdr(host),lower");
    assert_eq!(e.fetch_name(), "req.hdr");
    assert!(e.has_converters());
    assert!(!parse("path").has_converters());
    assert_eq!(e.source(), Source::RequestHeaders);
}

#[test]
fn bare_hdr_reads_the_message_its_rule_handles() {
    let ctx = TestCtx::request("GET / HTTP/1.1\r\nHost: a\r\nX-Who: request\r\n\r\n")
        .response("HTTP/1.1 200 OK\r\nX-Who: response\r\n\r\n");
    let value = |stages: Stages| {
        let mut expr = parse("hdr(x-who)");
        expr.check_stages(stages).unwrap();
        match expr.eval(&ctx) {
            Some(Sample::Str(v)) => String::from_utf8_lossy(&v).into_owned(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(value(Stages::HTTP_REQ), "request");
    assert_eq!(value(Stages::HTTP_RES), "response");
    assert_eq!(value(Stages::FE_HTTP_RES | Stages::BE_HTTP_RES), "response");
    // The other `hdr_*` fetches stay the request's, as in HAProxy 2.6.
    assert!(
        parse("hdr_cnt(x-who)")
            .check_stages(Stages::HTTP_RES)
            .is_err()
    );
}

#[test]
fn stages() {
    let mut res = parse("res.hdr(x)");
    assert_eq!(
        res.check_stages(Stages::HTTP_REQ).unwrap_err(),
        "fetch method 'res.hdr' extracts information from 'HTTP response headers', none of which is available here"
    );
    assert!(res.check_stages(Stages::HTTP_RES).is_ok());
    assert!(res.check_stages(Stages::FE_HTTP_RES).is_ok());
    assert!(res.check_stages(Stages::LOG).is_err());
    let mut req = parse("req.hdr(host),lower");
    assert!(req.check_stages(Stages::FE_HTTP_REQ).is_ok());
    assert_eq!(
        req.check_stages(Stages::HTTP_RES).unwrap_err(),
        "fetch method 'req.hdr' extracts information from 'HTTP request headers', none of which is available here"
    );
    assert!(req.check_stages(Stages::TCP_REQ_CONN).is_err());
    assert!(parse("status").check_stages(Stages::LOG).is_ok());
    assert!(
        parse("method")
            .check_stages(Stages::LOG | Stages::HTTP_RES)
            .is_ok()
    );
    assert!(parse("src").check_stages(Stages::TCP_REQ_CONN).is_ok());
    assert!(parse("str(x)").check_stages(Stages::ALL).is_ok());
    assert_eq!(
        parse("be_name")
            .check_stages(Stages::FE_HTTP_REQ)
            .unwrap_err(),
        "fetch method 'be_name' extracts information from 'backend', none of which is available here"
    );
    // A listen section's http-request rules run at both checkpoints: one is enough.
    assert!(parse("be_name").check_stages(Stages::HTTP_REQ).is_ok());
    assert!(parse("srv_name").check_stages(Stages::HTTP_REQ).is_err());
    assert_eq!(parse("req.len").stages(), Source::RequestBuffer.stages());
}

#[test]
fn missing_samples() {
    let ctx = TestCtx::request(GET);
    assert_eq!(eval("req.hdr(nope),lower", &ctx), None);
    // A converter that fails makes the sample missing.
    assert_eq!(eval("req.hdr(host),ipmask(8)", &ctx), None);
    assert_eq!(eval("str(%zz),url_dec,lower", &ctx), None);
    assert_eq!(
        text("req.hdr(host),field(1,.),upper", &ctx).as_deref(),
        Some("WWW")
    );
}

#[test]
fn quoting_reaches_arguments() {
    let ctx = TestCtx::request(GET);
    assert_eq!(
        text(r#"path,regsub("(png|jpg)","x",g)"#, &ctx).as_deref(),
        Some("/images/x/logo.x")
    );
    assert_eq!(
        text(r#"str(a),concat(",)",,'x"y')"#, &ctx).as_deref(),
        Some("a,)x\"y")
    );
    // The first ')' closes the arguments, as §2.2 explains.
    assert_eq!(
        parse_err(r"path,regsub((a|b),x)"),
        "converter 'regsub' : missing arguments (got 1/2)"
    );
    assert_eq!(parse_err(" path"), "unknown fetch method ' path'");
    assert_eq!(parse_err("path, lower"), "unknown converter ' lower'");
}

#[test]
fn map_converters() {
    let site = temp_file(
        "expr_site.map",
        "# comment\n  www.example.com  site-a  \nexample.com site-b\n/static static\n",
    );
    let ips = temp_file("expr_ip.map", "10.0.0.0/8 net10\n10.1.0.0/16 net10-1\n");
    let re = temp_file("expr_re.map", "^/api/(v[0-9]+)/  api-\\1\n^/a  ax\n");
    let ints = temp_file("expr_int.map", "10:20 teen\n5 five\n7 seven\n");
    let nums = temp_file("expr_num.map", "a 1\nb 2\n");
    let ctx = TestCtx::new();
    let t = |e: String| text(&e, &ctx);
    // HAProxy 2.6 gives the same answers.
    assert_eq!(
        t(format!("str(www.example.com),map({site})")).as_deref(),
        Some("site-a")
    );
    assert_eq!(
        t(format!("str(www.example.com),map_beg({site})")).as_deref(),
        Some("site-a")
    );
    assert_eq!(
        t(format!("str(x.example.com),map_dom({site})")).as_deref(),
        Some("site-b")
    );
    assert_eq!(
        t(format!("str(/static/x),map_beg({site},def)")).as_deref(),
        Some("static")
    );
    assert_eq!(
        t(format!("str(nope),map({site},def)")).as_deref(),
        Some("def")
    );
    assert_eq!(t(format!("str(nope),map({site})")), None);
    assert_eq!(t(format!("str(WWW.example.com),map({site})")), None);
    assert_eq!(
        t(format!("str(/static/x),map_beg_key({site})")).as_deref(),
        Some("/static")
    );
    assert_eq!(
        t(format!("str(a.example.com),map_end({site})")).as_deref(),
        Some("site-b")
    );
    assert_eq!(
        t(format!("str(xx/static/yy),map_sub({site})")).as_deref(),
        Some("static")
    );
    assert_eq!(
        t(format!("str(/x/static),map_dir({site})")).as_deref(),
        Some("static")
    );
    assert_eq!(
        t(format!("str(10.1.2.3),map_ip({ips})")).as_deref(),
        Some("net10-1")
    );
    assert_eq!(
        t(format!("str(10.2.2.3),map_ip({ips})")).as_deref(),
        Some("net10")
    );
    assert_eq!(
        t(format!("src,map_ip({ips},none)")).as_deref(),
        Some("none")
    );
    assert_eq!(
        t(format!("str(/api/v2/x),map_regm({re})")).as_deref(),
        Some("api-v2")
    );
    assert_eq!(
        t(format!("str(/api/v2/x),map_reg({re})")).as_deref(),
        Some("api-\\1")
    );
    assert_eq!(t(format!("str(/a),map_reg({re})")).as_deref(), Some("ax"));
    assert_eq!(
        t(format!("int(15),map_int({ints})")).as_deref(),
        Some("teen")
    );
    assert_eq!(
        t(format!("int(5),map_int({ints})")).as_deref(),
        Some("five")
    );
    assert_eq!(
        t(format!("str(7),map_int({ints})")).as_deref(),
        Some("seven")
    );
    assert_eq!(
        eval(&format!("str(b),map_str_int({nums})"), &ctx),
        Some(Sample::Int(2))
    );
    assert_eq!(
        eval(&format!("str(z),map_str_int({nums},-1)"), &ctx),
        Some(Sample::Int(-1))
    );
    assert_eq!(
        parse_err(&format!("str(z),map_str_int({nums},x)")),
        "converter 'map_str_int' : default value 'x' is not a valid integer"
    );
    assert_eq!(
        parse_err(&format!("str(z),map_ip({site})")),
        format!(
            "converter 'map_ip' : 'www.example.com' is not a valid IPv4 or IPv6 address at line 2 of file '{site}'"
        )
    );
    assert_eq!(
        parse_err(&format!("str(z),map_str_ip({nums})")),
        format!(
            "converter 'map_str_ip' : '1' is not a valid IPv4 or IPv6 address at line 1 of file '{nums}'"
        )
    );
    assert_eq!(
        parse_err(&format!("str(z),map_beg_key({site},d)")),
        "converter 'map_beg_key' : a default value is not supported with the 'key' output"
    );
    assert_eq!(
        parse_err("str(z),map_foo(x)"),
        "unknown converter 'map_foo'"
    );
    assert_eq!(
        parse_err("str(z),map_regm_int(x)"),
        "unknown converter 'map_regm_int'"
    );
    assert_eq!(
        parse_err("str(z),map"),
        "converter 'map' : missing arguments (got 0/1)"
    );
    let err = parse_err("str(z),map(/nonexistent/sluice.map)");
    assert!(
        err.starts_with("converter 'map' : failed to open map file </nonexistent/sluice.map>"),
        "{err}"
    );
    assert_eq!(
        parse_err("bool(1),map_ip(x)"),
        "converter 'map_ip' cannot be applied to type 'boolean' (it takes 'ip')"
    );
}

#[test]
fn maps_are_loaded_once() {
    let path = temp_file("expr_once.map", "k v\n");
    let maps = MapStore::new();
    let a = Expr::parse(&format!("str(k),map({path})"), &maps).unwrap();
    std::fs::write(&path, "k changed\n").unwrap();
    let b = Expr::parse(&format!("str(k),map_beg({path})"), &maps).unwrap();
    let ctx = TestCtx::new();
    assert_eq!(a.eval(&ctx), Some(Sample::str(b"v")));
    assert_eq!(b.eval(&ctx), Some(Sample::str(b"v")));
    assert_eq!(maps.loaded_files(), [path]);
    // In-memory contents take the place of a file.
    maps.set_contents("virtual.map", "k mem\n");
    let c = Expr::parse("str(k),map(virtual.map)", &maps).unwrap();
    assert_eq!(c.eval(&ctx), Some(Sample::str(b"mem")));
}

#[test]
fn expressions_are_shareable() {
    fn send_sync<T: Send + Sync + Clone>() {}
    send_sync::<Expr>();
    send_sync::<crate::Condition>();
    send_sync::<crate::Acl>();
}

/// A small deterministic generator, so the robustness test needs no dependency.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

#[test]
fn no_input_panics() {
    const PIECES: [&str; 40] = [
        "path", "req.hdr", "(", ")", ",", "\"", "'", "\\", "x", "1", "-1", "0", "lower", "field",
        "word", "bytes", "regsub", "json", "url_dec", "b64dec", "ub64dec", "ipmask", "be2dec",
        "be2hex", "hex", "src", "str", "int", "urlp", "cook", "map_ip", "div", "mod", "concat",
        "txn.x", "_", "(a|", "%", "é", "utf8s",
    ];
    let mut rng = Lcg(42);
    let ctx = TestCtx::request(GET).var("txn.x", Sample::Int(0));
    let maps = MapStore::new();
    for _ in 0..20_000 {
        let len = 1 + rng.next() % 8;
        let text: String = (0..len)
            .map(|_| PIECES[(rng.next() % PIECES.len() as u64) as usize])
            .collect();
        if let Ok(expr) = Expr::parse(&text, &maps) {
            let _ = expr.eval(&ctx);
            expr.eval_each(&ctx, &mut |_| false);
        }
    }
    // Arbitrary bytes through the converters.
    for _ in 0..2_000 {
        let bytes: Vec<u8> = (0..rng.next() % 12).map(|_| rng.next() as u8).collect();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        for conv in [
            "json(utf8)",
            "json(utf8ps)",
            "b64dec",
            "ub64dec",
            "url_dec",
            "field(-2,a,0)",
            "word(2,\\x00)",
            "be2dec(:,3)",
            "lower",
            "hex2i",
            "param(a)",
        ] {
            let text = format!("bin({hex}),{conv}");
            if let Ok(expr) = Expr::parse(&text, &maps) {
                let _ = expr.eval(&ctx);
            }
        }
    }
}
