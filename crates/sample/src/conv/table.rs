//! The `table_*` converters (configuration.txt §7.3.1): `table_conn_cnt(<table>)`,
//! `table_http_req_rate(<table>)`... look the input sample up as a key of the named stick
//! table and return a value of its entry (0 when there is no entry); `in_table([<table>])`
//! says whether the key has an entry (in the current proxy's table by default).
//!
//! The input is taken as it comes: how it becomes a key depends on the table's type, which
//! only the proxy's live table knows, so the lookup goes through [`Context::table_lookup`].

use super::{Built, ConvBuild, Convert};
use crate::context::{Context, StickOp};
use crate::value::{Sample, SampleType};
use sluice_stick::DataType;

/// A compiled `table_*` converter.
#[derive(Debug)]
pub(super) struct TableLookup {
    table: String,
    op: StickOp,
}

impl Convert for TableLookup {
    fn convert<'a>(&'a self, input: Sample<'a>, ctx: &'a dyn Context) -> Option<Sample<'a>> {
        ctx.table_lookup(Some(&self.table), &input, self.op)
            .map(Sample::Int)
    }
}

/// A compiled `in_table`.
#[derive(Debug)]
pub(super) struct InTable {
    table: Option<String>,
}

impl Convert for InTable {
    fn convert<'a>(&'a self, input: Sample<'a>, ctx: &'a dyn Context) -> Option<Sample<'a>> {
        ctx.table_lookup(self.table.as_deref(), &input, StickOp::Present)
            .map(|found| Sample::Bool(found != 0))
    }
}

pub(super) fn build_in_table(b: &ConvBuild<'_>) -> Result<Built, String> {
    let table = b.args.first().filter(|t| !t.is_empty());
    if let Some(table) = table {
        b.maps.check_table(table)?;
    }
    Built::new(
        InTable {
            table: table.cloned(),
        },
        SampleType::Bool,
    )
}

/// The operation of converter `name` (`table_<data>`).
pub(super) fn op_of(name: &str) -> Option<StickOp> {
    let data = name.strip_prefix("table_")?;
    Some(match data {
        "kbytes_in" => StickOp::Kilobytes(DataType::BytesInCnt),
        "kbytes_out" => StickOp::Kilobytes(DataType::BytesOutCnt),
        "trackers" => StickOp::Trackers,
        "bytes_in_cnt" | "bytes_out_cnt" => return None,
        other => match DataType::from_name(other)? {
            // An array's element needs an index (`array_op_of`).
            DataType::Gpt(_) | DataType::Gpc(_) | DataType::GpcRate(_) => return None,
            data => StickOp::Get(data),
        },
    })
}

/// The operation of the array converter `name` (`table_gpc(<idx>,<table>)`, `table_gpc_rate`,
/// `table_gpt`) on element `index`.
pub(super) fn array_op_of(name: &str, index: u8) -> Option<StickOp> {
    Some(StickOp::Get(match name.strip_prefix("table_")? {
        "gpc" => DataType::Gpc(index),
        "gpc_rate" => DataType::GpcRate(index),
        "gpt" => DataType::Gpt(index),
        _ => return None,
    }))
}

/// `table_gpc(<idx>,<table>)` and the other array converters.
pub(super) fn build_array(b: &ConvBuild<'_>) -> Result<Built, String> {
    let [index, table] = b.args else {
        return Err(format!("'{}' expects an index and a table name", b.name));
    };
    let index = sluice_stick::array_index(index)?;
    let op = array_op_of(b.name, index).ok_or_else(|| format!("unknown converter '{}'", b.name))?;
    lookup(b, table, op)
}

pub(super) fn build(b: &ConvBuild<'_>) -> Result<Built, String> {
    let op = op_of(b.name).ok_or_else(|| format!("unknown converter '{}'", b.name))?;
    let table = b
        .args
        .first()
        .filter(|t| !t.is_empty())
        .ok_or("missing table name")?;
    lookup(b, table, op)
}

/// A `table_*` converter running `op` on `table`'s entry for the input, once the table is
/// known to exist.
fn lookup(b: &ConvBuild<'_>, table: &str, op: StickOp) -> Result<Built, String> {
    b.maps.check_table(table)?;
    Built::new(
        TableLookup {
            table: table.to_owned(),
            op,
        },
        SampleType::Int,
    )
}
