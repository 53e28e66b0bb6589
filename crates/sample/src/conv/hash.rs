//! Hash converters (configuration.txt §7.3.1): the 32-bit hashes of the hash-based balance
//! algorithms (`crc32`, `crc32c`, `djb2`, `sdbm`, `wt6`, each with an optional avalanche
//! step), the XXHash family (`xxh32`, `xxh64`, `xxh3`), and the cryptographic digests
//! (`sha1`, `sha2`, `digest`, `hmac`) computed with the RustCrypto crates.
//!
//! The 32-bit hashes give the same numbers as HAProxy for the same input (the unit tests
//! hold values HAProxy printed), so stick-table keys and logs stay comparable.

use std::borrow::Cow;

use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::{Digest, Sha224, Sha256, Sha384, Sha512};
use sluice_balance::hash as balance_hash;

use super::encode::base64_decode;
use super::{Built, ConvBuild, Convert, Table, def, into_bytes, var_bytes};
use crate::args::{bad_arg, int_arg, is_var_name, str_arg};
use crate::context::Context;
use crate::value::{Sample, SampleType};

const BIN: Option<SampleType> = Some(SampleType::Bin);

/// A 32-bit hash function of the balance algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hash32 {
    Crc32,
    Crc32c,
    Djb2,
    Sdbm,
    Wt6,
}

/// A digest algorithm of `sha2`, `digest` and `hmac`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Algo {
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
}

/// Where `hmac` finds its key.
#[derive(Debug)]
enum Key {
    /// Decoded once from the base64 argument.
    Fixed(Vec<u8>),
    /// A variable holding the base64 key.
    Var(String),
}

/// A compiled hash converter.
#[derive(Debug)]
enum HashConv {
    Hash32 { f: Hash32, avalanche: bool },
    Xxh32(u32),
    Xxh64(u64),
    Xxh3(u64),
    Digest(Algo),
    Hmac(Algo, Key),
}

impl Convert for HashConv {
    fn convert<'a>(&'a self, input: Sample<'a>, ctx: &'a dyn Context) -> Option<Sample<'a>> {
        let data = into_bytes(input)?;
        let bin = |v: Vec<u8>| Some(Sample::Bin(Cow::Owned(v)));
        match self {
            HashConv::Hash32 { f, avalanche } => {
                let h = hash32(*f, &data);
                let h = if *avalanche {
                    balance_hash::avalanche(h)
                } else {
                    h
                };
                Some(Sample::Int(i64::from(h)))
            }
            HashConv::Xxh32(seed) => Some(Sample::Int(i64::from(xxhash_rust::xxh32::xxh32(
                &data, *seed,
            )))),
            HashConv::Xxh64(seed) => {
                Some(Sample::Int(xxhash_rust::xxh64::xxh64(&data, *seed) as i64))
            }
            HashConv::Xxh3(seed) => Some(Sample::Int(xxhash_rust::xxh3::xxh3_64_with_seed(
                &data, *seed,
            ) as i64)),
            HashConv::Digest(algo) => bin(digest(*algo, &data)),
            HashConv::Hmac(algo, key) => {
                let key = match key {
                    Key::Fixed(k) => Cow::Borrowed(&k[..]),
                    Key::Var(name) => Cow::Owned(base64_decode(&var_bytes(ctx, name)?, false)?),
                };
                bin(hmac(*algo, &key, &data)?)
            }
        }
    }
}

/// CRC lookup table for a reflected polynomial.
const fn crc_table(poly: u32) -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { poly ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// CRC-32C (Castagnoli, RFC 4960 appendix B).
static CRC32C_TABLE: [u32; 256] = crc_table(0x82f6_3b78);

fn crc(table: &[u32; 256], data: &[u8]) -> u32 {
    !data
        .iter()
        .fold(!0u32, |c, &b| table[usize::from((c as u8) ^ b)] ^ (c >> 8))
}

/// The 32-bit hashes; those `balance` also uses come from sluice-balance, so a converter
/// and a hash-based algorithm always agree on a key's value.
fn hash32(f: Hash32, data: &[u8]) -> u32 {
    match f {
        Hash32::Crc32 => balance_hash::crc32(data),
        Hash32::Crc32c => crc(&CRC32C_TABLE, data),
        Hash32::Djb2 => balance_hash::djb2(data),
        Hash32::Sdbm => balance_hash::sdbm(data),
        Hash32::Wt6 => balance_hash::wt6(data),
    }
}

fn digest(algo: Algo, data: &[u8]) -> Vec<u8> {
    match algo {
        Algo::Sha1 => Sha1::digest(data).to_vec(),
        Algo::Sha224 => Sha224::digest(data).to_vec(),
        Algo::Sha256 => Sha256::digest(data).to_vec(),
        Algo::Sha384 => Sha384::digest(data).to_vec(),
        Algo::Sha512 => Sha512::digest(data).to_vec(),
    }
}

fn hmac(algo: Algo, key: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Option<Vec<u8>> {
        let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key).ok()?;
        mac.update(data);
        Some(mac.finalize().into_bytes().to_vec())
    }
    match algo {
        Algo::Sha1 => run::<Hmac<Sha1>>(key, data),
        Algo::Sha224 => run::<Hmac<Sha224>>(key, data),
        Algo::Sha256 => run::<Hmac<Sha256>>(key, data),
        Algo::Sha384 => run::<Hmac<Sha384>>(key, data),
        Algo::Sha512 => run::<Hmac<Sha512>>(key, data),
    }
}

fn algo_arg(text: &str) -> Result<Algo, String> {
    match text.to_ascii_lowercase().as_str() {
        "sha1" => Ok(Algo::Sha1),
        "sha224" => Ok(Algo::Sha224),
        "sha256" => Ok(Algo::Sha256),
        "sha384" => Ok(Algo::Sha384),
        "sha512" => Ok(Algo::Sha512),
        _ => Err(format!(
            "unsupported digest algorithm '{text}' (Sluice has sha1, sha224, sha256, sha384 and sha512)"
        )),
    }
}

fn build(b: &ConvBuild<'_>) -> Result<Built, String> {
    let int_out = |h: HashConv| Built::new(h, SampleType::Int);
    let bin_out = |h: HashConv| Built::new(h, SampleType::Bin);
    let f = match b.name {
        "crc32" => Hash32::Crc32,
        "crc32c" => Hash32::Crc32c,
        "djb2" => Hash32::Djb2,
        "sdbm" => Hash32::Sdbm,
        "wt6" => Hash32::Wt6,
        "xxh32" => {
            let seed = int_arg(b.args, 0)?.unwrap_or(0);
            return int_out(HashConv::Xxh32(seed as u32));
        }
        "xxh64" => return int_out(HashConv::Xxh64(int_arg(b.args, 0)?.unwrap_or(0) as u64)),
        "xxh3" => return int_out(HashConv::Xxh3(int_arg(b.args, 0)?.unwrap_or(0) as u64)),
        "sha1" => return bin_out(HashConv::Digest(Algo::Sha1)),
        "sha2" => {
            let algo = match int_arg(b.args, 0)?.unwrap_or(256) {
                224 => Algo::Sha224,
                256 => Algo::Sha256,
                384 => Algo::Sha384,
                512 => Algo::Sha512,
                bits => {
                    return Err(format!(
                        "unsupported number of bits: '{bits}' (224, 256, 384 or 512)"
                    ));
                }
            };
            return bin_out(HashConv::Digest(algo));
        }
        "digest" => {
            return bin_out(HashConv::Digest(algo_arg(
                str_arg(b.args, 0).unwrap_or(""),
            )?));
        }
        "hmac" => {
            let algo = algo_arg(str_arg(b.args, 0).unwrap_or(""))?;
            let text = str_arg(b.args, 1).unwrap_or("");
            let key = if is_var_name(text) {
                Key::Var(text.to_string())
            } else {
                Key::Fixed(
                    base64_decode(text.as_bytes(), false)
                        .ok_or_else(|| bad_arg(text, "base64 key or variable", 1))?,
                )
            };
            return bin_out(HashConv::Hmac(algo, key));
        }
        _ => return Err(format!("no hash '{}'", b.name)),
    };
    let avalanche = int_arg(b.args, 0)?.unwrap_or(0) == 1;
    int_out(HashConv::Hash32 { f, avalanche })
}

/// The hash converters.
pub(super) static CONVERTERS: Table = &[
    ("crc32", def(0, 1, BIN, build)),
    ("crc32c", def(0, 1, BIN, build)),
    ("djb2", def(0, 1, BIN, build)),
    ("sdbm", def(0, 1, BIN, build)),
    ("wt6", def(0, 1, BIN, build)),
    ("xxh32", def(0, 1, BIN, build)),
    ("xxh64", def(0, 1, BIN, build)),
    ("xxh3", def(0, 1, BIN, build)),
    ("sha1", def(0, 0, BIN, build)),
    ("sha2", def(0, 1, BIN, build)),
    ("digest", def(1, 1, BIN, build)),
    ("hmac", def(2, 2, BIN, build)),
];
