//! Encoding converters (configuration.txt §7.3.1): `base64`, `b64dec`, `ub64enc`,
//! `ub64dec`, `hex`, `hex2i`, `be2dec`, `le2dec`, `be2hex`, `json`, `url_dec`, `url_enc`.
//!
//! Hexadecimal output is upper-case, as HAProxy writes it. `json` escapes a string for use
//! inside a JSON string, decoding its input as ASCII (the default) or UTF-8 with the error
//! policies the manual lists (`utf8`, `utf8s`, `utf8p`, `utf8ps`).

use std::borrow::Cow;

use super::{Built, ConvBuild, Convert, Table, def, into_bytes, to_hex};
use crate::args::{int_arg, str_arg};
use crate::context::Context;
use crate::value::{Sample, SampleType};

const STR: Option<SampleType> = Some(SampleType::Str);
const BIN: Option<SampleType> = Some(SampleType::Bin);

/// How `json` reads its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Utf8Policy {
    /// Drop characters in error instead of failing.
    silent: bool,
    /// Accept overlong encodings as the character they encode.
    permissive: bool,
}

/// A compiled encoding converter.
#[derive(Debug)]
enum Encode {
    Base64 {
        url: bool,
    },
    Base64Decode {
        url: bool,
    },
    Hex,
    Hex2i,
    ToDecimal {
        sep: Vec<u8>,
        chunk: usize,
        truncate: bool,
        little: bool,
    },
    ToHex {
        sep: Vec<u8>,
        chunk: usize,
        truncate: bool,
    },
    Json(Option<Utf8Policy>),
    PercentDecode {
        form: bool,
    },
    Percent,
}

impl Convert for Encode {
    fn convert<'a>(&'a self, input: Sample<'a>, _: &'a dyn Context) -> Option<Sample<'a>> {
        let bytes = into_bytes(input)?;
        let text = |v: Vec<u8>| Some(Sample::Str(Cow::Owned(v)));
        match self {
            Encode::Base64 { url } => text(base64_encode(&bytes, *url)),
            Encode::Base64Decode { url: false } => {
                base64_decode(&bytes, false).map(|v| Sample::Bin(Cow::Owned(v)))
            }
            Encode::Base64Decode { url: true } => base64_decode(&bytes, true).and_then(text),
            Encode::Hex => {
                let mut out = Vec::with_capacity(bytes.len() * 2);
                to_hex(&bytes, &mut out);
                text(out)
            }
            Encode::Hex2i => {
                let digits = std::str::from_utf8(&bytes).ok();
                let value = digits
                    .and_then(|d| u64::from_str_radix(d, 16).ok())
                    .unwrap_or(0);
                Some(Sample::Int(value as i64))
            }
            Encode::ToDecimal {
                sep,
                chunk,
                truncate,
                little,
            } => {
                let mut out = Vec::new();
                for (i, part) in chunks(&bytes, *chunk, *truncate).enumerate() {
                    if i > 0 {
                        out.extend_from_slice(sep);
                    }
                    let mut value: u64 = 0;
                    let mut push = |b: &u8| value = (value << 8) | u64::from(*b);
                    if *little {
                        part.iter().rev().for_each(&mut push);
                    } else {
                        part.iter().for_each(&mut push);
                    }
                    out.extend_from_slice(value.to_string().as_bytes());
                }
                text(out)
            }
            Encode::ToHex {
                sep,
                chunk,
                truncate,
            } => {
                let mut out = Vec::new();
                for (i, part) in chunks(&bytes, *chunk, *truncate).enumerate() {
                    if i > 0 {
                        out.extend_from_slice(sep);
                    }
                    to_hex(part, &mut out);
                }
                text(out)
            }
            Encode::Json(policy) => json_escape(&bytes, *policy).and_then(text),
            Encode::PercentDecode { form } => url_decode(&bytes, *form).and_then(text),
            Encode::Percent => {
                let mut out = Vec::with_capacity(bytes.len());
                for &b in bytes.iter() {
                    if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                        out.push(b);
                    } else {
                        out.push(b'%');
                        to_hex(&[b], &mut out);
                    }
                }
                text(out)
            }
        }
    }
}

/// The input cut in chunks of `size` bytes (`size` 0: one chunk), the last partial one
/// dropped when `truncate`.
fn chunks(bytes: &[u8], size: usize, truncate: bool) -> impl Iterator<Item = &[u8]> {
    let size = if size == 0 { bytes.len().max(1) } else { size };
    bytes
        .chunks(size)
        .filter(move |c| !truncate || c.len() == size)
}

const STD_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64 (RFC 4648 §4, padded) or base64url (§5, unpadded).
pub(crate) fn base64_encode(input: &[u8], url: bool) -> Vec<u8> {
    let alphabet = if url { URL_ALPHABET } else { STD_ALPHABET };
    let mut out = Vec::with_capacity(input.len().div_ceil(3) * 4);
    for group in input.chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | (u32::from(b) << (16 - 8 * i)));
        for i in 0..=group.len() {
            out.push(alphabet[((n >> (18 - 6 * i)) & 63) as usize]);
        }
        if !url {
            out.extend(std::iter::repeat_n(b'=', 3 - group.len()));
        }
    }
    out
}

/// Decodes base64 (length a multiple of 4, `=` padding) or base64url (padding optional).
pub(crate) fn base64_decode(input: &[u8], url: bool) -> Option<Vec<u8>> {
    let alphabet = if url { URL_ALPHABET } else { STD_ALPHABET };
    let data = match input.iter().position(|&b| b == b'=') {
        Some(pad) => {
            let padding = &input[pad..];
            if padding.len() > 2
                || padding.iter().any(|&b| b != b'=')
                || !input.len().is_multiple_of(4)
            {
                return None;
            }
            &input[..pad]
        }
        None if !url && !input.len().is_multiple_of(4) => return None,
        None => input,
    };
    if data.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() * 3 / 4);
    for group in data.chunks(4) {
        let mut n = 0u32;
        for (i, b) in group.iter().enumerate() {
            let v = alphabet.iter().position(|a| a == b)?;
            n |= (v as u32) << (18 - 6 * i);
        }
        for i in 0..group.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    Some(out)
}

/// Percent-decodes `input`; `+` becomes a space in a form (`form`) or after a `?`. A `%`
/// not followed by two hexadecimal digits fails the conversion.
fn url_decode(input: &[u8], form: bool) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len());
    let mut in_query = form;
    let mut i = 0;
    while let Some(&b) = input.get(i) {
        i += 1;
        match b {
            b'%' => {
                let hex = input
                    .get(i..i + 2)
                    .and_then(|h| std::str::from_utf8(h).ok())?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b'+' if in_query => out.push(b' '),
            b'?' => {
                in_query = true;
                out.push(b);
            }
            _ => out.push(b),
        }
    }
    Some(out)
}

/// One character decoded from UTF-8, or why it could not be.
enum Decoded {
    /// A valid character and the bytes it took.
    Char(u32, usize),
    /// An overlong encoding of a character, and the bytes it took.
    Overlong(u32, usize),
    /// An invalid sequence, range or a character beyond U+FFFF (which a JSON `\u` escape
    /// cannot hold), and the bytes to skip.
    Error(usize),
}

fn decode_utf8(s: &[u8]) -> Decoded {
    let Some(&lead) = s.first() else {
        return Decoded::Error(1);
    };
    let (len, init, min) = match lead {
        0x00..=0x7f => return Decoded::Char(u32::from(lead), 1),
        0xc0..=0xdf => (2, u32::from(lead & 0x1f), 0x80),
        0xe0..=0xef => (3, u32::from(lead & 0x0f), 0x800),
        0xf0..=0xf7 => (4, u32::from(lead & 0x07), 0x10000),
        _ => return Decoded::Error(1),
    };
    let mut cp = init;
    for i in 1..len {
        match s.get(i) {
            Some(&c) if c & 0xc0 == 0x80 => cp = (cp << 6) | u32::from(c & 0x3f),
            _ => return Decoded::Error(1),
        }
    }
    if (0xd800..=0xdfff).contains(&cp) || cp > 0xffff {
        Decoded::Error(len)
    } else if cp < min {
        Decoded::Overlong(cp, len)
    } else {
        Decoded::Char(cp, len)
    }
}

/// Escapes `input` for a JSON string: `"`, `\` and `/` get a backslash, control characters
/// their short escape or `\u00XX`, and everything outside printable ASCII a `\uXXXX` of its
/// byte (ASCII mode) or of its character (UTF-8 modes). `None` when a UTF-8 error makes a
/// strict mode fail.
fn json_escape(input: &[u8], policy: Option<Utf8Policy>) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len() + 8);
    let mut i = 0;
    while i < input.len() {
        let rest = &input[i..];
        let (cp, used) = match policy {
            None => (u32::from(rest[0]), 1),
            Some(p) => match decode_utf8(rest) {
                Decoded::Char(cp, n) => (cp, n),
                Decoded::Overlong(cp, n) if p.permissive => (cp, n),
                Decoded::Overlong(_, n) | Decoded::Error(n) if p.silent => {
                    i += n;
                    continue;
                }
                _ => return None,
            },
        };
        i += used;
        match cp {
            0x22 => out.extend_from_slice(b"\\\""),
            0x5c => out.extend_from_slice(b"\\\\"),
            0x2f => out.extend_from_slice(b"\\/"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0x0a => out.extend_from_slice(b"\\n"),
            0x0d => out.extend_from_slice(b"\\r"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x20..=0x7e => out.push(cp as u8),
            _ => out.extend_from_slice(format!("\\u{cp:04x}").as_bytes()),
        }
    }
    Some(out)
}

fn build(b: &ConvBuild<'_>) -> Result<Built, String> {
    let str_out = |e: Encode| Built::new(e, SampleType::Str);
    match b.name {
        "base64" => str_out(Encode::Base64 { url: false }),
        "ub64enc" => str_out(Encode::Base64 { url: true }),
        "b64dec" => Built::new(Encode::Base64Decode { url: false }, SampleType::Bin),
        "ub64dec" => str_out(Encode::Base64Decode { url: true }),
        "hex" => str_out(Encode::Hex),
        "hex2i" => Built::new(Encode::Hex2i, SampleType::Int),
        "be2dec" | "le2dec" => {
            let chunk = int_arg(b.args, 1)?.unwrap_or(0);
            let chunk = usize::try_from(chunk)
                .ok()
                .filter(|c| (1..=8).contains(c))
                .ok_or_else(|| format!("chunk_size out of range ({chunk}, expected 1 to 8)"))?;
            str_out(Encode::ToDecimal {
                sep: str_arg(b.args, 0).unwrap_or("").as_bytes().to_vec(),
                chunk,
                truncate: int_arg(b.args, 2)?.unwrap_or(0) != 0,
                little: b.name == "le2dec",
            })
        }
        "be2hex" => {
            let sep = str_arg(b.args, 0).unwrap_or("").as_bytes().to_vec();
            let chunk = int_arg(b.args, 1)?.unwrap_or(0);
            if (!sep.is_empty() && chunk <= 0) || chunk < 0 {
                return Err(format!("chunk_size needs to be positive ({chunk})"));
            }
            str_out(Encode::ToHex {
                sep,
                chunk: usize::try_from(chunk).unwrap_or(0),
                truncate: int_arg(b.args, 2)?.unwrap_or(0) != 0,
            })
        }
        "json" => {
            let policy = match str_arg(b.args, 0).unwrap_or("ascii") {
                "" | "ascii" => None,
                "utf8" => Some(Utf8Policy {
                    silent: false,
                    permissive: false,
                }),
                "utf8s" => Some(Utf8Policy {
                    silent: true,
                    permissive: false,
                }),
                "utf8p" => Some(Utf8Policy {
                    silent: false,
                    permissive: true,
                }),
                "utf8ps" => Some(Utf8Policy {
                    silent: true,
                    permissive: true,
                }),
                other => {
                    return Err(format!(
                        "unexpected input code type '{other}' (expected ascii, utf8, utf8s, utf8p or utf8ps)"
                    ));
                }
            };
            str_out(Encode::Json(policy))
        }
        "url_dec" => str_out(Encode::PercentDecode {
            form: int_arg(b.args, 0)?.unwrap_or(0) != 0,
        }),
        _ => match str_arg(b.args, 0) {
            None | Some("" | "query") => str_out(Encode::Percent),
            Some(other) => Err(format!(
                "unsupported encoding type '{other}' (only 'query')"
            )),
        },
    }
}

/// The encoding converters.
pub(super) static CONVERTERS: Table = &[
    ("base64", def(0, 0, BIN, build)),
    ("ub64enc", def(0, 0, BIN, build)),
    ("b64dec", def(0, 0, STR, build)),
    ("ub64dec", def(0, 0, STR, build)),
    ("hex", def(0, 0, BIN, build)),
    ("hex2i", def(0, 0, STR, build)),
    ("be2dec", def(2, 3, BIN, build)),
    ("le2dec", def(2, 3, BIN, build)),
    ("be2hex", def(0, 3, BIN, build)),
    ("json", def(0, 1, STR, build)),
    ("url_dec", def(0, 1, STR, build)),
    ("url_enc", def(0, 1, STR, build)),
];
