//! String converters (configuration.txt §7.3.1): case, length, slicing (`bytes`, `field`,
//! `word`, `ltrim`, `rtrim`, `cut_crlf`, `param`), `reverse`, the parts of a Host value
//! (`host_only`, `port_only`), `regsub`, `iif`, building
//! strings from variables (`concat`, `add_item`), comparisons with variables (`strcmp`,
//! `secure_memcmp`), and `debug`.
//!
//! Slicing converters return a borrowed part of a borrowed input; `lower` and `upper` copy
//! only when a byte actually changes.

use std::borrow::Cow;

use regex::bytes::{Regex, RegexBuilder};

use super::{
    Built, ConvBuild, Convert, IntOrVar, Table, def, into_bytes, slice_cow, var_binary, var_bytes,
};
use crate::args::{int_arg, str_arg, var_arg};
use crate::context::Context;
use crate::value::{Sample, SampleType};

const STR: Option<SampleType> = Some(SampleType::Str);
const BIN: Option<SampleType> = Some(SampleType::Bin);

/// A compiled string converter.
#[derive(Debug)]
enum Text {
    Lower,
    Upper,
    Length,
    Bytes {
        offset: IntOrVar,
        length: Option<IntOrVar>,
    },
    Field {
        index: i64,
        delims: Vec<u8>,
        count: usize,
        words: bool,
    },
    LTrim(Vec<u8>),
    RTrim(Vec<u8>),
    CutCrlf,
    Reverse,
    HostOnly,
    PortOnly,
    Param {
        name: Vec<u8>,
        delim: u8,
    },
    Regsub {
        regex: Regex,
        subst: Vec<Piece>,
        global: bool,
    },
    Concat {
        start: Vec<u8>,
        var: Option<String>,
        end: Vec<u8>,
    },
    AddItem {
        delim: Vec<u8>,
        var: Option<String>,
        suffix: Vec<u8>,
    },
    Strcmp(String),
    SecureMemcmp(String),
}

impl Convert for Text {
    fn convert<'a>(&'a self, input: Sample<'a>, ctx: &'a dyn Context) -> Option<Sample<'a>> {
        let bytes = into_bytes(input)?;
        let out = match self {
            Text::Lower => change_case(bytes, |b| b.is_ascii_uppercase(), u8::to_ascii_lowercase),
            Text::Upper => change_case(bytes, |b| b.is_ascii_lowercase(), u8::to_ascii_uppercase),
            Text::Length => return Some(Sample::Int(i64::try_from(bytes.len()).ok()?)),
            Text::Bytes { offset, length } => {
                let offset = offset.get(ctx)?;
                let length = match length {
                    Some(l) => Some(l.get(ctx)?),
                    None => None,
                };
                // An invalid offset or length gives an empty sample, not a failure.
                let start = usize::try_from(offset).ok().filter(|&o| o < bytes.len());
                let len = length.map_or(Some(usize::MAX), |l| usize::try_from(l).ok());
                return Some(Sample::Bin(match (start, len) {
                    (Some(start), Some(len)) => slice_cow(bytes, start, start.saturating_add(len)),
                    _ => Cow::Borrowed(&[]),
                }));
            }
            Text::Field {
                index,
                delims,
                count,
                words,
            } => {
                let (start, end) = select(&bytes, delims, *index, *count, *words)?;
                slice_cow(bytes, start, end)
            }
            Text::LTrim(chars) => {
                let start = bytes
                    .iter()
                    .position(|b| !chars.contains(b))
                    .unwrap_or(bytes.len());
                let len = bytes.len();
                slice_cow(bytes, start, len)
            }
            Text::RTrim(chars) => {
                let end = bytes
                    .iter()
                    .rposition(|b| !chars.contains(b))
                    .map_or(0, |e| e + 1);
                slice_cow(bytes, 0, end)
            }
            Text::CutCrlf => {
                let end = bytes
                    .iter()
                    .position(|&b| b == b'\r' || b == b'\n')
                    .unwrap_or(bytes.len());
                slice_cow(bytes, 0, end)
            }
            Text::Reverse => Cow::Owned(bytes.iter().rev().copied().collect()),
            Text::HostOnly => {
                let host = host_and_port(&bytes).0;
                Cow::Owned(host.to_ascii_lowercase())
            }
            Text::PortOnly => {
                // No port (or an empty one) is 0; one that is not a number gives nothing.
                let port = match host_and_port(&bytes).1 {
                    None | Some([]) => 0,
                    Some(digits) => std::str::from_utf8(digits).ok()?.parse::<u32>().ok()?,
                };
                return Some(Sample::Int(i64::from(port)));
            }
            Text::Param { name, delim } => {
                let (start, end) = find_param(&bytes, name, *delim)?;
                slice_cow(bytes, start, end)
            }
            Text::Regsub {
                regex,
                subst,
                global,
            } => regsub(bytes, regex, subst, *global),
            Text::Concat { start, var, end } => {
                let value = var.as_deref().and_then(|v| var_bytes(ctx, v));
                let value = value.as_deref().unwrap_or_default();
                let mut joined =
                    Vec::with_capacity(bytes.len() + start.len() + value.len() + end.len());
                for part in [&bytes[..], start, value, end] {
                    joined.extend_from_slice(part);
                }
                Cow::Owned(joined)
            }
            Text::AddItem { delim, var, suffix } => {
                let value = var.as_deref().and_then(|v| var_bytes(ctx, v));
                let value = value.as_deref().unwrap_or_default();
                let mut joined = bytes.into_owned();
                if !joined.is_empty() && (!value.is_empty() || !suffix.is_empty()) {
                    joined.extend_from_slice(delim);
                }
                joined.extend_from_slice(value);
                joined.extend_from_slice(suffix);
                Cow::Owned(joined)
            }
            Text::Strcmp(var) => {
                let other = var_bytes(ctx, var)?;
                return Some(Sample::Int(match bytes[..].cmp(&other[..]) {
                    std::cmp::Ordering::Less => -1,
                    std::cmp::Ordering::Equal => 0,
                    std::cmp::Ordering::Greater => 1,
                }));
            }
            Text::SecureMemcmp(var) => {
                let other = var_binary(ctx, var)?;
                // Every byte is compared whatever the differences found, so the time taken
                // does not tell where the first difference is.
                let same_len = bytes.len() == other.len();
                let diff = bytes
                    .iter()
                    .zip(other.iter())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b));
                return Some(Sample::Bool(same_len && diff == 0));
            }
        };
        Some(Sample::Str(out))
    }
}

/// `iif` takes a boolean, so it is its own converter.
#[derive(Debug)]
struct Iif {
    yes: Vec<u8>,
    no: Vec<u8>,
}

impl Convert for Iif {
    fn convert<'a>(&'a self, input: Sample<'a>, _: &'a dyn Context) -> Option<Sample<'a>> {
        match input {
            Sample::Bool(true) => Some(Sample::str(&self.yes)),
            Sample::Bool(false) => Some(Sample::str(&self.no)),
            _ => None,
        }
    }
}

/// `debug`: Sluice has no event sinks to write to, so it only passes the sample through.
#[derive(Debug)]
struct PassThrough;

impl Convert for PassThrough {
    fn convert<'a>(&'a self, input: Sample<'a>, _: &'a dyn Context) -> Option<Sample<'a>> {
        Some(input)
    }
}

/// Applies a per-byte case change, copying only if some byte changes.
fn change_case(
    bytes: Cow<'_, [u8]>,
    changes: fn(&u8) -> bool,
    map: fn(&u8) -> u8,
) -> Cow<'_, [u8]> {
    if bytes.iter().any(changes) {
        Cow::Owned(bytes.iter().map(map).collect())
    } else {
        bytes
    }
}

/// Calls `f(start, end)` for each field of `s` split at any byte of `delims`, from the
/// first (or from the last when `backward`), skipping empty ones when `skip_empty`, until
/// `f` returns true.
fn segments(
    s: &[u8],
    delims: &[u8],
    skip_empty: bool,
    backward: bool,
    mut f: impl FnMut(usize, usize) -> bool,
) {
    let is_delim = |i: usize| s.get(i).is_some_and(|b| delims.contains(b));
    if !backward {
        let mut start = 0;
        for i in 0..=s.len() {
            if i == s.len() || is_delim(i) {
                if !(skip_empty && i == start) && f(start, i) {
                    return;
                }
                start = i + 1;
            }
        }
    } else {
        let mut end = s.len();
        let mut j = s.len();
        loop {
            if j == 0 || is_delim(j - 1) {
                if !(skip_empty && j == end) && f(j, end) {
                    return;
                }
                if j == 0 {
                    return;
                }
                end = j - 1;
            }
            j -= 1;
        }
    }
}

/// The span of `count` fields (0: all remaining) starting at field `index` (from 1, or
/// from -1 counting from the end), as `field` and `word` (`skip_empty`) select them.
fn select(
    s: &[u8],
    delims: &[u8],
    index: i64,
    count: usize,
    skip_empty: bool,
) -> Option<(usize, usize)> {
    let want = usize::try_from(index.unsigned_abs()).ok()?;
    let last = (count > 0).then(|| want.saturating_add(count - 1));
    let mut n = 0;
    let mut found = None;
    let mut far = None;
    segments(s, delims, skip_empty, index < 0, |start, end| {
        n += 1;
        if n == want {
            found = Some((start, end));
        }
        if Some(n) == last {
            far = Some((start, end));
            return true;
        }
        false
    });
    let (start, end) = found?;
    Some(if index > 0 {
        (start, far.map_or(s.len(), |f| f.1))
    } else {
        (far.map_or(0, |f| f.0), end)
    })
}

/// The value of the first parameter `name` in `s` (parameters separated by `delim`, name
/// and value by `=`; a parameter without `=` has an empty value).
fn find_param(s: &[u8], name: &[u8], delim: u8) -> Option<(usize, usize)> {
    let mut start = 0;
    for part in s.split(|&b| b == delim) {
        let end = start + part.len();
        if let Some(rest) = part.strip_prefix(name) {
            match rest.first() {
                None => return Some((end, end)),
                Some(b'=') => return Some((start + name.len() + 1, end)),
                _ => {}
            }
        }
        start = end + 1;
    }
    None
}

/// A piece of a `regsub` replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Bytes copied as they are.
    Literal(Vec<u8>),
    /// The text of capture group N (`\N`).
    Group(usize),
}

/// Parses a replacement string: `\0`..`\9` are groups, `\xHH` a byte, `\\` a backslash,
/// a backslash before any other byte stands for that byte.
pub(crate) fn parse_subst(text: &str) -> Vec<Piece> {
    let bytes = text.as_bytes();
    let mut pieces = Vec::new();
    let mut lit = Vec::new();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        i += 1;
        if b != b'\\' {
            lit.push(b);
            continue;
        }
        match bytes.get(i) {
            Some(d) if d.is_ascii_digit() => {
                if !lit.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut lit)));
                }
                pieces.push(Piece::Group(usize::from(d - b'0')));
                i += 1;
            }
            Some(b'x') => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(byte) => {
                        lit.push(byte);
                        i += 3;
                    }
                    None => lit.push(b'\\'),
                }
            }
            Some(&other) => {
                lit.push(other);
                i += 1;
            }
            None => lit.push(b'\\'),
        }
    }
    if !lit.is_empty() {
        pieces.push(Piece::Literal(lit));
    }
    pieces
}

/// Appends the replacement for one match.
pub(crate) fn expand(subst: &[Piece], caps: &regex::bytes::Captures<'_>, out: &mut Vec<u8>) {
    for piece in subst {
        match piece {
            Piece::Literal(b) => out.extend_from_slice(b),
            Piece::Group(n) => {
                if let Some(m) = caps.get(*n) {
                    out.extend_from_slice(m.as_bytes());
                }
            }
        }
    }
}

/// Replaces the first match (every match when `global`) of `regex` in `input`.
fn regsub<'a>(input: Cow<'a, [u8]>, regex: &Regex, subst: &[Piece], global: bool) -> Cow<'a, [u8]> {
    let mut out = Vec::new();
    let mut last = 0;
    let mut any = false;
    for caps in regex.captures_iter(&input) {
        let Some(m) = caps.get(0) else { continue };
        any = true;
        out.extend_from_slice(&input[last..m.start()]);
        expand(subst, &caps, &mut out);
        last = m.end();
        if !global {
            break;
        }
    }
    if !any {
        return input;
    }
    out.extend_from_slice(&input[last..]);
    Cow::Owned(out)
}

/// Compiles a regex the way every part of the engine does: on bytes, without Unicode
/// classes (HAProxy's PCRE works on bytes), case-insensitive on request.
pub(crate) fn compile_regex(pattern: &str, icase: bool) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .case_insensitive(icase)
        .unicode(false)
        .build()
        .map_err(|e| {
            let detail = e.to_string();
            let reason = detail
                .lines()
                .find_map(|l| l.trim().strip_prefix("error: "))
                .unwrap_or(detail.trim())
                .to_string();
            format!("regex '{pattern}' is invalid ({reason})")
        })
}

fn arg(b: &ConvBuild<'_>, i: usize) -> Vec<u8> {
    str_arg(b.args, i).unwrap_or("").as_bytes().to_vec()
}

/// An optional variable-name argument (empty means none).
fn opt_var(b: &ConvBuild<'_>, i: usize) -> Result<Option<String>, String> {
    match str_arg(b.args, i) {
        None | Some("") => Ok(None),
        Some(v) => var_arg(v, i).map(Some),
    }
}

fn build(b: &ConvBuild<'_>) -> Result<Built, String> {
    let str_out = |t: Text| Built::new(t, SampleType::Str);
    match b.name {
        "lower" => str_out(Text::Lower),
        "upper" => str_out(Text::Upper),
        "length" => Built::new(Text::Length, SampleType::Int),
        "bytes" => {
            let offset = IntOrVar::parse(str_arg(b.args, 0).unwrap_or(""), 0)?;
            let length = match str_arg(b.args, 1) {
                Some(l) => Some(IntOrVar::parse(l, 1)?),
                None => None,
            };
            Built::new(Text::Bytes { offset, length }, SampleType::Bin)
        }
        "field" | "word" => {
            let index = int_arg(b.args, 0)?.unwrap_or(0);
            if index == 0 {
                return Err("Unexpected value 0 for index".to_string());
            }
            let delims = arg(b, 1);
            if delims.is_empty() {
                return Err("empty delimiter list".to_string());
            }
            let count = int_arg(b.args, 2)?.unwrap_or(1);
            let count = usize::try_from(count)
                .map_err(|_| format!("Unexpected value {count} for count"))?;
            str_out(Text::Field {
                index,
                delims,
                count,
                words: b.name == "word",
            })
        }
        "ltrim" => str_out(Text::LTrim(arg(b, 0))),
        "rtrim" => str_out(Text::RTrim(arg(b, 0))),
        "cut_crlf" => str_out(Text::CutCrlf),
        "reverse" => str_out(Text::Reverse),
        "host_only" => str_out(Text::HostOnly),
        "port_only" => Built::new(Text::PortOnly, SampleType::Int),
        "param" => {
            let name = arg(b, 0);
            if name.is_empty() {
                return Err("empty parameter name".to_string());
            }
            let delim = match str_arg(b.args, 1) {
                None => b'&',
                Some(d) if d.len() == 1 => d.as_bytes()[0],
                Some(d) => d
                    .strip_prefix("0x")
                    .or_else(|| d.strip_prefix("0X"))
                    .filter(|h| h.len() == 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("invalid delimiter '{d}' (one character or 0xHH)"))?,
            };
            str_out(Text::Param { name, delim })
        }
        "regsub" => {
            let flags = str_arg(b.args, 2).unwrap_or("");
            if let Some(bad) = flags.chars().find(|c| !matches!(c, 'i' | 'g')) {
                return Err(format!(
                    "invalid regex flag '{bad}', only 'i' and 'g' are supported"
                ));
            }
            let regex = compile_regex(str_arg(b.args, 0).unwrap_or(""), flags.contains('i'))?;
            let subst = parse_subst(str_arg(b.args, 1).unwrap_or(""));
            str_out(Text::Regsub {
                regex,
                subst,
                global: flags.contains('g'),
            })
        }
        "iif" => Built::new(
            Iif {
                yes: arg(b, 0),
                no: arg(b, 1),
            },
            SampleType::Str,
        ),
        "concat" => str_out(Text::Concat {
            start: arg(b, 0),
            var: opt_var(b, 1)?,
            end: arg(b, 2),
        }),
        "add_item" => {
            let var = opt_var(b, 1)?;
            let suffix = arg(b, 2);
            if var.is_none() && suffix.is_empty() {
                return Err("a variable or a suffix is required after the delimiter".to_string());
            }
            str_out(Text::AddItem {
                delim: arg(b, 0),
                var,
                suffix,
            })
        }
        "strcmp" => Built::new(
            Text::Strcmp(var_arg(str_arg(b.args, 0).unwrap_or(""), 0)?),
            SampleType::Int,
        ),
        "secure_memcmp" => Built::new(
            Text::SecureMemcmp(var_arg(str_arg(b.args, 0).unwrap_or(""), 0)?),
            SampleType::Bool,
        ),
        _ => Built::new(PassThrough, b.input),
    }
}

/// A Host value's host (an IPv6 literal with its brackets) and its port digits, if any:
/// `h`, `h:80`, `[::1]`, `[::1]:80`.
fn host_and_port(value: &[u8]) -> (&[u8], Option<&[u8]>) {
    let host_end = if value.starts_with(b"[") {
        value
            .iter()
            .position(|&b| b == b']')
            .map_or(value.len(), |i| i + 1)
    } else {
        value
            .iter()
            .rposition(|&b| b == b':')
            .unwrap_or(value.len())
    };
    let (host, rest) = value.split_at(host_end);
    (host, rest.strip_prefix(b":"))
}

/// The string converters.
pub(super) static CONVERTERS: Table = &[
    ("lower", def(0, 0, STR, build)),
    ("upper", def(0, 0, STR, build)),
    ("length", def(0, 0, STR, build)),
    ("bytes", def(1, 2, BIN, build)),
    ("field", def(2, 3, STR, build)),
    ("word", def(2, 3, STR, build)),
    ("ltrim", def(1, 1, STR, build)),
    ("rtrim", def(1, 1, STR, build)),
    ("cut_crlf", def(0, 0, STR, build)),
    ("reverse", def(0, 0, STR, build)),
    ("host_only", def(0, 0, STR, build)),
    ("port_only", def(0, 0, STR, build)),
    ("param", def(1, 2, STR, build)),
    ("regsub", def(2, 3, STR, build)),
    ("iif", def(2, 2, Some(SampleType::Bool), build)),
    ("concat", def(0, 3, STR, build)),
    ("add_item", def(2, 3, STR, build)),
    ("strcmp", def(1, 1, STR, build)),
    ("secure_memcmp", def(1, 1, BIN, build)),
    ("debug", def(0, 2, None, build)),
];
