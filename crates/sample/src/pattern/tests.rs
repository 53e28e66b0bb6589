//! Pattern tests: parsing every kind of value and each matching method.

#![allow(clippy::unwrap_used)]

use std::borrow::Cow;

use super::*;

fn list(method: MatchMethod, values: &[&str], icase: bool) -> PatternList {
    let mut list = PatternList::new(method);
    let mut op = IntOp::Eq;
    for v in values {
        if method.takes_integers()
            && let Some(o) = IntOp::from_name(v)
        {
            op = o;
            continue;
        }
        list.add(v, icase, op).unwrap();
    }
    list
}

fn m(method: MatchMethod, values: &[&str], icase: bool, sample: &str) -> bool {
    list(method, values, icase).matches(&Sample::str(sample.as_bytes()))
}

fn ip(method_values: &[&str], sample: &str) -> bool {
    list(MatchMethod::Ip, method_values, false).matches(&Sample::Ip(sample.parse().unwrap()))
}

fn int(values: &[&str], sample: i64) -> bool {
    list(MatchMethod::Int, values, false).matches(&Sample::Int(sample))
}

#[test]
fn method_names_and_defaults() {
    for name in [
        "found", "bool", "int", "ip", "bin", "len", "str", "sub", "reg", "beg", "end", "dir", "dom",
    ] {
        assert_eq!(MatchMethod::from_name(name).unwrap().name(), name);
    }
    assert_eq!(MatchMethod::from_name("meth"), None);
    assert_eq!(MatchMethod::from_name("zz"), None);
    assert_eq!(MatchMethod::default_for(SampleType::Bin), None);
    assert_eq!(
        MatchMethod::default_for(SampleType::Meth),
        Some(MatchMethod::Meth)
    );
    assert!(MatchMethod::Ip.accepts(SampleType::Str));
    assert!(!MatchMethod::Ip.accepts(SampleType::Bool));
    assert!(MatchMethod::Bin.accepts(SampleType::Int));
    assert!(!MatchMethod::Int.accepts(SampleType::Bin));
    assert!(MatchMethod::Found.accepts(SampleType::Bin));
}

#[test]
fn strings() {
    use MatchMethod::*;
    assert!(m(Str, &["abc", "x"], false, "abc"));
    assert!(!m(Str, &["abc"], false, "ABC"));
    assert!(m(Str, &["abc"], true, "ABC"));
    assert!(m(Beg, &["/img", "/static"], false, "/static/a.png"));
    assert!(!m(Beg, &["/IMG"], false, "/img/a"));
    assert!(m(Beg, &["/IMG"], true, "/img/a"));
    assert!(!m(Beg, &["/img/long"], false, "/img"));
    assert!(m(End, &[".png", ".jpg"], false, "/a.jpg"));
    assert!(m(End, &[".PNG"], true, "/a.png"));
    assert!(!m(End, &[".png"], false, "png"));
    assert!(m(Sub, &["mid"], false, "amidst"));
    assert!(m(Sub, &["MID"], true, "amidst"));
    assert!(!m(Sub, &["xyz"], false, "amidst"));
    assert!(m(Sub, &[""], false, "anything"));
    assert!(m(Bin, &["616263"], false, "abc"));
    assert!(!m(Bin, &["6162"], false, "abc"));
    assert!(m(Reg, &["^/a.c$"], false, "/abc"));
    assert!(!m(Reg, &["^/A"], false, "/abc"));
    assert!(m(Reg, &["^/A"], true, "/abc"));
    assert!(m(Len, &["3"], false, "abc"));
    assert!(m(Len, &["gt", "2"], false, "abc"));
    assert!(!m(Len, &["lt", "3"], false, "abc"));
}

#[test]
fn directories_and_domains() {
    use MatchMethod::*;
    // The manual's examples.
    let path = "/images/png/logo/32x32.png";
    for p in [
        "/images",
        "/images/png",
        "images/png",
        "/png/logo",
        "logo/32x32.png",
        "32x32.png",
    ] {
        assert!(m(Dir, &[p], false, path), "{p}");
    }
    // The manual says "png" does not match, but it is a slash-delimited part of this
    // path, and HAProxy 2.6 matches it (`path_dir png` on "/images/png/logo.png").
    assert!(m(Dir, &["png"], false, path));
    for p in ["32x32", "images/p", "ogo"] {
        assert!(!m(Dir, &[p], false, path), "{p}");
    }
    let url = "http://www1.dc-eu.example.com:80/blah";
    for p in [
        "http",
        "www1",
        ".www1",
        "dc-eu",
        "example",
        "com",
        "80",
        "dc-eu.example",
        "blah",
        ":www1:",
    ] {
        assert!(m(Dom, &[p], false, url), "{p}");
    }
    // The manual lists "dc-eu.example:80" as a match, but it does not occur in the URL and
    // HAProxy 2.6 does not match it either; delimiters are not interchangeable.
    for p in ["eu", "dc", "dc-eu.example:80", "example:com"] {
        assert!(!m(Dom, &[p], false, url), "{p}");
    }
    // HAProxy 2.6: '?' delimits directories, ':' does not; an empty pattern never matches.
    assert!(m(Dir, &["b"], false, "/a/b?c"));
    assert!(!m(Dir, &["a"], false, "a:b"));
    assert!(!m(Dir, &["/"], false, "abc"));
    assert!(m(Dom, &["b/y"], false, "x/a.b/y"));
    assert!(m(Dom, &["EXAMPLE"], true, url));
}

#[test]
fn integers() {
    assert!(int(&["5"], 5));
    assert!(!int(&["5"], 6));
    assert!(int(&["1:2", "3"], 3));
    assert!(int(&["1024:"], 65535));
    assert!(!int(&["1024:"], 80));
    assert!(int(&[":1023"], 80));
    assert!(int(&["10:20"], 10));
    assert!(int(&["10:20"], 20));
    assert!(!int(&["10:20"], 21));
    assert!(int(&["-3"], -3));
    assert!(int(&["gt", "3"], 4));
    assert!(!int(&["gt", "3"], 3));
    assert!(int(&["ge", "3"], 3));
    assert!(int(&["lt", "0"], -1));
    assert!(!int(&["lt", "0"], 0));
    assert!(int(&["le", "0"], 0));
    // The operator applies to every value after it (HAProxy 2.6: 5 gt 7 3 matches).
    assert!(int(&["gt", "7", "3"], 5));
    assert!(int(&["eq", "6", "5"], 5));
    assert!(int(&["gt", "7", "eq", "5"], 5));
    // Ranges ignore the operator.
    assert!(int(&["lt", "10:20"], 15));
    let mut l = PatternList::new(MatchMethod::Int);
    assert_eq!(
        l.add("foo", false, IntOp::Eq).unwrap_err(),
        "'foo' is not a number"
    );
    assert_eq!(
        l.add("1:x", false, IntOp::Eq).unwrap_err(),
        "'1:x' is not a valid number range"
    );
    assert_eq!(
        l.add("-5:-1", false, IntOp::Eq).unwrap_err(),
        "'-5:-1' is not a valid number range"
    );
    // Booleans and strings cast to integers.
    assert!(list(MatchMethod::Int, &["0"], false).matches(&Sample::Bool(false)));
    assert!(list(MatchMethod::Int, &["0"], false).matches(&Sample::str(b"abc")));
    assert!(list(MatchMethod::Int, &["10:20"], false).matches(&Sample::str(b"12")));
}

#[test]
fn addresses() {
    // The manual's abbreviated forms.
    assert_eq!(
        parse_ip_pattern("192.168.1").unwrap(),
        parse_ip_pattern("192.168.0.1").unwrap()
    );
    assert_eq!(
        parse_ip_pattern("10.12").unwrap(),
        parse_ip_pattern("10.0.0.12").unwrap()
    );
    assert_eq!(
        parse_ip_pattern("127.1/8").unwrap(),
        parse_ip_pattern("127.0.0.1/8").unwrap()
    );
    assert_eq!(
        parse_ip_pattern("10.12/8").unwrap(),
        parse_ip_pattern("10.0.0.0/255.0.0.0").unwrap()
    );
    assert!(ip(&["127.1"], "127.0.0.1"));
    assert!(ip(&["10.0.0.0/8", "192.168.0.0/16"], "192.168.4.4"));
    assert!(!ip(&["10.0.0.0/8"], "11.0.0.1"));
    assert!(ip(&["0.0.0.0/0"], "8.8.8.8"));
    assert!(ip(&["2001:db8::/32"], "2001:db8:1::5"));
    assert!(!ip(&["2001:db8::/32"], "2001:db9::5"));
    // IPv6 samples against IPv4 patterns, and the reverse (§7.1.6).
    assert!(ip(&["10.0.0.0/8"], "::ffff:10.0.0.1"));
    assert!(ip(&["10.0.0.0/8"], "::10.0.0.1"));
    assert!(ip(&["10.0.0.0/8"], "2002:0a00:0001::"));
    assert!(!ip(&["10.0.0.0/8"], "2001:0a00:0001::"));
    assert!(ip(&["::ffff:10.0.0.0/104"], "10.0.0.1"));
    assert!(!ip(&["::1"], "127.0.0.1"));
    // String samples are parsed; others are not addresses.
    assert!(list(MatchMethod::Ip, &["1.2.3.0/24"], false).matches(&Sample::str(b"1.2.3.4")));
    assert!(!list(MatchMethod::Ip, &["0.0.0.0/0"], false).matches(&Sample::str(b"abc")));
    for bad in [
        "1.2.3.4.5",
        "1.2.3.4/33",
        "::1/129",
        "::1/ffff::",
        "foo.invalid",
        "256.1.1.1",
        "1.2.3.256",
        "",
        "1.2.3.4/",
    ] {
        assert_eq!(
            parse_ip_pattern(bad).unwrap_err(),
            format!("'{bad}' is not a valid IPv4 or IPv6 address")
        );
    }
    assert_eq!(
        parse_ip_pattern("10.65535").unwrap(),
        parse_ip_pattern("10.0.255.255").unwrap()
    );
    assert!(parse_ip_pattern("10.16777216").is_err());
}

#[test]
fn methods() {
    let meth = |values: &[&str], icase: bool, method: &str| {
        list(MatchMethod::Meth, values, icase)
            .matches(&Sample::Meth(Cow::Borrowed(method.as_bytes())))
    };
    assert!(meth(&["GET", "HEAD"], false, "HEAD"));
    assert!(!meth(&["GET"], false, "POST"));
    // HAProxy 2.6: "get" is another method than GET, even with -i.
    assert!(!meth(&["get"], false, "GET"));
    assert!(!meth(&["get"], true, "GET"));
    assert!(meth(&["PURGE"], false, "PURGE"));
    assert!(meth(&["purge"], true, "PURGE"));
    assert!(!meth(&["purge"], false, "PURGE"));
    assert!(meth(&["get"], false, "get"));
}

#[test]
fn found_and_bool() {
    let found = list(MatchMethod::Found, &["ignored"], false);
    assert!(found.matches(&Sample::Bool(false)));
    assert!(found.is_empty());
    let b = list(MatchMethod::Bool, &[], false);
    assert!(b.matches(&Sample::Bool(true)));
    assert!(!b.matches(&Sample::Bool(false)));
    assert!(b.matches(&Sample::Int(3)));
    assert!(!b.matches(&Sample::Int(0)));
    assert!(b.matches(&Sample::str(b"1")));
    assert!(!b.matches(&Sample::str(b"abc")));
}

/// Random ACL pattern lists mixing case-sensitive and `-i` values: the indexed list answers
/// like matching every pattern in turn.
#[test]
fn indexed_lists_agree_with_matching_each_pattern() {
    let mut rng = crate::testing::Rng(0x0ac1_5eed_0000_0042);
    let mut hits = 0usize;
    for _ in 0..200 {
        for method in [
            MatchMethod::Ip,
            MatchMethod::Beg,
            MatchMethod::End,
            MatchMethod::Dom,
            MatchMethod::Dir,
        ] {
            let mut list = PatternList::new(method);
            let mut reference = Vec::new();
            for _ in 0..1 + rng.below(30) {
                let icase = rng.below(2) == 0;
                let text = match method {
                    MatchMethod::Ip => rng.network(),
                    _ => rng.word(0, 4),
                };
                list.add(&text, icase, IntOp::Eq).unwrap();
                reference.push(Pattern::parse(method, &text, icase, IntOp::Eq).unwrap());
            }
            assert!(
                list.others.is_empty(),
                "{method:?}: patterns left unindexed"
            );
            for _ in 0..50 {
                let ip;
                let word;
                let sample = if method == MatchMethod::Ip {
                    ip = rng.address();
                    Sample::Ip(ip)
                } else {
                    word = rng.word(0, 10);
                    Sample::str(word.as_bytes())
                };
                let expected = with_prepared(method, &sample, |s| {
                    reference.iter().any(|p| p.matches(method, s))
                });
                assert_eq!(list.matches(&sample), expected, "{method:?} {sample:?}");
                hits += usize::from(expected);
            }
        }
    }
    assert!(hits > 10_000, "only {hits} matches");
}
