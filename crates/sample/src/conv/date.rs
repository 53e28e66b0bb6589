//! Date converters (configuration.txt §7.3.1 `ltime`, `utime`, their `ms_` and `us_`
//! variants, `http_date`): an integer date since the epoch turned into text.
//!
//! Formatting is done by the crate's own `strftime` subset, so the output does not depend
//! on the C library; local time is UTC shifted by the offset the
//! [`Context`](crate::Context) reports for that date.

use std::time::{Duration, UNIX_EPOCH};

use super::{Built, ConvBuild, Convert, Table, def, into_int};
use crate::args::{int_arg, str_arg};
use crate::context::Context;
use crate::time::{strftime, write_http_date};
use crate::value::{Sample, SampleType};

/// `ltime(format[,offset])` and `utime(format[,offset])`, and their `ms_`/`us_` forms
/// whose input and offset count `divisor`ths of seconds.
#[derive(Debug)]
struct Strftime {
    format: Vec<u8>,
    offset: i64,
    local: bool,
    divisor: i64,
}

impl Convert for Strftime {
    fn convert<'a>(&'a self, input: Sample<'a>, ctx: &'a dyn Context) -> Option<Sample<'a>> {
        let value = into_int(&input)?.saturating_add(self.offset);
        let secs = value.div_euclid(self.divisor);
        let fraction = value.rem_euclid(self.divisor);
        let nanos =
            u32::try_from(fraction.saturating_mul(1_000_000_000 / self.divisor)).unwrap_or(0);
        let mut out = Vec::with_capacity(self.format.len() + 16);
        if self.local {
            // The offset is looked up for the date itself (summer time may differ from now);
            // dates before the epoch use the epoch's offset.
            let at = UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap_or(0));
            strftime(
                &self.format,
                (secs, nanos),
                ctx.utc_offset(at),
                None,
                &mut out,
            );
        } else {
            strftime(&self.format, (secs, nanos), 0, Some("GMT"), &mut out);
        }
        Some(Sample::owned_str(out))
    }
}

/// `http_date([offset[,unit]])`: the input and the offset count `divisor`ths of seconds.
#[derive(Debug)]
struct HttpDate {
    offset: i64,
    divisor: i64,
}

impl Convert for HttpDate {
    fn convert<'a>(&'a self, input: Sample<'a>, _: &'a dyn Context) -> Option<Sample<'a>> {
        let value = into_int(&input)?.saturating_add(self.offset);
        let mut out = Vec::with_capacity(29);
        write_http_date(value.div_euclid(self.divisor), &mut out);
        Some(Sample::owned_str(out))
    }
}

fn build_strftime(b: &ConvBuild<'_>) -> Result<Built, String> {
    let format = str_arg(b.args, 0).unwrap_or("").as_bytes().to_vec();
    let offset = int_arg(b.args, 1)?.unwrap_or(0);
    let local = b.name.ends_with("ltime");
    let divisor = match b.name.split_once('_') {
        Some(("ms", _)) => 1_000,
        Some(("us", _)) => 1_000_000,
        _ => 1,
    };
    Built::new(
        Strftime {
            format,
            offset,
            local,
            divisor,
        },
        SampleType::Str,
    )
}

fn build_http_date(b: &ConvBuild<'_>) -> Result<Built, String> {
    let offset = int_arg(b.args, 0)?.unwrap_or(0);
    let divisor = match str_arg(b.args, 1) {
        None | Some("" | "s") => 1,
        Some("ms") => 1_000,
        Some("us") => 1_000_000,
        Some(other) => {
            return Err(format!(
                "invalid time unit '{other}' (expected 's', 'ms' or 'us')"
            ));
        }
    };
    Built::new(HttpDate { offset, divisor }, SampleType::Str)
}

const INT: Option<SampleType> = Some(SampleType::Int);

/// The date converters.
pub(super) static CONVERTERS: Table = &[
    ("ltime", def(1, 2, INT, build_strftime)),
    ("utime", def(1, 2, INT, build_strftime)),
    ("ms_ltime", def(1, 2, INT, build_strftime)),
    ("ms_utime", def(1, 2, INT, build_strftime)),
    ("us_ltime", def(1, 2, INT, build_strftime)),
    ("us_utime", def(1, 2, INT, build_strftime)),
    ("http_date", def(0, 2, INT, build_http_date)),
];
