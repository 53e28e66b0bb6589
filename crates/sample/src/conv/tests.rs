//! Converter tests. Expected values marked "HAProxy" were printed by HAProxy 2.6 for the
//! same expression.

#![allow(clippy::unwrap_used)]

use std::borrow::Cow;

use crate::testing::{GET, TestCtx, eval, parse_err, s, text};
use crate::{Expr, MapStore, Sample};

fn t(expr: &str) -> Option<String> {
    text(expr, &TestCtx::new())
}

fn e(expr: &str) -> Option<Sample<'static>> {
    eval(expr, &TestCtx::new())
}

#[test]
fn case_and_length() {
    assert_eq!(t("str(AbC),lower").as_deref(), Some("abc"));
    assert_eq!(t("str(AbC),upper").as_deref(), Some("ABC"));
    assert_eq!(e("str(héllo),length"), Some(Sample::Int(6)));
    assert_eq!(e("str(),length"), Some(Sample::Int(0)));
    // HAProxy: int(12345) casts to "12345".
    assert_eq!(e("int(12345),length"), Some(Sample::Int(5)));
    assert_eq!(t("int(5),hex").as_deref(), Some("0000000000000005"));
}

#[test]
fn borrowed_data_stays_borrowed() {
    let ctx = TestCtx::request(GET);
    let maps = MapStore::new();
    for text in [
        "path",
        "path,lower",
        "path,field(2,/)",
        "path,bytes(1,6)",
        "req.hdr(host),word(1,.)",
        "path,ltrim(/),rtrim(g)",
        "query,param(y)",
    ] {
        let expr = Expr::parse(text, &maps).unwrap();
        match expr.eval(&ctx).unwrap() {
            Sample::Str(Cow::Borrowed(_)) | Sample::Bin(Cow::Borrowed(_)) => {}
            other => panic!("{text} copied its data: {other:?}"),
        }
    }
    let upper = Expr::parse("path,upper", &maps).unwrap();
    assert!(matches!(upper.eval(&ctx), Some(Sample::Str(Cow::Owned(_)))));
}

#[test]
fn bytes() {
    // HAProxy: bytes(1,3) of "012345" is "123", bytes(6) is empty.
    assert_eq!(t("str(012345),bytes(1,3)").as_deref(), Some("123"));
    assert_eq!(t("str(012345),bytes(0)").as_deref(), Some("012345"));
    assert_eq!(t("str(012345),bytes(4,10)").as_deref(), Some("45"));
    assert_eq!(t("str(012345),bytes(6)").as_deref(), Some(""));
    assert_eq!(t("str(012345),bytes(-1)").as_deref(), Some(""));
    assert_eq!(t("str(012345),bytes(1,-1)").as_deref(), Some(""));
    assert_eq!(t("str(012345),bytes(1,0)").as_deref(), Some(""));
    assert!(matches!(e("str(ab),bytes(0)"), Some(Sample::Bin(_))));
    let ctx = TestCtx::new()
        .var("txn.start", Sample::Int(2))
        .var("txn.len", s("2"));
    assert_eq!(
        text("str(012345),bytes(txn.start,txn.len)", &ctx).as_deref(),
        Some("23")
    );
    assert_eq!(text("str(012345),bytes(txn.none)", &ctx), None);
    assert_eq!(
        parse_err("str(x),bytes(a)"),
        "converter 'bytes' : failed to parse 'a' as type 'integer or variable' at position 1"
    );
}

#[test]
fn field_and_word() {
    // The manual's examples.
    let f = |args: &str| t(&format!("str(f1_f2_f3__f5),field({args})"));
    assert_eq!(f("4,_").as_deref(), Some(""));
    assert_eq!(f("5,_").as_deref(), Some("f5"));
    assert_eq!(f("2,_,0").as_deref(), Some("f2_f3__f5"));
    assert_eq!(f("2,_,2").as_deref(), Some("f2_f3"));
    assert_eq!(f("-2,_,3").as_deref(), Some("f2_f3_"));
    assert_eq!(f("-3,_,0").as_deref(), Some("f1_f2_f3"));
    assert_eq!(f("6,_"), None);
    assert_eq!(f("-6,_"), None);
    assert_eq!(f("4,_,9").as_deref(), Some("_f5"));
    let w = |args: &str| t(&format!("str(f1_f2_f3__f5),word({args})"));
    assert_eq!(w("4,_").as_deref(), Some("f5"));
    assert_eq!(w("5,_"), None);
    assert_eq!(w("2,_,0").as_deref(), Some("f2_f3__f5"));
    assert_eq!(w("3,_,2").as_deref(), Some("f3__f5"));
    assert_eq!(w("-2,_,3").as_deref(), Some("f1_f2_f3"));
    assert_eq!(w("-3,_,0").as_deref(), Some("f1_f2"));
    assert_eq!(t("str(/f1/f2/f3/f4),word(1,/)").as_deref(), Some("f1"));
    assert_eq!(t("str(/f1////f2/f3/f4),word(2,/)").as_deref(), Some("f2"));
    assert_eq!(t("str(a.b:c),field(3,.:)").as_deref(), Some("c"));
    assert_eq!(
        parse_err("str(x),field(0,_)"),
        "converter 'field' : Unexpected value 0 for index"
    );
    assert_eq!(
        parse_err("str(x),word(1,)"),
        "converter 'word' : empty delimiter list"
    );
    assert_eq!(
        parse_err("str(x),field(1)"),
        "converter 'field' : missing arguments (got 1/2)"
    );
}

#[test]
fn trims_params_reverse() {
    assert_eq!(t("str(--a-b--),ltrim(-)").as_deref(), Some("a-b--"));
    assert_eq!(t("str(--a-b--),rtrim(-)").as_deref(), Some("--a-b"));
    assert_eq!(t("str(----),rtrim(-)").as_deref(), Some(""));
    assert_eq!(t("str(a\\r\\nb),cut_crlf").as_deref(), Some("a"));
    assert_eq!(
        t("str(example.com),reverse").as_deref(),
        Some("moc.elpmaxe")
    );
    // A Host value's parts, in the manual's forms; the host in lower case, no port is 0.
    for (value, host, port) in [
        ("Example.COM:8080", "example.com", 8080),
        ("example.com", "example.com", 0),
        ("127.0.0.1:443", "127.0.0.1", 443),
        ("[::1]:80", "[::1]", 80),
        ("[::1]", "[::1]", 0),
        ("h:", "h", 0),
    ] {
        assert_eq!(t(&format!("str({value}),host_only")).as_deref(), Some(host));
        let port_only = e(&format!("str({value}),port_only"));
        assert_eq!(port_only, Some(Sample::Int(port)), "{value}");
    }
    assert_eq!(e("str(h:abc),port_only"), None);
    // The manual's param examples.
    assert_eq!(t("str(a=b&c=d&a=r),param(a)").as_deref(), Some("b"));
    assert_eq!(t("str(a&b=c),param(a)").as_deref(), Some(""));
    assert_eq!(t("str(a=&b&c=a),param(b)").as_deref(), Some(""));
    assert_eq!(t("str(a=1;b=2;c=4),param(b,;)").as_deref(), Some("2"));
    assert_eq!(t("str(a=1|b=2),param(b,0x7c)").as_deref(), Some("2"));
    assert_eq!(t("str(ab=1),param(a)"), None);
    assert_eq!(
        parse_err("str(x),param(a,xy)"),
        "converter 'param' : invalid delimiter 'xy' (one character or 0xHH)"
    );
}

#[test]
fn regsub() {
    // HAProxy: "/a//b/c" with regsub(/+,/,g) is "/a/b/c".
    assert_eq!(
        t("str(/a//b///c),regsub(/+,/,g)").as_deref(),
        Some("/a/b/c")
    );
    assert_eq!(
        t("str(/a//b///c),regsub(/+,/)").as_deref(),
        Some("/a//b///c")
    );
    assert_eq!(t("str(a//b),regsub(/+,_)").as_deref(), Some("a_b"));
    // HAProxy: regsub("(a|b)","<\1>",g) on "abab".
    assert_eq!(
        t(r#"str(abab),regsub("(a|b)","<\1>",g)"#).as_deref(),
        Some("<a><b><a><b>")
    );
    assert_eq!(
        t(r#"str(foo12),regsub("(foo|bar)([0-9]+)?","\2\1",i)"#).as_deref(),
        Some("12foo")
    );
    assert_eq!(t("str(AB),regsub(a,x,ig)").as_deref(), Some("xB"));
    assert_eq!(t("str(?;&a),regsub([?;&]*,'')").as_deref(), Some("a"));
    assert_eq!(t(r#"str(a.b),regsub("\.",'\x2d')"#).as_deref(), Some("a-b"));
    assert_eq!(
        parse_err("str(x),regsub(a,b,z)"),
        "converter 'regsub' : invalid regex flag 'z', only 'i' and 'g' are supported"
    );
    let err = parse_err("str(x),regsub('(a',b)");
    assert!(
        err.starts_with("converter 'regsub' : regex '(a' is invalid ("),
        "{err}"
    );
}

#[test]
fn iif_concat_add_item() {
    assert_eq!(t("bool(1),iif(https,http)").as_deref(), Some("https"));
    // HAProxy: "abc" casts to false, int(0) too.
    assert_eq!(t("str(abc),iif(y,n)").as_deref(), Some("n"));
    assert_eq!(t("int(0),iif(y,n)").as_deref(), Some("n"));
    let ctx = TestCtx::new()
        .var("sess.ip", s("1.2.3.4"))
        .var("txn.n", Sample::Int(7));
    let tc = |expr: &str| text(expr, &ctx);
    assert_eq!(
        tc("str(x),concat(<,sess.ip,>)").as_deref(),
        Some("x<1.2.3.4>")
    );
    assert_eq!(
        tc("str(),concat('addr=(',sess.ip),concat(',',txn.n,')')").as_deref(),
        Some("addr=(1.2.3.4,7)")
    );
    // HAProxy: a missing variable appends nothing.
    assert_eq!(tc("str(a),concat(b,txn.nope,c)").as_deref(), Some("abc"));
    assert_eq!(tc("str(a),concat").as_deref(), Some("a"));
    assert_eq!(tc("str(),add_item(\",\",txn.nope,x)").as_deref(), Some("x"));
    assert_eq!(
        tc("str(abc),add_item(\",\",txn.nope,x)").as_deref(),
        Some("abc,x")
    );
    assert_eq!(
        tc("str(abc),add_item(\",\",txn.n)").as_deref(),
        Some("abc,7")
    );
    assert_eq!(
        tc("str(abc),add_item(\",\",txn.nope,)").as_deref(),
        Some("abc")
    );
    assert_eq!(
        parse_err("str(x),concat(a,b)"),
        "converter 'concat' : invalid variable name 'b' at position 2 (expected proc., sess., txn., req., res. or check. followed by a name)"
    );
    assert_eq!(
        parse_err("str(x),add_item(-)"),
        "converter 'add_item' : missing arguments (got 1/2)"
    );
    assert_eq!(
        parse_err("str(x),add_item(-,,)"),
        "converter 'add_item' : a variable or a suffix is required after the delimiter"
    );
}

#[test]
fn comparisons_with_variables() {
    let ctx = TestCtx::new()
        .var("txn.host", s("b.example"))
        .var("txn.token", s("secret"))
        .var("txn.digest", Sample::Bin(Cow::Owned(b"a\0b".to_vec())));
    let tc = |expr: &str| eval(expr, &ctx);
    // Binary data is compared whole, NUL bytes included, as HAProxy reads both sides.
    assert_eq!(
        tc("bin(610062),secure_memcmp(txn.digest)"),
        Some(Sample::Bool(true))
    );
    assert_eq!(
        tc("bin(610063),secure_memcmp(txn.digest)"),
        Some(Sample::Bool(false))
    );
    assert_eq!(tc("str(b.example),strcmp(txn.host)"), Some(Sample::Int(0)));
    assert_eq!(tc("str(a.example),strcmp(txn.host)"), Some(Sample::Int(-1)));
    assert_eq!(
        tc("str(b.example.org),strcmp(txn.host)"),
        Some(Sample::Int(1))
    );
    assert_eq!(tc("str(x),strcmp(txn.none)"), None);
    assert_eq!(
        tc("str(secret),secure_memcmp(txn.token)"),
        Some(Sample::Bool(true))
    );
    assert_eq!(
        tc("str(secreT),secure_memcmp(txn.token)"),
        Some(Sample::Bool(false))
    );
    assert_eq!(
        tc("str(secrets),secure_memcmp(txn.token)"),
        Some(Sample::Bool(false))
    );
}

#[test]
fn debug_passes_through() {
    assert_eq!(e("int(3),debug"), Some(Sample::Int(3)));
    assert_eq!(e("int(3),debug(x,stderr),add(1)"), Some(Sample::Int(4)));
    let expr = Expr::parse("src,debug", &MapStore::new()).unwrap();
    assert_eq!(expr.out_type(), crate::SampleType::Ip);
}

#[test]
fn encodings() {
    // HAProxy values.
    assert_eq!(t("str(hello),base64").as_deref(), Some("aGVsbG8="));
    assert_eq!(t("str(he?>llo),ub64enc").as_deref(), Some("aGU_Pmxsbw"));
    // Binary input, NUL bytes included (this digest's second byte is one), as `base64`.
    assert_eq!(
        e("str(abc),digest(sha384),ub64enc,length"),
        Some(Sample::Int(64))
    );
    assert_eq!(t("str(hello),hex").as_deref(), Some("68656C6C6F"));
    assert_eq!(t("str(aGVsbG8=),b64dec").as_deref(), Some("hello"));
    assert_eq!(t("str(aGU_Pmxsbw),ub64dec").as_deref(), Some("he?>llo"));
    assert_eq!(t("str(aGVsbG8),b64dec"), None);
    assert_eq!(t("str(a),base64").as_deref(), Some("YQ=="));
    assert_eq!(t("str(ab),base64").as_deref(), Some("YWI="));
    assert_eq!(t("str(),base64").as_deref(), Some(""));
    assert_eq!(t("str(YQ==),b64dec").as_deref(), Some("a"));
    assert_eq!(t("str(YWI),ub64dec").as_deref(), Some("ab"));
    assert_eq!(t("str(Y),ub64dec"), None);
    assert_eq!(t("str(Y!==),b64dec"), None);
    assert!(matches!(e("str(YQ==),b64dec"), Some(Sample::Bin(_))));
    assert_eq!(e("str(1F),hex2i"), Some(Sample::Int(31)));
    assert_eq!(e("str(zz),hex2i"), Some(Sample::Int(0)));
    // The manual's be2dec/le2dec/be2hex examples.
    assert_eq!(
        t("bin(01020304050607),be2dec(:,2)").as_deref(),
        Some("258:772:1286:7")
    );
    assert_eq!(
        t("bin(01020304050607),be2dec(-,2,1)").as_deref(),
        Some("258-772-1286")
    );
    assert_eq!(
        t("bin(01020304050607),be2dec(,2,1)").as_deref(),
        Some("2587721286")
    );
    assert_eq!(t("bin(7f000001),be2dec(.,1)").as_deref(), Some("127.0.0.1"));
    // The manual prints 513:1284:2055:7, which no reading of these bytes gives; each pair
    // read little-endian is 0x0201, 0x0403, 0x0605, then 0x07.
    assert_eq!(
        t("bin(01020304050607),le2dec(:,2)").as_deref(),
        Some("513:1027:1541:7")
    );
    assert_eq!(t("bin(7f000001),le2dec(.,1)").as_deref(), Some("127.0.0.1"));
    assert_eq!(
        t("bin(01020304050607),be2hex").as_deref(),
        Some("01020304050607")
    );
    assert_eq!(
        t("bin(01020304050607),be2hex(:,2)").as_deref(),
        Some("0102:0304:0506:07")
    );
    assert_eq!(
        t("bin(01020304050607),be2hex(--,2,1)").as_deref(),
        Some("0102--0304--0506")
    );
    assert_eq!(
        t("bin(0102030405060708),be2hex(,3,1)").as_deref(),
        Some("010203040506")
    );
    assert_eq!(t("str(abc),be2hex(:,1)").as_deref(), Some("61:62:63"));
    assert_eq!(
        parse_err("bin(01),be2hex(:)"),
        "converter 'be2hex' : chunk_size needs to be positive (0)"
    );
    assert_eq!(
        parse_err("bin(01),be2dec(:,9)"),
        "converter 'be2dec' : chunk_size out of range (9, expected 1 to 8)"
    );
}

#[test]
fn json() {
    // HAProxy: str(a\"b/c\\d),json gives a\"b\/c\\d; non-ASCII bytes are \u00XX in ascii.
    assert_eq!(
        t(r#"str(a\"b/c\\d),json"#).as_deref(),
        Some(r#"a\"b\/c\\d"#)
    );
    assert_eq!(t("str(é),json").as_deref(), Some(r"\u00c3\u00a9"));
    assert_eq!(t("str(é),json(utf8)").as_deref(), Some(r"\u00e9"));
    assert_eq!(t("str(a\\tb\\n),json").as_deref(), Some(r"a\tb\n"));
    assert_eq!(t("bin(017f),json").as_deref(), Some(r"\u0001\u007f"));
    // An invalid sequence: fails in utf8, is dropped in utf8s; an overlong '/' (C0 AF)
    // passes in utf8p.
    assert_eq!(t("bin(61ff62),json(utf8)"), None);
    assert_eq!(t("bin(61ff62),json(utf8s)").as_deref(), Some("ab"));
    assert_eq!(t("bin(c0af),json(utf8)"), None);
    assert_eq!(t("bin(c0af),json(utf8p)").as_deref(), Some(r"\/"));
    assert_eq!(t("bin(c0af61ff),json(utf8ps)").as_deref(), Some(r"\/a"));
    // Beyond U+FFFF does not fit a \u escape.
    assert_eq!(t("bin(f09f9880),json(utf8)"), None);
    assert_eq!(t("bin(f09f988061),json(utf8s)").as_deref(), Some("a"));
    assert_eq!(
        parse_err("str(x),json(latin1)"),
        "converter 'json' : unexpected input code type 'latin1' (expected ascii, utf8, utf8s, utf8p or utf8ps)"
    );
}

#[test]
fn url_encoding() {
    // HAProxy values.
    assert_eq!(t("str(a+b%20c),url_dec").as_deref(), Some("a+b c"));
    assert_eq!(t("str(x?a+b%20c),url_dec").as_deref(), Some("x?a b c"));
    assert_eq!(t("str(a+b),url_dec(1)").as_deref(), Some("a b"));
    assert_eq!(t("str(%zz),url_dec"), None);
    assert_eq!(t("str(%4),url_dec"), None);
    assert_eq!(
        t("str(a b&c/d=e~f.g-h_i+j%k),url_enc").as_deref(),
        Some("a%20b%26c%2Fd%3De~f.g-h_i%2Bj%25k")
    );
    assert_eq!(
        t(r#"str("!*()@$;:[]{}|^`<>#?,"),url_enc"#).as_deref(),
        Some("%21%2A%28%29%40%24%3B%3A%5B%5D%7B%7D%7C%5E%60%3C%3E%23%3F%2C")
    );
    assert_eq!(t("str(é),url_enc(query)").as_deref(), Some("%C3%A9"));
    assert_eq!(
        parse_err("str(x),url_enc(path)"),
        "converter 'url_enc' : unsupported encoding type 'path' (only 'query')"
    );
}

#[test]
fn arithmetic() {
    // HAProxy values: "12abc" + 1 = 13, "-5" + 0 = -5, div by 0, mod by 0.
    assert_eq!(e("str(12abc),add(1)"), Some(Sample::Int(13)));
    assert_eq!(e("str(-5),add(0)"), Some(Sample::Int(-5)));
    assert_eq!(e("int(10),div(0)"), Some(Sample::Int(i64::MAX)));
    assert_eq!(e("int(10),mod(0)"), Some(Sample::Int(0)));
    assert_eq!(e("int(7),sub(10)"), Some(Sample::Int(-3)));
    assert_eq!(e("str(10),mul(3)"), Some(Sample::Int(30)));
    assert_eq!(e("int(-7),div(2)"), Some(Sample::Int(-3)));
    assert_eq!(e("int(-7),mod(2)"), Some(Sample::Int(-1)));
    assert_eq!(
        e("int(9223372036854775807),add(1)"),
        Some(Sample::Int(i64::MAX))
    );
    assert_eq!(
        e("int(-9223372036854775808),sub(1)"),
        Some(Sample::Int(i64::MIN))
    );
    assert_eq!(
        e("int(4611686018427387904),mul(-4)"),
        Some(Sample::Int(i64::MIN))
    );
    assert_eq!(
        e("int(-9223372036854775808),div(-1)"),
        Some(Sample::Int(i64::MAX))
    );
    assert_eq!(e("int(12),and(10)"), Some(Sample::Int(8)));
    assert_eq!(e("int(12),or(3)"), Some(Sample::Int(15)));
    assert_eq!(e("int(12),xor(10)"), Some(Sample::Int(6)));
    assert_eq!(e("int(5),neg"), Some(Sample::Int(-5)));
    // The opposite of the smallest integer saturates, as the other operators do.
    assert_eq!(
        e("int(-9223372036854775808),neg"),
        Some(Sample::Int(i64::MAX))
    );
    assert_eq!(e("int(0),cpl"), Some(Sample::Int(-1)));
    assert_eq!(e("int(2),bool"), Some(Sample::Bool(true)));
    assert_eq!(e("int(0),not"), Some(Sample::Bool(true)));
    assert_eq!(e("int(3),odd"), Some(Sample::Bool(true)));
    assert_eq!(e("int(3),even"), Some(Sample::Bool(false)));
    assert_eq!(e("int(-3),odd"), Some(Sample::Bool(true)));
    assert_eq!(e("src,bool"), Some(Sample::Bool(true)));
    let ctx = TestCtx::new().var("txn.n", Sample::Int(5));
    assert_eq!(eval("int(1),add(txn.n)", &ctx), Some(Sample::Int(6)));
    assert_eq!(eval("int(1),add(txn.none)", &ctx), None);
    assert_eq!(
        parse_err("int(1),add(x)"),
        "converter 'add' : failed to parse 'x' as type 'integer or variable' at position 1"
    );
}

#[test]
fn ipmask() {
    // HAProxy values.
    assert_eq!(t("str(1.2.3.4),ipmask(24)").as_deref(), Some("1.2.3.0"));
    assert_eq!(t("int(16909060),ipmask(32)").as_deref(), Some("1.2.3.4"));
    assert_eq!(t("int(-1),ipmask(24)").as_deref(), Some("255.255.255.0"));
    assert_eq!(
        t("str(1.2.3.4),ipmask(255.255.0.0)").as_deref(),
        Some("1.2.0.0")
    );
    assert_eq!(t("str(::1),ipmask(8,64)").as_deref(), Some("::"));
    assert_eq!(
        t("str(2001:db8:1:2::1),ipmask(8,ffff:ffff::)").as_deref(),
        Some("2001:db8::")
    );
    assert_eq!(t("str(::1),ipmask(8)"), None);
    assert_eq!(t("str(12),ipmask(8)"), None);
    assert_eq!(
        parse_err("src,ipmask(33)"),
        "converter 'ipmask' : failed to parse '33' as type 'IPv4 mask' at position 1"
    );
    assert_eq!(
        parse_err("src,ipmask(8,x)"),
        "converter 'ipmask' : failed to parse 'x' as type 'IPv6 mask' at position 2"
    );
}

#[test]
fn hashes() {
    // HAProxy values for "hello".
    assert_eq!(e("str(hello),crc32"), Some(Sample::Int(907_060_870)));
    assert_eq!(e("str(hello),crc32(1)"), Some(Sample::Int(3_902_247_103)));
    assert_eq!(e("str(hello),crc32c"), Some(Sample::Int(2_591_144_780)));
    assert_eq!(e("str(hello),djb2"), Some(Sample::Int(261_238_937)));
    assert_eq!(e("str(hello),djb2(1)"), Some(Sample::Int(1_119_739_105)));
    assert_eq!(e("str(hello),sdbm"), Some(Sample::Int(684_824_882)));
    assert_eq!(e("str(hello),wt6"), Some(Sample::Int(3_538_347_703)));
    assert_eq!(e("str(hello),xxh32"), Some(Sample::Int(4_211_111_929)));
    assert_eq!(e("str(x),xxh32(1)"), Some(Sample::Int(2_981_377_576)));
    assert_eq!(
        e("str(hello),xxh64"),
        Some(Sample::Int(2_794_345_569_481_354_659))
    );
    assert_eq!(
        e("str(hello),xxh3"),
        Some(Sample::Int(-7_685_981_735_718_036_227))
    );
    assert_eq!(
        t("str(hello),sha1,hex").as_deref(),
        Some("AAF4C61DDCC5E8A2DABEDE0F3B482CD9AEA9434D")
    );
    assert_eq!(
        t("str(abc),sha2,hex").as_deref(),
        Some("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD")
    );
    assert_eq!(
        t("str(abc),sha2(224),hex").as_deref(),
        Some("23097D223405D8228642A477BDA255B32AADBCE4BDA0B3F7E36C9DA7")
    );
    assert_eq!(e("str(abc),sha2(512),length"), Some(Sample::Int(64)));
    assert_eq!(
        e("str(abc),digest(sha384),hex,length"),
        Some(Sample::Int(96))
    );
    // `length` reads a string, and a string made of binary data ends at its first NUL
    // byte, as in HAProxy 2.6: this digest's second byte is one.
    assert_eq!(e("str(abc),digest(sha384),length"), Some(Sample::Int(1)));
    // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
    assert_eq!(
        t("str(what do ya want for nothing?),hmac(sha256,SmVmZQ==),hex").as_deref(),
        Some("5BDCC146BF60754E6A042426089575C75A003F089D2739839DEC58B964EC3843")
    );
    let ctx = TestCtx::new().var("txn.key", s("SmVmZQ=="));
    assert_eq!(
        text(
            "str(what do ya want for nothing?),hmac(sha256,txn.key),hex",
            &ctx
        )
        .as_deref(),
        Some("5BDCC146BF60754E6A042426089575C75A003F089D2739839DEC58B964EC3843")
    );
    assert_eq!(
        parse_err("str(x),sha2(100)"),
        "converter 'sha2' : unsupported number of bits: '100' (224, 256, 384 or 512)"
    );
    assert_eq!(
        parse_err("str(x),hmac(md5,SmVmZQ==)"),
        "converter 'hmac' : unsupported digest algorithm 'md5' (Sluice has sha1, sha224, sha256, sha384 and sha512)"
    );
    assert_eq!(
        parse_err("str(x),hmac(sha1,!!)"),
        "converter 'hmac' : failed to parse '!!' as type 'base64 key or variable' at position 2"
    );
}

#[test]
fn type_checks() {
    assert_eq!(parse_err("str(x),nope"), "unknown converter 'nope'");
    assert_eq!(
        parse_err("bin(31),add(1)"),
        "converter 'add' cannot be applied to type 'binary' (it takes 'integer')"
    );
    assert_eq!(
        parse_err("bool(1),ipmask(8)"),
        "converter 'ipmask' cannot be applied to type 'boolean' (it takes 'ip')"
    );
    assert_eq!(
        parse_err("method,bool"),
        "converter 'bool' cannot be applied to type 'method' (it takes 'integer')"
    );
    assert_eq!(
        parse_err("str(x),lower(1)"),
        "converter 'lower' : too many arguments (got 1, at most 0)"
    );
    assert_eq!(parse_err("str(x),lower,"), "missing converter after ','");
    assert_eq!(t("meth(GET),hex").as_deref(), Some("474554"));
    // lower() is lower.
    assert_eq!(t("str(A),lower()").as_deref(), Some("a"));
}

#[test]
fn dates() {
    // 2024-01-02T03:04:05Z.
    assert_eq!(
        t("int(1704164645),utime(\"%d/%b/%Y:%H:%M:%S %z %Z\")").as_deref(),
        Some("02/Jan/2024:03:04:05 +0000 GMT")
    );
    assert_eq!(
        t("int(1704164645),utime(%Y-%m-%dT%H:%M:%S,3600)").as_deref(),
        Some("2024-01-02T04:04:05")
    );
    let mut ctx = TestCtx::new();
    ctx.utc_offset = 2 * 3600;
    assert_eq!(
        text("int(1704164645),ltime(\"%H:%M %z %Z\")", &ctx).as_deref(),
        Some("05:04 +0200 +0200")
    );
    assert_eq!(t("int(1704164645),ltime(%H:%M)").as_deref(), Some("03:04"));
    assert_eq!(
        t("int(1704164645678),ms_utime(\"%H:%M:%S.%3N\",-1000)").as_deref(),
        Some("03:04:04.678")
    );
    assert_eq!(
        text("int(1704164645678901),us_ltime(%H:%M:%S.%6N)", &ctx).as_deref(),
        Some("05:04:05.678901")
    );
    assert_eq!(
        t("int(-1),ms_utime(%F %T.%3N)").as_deref(),
        Some("1969-12-31 23:59:59.999")
    );
    assert_eq!(
        t("int(784887151),http_date").as_deref(),
        Some("Tue, 15 Nov 1994 08:12:31 GMT")
    );
    assert_eq!(
        t("int(784887151000),http_date(1000,ms)").as_deref(),
        Some("Tue, 15 Nov 1994 08:12:32 GMT")
    );
    assert_eq!(
        t("int(-1),http_date").as_deref(),
        Some("Wed, 31 Dec 1969 23:59:59 GMT")
    );
    assert_eq!(
        parse_err("int(1),http_date(0,h)"),
        "converter 'http_date' : invalid time unit 'h' (expected 's', 'ms' or 'us')"
    );
    assert_eq!(
        parse_err("int(1),utime"),
        "converter 'utime' : missing arguments (got 0/1)"
    );
}

fn jq(doc: &str, query: &str) -> Option<Sample<'static>> {
    let mut ctx = TestCtx::new();
    ctx.body = Some(doc.as_bytes().to_vec());
    eval(&format!("req.body,json_query({query})"), &ctx)
}

#[test]
fn json_query() {
    let doc = r#"{ "integer": 4, "float": 1.5, "big": 123456789, "tiny": 0.00001,
        "my.key": "myvalue", "boolean-false": false, "t": true, "nothing": null,
        "esc": "a\"b\\c\u00e9\ud83d\ude00\n", "obj": {"a": [10, {"b": "deep"}, "x]"]},
        "roles": ["manage-account", "view-profile"], "empty": [], "neg": -2.7 }"#;
    assert_eq!(jq(doc, "'$.integer','int'"), Some(Sample::Int(4)));
    assert_eq!(jq(doc, "'$.integer'"), Some(s("4")));
    assert_eq!(jq(doc, "'$.float'"), Some(s("1.5")));
    assert_eq!(jq(doc, "'$.big'"), Some(s("1.23457e+08")));
    assert_eq!(jq(doc, "'$.tiny'"), Some(s("1e-05")));
    assert_eq!(jq(doc, "'$.neg',int"), Some(Sample::Int(-2)));
    assert_eq!(jq(doc, "'$.my\\\\.key'"), Some(s("myvalue")));
    assert_eq!(jq(doc, "\"$['my.key']\""), Some(s("myvalue")));
    assert_eq!(jq(doc, "'$.boolean-false'"), Some(Sample::Bool(false)));
    assert_eq!(jq(doc, "'$.t'"), Some(Sample::Bool(true)));
    assert_eq!(jq(doc, "'$.esc'"), Some(s("a\"b\\cé😀\n")));
    assert_eq!(jq(doc, "'$.obj.a[0]',int"), Some(Sample::Int(10)));
    assert_eq!(jq(doc, "'$.obj.a[1].b'"), Some(s("deep")));
    assert_eq!(jq(doc, "'$.obj.a[2]'"), Some(s("x]")));
    assert_eq!(
        jq(doc, "'$.roles'"),
        Some(s(r#"["manage-account", "view-profile"]"#))
    );
    assert_eq!(jq(doc, "'$.roles[1]'"), Some(s("view-profile")));
    // Missing, out of range, null, objects, type mismatches: no sample.
    for query in [
        "'$.nope'",
        "'$.roles[2]'",
        "'$.empty[0]'",
        "'$.nothing'",
        "'$.obj'",
        "'$.esc',int",
        "'$.integer.x'",
        "'$.roles.x'",
    ] {
        assert_eq!(jq(doc, query), None, "{query}");
    }
    assert_eq!(
        parse_err("str(x),json_query(a.b)"),
        "converter 'json_query' : invalid json path 'a.b'"
    );
    assert_eq!(
        parse_err("str(x),json_query($.a,float)"),
        "converter 'json_query' : invalid output type 'float' (expected 'int' or 'string')"
    );
    assert_eq!(
        parse_err("str(x),json_query($[x])"),
        "converter 'json_query' : invalid json path '$[x]'"
    );
}

#[test]
fn json_query_survives_garbage() {
    let doc = br#"{"a":[1,{"b":"c"}],"d":"\u00e9","e":[[[[]]]]}"#;
    // Every prefix, and deep nesting, must fail quietly or answer.
    for n in 0..=doc.len() {
        let text = String::from_utf8_lossy(&doc[..n]).into_owned();
        for q in ["'$.a[1].b'", "'$.d'", "'$.e'", "'$.a[0]',int"] {
            let _ = jq(&text, q);
        }
    }
    let deep = "[".repeat(100_000);
    assert_eq!(jq(&deep, "'$[0]'"), None);
    assert_eq!(jq("{\"a\":\"\\ud800\"}", "'$.a'"), None);
    assert_eq!(jq("{\"a\":1e999}", "'$.a',int"), None);
}

#[test]
fn set_var_converter() {
    let ctx = TestCtx::new().var("txn.old", Sample::Int(5));
    assert_eq!(
        text("str(abc),set-var(txn.x),upper", &ctx).as_deref(),
        Some("ABC")
    );
    assert_eq!(eval("int(7),set-var(txn.n)", &ctx), Some(Sample::Int(7)));
    // Conditions: the store is skipped, the sample still flows.
    assert_eq!(
        text("str(),set-var(txn.e,ifnotempty)", &ctx).as_deref(),
        Some("")
    );
    eval("int(9),set-var(txn.old,ifexists,iflt)", &ctx);
    eval("int(1),set-var(txn.old,iflt)", &ctx);
    eval("int(2),set-var(txn.new,ifnotexists,ifgt)", &ctx);
    eval("int(3),set-var(txn.new,ifexists)", &ctx);
    let stored: Vec<(String, Sample<'static>)> = ctx.stored.borrow().clone();
    assert_eq!(
        stored,
        [
            ("txn.x".to_string(), s("abc")),
            ("txn.n".to_string(), Sample::Int(7)),
            ("txn.old".to_string(), Sample::Int(9)),
            ("txn.new".to_string(), Sample::Int(2)),
        ]
    );
    // The output type is the input's.
    let expr = Expr::parse("int(1),set-var(txn.a)", &MapStore::new()).unwrap();
    assert_eq!(expr.out_type(), crate::SampleType::Int);
    assert_eq!(
        parse_err("str(x),set-var(x)"),
        "converter 'set-var' : invalid variable name 'x' at position 1 (expected proc., sess., txn., req., res. or check. followed by a name)"
    );
    assert_eq!(
        parse_err("str(x),set-var(txn.a,ifbig)"),
        "converter 'set-var' : unknown condition 'ifbig' at position 2"
    );
}

/// The manual's examples of the RFC 7239 converters (HAProxy 2.8's; Debian's 2.6 lacks them).
#[test]
fn rfc7239_converters_read_forwarded_elements() {
    let ctx = TestCtx::request(
        "GET / HTTP/1.1\r\nHost: h\r\nForwarded: proto=https;host=\"haproxy.org:80\";for=\"127.0.0.1:9999\"\r\nX-Bad: proto=custom\r\n\r\n",
    );
    let text = |e: &str| crate::testing::text(e, &ctx);
    assert_eq!(
        text("req.hdr(forwarded),rfc7239_field(host)").as_deref(),
        Some("haproxy.org:80")
    );
    assert_eq!(
        text("req.hdr(forwarded),rfc7239_field(for)").as_deref(),
        Some("127.0.0.1:9999")
    );
    assert_eq!(
        text("req.hdr(forwarded),rfc7239_field(proto)").as_deref(),
        Some("https")
    );
    assert_eq!(text("req.hdr(forwarded),rfc7239_field(by)"), None);
    assert_eq!(
        eval("req.hdr(forwarded),rfc7239_is_valid", &ctx),
        Some(Sample::Bool(true))
    );
    assert_eq!(
        eval("req.hdr(x-bad),rfc7239_is_valid", &ctx),
        Some(Sample::Bool(false))
    );
    assert_eq!(
        eval("req.hdr(forwarded),rfc7239_field(for),rfc7239_n2nn", &ctx),
        Some(Sample::Ip("127.0.0.1".parse().unwrap()))
    );
    assert_eq!(
        eval("req.hdr(forwarded),rfc7239_field(for),rfc7239_n2np", &ctx),
        Some(Sample::Int(9999))
    );
    assert_eq!(
        e("str([ab:cd:ff:ff:ff:ff:ff:ff]:9998),rfc7239_n2nn"),
        Some(Sample::Ip("ab:cd:ff:ff:ff:ff:ff:ff".parse().unwrap()))
    );
    assert_eq!(t("str(_name:_port),rfc7239_n2nn").as_deref(), Some("_name"));
    assert_eq!(t("str(_name:_port),rfc7239_n2np").as_deref(), Some("_port"));
    assert_eq!(t("str(unknown),rfc7239_n2nn").as_deref(), Some("unknown"));
    // No port: no sample.
    assert_eq!(e("str(10.0.0.1),rfc7239_n2np"), None);
    assert!(parse_err("str(x),rfc7239_field(path)").contains("unknown field 'path'"));
}
