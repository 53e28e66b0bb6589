//! Fetches over the server's first bytes in `mode tcp` (configuration.txt §7.3.5 `res.len`,
//! `res.payload`, `res.payload_lv`, `res.ssl_hello_type`), for `tcp-response content` rules.
//!
//! They read [`Context::response_payload`]; a block that has not fully arrived yet produces
//! no sample, so a rule waiting for it (`tcp-response inspect-delay`) keeps waiting.

use std::borrow::Cow;

use super::payload::{LengthValue, offset_arg};
use super::{Fetch, FetchDef, Sink, emit, tls_hello};
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
    /// `res.payload_lv(offset1,length[,offset2])`, as `req.payload_lv`.
    LengthValue(LengthValue),
    /// `res.ssl_hello_type`: the type of the server's first TLS handshake message (2, a
    /// ServerHello).
    HelloType,
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
            ResPayload::LengthValue(block) => block.read(buf),
            ResPayload::HelloType => tls_hello::hello_type(buf).map(Sample::Int),
        };
        emit(value, out)
    }
}

fn build(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    Ok(Fetch::ResPayload(match def.name {
        "res.len" => ResPayload::Len,
        "res.payload_lv" => ResPayload::LengthValue(LengthValue::parse(args)?),
        "res.ssl_hello_type" | "rep_ssl_hello_type" => ResPayload::HelloType,
        _ => ResPayload::Block {
            offset: offset_arg(args, 0)?,
            length: offset_arg(args, 1)?,
        },
    }))
}

macro_rules! def {
    ($name:literal, $min:literal, $max:literal, $out:ident) => {
        FetchDef {
            name: $name,
            min_args: $min,
            max_args: $max,
            out: SampleType::$out,
            source: Source::ResponseBuffer,
            build,
        }
    };
}

pub(crate) static FETCHES: &[FetchDef] = &[
    def!("res.len", 0, 0, Int),
    def!("res.payload", 2, 2, Bin),
    def!("res.payload_lv", 2, 3, Bin),
    def!("res.ssl_hello_type", 0, 0, Int),
    def!("rep_ssl_hello_type", 0, 0, Int),
];
