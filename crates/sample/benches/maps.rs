//! Micro-benchmark of map lookups (issue #4, "maps indexed"): for each indexed method, a
//! 10,000-line map looked up through its index and through the reference linear scan, with
//! inputs of which about half find a line. Run with `cargo bench -p sluice-sample --bench
//! maps`; it prints nanoseconds per lookup (median of several rounds). Numbers, not
//! assertions: the checks that both ways agree are the unit tests of `map.rs`.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use sluice_sample::{MapProbe, MatchMethod, Sample};

const LINES: u64 = 10_000;

/// xorshift64*: the same maps and inputs on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Nanoseconds per call of `op` over `inputs` (median of 5 rounds of `calls` calls).
fn measure<T>(inputs: &[T], calls: usize, mut op: impl FnMut(&T) -> Option<usize>) -> f64 {
    let mut rounds = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let mut found = 0usize;
        for input in inputs.iter().cycle().take(calls) {
            found += usize::from(op(black_box(input)).is_some());
        }
        black_box(found);
        rounds.push(start.elapsed().as_nanos() as f64 / calls as f64);
    }
    rounds.sort_by(f64::total_cmp);
    rounds[rounds.len() / 2]
}

fn report<T>(name: &str, probe: &MapProbe, inputs: &[T], sample: impl Fn(&T) -> Sample<'_>) {
    let hits = inputs
        .iter()
        .filter(|i| probe.indexed(&sample(i)).is_some())
        .count();
    let linear = measure(inputs, 2_000, |i| probe.linear(&sample(i)));
    let indexed = measure(inputs, 1_000_000, |i| probe.indexed(&sample(i)));
    println!(
        "{name:<4} linear {linear:>9.0} ns/lookup   indexed {indexed:>6.1} ns/lookup   \
         x{:<6.0} ({}% hits)",
        linear / indexed,
        hits * 100 / inputs.len()
    );
}

fn main() {
    let mut rng = Rng(0x6d61_7073_0000_0001);

    // ip: IPv4 networks /16 to /32 in 10.0.0.0/8, a tenth IPv6 /32 to /64; inputs in
    // 10.0.0.0/8 (hits), 11.0.0.0/8 (misses) and 2001:db8::/32.
    let mut text = String::new();
    for i in 0..LINES {
        if i % 10 == 9 {
            let len = 32 + rng.below(33);
            text += &format!("2001:db8:{:x}::/{len} v{i}\n", rng.below(1 << 16));
        } else {
            let len = 16 + rng.below(17);
            let addr = Ipv4Addr::from(0x0a00_0000 | rng.below(1 << 24) as u32);
            text += &format!("{addr}/{len} v{i}\n");
        }
    }
    let probe = MapProbe::new(&text, MatchMethod::Ip).expect("ip map");
    let inputs: Vec<IpAddr> = (0..1024)
        .map(|i| match i % 4 {
            0 => IpAddr::V6(Ipv6Addr::from(
                (0x2001_0db8_u128 << 96) | (u128::from(rng.below(1 << 16)) << 80),
            )),
            1 => IpAddr::V4(Ipv4Addr::from(0x0b00_0000 | rng.below(1 << 24) as u32)),
            _ => IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | rng.below(1 << 24) as u32)),
        })
        .collect();
    report("ip", &probe, &inputs, |ip| Sample::Ip(*ip));

    // beg: URL prefixes; end and dom: host names; dir: path segments. Half the inputs name
    // a key of the map, half a name it does not hold.
    let names: Vec<String> = (0..LINES)
        .map(|_| format!("svc{:x}", rng.below(1 << 20)))
        .collect();
    let word = |rng: &mut Rng| {
        if rng.below(2) == 0 {
            names[rng.below(LINES) as usize].clone()
        } else {
            format!("zz{:x}", rng.below(1 << 20))
        }
    };
    type Shape = fn(&str) -> String;
    let cases: [(&str, MatchMethod, Shape, Shape); 4] = [
        (
            "beg",
            MatchMethod::Beg,
            |n| format!("/api/{n}/"),
            |n| format!("/api/{n}/users/42?full=1"),
        ),
        (
            "end",
            MatchMethod::End,
            |n| format!(".{n}.example.com"),
            |n| format!("www.{n}.example.com"),
        ),
        (
            "dom",
            MatchMethod::Dom,
            |n| format!("{n}.example.com"),
            |n| format!("www.{n}.example.com"),
        ),
        (
            "dir",
            MatchMethod::Dir,
            |n| n.to_string(),
            |n| format!("/static/{n}/app.js"),
        ),
    ];
    for (name, method, key, input) in cases {
        let text: String = names
            .iter()
            .enumerate()
            .map(|(i, n)| format!("{} v{i}\n", key(n)))
            .collect();
        let probe = MapProbe::new(&text, method).expect("string map");
        let inputs: Vec<String> = (0..1024).map(|_| input(&word(&mut rng))).collect();
        report(name, &probe, &inputs, |s| Sample::str(s.as_bytes()));
    }
}
