//! Condition tests: precedence, negation, anonymous ACLs, `unless`, errors, stages.

#![allow(clippy::unwrap_used)]

use crate::testing::{GET, TestCtx, check, words};
use crate::{AclSet, Condition, MapStore, Stages};

const ACLS: [&str; 4] = [
    "t always_true",
    "f always_false",
    "t2 always_true",
    "f2 always_false",
];

fn c(condition: &str) -> bool {
    check(&ACLS, condition, &TestCtx::request(GET))
}

fn set() -> AclSet {
    let mut set = AclSet::new(MapStore::new());
    for line in ACLS {
        set.add(&words(line)).unwrap();
    }
    set
}

fn err(condition: &str) -> String {
    Condition::parse(&words(condition), &set()).unwrap_err()
}

#[test]
fn and_or_precedence() {
    assert!(c("if t t2"));
    assert!(!c("if t f"));
    assert!(c("if t or f"));
    assert!(c("if f or t"));
    assert!(!c("if f or f2"));
    // a b or c = (a and b) or c
    assert!(c("if f t or t"));
    assert!(!c("if t f or f2"));
    assert!(c("if t f or t t2"));
    assert!(!c("if f or t f2 or f"));
    assert!(c("if t or f f2 or f"));
    assert!(c("if f or t f or t t2"));
    // `||` and `OR` are `or`.
    assert!(c("if f || t"));
    assert!(c("if f OR t"));
    assert!(c("if f Or t t2"));
}

#[test]
fn negation() {
    assert!(c("if !f"));
    assert!(!c("if !t"));
    assert!(c("if !!t"));
    assert!(c("if ! f"));
    assert!(c("if t !f"));
    assert!(!c("if !t or !t2"));
    assert!(c("if !f or f"));
    // A lone '!' applies to the next term only.
    assert!(c("if ! f t"));
    assert!(c("if !{ always_false }"));
    assert!(c("if ! { always_false } !f"));
}

#[test]
fn unless() {
    assert!(c("unless f"));
    assert!(!c("unless t"));
    assert!(!c("unless f or t"));
    assert!(c("unless t f"));
    let cond = Condition::parse(&words("unless t"), &set()).unwrap();
    assert!(cond.is_unless());
    assert_eq!(cond.text(), "unless t");
}

#[test]
fn anonymous_acls() {
    let ctx = TestCtx::request(GET);
    assert!(check(&[], "if { path_beg /images }", &ctx));
    assert!(check(
        &[],
        "if { method GET HEAD } { hdr(host) -i WWW.EXAMPLE.COM }",
        &ctx
    ));
    assert!(!check(
        &[],
        "if { method POST } { hdr(host) -i WWW.EXAMPLE.COM }",
        &ctx
    ));
    assert!(check(&[], "if { method POST } || { path_end .png }", &ctx));
    // The manual's examples.
    assert!(!check(
        &[],
        "if METH_POST { req.hdr_cnt(Content-length) eq 0 }",
        &ctx
    ));
    assert!(check(
        &["missing_cl req.hdr_cnt(Content-length) eq 0"],
        "if METH_GET !missing_cl",
        &ctx
    ));
    assert!(check(
        &[],
        "if HTTP_URL_STAR !METH_OPTIONS || METH_GET HTTP_URL_SLASH",
        &ctx
    ));
    assert!(!check(
        &[],
        "unless METH_GET or METH_POST or METH_OPTIONS",
        &ctx
    ));
    let mut ctx2 = TestCtx::request(GET);
    ctx2.backend_stats.insert(
        (Some("dynamic".into()), crate::BackendStat::UsableServers),
        1,
    );
    ctx2.backend_stats.insert(
        (Some("static".into()), crate::BackendStat::UsableServers),
        3,
    );
    assert!(check(
        &[],
        "if { nbsrv(dynamic) lt 2 } || { nbsrv(static) lt 2 }",
        &ctx2
    ));
    assert!(check(
        &[
            "site_dead nbsrv(dynamic) lt 2",
            "site_dead nbsrv(static) lt 2"
        ],
        "if site_dead",
        &ctx2
    ));
    assert!(!check(
        &["site_dead nbsrv(other) lt 2"],
        "if site_dead",
        &ctx2
    ));
}

#[test]
fn manual_backend_selection() {
    let acls = [
        "url_static  path_beg         /static /images /img /css",
        "url_static  path_end         .gif .png .jpg .css .js",
        "host_www    hdr_beg(host) -i www",
        "host_static hdr_beg(host) -i img. video. download. ftp.",
    ];
    let www_png = TestCtx::request(GET);
    let www_page = TestCtx::request("GET /index.html HTTP/1.1\r\nHost: www.example.com\r\n\r\n");
    let img = TestCtx::request("GET /a HTTP/1.1\r\nHost: IMG.example.com\r\n\r\n");
    let static_if = "if host_static or host_www url_static";
    assert!(check(&acls, static_if, &www_png));
    assert!(!check(&acls, static_if, &www_page));
    assert!(check(&acls, static_if, &img));
    assert!(check(&acls, "if host_www", &www_page));
}

#[test]
fn errors() {
    assert_eq!(err("if nope"), "no such ACL : 'nope'");
    assert_eq!(err("if t !nope"), "no such ACL : 'nope'");
    assert_eq!(
        err("when t"),
        "expects 'if' or 'unless' followed by a condition, got 'when'"
    );
    assert_eq!(
        Condition::parse(&[], &set()).unwrap_err(),
        "expects 'if' or 'unless' followed by a condition"
    );
    assert_eq!(err("if"), "missing condition after 'if'");
    assert_eq!(err("unless !"), "missing condition after 'unless'");
    assert_eq!(err("if or t"), "missing ACL before 'or' in condition");
    assert_eq!(err("if t ||"), "missing ACL after 'or' in condition");
    assert_eq!(err("if t || || f"), "missing ACL before '||' in condition");
    assert_eq!(err("if { path /x"), "missing closing '}' in condition");
    assert_eq!(err("if { }"), "missing fetch method in ACL expression ''");
    assert_eq!(
        err("if { foo }"),
        "unknown fetch method 'foo' in ACL expression 'foo'"
    );
    assert_eq!(
        err("if { int(1) -x }"),
        "'-x' is not a valid ACL option. Please use '--' before any pattern beginning with a '-'."
    );
}

#[test]
fn stages_and_conflicts() {
    let mut set = set();
    set.add(&words("is_ok status 200")).unwrap();
    set.add(&words("is_png path_end .png")).unwrap();
    let parse = |text: &str| Condition::parse(&words(text), &set).unwrap();
    let confine = |text: &str, where_: Stages| parse(text).confine(where_, None);
    assert_eq!(
        confine("if is_ok", Stages::FE_HTTP_REQ).unwrap(),
        "acl 'is_ok' will never match because it only involves keywords that are incompatible with 'frontend http-request header rule'"
    );
    assert_eq!(
        confine("if t { status 200 }", Stages::FE_HTTP_REQ).unwrap(),
        "anonymous acl will never match because it uses keyword 'status' which is incompatible with 'frontend http-request header rule'"
    );
    // A `listen` section's response rules: the backend's run first, and name the place.
    assert_eq!(
        confine("if is_png", Stages::HTTP_RES).unwrap(),
        "acl 'is_png' will never match because it only involves keywords that are incompatible with 'backend http-response header rule'"
    );
    assert_eq!(
        parse("if { status 200 }")
            .confine(Stages::FE_TCP_REQ_CONTENT, Some("tcp-request content"))
            .unwrap(),
        "anonymous acl will never match in 'tcp-request content' because it uses keyword 'status' which is incompatible with 'frontend tcp-request content rule'"
    );
    assert_eq!(confine("if is_ok", Stages::HTTP_RES), None);
    assert_eq!(confine("if is_png t", Stages::HTTP_REQ), None);
    assert!(confine("if METH_GET", Stages::LOG).is_none());
    let both = parse("if is_png or is_ok");
    assert!(both.stages().intersects(Stages::HTTP_REQ));
    assert!(both.stages().intersects(Stages::HTTP_RES));
    assert!(!both.stages().intersects(Stages::TCP_REQ_CONN));
    assert_eq!(parse("if t").stages(), Stages::ALL);
}

#[test]
fn an_acl_out_of_reach_never_matches_and_its_negation_always_does() {
    let mut set = set();
    set.add(&words("is_png path_end .png")).unwrap();
    // The test context keeps the request for the response side, as the proxy does: what
    // confines the condition is the rule's stage, not what the context could answer.
    let ctx = TestCtx::request(GET).response("HTTP/1.1 200 OK\r\n\r\n");
    let confined = |text: &str| {
        let mut cond = Condition::parse(&words(text), &set).unwrap();
        assert!(cond.confine(Stages::HTTP_RES, None).is_some());
        cond
    };
    assert!(
        Condition::parse(&words("if is_png"), &set)
            .unwrap()
            .eval(&ctx)
    );
    assert!(!confined("if is_png").eval(&ctx));
    assert!(confined("if !is_png").eval(&ctx));
    assert!(confined("if is_png or t").eval(&ctx));
    assert!(!confined("if { status 200 } is_png").eval(&ctx));
    assert_eq!(confined("if is_png").decide(&ctx), Some(false));
    assert_eq!(confined("unless is_png").decide(&ctx), Some(true));
}
