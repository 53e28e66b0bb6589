//! The stick-table commands of the runtime API (management.txt §9.3): `show table`,
//! `show table <name> [data.<type> <op> <value>]* | [key <key>]`, `clear table <name>
//! [data.<type> <op> <value>]* | [key <key>]`, and `set table <name> key <key>
//! [data.<type> <value>]*`.
//!
//! The output follows HAProxy 2.6 line for line: a `# table:` header per table (listed in
//! reverse declaration order, as HAProxy lists them), then one line per entry with a
//! number naming it, its key, its trackers (`use=`), the milliseconds before it expires
//! (`exp=`), and every stored value (`name(period)=value` for rates). Errors use HAProxy's
//! words, which scripts match. Entries are dumped only to operator and admin sockets.

use crate::commands::{CliState, Flow};
use sluice_config::global::CliLevel;
use sluice_runtime::process::Process;
use sluice_stick::{Data, DataType, KeyType, Table};
use std::fmt::Write;

/// A comparison of a data filter.
#[derive(Clone, Copy)]
enum Op {
    Eq,
    Ne,
    Le,
    Ge,
    Lt,
    Gt,
}

impl Op {
    fn parse(word: &str) -> Option<Op> {
        Some(match word {
            "eq" => Op::Eq,
            "ne" => Op::Ne,
            "le" => Op::Le,
            "ge" => Op::Ge,
            "lt" => Op::Lt,
            "gt" => Op::Gt,
            _ => return None,
        })
    }

    fn holds(self, value: i128, limit: i128) -> bool {
        match self {
            Op::Eq => value == limit,
            Op::Ne => value != limit,
            Op::Le => value <= limit,
            Op::Ge => value >= limit,
            Op::Lt => value < limit,
            Op::Gt => value > limit,
        }
    }
}

/// Which entries a command applies to.
enum Selection {
    /// Every entry.
    All,
    /// The entry of one key (`None`: the key does not parse for the table's type, so nothing
    /// matches).
    Key(Option<Vec<u8>>),
    /// Entries whose values pass every filter.
    Data(Vec<(DataType, Op, i128)>),
}

impl Selection {
    fn matches(&self, key: &[u8], data: &Data<'_>) -> bool {
        match self {
            Selection::All => true,
            Selection::Key(k) => k.as_deref() == Some(key),
            Selection::Data(filters) => filters.iter().all(|(t, op, limit)| {
                data.get(*t)
                    .is_some_and(|v| op.holds(i128::from(v), *limit))
            }),
        }
    }
}

/// What a command does with a key it was given, for HAProxy's refusal of binary keys.
#[derive(Clone, Copy)]
enum KeyUse {
    Show,
    Clear,
    Set,
}

/// The key `text` names in `table`: `Ok(None)` for an `ip` table, where HAProxy ignores a
/// key that is no address; errors are HAProxy's words.
fn cli_key(table: &Table, text: &str, used: KeyUse) -> Result<Option<Vec<u8>>, String> {
    let kind = table.conf().key;
    if let KeyType::Binary(_) = kind {
        let verb = match used {
            KeyUse::Show => "Showing keys from",
            KeyUse::Clear => "Removing keys from",
            KeyUse::Set => "Inserting keys into",
        };
        return Err(format!(
            "{verb} tables of type other than ip, ipv6, string and integer is not supported"
        ));
    }
    match kind.parse_text(text) {
        Some(key) => Ok(Some(key)),
        None if kind == KeyType::Ip => Ok(None),
        None => Err("Invalid key".to_owned()),
    }
}

/// Parses the filters after the table name; the error is HAProxy's message.
fn parse_filters(table: &Table, args: &[String], used: KeyUse) -> Result<Selection, String> {
    let Some(first) = args.first() else {
        return Ok(Selection::All);
    };
    if first == "key" {
        let Some(text) = args.get(1) else {
            return Err("Key value expected".to_owned());
        };
        return Ok(Selection::Key(cli_key(table, text, used)?));
    }
    if !first.starts_with("data.") {
        return Err("Optional argument only supports \"data.<store_data_type>\" <operator> <value> and key <key>".to_owned());
    }
    let mut filters = Vec::new();
    for (i, chunk) in args.chunks(3).enumerate() {
        let n = i + 1;
        let t = chunk[0]
            .strip_prefix("data.")
            .and_then(DataType::from_name)
            .ok_or_else(|| format!("Filter entry #{n}: Unknown data type"))?;
        if !table.conf().layout.has_exactly(t) {
            return Err(format!(
                "Filter entry #{n}: Data type not stored in this table"
            ));
        }
        let op = chunk.get(1).and_then(|w| Op::parse(w)).ok_or_else(|| {
            format!("Filter entry #{n}: Require and operator among \"eq\", \"ne\", \"le\", \"ge\", \"lt\", \"gt\"")
        })?;
        let limit = chunk
            .get(2)
            .and_then(|w| w.parse::<i64>().ok())
            .ok_or_else(|| {
                format!("Filter entry #{n}: Require a valid integer value to compare against")
            })?;
        filters.push((t, op, i128::from(limit)));
    }
    Ok(Selection::Data(filters))
}

fn header(table: &Table, now: u64, out: &mut String) {
    let conf = table.conf();
    let _ = writeln!(
        out,
        "# table: {}, type: {}, size:{}, used:{}",
        conf.name,
        conf.key.name(),
        conf.size,
        table.used(now)
    );
}

/// Writes the entries of `table` that `selection` picks.
fn dump(table: &Table, now: u64, selection: &Selection, out: &mut String) {
    let conf = table.conf();
    table.for_each(now, |entry| {
        if !selection.matches(entry.key, &entry.data) {
            return;
        }
        let _ = write!(
            out,
            "0x{:012x}: key={} use={} exp={}",
            entry.serial,
            conf.key.display(entry.key),
            entry.refs,
            entry.expires_in
        );
        for &(t, period) in conf.layout.stored() {
            if t == DataType::ServerKey {
                let _ = write!(
                    out,
                    " {}={}",
                    t.name(),
                    entry.data.text(t).unwrap_or_default()
                );
                continue;
            }
            let value = entry.data.get(t).unwrap_or_default();
            if t.is_rate() {
                let _ = write!(out, " {}({period})={value}", t.label());
            } else if t == DataType::ServerId {
                // A signed integer in HAProxy.
                let _ = write!(out, " {}={}", t.name(), value as i64 as i32);
            } else {
                let _ = write!(out, " {}={value}", t.label());
            }
        }
        out.push('\n');
    });
}

/// `show table [<name> [filters]]`.
pub fn show_table(
    process: &Process,
    args: &[String],
    state: &mut CliState,
    out: &mut String,
) -> Flow {
    let tables = &process.tables;
    let now = tables.now_ms();
    let Some(name) = args.first() else {
        let all: Vec<_> = tables.iter().collect();
        for table in all.iter().rev() {
            header(table, now, out);
        }
        return Flow::Continue;
    };
    let Some(table) = tables.get(name) else {
        out.push_str("No such table\n");
        return Flow::Continue;
    };
    let selection = match parse_filters(table, &args[1..], KeyUse::Show) {
        Ok(s) => s,
        Err(message) => {
            let _ = writeln!(out, "{message}");
            return Flow::Continue;
        }
    };
    // Looking a key up prints nothing at all when the key has no entry, as in HAProxy.
    if let Selection::Key(key) = &selection {
        let found = key
            .as_deref()
            .and_then(|k| table.lookup(k, now, false, |_, _| ()));
        if found.is_none() {
            return Flow::Continue;
        }
    }
    header(table, now, out);
    if state.level < CliLevel::Operator {
        out.push_str("# contents not dumped due to insufficient privileges\n");
        return Flow::Continue;
    }
    dump(table, now, &selection, out);
    Flow::Continue
}

/// `clear table <name> [filters]`: removes the entries no stream tracks. Like HAProxy, the
/// table is looked up before the level is checked, and a user-level socket clearing a whole
/// table gets an empty answer and changes nothing.
pub fn clear_table(
    process: &Process,
    args: &[String],
    state: &mut CliState,
    out: &mut String,
) -> Flow {
    let Some(name) = args.first() else {
        out.push_str("Required arguments: <table> \"data.<store_data_type>\" <operator> <value> or <table> key <key>\n");
        return Flow::Continue;
    };
    let Some(table) = process.tables.get(name) else {
        out.push_str("No such table\n");
        return Flow::Continue;
    };
    if state.level < CliLevel::Operator {
        if args.len() > 1 {
            out.push_str("Permission denied\n");
        }
        return Flow::Continue;
    }
    match parse_filters(table, &args[1..], KeyUse::Clear) {
        Ok(selection) => {
            table.remove_where(process.tables.now_ms(), |key, data| {
                selection.matches(key, data)
            });
        }
        Err(message) => {
            let _ = writeln!(out, "{message}");
        }
    }
    Flow::Continue
}

/// `set table <name> key <key> [data.<type> <value>]*`: creates the entry if needed, then
/// sets the values (a rate restarts with the value as the current period's count). Needs
/// the operator level, checked once the table is found, as HAProxy does.
pub fn set_table(
    process: &Process,
    args: &[String],
    state: &mut CliState,
    out: &mut String,
) -> Flow {
    let (Some(name), Some("key")) = (args.first(), args.get(1).map(String::as_str)) else {
        out.push_str("Required arguments: <table> key <key> [data.<store_data_type> <value>]*\n");
        return Flow::Continue;
    };
    let Some(table) = process.tables.get(name) else {
        out.push_str("No such table\n");
        return Flow::Continue;
    };
    if state.level < CliLevel::Operator {
        out.push_str("Permission denied\n");
        return Flow::Continue;
    }
    let Some(text) = args.get(2) else {
        out.push_str("Key value expected\n");
        return Flow::Continue;
    };
    let key = match cli_key(table, text, KeyUse::Set) {
        Ok(Some(key)) => key,
        // HAProxy says nothing about an `ip` key that is no address.
        Ok(None) => return Flow::Continue,
        Err(message) => {
            let _ = writeln!(out, "{message}");
            return Flow::Continue;
        }
    };
    let mut values = Vec::new();
    for pair in args[3..].chunks(2) {
        let Some(t) = pair[0].strip_prefix("data.") else {
            out.push_str("\"data.<type>\" followed by a value expected\n");
            return Flow::Continue;
        };
        let Some(t) = DataType::from_name(t) else {
            out.push_str("Unknown data type\n");
            return Flow::Continue;
        };
        if !table.conf().layout.has_exactly(t) {
            out.push_str("Data type not stored in this table\n");
            return Flow::Continue;
        }
        let Some(value) = pair.get(1).and_then(|v| v.parse::<i64>().ok()) else {
            out.push_str("Require a valid integer value to store\n");
            return Flow::Continue;
        };
        // HAProxy stores what it reads in the field's width: negative values wrap (as
        // unsigned 32-bit counters, except the signed server_id and 64-bit byte counts).
        let stored = match t {
            DataType::BytesInCnt | DataType::BytesOutCnt => value as u64,
            DataType::ServerId => value as i32 as u32 as u64,
            _ => u64::from(value as u32),
        };
        values.push((t, stored));
    }
    let done = table.upsert(&key, process.tables.now_ms(), |data, _| {
        for (t, value) in values {
            data.set(t, value);
        }
    });
    if done.is_none() {
        out.push_str("Unable to allocate a new entry\n");
    }
    Flow::Continue
}
