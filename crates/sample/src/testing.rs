//! A [`Context`] over a parsed request (and optionally a response) for the unit tests, and
//! shorthands to compile and evaluate expressions and conditions, and a seeded random
//! generator of words and networks for the property tests of the pattern indexes.

#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use sluice_http::{Limits, Parse, RequestHead, ResponseHead, parse_request, parse_response};

use crate::{
    AclSet, BackendStat, Condition, Context, Expr, LogFacts, MapStore, Sample, ServerStat,
};

/// A stream frozen at one point, answering every [`Context`] method from fields.
pub struct TestCtx {
    pub req_buf: Vec<u8>,
    pub req: Option<RequestHead>,
    pub res_buf: Vec<u8>,
    pub res: Option<ResponseHead>,
    pub src: Option<SocketAddr>,
    pub dst: Option<SocketAddr>,
    pub frontend: String,
    pub backend: Option<String>,
    pub server: Option<String>,
    pub env: HashMap<String, String>,
    pub now: SystemTime,
    pub random: u64,
    pub vars: HashMap<String, Sample<'static>>,
    pub backend_stats: HashMap<(Option<String>, BackendStat), i64>,
    pub server_stats: HashMap<(Option<String>, String, ServerStat), i64>,
    pub buffered: Option<usize>,
    pub inspection_ended: bool,
    pub utc_offset: i32,
    pub payload: Option<Vec<u8>>,
    pub res_payload: Option<Vec<u8>>,
    pub body: Option<Vec<u8>>,
    pub res_body: Option<Vec<u8>>,
    /// What `set_var` stored, in order.
    pub stored: std::cell::RefCell<Vec<(String, Sample<'static>)>>,
    pub facts: Option<Box<dyn LogFacts>>,
    /// The stick-table questions asked (`stick`, `table_lookup`), as debug text; each is
    /// answered with 7.
    pub stick_asked: std::cell::RefCell<Vec<String>>,
    /// What [`Context::proxy_credentials`] answers.
    pub proxy_credentials: bool,
}

impl Default for TestCtx {
    fn default() -> Self {
        Self::new()
    }
}

impl TestCtx {
    /// A stream without HTTP: addresses and names only.
    pub fn new() -> TestCtx {
        TestCtx {
            req_buf: Vec::new(),
            req: None,
            res_buf: Vec::new(),
            res: None,
            src: Some("192.168.1.10:40000".parse().unwrap()),
            dst: Some("10.0.0.1:8080".parse().unwrap()),
            frontend: "fe_main".to_string(),
            backend: None,
            server: None,
            env: HashMap::new(),
            // 2024-01-02T03:04:05.678901Z
            now: SystemTime::UNIX_EPOCH + Duration::from_micros(1_704_164_645_678_901),
            random: 0x8000_0000,
            vars: HashMap::new(),
            backend_stats: HashMap::new(),
            server_stats: HashMap::new(),
            buffered: None,
            inspection_ended: true,
            utc_offset: 0,
            payload: None,
            res_payload: None,
            body: None,
            res_body: None,
            stored: std::cell::RefCell::default(),
            facts: None,
            stick_asked: std::cell::RefCell::default(),
            proxy_credentials: false,
        }
    }

    /// A stream whose request is `raw` (a complete head).
    pub fn request(raw: &str) -> TestCtx {
        let mut ctx = TestCtx::new();
        ctx.req_buf = raw.as_bytes().to_vec();
        match parse_request(&ctx.req_buf, &Limits::default()).unwrap() {
            Parse::Complete(head) => ctx.req = Some(head),
            Parse::Partial => panic!("incomplete request in test"),
        }
        ctx.buffered = Some(ctx.req_buf.len());
        ctx
    }

    /// The same stream with response `raw`.
    pub fn response(mut self, raw: &str) -> TestCtx {
        self.res_buf = raw.as_bytes().to_vec();
        match parse_response(&self.res_buf, &Limits::default()).unwrap() {
            Parse::Complete(head) => self.res = Some(head),
            Parse::Partial => panic!("incomplete response in test"),
        }
        self
    }

    /// The same stream with variable `name` set.
    pub fn var(mut self, name: &str, value: Sample<'static>) -> TestCtx {
        self.vars.insert(name.to_string(), value);
        self
    }
}

impl Context for TestCtx {
    fn src(&self) -> Option<SocketAddr> {
        self.src
    }
    fn dst(&self) -> Option<SocketAddr> {
        self.dst
    }
    fn frontend_name(&self) -> &str {
        &self.frontend
    }
    fn backend_name(&self) -> Option<&str> {
        self.backend.as_deref()
    }
    fn server_name(&self) -> Option<&str> {
        self.server.as_deref()
    }
    fn request(&self) -> Option<(&[u8], &RequestHead)> {
        self.req.as_ref().map(|h| (self.req_buf.as_slice(), h))
    }
    fn response(&self) -> Option<(&[u8], &ResponseHead)> {
        self.res.as_ref().map(|h| (self.res_buf.as_slice(), h))
    }
    fn env(&self, name: &str) -> Option<String> {
        self.env.get(name).cloned()
    }
    fn now(&self) -> SystemTime {
        self.now
    }
    fn random(&self) -> u64 {
        self.random
    }
    fn var(&self, name: &str) -> Option<Sample<'_>> {
        self.vars.get(name).map(Sample::reborrow)
    }
    fn stick(
        &self,
        source: crate::StickSource,
        table: Option<&str>,
        op: crate::StickOp,
    ) -> Option<Sample<'static>> {
        self.stick_asked
            .borrow_mut()
            .push(format!("{source:?} {table:?} {op:?}"));
        Some(Sample::Int(7))
    }
    fn table_lookup(
        &self,
        table: Option<&str>,
        key: &Sample<'_>,
        op: crate::StickOp,
    ) -> Option<i64> {
        self.stick_asked
            .borrow_mut()
            .push(format!("{} {key:?} {op:?}", table.unwrap_or("-")));
        Some(7)
    }
    fn backend_stat(&self, backend: Option<&str>, stat: BackendStat) -> Option<i64> {
        self.backend_stats
            .get(&(backend.map(str::to_string), stat))
            .copied()
    }
    fn server_stat(&self, backend: Option<&str>, server: &str, stat: ServerStat) -> Option<i64> {
        self.server_stats
            .get(&(backend.map(str::to_string), server.to_string(), stat))
            .copied()
    }
    fn request_buffered(&self) -> Option<usize> {
        self.buffered
    }
    fn inspection_ended(&self) -> bool {
        self.inspection_ended
    }
    fn set_var(&self, name: &str, value: Sample<'_>) {
        self.stored
            .borrow_mut()
            .push((name.to_string(), value.into_owned()));
    }
    fn response_payload(&self) -> Option<&[u8]> {
        self.res_payload.as_deref()
    }

    fn request_payload(&self) -> Option<&[u8]> {
        self.payload.as_deref()
    }
    fn request_body(&self) -> Option<std::borrow::Cow<'_, [u8]>> {
        self.body.as_deref().map(std::borrow::Cow::Borrowed)
    }
    fn response_body(&self) -> Option<std::borrow::Cow<'_, [u8]>> {
        self.res_body.as_deref().map(std::borrow::Cow::Borrowed)
    }
    fn utc_offset(&self, _at: SystemTime) -> i32 {
        self.utc_offset
    }
    fn log_facts(&self) -> Option<&dyn LogFacts> {
        self.facts.as_deref()
    }
    fn proxy_credentials(&self) -> bool {
        self.proxy_credentials
    }
}

/// A plain GET used by many tests.
pub const GET: &str = "GET /images/png/logo.png?x=1&y=2 HTTP/1.1\r\nHost: www.example.com\r\n\
User-Agent: curl/8.0, (compatible)\r\nX-A: a, \"b,c\" , d\r\nX-A: e\r\n\
Cookie: a=1; b = 2 ;a=3\r\nCookie: c=4\r\nContent-Length: 0\r\n\r\n";

/// Compiles `text` and evaluates it.
pub fn eval(text: &str, ctx: &TestCtx) -> Option<Sample<'static>> {
    let expr = Expr::parse(text, &MapStore::new()).unwrap_or_else(|e| panic!("{text}: {e}"));
    expr.eval(ctx).map(Sample::into_owned)
}

/// Compiles `text`, evaluates it and shows the sample as text (`None`: no sample).
pub fn text(text: &str, ctx: &TestCtx) -> Option<String> {
    eval(text, ctx).map(|s| String::from_utf8_lossy(&s.to_bytes()).into_owned())
}

/// The compile error of `text`.
pub fn parse_err(text: &str) -> String {
    Expr::parse(text, &MapStore::new()).unwrap_err()
}

/// Splits a line into words at spaces (tests use no quoting).
pub fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

/// Declares `acls` (each "name criterion ..."), then evaluates `condition` ("if ...").
pub fn check(acls: &[&str], condition: &str, ctx: &TestCtx) -> bool {
    let mut set = AclSet::new(MapStore::new());
    for line in acls {
        set.add(&words(line))
            .unwrap_or_else(|e| panic!("{line}: {e}"));
    }
    Condition::parse(&words(condition), &set)
        .unwrap_or_else(|e| panic!("{condition}: {e}"))
        .eval(ctx)
}

/// Whether the anonymous ACL `acl` ("criterion flags values") matches.
pub fn matches(acl: &str, ctx: &TestCtx) -> bool {
    check(&[], &format!("if {{ {acl} }}"), ctx)
}

/// The error of declaring `acl` ("name criterion ...").
pub fn acl_err(acl: &str) -> String {
    AclSet::new(MapStore::new()).add(&words(acl)).unwrap_err()
}

/// A string sample, for comparisons.
pub fn s(text: &str) -> Sample<'static> {
    Sample::owned_str(text.as_bytes().to_vec())
}

/// Writes `contents` to a file named `name` in a directory of this test process, and
/// returns its path. Each test uses its own names.
pub fn temp_file(name: &str, contents: &str) -> String {
    let dir = std::env::temp_dir().join(format!("sluice-sample-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path.to_string_lossy().into_owned()
}

/// A small deterministic PRNG (xorshift64*): the same maps on every run.
#[cfg(test)]
pub(crate) struct Rng(pub u64);

#[cfg(test)]
impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(crate) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// A word over an alphabet with every delimiter and both cases, so that random
    /// keys overlap, nest and collide.
    pub(crate) fn word(&mut self, min: usize, max: usize) -> String {
        let len = min + self.below(max - min + 1);
        (0..len)
            .map(|_| self.pick(&['a', 'b', 'A', 'B', '.', '/', '?', ':', 'c']))
            .collect()
    }

    /// An IPv4 address from a small space, so that random networks nest.
    pub(crate) fn v4(&mut self) -> [u8; 4] {
        [
            self.pick(&[10, 192, 0]),
            self.pick(&[0, 1, 168]),
            self.pick(&[0, 2, 128]),
            self.pick(&[0, 3, 255]),
        ]
    }

    /// An IPv4 or IPv6 network in every form §7.1.6 accepts for map keys.
    pub(crate) fn network(&mut self) -> String {
        let [a, b, c, d] = self.v4();
        match self.below(8) {
            0..=2 => format!("{a}.{b}.{c}.{d}/{}", self.below(33)),
            3 => format!("{a}.{b}.{c}.{d}"),
            4 => format!(
                "{a}.{b}.{c}.{d}/{}.{}.{}.{}",
                self.pick(&[255, 0, 128]),
                self.pick(&[255, 0]),
                self.pick(&[255, 0, 254]),
                self.pick(&[255, 0])
            ),
            5 => format!("::ffff:{a}.{b}.{c}.{d}/{}", 80 + self.below(49)),
            6 => format!(
                "2002:{:x}:{:x}::/{}",
                u16::from_be_bytes([a, b]),
                u16::from_be_bytes([c, d]),
                self.below(65)
            ),
            _ => format!("2001:db8:{:x}::{d}/{}", self.below(3), self.below(129)),
        }
    }

    /// An address to look up: IPv4, IPv4-mapped, IPv4-compatible, 6to4 or plain IPv6.
    pub(crate) fn address(&mut self) -> std::net::IpAddr {
        use std::net::IpAddr;
        let [a, b, c, d] = self.v4();
        let v4 = std::net::Ipv4Addr::new(a, b, c, d);
        match self.below(5) {
            0 | 1 => IpAddr::V4(v4),
            2 => IpAddr::V6(v4.to_ipv6_mapped()),
            3 => IpAddr::V6(v4.to_ipv6_compatible()),
            _ => format!(
                "{}:{:x}:{:x}::{d}",
                self.pick(&["2002", "2001:db8"]),
                u16::from_be_bytes([a, b]),
                u16::from_be_bytes([c, d]),
            )
            .parse()
            .unwrap(),
        }
    }
}
