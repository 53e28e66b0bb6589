//! Stick-counter fetches (configuration.txt §7.3.3): `sc_<data>(<ctr>[,<table>])`,
//! `sc0_<data>([<table>])` to `sc2_<data>`, `src_<data>([<table>])`, the arrays' elements
//! `sc_get_gpc(<idx>,<ctr>[,<table>])` and `src_get_gpc(<idx>[,<table>])` (and `gpc_rate`,
//! `inc_gpc`, `clr_gpc`, `get_gpt`), and `table_avl`, `table_cnt`.
//!
//! The keyword names whose entry is read (a tracked counter, or the client's address) and
//! what is done with it ([`StickOp`]: read a counter or rate, increment or clear a
//! general-purpose counter...); the proxy owns the tables and answers through
//! [`Context::stick`]. Every keyword is valid at every stage, as the client's address is.

use super::{Fetch, FetchDef, Sink, emit};
use crate::context::{Context, StickOp, StickSource};
use crate::stages::Source;
use crate::value::SampleType;
use sluice_stick::{DataType, Gpc};

/// A compiled stick-counter fetch.
#[derive(Clone, Debug)]
pub(crate) enum StickFetch {
    /// `sc_*`, `scN_*`, `src_*`.
    Entry {
        source: StickSource,
        table: Option<String>,
        op: StickOp,
    },
    /// `table_avl` (`free`) or `table_cnt`.
    Usage { table: Option<String>, free: bool },
}

impl StickFetch {
    /// Settles the table when the configuration is compiled: `src_*`, `table_avl` and
    /// `table_cnt` without one use the table of the proxy whose rule they are in (tracked
    /// counters use the table they track), and a table that does not exist is an error.
    pub fn resolve(&mut self, maps: &crate::map::MapStore) -> Result<(), String> {
        let table = match self {
            StickFetch::Entry {
                source: StickSource::Counter(_),
                table,
                ..
            } => table,
            StickFetch::Entry { table, .. } | StickFetch::Usage { table, .. } => {
                if table.is_none() {
                    *table = maps.current_proxy();
                }
                table
            }
        };
        table.as_deref().map_or(Ok(()), |t| maps.check_table(t))
    }

    pub fn run<'a>(&'a self, ctx: &'a dyn Context, out: Sink<'_, 'a>) -> bool {
        match self {
            StickFetch::Entry { source, table, op } => {
                emit(ctx.stick(*source, table.as_deref(), *op), out)
            }
            StickFetch::Usage { table, free } => emit(
                ctx.table_usage(table.as_deref(), *free)
                    .map(crate::value::Sample::Int),
                out,
            ),
        }
    }
}

/// The operation a keyword's suffix names.
pub(crate) fn op_of(suffix: &str) -> Option<StickOp> {
    use DataType::*;
    Some(match suffix {
        "kbytes_in" => StickOp::Kilobytes(BytesInCnt),
        "kbytes_out" => StickOp::Kilobytes(BytesOutCnt),
        "inc_gpc0" => StickOp::IncGpc(sluice_stick::Gpc::Legacy(0)),
        "inc_gpc1" => StickOp::IncGpc(sluice_stick::Gpc::Legacy(1)),
        "clr_gpc0" => StickOp::ClrGpc(sluice_stick::Gpc::Legacy(0)),
        "clr_gpc1" => StickOp::ClrGpc(sluice_stick::Gpc::Legacy(1)),
        "get_gpc0" => StickOp::Get(Gpc0),
        "get_gpc1" => StickOp::Get(Gpc1),
        "get_gpt0" => StickOp::Get(Gpt0),
        "trackers" => StickOp::Trackers,
        "tracked" => StickOp::Tracked,
        "updt_conn_cnt" => StickOp::UpdateConnCnt,
        other => {
            let data = DataType::from_name(other)?;
            // Only counters and rates are fetched by their own name (`server_id` is not, nor
            // an array, which takes an index: see `array_op_of`).
            if matches!(
                data,
                ServerId
                    | Gpt0
                    | Gpc0
                    | Gpc1
                    | BytesInCnt
                    | BytesOutCnt
                    | Gpt(_)
                    | Gpc(_)
                    | GpcRate(_)
            ) {
                return None;
            }
            StickOp::Get(data)
        }
    })
}

/// The operation an array keyword's suffix names on element `index` (`sc_get_gpc(<idx>,...)`).
pub(crate) fn array_op_of(suffix: &str, index: u8) -> Option<StickOp> {
    Some(match suffix {
        "get_gpc" => StickOp::Get(DataType::Gpc(index)),
        "gpc_rate" => StickOp::Get(DataType::GpcRate(index)),
        "inc_gpc" => StickOp::IncGpc(Gpc::Element(index)),
        "clr_gpc" => StickOp::ClrGpc(Gpc::Element(index)),
        "get_gpt" => StickOp::Get(DataType::Gpt(index)),
        _ => return None,
    })
}

fn table_arg(args: &[String], index: usize) -> Option<String> {
    args.get(index).filter(|t| !t.is_empty()).cloned()
}

fn build(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let name = def.name;
    let (prefix, suffix) = name.split_once('_').unwrap_or((name, ""));
    // An array's element comes first: `sc_get_gpc(<idx>,<ctr>[,<table>])`.
    let (op, args) = match args.split_first() {
        Some((index, rest)) if array_op_of(suffix, 0).is_some() => {
            let index = sluice_stick::array_index(index)?;
            (array_op_of(suffix, index), rest)
        }
        _ => (op_of(suffix), args),
    };
    let op = op.ok_or_else(|| format!("unknown stick-counter data '{suffix}'"))?;
    let (source, table) = match prefix {
        "sc" => {
            let text = args.first().map(String::as_str).unwrap_or_default();
            let counter = text
                .parse::<usize>()
                .ok()
                .filter(|&n| n < 3)
                .ok_or_else(|| format!("invalid stick counter '{text}' (0 to 2)"))?;
            (StickSource::Counter(counter), table_arg(args, 1))
        }
        "src" => (StickSource::Src, table_arg(args, 0)),
        _ => {
            let counter = prefix
                .strip_prefix("sc")
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| format!("unknown stick counter in '{name}'"))?;
            (StickSource::Counter(counter), table_arg(args, 0))
        }
    };
    Ok(Fetch::Stick(StickFetch::Entry { source, table, op }))
}

fn build_usage(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    Ok(Fetch::Stick(StickFetch::Usage {
        table: table_arg(args, 0),
        free: def.name == "table_avl",
    }))
}

/// One keyword of the family.
const fn entry(name: &'static str, min_args: usize, max_args: usize, out: SampleType) -> FetchDef {
    FetchDef {
        name,
        min_args,
        max_args,
        out,
        source: Source::ClientAddress,
        build,
    }
}

/// The five keywords of a data suffix: `sc_`, `sc0_`, `sc1_`, `sc2_`, `src_`.
macro_rules! family {
    ($($suffix:literal),* $(,)?) => {
        &[
            $(
                entry(concat!("sc_", $suffix), 1, 2, SampleType::Int),
                entry(concat!("sc0_", $suffix), 0, 1, SampleType::Int),
                entry(concat!("sc1_", $suffix), 0, 1, SampleType::Int),
                entry(concat!("sc2_", $suffix), 0, 1, SampleType::Int),
                entry(concat!("src_", $suffix), 0, 1, SampleType::Int),
            )*
        ]
    };
}

pub(super) static FETCHES: &[FetchDef] = family![
    "bytes_in_rate",
    "bytes_out_rate",
    "clr_gpc0",
    "clr_gpc1",
    "conn_cnt",
    "conn_cur",
    "conn_rate",
    "get_gpc0",
    "get_gpc1",
    "get_gpt0",
    "gpc0_rate",
    "gpc1_rate",
    "http_err_cnt",
    "http_err_rate",
    "http_fail_cnt",
    "http_fail_rate",
    "http_req_cnt",
    "http_req_rate",
    "inc_gpc0",
    "inc_gpc1",
    "kbytes_in",
    "kbytes_out",
    "sess_cnt",
    "sess_rate",
];

/// The keywords of one source only.
pub(super) static OTHER_FETCHES: &[FetchDef] = &[
    // The arrays' elements: `sc_` (index, counter, table) and `src_` (index, table) only.
    entry("sc_get_gpc", 2, 3, SampleType::Int),
    entry("sc_gpc_rate", 2, 3, SampleType::Int),
    entry("sc_inc_gpc", 2, 3, SampleType::Int),
    entry("sc_clr_gpc", 2, 3, SampleType::Int),
    entry("sc_get_gpt", 2, 3, SampleType::Int),
    entry("src_get_gpc", 1, 2, SampleType::Int),
    entry("src_gpc_rate", 1, 2, SampleType::Int),
    entry("src_inc_gpc", 1, 2, SampleType::Int),
    entry("src_clr_gpc", 1, 2, SampleType::Int),
    entry("src_get_gpt", 1, 2, SampleType::Int),
    entry("sc_trackers", 1, 2, SampleType::Int),
    entry("sc0_trackers", 0, 1, SampleType::Int),
    entry("sc1_trackers", 0, 1, SampleType::Int),
    entry("sc2_trackers", 0, 1, SampleType::Int),
    entry("sc_tracked", 1, 2, SampleType::Bool),
    entry("sc0_tracked", 0, 1, SampleType::Bool),
    entry("sc1_tracked", 0, 1, SampleType::Bool),
    entry("sc2_tracked", 0, 1, SampleType::Bool),
    entry("src_updt_conn_cnt", 0, 1, SampleType::Int),
    FetchDef {
        name: "table_avl",
        min_args: 0,
        max_args: 1,
        out: SampleType::Int,
        source: Source::Internal,
        build: build_usage,
    },
    FetchDef {
        name: "table_cnt",
        min_args: 0,
        max_args: 1,
        out: SampleType::Int,
        source: Source::Internal,
        build: build_usage,
    },
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use crate::testing::TestCtx;
    use crate::{Expr, MapStore, Sample};

    fn asked(text: &str) -> (Option<Sample<'static>>, Vec<String>) {
        let ctx = TestCtx::new();
        let expr = Expr::parse(text, &MapStore::new()).unwrap();
        let value = expr.eval(&ctx).map(Sample::into_owned);
        (value, ctx.stick_asked.take())
    }

    #[test]
    fn names_the_entry_and_the_operation() {
        let (value, first) = asked("sc_http_req_rate(0)");
        assert_eq!(value, Some(Sample::Int(7)));
        assert_eq!(first, ["Counter(0) None Get(HttpReqRate)"]);
        assert_eq!(
            asked("sc1_conn_cur(other)").1,
            ["Counter(1) Some(\"other\") Get(ConnCur)"]
        );
        assert_eq!(asked("src_inc_gpc0").1, ["Src None IncGpc(Legacy(0))"]);
        assert_eq!(
            asked("sc_get_gpt0(2,t)").1,
            ["Counter(2) Some(\"t\") Get(Gpt0)"]
        );
        assert_eq!(asked("src_kbytes_in").1, ["Src None Kilobytes(BytesInCnt)"]);
        assert_eq!(asked("sc0_tracked").1, ["Counter(0) None Tracked"]);
        assert_eq!(
            asked("src,table_http_req_cnt(t)").1,
            ["t Ip(192.168.1.10) Get(HttpReqCnt)"]
        );
        // `in_table`: the named table or the current proxy's, answered as a boolean.
        let (found, question) = asked("src,in_table(t)");
        assert_eq!(found, Some(Sample::Bool(true)));
        assert_eq!(question, ["t Ip(192.168.1.10) Present"]);
        assert_eq!(asked("src,in_table").1, ["- Ip(192.168.1.10) Present"]);
    }

    #[test]
    fn array_fetches_take_the_element_first() {
        assert_eq!(asked("sc_get_gpc(2,1)").1, ["Counter(1) None Get(Gpc(2))"]);
        assert_eq!(
            asked("sc_gpc_rate(0,2,t)").1,
            ["Counter(2) Some(\"t\") Get(GpcRate(0))"]
        );
        assert_eq!(
            asked("sc_inc_gpc(7,0)").1,
            ["Counter(0) None IncGpc(Element(7))"]
        );
        assert_eq!(
            asked("src_clr_gpc(1,t)").1,
            ["Src Some(\"t\") ClrGpc(Element(1))"]
        );
        assert_eq!(asked("src_get_gpt(3)").1, ["Src None Get(Gpt(3))"]);
        assert_eq!(
            asked("sc0_http_fail_rate").1,
            ["Counter(0) None Get(HttpFailRate)"]
        );
        assert_eq!(
            asked("src,table_gpc_rate(1,t)").1,
            ["t Ip(192.168.1.10) Get(GpcRate(1))"]
        );
        // Past the largest array: an element no table has.
        assert_eq!(
            asked("sc_get_gpc(100,0)").1,
            ["Counter(0) None Get(Gpc(100))"]
        );
        let maps = MapStore::new();
        assert!(Expr::parse("sc_get_gpc(1)", &maps).is_err());
        assert!(Expr::parse("sc0_get_gpc(1)", &maps).is_err());
        assert!(Expr::parse("src,table_gpc(t)", &maps).is_err());
        assert!(Expr::parse("src,table_gpc(x,t)", &maps).is_err());
    }

    #[test]
    fn refuses_bad_counters() {
        let maps = MapStore::new();
        assert!(Expr::parse("sc_conn_cnt(3)", &maps).is_err());
        assert!(Expr::parse("sc_conn_cnt", &maps).is_err());
        assert!(Expr::parse("src_tracked", &maps).is_err());
        assert!(Expr::parse("src,table_nothing(t)", &maps).is_err());
        assert!(Expr::parse("src,table_conn_cnt", &maps).is_err());
        // Once the configuration declared its tables, other names are refused.
        maps.declare_tables(["t".to_owned()]);
        assert!(Expr::parse("sc_conn_cnt(0,t)", &maps).is_ok());
        let err = Expr::parse("src_conn_cnt(nope)", &maps).unwrap_err();
        assert!(err.contains("unable to find table 'nope'"), "{err}");
        assert!(Expr::parse("src,table_conn_cnt(nope)", &maps).is_err());
        assert!(Expr::parse("src,in_table(nope)", &maps).is_err());
        // `src_port` is still the client's port, not a stick counter.
        assert_eq!(
            Expr::parse("src_port", &maps).unwrap().out_type(),
            crate::SampleType::Int
        );
    }
}
