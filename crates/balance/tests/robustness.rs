//! No input makes the balancer panic or pick a server it must not: empty backends, zero
//! weights, out-of-range indexes, and long random sequences of events, connections and picks
//! checked against a simple model of the rules (tiers, usability, static weights, maxconn).

#![allow(clippy::unwrap_used)]

mod common;

use common::Rng;
use sluice_balance::{
    Algorithm, Balancer, HashType, PickInput, ServerState, parse_balance, parse_hash_type,
};

const ALGORITHMS: [&[&str]; 9] = [
    &["roundrobin"],
    &["static-rr"],
    &["leastconn"],
    &["first"],
    &["source"],
    &["uri", "whole"],
    &["random(3)"],
    &["hash", "src"],
    &["hdr(host)", "use_domain_only"],
];

fn every_configuration() -> Vec<(Algorithm, HashType, bool, Option<u32>)> {
    let mut out = Vec::new();
    for words in ALGORITHMS {
        let algorithm = parse_balance(words).unwrap();
        for hash_type in [&["map-based"][..], &["consistent", "wt6", "avalanche"][..]] {
            let hash = parse_hash_type(hash_type).unwrap();
            for allbackups in [false, true] {
                for factor in [None, Some(125)] {
                    out.push((algorithm.clone(), hash, allbackups, factor));
                }
            }
        }
    }
    out
}

#[test]
fn empty_and_unusable_backends_give_none() {
    for (algorithm, hash, allbackups, factor) in every_configuration() {
        let input = PickInput {
            key: Some(b"k"),
            random: 1,
            exclude: Some(0),
        };
        let mut empty = Balancer::new(&algorithm, hash, &[], allbackups, factor);
        assert_eq!(empty.pick(&input), None);
        assert_eq!(empty.pick(&PickInput::default()), None);
        assert!(!empty.has_usable_server());
        empty.update(0, ServerState::new(1));
        empty.connection_started(0);
        empty.connection_ended(0);

        let zero = [ServerState::new(0), ServerState::new(0)];
        let mut b = Balancer::new(&algorithm, hash, &zero, allbackups, factor);
        assert_eq!(b.pick(&input), None, "{algorithm:?}");
        let mut down = ServerState::new(5);
        down.usable = false;
        let mut b = Balancer::new(&algorithm, hash, &[down, down], allbackups, factor);
        assert_eq!(b.pick(&input), None, "{algorithm:?}");
        // Coming up makes it pickable.
        b.update(1, ServerState::new(5));
        assert_eq!(b.pick(&input), Some(1), "{algorithm:?}");
    }
}

#[test]
fn odd_inputs_do_not_panic() {
    for (algorithm, hash, allbackups, factor) in every_configuration() {
        let mut s = vec![ServerState::new(u32::MAX), ServerState::new(1)];
        s[1].maxconn = Some(u32::MAX);
        let mut b =
            Balancer::new(&algorithm, hash, &s, allbackups, factor).with_ids(&[u32::MAX, 0, 7]);
        for key in [
            &b""[..],
            b"\xff\xfe",
            &[0u8; 4096][..],
            b"-99999999999999999999",
        ] {
            let input = PickInput {
                key: Some(key),
                random: u64::MAX,
                exclude: Some(usize::MAX),
            };
            assert!(b.pick(&input).is_some());
        }
        for _ in 0..3 {
            b.connection_ended(1);
        }
        assert_eq!(b.connections(1), 0);
    }
}

/// What the rules allow a pick to return, given the model's state.
fn allowed(
    states: &[ServerState],
    configured: &[u32],
    conns: &[u32],
    dynamic: bool,
    allbackups: bool,
    rotation: bool,
) -> (Vec<usize>, bool) {
    let eligible = |i: usize| {
        let s = states[i];
        s.usable && s.weight > 0 && (dynamic || configured[i] > 0)
    };
    let active: Vec<usize> = (0..states.len())
        .filter(|&i| !states[i].backup && eligible(i))
        .collect();
    let tier = if !active.is_empty() {
        active
    } else {
        let backups: Vec<usize> = (0..states.len())
            .filter(|&i| states[i].backup && eligible(i))
            .collect();
        if allbackups {
            backups
        } else {
            backups.into_iter().take(1).collect()
        }
    };
    let has_room = |i: usize| match states[i].maxconn {
        Some(m) if m > 0 => conns[i] < m,
        _ => true,
    };
    let with_room: Vec<usize> = tier.iter().copied().filter(|&i| has_room(i)).collect();
    if rotation {
        let must_pick = !with_room.is_empty();
        (with_room, must_pick)
    } else {
        let must_pick = !tier.is_empty();
        (tier, must_pick)
    }
}

#[test]
fn random_operations_respect_the_rules() {
    let mut rng = Rng(0x5eed);
    for (algorithm, hash, allbackups, factor) in every_configuration() {
        let n = 1 + (rng.next() % 9) as usize;
        let random_state = |rng: &mut Rng| ServerState {
            weight: [0, 1, 2, 7, 256][(rng.next() % 5) as usize],
            usable: !rng.next().is_multiple_of(4),
            backup: rng.next().is_multiple_of(3),
            maxconn: [None, Some(0), Some(1), Some(3)][(rng.next() % 4) as usize],
        };
        let mut states: Vec<ServerState> = (0..n).map(|_| random_state(&mut rng)).collect();
        let configured: Vec<u32> = states.iter().map(|s| s.weight).collect();
        let mut conns = vec![0u32; n];
        let mut b = Balancer::new(&algorithm, hash, &states, allbackups, factor);
        let dynamic = b.is_dynamic();
        // Rotations skip full servers; hashes (with a key) and random keep their choice.
        let uses_key = algorithm.uses_key();
        let is_random = matches!(algorithm, Algorithm::Random { .. });
        for step in 0..400 {
            match rng.next() % 6 {
                0 => {
                    let i = (rng.next() % n as u64) as usize;
                    states[i] = random_state(&mut rng);
                    b.update(i, states[i]);
                }
                1 => {
                    let i = (rng.next() % n as u64) as usize;
                    if conns[i] > 0 {
                        conns[i] -= 1;
                    }
                    b.connection_ended(i);
                }
                _ => {
                    let key = format!("key-{}", rng.next() % 50);
                    let with_key = !rng.next().is_multiple_of(4);
                    let input = PickInput {
                        key: with_key.then_some(key.as_bytes()),
                        random: rng.next(),
                        exclude: rng
                            .next()
                            .is_multiple_of(3)
                            .then(|| (rng.next() % n as u64) as usize),
                    };
                    let rotation = !(is_random || (uses_key && with_key));
                    let (ok, must_pick) =
                        allowed(&states, &configured, &conns, dynamic, allbackups, rotation);
                    let got = b.pick(&input);
                    match got {
                        Some(s) => assert!(
                            ok.contains(&s),
                            "{algorithm:?} step {step}: picked {s}, allowed {ok:?}"
                        ),
                        None => assert!(
                            !must_pick,
                            "{algorithm:?} step {step}: no pick, allowed {ok:?}"
                        ),
                    }
                    assert_eq!(
                        b.has_usable_server(),
                        !allowed(&states, &configured, &conns, dynamic, allbackups, false)
                            .0
                            .is_empty()
                    );
                    if let Some(s) = got {
                        conns[s] += 1;
                        b.connection_started(s);
                    }
                }
            }
            for (i, &c) in conns.iter().enumerate() {
                assert_eq!(b.connections(i), c);
            }
        }
    }
}
