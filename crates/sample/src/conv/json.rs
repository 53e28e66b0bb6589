//! `json_query(json_path[,output_type])` (configuration.txt §7.3.1): one value picked out
//! of a JSON document by a path such as `$.user.roles[0]`.
//!
//! The input is untrusted (a request body, a decoded JWT), so the document is never built
//! in memory: a cursor walks the bytes, skipping every value off the path with a depth
//! counter instead of recursion, so no input can exhaust the stack. The path subset is
//! what HAProxy's examples use: `$`, `.name` (with `\.` or `\\.` for a dot inside the
//! name), `['name']` or `["name"]`, and `[index]`. Strings come out unescaped, numbers as C's
//! `%g` writes them (or as integers with output type `int`), booleans as booleans, arrays
//! as their JSON text; `null`, objects and anything malformed make the converter fail.

use std::io::Write;

use super::{Built, ConvBuild, Convert, into_bytes};
use crate::args::str_arg;
use crate::context::Context;
use crate::value::{Sample, SampleType};

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// An object member.
    Key(Vec<u8>),
    /// An array element.
    Index(usize),
}

/// A compiled `json_query`.
#[derive(Debug)]
pub(super) struct JsonQuery {
    path: Vec<Step>,
    as_int: bool,
}

/// Parses `$.a.b[0]['c.d']`.
fn parse_path(text: &str) -> Option<Vec<Step>> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'$') {
        return None;
    }
    let mut steps = Vec::new();
    let mut pos = 1;
    while let Some(&b) = bytes.get(pos) {
        pos += 1;
        match b {
            b'.' => {
                let mut name = Vec::new();
                while let Some(&c) = bytes.get(pos) {
                    match c {
                        b'.' | b'[' => break,
                        b'\\' => {
                            // `\.` as well as `\\.`: the manual's example doubles the
                            // backslash for the configuration's own quoting level.
                            while bytes.get(pos) == Some(&b'\\') {
                                pos += 1;
                            }
                            name.push(*bytes.get(pos)?);
                            pos += 1;
                        }
                        _ => {
                            name.push(c);
                            pos += 1;
                        }
                    }
                }
                if name.is_empty() {
                    return None;
                }
                steps.push(Step::Key(name));
            }
            b'[' => {
                let close = bytes.iter().skip(pos).position(|&c| c == b']')? + pos;
                let inner = bytes.get(pos..close)?;
                pos = close + 1;
                match inner {
                    [q @ (b'\'' | b'"'), name @ .., last] if last == q => {
                        steps.push(Step::Key(name.to_vec()));
                    }
                    digits if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) => {
                        steps.push(Step::Index(std::str::from_utf8(digits).ok()?.parse().ok()?));
                    }
                    _ => return None,
                }
            }
            _ => return None,
        }
    }
    Some(steps)
}

/// A cursor over a JSON document.
struct Cursor<'a> {
    doc: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.doc.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        self.skip_ws();
        (self.peek()? == b).then(|| self.pos += 1)
    }

    /// The raw contents of the string at the cursor (escapes still in), cursor after it.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.pos;
        loop {
            match self.peek()? {
                b'"' => break,
                b'\\' => self.pos += 2,
                _ => self.pos += 1,
            }
        }
        let raw = self.doc.get(start..self.pos)?;
        self.pos += 1;
        Some(raw)
    }

    /// Moves past the value at the cursor; returns its text.
    fn skip_value(&mut self) -> Option<&'a [u8]> {
        self.skip_ws();
        let start = self.pos;
        match self.peek()? {
            b'"' => {
                self.string()?;
            }
            b'{' | b'[' => {
                // Brackets are counted, strings skipped whole: no recursion.
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.checked_sub(1)?;
                            if depth == 0 {
                                self.pos += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    self.pos += 1;
                }
            }
            _ => {
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.'))
                {
                    self.pos += 1;
                }
                if self.pos == start {
                    return None;
                }
            }
        }
        self.doc.get(start..self.pos)
    }

    /// Moves the cursor to the member `key` of the object at the cursor.
    fn member(&mut self, key: &[u8]) -> Option<()> {
        self.eat(b'{')?;
        self.skip_ws();
        if self.peek()? == b'}' {
            return None;
        }
        loop {
            let name = self.string()?;
            self.eat(b':')?;
            if key_equals(name, key)? {
                self.skip_ws();
                return Some(());
            }
            self.skip_value()?;
            self.eat(b',')?;
        }
    }

    /// Moves the cursor to element `index` of the array at the cursor.
    fn element(&mut self, index: usize) -> Option<()> {
        self.eat(b'[')?;
        self.skip_ws();
        if self.peek()? == b']' {
            return None;
        }
        for _ in 0..index {
            self.skip_value()?;
            self.eat(b',')?;
        }
        self.skip_ws();
        Some(())
    }
}

/// Whether the raw JSON string `raw` decodes to `key`.
fn key_equals(raw: &[u8], key: &[u8]) -> Option<bool> {
    if !raw.contains(&b'\\') {
        return Some(raw == key);
    }
    let mut decoded = Vec::with_capacity(raw.len());
    unescape(raw, &mut decoded)?;
    Some(decoded == key)
}

/// Four hexadecimal digits.
fn hex4(digits: &[u8]) -> Option<u32> {
    std::str::from_utf8(digits.get(..4)?)
        .ok()
        .and_then(|s| u32::from_str_radix(s, 16).ok())
}

/// Decodes the escapes of a JSON string's contents into `out`.
fn unescape(raw: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        i += 1;
        if b != b'\\' {
            out.push(b);
            continue;
        }
        let e = *raw.get(i)?;
        i += 1;
        let c = match e {
            b'"' | b'\\' | b'/' => char::from(e),
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = hex4(raw.get(i..)?)?;
                i += 4;
                let code = if (0xd800..0xdc00).contains(&hi) {
                    // A surrogate pair: the low half must follow.
                    if raw.get(i..i + 2)? != b"\\u" {
                        return None;
                    }
                    let lo = hex4(raw.get(i + 2..)?)?;
                    if !(0xdc00..0xe000).contains(&lo) {
                        return None;
                    }
                    i += 6;
                    0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                } else {
                    hi
                };
                char::from_u32(code)?
            }
            _ => return None,
        };
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
    Some(())
}

/// A number as C's `printf("%g")` writes it: six significant digits, trailing zeros
/// removed, exponent form below 1e-4 and from 1e6 on.
fn format_g(v: f64, out: &mut Vec<u8>) {
    if v.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if v.is_infinite() {
        out.extend_from_slice(if v < 0.0 { b"-inf" } else { b"inf" });
        return;
    }
    if v == 0.0 {
        out.extend_from_slice(if v.is_sign_negative() { b"-0" } else { b"0" });
        return;
    }
    let sci = format!("{v:.5e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "{}e{sign}{:02}", trim(mantissa), exp.unsigned_abs());
    } else {
        let decimals = usize::try_from(5 - exp).unwrap_or(0);
        let _ = write!(out, "{}", trim(&format!("{v:.decimals$}")));
    }
}

impl Convert for JsonQuery {
    fn convert<'a>(&'a self, input: Sample<'a>, _: &'a dyn Context) -> Option<Sample<'a>> {
        let doc = into_bytes(input)?;
        let mut cur = Cursor { doc: &doc, pos: 0 };
        for step in &self.path {
            match step {
                Step::Key(key) => cur.member(key)?,
                Step::Index(index) => cur.element(*index)?,
            }
        }
        cur.skip_ws();
        let first = cur.peek()?;
        let value = cur.skip_value()?;
        match first {
            b'"' if !self.as_int => {
                let mut out = Vec::with_capacity(value.len());
                unescape(value.get(1..value.len().checked_sub(1)?)?, &mut out)?;
                Some(Sample::owned_str(out))
            }
            b'-' | b'0'..=b'9' => {
                let number: f64 = std::str::from_utf8(value).ok()?.parse().ok()?;
                if self.as_int {
                    // Integers beyond 2^63 do not fit; fractions are truncated.
                    if !number.is_finite() || number.abs() >= 9.223_372_036_854_775e18 {
                        return None;
                    }
                    Some(Sample::Int(number as i64))
                } else {
                    let mut out = Vec::new();
                    format_g(number, &mut out);
                    Some(Sample::owned_str(out))
                }
            }
            b't' if value == b"true" => Some(Sample::Bool(true)),
            b'f' if value == b"false" => Some(Sample::Bool(false)),
            b'[' if !self.as_int => Some(Sample::owned_str(value.to_vec())),
            _ => None,
        }
    }
}

/// Builds `json_query`.
pub(super) fn build(b: &ConvBuild<'_>) -> Result<Built, String> {
    let text = str_arg(b.args, 0).unwrap_or("");
    let path = parse_path(text).ok_or_else(|| format!("invalid json path '{text}'"))?;
    let as_int = match str_arg(b.args, 1) {
        None | Some("" | "string") => false,
        Some("int") => true,
        Some(other) => {
            return Err(format!(
                "invalid output type '{other}' (expected 'int' or 'string')"
            ));
        }
    };
    let out = if as_int {
        SampleType::Int
    } else {
        SampleType::Str
    };
    Built::new(JsonQuery { path, as_int }, out)
}
