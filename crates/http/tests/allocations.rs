//! The codec's allocation budget, counted with a counting global allocator: parsing a request
//! or response head allocates once (the header list), whatever the number of fields, and
//! nothing once the thread has dropped a head whose list it reuses; decoding a chunked body
//! allocates nothing. This is the "no allocation per header" rule of
//! the hot path, checked rather than assumed.
#![allow(clippy::unwrap_used)]

use sluice_http::chunked::ChunkedDecoder;
use sluice_http::head::{Limits, parse_request, parse_response};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

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

fn request_with_fields(n: usize) -> Vec<u8> {
    let mut head = b"GET /path?q=1 HTTP/1.1\r\nHost: example.com\r\n".to_vec();
    for i in 0..n {
        head.extend_from_slice(format!("X-Field-{i}: value number {i}\r\n").as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    head
}

#[test]
fn parsing_a_head_allocates_once_whatever_the_field_count() {
    let limits = Limits::default();
    for fields in [0, 10, 90] {
        let head = request_with_fields(fields);
        // Dropped outside the count: a cold thread's first drop makes room to keep the
        // list for the next head (the next test shows a warm thread allocating nothing).
        let mut parsed = None;
        let n = allocations_of(|| {
            parsed = Some(std::hint::black_box(parse_request(&head, &limits).unwrap()));
        });
        drop(parsed);
        assert!(
            n <= 1,
            "{n} allocations for a head of {fields} extra fields"
        );
    }
    let response = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\nX-B: 2\r\n\r\nok";
    let n = allocations_of(|| {
        std::hint::black_box(parse_response(response, &limits).unwrap());
    });
    assert!(n <= 1, "{n} allocations for a response head");
}

#[test]
fn a_thread_parses_into_the_lists_of_the_heads_it_dropped() {
    let limits = Limits::default();
    let head = request_with_fields(10);
    let response = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\n\r\nok";
    drop(parse_request(&head, &limits).unwrap());
    for _ in 0..3 {
        let n = allocations_of(|| {
            std::hint::black_box(parse_request(&head, &limits).unwrap());
            std::hint::black_box(parse_response(response, &limits).unwrap());
        });
        assert_eq!(n, 0, "a warm thread allocates nothing to parse a head");
    }
}

#[test]
fn decoding_chunks_allocates_nothing() {
    let body = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n";
    let mut decoder = ChunkedDecoder::new();
    let n = allocations_of(|| {
        let mut input = &body[..];
        loop {
            let step = decoder.decode(input).unwrap();
            input = &input[step.consumed..];
            if step.done {
                break;
            }
        }
    });
    assert_eq!(n, 0);
}
