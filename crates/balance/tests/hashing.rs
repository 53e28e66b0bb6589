//! The hash-based algorithms and `random` through the public [`Balancer`] API
//! (configuration.txt §4.2 "balance", "hash-type", "hash-balance-factor").

#![allow(clippy::unwrap_used)]

mod common;

use common::{Rng, assert_proportional, build, keys, pick_key, pick_random, servers};
use sluice_balance::{
    Balancer, HashType, PickInput, ServerState, UriOptions, parse_balance, parse_hash_type,
    uri_key, url_param_key,
};

fn mapping(b: &mut Balancer, keys: &[String]) -> Vec<usize> {
    keys.iter()
        .map(|k| pick_key(b, k.as_bytes()).unwrap())
        .collect()
}

fn tally(mapping: &[usize], n: usize) -> Vec<usize> {
    let mut c = vec![0; n];
    for &s in mapping {
        c[s] += 1;
    }
    c
}

fn moved(before: &[usize], after: &[usize]) -> usize {
    before.iter().zip(after).filter(|(a, b)| a != b).count()
}

#[test]
fn map_based_distribution_follows_weights() {
    let weights = [1, 2, 3, 4];
    for function in ["sdbm", "djb2", "wt6", "crc32"] {
        for modifier in [None, Some("avalanche")] {
            let mut hash_type = vec!["map-based", function];
            hash_type.extend(modifier);
            let mut b = build(&["uri"], &hash_type, &servers(&weights));
            let m = mapping(&mut b, &keys(20_000));
            assert_proportional(&tally(&m, 4), &weights, 0.1);
        }
    }
}

#[test]
fn consistent_distribution_follows_weights() {
    // A ring is never as smooth as a map (§4.2 "hash-type"): with 16 points per weight unit, a
    // weight-1 server's share may be off by half; the manual's advice of weights between 10 and
    // 100 gives 160+ points per server and shares close to the weights.
    let weights = [10, 20, 30, 40];
    let mut b = build(&["uri"], &["consistent"], &servers(&weights));
    let m = mapping(&mut b, &keys(20_000));
    assert_proportional(&tally(&m, 4), &weights, 0.15);
    let weights = [1, 2, 3, 4];
    let mut b = build(&["uri"], &["consistent"], &servers(&weights));
    let m = mapping(&mut b, &keys(20_000));
    assert_proportional(&tally(&m, 4), &weights, 0.5);
}

#[test]
fn consistent_hashing_moves_only_the_lost_servers_keys() {
    let keys = keys(10_000);
    let mut b = build(&["hdr(host)"], &["consistent"], &servers(&[1; 10]));
    let before = mapping(&mut b, &keys);
    let mut gone = ServerState::new(1);
    gone.usable = false;
    b.update(3, gone);
    let after = mapping(&mut b, &keys);
    let n = moved(&before, &after);
    // Only the keys of server 3 move, and they are about a tenth.
    for (a, z) in before.iter().zip(&after) {
        assert!(a == z || *a == 3, "a key moved from {a} to {z}");
    }
    assert!((500..=1500).contains(&n), "{n} keys moved");
    assert!(!after.contains(&3));
    // When it comes back, every key returns.
    b.update(3, ServerState::new(1));
    assert_eq!(mapping(&mut b, &keys), before);
}

#[test]
fn consistent_weight_change_moves_few_keys() {
    let keys = keys(10_000);
    let mut b = build(&["uri"], &["consistent"], &servers(&[10; 5]));
    assert!(b.is_dynamic());
    let before = mapping(&mut b, &keys);
    b.update(0, ServerState::new(5));
    let after = mapping(&mut b, &keys);
    // Only keys leaving server 0 move (its highest points are gone): about half its tenth.
    for (a, z) in before.iter().zip(&after) {
        assert!(a == z || *a == 0);
    }
    assert!(moved(&before, &after) < 1500);
    assert!(tally(&after, 5)[0] < tally(&before, 5)[0]);
}

#[test]
fn map_based_remaps_most_keys_and_keeps_static_weights() {
    let keys = keys(10_000);
    let mut b = build(&["uri"], &[], &servers(&[1; 10]));
    assert!(!b.is_dynamic());
    let before = mapping(&mut b, &keys);
    let mut gone = ServerState::new(1);
    gone.usable = false;
    b.update(3, gone);
    let after = mapping(&mut b, &keys);
    assert!(moved(&before, &after) > 7000, "{}", moved(&before, &after));
    assert!(!after.contains(&3));
    // A weight change on a static map has no effect.
    b.update(3, ServerState::new(1));
    assert_eq!(mapping(&mut b, &keys), before);
    b.update(5, ServerState::new(200));
    assert_eq!(mapping(&mut b, &keys), before);
}

#[test]
fn missing_key_falls_back_to_round_robin() {
    for hash_type in [&["map-based"][..], &["consistent"][..]] {
        let weights = [1, 3];
        let mut b = build(&["url_param", "user"], hash_type, &servers(&weights));
        let mut c = vec![0; 2];
        // A full turn of the map (4 slots) or ring (64 points) is exactly proportional.
        for _ in 0..64 * 10 {
            c[b.pick(&PickInput::default()).unwrap()] += 1;
        }
        assert_eq!(c, [160, 480], "{hash_type:?}");
    }
}

#[test]
fn same_key_same_server_through_extractors() {
    let mut b = build(&["uri", "depth", "2"], &[], &servers(&[1, 1, 1, 1, 1]));
    let opts = UriOptions {
        depth: Some(2),
        ..UriOptions::default()
    };
    let a = uri_key(b"/img/cats/1.png?x=1", &opts).unwrap();
    let z = uri_key(b"/img/cats/2.png", &opts).unwrap();
    assert_eq!(pick_key(&mut b, a), pick_key(&mut b, z));
    let mut p = build(&["url_param", "user"], &[], &servers(&[1, 1, 1]));
    let first = pick_key(&mut p, url_param_key(b"/a?user=bob", "user").unwrap());
    for _ in 0..10 {
        let again = pick_key(&mut p, url_param_key(b"/b?x=1&user=bob", "user").unwrap());
        assert_eq!(again, first);
    }
}

#[test]
fn hash_balance_factor_bounds_load() {
    let algorithm = parse_balance(&["hash", "req.cookie(id)"]).unwrap();
    let consistent = parse_hash_type(&["consistent"]).unwrap();
    // Every request carries the same key and holds its connection.
    let hot = b"the-same-key";
    let mut unbounded = Balancer::new(&algorithm, consistent, &servers(&[1; 4]), false, None);
    let mut bounded = Balancer::new(&algorithm, consistent, &servers(&[1; 4]), false, Some(150));
    for _ in 0..400 {
        let s = pick_key(&mut unbounded, hot).unwrap();
        unbounded.connection_started(s);
        let s = pick_key(&mut bounded, hot).unwrap();
        bounded.connection_started(s);
    }
    let loads = |b: &Balancer| (0..4).map(|s| b.connections(s)).collect::<Vec<_>>();
    assert!(loads(&unbounded).contains(&400));
    // No server above 150% of the average (100), plus the rounding of one slot.
    assert!(
        loads(&bounded).iter().all(|&c| c <= 151),
        "{:?}",
        loads(&bounded)
    );
    assert_eq!(loads(&bounded).iter().sum::<u32>(), 400);
    // Weights are respected: a weight-3 server may hold three times as much.
    let mut weighted = Balancer::new(&algorithm, consistent, &servers(&[3, 1]), false, Some(100));
    for _ in 0..400 {
        let s = pick_key(&mut weighted, hot).unwrap();
        weighted.connection_started(s);
    }
    assert_eq!(
        (weighted.connections(0), weighted.connections(1)),
        (300, 100)
    );
}

#[test]
fn hash_balance_factor_ignored_for_map_based() {
    let algorithm = parse_balance(&["source"]).unwrap();
    let mut b = Balancer::new(
        &algorithm,
        HashType::default(),
        &servers(&[1; 4]),
        false,
        Some(150),
    );
    let key = [10, 0, 0, 1];
    let first = pick_key(&mut b, &key).unwrap();
    for _ in 0..50 {
        b.connection_started(first);
    }
    assert_eq!(pick_key(&mut b, &key), Some(first));
}

#[test]
fn random_follows_weights() {
    let weights = [1, 2, 3, 4];
    let mut b = build(&["random"], &[], &servers(&weights));
    let mut rng = Rng(42);
    let mut c = vec![0; 4];
    for _ in 0..20_000 {
        // Without connections every draw ties, so the first draw wins: a weighted choice.
        c[pick_random(&mut b, rng.next()).unwrap()] += 1;
    }
    assert_proportional(&c, &weights, 0.35);
}

/// Long-lived connections placed by `random(draws)`: the spread between the most and least
/// loaded servers.
fn spread(draws: &str, picks: usize) -> (u32, u32) {
    let mut b = build(&[draws], &[], &servers(&[1; 10]));
    let mut rng = Rng(7);
    for _ in 0..picks {
        let s = pick_random(&mut b, rng.next()).unwrap();
        b.connection_started(s);
    }
    let loads: Vec<u32> = (0..10).map(|s| b.connections(s)).collect();
    (*loads.iter().min().unwrap(), *loads.iter().max().unwrap())
}

#[test]
fn random_two_prefers_the_less_loaded() {
    let (min1, max1) = spread("random(1)", 5000);
    let (min2, max2) = spread("random(2)", 5000);
    assert!(
        max2 - min2 < (max1 - min1) / 2,
        "random(2) {min2}..{max2}, random(1) {min1}..{max1}"
    );
    assert!(max2 <= 560, "{max2}");
    // With one server much busier, random(2) almost never picks it.
    let mut b = build(&["random(2)"], &[], &servers(&[1, 1]));
    for _ in 0..10 {
        b.connection_started(0);
    }
    let mut rng = Rng(3);
    let to_busy = (0..1000)
        .filter(|_| pick_random(&mut b, rng.next()) == Some(0))
        .count();
    // Only when both draws land on server 0: about a quarter.
    assert!((150..=350).contains(&to_busy), "{to_busy}");
}

#[test]
fn random_weight_changes_take_effect() {
    let mut b = build(&["random"], &[], &servers(&[1, 1]));
    b.update(1, ServerState::new(0));
    let mut rng = Rng(9);
    assert!((0..100).all(|_| pick_random(&mut b, rng.next()) == Some(0)));
}
