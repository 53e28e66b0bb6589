//! Samples: the typed values that fetches produce, converters transform and ACLs match
//! (configuration.txt §7.3, §7.1 "Sample fetch methods return data which can be of the
//! following types").
//!
//! Every step of a sample expression hands a [`Sample`] to the next one: a fetch reads it from
//! the [`Context`](crate::Context), each converter casts it to the type it takes (the table in
//! [`SampleType::can_cast_to`]) and returns a new one, and an ACL casts the last one to the type
//! its matching method compares. Strings and binary blocks are `Cow`s, so a sample read from
//! the request buffer stays borrowed until a converter really needs a new buffer. Read
//! [`Sample::cast`] first.

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The type of a sample, as configuration.txt names them in its keyword tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SampleType {
    /// `boolean`.
    Bool,
    /// `integer`: a signed 64-bit value.
    Int,
    /// `ip`: an IPv4 or IPv6 address.
    Ip,
    /// `string`.
    Str,
    /// `binary`: a block of bytes.
    Bin,
    /// `method`: an HTTP method token.
    Meth,
}

impl SampleType {
    /// The name configuration.txt uses for the type (`boolean`, `integer`, `ip`, `string`,
    /// `binary`, `method`), as diagnostics print it.
    pub fn name(self) -> &'static str {
        match self {
            SampleType::Bool => "boolean",
            SampleType::Int => "integer",
            SampleType::Ip => "ip",
            SampleType::Str => "string",
            SampleType::Bin => "binary",
            SampleType::Meth => "method",
        }
    }

    /// Whether a sample of this type may be cast to `to`, HAProxy's implicit casts:
    ///
    /// | from \ to | bool | int | ip | str | bin | meth |
    /// |-----------|------|-----|----|-----|-----|------|
    /// | bool      | =    | 0/1 |    | "0"/"1" | 8 bytes big-endian | |
    /// | int       | ≠ 0  | =   | IPv4 from the low 32 bits | decimal | 8 bytes big-endian | |
    /// | ip        | IPv4 ≠ 0 | IPv4 as a 32-bit number | = | text | 4 or 16 bytes | |
    /// | str       | leading number ≠ 0 | leading number | parsed address | = | same bytes | token |
    /// | bin       |      |     |    | same bytes | = | token |
    /// | meth      |      |     |    | token | token | = |
    ///
    /// A cast allowed here can still fail on a given value (an IPv6 address to an integer,
    /// a string that is not an address to an ip, an empty string to an integer); the sample
    /// then counts as missing.
    pub fn can_cast_to(self, to: SampleType) -> bool {
        use SampleType::*;
        if self == to {
            return true;
        }
        match self {
            Bool => matches!(to, Int | Str | Bin),
            Int | Ip => matches!(to, Bool | Int | Ip | Str | Bin),
            Str => true,
            Bin | Meth => matches!(to, Str | Bin | Meth),
        }
    }
}

impl fmt::Display for SampleType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One value flowing through a sample expression.
///
/// The lifetime is that of the data the value borrows: the request buffer the
/// [`Context`](crate::Context) lends, or the expression itself (constant arguments, map
/// values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sample<'a> {
    /// A boolean.
    Bool(bool),
    /// A signed 64-bit integer.
    Int(i64),
    /// An IPv4 or IPv6 address.
    Ip(IpAddr),
    /// A string; not necessarily UTF-8.
    Str(Cow<'a, [u8]>),
    /// A binary block.
    Bin(Cow<'a, [u8]>),
    /// An HTTP method token such as `GET`.
    Meth(Cow<'a, [u8]>),
}

impl<'a> Sample<'a> {
    /// A string sample borrowing `bytes`.
    pub fn str(bytes: &'a [u8]) -> Sample<'a> {
        Sample::Str(Cow::Borrowed(bytes))
    }

    /// A string sample owning `bytes`.
    pub fn owned_str(bytes: Vec<u8>) -> Sample<'a> {
        Sample::Str(Cow::Owned(bytes))
    }

    /// The type of the value.
    pub fn sample_type(&self) -> SampleType {
        match self {
            Sample::Bool(_) => SampleType::Bool,
            Sample::Int(_) => SampleType::Int,
            Sample::Ip(_) => SampleType::Ip,
            Sample::Str(_) => SampleType::Str,
            Sample::Bin(_) => SampleType::Bin,
            Sample::Meth(_) => SampleType::Meth,
        }
    }

    /// The bytes of a string, binary or method sample; `None` for the other types.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Sample::Str(b) | Sample::Bin(b) | Sample::Meth(b) => Some(b),
            _ => None,
        }
    }

    /// A copy of the value that borrows from `self` instead of owning (cheap: no bytes are
    /// copied), for code that must cast a sample it does not own.
    pub fn reborrow(&self) -> Sample<'_> {
        match self {
            Sample::Bool(b) => Sample::Bool(*b),
            Sample::Int(i) => Sample::Int(*i),
            Sample::Ip(ip) => Sample::Ip(*ip),
            Sample::Str(b) => Sample::Str(Cow::Borrowed(b)),
            Sample::Bin(b) => Sample::Bin(Cow::Borrowed(b)),
            Sample::Meth(b) => Sample::Meth(Cow::Borrowed(b)),
        }
    }

    /// The value with every borrowed byte copied, free of the lifetime (for storing it, e.g.
    /// in a variable).
    pub fn into_owned(self) -> Sample<'static> {
        match self {
            Sample::Bool(b) => Sample::Bool(b),
            Sample::Int(i) => Sample::Int(i),
            Sample::Ip(ip) => Sample::Ip(ip),
            Sample::Str(b) => Sample::Str(Cow::Owned(b.into_owned())),
            Sample::Bin(b) => Sample::Bin(Cow::Owned(b.into_owned())),
            Sample::Meth(b) => Sample::Meth(Cow::Owned(b.into_owned())),
        }
    }

    /// The value cast to `to` following [`SampleType::can_cast_to`]; `None` when the cast does
    /// not exist or fails for this value. Casts between string-like types never copy.
    pub fn cast(self, to: SampleType) -> Option<Sample<'a>> {
        use SampleType as T;
        if self.sample_type() == to {
            return Some(self);
        }
        match (self, to) {
            (Sample::Bool(b), T::Int) => Some(Sample::Int(i64::from(b))),
            (Sample::Bool(b), T::Str) => Some(Sample::str(if b { b"1" } else { b"0" })),
            (Sample::Bool(b), T::Bin) => Some(int_to_bin(i64::from(b))),
            (Sample::Int(i), T::Bool) => Some(Sample::Bool(i != 0)),
            // Only the low 32 bits make an address, as HAProxy's int-to-ip cast does.
            (Sample::Int(i), T::Ip) => Some(Sample::Ip(IpAddr::V4(Ipv4Addr::from(i as u32)))),
            (Sample::Int(i), T::Str) => Some(Sample::owned_str(i.to_string().into_bytes())),
            (Sample::Int(i), T::Bin) => Some(int_to_bin(i)),
            (Sample::Ip(IpAddr::V4(v4)), T::Bool) => Some(Sample::Bool(u32::from(v4) != 0)),
            (Sample::Ip(IpAddr::V4(v4)), T::Int) => Some(Sample::Int(i64::from(u32::from(v4)))),
            (Sample::Ip(ip), T::Str) => Some(Sample::owned_str(ip_text(ip).into_bytes())),
            (Sample::Ip(IpAddr::V4(v4)), T::Bin) => {
                Some(Sample::Bin(Cow::Owned(v4.octets().to_vec())))
            }
            (Sample::Ip(IpAddr::V6(v6)), T::Bin) => {
                Some(Sample::Bin(Cow::Owned(v6.octets().to_vec())))
            }
            (Sample::Str(s), T::Bool) => parse_int_prefix(&s).map(|i| Sample::Bool(i != 0)),
            (Sample::Str(s), T::Int) => parse_int_prefix(&s).map(Sample::Int),
            (Sample::Str(s), T::Ip) => parse_ip(&s).map(Sample::Ip),
            (Sample::Str(s), T::Bin) => Some(Sample::Bin(s)),
            (Sample::Str(s) | Sample::Bin(s), T::Meth) if !s.is_empty() => Some(Sample::Meth(s)),
            // As HAProxy: a string made of binary data ends at its first NUL byte (the
            // manual warns that string matches of binary fetches stop there).
            (Sample::Bin(s), T::Str) => Some(Sample::Str(until_nul(s))),
            (Sample::Meth(s), T::Str) => Some(Sample::Str(s)),
            (Sample::Meth(s), T::Bin) => Some(Sample::Bin(s)),
            _ => None,
        }
    }

    /// The value as text, the way a log line or a header built from it shows it: strings
    /// as their bytes, binary blocks up to their first NUL byte (HAProxy's cast), numbers in
    /// decimal, booleans as `0`/`1`, addresses in their usual notation.
    pub fn to_bytes(&self) -> Cow<'_, [u8]> {
        match self.reborrow().cast(SampleType::Str) {
            Some(Sample::Str(s)) => s,
            _ => Cow::Borrowed(&[]),
        }
    }

    /// The value as binary data, where HAProxy reads a sample as such (`balance hash`,
    /// `secure_memcmp`'s variable): strings and binary blocks whole, NUL bytes included;
    /// numbers as 8 big-endian bytes; addresses as their 4 or 16 bytes.
    pub fn to_binary(&self) -> Cow<'_, [u8]> {
        match self.reborrow().cast(SampleType::Bin) {
            Some(Sample::Bin(s)) => s,
            _ => Cow::Borrowed(&[]),
        }
    }
}

/// `bytes` up to its first NUL byte, without copying.
fn until_nul(bytes: Cow<'_, [u8]>) -> Cow<'_, [u8]> {
    let Some(end) = bytes.iter().position(|&b| b == 0) else {
        return bytes;
    };
    match bytes {
        Cow::Borrowed(b) => Cow::Borrowed(&b[..end]),
        Cow::Owned(mut v) => {
            v.truncate(end);
            Cow::Owned(v)
        }
    }
}

/// The 8-byte big-endian image of an integer, HAProxy's integer-to-binary cast.
fn int_to_bin<'a>(i: i64) -> Sample<'a> {
    Sample::Bin(Cow::Owned(i.to_be_bytes().to_vec()))
}

/// The number a string starts with, as HAProxy's string-to-integer cast reads it: an optional
/// `-`, then decimal digits up to the first other byte ("12abc" is 12, "abc" is 0). `None`
/// for an empty string. Values beyond 64 bits saturate.
pub fn parse_int_prefix(s: &[u8]) -> Option<i64> {
    if s.is_empty() {
        return None;
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    let mut value: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            break;
        }
        let d = i64::from(b - b'0');
        value = if negative {
            value.saturating_mul(10).saturating_sub(d)
        } else {
            value.saturating_mul(10).saturating_add(d)
        };
    }
    Some(value)
}

/// Parses a whole string as an integer: optional `-`, then at least one decimal digit and
/// nothing else. Used for configuration arguments, where trailing garbage is an error.
pub(crate) fn parse_int_exact(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses an address written in full: dotted-quad IPv4 or any IPv6 notation, as the
/// string-to-ip cast accepts (no abbreviated IPv4, no port, no brackets).
pub fn parse_ip(s: &[u8]) -> Option<IpAddr> {
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// An address in the notation glibc's `inet_ntop` uses, which HAProxy prints: like Rust's
/// except that IPv4-compatible IPv6 addresses (`::a.b.c.d`) keep the dotted tail.
pub fn ip_text(ip: IpAddr) -> String {
    if let IpAddr::V6(v6) = ip {
        let seg = v6.segments();
        if seg[..6].iter().all(|&s| s == 0) && seg[6] != 0 {
            let [.., a, b, c, d] = v6.octets();
            return format!("::{}", Ipv4Addr::new(a, b, c, d));
        }
    }
    ip.to_string()
}

/// The IPv4 address an IPv6 one carries, for the three forms configuration.txt §7.1.6 lets
/// an IPv4 pattern match: `::ffff:a.b.c.d`, `::a.b.c.d` and 6to4 `2002:AABB:CCDD::`.
pub(crate) fn embedded_v4(v6: &Ipv6Addr) -> Option<Ipv4Addr> {
    let seg = v6.segments();
    let o = v6.octets();
    if seg[..5].iter().all(|&s| s == 0) && (seg[5] == 0xffff || seg[5] == 0) {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    if seg[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn s(text: &str) -> Sample<'_> {
        Sample::str(text.as_bytes())
    }

    #[test]
    fn string_to_integer_reads_leading_digits() {
        assert_eq!(s("12abc").cast(SampleType::Int), Some(Sample::Int(12)));
        assert_eq!(s("-5").cast(SampleType::Int), Some(Sample::Int(-5)));
        assert_eq!(s("abc").cast(SampleType::Int), Some(Sample::Int(0)));
        assert_eq!(s("").cast(SampleType::Int), None);
        assert_eq!(
            s("99999999999999999999").cast(SampleType::Int),
            Some(Sample::Int(i64::MAX))
        );
        assert_eq!(s("abc").cast(SampleType::Bool), Some(Sample::Bool(false)));
        assert_eq!(s("1").cast(SampleType::Bool), Some(Sample::Bool(true)));
    }

    #[test]
    fn scalars_to_text_and_binary() {
        assert_eq!(Sample::Bool(true).cast(SampleType::Str), Some(s("1")));
        assert_eq!(Sample::Int(-42).cast(SampleType::Str), Some(s("-42")));
        assert_eq!(
            Sample::Bool(true).cast(SampleType::Bin),
            Some(Sample::Bin(Cow::Owned(vec![0, 0, 0, 0, 0, 0, 0, 1])))
        );
        assert_eq!(
            Sample::Int(5)
                .cast(SampleType::Bin)
                .unwrap()
                .bytes()
                .unwrap(),
            &[0, 0, 0, 0, 0, 0, 0, 5]
        );
        assert_eq!(
            Sample::Bool(true).cast(SampleType::Int),
            Some(Sample::Int(1))
        );
        assert_eq!(
            Sample::Int(0).cast(SampleType::Bool),
            Some(Sample::Bool(false))
        );
    }

    #[test]
    fn addresses() {
        let v4 = Sample::Ip("1.2.3.4".parse().unwrap());
        assert_eq!(
            v4.clone().cast(SampleType::Int),
            Some(Sample::Int(0x0102_0304))
        );
        assert_eq!(v4.clone().cast(SampleType::Str), Some(s("1.2.3.4")));
        assert_eq!(
            v4.cast(SampleType::Bin).unwrap().bytes().unwrap(),
            &[1, 2, 3, 4]
        );
        assert_eq!(
            Sample::Int(-1).cast(SampleType::Ip),
            Some(Sample::Ip("255.255.255.255".parse().unwrap()))
        );
        let v6 = Sample::Ip("::1".parse().unwrap());
        assert_eq!(v6.clone().cast(SampleType::Int), None);
        assert_eq!(v6.cast(SampleType::Bin).unwrap().bytes().unwrap().len(), 16);
        assert_eq!(s("1.2.3").cast(SampleType::Ip), None);
        assert_eq!(s("12").cast(SampleType::Ip), None);
        assert_eq!(
            s("::ffff:1.2.3.4").cast(SampleType::Ip),
            Some(Sample::Ip("::ffff:1.2.3.4".parse().unwrap()))
        );
        assert_eq!(ip_text("::1.2.3.4".parse().unwrap()), "::1.2.3.4");
        assert_eq!(ip_text("::1".parse().unwrap()), "::1");
        assert_eq!(ip_text("::ffff:1.2.3.4".parse().unwrap()), "::ffff:1.2.3.4");
    }

    #[test]
    fn cast_table() {
        use SampleType::*;
        assert!(Str.can_cast_to(Ip));
        assert!(Ip.can_cast_to(Bool));
        assert!(!Bin.can_cast_to(Int));
        assert!(!Bool.can_cast_to(Ip));
        assert!(!Meth.can_cast_to(Int));
        assert!(Bin.can_cast_to(Str));
        assert_eq!(Sample::Bin(Cow::Borrowed(b"x")).cast(Int), None);
        assert_eq!(
            s("GET").cast(Meth),
            Some(Sample::Meth(Cow::Borrowed(b"GET")))
        );
        assert_eq!(s("").cast(Meth), None);
    }

    #[test]
    fn binary_data_as_a_string_ends_at_its_first_nul() {
        let bin = |b: &'static [u8]| Sample::Bin(Cow::Borrowed(b));
        let text = |sample: Sample<'static>| sample.cast(SampleType::Str);
        assert_eq!(text(bin(b"ab\0cd")), Some(Sample::str(b"ab")));
        assert_eq!(text(bin(b"\0ab")), Some(Sample::str(b"")));
        assert_eq!(text(bin(b"abc")), Some(Sample::str(b"abc")));
        let owned = Sample::Bin(Cow::Owned(b"xy\0z".to_vec()));
        assert_eq!(text(owned), Some(Sample::str(b"xy")));
        // As binary data, whole: what `balance hash` hashes.
        assert_eq!(bin(b"ab\0cd").to_binary(), Cow::Borrowed(b"ab\0cd"));
        assert_eq!(
            Sample::Int(1).to_binary(),
            Cow::Borrowed(&[0, 0, 0, 0, 0, 0, 0, 1])
        );
        // Strings keep their NUL bytes, as the methods of a request do.
        assert_eq!(
            Sample::str(b"a\0b").cast(SampleType::Bin),
            Some(bin(b"a\0b"))
        );
    }

    #[test]
    fn borrowed_strings_stay_borrowed() {
        let buf = b"abc".to_vec();
        let sample = Sample::str(&buf).cast(SampleType::Bin).unwrap();
        assert!(matches!(sample, Sample::Bin(Cow::Borrowed(_))));
        assert!(matches!(s("x").to_bytes(), Cow::Borrowed(b"x")));
    }
}
