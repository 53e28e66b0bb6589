//! The hash-based algorithms send each key where HAProxy sends it. Every expectation here was
//! observed on HAProxy 2.6.12: a backend with `balance hdr(x-k)` (or `balance source`) over
//! servers s1, s2, s3 answering their own names, queried with the listed keys.

#![allow(clippy::unwrap_used)]

mod common;

use common::{build, pick_key, servers};
use sluice_balance::source_key;

const KEYS: [&str; 12] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima",
];

fn servers_for(balance: &[&str], hash_type: &[&str], weights: &[u32]) -> Vec<usize> {
    let mut b = build(balance, hash_type, &servers(weights));
    KEYS.iter()
        .map(|k| pick_key(&mut b, k.as_bytes()).unwrap() + 1)
        .collect()
}

#[test]
fn map_based_sdbm_weights_3_1_2() {
    assert_eq!(
        servers_for(&["hdr(x-k)"], &[], &[3, 1, 2]),
        [1, 1, 2, 1, 3, 2, 1, 1, 1, 3, 3, 1]
    );
}

#[test]
fn map_based_sdbm_weights_5_1_1() {
    assert_eq!(
        servers_for(&["hdr(x-k)"], &[], &[5, 1, 1]),
        [2, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 1]
    );
}

#[test]
fn consistent_default_is_sdbm_avalanche() {
    assert_eq!(
        servers_for(&["hdr(x-k)"], &["consistent"], &[3, 1, 2]),
        [2, 2, 3, 2, 1, 3, 3, 1, 3, 3, 1, 1]
    );
}

#[test]
fn consistent_sdbm_without_avalanche() {
    assert_eq!(
        servers_for(&["hdr(x-k)"], &["consistent", "sdbm"], &[1, 1, 1]),
        [2, 3, 2, 2, 2, 3, 1, 3, 3, 3, 1, 2]
    );
}

#[test]
fn source_ipv4_is_the_address_modulo_the_map() {
    // HAProxy 2.6: clients 127.0.0.1..10 against two and three equal servers.
    let two = [2, 1, 2, 1, 2, 1, 2, 1, 2, 1];
    let three = [3, 1, 2, 3, 1, 2, 3, 1, 2, 3];
    let mut b2 = build(&["source"], &[], &servers(&[1, 1]));
    let mut b3 = build(&["source"], &[], &servers(&[1, 1, 1]));
    for i in 1..=10u8 {
        let key = source_key([127, 0, 0, i].into());
        assert_eq!(
            pick_key(&mut b2, key.as_bytes()).unwrap() + 1,
            two[usize::from(i - 1)]
        );
        assert_eq!(
            pick_key(&mut b3, key.as_bytes()).unwrap() + 1,
            three[usize::from(i - 1)]
        );
    }
}
