//! The engine's allocation budget, counted with a counting global allocator: evaluating an
//! expression whose data stays borrowed from the request buffer, or a condition made of
//! ACLs, allocates nothing once the first evaluation has fixed the ACLs and warmed the regex
//! caches. This is the "no allocation per rule" rule of the hot path, checked rather than
//! assumed.
#![allow(clippy::unwrap_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::SocketAddr;
use std::time::SystemTime;

use sluice_http::{Limits, Parse, RequestHead, ResponseHead, parse_request};
use sluice_sample::{AclSet, Condition, Context, Expr, LogFormat, MapStore, Sample};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; the thread-local counter is a plain
// `Cell` touched only by the allocating thread.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn allocations_of(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

struct Ctx {
    buf: Vec<u8>,
    head: RequestHead,
}

impl Context for Ctx {
    fn src(&self) -> Option<SocketAddr> {
        Some(SocketAddr::from(([10, 1, 2, 3], 5000)))
    }
    fn dst(&self) -> Option<SocketAddr> {
        None
    }
    fn frontend_name(&self) -> &str {
        "fe"
    }
    fn backend_name(&self) -> Option<&str> {
        None
    }
    fn server_name(&self) -> Option<&str> {
        None
    }
    fn request(&self) -> Option<(&[u8], &RequestHead)> {
        Some((&self.buf, &self.head))
    }
    fn response(&self) -> Option<(&[u8], &ResponseHead)> {
        None
    }
    fn env(&self, _: &str) -> Option<String> {
        None
    }
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH
    }
    fn random(&self) -> u64 {
        4
    }
}

fn ctx() -> Ctx {
    let buf = b"GET /images/png/logo.png?x=1 HTTP/1.1\r\nHost: www.example.com\r\n\
X-A: a, b\r\nX-A: E\r\nCookie: sid=1; lang=fr\r\n\r\n"
        .to_vec();
    let Parse::Complete(head) = parse_request(&buf, &Limits::default()).unwrap() else {
        panic!("incomplete");
    };
    Ctx { buf, head }
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn borrowed_expressions_allocate_nothing() {
    let ctx = ctx();
    let maps = MapStore::new();
    maps.set_contents("hosts.map", "www.example.com be_www\n");
    for text in [
        "path",
        "req.hdr(host),lower",
        "path,field(2,/)",
        "req.cook(lang)",
        "urlp(x)",
        "req.hdr(x-a,-2)",
        "src,ipmask(8)",
        "req.hdr(host),map(hosts.map)",
        "method",
        "req.hdr_cnt(x-a),add(1)",
    ] {
        let expr = Expr::parse(text, &maps).unwrap();
        let n = allocations_of(|| {
            std::hint::black_box(expr.eval(&ctx));
        });
        assert_eq!(n, 0, "{text} allocated {n} times");
    }
}

#[test]
fn indexed_map_lookups_allocate_nothing() {
    let ctx = ctx();
    let maps = MapStore::new();
    maps.set_contents("paths.map", "/static st\n/images img\n");
    maps.set_contents(
        "ips.map",
        "192.168.0.0/16 b\n10.0.0.0/8 lan\n10.1.0.0/16 narrow\n",
    );
    maps.set_contents("doms.map", "example.org org\nexample.com com\n");
    maps.set_contents("dirs.map", "png png\n");
    for text in [
        "path,map_beg(paths.map)",
        "src,map_ip(ips.map)",
        "req.hdr(host),map_dom(doms.map)",
        "req.hdr(host),map_end(doms.map)",
        "path,map_dir(dirs.map)",
    ] {
        let expr = Expr::parse(text, &maps).unwrap();
        let n = allocations_of(|| {
            assert!(std::hint::black_box(expr.eval(&ctx)).is_some(), "{text}");
        });
        assert_eq!(n, 0, "{text} allocated {n} times");
    }
}

#[test]
fn conditions_allocate_nothing_after_the_first_evaluation() {
    let ctx = ctx();
    let mut acls = AclSet::new(MapStore::new());
    for line in [
        "static path_beg /images /static",
        "static path_end .css",
        "lan src 10.0.0.0/8 192.168.0.0/16",
        "png path_reg -i \\.PNG$",
        "hosts hdr_dom(host) example",
    ] {
        acls.add(&words(line)).unwrap();
    }
    let cond = Condition::parse(
        &words(
            "if static lan png hosts { hdr(x-a) -i e } !{ req.cook(zz) -m found } METH_GET \
             or { always_false }",
        ),
        &acls,
    )
    .unwrap();
    assert!(cond.eval(&ctx));
    let n = allocations_of(|| {
        for _ in 0..10 {
            assert!(std::hint::black_box(cond.eval(&ctx)));
        }
    });
    assert_eq!(n, 0);
    // Converters that build a new string do allocate; that is their budget.
    let upper = Expr::parse("path,upper", &MapStore::new()).unwrap();
    let n = allocations_of(|| {
        assert!(matches!(upper.eval(&ctx), Some(Sample::Str(_))));
    });
    assert_eq!(n, 1);
}

#[test]
fn log_formats_allocate_only_their_output() {
    let ctx = ctx();
    let maps = MapStore::new();
    let format = LogFormat::parse_log(
        "%ci:%cp [%t] %f %b/%s %{+Q}r %ST %B %[req.hdr(host),lower] %{+Q,+E}[path] %HQ %Tt %ts",
        &maps,
    )
    .unwrap();
    let mut out = Vec::with_capacity(1024);
    format.render(&ctx, &mut out);
    let first = out.clone();
    out.clear();
    let n = allocations_of(|| format.render(&ctx, &mut out));
    assert_eq!(n, 0, "allocated {n} times");
    assert_eq!(out, first);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "10.1.2.3:5000 [-] fe fe/<NOSRV> \"GET /images/png/logo.png?x=1 HTTP/1.1\" - - \
www.example.com \"/images/png/logo.png\" ?x=1 - -"
    );
}
