//! `show stat typed` and `show stat json`: the rows of [`crate::stats`] one field per line, each with HAProxy's
//! type tags (management.txt §9.3 "show stat"): `F|B|S.<iid>.<sid>.<index>.<name>.<pid>:
//! <origin><nature><scope>:<type>:<value>`.
//!
//! The tags describe the fields, not their values, so they are a fixed table in field order:
//! origin (K key, C configuration, M metric, S status), nature (N name, G gauge, M maximum,
//! L limit, C counter, A age, a average, R rate, D duration, O output), scope (P process,
//! S service) and the value's type. A few fields are tagged differently on backends or servers;
//! those exceptions are listed beside the field. Empty fields are left out, as HAProxy does.

use crate::process::Process;
use crate::stats::{self, FIELDS, Filter, Row, RowKind};
use std::fmt::Write;

/// Per field: tags, type, and the (kind letter, tags, type) exceptions.
type Tags = (
    &'static str,
    &'static str,
    &'static [(char, &'static str, &'static str)],
);

const TAGS: [Tags; 103] = [
    ("KNS", "str", &[]),                    // 0 pxname
    ("KNS", "str", &[]),                    // 1 svname
    ("MGP", "u32", &[]),                    // 2 qcur
    ("MMP", "u32", &[]),                    // 3 qmax
    ("MGP", "u32", &[]),                    // 4 scur
    ("MMP", "u32", &[]),                    // 5 smax
    ("CLP", "u32", &[]),                    // 6 slim
    ("MCP", "u64", &[]),                    // 7 stot
    ("MCP", "u64", &[]),                    // 8 bin
    ("MCP", "u64", &[]),                    // 9 bout
    ("MCP", "u64", &[]),                    // 10 dreq
    ("MCP", "u64", &[]),                    // 11 dresp
    ("MCP", "u64", &[]),                    // 12 ereq
    ("MCP", "u64", &[]),                    // 13 econ
    ("MCP", "u64", &[]),                    // 14 eresp
    ("MCP", "u64", &[]),                    // 15 wretr
    ("MCP", "u64", &[]),                    // 16 wredis
    ("SGP", "str", &[]),                    // 17 status
    ("MaP", "u32", &[]),                    // 18 weight
    ("MGP", "u32", &[('S', "SGP", "u32")]), // 19 act
    ("MGP", "u32", &[('S', "SGP", "u32")]), // 20 bck
    ("MCP", "u64", &[]),                    // 21 chkfail
    ("MCP", "u64", &[]),                    // 22 chkdown
    ("MAP", "u32", &[]),                    // 23 lastchg
    ("MCP", "u32", &[]),                    // 24 downtime
    ("CGS", "u32", &[]),                    // 25 qlimit
    ("KGP", "u32", &[]),                    // 26 pid
    ("KGS", "u32", &[]),                    // 27 iid
    ("KGS", "u32", &[]),                    // 28 sid
    ("MOP", "u32", &[]),                    // 29 throttle
    ("MCP", "u64", &[]),                    // 30 lbtot
    ("CNS", "str", &[]),                    // 31 tracked
    ("CGS", "u32", &[]),                    // 32 type
    ("MRP", "u32", &[('B', "MGP", "u32")]), // 33 rate
    ("CLP", "u32", &[]),                    // 34 rate_lim
    ("MMP", "u32", &[('B', "MGP", "u32")]), // 35 rate_max
    ("MOP", "str", &[]),                    // 36 check_status
    ("MOP", "u32", &[]),                    // 37 check_code
    ("MDP", "u64", &[]),                    // 38 check_duration
    ("MCP", "u64", &[]),                    // 39 hrsp_1xx
    ("MCP", "u64", &[]),                    // 40 hrsp_2xx
    ("MCP", "u64", &[]),                    // 41 hrsp_3xx
    ("MCP", "u64", &[]),                    // 42 hrsp_4xx
    ("MCP", "u64", &[]),                    // 43 hrsp_5xx
    ("MCP", "u64", &[]),                    // 44 hrsp_other
    ("MCP", "u64", &[]),                    // 45 hanafail
    ("MRP", "u32", &[]),                    // 46 req_rate
    ("MMP", "u32", &[]),                    // 47 req_rate_max
    ("MCP", "u64", &[]),                    // 48 req_tot
    ("MCP", "u64", &[]),                    // 49 cli_abrt
    ("MCP", "u64", &[]),                    // 50 srv_abrt
    ("MCP", "u64", &[]),                    // 51 comp_in
    ("MCP", "u64", &[]),                    // 52 comp_out
    ("MCP", "u64", &[]),                    // 53 comp_byp
    ("MCP", "u64", &[]),                    // 54 comp_rsp
    ("MAP", "s32", &[]),                    // 55 lastsess
    ("MOP", "str", &[]),                    // 56 last_chk
    ("MOP", "str", &[]),                    // 57 last_agt
    ("MaP", "u32", &[]),                    // 58 qtime
    ("MaP", "u32", &[]),                    // 59 ctime
    ("MaP", "u32", &[]),                    // 60 rtime
    ("MaP", "u32", &[]),                    // 61 ttime
    ("MOP", "str", &[]),                    // 62 agent_status
    ("MOP", "u32", &[]),                    // 63 agent_code
    ("MDP", "u64", &[]),                    // 64 agent_duration
    ("MOP", "str", &[]),                    // 65 check_desc
    ("MOP", "str", &[]),                    // 66 agent_desc
    ("CGS", "u32", &[]),                    // 67 check_rise
    ("CGS", "u32", &[]),                    // 68 check_fall
    ("CGS", "u32", &[]),                    // 69 check_health
    ("CGS", "u32", &[]),                    // 70 agent_rise
    ("CGS", "u32", &[]),                    // 71 agent_fall
    ("CGS", "u32", &[]),                    // 72 agent_health
    ("CGS", "str", &[]),                    // 73 addr
    ("CNS", "str", &[]),                    // 74 cookie
    ("CGS", "str", &[]),                    // 75 mode
    ("CGS", "str", &[]),                    // 76 algo
    ("MRP", "u32", &[]),                    // 77 conn_rate
    ("MMP", "u32", &[]),                    // 78 conn_rate_max
    ("MCP", "u64", &[]),                    // 79 conn_tot
    ("MCP", "u64", &[]),                    // 80 intercepted
    ("MCP", "u64", &[]),                    // 81 dcon
    ("MCP", "u64", &[]),                    // 82 dses
    ("MCP", "u64", &[]),                    // 83 wrew
    ("MCP", "u64", &[]),                    // 84 connect
    ("MCP", "u64", &[]),                    // 85 reuse
    ("MCP", "u64", &[]),                    // 86 cache_lookups
    ("MCP", "u64", &[]),                    // 87 cache_hits
    ("MGP", "u32", &[]),                    // 88 srv_icur
    ("MGP", "u32", &[]),                    // 89 src_ilim
    ("MMP", "u32", &[]),                    // 90 qtime_max
    ("MMP", "u32", &[]),                    // 91 ctime_max
    ("MMP", "u32", &[]),                    // 92 rtime_max
    ("MMP", "u32", &[]),                    // 93 ttime_max
    ("MCP", "u64", &[]),                    // 94 eint
    ("MGP", "u32", &[]),                    // 95 idle_conn_cur
    ("MGP", "u32", &[]),                    // 96 safe_conn_cur
    ("MGP", "u32", &[]),                    // 97 used_conn_cur
    ("MGP", "u32", &[]),                    // 98 need_conn_est
    ("MaP", "u32", &[]),                    // 99 uweight
    ("MGP", "u32", &[]),                    // 100 agg_server_status
    ("MGP", "u32", &[]),                    // 101 agg_server_check_status
    ("MGP", "u32", &[]),                    // 102 agg_check_status
];

/// The letter of a row's kind.
fn letter(kind: RowKind) -> char {
    match kind {
        RowKind::Frontend => 'F',
        RowKind::Backend => 'B',
        RowKind::Server => 'S',
        RowKind::Listener => 'L',
    }
}

/// One non-empty field of a row with its position, name, value, tags and type.
struct TypedCell<'r> {
    index: usize,
    name: &'static str,
    value: &'r str,
    tags: &'static str,
    ty: &'static str,
}

/// A row's non-empty fields with the tags and type they have for this kind of row.
fn typed_cells(row: &Row) -> impl Iterator<Item = TypedCell<'_>> {
    let kind = letter(row.kind);
    FIELDS
        .iter()
        .zip(row.cells())
        .zip(TAGS.iter())
        .enumerate()
        .filter(|(_, ((_, value), _))| !value.is_empty())
        .map(move |(index, ((name, value), (tags, ty, exceptions)))| {
            let (tags, ty) = exceptions
                .iter()
                .find(|(k, _, _)| *k == kind)
                .map_or((*tags, *ty), |(_, t, y)| (*t, *y));
            TypedCell {
                index,
                name,
                value,
                tags,
                ty,
            }
        })
}

/// Writes one row's non-empty fields.
pub fn write_row(row: &Row, out: &mut String) {
    let kind = letter(row.kind);
    for TypedCell {
        index,
        name,
        value,
        tags,
        ty,
    } in typed_cells(row)
    {
        let _ = writeln!(
            out,
            "{kind}.{}.{}.{index}.{name}.1:{tags}:{ty}:{value}",
            row.iid, row.sid
        );
    }
}

/// The words HAProxy's JSON uses for a field's tags (`MCP` → Metric, Counter, Process).
pub fn tag_words(tags: &str) -> (&'static str, &'static str, &'static str) {
    let mut t = tags.chars();
    let origin = match t.next() {
        Some('K') => "Key",
        Some('C') => "Config",
        Some('S') => "Status",
        Some('P') => "Product",
        _ => "Metric",
    };
    let nature = match t.next() {
        Some('N') => "Name",
        Some('M') => "Max",
        Some('L') => "Limit",
        Some('C') => "Counter",
        Some('A') => "Age",
        Some('a') => "Avg",
        Some('R') => "Rate",
        Some('D') => "Duration",
        Some('O') => "Output",
        _ => "Gauge",
    };
    let scope = match t.next() {
        Some('S') => "Service",
        Some('s') => "System",
        _ => "Process",
    };
    (origin, nature, scope)
}

/// `text` as a JSON string, quotes included.
pub fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One field as HAProxy's JSON object: position, name, tags, and the value typed (numbers
/// bare, strings quoted; a number that does not parse is given as a string).
pub fn json_value(tags: &str, ty: &str, value: &str) -> String {
    let (origin, nature, scope) = tag_words(tags);
    let number = ty != "str" && value.parse::<i64>().is_ok();
    let value = if number {
        value.to_string()
    } else {
        json_string(value)
    };
    let ty = if number { ty } else { "str" };
    format!(
        "\"processNum\":1,\"tags\":{{\"origin\":\"{origin}\",\"nature\":\"{nature}\",\"scope\":\"{scope}\"}},\"value\":{{\"type\":\"{ty}\",\"value\":{value}}}"
    )
}

/// The whole `show stat json` output (also the stats page's `;json` export) for the rows
/// `keep` accepts: an array per row of its non-empty fields.
pub fn json(process: &Process, keep: impl Fn(&Row) -> bool) -> String {
    let mut out = String::from("[");
    let rows = stats::collect(process);
    for (r, row) in rows.iter().filter(|r| keep(r)).enumerate() {
        if r > 0 {
            out.push(',');
        }
        out.push('[');
        let obj = match row.kind {
            RowKind::Frontend => "Frontend",
            RowKind::Backend => "Backend",
            RowKind::Server => "Server",
            RowKind::Listener => "Listener",
        };
        let mut first = true;
        for TypedCell {
            index,
            name,
            value,
            tags,
            ty,
        } in typed_cells(row)
        {
            if !first {
                out.push(',');
            }
            first = false;
            let _ = write!(
                out,
                "{{\"objType\":\"{obj}\",\"proxyId\":{},\"id\":{},\"field\":{{\"pos\":{index},\"name\":\"{name}\"}},{}}}",
                row.iid,
                row.sid,
                json_value(tags, ty, value)
            );
        }
        out.push(']');
    }
    out.push_str("]\n");
    out
}

/// The whole `show stat typed` output for `filter`.
pub fn typed(process: &Process, filter: Filter) -> String {
    let mut out = String::new();
    for row in stats::collect(process).iter().filter(|r| filter.keeps(r)) {
        write_row(row, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_follows_the_fields() {
        assert_eq!(TAGS.len(), FIELDS.len());
        for (tags, ty, exceptions) in TAGS {
            assert_eq!(tags.len(), 3);
            assert!(["str", "u32", "u64", "s32"].contains(&ty));
            for (k, t, _) in exceptions {
                assert!(['F', 'B', 'S'].contains(k) && t.len() == 3);
            }
        }
    }

    #[test]
    fn json_values_are_typed_and_escaped() {
        assert_eq!(tag_words("MCP"), ("Metric", "Counter", "Process"));
        assert_eq!(tag_words("KNS"), ("Key", "Name", "Service"));
        assert_eq!(
            json_value("MCP", "u64", "12"),
            "\"processNum\":1,\"tags\":{\"origin\":\"Metric\",\"nature\":\"Counter\",\"scope\":\"Process\"},\"value\":{\"type\":\"u64\",\"value\":12}"
        );
        assert!(json_value("SGP", "str", "UP").ends_with("{\"type\":\"str\",\"value\":\"UP\"}"));
        assert_eq!(json_string("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
