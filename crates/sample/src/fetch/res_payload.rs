//! Fetches over the server's first bytes in `mode tcp` (configuration.txt §7.3.5 `res.len`,
//! `res.payload`), for `tcp-response content` rules.
//!
//! They read [`Context::response_payload`]; a block that has not fully arrived yet produces
//! no sample, so a rule waiting for it (`tcp-response inspect-delay`) keeps waiting.

use std::borrow::Cow;

use super::{Fetch, FetchDef, Sink, emit};
use crate::args::{bad_arg, int_arg, str_arg};
use crate::context::Context;
use crate::stages::Source;
use crate::value::{Sample, SampleType};

/// A compiled response buffer fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ResPayload {
    /// `res.len`.
    Len,
    /// `res.payload(offset,length)`; length 0 means "to the end".
    Block { offset: usize, length: usize },
}

impl ResPayload {
    pub fn run<'a>(&'a self, ctx: &'a dyn Context, out: Sink<'_, 'a>) -> bool {
        let Some(buf) = ctx.response_payload() else {
            return false;
        };
        let value = match self {
            ResPayload::Len => Some(Sample::Int(i64::try_from(buf.len()).unwrap_or(i64::MAX))),
            ResPayload::Block { offset, length } => {
                let block = if *length == 0 {
                    buf.get(*offset..)
                } else {
                    offset
                        .checked_add(*length)
                        .and_then(|end| buf.get(*offset..end))
                };
                block.map(|b| Sample::Bin(Cow::Borrowed(b)))
            }
        };
        emit(value, out)
    }
}

/// A non-negative integer argument.
fn offset_arg(args: &[String], index: usize) -> Result<usize, String> {
    let text = str_arg(args, index).unwrap_or("");
    int_arg(args, index)?
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| bad_arg(text, "positive integer", index))
}

fn build(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    Ok(Fetch::ResPayload(match def.name {
        "res.len" => ResPayload::Len,
        _ => ResPayload::Block {
            offset: offset_arg(args, 0)?,
            length: offset_arg(args, 1)?,
        },
    }))
}

pub(crate) static FETCHES: &[FetchDef] = &[
    FetchDef {
        name: "res.len",
        min_args: 0,
        max_args: 0,
        out: SampleType::Int,
        source: Source::ResponseBuffer,
        build,
    },
    FetchDef {
        name: "res.payload",
        min_args: 2,
        max_args: 2,
        out: SampleType::Bin,
        source: Source::ResponseBuffer,
        build,
    },
];
