//! Fetches of what a stream's log record says, the sample-fetch forms of the log-format
//! aliases (configuration.txt §7.3.2, §8.2.6): its dates (`accept_date`, `request_date`),
//! timers (`req.timer.hdr` for `%TR`, `res.timer.hdr` for `%Tr`...), byte counts, queue
//! positions, retries, status and termination state, whether the server connection was
//! reused (`bc_reused`) and the response compressed (`res.comp`, `res.comp_algo`); and the
//! facts any stage has (`pid`,
//! `uptime`, `act_conn`, `txn.id32`, the stream's number `%rt`).
//!
//! A record exists once its stream ends, so the record's fetches are valid in log formats
//! only ([`Source::Record`]): where the manual also allows some in rules, `-c` says Sluice
//! has no data there rather than giving nothing at run time.

use super::internal::TimeUnit;
use super::{Fetch, FetchDef, Sink, emit};
use crate::context::Context;
use crate::logformat::{LogNumber, LogText};
use crate::stages::Source;
use crate::value::{Sample, SampleType};

/// A compiled record fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    /// `accept_date([unit])`, `request_date([unit])`.
    Date { request: bool, unit: TimeUnit },
    /// A timer, a count or a process fact, as its log-format alias prints it.
    Number(LogNumber),
    /// `txn.redispatched`.
    Redispatched,
    /// `bc_reused`.
    Reused,
    /// `res.comp`.
    Compressed,
    /// `res.comp_algo`.
    CompressionAlgorithm,
    /// `txn.status`: the status sent to the client, as `%ST` prints it.
    Status,
    /// `txn.sess_term_state`: `%ts`.
    TerminationState,
    /// `uptime`: the process's, in seconds.
    Uptime,
}

impl Record {
    pub fn run<'a>(&self, ctx: &'a dyn Context, out: Sink<'_, 'a>) -> bool {
        let facts = ctx.log_facts();
        let value = match *self {
            Record::Date { request, unit } => {
                let at = facts.and_then(|f| {
                    if request {
                        f.request_date()
                    } else {
                        f.accept_date()
                    }
                });
                at.map(|at| Sample::Int(i64::try_from(unit.count(at)).unwrap_or(i64::MAX)))
            }
            Record::Number(which) => ctx.log_number(which).map(Sample::Int),
            Record::Redispatched => facts.map(|f| Sample::Bool(f.redispatched())),
            Record::Reused => facts.map(|f| Sample::Bool(f.reused_server_connection())),
            Record::Compressed => facts.map(|f| Sample::Bool(f.compression().is_some())),
            Record::CompressionAlgorithm => facts
                .and_then(|f| f.compression())
                .map(|name| Sample::str(name.as_bytes())),
            Record::Status => facts
                .and_then(|f| f.number(LogNumber::Status))
                .or_else(|| ctx.response().map(|(_, head)| i64::from(head.status)))
                .map(Sample::Int),
            Record::TerminationState => facts
                .and_then(|f| f.text(LogText::TerminationState))
                .map(Sample::str),
            Record::Uptime => ctx.uptime_seconds().map(Sample::Int),
        };
        emit(value, out)
    }
}

fn build(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let number = |which| Ok(Fetch::Record(Record::Number(which)));
    match def.name {
        "accept_date" | "request_date" => Ok(Fetch::Record(Record::Date {
            request: def.name == "request_date",
            unit: TimeUnit::parse(args.first().map(String::as_str))?,
        })),
        "bc.timer.connect" => number(LogNumber::Connect),
        "fc.timer.handshake" => number(LogNumber::Handshake),
        "fc.timer.total" => number(LogNumber::Total),
        "req.timer.hdr" => number(LogNumber::RequestHead),
        "req.timer.idle" => number(LogNumber::Idle),
        "req.timer.queue" => number(LogNumber::Queue),
        "req.timer.tq" => number(LogNumber::Request),
        "res.timer.data" => number(LogNumber::Data),
        "res.timer.hdr" => number(LogNumber::Response),
        "txn.timer.total" => number(LogNumber::Active),
        "txn.timer.user" => number(LogNumber::User),
        "req.bytes_in" | "bytes_in" => number(LogNumber::BytesFromClient),
        "res.bytes_in" => number(LogNumber::BytesToClient),
        "bc_be_queue" => number(LogNumber::BackendQueue),
        "bc_srv_queue" => number(LogNumber::ServerQueue),
        "txn.conn_retries" => number(LogNumber::Retries),
        "act_conn" => number(LogNumber::ProcessConnections),
        "txn.id32" => number(LogNumber::RequestCounter),
        "pid" => number(LogNumber::Pid),
        "txn.redispatched" => Ok(Fetch::Record(Record::Redispatched)),
        "bc_reused" => Ok(Fetch::Record(Record::Reused)),
        "res.comp" => Ok(Fetch::Record(Record::Compressed)),
        "res.comp_algo" => Ok(Fetch::Record(Record::CompressionAlgorithm)),
        "txn.status" => Ok(Fetch::Record(Record::Status)),
        "txn.sess_term_state" => Ok(Fetch::Record(Record::TerminationState)),
        _ => Ok(Fetch::Record(Record::Uptime)),
    }
}

/// The record fetches.
pub(super) static FETCHES: &[FetchDef] = &[
    fetch_def!("accept_date", 0, 1, Int, Record),
    fetch_def!("request_date", 0, 1, Int, Record),
    fetch_def!("bc.timer.connect", 0, 0, Int, Record),
    fetch_def!("fc.timer.handshake", 0, 0, Int, Record),
    fetch_def!("fc.timer.total", 0, 0, Int, Record),
    fetch_def!("req.timer.hdr", 0, 0, Int, Record),
    fetch_def!("req.timer.idle", 0, 0, Int, Record),
    fetch_def!("req.timer.queue", 0, 0, Int, Record),
    fetch_def!("req.timer.tq", 0, 0, Int, Record),
    fetch_def!("res.timer.data", 0, 0, Int, Record),
    fetch_def!("res.timer.hdr", 0, 0, Int, Record),
    fetch_def!("txn.timer.total", 0, 0, Int, Record),
    fetch_def!("txn.timer.user", 0, 0, Int, Record),
    fetch_def!("req.bytes_in", 0, 0, Int, Record),
    fetch_def!("bytes_in", 0, 0, Int, Record),
    fetch_def!("res.bytes_in", 0, 0, Int, Record),
    fetch_def!("bc_be_queue", 0, 0, Int, Record),
    fetch_def!("bc_srv_queue", 0, 0, Int, Record),
    fetch_def!("txn.conn_retries", 0, 0, Int, Record),
    fetch_def!("txn.redispatched", 0, 0, Bool, Record),
    fetch_def!("bc_reused", 0, 0, Bool, Record),
    fetch_def!("res.comp", 0, 0, Bool, Record),
    fetch_def!("res.comp_algo", 0, 0, Str, Record),
    fetch_def!("txn.sess_term_state", 0, 0, Str, Record),
    fetch_def!("txn.status", 0, 0, Int, Response),
    fetch_def!("act_conn", 0, 0, Int, Internal),
    fetch_def!("txn.id32", 0, 0, Int, Internal),
    fetch_def!("pid", 0, 0, Int, Internal),
    fetch_def!("uptime", 0, 0, Int, Internal),
];
