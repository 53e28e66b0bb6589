//! The rotation algorithms (`roundrobin`, `static-rr`, `leastconn`, `first`), server events and
//! backup servers, through the public [`Balancer`] API (configuration.txt §4.2 "balance",
//! "option allbackups"; §5.2 "weight", "maxconn", "backup").

#![allow(clippy::unwrap_used)]

mod common;

use common::{assert_proportional, build, counts, pick, servers};
use sluice_balance::{Balancer, HashType, PickInput, ServerState, parse_balance};

fn backup(weight: u32) -> ServerState {
    ServerState {
        backup: true,
        ..ServerState::new(weight)
    }
}

fn down(mut s: ServerState) -> ServerState {
    s.usable = false;
    s
}

fn with_maxconn(weight: u32, maxconn: u32) -> ServerState {
    ServerState {
        maxconn: Some(maxconn),
        ..ServerState::new(weight)
    }
}

#[test]
fn roundrobin_distribution_is_exact_per_cycle() {
    let weights = [1, 2, 3, 4];
    let mut b = build(&["roundrobin"], &[], &servers(&weights));
    let c = counts(&mut b, 10_000);
    assert_eq!(c, [1000, 2000, 3000, 4000]);
}

#[test]
fn roundrobin_is_smooth() {
    let weights = [10, 1, 1, 1];
    let mut b = build(&["roundrobin"], &[], &servers(&weights));
    let seq: Vec<usize> = (0..1300).map(|_| pick(&mut b).unwrap()).collect();
    // The heavy server never runs more than ceil(10 / 3) + 1 times in a row (the light servers'
    // phases are staggered by position, not perfectly spaced), and every window
    // of 13 picks holds each server its weight's worth of times, give or take one.
    let longest_run = seq
        .chunk_by(|a, b| a == b)
        .map(<[usize]>::len)
        .max()
        .unwrap();
    assert!(longest_run <= 5, "run of {longest_run}");
    for window in seq.windows(13) {
        for (s, &w) in weights.iter().enumerate() {
            let n = window.iter().filter(|&&x| x == s).count() as i64;
            assert!((n - i64::from(w)).abs() <= 1);
        }
    }
}

#[test]
fn roundrobin_weight_changes_and_events_take_effect() {
    let mut b = build(&["roundrobin"], &[], &servers(&[1, 1, 1]));
    assert!(b.is_dynamic());
    assert_eq!(counts(&mut b, 300), [100, 100, 100]);
    // Slowstart-like step: server 0 goes to weight 4.
    b.update(0, ServerState::new(4));
    assert_proportional(&counts(&mut b, 6000), &[4, 1, 1], 0.01);
    // Drain: weight 0 takes no new traffic.
    b.update(1, ServerState::new(0));
    assert_eq!(counts(&mut b, 500)[1], 0);
    // Down, then up again.
    b.update(2, down(ServerState::new(1)));
    assert_eq!(counts(&mut b, 100), [100, 0, 0]);
    b.update(1, ServerState::new(1));
    b.update(2, ServerState::new(1));
    assert_proportional(&counts(&mut b, 6000), &[4, 1, 1], 0.01);
    b.update(0, down(ServerState::new(4)));
    b.update(1, down(ServerState::new(1)));
    b.update(2, down(ServerState::new(1)));
    assert_eq!(pick(&mut b), None);
    assert!(!b.has_usable_server());
}

#[test]
fn static_rr_ignores_weight_changes_but_not_zero() {
    let mut b = build(&["static-rr"], &[], &servers(&[1, 2, 3]));
    assert!(!b.is_dynamic());
    assert_eq!(counts(&mut b, 600), [100, 200, 300]);
    b.update(0, ServerState::new(50));
    assert_eq!(counts(&mut b, 600), [100, 200, 300]);
    b.update(2, ServerState::new(0));
    assert_eq!(counts(&mut b, 300), [100, 200, 0]);
    // Back to a non-zero weight means back to the configured weight.
    b.update(2, ServerState::new(7));
    assert_eq!(counts(&mut b, 600), [100, 200, 300]);
    b.update(1, down(ServerState::new(2)));
    assert_eq!(counts(&mut b, 400), [100, 0, 300]);
}

#[test]
fn leastconn_follows_weights_for_long_connections() {
    let weights = [1, 2, 5];
    let mut b = build(&["leastconn"], &[], &servers(&weights));
    for _ in 0..800 {
        let s = pick(&mut b).unwrap();
        b.connection_started(s);
    }
    let held: Vec<u32> = (0..3).map(|s| b.connections(s)).collect();
    assert_eq!(held, [100, 200, 500]);
    // Connections end on the heavy server: it gets the next ones.
    for _ in 0..50 {
        b.connection_ended(2);
    }
    for _ in 0..50 {
        let s = pick(&mut b).unwrap();
        assert_eq!(s, 2);
        b.connection_started(s);
    }
}

#[test]
fn leastconn_round_robins_among_equals() {
    let mut b = build(&["leastconn"], &[], &servers(&[1, 1, 1, 1]));
    let mut seq = Vec::new();
    for _ in 0..12 {
        let s = pick(&mut b).unwrap();
        seq.push(s);
        b.connection_started(s);
        b.connection_ended(s);
    }
    assert_eq!(seq, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]);
    // An unusual ending order still rotates among the idle servers.
    b.connection_started(1);
    let s = pick(&mut b).unwrap();
    assert_ne!(s, 1);
}

#[test]
fn first_fills_servers_in_order_up_to_maxconn() {
    let s = [with_maxconn(1, 3), with_maxconn(1, 3), with_maxconn(1, 3)];
    let mut b = build(&["first"], &[], &s);
    let mut seq = Vec::new();
    for _ in 0..7 {
        let p = pick(&mut b).unwrap();
        seq.push(p);
        b.connection_started(p);
    }
    assert_eq!(seq, [0, 0, 0, 1, 1, 1, 2]);
    b.connection_ended(0);
    assert_eq!(pick(&mut b), Some(0));
    b.connection_started(0);
    for _ in 0..2 {
        b.connection_started(2);
    }
    // Everything is full: no pick, but servers are usable (the caller queues).
    assert_eq!(pick(&mut b), None);
    assert!(b.has_usable_server());
    // A larger limit frees a slot.
    b.update(1, with_maxconn(1, 4));
    assert_eq!(pick(&mut b), Some(1));
}

#[test]
fn first_uses_ids_and_ignores_weights() {
    let s = [with_maxconn(100, 1), with_maxconn(1, 1), with_maxconn(1, 1)];
    let algorithm = parse_balance(&["first"]).unwrap();
    let mut b =
        Balancer::new(&algorithm, HashType::default(), &s, false, None).with_ids(&[30, 10, 20]);
    let mut seq = Vec::new();
    for _ in 0..3 {
        let p = pick(&mut b).unwrap();
        seq.push(p);
        b.connection_started(p);
    }
    assert_eq!(seq, [1, 2, 0]);
}

#[test]
fn maxconn_skips_full_servers_in_rotations() {
    for algorithm in ["roundrobin", "static-rr", "leastconn"] {
        let s = [with_maxconn(1, 1), ServerState::new(1)];
        let mut b = build(&[algorithm], &[], &s);
        b.connection_started(0);
        assert_eq!(counts(&mut b, 10), [0, 10], "{algorithm}");
        // A slot frees up on server 0 while server 1 gets busier: server 0 is used again.
        b.connection_ended(0);
        b.connection_started(1);
        assert!(counts(&mut b, 10)[0] > 0, "{algorithm}");
        let all_full = [with_maxconn(1, 1), with_maxconn(1, 1)];
        let mut b = build(&[algorithm], &[], &all_full);
        b.connection_started(0);
        b.connection_started(1);
        assert_eq!(pick(&mut b), None, "{algorithm}");
        assert!(b.has_usable_server());
    }
}

#[test]
fn first_usable_backup_only_when_no_active_is_usable() {
    for algorithm in [
        "roundrobin",
        "static-rr",
        "leastconn",
        "first",
        "source",
        "random",
    ] {
        let s = [ServerState::new(1), backup(1), backup(1)];
        let mut b = build(&[algorithm], &[], &s);
        let input = PickInput {
            key: Some(b"k"),
            random: 7,
            exclude: None,
        };
        assert_eq!(b.pick(&input), Some(0), "{algorithm}");
        b.update(0, down(ServerState::new(1)));
        for _ in 0..5 {
            assert_eq!(b.pick(&input), Some(1), "{algorithm}");
        }
        b.update(1, down(backup(1)));
        assert_eq!(b.pick(&input), Some(2), "{algorithm}");
        b.update(1, backup(1));
        assert_eq!(b.pick(&input), Some(1), "{algorithm}");
        b.update(0, ServerState::new(1));
        assert_eq!(b.pick(&input), Some(0), "{algorithm}");
    }
}

#[test]
fn allbackups_balances_all_backups_with_weights() {
    let s = [down(ServerState::new(1)), backup(1), backup(3), backup(0)];
    let algorithm = parse_balance(&["roundrobin"]).unwrap();
    let mut b = Balancer::new(&algorithm, HashType::default(), &s, true, None);
    assert_eq!(counts(&mut b, 400), [0, 100, 300, 0]);
    b.update(2, down(backup(3)));
    assert_eq!(counts(&mut b, 10), [0, 10, 0, 0]);
    b.update(0, ServerState::new(1));
    assert_eq!(counts(&mut b, 10), [10, 0, 0, 0]);
}

#[test]
fn exclude_avoids_a_server_when_another_exists() {
    for algorithm in ["roundrobin", "static-rr", "leastconn", "first", "random"] {
        let mut b = build(&[algorithm], &[], &servers(&[1, 1, 1]));
        for r in 0..30u64 {
            let input = PickInput {
                exclude: Some(1),
                random: r,
                key: None,
            };
            let s = b.pick(&input).unwrap();
            assert_ne!(s, 1, "{algorithm}");
        }
        let mut alone = build(&[algorithm], &[], &servers(&[0, 1, 0]));
        let input = PickInput {
            exclude: Some(1),
            ..PickInput::default()
        };
        assert_eq!(alone.pick(&input), Some(1), "{algorithm}");
    }
}

#[test]
fn a_server_added_at_run_time_takes_its_share_and_keeps_the_counts() {
    for algorithm in ["roundrobin", "leastconn", "first"] {
        let mut b = build(&[algorithm], &[], &servers(&[1]));
        b.connection_started(0);
        let index = b.add_server(ServerState::new(1), 2);
        assert_eq!(index, 1);
        assert_eq!(
            b.connections(0),
            1,
            "{algorithm}: counts survive the rebuild"
        );
        assert_eq!(b.server_count(), 2);
        b.connection_ended(0);
        let c = counts(&mut b, 1000);
        if algorithm == "first" {
            assert_eq!(c, [1000, 0], "first fills the lowest id first");
        } else {
            assert_eq!(c[0] + c[1], 1000);
            assert!(c[1] >= 400, "{algorithm}: the new server serves: {c:?}");
        }
    }
}
