//! Fetches from internal states (configuration.txt §7.3.2): constants, the environment, the
//! clock, randomness, backend and server counters, variables, the stream's queue priority
//! and the last final rule it matched.
//!
//! None of them looks at the stream's data, so they are valid at every stage
//! ([`Source::Internal`]). Time, randomness, counters and variables come from the
//! [`Context`]; constants are parsed once when the expression is compiled.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::UNIX_EPOCH;

use super::{Fetch, FetchDef, Sink, emit};
use crate::args::{bad_arg, int_arg, str_arg, var_arg};
use crate::context::{BackendStat, Context, FrontendStat, ServerStat};
use crate::stages::Source;
use crate::value::{Sample, SampleType};

/// The unit of `date`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimeUnit {
    /// Seconds (the default).
    Seconds,
    /// Milliseconds.
    Millis,
    /// Microseconds.
    Micros,
}

impl TimeUnit {
    /// The unit an argument names: `s` (or none), `ms` or `us`.
    pub(crate) fn parse(arg: Option<&str>) -> Result<TimeUnit, String> {
        match arg {
            None | Some("" | "s") => Ok(TimeUnit::Seconds),
            Some("ms") => Ok(TimeUnit::Millis),
            Some("us") => Ok(TimeUnit::Micros),
            Some(other) => Err(format!(
                "invalid time unit '{other}' (expected 's', 'ms' or 'us')"
            )),
        }
    }

    /// The date `at` since the epoch, in this unit.
    pub(crate) fn count(self, at: std::time::SystemTime) -> i128 {
        let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
        match self {
            TimeUnit::Seconds => i128::from(since.as_secs()),
            TimeUnit::Millis => since.as_millis() as i128,
            TimeUnit::Micros => since.as_micros() as i128,
        }
    }
}

/// A compiled internal fetch.
#[derive(Clone, Debug)]
pub(crate) enum Internal {
    /// `str`, `int`, `bool`, `bin`, `ipv4`, `ipv6`, `meth`, `always_*`, `proc`.
    Const(Sample<'static>),
    /// `env(name)`.
    Env(String),
    /// `date([offset[,unit]])`.
    Date { offset: i64, unit: TimeUnit },
    /// `date_us`: the microseconds of the date's second.
    DateMicros,
    /// `hostname`.
    Hostname,
    /// `rand([range])`.
    Rand { range: u64 },
    /// `fe_conn`, `fe_sess_rate`, `fe_req_rate`.
    Frontend {
        frontend: Option<String>,
        stat: FrontendStat,
    },
    /// `nbsrv`, `be_conn`, `queue`, `connslots`, `be_sess_rate`, `avg_queue`.
    Backend {
        backend: Option<String>,
        stat: BackendStat,
    },
    /// `srv_conn`, `srv_queue`, `srv_is_up`.
    Server {
        backend: Option<String>,
        server: String,
        stat: ServerStat,
    },
    /// `var(name[,default])`.
    Var {
        name: String,
        default: Option<String>,
    },
    /// `wait_end`.
    WaitEnd,
    /// `unique-id`.
    UniqueId,
    /// `stopping`: the process is stopping (soft stop).
    Stopping,
    /// `thread`: the event-loop thread evaluating the expression, from 0.
    Thread,
    /// `prio_class`, `prio_offset`: the stream's queue priority.
    Priority { offset: bool },
    /// `uuid([4])`: a random (version 4) UUID.
    Uuid,
    /// `last_rule_file`, `last_rule_line`: where the last final rule the stream matched was
    /// configured.
    LastRule { line: bool },
}

impl Internal {
    pub fn run<'a>(&'a self, ctx: &'a dyn Context, out: Sink<'_, 'a>) -> bool {
        let value = match self {
            Internal::Const(value) => Some(value.reborrow()),
            Internal::Env(name) => ctx.env(name).map(|v| Sample::owned_str(v.into_bytes())),
            Internal::Date { offset, unit } => {
                let value = unit.count(ctx.now()).saturating_add(i128::from(*offset));
                Some(Sample::Int(i64::try_from(value).unwrap_or(i64::MAX)))
            }
            Internal::Hostname => ctx.hostname().map(|h| Sample::str(h.as_bytes())),
            Internal::DateMicros => {
                let since = ctx.now().duration_since(UNIX_EPOCH).unwrap_or_default();
                Some(Sample::Int(i64::from(since.subsec_micros())))
            }
            Internal::Rand { range } => {
                // Scales 32 random bits onto the range, as HAProxy does.
                let r = u128::from(ctx.random() & 0xffff_ffff);
                let value = (r * u128::from(*range)) >> 32;
                Some(Sample::Int(i64::try_from(value).unwrap_or(i64::MAX)))
            }
            Internal::Frontend { frontend, stat } => ctx
                .frontend_stat(frontend.as_deref(), *stat)
                .map(Sample::Int),
            Internal::Backend { backend, stat } => {
                ctx.backend_stat(backend.as_deref(), *stat).map(Sample::Int)
            }
            Internal::Server {
                backend,
                server,
                stat,
            } => ctx
                .server_stat(backend.as_deref(), server, *stat)
                .map(|v| match stat {
                    ServerStat::Up => Sample::Bool(v != 0),
                    _ => Sample::Int(v),
                }),
            Internal::Var { name, default } => ctx
                .var(name)
                .or_else(|| default.as_deref().map(|d| Sample::str(d.as_bytes()))),
            Internal::WaitEnd => ctx.inspection_ended().then_some(Sample::Bool(true)),
            Internal::UniqueId => ctx.unique_id(),
            Internal::Stopping => Some(Sample::Bool(ctx.stopping())),
            Internal::Thread => Some(Sample::Int(i64::try_from(ctx.thread()).unwrap_or(0))),
            Internal::Priority { offset } => {
                let (class, offset_ms) = ctx.queue_priority();
                Some(Sample::Int(if *offset { offset_ms } else { class }))
            }
            Internal::LastRule { line } => ctx.last_rule().map(|(file, number)| {
                if *line {
                    Sample::Int(i64::from(number))
                } else {
                    Sample::owned_str(file.as_bytes().to_vec())
                }
            }),
            Internal::Uuid => {
                // Four draws of the 32 bits `random` promises.
                let word = || (ctx.random() & 0xffff_ffff) << 32 | (ctx.random() & 0xffff_ffff);
                let (high, low) = (word(), word());
                Some(Sample::owned_str(uuid_v4(high, low).into_bytes()))
            }
        };
        emit(value, out)
    }
}

/// `fetch: Internal` in a `Fetch`.
fn ok(f: Internal) -> Result<Fetch, String> {
    Ok(Fetch::Internal(f))
}

fn first(args: &[String]) -> &str {
    str_arg(args, 0).unwrap_or("")
}

fn build_const(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let text = first(args);
    let value = match def.name {
        "always_true" => Sample::Bool(true),
        "always_false" => Sample::Bool(false),
        // One process, as HAProxy since 2.5.
        "proc" | "nbproc" => Sample::Int(1),
        "str" => Sample::Str(Cow::Owned(text.as_bytes().to_vec())),
        "int" => Sample::Int(int_arg(args, 0)?.ok_or_else(|| bad_arg(text, "integer", 0))?),
        "bool" => match text {
            "true" | "1" => Sample::Bool(true),
            "false" | "0" => Sample::Bool(false),
            _ => return Err(bad_arg(text, "boolean", 0)),
        },
        "bin" => Sample::Bin(Cow::Owned(
            crate::conv::parse_hex(text).ok_or_else(|| bad_arg(text, "binary", 0))?,
        )),
        "ipv4" => Sample::Ip(IpAddr::V4(
            text.parse::<Ipv4Addr>()
                .map_err(|_| bad_arg(text, "ipv4", 0))?,
        )),
        "ipv6" => Sample::Ip(IpAddr::V6(
            text.parse::<Ipv6Addr>()
                .map_err(|_| bad_arg(text, "ipv6", 0))?,
        )),
        "meth" if !text.is_empty() => Sample::Meth(Cow::Owned(text.as_bytes().to_vec())),
        "meth" => return Err(bad_arg(text, "method", 0)),
        _ => return Err(format!("no constant fetch '{}'", def.name)),
    };
    ok(Internal::Const(value))
}

fn build_env(_: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    ok(Internal::Env(first(args).to_string()))
}

fn build_date(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    if def.name == "date_us" {
        return ok(Internal::DateMicros);
    }
    let offset = int_arg(args, 0)?.unwrap_or(0);
    let unit = TimeUnit::parse(str_arg(args, 1))?;
    ok(Internal::Date { offset, unit })
}

fn build_uuid(_: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    match int_arg(args, 0)? {
        None | Some(4) => ok(Internal::Uuid),
        Some(other) => Err(format!("unsupported UUID version {other} (only 4)")),
    }
}

/// A version 4 UUID (RFC 9562 §5.4) from 128 random bits: the version and variant bits set,
/// the rest random, in its usual text form.
pub(super) fn uuid_v4(high: u64, low: u64) -> String {
    let high = (high & !0xf000) | 0x4000;
    let low = (low & !(0b11 << 62)) | (0b10 << 62);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xffff,
        high & 0xffff,
        low >> 48,
        low & 0xffff_ffff_ffff
    )
}

fn build_rand(_: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let range = match int_arg(args, 0)? {
        None => 1u64 << 32,
        Some(r) => u64::try_from(r).map_err(|_| format!("range must not be negative ({r})"))?,
    };
    ok(Internal::Rand { range })
}

fn build_backend(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let stat = match def.name {
        "nbsrv" => BackendStat::UsableServers,
        "be_conn" => BackendStat::Connections,
        "queue" => BackendStat::Queued,
        "be_sess_rate" => BackendStat::SessionRate,
        "avg_queue" => BackendStat::QueuePerServer,
        "be_conn_free" => BackendStat::FreeConnections,
        _ => BackendStat::FreeSlots,
    };
    let backend = str_arg(args, 0)
        .filter(|b| !b.is_empty())
        .map(str::to_string);
    ok(Internal::Backend { backend, stat })
}

fn build_frontend(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let stat = match def.name {
        "fe_conn" => FrontendStat::Connections,
        "fe_sess_rate" => FrontendStat::SessionRate,
        _ => FrontendStat::RequestRate,
    };
    let frontend = str_arg(args, 0)
        .filter(|f| !f.is_empty())
        .map(str::to_string);
    ok(Internal::Frontend { frontend, stat })
}

fn build_server(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let stat = match def.name {
        "srv_conn" => ServerStat::Connections,
        "srv_conn_free" => ServerStat::FreeConnections,
        "srv_queue" => ServerStat::Queued,
        "srv_sess_rate" => ServerStat::SessionRate,
        "srv_weight" => ServerStat::Weight,
        "srv_iweight" => ServerStat::InitialWeight,
        "srv_uweight" => ServerStat::UserWeight,
        _ => ServerStat::Up,
    };
    let text = first(args);
    let (backend, server) = match text.split_once('/') {
        Some((b, s)) => (Some(b.to_string()), s),
        None => (None, text),
    };
    if server.is_empty() || backend.as_deref() == Some("") {
        return Err(bad_arg(text, "server", 0));
    }
    ok(Internal::Server {
        backend,
        server: server.to_string(),
        stat,
    })
}

fn build_var(_: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let name = var_arg(first(args), 0)?;
    let default = str_arg(args, 1).map(str::to_string);
    ok(Internal::Var { name, default })
}

fn build_wait_end(_: &FetchDef, _: &[String]) -> Result<Fetch, String> {
    ok(Internal::WaitEnd)
}

fn build_unique_id(_: &FetchDef, _: &[String]) -> Result<Fetch, String> {
    ok(Internal::UniqueId)
}

/// Whether some expression of the process reads the last final rule; until one does, the
/// data path does not note it (see [`last_rule_read`]).
static LAST_RULE_READ: AtomicBool = AtomicBool::new(false);

/// Whether an expression reading `last_rule_file` or `last_rule_line` was compiled in this
/// process: only then need streams note their final rules.
pub fn last_rule_read() -> bool {
    LAST_RULE_READ.load(Ordering::Relaxed)
}

fn build_process_state(def: &FetchDef, _: &[String]) -> Result<Fetch, String> {
    if def.name.starts_with("last_rule_") {
        LAST_RULE_READ.store(true, Ordering::Relaxed);
    }
    ok(match def.name {
        "stopping" => Internal::Stopping,
        "hostname" => Internal::Hostname,
        "prio_class" => Internal::Priority { offset: false },
        "prio_offset" => Internal::Priority { offset: true },
        "last_rule_file" => Internal::LastRule { line: false },
        "last_rule_line" => Internal::LastRule { line: true },
        _ => Internal::Thread,
    })
}

macro_rules! def {
    ($name:literal, $min:literal, $max:literal, $out:ident, $build:ident) => {
        FetchDef {
            name: $name,
            min_args: $min,
            max_args: $max,
            out: SampleType::$out,
            source: Source::Internal,
            build: $build,
        }
    };
}

/// The internal fetches.
pub(super) static FETCHES: &[FetchDef] = &[
    def!("always_false", 0, 0, Bool, build_const),
    def!("always_true", 0, 0, Bool, build_const),
    def!("bin", 1, 1, Bin, build_const),
    def!("bool", 1, 1, Bool, build_const),
    def!("int", 1, 1, Int, build_const),
    def!("ipv4", 1, 1, Ip, build_const),
    def!("ipv6", 1, 1, Ip, build_const),
    def!("meth", 1, 1, Meth, build_const),
    def!("proc", 0, 0, Int, build_const),
    def!("nbproc", 0, 0, Int, build_const),
    def!("str", 1, 1, Str, build_const),
    def!("env", 1, 1, Str, build_env),
    def!("date", 0, 2, Int, build_date),
    def!("date_us", 0, 0, Int, build_date),
    def!("rand", 0, 1, Int, build_rand),
    def!("nbsrv", 0, 1, Int, build_backend),
    def!("be_conn", 0, 1, Int, build_backend),
    def!("queue", 0, 1, Int, build_backend),
    def!("connslots", 0, 1, Int, build_backend),
    def!("be_sess_rate", 0, 1, Int, build_backend),
    def!("avg_queue", 0, 1, Int, build_backend),
    def!("be_conn_free", 0, 1, Int, build_backend),
    def!("fe_conn", 0, 1, Int, build_frontend),
    def!("fe_sess_rate", 0, 1, Int, build_frontend),
    def!("fe_req_rate", 0, 1, Int, build_frontend),
    def!("srv_sess_rate", 1, 1, Int, build_server),
    def!("srv_weight", 1, 1, Int, build_server),
    def!("srv_iweight", 1, 1, Int, build_server),
    def!("srv_uweight", 1, 1, Int, build_server),
    def!("srv_conn", 1, 1, Int, build_server),
    def!("srv_conn_free", 1, 1, Int, build_server),
    def!("srv_queue", 1, 1, Int, build_server),
    def!("srv_is_up", 1, 1, Bool, build_server),
    // A variable has the type it was stored with; declared as a string, the type every
    // converter and matching method can start from.
    def!("var", 1, 2, Str, build_var),
    def!("wait_end", 0, 0, Bool, build_wait_end),
    def!("unique-id", 0, 0, Str, build_unique_id),
    def!("stopping", 0, 0, Bool, build_process_state),
    def!("hostname", 0, 0, Str, build_process_state),
    def!("thread", 0, 0, Int, build_process_state),
    def!("prio_class", 0, 0, Int, build_process_state),
    def!("prio_offset", 0, 0, Int, build_process_state),
    def!("last_rule_file", 0, 0, Str, build_process_state),
    def!("last_rule_line", 0, 0, Int, build_process_state),
    def!("uuid", 0, 1, Str, build_uuid),
];
