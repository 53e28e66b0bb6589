//! Helpers shared by the integration tests: build balancers from `balance` words and weights,
//! and count picks.

#![allow(dead_code, clippy::unwrap_used)]

use sluice_balance::{Balancer, HashType, PickInput, ServerState, parse_balance, parse_hash_type};

/// Active, usable servers of these weights.
pub fn servers(weights: &[u32]) -> Vec<ServerState> {
    weights.iter().map(|&w| ServerState::new(w)).collect()
}

/// A balancer from `balance` words, `hash-type` words (empty: default) and servers.
pub fn build(balance: &[&str], hash_type: &[&str], servers: &[ServerState]) -> Balancer {
    let algorithm = parse_balance(balance).unwrap();
    let hash = if hash_type.is_empty() {
        HashType::default()
    } else {
        parse_hash_type(hash_type).unwrap()
    };
    Balancer::new(&algorithm, hash, servers, false, None)
}

pub fn pick(b: &mut Balancer) -> Option<usize> {
    b.pick(&PickInput::default())
}

pub fn pick_key(b: &mut Balancer, key: &[u8]) -> Option<usize> {
    b.pick(&PickInput {
        key: Some(key),
        ..PickInput::default()
    })
}

pub fn pick_random(b: &mut Balancer, random: u64) -> Option<usize> {
    b.pick(&PickInput {
        random,
        ..PickInput::default()
    })
}

/// How many of `n` keyless picks each server gets.
pub fn counts(b: &mut Balancer, n: usize) -> Vec<usize> {
    let mut c = vec![0; b.server_count()];
    for _ in 0..n {
        c[pick(b).unwrap()] += 1;
    }
    c
}

/// Deterministic pseudo-random numbers for test inputs (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `n` distinct textual keys.
pub fn keys(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("/object/{i}/{}", i * 7919))
        .collect()
}

/// Asserts each server's share of `counts` is within `tolerance` (relative) of its weight's share.
pub fn assert_proportional(counts: &[usize], weights: &[u32], tolerance: f64) {
    let total: usize = counts.iter().sum();
    let weight_total: u32 = weights.iter().sum();
    for (s, (&c, &w)) in counts.iter().zip(weights).enumerate() {
        let expected = total as f64 * f64::from(w) / f64::from(weight_total);
        let off = (c as f64 - expected).abs();
        assert!(
            off <= expected * tolerance + 1.0,
            "server {s}: {c} picks, expected {expected:.0} (±{:.0}%) in {counts:?}",
            tolerance * 100.0
        );
    }
}
