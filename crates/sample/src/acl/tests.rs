//! ACL tests: flags, matching methods, ACL-only keywords, files, predefined ACLs, errors.
//! Cases marked "HAProxy" gave the same verdict with HAProxy 2.6.

#![allow(clippy::unwrap_used)]

use crate::testing::{GET, TestCtx, acl_err, check, matches, temp_file, words};
use crate::{AclSet, MapStore, Stages};

fn get() -> TestCtx {
    TestCtx::request(GET)
}

#[test]
fn default_methods_follow_the_sample_type() {
    let ctx = get();
    assert!(matches("path /images/png/logo.png", &ctx));
    assert!(!matches("path /images", &ctx));
    assert!(matches("req.hdr_cnt(x-a) 4", &ctx));
    assert!(matches("src 192.168.0.0/16", &ctx));
    assert!(matches("always_true", &ctx));
    assert!(!matches("always_false", &ctx));
    assert!(matches("dst_port 8080", &ctx));
    assert!(matches("dst_port 1024:", &ctx));
    // A string without patterns never matches (HAProxy warns).
    assert!(!matches("str(x)", &ctx));
    assert_eq!(
        acl_err("a bin(00) x"),
        "matching method must be specified first (using '-m') when using a sample fetch of this type ('binary')"
    );
    assert!(matches("bin(0001) -m bin 0001", &ctx));
}

#[test]
fn explicit_methods_and_case() {
    let ctx = get();
    // HAProxy verdicts.
    assert!(matches("int(5) -m str 5", &ctx));
    assert!(matches("bool(1) -m str 1", &ctx));
    assert!(matches("src -m str 192.168.1.10", &ctx));
    assert!(matches("src -m beg 192.", &ctx));
    assert!(matches("str(1.2.3.4) -m ip 1.2.3.0/24", &ctx));
    assert!(!matches("str(abc) -m ip 0.0.0.0/0", &ctx));
    assert!(!matches("str(abc) -m bin 6162", &ctx));
    assert!(matches("str(AbC) -m sub -i b", &ctx));
    assert!(matches("str(AbC) -m reg -i ^a.c$", &ctx));
    assert!(matches("str(abc) -m beg -i AB", &ctx));
    assert!(matches("str(-i) -m str -- -i", &ctx));
    assert!(!matches("str(-i) -m str -i", &ctx));
    assert!(matches("str(abc) -m str abc -i ABC", &ctx));
    assert!(matches("str(a) -m str -i A", &ctx));
    assert!(matches("int(-3) -- -3", &ctx));
    assert!(matches("str(abc) -m len 3", &ctx));
    assert!(matches("int(12345) -m len 5", &ctx));
    assert!(!matches("str(abc) -m bool", &ctx));
    assert!(matches("str(1) -m bool", &ctx));
    assert!(matches("int(3) -m bool", &ctx));
    assert!(matches("src -m bool", &ctx));
    assert!(matches("str(abc) -m int 0", &ctx));
    assert!(matches("bool(0) -m int 0", &ctx));
    assert!(!matches("bool(0)", &ctx));
    assert!(matches("int(1) -m bin 0000000000000001", &ctx));
    // Values after the first one are values, even when they look like flags.
    assert!(matches("str(-m) -m str x -m", &ctx));
    // -u takes an id, -n is accepted.
    assert!(matches("str(x) -u 7 -n x", &ctx));
}

#[test]
fn found_and_missing_samples() {
    let ctx = get();
    assert!(matches("req.cook(a) -m found", &ctx));
    assert!(!matches("req.cook(zz) -m found", &ctx));
    assert!(matches("str() -m found", &ctx));
    assert!(matches("always_false -m found", &ctx));
    assert!(matches("always_true -m found ignored", &ctx));
    // A missing sample does not match, so its negation does (HAProxy).
    assert!(!matches("req.hdr_val(x-nope) lt 0", &ctx));
    assert!(check(&[], "if !{ req.hdr_val(x-nope) lt 0 }", &ctx));
    assert!(check(&[], "if !{ req.cook(SESSIONID) -m found }", &ctx));
}

#[test]
fn operators() {
    let ctx = get();
    assert!(matches("int(5) gt 3 10", &ctx));
    assert!(matches("int(5) gt 7 3", &ctx));
    assert!(matches("int(5) ge 5", &ctx));
    assert!(!matches("int(5) le 4", &ctx));
    assert!(matches("int(5) eq 6 5", &ctx));
    assert!(matches("int(5) lt 6", &ctx));
    assert!(matches("int(3) 1:2 3", &ctx));
    assert!(matches("req.hdr_cnt(host) eq 1", &ctx));
    assert!(matches("path_len gt 10", &ctx));
    assert!(!matches("path_len lt 10", &ctx));
    // Operators are values for string methods.
    assert!(matches("str(gt) gt", &ctx));
    assert_eq!(acl_err("a int(5) 1:x"), "'1:x' is not a valid number range");
    assert_eq!(acl_err("a str(x) -m int foo"), "'foo' is not a number");
}

#[test]
fn iterates_over_occurrences() {
    let ctx = get();
    // HAProxy: hdr(x-a) tests every value; an explicit occurrence only that one.
    assert!(matches("hdr(x-a) a", &ctx));
    assert!(matches("hdr(x-a) e", &ctx));
    assert!(!matches("hdr(x-a,1) b", &ctx));
    assert!(matches("req.cook(a) 1", &ctx));
    assert!(matches("req.cook(a) 3", &ctx));
    assert!(matches("urlp 2", &ctx));
    assert!(matches("req.fhdr(x-a) e", &ctx));
    assert!(!matches("req.fhdr(x-a) a", &ctx));
    assert!(matches("hdr(x-a),upper -m str \"B,C\"", &ctx));
}

#[test]
fn acl_only_keywords() {
    let ctx = get();
    // HAProxy verdicts on "/images/png/logo.png?x=1&y=2".
    assert!(matches("path_beg /images/ /static/", &ctx));
    assert!(matches("path_end .png .jpg", &ctx));
    assert!(matches("path_sub /png/", &ctx));
    assert!(matches("path_reg ^/images/[a-z]+/", &ctx));
    assert!(matches("path_dir png", &ctx));
    assert!(matches("path_dom png", &ctx));
    assert!(matches("path_len 20", &ctx));
    assert!(matches("url_beg /images", &ctx));
    assert!(matches("url_end y=2", &ctx));
    assert!(matches("url_dom x=1&y=2", &ctx));
    assert!(matches("url_dom logo", &ctx));
    // '&' is no domain delimiter.
    assert!(!matches("url_dom x=1", &ctx));
    assert!(matches("url_sub ?x=", &ctx));
    assert!(matches("url_len 28", &ctx));
    assert!(matches("url_reg \\?x=1", &ctx));
    assert!(matches("url_dir logo.png", &ctx));
    assert!(matches("base_beg www.example.com/images", &ctx));
    assert!(matches("base_end .png", &ctx));
    assert!(matches("base_dom example", &ctx));
    assert!(matches("base www.example.com/images/png/logo.png", &ctx));
    assert!(matches("hdr_beg(host) -i WWW.", &ctx));
    assert!(matches("hdr_end(host) .com", &ctx));
    assert!(matches("hdr_sub(user-agent) url", &ctx));
    assert!(matches("hdr_reg(host) ^www\\.", &ctx));
    assert!(matches("hdr_dom(host) example", &ctx));
    assert!(matches("hdr_dir(x-a) e", &ctx));
    assert!(matches("hdr_len(host) 15", &ctx));
    assert!(matches("hdr_val(content-length) 0", &ctx));
    assert!(matches("req.hdr_beg(host) www", &ctx));
    assert!(matches("urlp_beg(x) 1", &ctx));
    assert!(matches("url_param_end(y) 2", &ctx));
    assert!(matches("cook_beg(c) 4", &ctx));
    assert!(matches("req.cook_len(b) 1", &ctx));
    assert!(matches("method GET", &ctx));
    assert!(!matches("method POST", &ctx));
    assert!(!matches("method get", &ctx));
    assert!(!matches("method -i get", &ctx));
    assert!(matches("req.ver 1.1", &ctx));
    assert!(matches("req_ver 1.1", &ctx));
    // The manual's equivalent forms.
    for acl in [
        "hdr_beg(host) www.",
        "hdr_beg(host) -m beg www.",
        "hdr_dom(host) -m beg www.",
        "hdr(host) -m beg www.",
    ] {
        assert!(matches(acl, &ctx), "{acl}");
    }
    // With a converter, the output type decides (the suffix is ignored).
    assert!(!matches("path_beg,lower /images/", &ctx));
    assert!(matches("path_beg,lower /images/png/logo.png", &ctx));
    assert!(matches("path_len,length 20", &ctx));
    // Response side.
    let res = get().response("HTTP/1.1 200 OK\r\nSet-Cookie: sid=abc\r\nServer: nginx/1.2\r\n\r\n");
    assert!(matches("res.hdr_beg(server) nginx", &res));
    assert!(matches("shdr_sub(server) /1.", &res));
    assert!(matches("res.cook_beg(sid) ab", &res));
    assert!(matches("status 200:299", &res));
    assert!(matches("res.ver 1.1", &res));
    assert!(matches("resp_ver 1.1", &res));
    // Not ACL-only keywords.
    assert_eq!(
        acl_err("a query_beg x"),
        "unknown fetch method 'query_beg' in ACL expression 'query_beg'"
    );
    assert_eq!(
        acl_err("a path_foo x"),
        "unknown fetch method 'path_foo' in ACL expression 'path_foo'"
    );
}

#[test]
fn pattern_files() {
    let exact = temp_file(
        "acl_exact.lst",
        "# user agents\nCurl/8.0, (compatible)\n\n  Wget\n",
    );
    let generic = temp_file("acl_generic.lst", "CURL/8.0, (COMPATIBLE)\n");
    let nets = temp_file("acl_nets.lst", "10.0.0.0/8\n192.168.0.0/16\n");
    let map = temp_file("acl_map.lst", "/images  images-backend\n/static static\n");
    let bad = temp_file("acl_bad.lst", "10.0.0.0/8\nnot-an-address\n");
    let ctx = get();
    // The manual's example: -i applies to the files and values after it only.
    assert!(!check(
        &[&format!("ua req.fhdr(user-agent) -f {exact}")],
        "if ua",
        &ctx
    ));
    assert!(check(
        &[&format!(
            "ua req.fhdr(user-agent) -f {exact} -i -f {generic} test"
        )],
        "if ua",
        &ctx
    ));
    assert!(check(
        &[&format!("ua req.fhdr(user-agent) -i -f {exact}")],
        "if ua",
        &ctx
    ));
    assert!(check(&[&format!("lan src -f {nets}")], "if lan", &ctx));
    // -M reads the first column of a map file.
    assert!(check(&[&format!("m path_beg -M -f {map}")], "if m", &ctx));
    assert!(!check(&[&format!("m path -M -f {map}")], "if m", &ctx));
    assert!(check(
        &[&format!("m path -m beg -M -f {map}")],
        "if m",
        &ctx
    ));
    assert!(!check(&[&format!("m path -m beg -f {map}")], "if m", &ctx));
    assert_eq!(
        acl_err(&format!("lan src -f {bad}")),
        format!("'not-an-address' is not a valid IPv4 or IPv6 address at line 2 of file '{bad}'")
    );
    let err = acl_err("x path -f /nonexistent/sluice.lst");
    assert!(
        err.starts_with("failed to open pattern file </nonexistent/sluice.lst>: "),
        "{err}"
    );
    assert_eq!(
        acl_err(&format!("x path -f {exact} -m beg")),
        "'-m' must be placed before '-f'"
    );
    // Files are read once per store.
    let maps = MapStore::new();
    let mut set = AclSet::new(maps.clone());
    set.add(&words(&format!("a src -f {nets}"))).unwrap();
    set.add(&words(&format!("b src -f {nets} 127.0.0.1")))
        .unwrap();
    assert_eq!(maps.loaded_files(), [nets]);
    // Virtual files.
    maps.set_contents("mem.lst", "/images/png/logo.png\n");
    set.add(&words("c path -f mem.lst")).unwrap();
    assert!(
        crate::Condition::parse(&words("if c"), &set)
            .unwrap()
            .eval(&ctx)
    );
}

#[test]
fn errors() {
    // HAProxy's messages where it has one.
    assert_eq!(
        acl_err("a foo"),
        "unknown fetch method 'foo' in ACL expression 'foo'"
    );
    assert_eq!(acl_err("a"), "missing fetch method in ACL expression ''");
    assert_eq!(
        acl_err("a str(x) -m zz x"),
        "unknown matching method 'zz' when parsing ACL expression"
    );
    assert_eq!(
        acl_err("a str(x) -m"),
        "unknown matching method '' when parsing ACL expression"
    );
    assert_eq!(
        acl_err("a str(x) -m str -m beg x"),
        "'-m' may only be given once"
    );
    assert_eq!(
        acl_err("a int(3) -3"),
        "'-3' is not a valid ACL option. Please use '--' before any pattern beginning with a '-'."
    );
    assert!(acl_err("a str(x) -m reg (x").starts_with("regex '(x' is invalid ("));
    assert_eq!(
        acl_err("a src 1.2.3.4.5"),
        "'1.2.3.4.5' is not a valid IPv4 or IPv6 address"
    );
    assert_eq!(
        acl_err("a src foo.invalid"),
        "'foo.invalid' is not a valid IPv4 or IPv6 address"
    );
    assert_eq!(
        acl_err("a int(x) 1"),
        "fetch method 'int' : failed to parse 'x' as type 'integer' at position 1 in ACL expression 'int(x)'"
    );
    assert_eq!(
        acl_err("a str(x) -m bin zz"),
        "'zz' is not a valid hex string"
    );
    assert_eq!(
        acl_err("a bool(1) -m ip 1.2.3.4"),
        "matching method 'ip' cannot be used with a 'boolean' sample"
    );
    assert_eq!(
        acl_err("a method -m int 1"),
        "matching method 'int' cannot be used with a 'method' sample"
    );
    assert_eq!(
        acl_err("a!b always_true"),
        "ACL name 'a!b' contains an invalid character '!' (only letters, digits, '-', '_', '.' and ':')"
    );
    assert_eq!(
        AclSet::new(MapStore::new()).add(&[]).unwrap_err(),
        "missing ACL name"
    );
    assert_eq!(
        acl_err("a path,"),
        "missing converter after ',' in ACL expression 'path,'"
    );
    assert_eq!(
        acl_err("a path,nope x"),
        "unknown converter 'nope' in ACL expression 'path,nope'"
    );
}

#[test]
fn several_lines_and_late_additions() {
    let ctx = get();
    let mut set = AclSet::new(MapStore::new());
    set.add(&words("static path_beg /static")).unwrap();
    // A condition parsed now sees the line added afterwards, as in HAProxy.
    let cond = crate::Condition::parse(&words("if static"), &set).unwrap();
    set.add(&words("static path_end .png")).unwrap();
    assert!(cond.eval(&ctx));
    let acl = set.get("static").unwrap();
    assert_eq!(acl.name(), Some("static"));
    assert!(acl.eval(&ctx));
    assert_eq!(acl.stages(), crate::Source::RequestHeaders.stages());
    set.add(&words("mixed status 200")).unwrap();
    set.add(&words("mixed path /")).unwrap();
    let mixed = set.get("mixed").unwrap();
    assert!(mixed.stages().intersects(Stages::HTTP_RES));
    assert!(mixed.stages().intersects(Stages::HTTP_REQ));
    assert!(set.get("nope").is_none());
}

#[test]
fn predefined_acls() {
    let get = get();
    let post = TestCtx::request("POST http://h/x HTTP/1.0\r\nHost: h\r\nContent-Length: 5\r\n\r\n");
    let star = TestCtx::request("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    let mut local = TestCtx::new();
    local.src = Some("127.0.0.2:1".parse().unwrap());
    let mut local6 = TestCtx::new();
    local6.src = Some("[::1]:1".parse().unwrap());
    let is = |name: &str, ctx: &TestCtx| check(&[], &format!("if {name}"), ctx);
    assert!(is("TRUE", &get));
    assert!(!is("FALSE", &get));
    assert!(is("HTTP", &get));
    assert!(!is("HTTP", &local));
    assert!(is("HTTP_1.1", &get));
    assert!(!is("HTTP_1.0", &get));
    assert!(is("HTTP_1.0", &post));
    assert!(!is("HTTP_2.0", &get));
    assert!(!is("HTTP_3.0", &get));
    assert!(is("HTTP_CONTENT", &post));
    assert!(!is("HTTP_CONTENT", &get));
    assert!(is("HTTP_URL_ABS", &post));
    assert!(!is("HTTP_URL_ABS", &get));
    assert!(is("HTTP_URL_SLASH", &get));
    assert!(!is("HTTP_URL_SLASH", &post));
    assert!(is("HTTP_URL_STAR", &star));
    assert!(is("LOCALHOST", &local));
    assert!(is("LOCALHOST", &local6));
    assert!(!is("LOCALHOST", &get));
    assert!(is("METH_GET", &get));
    assert!(is("METH_POST", &post));
    assert!(!is("METH_GET", &post));
    assert!(is("METH_OPTIONS", &star));
    assert!(is("REQ_CONTENT", &get));
    assert!(!is("REQ_CONTENT", &local));
    assert!(is("WAIT_END", &get));
    let head = TestCtx::request("HEAD / HTTP/1.0\r\n\r\n");
    assert!(is("METH_GET", &head));
    assert!(is("METH_HEAD", &head));
    for (name, method) in [
        ("METH_CONNECT", "CONNECT h:1"),
        ("METH_DELETE", "DELETE /"),
        ("METH_PUT", "PUT /"),
        ("METH_TRACE", "TRACE /"),
    ] {
        let ctx = TestCtx::request(&format!("{method} HTTP/1.0\r\n\r\n"));
        assert!(is(name, &ctx), "{name}");
        assert!(!is("METH_GET", &ctx), "{name}");
    }
    // Every definition compiles, and a user ACL takes precedence.
    for name in [
        "FALSE",
        "HTTP",
        "HTTP_1.0",
        "HTTP_1.1",
        "HTTP_2.0",
        "HTTP_3.0",
        "HTTP_CONTENT",
        "HTTP_URL_ABS",
        "HTTP_URL_SLASH",
        "HTTP_URL_STAR",
        "LOCALHOST",
        "METH_CONNECT",
        "METH_DELETE",
        "METH_GET",
        "METH_HEAD",
        "METH_OPTIONS",
        "METH_POST",
        "METH_PUT",
        "METH_TRACE",
        "RDP_COOKIE",
        "REQ_CONTENT",
        "TRUE",
        "WAIT_END",
    ] {
        assert_eq!(AclSet::predefined(name).unwrap().name(), Some(name));
    }
    assert!(!check(&["TRUE always_false"], "if TRUE", &get));
    assert!(AclSet::predefined("RDP_COOKIES").is_none());
}
