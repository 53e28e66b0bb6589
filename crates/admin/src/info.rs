//! `show info typed` and `show info json` (management.txt §9.3): the fields of `show info`
//! with HAProxy's position, tags and type for each.
//!
//! HAProxy numbers its information fields; Sluice reports those it has a meaning for (the
//! TLS ones are 0: it terminates no TLS; its memory pools are not HAProxy's and its tasks
//! are not counted, so those fields are left out, as is the rate of bytes out) and keeps
//! each one's number, so a tool reading `12.Name.1:...` or `"pos":12` finds the same field
//! in both. The tags use the letters of `show stat typed` (origin, nature, scope).

use sluice_runtime::stats_typed::json_value;
use std::fmt::Write;

/// Per field name: HAProxy's position, tags and type.
const INFO_FIELDS: [(&str, u32, &str, &str); 62] = [
    ("Name", 0, "POS", "str"),
    ("Version", 1, "POS", "str"),
    ("Release_date", 2, "POS", "str"),
    ("Nbthread", 3, "CGS", "u32"),
    ("Nbproc", 4, "CGS", "u32"),
    ("Process_num", 5, "KGP", "u32"),
    ("Pid", 6, "SGP", "u32"),
    ("Uptime", 7, "MDP", "str"),
    ("Uptime_sec", 8, "MDP", "u32"),
    ("Memmax_MB", 9, "CLP", "u32"),
    ("Ulimit-n", 13, "CLP", "u32"),
    ("Maxsock", 14, "CLP", "u32"),
    ("Maxconn", 15, "CLP", "u32"),
    ("Hard_maxconn", 16, "CLP", "u32"),
    ("CurrConns", 17, "MGP", "u32"),
    ("CumConns", 18, "MCP", "u32"),
    ("CumReq", 19, "MCP", "u32"),
    ("MaxSslConns", 20, "MMP", "u32"),
    ("CurrSslConns", 21, "MGP", "u32"),
    ("CumSslConns", 22, "MCP", "u32"),
    ("Maxpipes", 23, "CLP", "u32"),
    ("PipesUsed", 24, "MGP", "u32"),
    ("PipesFree", 25, "MGP", "u32"),
    ("ConnRate", 26, "MRP", "u32"),
    ("ConnRateLimit", 27, "CLP", "u32"),
    ("MaxConnRate", 28, "MMP", "u32"),
    ("SessRate", 29, "MRP", "u32"),
    ("SessRateLimit", 30, "CLP", "u32"),
    ("MaxSessRate", 31, "MRP", "u32"),
    ("SslRate", 32, "MRP", "u32"),
    ("SslRateLimit", 33, "CLP", "u32"),
    ("MaxSslRate", 34, "MMP", "u32"),
    ("SslFrontendKeyRate", 35, "MGP", "u32"),
    ("SslFrontendMaxKeyRate", 36, "MMP", "u32"),
    ("SslFrontendSessionReuse_pct", 37, "MGP", "u32"),
    ("SslBackendKeyRate", 38, "MRP", "u32"),
    ("SslBackendMaxKeyRate", 39, "MMP", "u32"),
    ("SslCacheLookups", 40, "MCP", "u32"),
    ("SslCacheMisses", 41, "MCP", "u32"),
    ("CompressBpsIn", 42, "MRP", "u32"),
    ("CompressBpsOut", 43, "MRP", "u32"),
    ("CompressBpsRateLim", 44, "CLP", "u32"),
    ("Idle_pct", 49, "MaP", "u32"),
    ("node", 50, "COS", "str"),
    ("description", 51, "COS", "str"),
    ("Stopping", 52, "MGP", "u32"),
    ("Jobs", 53, "MGP", "u32"),
    ("Unstoppable Jobs", 54, "MGP", "u32"),
    ("Listeners", 55, "MGP", "u32"),
    ("ActivePeers", 56, "MGP", "u32"),
    ("ConnectedPeers", 57, "MGP", "u32"),
    ("DroppedLogs", 58, "MGP", "u32"),
    ("BusyPolling", 59, "MGP", "u32"),
    ("FailedResolutions", 60, "MGP", "u32"),
    ("TotalBytesOut", 61, "MGP", "u64"),
    // HAProxy's spelling, kept so tools find the field.
    ("TotalSplicdedBytesOut", 62, "MGP", "u64"),
    ("DebugCommandsIssued", 64, "MGP", "u32"),
    ("CumRecvLogs", 65, "MCP", "u32"),
    ("Build info", 66, "POS", "str"),
    ("Memmax_bytes", 67, "CLP", "u32"),
    ("Start_time_sec", 70, "MDP", "u32"),
    ("Tainted", 71, "SGP", "str"),
];

fn describe(name: &str) -> Option<(u32, &'static str, &'static str)> {
    INFO_FIELDS
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|(_, pos, tags, ty)| (*pos, *tags, *ty))
}

/// `show info typed`: `<pos>.<name>.1:<tags>:<type>:<value>` per field.
pub fn typed(fields: &[(&str, String)], out: &mut String) {
    for (name, value) in fields {
        if let Some((pos, tags, ty)) = describe(name) {
            let _ = writeln!(out, "{pos}.{name}.1:{tags}:{ty}:{value}");
        }
    }
}

/// `show info json`: one array of HAProxy's field objects.
pub fn json(fields: &[(&str, String)], out: &mut String) {
    out.push('[');
    let mut first = true;
    for (name, value) in fields {
        let Some((pos, tags, ty)) = describe(name) else {
            continue;
        };
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(
            out,
            "{{\"field\":{{\"pos\":{pos},\"name\":\"{name}\"}},{}}}",
            json_value(tags, ty, value)
        );
    }
    out.push_str("]\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_rise_and_names_are_unique() {
        for pair in INFO_FIELDS.windows(2) {
            assert!(pair[0].1 < pair[1].1, "{pair:?}");
        }
    }

    #[test]
    fn info_fields_keep_haproxy_positions() {
        let fields = [("Name", "Sluice".to_string()), ("Pid", "42".to_string())];
        let mut out = String::new();
        typed(&fields, &mut out);
        assert_eq!(out, "0.Name.1:POS:str:Sluice\n6.Pid.1:SGP:u32:42\n");
        out.clear();
        json(&fields[1..], &mut out);
        assert_eq!(
            out,
            "[{\"field\":{\"pos\":6,\"name\":\"Pid\"},\"processNum\":1,\"tags\":{\"origin\":\"Status\",\"nature\":\"Gauge\",\"scope\":\"Process\"},\"value\":{\"type\":\"u32\",\"value\":42}}]\n"
        );
    }
}
