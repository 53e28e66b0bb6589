//! Matching methods and patterns (configuration.txt §7.1.1–§7.1.6): how an ACL compares
//! a sample with its values, and how map keys are compared with a converter's input.
//!
//! An ACL's [`MatchMethod`] comes from `-m`, from an ACL-specific keyword (`path_beg`), or
//! from the sample type. It decides how each value is parsed into a [`Pattern`] (integer
//! ranges with `eq`/`ge`/`gt`/`le`/`lt`, addresses with masks, hex blocks, regexes,
//! strings) and what the sample is cast to before comparing. A [`PatternList`] holds the
//! values of one ACL line (exact strings in a hash set) and answers
//! [`PatternList::matches`]. Maps (`crate::map`) reuse [`Pattern`] for their keys. Read
//! [`PatternList::add`] first.

use std::collections::HashSet;
use std::net::IpAddr;

use regex::bytes::Regex;

use crate::conv::{compile_regex, parse_hex, parse_mask4};
use crate::value::{Sample, SampleType, embedded_v4, parse_int_exact};

mod index;

pub(crate) use index::PatternIndex;

/// How an ACL compares samples with its patterns (`-m` names, §7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatchMethod {
    /// `found`: the sample exists; patterns are ignored.
    Found,
    /// `bool`: the sample is true (or a non-zero integer); patterns are ignored.
    Bool,
    /// `int`: integers, ranges and operators.
    Int,
    /// `ip`: addresses and networks.
    Ip,
    /// `bin`: exact binary blocks written in hexadecimal.
    Bin,
    /// `len`: the length of the sample, as an integer.
    Len,
    /// `str`: exact string.
    Str,
    /// `sub`: substring.
    Sub,
    /// `reg`: regular expression.
    Reg,
    /// `beg`: prefix.
    Beg,
    /// `end`: suffix.
    End,
    /// `dir`: a `/`-delimited part.
    Dir,
    /// `dom`: a `.`-delimited part (also `/`, `?`, `:`).
    Dom,
    /// HTTP methods (the `method` ACL): not selectable with `-m`.
    Meth,
}

impl MatchMethod {
    /// The method named `name` after `-m`; `None` for an unknown name.
    pub fn from_name(name: &str) -> Option<MatchMethod> {
        Some(match name {
            "found" => MatchMethod::Found,
            "bool" => MatchMethod::Bool,
            "int" => MatchMethod::Int,
            "ip" => MatchMethod::Ip,
            "bin" => MatchMethod::Bin,
            "len" => MatchMethod::Len,
            "str" => MatchMethod::Str,
            "sub" => MatchMethod::Sub,
            "reg" => MatchMethod::Reg,
            "beg" => MatchMethod::Beg,
            "end" => MatchMethod::End,
            "dir" => MatchMethod::Dir,
            "dom" => MatchMethod::Dom,
            _ => return None,
        })
    }

    /// The method's name.
    pub fn name(self) -> &'static str {
        match self {
            MatchMethod::Found => "found",
            MatchMethod::Bool => "bool",
            MatchMethod::Int => "int",
            MatchMethod::Ip => "ip",
            MatchMethod::Bin => "bin",
            MatchMethod::Len => "len",
            MatchMethod::Str => "str",
            MatchMethod::Sub => "sub",
            MatchMethod::Reg => "reg",
            MatchMethod::Beg => "beg",
            MatchMethod::End => "end",
            MatchMethod::Dir => "dir",
            MatchMethod::Dom => "dom",
            MatchMethod::Meth => "meth",
        }
    }

    /// The method used without `-m` for a sample of type `t` (§7.1's table); binary
    /// samples have none.
    pub fn default_for(t: SampleType) -> Option<MatchMethod> {
        match t {
            SampleType::Bool => Some(MatchMethod::Bool),
            SampleType::Int => Some(MatchMethod::Int),
            SampleType::Ip => Some(MatchMethod::Ip),
            SampleType::Str => Some(MatchMethod::Str),
            SampleType::Meth => Some(MatchMethod::Meth),
            SampleType::Bin => None,
        }
    }

    /// The type samples are cast to before comparing; `None` for `found`.
    pub fn sample_type(self) -> Option<SampleType> {
        match self {
            MatchMethod::Found => None,
            MatchMethod::Bool => Some(SampleType::Bool),
            MatchMethod::Int => Some(SampleType::Int),
            MatchMethod::Ip => Some(SampleType::Ip),
            MatchMethod::Bin => Some(SampleType::Bin),
            MatchMethod::Meth => Some(SampleType::Meth),
            _ => Some(SampleType::Str),
        }
    }

    /// Whether samples of type `t` can be compared this way.
    pub fn accepts(self, t: SampleType) -> bool {
        self.sample_type().is_none_or(|to| t.can_cast_to(to))
    }

    /// Whether values are integers, where `eq`/`ge`/`gt`/`le`/`lt` apply.
    pub fn takes_integers(self) -> bool {
        matches!(self, MatchMethod::Int | MatchMethod::Len)
    }

    /// Whether the method compares with patterns at all (`found` and `bool` do not).
    pub fn takes_patterns(self) -> bool {
        !matches!(self, MatchMethod::Found | MatchMethod::Bool)
    }
}

/// An integer operator of §7.1.2, applying to the values after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IntOp {
    /// `eq` (the default).
    #[default]
    Eq,
    /// `ge`.
    Ge,
    /// `gt`.
    Gt,
    /// `le`.
    Le,
    /// `lt`.
    Lt,
}

impl IntOp {
    /// The operator named `word`, if it is one.
    pub fn from_name(word: &str) -> Option<IntOp> {
        Some(match word {
            "eq" => IntOp::Eq,
            "ge" => IntOp::Ge,
            "gt" => IntOp::Gt,
            "le" => IntOp::Le,
            "lt" => IntOp::Lt,
            _ => return None,
        })
    }
}

/// An inclusive integer range; a missing bound is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IntRange {
    min: Option<i64>,
    max: Option<i64>,
}

impl IntRange {
    fn contains(self, v: i64) -> bool {
        self.min.is_none_or(|m| v >= m) && self.max.is_none_or(|m| v <= m)
    }
}

/// An address or network pattern, stored masked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IpPattern {
    /// IPv4 network.
    V4 { addr: u32, mask: u32 },
    /// IPv6 network.
    V6 { addr: u128, mask: u128 },
}

impl IpPattern {
    /// The §7.1.6 rules: same families compare directly; an IPv6 sample matches an IPv4
    /// pattern through the IPv4 address it embeds; an IPv4 sample matches an IPv6 pattern
    /// as `::ffff:a.b.c.d`.
    pub fn matches(self, ip: IpAddr) -> bool {
        match (self, ip) {
            (IpPattern::V4 { addr, mask }, IpAddr::V4(a)) => u32::from(a) & mask == addr,
            (IpPattern::V4 { .. }, IpAddr::V6(a)) => {
                embedded_v4(&a).is_some_and(|v4| self.matches(IpAddr::V4(v4)))
            }
            (IpPattern::V6 { addr, mask }, IpAddr::V6(a)) => u128::from(a) & mask == addr,
            (IpPattern::V6 { .. }, IpAddr::V4(a)) => self.matches(IpAddr::V6(a.to_ipv6_mapped())),
        }
    }

    /// The number of mask bits, to prefer the most specific network in a map.
    pub fn prefix_len(self) -> u32 {
        match self {
            IpPattern::V4 { mask, .. } => mask.count_ones(),
            IpPattern::V6 { mask, .. } => mask.count_ones(),
        }
    }
}

/// One compiled pattern.
#[derive(Clone, Debug)]
pub(crate) enum Pattern {
    /// An integer or range (`int`, `len`).
    Int(IntRange),
    /// An address or network (`ip`).
    Ip(IpPattern),
    /// A string or block (`str`, `sub`, `beg`, `end`, `dir`, `dom`, `bin`); for `dir` and
    /// `dom` already stripped of leading and trailing delimiters.
    Bytes { bytes: Vec<u8>, icase: bool },
    /// A regex (`reg`).
    Regex(Regex),
    /// A method token and whether it is one of the eight standard methods.
    Meth {
        token: Vec<u8>,
        standard: bool,
        icase: bool,
    },
}

/// A sample cast for comparison.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Prepared<'s> {
    Int(i64),
    Ip(IpAddr),
    Bytes(&'s [u8]),
}

/// The methods HAProxy knows by number; a pattern naming one matches it exactly, whatever
/// `-i` says.
const STANDARD_METHODS: [&[u8]; 8] = [
    b"OPTIONS", b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"TRACE", b"CONNECT",
];

fn is_dir_delim(b: u8) -> bool {
    b == b'/' || b == b'?'
}

fn is_dom_delim(b: u8) -> bool {
    matches!(b, b'/' | b'?' | b'.' | b':')
}

fn eq_bytes(a: &[u8], b: &[u8], icase: bool) -> bool {
    if icase {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

/// Whether `pattern` occurs in `s` with a delimiter (or an end) on both sides.
fn match_word(s: &[u8], pattern: &[u8], icase: bool, delim: fn(u8) -> bool) -> bool {
    if pattern.is_empty() || pattern.len() > s.len() {
        return false;
    }
    (0..=s.len() - pattern.len()).any(|i| {
        let before = i == 0 || delim(s[i - 1]);
        let after = s.get(i + pattern.len()).is_none_or(|&b| delim(b));
        before && after && eq_bytes(&s[i..i + pattern.len()], pattern, icase)
    })
}

fn contains(s: &[u8], pattern: &[u8], icase: bool) -> bool {
    pattern.is_empty()
        || s.windows(pattern.len())
            .any(|w| eq_bytes(w, pattern, icase))
}

impl Pattern {
    /// Parses `text` as a pattern for `method`, with `-i` (`icase`) and the integer
    /// operator in force.
    pub fn parse(
        method: MatchMethod,
        text: &str,
        icase: bool,
        op: IntOp,
    ) -> Result<Pattern, String> {
        Ok(match method {
            MatchMethod::Int | MatchMethod::Len | MatchMethod::Found | MatchMethod::Bool => {
                Pattern::Int(parse_int_pattern(text, op)?)
            }
            MatchMethod::Ip => Pattern::Ip(parse_ip_pattern(text)?),
            MatchMethod::Bin => Pattern::Bytes {
                bytes: parse_hex(text)
                    .ok_or_else(|| format!("'{text}' is not a valid hex string"))?,
                icase: false,
            },
            MatchMethod::Reg => Pattern::Regex(compile_regex(text, icase)?),
            MatchMethod::Meth => {
                if text.is_empty() {
                    return Err("empty method pattern".to_string());
                }
                let token = text.as_bytes().to_vec();
                let standard = STANDARD_METHODS.contains(&token.as_slice());
                Pattern::Meth {
                    token,
                    standard,
                    icase,
                }
            }
            MatchMethod::Dir | MatchMethod::Dom => {
                let delim = if method == MatchMethod::Dir {
                    is_dir_delim
                } else {
                    is_dom_delim
                };
                let b = text.as_bytes();
                let start = b.iter().position(|&c| !delim(c)).unwrap_or(b.len());
                let end = b.iter().rposition(|&c| !delim(c)).map_or(start, |e| e + 1);
                Pattern::Bytes {
                    bytes: b[start..end].to_vec(),
                    icase,
                }
            }
            _ => Pattern::Bytes {
                bytes: text.as_bytes().to_vec(),
                icase,
            },
        })
    }

    /// Compares a prepared sample with the pattern.
    pub fn matches(&self, method: MatchMethod, s: Prepared<'_>) -> bool {
        match (self, s) {
            (Pattern::Int(range), Prepared::Int(v)) => range.contains(v),
            (Pattern::Int(range), Prepared::Bytes(b)) => {
                range.contains(i64::try_from(b.len()).unwrap_or(i64::MAX))
            }
            (Pattern::Ip(net), Prepared::Ip(ip)) => net.matches(ip),
            (Pattern::Regex(re), Prepared::Bytes(b)) => re.is_match(b),
            (
                Pattern::Meth {
                    token,
                    standard,
                    icase,
                },
                Prepared::Bytes(m),
            ) => {
                if *standard {
                    m == token.as_slice()
                } else {
                    !STANDARD_METHODS.contains(&m) && eq_bytes(m, token, *icase)
                }
            }
            (Pattern::Bytes { bytes: p, icase }, Prepared::Bytes(b)) => {
                let icase = *icase;
                match method {
                    MatchMethod::Beg => b.len() >= p.len() && eq_bytes(&b[..p.len()], p, icase),
                    MatchMethod::End => {
                        b.len() >= p.len() && eq_bytes(&b[b.len() - p.len()..], p, icase)
                    }
                    MatchMethod::Sub => contains(b, p, icase),
                    MatchMethod::Dir => match_word(b, p, icase, is_dir_delim),
                    MatchMethod::Dom => match_word(b, p, icase, is_dom_delim),
                    _ => eq_bytes(b, p, icase),
                }
            }
            _ => false,
        }
    }
}

/// Casts `sample` for `method` and runs `f` on it; false when the cast fails.
pub(crate) fn with_prepared(
    method: MatchMethod,
    sample: &Sample<'_>,
    f: impl FnOnce(Prepared<'_>) -> bool,
) -> bool {
    let Some(to) = method.sample_type() else {
        return true;
    };
    match sample.reborrow().cast(to) {
        Some(Sample::Int(v)) => f(Prepared::Int(v)),
        Some(Sample::Ip(ip)) => f(Prepared::Ip(ip)),
        Some(Sample::Bool(b)) => b,
        Some(Sample::Str(b) | Sample::Bin(b) | Sample::Meth(b)) => f(Prepared::Bytes(&b)),
        None => false,
    }
}

/// An integer value of §7.1.2: a number (the operator in force applies) or a range
/// `min:max` with optional bounds (operators do not apply).
fn parse_int_pattern(text: &str, op: IntOp) -> Result<IntRange, String> {
    if let Some((lo, hi)) = text.split_once(':') {
        let bound = |s: &str| -> Result<Option<i64>, String> {
            if s.is_empty() {
                return Ok(None);
            }
            if !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("'{text}' is not a valid number range"));
            }
            s.parse()
                .map(Some)
                .map_err(|_| format!("'{text}' is not a valid number range"))
        };
        return Ok(IntRange {
            min: bound(lo)?,
            max: bound(hi)?,
        });
    }
    let v = parse_int_exact(text).ok_or_else(|| format!("'{text}' is not a number"))?;
    Ok(match op {
        IntOp::Eq => IntRange {
            min: Some(v),
            max: Some(v),
        },
        IntOp::Ge => IntRange {
            min: Some(v),
            max: None,
        },
        IntOp::Gt => IntRange {
            min: Some(v.saturating_add(1)),
            max: None,
        },
        IntOp::Le => IntRange {
            min: None,
            max: Some(v),
        },
        IntOp::Lt => IntRange {
            min: None,
            max: Some(v.saturating_sub(1)),
        },
    })
}

/// An IPv4 address in the forms §7.1.6 accepts, where the last number fills the remaining
/// bytes (`10.12` is 10.0.0.12, `192.168.1` is 192.168.0.1).
fn parse_v4_loose(text: &str) -> Option<u32> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut addr: u32 = 0;
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || part.len() > 10 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let v: u64 = part.parse().ok()?;
        if i + 1 < parts.len() {
            addr |= u32::from(u8::try_from(v).ok()?) << (24 - 8 * i);
        } else {
            let room = 8 * (4 - i as u32);
            if v >> room != 0 {
                return None;
            }
            addr |= v as u32;
        }
    }
    Some(addr)
}

/// An address or network of §7.1.6: IPv4 (abbreviated forms allowed) with a prefix length
/// or a dotted mask, or IPv6 with a prefix length. Host names are refused: Sluice resolves
/// no names while reading the configuration.
pub(crate) fn parse_ip_pattern(text: &str) -> Result<IpPattern, String> {
    let bad = || format!("'{text}' is not a valid IPv4 or IPv6 address");
    let (addr, mask) = match text.split_once('/') {
        Some((a, m)) => (a, Some(m)),
        None => (text, None),
    };
    if let Some(v4) = parse_v4_loose(addr) {
        let mask = match mask {
            None => u32::MAX,
            Some(m) => parse_mask4(m).ok_or_else(bad)?,
        };
        return Ok(IpPattern::V4 {
            addr: v4 & mask,
            mask,
        });
    }
    let v6: std::net::Ipv6Addr = addr.parse().map_err(|_| bad())?;
    let bits: u32 = match mask {
        None => 128,
        Some(m) if !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()) => {
            m.parse().ok().filter(|b| *b <= 128).ok_or_else(bad)?
        }
        Some(_) => return Err(bad()),
    };
    let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
    Ok(IpPattern::V6 {
        addr: u128::from(v6) & mask,
        mask,
    })
}

/// The patterns of one ACL expression.
#[derive(Clone, Debug)]
pub(crate) struct PatternList {
    method: MatchMethod,
    /// Case-sensitive exact strings, looked up in one step.
    exact: HashSet<Vec<u8>>,
    /// Addresses and prefix, suffix, domain and directory strings, for lists of those
    /// methods.
    index: Option<PatternIndex>,
    /// How many patterns `index` holds.
    indexed: usize,
    /// Every other pattern, tried in order.
    others: Vec<Pattern>,
}

impl PatternList {
    pub fn new(method: MatchMethod) -> PatternList {
        PatternList {
            method,
            exact: HashSet::new(),
            index: PatternIndex::for_method(method),
            indexed: 0,
            others: Vec::new(),
        }
    }

    /// True when no pattern was given.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.others.is_empty() && self.indexed == 0
    }

    /// Adds the value `text`. `found` and `bool` ignore values, as HAProxy does.
    pub fn add(&mut self, text: &str, icase: bool, op: IntOp) -> Result<(), String> {
        if !self.method.takes_patterns() {
            return Ok(());
        }
        if self.method == MatchMethod::Str && !icase {
            self.exact.insert(text.as_bytes().to_vec());
            return Ok(());
        }
        let pattern = Pattern::parse(self.method, text, icase, op)?;
        // Any id works for a yes/no answer; counting keeps them distinct for debugging.
        if let Some(index) = &mut self.index
            && index.insert(&pattern, self.indexed)
        {
            self.indexed += 1;
            return Ok(());
        }
        self.others.push(pattern);
        Ok(())
    }

    /// Whether `sample` matches: for `found` always, for `bool` when it is true, otherwise
    /// when one pattern matches the sample cast to the method's type.
    pub fn matches(&self, sample: &Sample<'_>) -> bool {
        let method = self.method;
        with_prepared(method, sample, |prepared| {
            if let Prepared::Bytes(b) = prepared
                && self.exact.contains(b)
            {
                return true;
            }
            self.index
                .as_ref()
                .is_some_and(|index| index.find(prepared).is_some())
                || self.others.iter().any(|p| p.matches(method, prepared))
        })
    }
}

#[cfg(test)]
mod tests;
