//! Converters (configuration.txt §7.3.1): the keywords after the fetch in a sample
//! expression, each turning one sample into another.
//!
//! [`lookup`] finds a keyword's [`ConvDef`]: its argument count, the type its input is cast
//! to, and `build`, which checks the arguments once at configuration time (regexes
//! compiled, maps loaded, numbers parsed) and returns a [`Convert`] with the converter's
//! output type. At run time the expression casts each sample to the declared input type and
//! calls [`Convert::convert`]; `None` means the converter failed and the sample is missing.
//! Converters that only slice their input return borrowed data. The families live in
//! submodules: `text` (case, slicing, fields, regsub, concatenation), `encode` (base64, hex,
//! JSON, URL encoding), `arith` (integers, booleans, ipmask), `date` (`ltime`, `utime`, `http_date`), `hash` (checksums, digests,
//! HMAC), `map` (map files), `json` (`json_query`), `var` (`set-var`), `table` (`table_*` stick-table lookups). Read [`Convert`] first.

mod arith;
mod date;
mod encode;
mod hash;
mod json;
mod map;
mod rfc7239;
mod table;
mod text;
mod var;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

pub(crate) use arith::parse_mask4;
pub(crate) use encode::base64_decode;
pub(crate) use text::{compile_regex, expand, parse_subst};

use crate::args::{bad_arg, is_var_name};
use crate::context::Context;
use crate::map::MapStore;
use crate::value::{Sample, SampleType, parse_int_exact};

/// A compiled converter.
pub(crate) trait Convert: Send + Sync + fmt::Debug {
    /// Converts `input`, already cast to the converter's input type. `None` when the
    /// conversion fails (the sample is then missing).
    fn convert<'a>(&'a self, input: Sample<'a>, ctx: &'a dyn Context) -> Option<Sample<'a>>;
}

/// What `build` receives.
pub(crate) struct ConvBuild<'b> {
    /// The keyword as written (`map_beg_int`...).
    pub name: &'b str,
    /// The arguments, their count already checked.
    pub args: &'b [String],
    /// The type of the samples arriving (before the cast to the input type).
    pub input: SampleType,
    /// Where map files are loaded.
    pub maps: &'b MapStore,
}

/// A converter ready to run, and the type of its output.
pub(crate) struct Built {
    pub conv: Arc<dyn Convert>,
    pub out: SampleType,
}

impl Built {
    pub fn new(conv: impl Convert + 'static, out: SampleType) -> Result<Built, String> {
        Ok(Built {
            conv: Arc::new(conv),
            out,
        })
    }
}

/// The description of one converter keyword.
#[derive(Clone, Copy)]
pub(crate) struct ConvDef {
    /// Mandatory arguments.
    pub min_args: usize,
    /// Mandatory plus optional arguments.
    pub max_args: usize,
    /// The type the input is cast to; `None` for converters taking any type (`debug`).
    pub input: Option<SampleType>,
    /// Checks the arguments and compiles the converter.
    pub build: fn(&ConvBuild<'_>) -> Result<Built, String>,
}

/// The definition of converter keyword `name`, if Sluice has it.
pub(crate) fn lookup(name: &str) -> Option<ConvDef> {
    let tables = [
        text::CONVERTERS,
        encode::CONVERTERS,
        arith::CONVERTERS,
        hash::CONVERTERS,
        date::CONVERTERS,
        OTHERS,
    ];
    tables
        .iter()
        .flat_map(|table| table.iter())
        .find(|(n, _)| *n == name)
        .map(|(_, def)| *def)
        .or_else(|| map::lookup(name))
        .or_else(|| table::op_of(name).map(|_| def(1, 1, None, table::build)))
        .or_else(|| table::array_op_of(name, 0).map(|_| def(2, 2, None, table::build_array)))
}

/// Converters with a module of their own.
static OTHERS: Table = &[
    ("json_query", def(1, 2, Some(SampleType::Str), json::build)),
    (
        "rfc7239_is_valid",
        def(0, 0, Some(SampleType::Str), rfc7239::build),
    ),
    (
        "rfc7239_field",
        def(1, 1, Some(SampleType::Str), rfc7239::build),
    ),
    (
        "rfc7239_n2nn",
        def(0, 0, Some(SampleType::Str), rfc7239::build),
    ),
    (
        "rfc7239_n2np",
        def(0, 0, Some(SampleType::Str), rfc7239::build),
    ),
    ("in_table", def(0, 1, None, table::build_in_table)),
    // At most four conditions, as HAProxy allows.
    ("set-var", def(1, 5, None, var::build)),
];

/// A converter table: keyword and definition.
pub(crate) type Table = &'static [(&'static str, ConvDef)];

/// Shorthand for table entries.
pub(crate) const fn def(
    min_args: usize,
    max_args: usize,
    input: Option<SampleType>,
    build: fn(&ConvBuild<'_>) -> Result<Built, String>,
) -> ConvDef {
    ConvDef {
        min_args,
        max_args,
        input,
        build,
    }
}

/// The bytes of a string-like sample.
pub(crate) fn into_bytes(sample: Sample<'_>) -> Option<Cow<'_, [u8]>> {
    match sample {
        Sample::Str(b) | Sample::Bin(b) | Sample::Meth(b) => Some(b),
        _ => None,
    }
}

/// The integer of an integer sample.
pub(crate) fn into_int(sample: &Sample<'_>) -> Option<i64> {
    match sample {
        Sample::Int(i) => Some(*i),
        _ => None,
    }
}

/// An argument that is a number or the name of a variable holding one (`add(1)`,
/// `add(txn.n)`, configuration.txt §7.3.1 "<value> can be a numeric value or a variable
/// name").
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum IntOrVar {
    /// A constant.
    Int(i64),
    /// A variable, read at run time and cast to an integer.
    Var(String),
}

impl IntOrVar {
    /// Parses argument `index` (0-based).
    pub fn parse(text: &str, index: usize) -> Result<IntOrVar, String> {
        if let Some(i) = parse_int_exact(text) {
            Ok(IntOrVar::Int(i))
        } else if is_var_name(text) {
            Ok(IntOrVar::Var(text.to_string()))
        } else {
            Err(bad_arg(text, "integer or variable", index))
        }
    }

    /// The value; `None` when the variable is missing or not a number.
    pub fn get(&self, ctx: &dyn Context) -> Option<i64> {
        match self {
            IntOrVar::Int(i) => Some(*i),
            IntOrVar::Var(name) => into_int(&ctx.var(name)?.cast(SampleType::Int)?),
        }
    }
}

/// The bytes of variable `name` as a string, for converters comparing with or appending a
/// variable.
pub(crate) fn var_bytes<'a>(ctx: &'a dyn Context, name: &str) -> Option<Cow<'a, [u8]>> {
    into_bytes(ctx.var(name)?.cast(SampleType::Str)?)
}

/// The bytes of variable `name` as binary data, NUL bytes included (`secure_memcmp`).
pub(crate) fn var_binary<'a>(ctx: &'a dyn Context, name: &str) -> Option<Cow<'a, [u8]>> {
    into_bytes(ctx.var(name)?.cast(SampleType::Bin)?)
}

/// Decodes a string of hexadecimal digit pairs (`bin()`, `-m bin` patterns).
pub(crate) fn parse_hex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| {
            let hi = char::from(pair[0]).to_digit(16)?;
            let lo = char::from(pair[1]).to_digit(16)?;
            u8::try_from(hi * 16 + lo).ok()
        })
        .collect()
}

/// `bytes` as upper-case hexadecimal digits, as HAProxy's `hex` writes them.
pub(crate) fn to_hex(bytes: &[u8], out: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 15)]);
    }
}

/// The part `start..end` of a byte buffer, borrowed if it was borrowed.
pub(crate) fn slice_cow(cow: Cow<'_, [u8]>, start: usize, end: usize) -> Cow<'_, [u8]> {
    let end = end.min(cow.len());
    let start = start.min(end);
    match cow {
        Cow::Borrowed(b) => Cow::Borrowed(&b[start..end]),
        Cow::Owned(mut v) => {
            v.truncate(end);
            v.drain(..start);
            Cow::Owned(v)
        }
    }
}

#[cfg(test)]
mod tests;
