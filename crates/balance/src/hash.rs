//! Hash functions of the hash-based algorithms (`balance source|uri|url_param|hdr|hash`) and of
//! `hash-type` (configuration.txt §4.2 "hash-type"): sdbm, djb2, wt6, crc32, the `none`
//! pass-through, and the `avalanche` modifier. [`hash`] is the entry point the
//! [`Balancer`](crate::Balancer) uses on the key the caller extracted.
//!
//! Each function was written from its public definition and checked against what HAProxy 2.6's
//! `sdbm`, `djb2`, `wt6` and `crc32` converters print for the same bytes (the manual, §7.3.1, says
//! those converters use the very functions of the balance algorithms); the vectors are in the tests.
//! Matching bit for bit matters: a cache farm moved from HAProxy to Sluice keeps its key → server
//! mapping instead of starting cold.

use crate::config::HashFunction;

/// Hashes `data` with `function`, then applies [`avalanche`] when `avalanche` is set, as
/// `hash-type <method> <function> [avalanche]` asks.
pub fn hash(function: HashFunction, avalanche_modifier: bool, data: &[u8]) -> u32 {
    let raw = match function {
        HashFunction::Sdbm => sdbm(data),
        HashFunction::Djb2 => djb2(data),
        HashFunction::Wt6 => wt6(data),
        HashFunction::Crc32 => crc32(data),
        HashFunction::None => integer_key(data),
    };
    if avalanche_modifier {
        avalanche(raw)
    } else {
        raw
    }
}

/// The sdbm string hash (from the public-domain sdbm database library): for each byte,
/// `h = byte + (h << 6) + (h << 16) - h`, starting from 0, modulo 2³².
pub fn sdbm(data: &[u8]) -> u32 {
    sdbm_from(0, data)
}

/// Goes on with an sdbm hash whose state after the bytes before `data` is `h`, so that a key
/// made of several pieces is hashed without gluing them: `sdbm_from(sdbm(a), b)` is
/// `sdbm(a ++ b)`.
pub fn sdbm_from(h: u32, data: &[u8]) -> u32 {
    data.iter().fold(h, |h, &b| {
        u32::from(b)
            .wrapping_add(h << 6)
            .wrapping_add(h << 16)
            .wrapping_sub(h)
    })
}

/// Dan Bernstein's djb2 string hash: start from 5381, then `h = h * 33 + byte` modulo 2³².
pub fn djb2(data: &[u8]) -> u32 {
    data.iter().fold(5381u32, |h, &b| {
        h.wrapping_mul(33).wrapping_add(u32::from(b))
    })
}

/// HAProxy's wt6 hash: two 32-bit accumulators that each byte inverts and adds into, then swaps
/// with rotations whose amounts are themselves taken from the state, so that the mixing depends on
/// the data seen so far ("much less sensible to the input data set", §4.2 "hash-type").
pub fn wt6(data: &[u8]) -> u32 {
    let mut h0: u32 = 0xa53c_965a;
    let mut h1: u32 = 0x5ca6_953a;
    let mut rot0: u32 = 6;
    let mut rot1: u32 = 18;
    for &b in data {
        let b = u32::from(b);
        h0 = !(h0 ^ b);
        h1 = !h1.wrapping_add(b);
        let next0 = h1.rotate_left(rot0);
        h1 = h0.rotate_left(rot1);
        h0 = next0;
        let t = ((h0 >> 16) ^ h1) & 0xffff;
        rot0 = t & 0x1f;
        rot1 = t >> 11;
    }
    h0 ^ h1
}

/// The common CRC-32 (IEEE 802.3, as in Ethernet, gzip and PNG): reflected polynomial
/// 0xEDB88320, initial value and final XOR 0xFFFFFFFF. `crc32(b"123456789") == 0xCBF43926`.
pub fn crc32(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |crc, &b| {
        CRC32_TABLE[usize::from((crc as u8) ^ b)] ^ (crc >> 8)
    })
}

/// One table entry per byte value, computed at compile time: the CRC of that byte alone.
static CRC32_TABLE: [u32; 256] = crc32_table();

const fn crc32_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// The `avalanche` modifier: a 4-byte full avalanche hash so that every input bit flips about
/// half of the output bits. It is Bob Jenkins' six-step integer hash ("4-byte integer hashing",
/// burtleburtle.net/bob/hash/integer.html) followed by a multiplication by 3221225473
/// (0xC0000001), which is what HAProxy applies; the result matches its `sdbm(1)`-style converters.
pub fn avalanche(x: u32) -> u32 {
    let mut a = x;
    a = a.wrapping_add(0x7ed5_5d16).wrapping_add(a << 12);
    a = (a ^ 0xc761_c23c) ^ (a >> 19);
    a = a.wrapping_add(0x1656_67b1).wrapping_add(a << 5);
    a = a.wrapping_add(0xd3a2_646c) ^ (a << 9);
    a = a.wrapping_add(0xfd70_46c5).wrapping_add(a << 3);
    a = (a ^ 0xb55a_4f09) ^ (a >> 16);
    a.wrapping_mul(3_221_225_473)
}

/// `hash-type ... none`: the key is already a number (typically from a converter) and is used as
/// the hash. It is read as a decimal integer with an optional sign (`-1` gives 0xFFFFFFFF, as a
/// 64-bit integer cast to 32 bits would); reading stops at the first non-digit, and a key that
/// does not start with a number gives 0. Leading and trailing ASCII spaces are ignored.
pub fn integer_key(data: &[u8]) -> u32 {
    let text = data.trim_ascii();
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    let value = digits
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0u64, |v, &d| {
            v.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))
        });
    let value = if negative {
        value.wrapping_neg()
    } else {
        value
    };
    value as u32
}

/// `balance source` does not run a string hash over the address: the address is cut into
/// big-endian 32-bit words that are XOR-ed together (an IPv4 address is thus its own hash),
/// and only the avalanche modifier applies afterwards. This is what HAProxy does (checked with
/// HAProxy 2.6: 127.0.0.1 and 127.0.0.2 land on servers 2 and 1 of a two-server map). Trailing
/// bytes that do not fill a word are ignored.
pub fn fold_words(data: &[u8]) -> u32 {
    data.chunks_exact(4)
        .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
        .fold(0, |h, w| h ^ w)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    // Expected values printed by HAProxy 2.6.12's converters (`req.hdr(x-k),sdbm`,
    // `...,sdbm(1)` for the avalanche column, and likewise for djb2, wt6, crc32).
    const VECTORS: [(&str, [u32; 8]); 4] = [
        (
            "a",
            [
                97, 1830748055, 177670, 3548763807, 1900802597, 1986649387, 3904355907, 1288200982,
            ],
        ),
        (
            "123456789",
            [
                1755344949, 3400502718, 902675330, 2717138294, 2225171485, 4053691039, 3421780262,
                1130417534,
            ],
        ),
        (
            "hello world",
            [
                430867652, 261123301, 894552257, 2328455893, 1866899626, 2174767729, 222957957,
                2832483188,
            ],
        ),
        (
            "abc",
            [
                807794786, 659243622, 193485963, 2235766107, 2483038440, 266135527, 891568578,
                930845320,
            ],
        ),
    ];

    #[test]
    fn functions_match_haproxy_converters() {
        let functions = [
            HashFunction::Sdbm,
            HashFunction::Djb2,
            HashFunction::Wt6,
            HashFunction::Crc32,
        ];
        for (input, expected) in VECTORS {
            for (f, function) in functions.iter().enumerate() {
                assert_eq!(
                    hash(*function, false, input.as_bytes()),
                    expected[2 * f],
                    "{function:?}({input})"
                );
                assert_eq!(
                    hash(*function, true, input.as_bytes()),
                    expected[2 * f + 1],
                    "{function:?}({input}) avalanche"
                );
            }
        }
    }

    #[test]
    fn crc32_public_check_values() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
    }

    #[test]
    fn empty_inputs_give_the_initial_states() {
        assert_eq!(sdbm(b""), 0);
        assert_eq!(djb2(b""), 5381);
        assert_eq!(wt6(b""), 0xa53c_965a ^ 0x5ca6_953a);
        // By hand: djb2("a") = 5381 * 33 + 97.
        assert_eq!(djb2(b"a"), 5381 * 33 + 97);
        // sdbm of one byte is the byte: the shifts of 0 vanish.
        assert_eq!(sdbm(b"z"), u32::from(b'z'));
    }

    #[test]
    fn avalanche_spreads_neighbouring_values() {
        let a = avalanche(1);
        let b = avalanche(2);
        assert!((a ^ b).count_ones() >= 8, "{a:#x} vs {b:#x}");
        assert_ne!(avalanche(0), 0);
    }

    #[test]
    fn none_reads_a_decimal_integer() {
        assert_eq!(integer_key(b"42"), 42);
        assert_eq!(integer_key(b" 42 "), 42);
        assert_eq!(integer_key(b"+7"), 7);
        assert_eq!(integer_key(b"-1"), u32::MAX);
        assert_eq!(integer_key(b"12abc"), 12);
        assert_eq!(integer_key(b"abc"), 0);
        assert_eq!(integer_key(b""), 0);
        assert_eq!(integer_key(b"4294967296"), 0);
        // Wraps rather than panics on overflow.
        let _ = integer_key(b"99999999999999999999999");
        assert_eq!(hash(HashFunction::None, false, b"17"), 17);
        assert_eq!(hash(HashFunction::None, true, b"17"), avalanche(17));
    }

    #[test]
    fn source_words_are_xored() {
        assert_eq!(fold_words(&[127, 0, 0, 1]), 0x7f00_0001);
        assert_eq!(fold_words(&[0, 0, 0, 1, 0, 0, 0, 3]), 2);
        assert_eq!(fold_words(&[1, 2, 3]), 0);
        assert_eq!(fold_words(&[]), 0);
    }
}
