//! Capture fetches (configuration.txt §7.3.6 `capture.req.hdr`, `capture.res.hdr`): what
//! the transaction stored in the frontend's numbered capture slots, by `capture request|
//! response header` lines or `http-request|http-response capture` rules.
//!
//! The values live with the stream, not in the message, so request captures stay readable
//! in response rules and in the log; the [`Context`] lends a copy ([`Context::captured`]).

use super::{Fetch, FetchDef, Sink, emit};
use crate::args::int_arg;
use crate::context::Context;
use crate::stages::Source;
use crate::value::{Sample, SampleType};

/// A compiled capture fetch: which side, which slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Capture {
    response: bool,
    index: usize,
}

impl Capture {
    pub fn run<'a>(&'a self, ctx: &'a dyn Context, out: Sink<'_, 'a>) -> bool {
        emit(
            ctx.captured(self.response, self.index)
                .map(Sample::owned_str),
            out,
        )
    }
}

fn build(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let index = int_arg(args, 0)?
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| "expects a capture slot number (0 or more)".to_owned())?;
    Ok(Fetch::Capture(Capture {
        response: def.name == "capture.res.hdr",
        index,
    }))
}

pub(crate) static FETCHES: &[FetchDef] = &[
    FetchDef {
        name: "capture.req.hdr",
        min_args: 1,
        max_args: 1,
        out: SampleType::Str,
        source: Source::Request,
        build,
    },
    FetchDef {
        name: "capture.res.hdr",
        min_args: 1,
        max_args: 1,
        out: SampleType::Str,
        source: Source::Response,
        build,
    },
];
