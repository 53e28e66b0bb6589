//! Parsing and running CLI command lines (management.txt §9.3).
//!
//! A line holds one or more commands separated by unescaped `;`; each command is split into
//! words at spaces, a backslash protecting the next character. Every command's output ends
//! with an empty line, the delimiter scripts rely on. Commands are matched by their leading
//! words against [`COMMANDS`], which also gives the `help` text and the least level allowed.

use crate::{errors, info, maps, misc, ops, sessions, tables};
use sluice_config::global::CliLevel;
use sluice_runtime::process::Process;
use std::fmt::Write;

/// How the connection behaves after a line (the `prompt` command changes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CliMode {
    /// One line, then the connection closes (the default, used by scripts).
    NonInteractive,
    /// Lines are read until `quit`, without prompt.
    Interactive,
    /// Lines are read until `quit`, with a `> ` prompt.
    Prompt,
}

/// The state of one CLI connection.
#[derive(Clone, Debug)]
pub struct CliState {
    /// Current mode.
    pub mode: CliMode,
    /// What the socket allows (`level`).
    pub level: CliLevel,
    /// The lines that followed a command ending with `<<`, up to the empty line, for the
    /// command being run (`add map <map> <<`).
    pub payload: Option<String>,
    /// `expert-mode on`.
    pub expert: bool,
    /// `experimental-mode on`.
    pub experimental: bool,
}

/// What the connection does after a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Read the next line (interactive modes).
    Continue,
    /// Close the connection.
    Close,
    /// Stream the events of `process.rings[ring]` from number `next` on, until the client
    /// sends anything or leaves (`show events NAME -w`); then close.
    Follow {
        /// Index of the ring in `Process::rings`.
        ring: usize,
        /// The first event not sent yet.
        next: u64,
    },
}

type Handler = fn(&Process, &[String], &mut CliState, &mut String) -> Flow;

/// One CLI command.
pub struct Command {
    /// The words that select it.
    pub words: &'static [&'static str],
    /// Its syntax, for `help`; empty for the commands `help` does not list, as HAProxy
    /// keeps the mode switches out of it.
    pub usage: &'static str,
    /// What it does, for `help`.
    pub summary: &'static str,
    /// The least level allowed to run it.
    pub level: CliLevel,
    run: Handler,
}

/// Every command Sluice answers, in the order `help` lists them.
pub const COMMANDS: &[Command] = &[
    Command {
        words: &["show", "info"],
        usage: "show info",
        summary: "report information about the running process",
        level: CliLevel::User,
        run: show_info,
    },
    Command {
        words: &["show", "stat"],
        usage: "show stat [{<iid>|<proxy>} <type> <sid>] [typed]",
        summary: "report counters for each proxy and server",
        level: CliLevel::User,
        run: ops::show_stat,
    },
    Command {
        words: &["show", "events"],
        usage: "show events [<sink>] [-w] [-n]",
        summary: "show event sink state",
        level: CliLevel::Operator,
        run: show_events,
    },
    Command {
        words: &["show", "cache"],
        usage: "show cache",
        summary: "show cache status",
        level: CliLevel::Admin,
        run: show_cache,
    },
    Command {
        words: &["show", "servers", "state"],
        usage: "show servers state [<backend>]",
        summary: "dump volatile server information (all or for a single backend)",
        level: CliLevel::User,
        run: ops::show_servers_state,
    },
    Command {
        words: &["show", "backend"],
        usage: "show backend",
        summary: "list backends in the current running config",
        level: CliLevel::User,
        run: ops::show_backend,
    },
    Command {
        words: &["show", "table"],
        usage: "show table <table> [<filter>]*",
        summary: "report table usage stats or dump this table's contents (filter: data/key)",
        level: CliLevel::User,
        run: tables::show_table,
    },
    Command {
        words: &["clear", "table"],
        usage: "clear table <table> [<filter>]*",
        summary: "remove an entry from a table (filter: data/key)",
        level: CliLevel::User,
        run: tables::clear_table,
    },
    Command {
        words: &["set", "table"],
        usage: "set table <table> key <k> [data.* <v>]*",
        summary: "update or create a table entry's data",
        level: CliLevel::User,
        run: tables::set_table,
    },
    Command {
        words: &["set", "maxconn", "frontend"],
        usage: "set maxconn frontend <frontend> <value>",
        summary: "change a frontend's maxconn setting",
        level: CliLevel::Admin,
        run: ops::set_maxconn_frontend,
    },
    Command {
        words: &["shutdown", "sessions", "server"],
        usage: "shutdown sessions server <bk>/<srv>",
        summary: "kill sessions on a server",
        level: CliLevel::Admin,
        run: ops::shutdown_sessions_server,
    },
    Command {
        words: &["disable", "server"],
        usage: "disable server (DEPRECATED)",
        summary: "disable a server for maintenance (use 'set server' instead)",
        level: CliLevel::Admin,
        run: ops::disable_server,
    },
    Command {
        words: &["enable", "server"],
        usage: "enable server  (DEPRECATED)",
        summary: "enable a disabled server (use 'set server' instead)",
        level: CliLevel::Admin,
        run: ops::enable_server,
    },
    Command {
        words: &["set", "server"],
        usage: "set server <bk>/<srv> [opts]",
        summary: "change a server's state, weight or address",
        level: CliLevel::Admin,
        run: ops::set_server,
    },
    Command {
        words: &["add", "server"],
        usage: "add server <bk>/<srv>",
        summary: "create a new server",
        level: CliLevel::Admin,
        run: crate::servers::add_server,
    },
    Command {
        words: &["del", "server"],
        usage: "del server <bk>/<srv>",
        summary: "remove a dynamically added server",
        level: CliLevel::Admin,
        run: crate::servers::del_server,
    },
    Command {
        words: &["get", "weight"],
        usage: "get weight <bk>/<srv>",
        summary: "report a server's current weight",
        level: CliLevel::User,
        run: ops::get_weight,
    },
    Command {
        words: &["set", "weight"],
        usage: "set weight <bk>/<srv>  (DEPRECATED)",
        summary: "change a server's weight (use 'set server' instead)",
        level: CliLevel::Admin,
        run: ops::set_weight,
    },
    Command {
        words: &["disable", "health"],
        usage: "disable health",
        summary: "disable health checks",
        level: CliLevel::Admin,
        run: ops::disable_health,
    },
    Command {
        words: &["enable", "health"],
        usage: "enable health",
        summary: "enable health checks",
        level: CliLevel::Admin,
        run: ops::enable_health,
    },
    Command {
        words: &["disable", "agent"],
        usage: "disable agent",
        summary: "disable agent checks",
        level: CliLevel::Admin,
        run: ops::disable_agent,
    },
    Command {
        words: &["enable", "agent"],
        usage: "enable agent",
        summary: "enable agent checks",
        level: CliLevel::Admin,
        run: ops::enable_agent,
    },
    Command {
        words: &["clear", "counters"],
        usage: "clear counters [all]",
        summary: "clear max statistics counters (or all counters)",
        level: CliLevel::Operator,
        run: ops::clear_counters,
    },
    Command {
        words: &["set", "maxconn", "global"],
        usage: "set maxconn global <value>",
        summary: "change the per-process maxconn setting",
        level: CliLevel::Admin,
        run: ops::set_maxconn_global,
    },
    Command {
        words: &["disable", "frontend"],
        usage: "disable frontend <frontend>",
        summary: "temporarily disable specific frontend",
        level: CliLevel::Admin,
        run: ops::disable_frontend,
    },
    Command {
        words: &["enable", "frontend"],
        usage: "enable frontend <frontend>",
        summary: "re-enable specific frontend",
        level: CliLevel::Admin,
        run: ops::enable_frontend,
    },
    Command {
        words: &["show", "cli", "sockets"],
        usage: "show cli sockets",
        summary: "dump list of cli sockets",
        level: CliLevel::User,
        run: show_cli_sockets,
    },
    Command {
        words: &["show", "version"],
        usage: "show version",
        summary: "show version of the current process",
        level: CliLevel::User,
        run: show_version,
    },
    Command {
        words: &["show", "env"],
        usage: "show env [var]",
        summary: "dump environment variables known to the process",
        level: CliLevel::Operator,
        run: show_env,
    },
    Command {
        words: &["show", "cli", "level"],
        usage: "show cli level",
        summary: "display the level of the current CLI session",
        level: CliLevel::User,
        run: show_cli_level,
    },
    Command {
        words: &["operator"],
        usage: "operator",
        summary: "lower the level of the current CLI session to operator",
        level: CliLevel::User,
        run: lower_to_operator,
    },
    Command {
        words: &["user"],
        usage: "user",
        summary: "lower the level of the current CLI session to user",
        level: CliLevel::User,
        run: lower_to_user,
    },
    Command {
        words: &["show", "map"],
        usage: "show map [map]",
        summary: "report available maps or dump a map's contents",
        level: CliLevel::Operator,
        run: maps::show_map,
    },
    Command {
        words: &["show", "acl"],
        usage: "show acl [<acl>]",
        summary: "report available acls or dump an acl's contents",
        level: CliLevel::Operator,
        run: maps::show_acl,
    },
    Command {
        words: &["get", "map"],
        usage: "get map <map> <value>",
        summary: "report the keys and values matching a sample for a map",
        level: CliLevel::Operator,
        run: maps::get_map,
    },
    Command {
        words: &["get", "acl"],
        usage: "get acl <acl> <value>",
        summary: "report the patterns matching a sample for an ACL",
        level: CliLevel::Operator,
        run: maps::get_acl,
    },
    Command {
        words: &["add", "map"],
        usage: "add map <map> <key> <val>",
        summary: "add a map entry (payload supported instead of key/val)",
        level: CliLevel::Operator,
        run: maps::add_map,
    },
    Command {
        words: &["add", "acl"],
        usage: "add acl <acl> <pattern>",
        summary: "add an acl entry",
        level: CliLevel::Operator,
        run: maps::add_acl,
    },
    Command {
        words: &["del", "map"],
        usage: "del map <map> [<key>|#<ref>]",
        summary: "delete map entries matching <key>",
        level: CliLevel::Operator,
        run: maps::del_map,
    },
    Command {
        words: &["del", "acl"],
        usage: "del acl <acl> [<key>|#<ref>]",
        summary: "delete acl entries matching <key>",
        level: CliLevel::Operator,
        run: maps::del_acl,
    },
    Command {
        words: &["set", "map"],
        usage: "set map <map> [<key>|#<ref>] <value>",
        summary: "modify a map entry",
        level: CliLevel::Operator,
        run: maps::set_map,
    },
    Command {
        words: &["clear", "map"],
        usage: "clear map <map>",
        summary: "clear the contents of this map",
        level: CliLevel::Operator,
        run: maps::clear_map,
    },
    Command {
        words: &["clear", "acl"],
        usage: "clear acl <acl>",
        summary: "clear the contents of this acl",
        level: CliLevel::Operator,
        run: maps::clear_acl,
    },
    Command {
        words: &["show", "sess"],
        usage: "show sess [id]",
        summary: "report the list of current sessions or dump this exact session",
        level: CliLevel::Operator,
        run: sessions::show_sess,
    },
    Command {
        words: &["shutdown", "session"],
        usage: "shutdown session [id]",
        summary: "kill a specific session",
        level: CliLevel::Admin,
        run: sessions::shutdown_session,
    },
    Command {
        words: &["show", "errors"],
        usage: "show errors [<px>] [request|response]",
        summary: "report last request and/or response errors for each proxy",
        level: CliLevel::Operator,
        run: errors::show_errors,
    },
    Command {
        words: &["get", "var"],
        usage: "get var <name>",
        summary: "retrieve contents of a process-wide variable",
        level: CliLevel::Operator,
        run: misc::get_var,
    },
    Command {
        words: &["show", "servers", "conn"],
        usage: "show servers conn [<backend>]",
        summary: "dump server connections status (all or for a single backend)",
        level: CliLevel::Operator,
        run: misc::show_servers_conn,
    },
    Command {
        words: &["experimental-mode"],
        usage: "",
        summary: "toggle experimental mode",
        level: CliLevel::Admin,
        run: misc::experimental_mode,
    },
    Command {
        words: &["expert-mode"],
        usage: "",
        summary: "toggle expert mode",
        level: CliLevel::Admin,
        run: misc::expert_mode,
    },
    Command {
        words: &["set", "rate-limit"],
        usage: "set rate-limit <setting> <value>",
        summary: "change a rate limiting value",
        level: CliLevel::Admin,
        run: misc::set_rate_limit,
    },
    Command {
        words: &["help"],
        usage: "help [<command>]",
        summary: "list matching or all commands",
        level: CliLevel::User,
        run: help,
    },
    Command {
        words: &["prompt"],
        usage: "prompt [n|i|p]",
        summary: "toggle interactive mode with prompt",
        level: CliLevel::User,
        run: prompt,
    },
    Command {
        words: &["quit"],
        usage: "quit",
        summary: "disconnect",
        level: CliLevel::User,
        run: quit,
    },
];

/// Runs every command of `line`, appending their output to `out`.
pub fn execute_line(process: &Process, line: &str, state: &mut CliState, out: &mut String) -> Flow {
    for command in split_commands(line) {
        if command.is_empty() {
            continue;
        }
        let flow = execute(process, &command, state, out);
        if matches!(flow, Flow::Close | Flow::Follow { .. }) {
            return flow;
        }
    }
    match state.mode {
        CliMode::NonInteractive => Flow::Close,
        CliMode::Interactive | CliMode::Prompt => Flow::Continue,
    }
}

/// Runs one command given as words.
pub fn execute(
    process: &Process,
    words: &[String],
    state: &mut CliState,
    out: &mut String,
) -> Flow {
    let Some(command) = COMMANDS
        .iter()
        .find(|c| c.words.len() <= words.len() && c.words.iter().zip(words).all(|(a, b)| a == b))
    else {
        out.push_str("Unknown command, but maybe one of the following ones is a better match:\n");
        list_commands(state.level, out);
        out.push('\n');
        return Flow::Continue;
    };
    if state.level < command.level {
        out.push_str("Permission denied\n\n");
        return Flow::Continue;
    }
    let flow = (command.run)(process, &words[command.words.len()..], state, out);
    if flow == Flow::Continue {
        out.push('\n');
    }
    flow
}

/// Splits a line at unescaped `;` and each command at unescaped spaces; `\x` keeps `x`.
pub fn split_commands(line: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    word.push(next);
                    in_word = true;
                }
            }
            ';' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
                commands.push(std::mem::take(&mut words));
            }
            ' ' | '\t' | '\r' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            _ => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    commands.push(words);
    commands
}

fn list_commands(level: CliLevel, out: &mut String) {
    for c in COMMANDS
        .iter()
        .filter(|c| c.level <= level && !c.usage.is_empty())
    {
        let _ = writeln!(out, "  {:<39} : {}", c.usage, c.summary);
    }
}

fn help(_: &Process, args: &[String], state: &mut CliState, out: &mut String) -> Flow {
    let filter = args.first().map(String::as_str);
    out.push_str("The following commands are valid at this level:\n");
    for c in COMMANDS.iter().filter(|c| {
        c.level <= state.level && !c.usage.is_empty() && filter.is_none_or(|f| c.words[0] == f)
    }) {
        let _ = writeln!(out, "  {:<39} : {}", c.usage, c.summary);
    }
    Flow::Continue
}

fn prompt(_: &Process, args: &[String], state: &mut CliState, out: &mut String) -> Flow {
    state.mode = match (args.first().map(String::as_str), state.mode) {
        (Some("n"), _) => CliMode::NonInteractive,
        (Some("i"), _) => CliMode::Interactive,
        (Some("p"), _) => CliMode::Prompt,
        (None, CliMode::Prompt) => CliMode::NonInteractive,
        (None, _) => CliMode::Prompt,
        (Some(other), mode) => {
            let _ = writeln!(out, "'prompt' expects 'n', 'i' or 'p', not '{other}'");
            mode
        }
    };
    Flow::Continue
}

/// `show cache`: each `cache` section's line, then one per fresh response it holds, in
/// HAProxy's layout (`sluice_runtime::cache::Cache::show`).
fn show_cache(process: &Process, _: &[String], _: &mut CliState, out: &mut String) -> Flow {
    let now = sluice_runtime::clock::wall_now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for cache in &process.caches {
        cache.show(now, out);
    }
    Flow::Continue
}

/// `show events`: the event sinks (standard output and error, the `ring` sections); `show
/// events NAME` the events a ring holds, `-n` only those to come, `-w` then waits for more.
fn show_events(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    let Some(name) = args.first() else {
        out.push_str(
            "Supported events sinks are listed below. Add -w(wait), -n(new). Any key to stop\n",
        );
        for (fd, which) in [(1, "stdout"), (2, "stderr")] {
            let dropped = process.log_hub.as_ref().map_or(0, |h| {
                h.dropped_for(&sluice_config::logging::LogAddr::Fd(fd))
            });
            let _ = writeln!(
                out,
                "    {which:<10} : type=fd, {dropped} dropped, standard {} (fd#{fd})",
                if fd == 1 { "output" } else { "error" }
            );
        }
        for ring in &process.rings {
            // Lines the writer had no room for, and events too large for the ring.
            let queued_out = process.log_hub.as_ref().map_or(0, |h| {
                h.dropped_for(&sluice_config::logging::LogAddr::Ring(ring.name.clone()))
            });
            let _ = writeln!(
                out,
                "    {:<10} : type=buffer, {} dropped, {}",
                ring.name,
                queued_out + ring.dropped.get(),
                ring.description
            );
        }
        return Flow::Continue;
    };
    let (mut wait, mut new) = (false, false);
    for option in &args[1..] {
        match option.as_str() {
            "-w" => wait = true,
            "-n" => new = true,
            "-nw" | "-wn" => (wait, new) = (true, true),
            other => {
                let _ = writeln!(
                    out,
                    "unknown option '{other}' (-w to wait, -n for new events only)"
                );
                return Flow::Continue;
            }
        }
    }
    let Some(index) = process.rings.iter().position(|r| r.name == *name) else {
        out.push_str("No such event sink. Use 'show events' to see them.\n");
        return Flow::Continue;
    };
    let ring = &process.rings[index];
    let from = if new { ring.next_number() } else { 0 };
    let mut events = Vec::new();
    let next = ring.read_from(from, &mut events);
    out.push_str(&String::from_utf8_lossy(&events));
    if wait {
        return Flow::Follow { ring: index, next };
    }
    Flow::Continue
}

/// `show cli sockets`: the `stats socket` lines, their address, level and processes.
fn show_cli_sockets(process: &Process, _: &[String], _: &mut CliState, out: &mut String) -> Flow {
    out.push_str("# socket lvl processes\n");
    for socket in &process.global.stats_sockets {
        let level = match socket.level {
            CliLevel::User => "user",
            CliLevel::Operator => "operator",
            CliLevel::Admin => "admin",
        };
        let _ = writeln!(out, "{} {level} all", socket.address_text());
    }
    out.push('\n');
    Flow::Continue
}

/// `show version`.
fn show_version(_: &Process, _: &[String], _: &mut CliState, out: &mut String) -> Flow {
    out.push_str(env!("CARGO_PKG_VERSION"));
    out.push('\n');
    Flow::Continue
}

/// `show env [var]`: the process's environment as the configuration left it (`setenv`...),
/// or one variable of it.
fn show_env(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    let environment = process.environment();
    match args.first() {
        None => {
            for (name, value) in &environment {
                let _ = writeln!(out, "{name}={value}");
            }
        }
        Some(wanted) => match environment.iter().find(|(name, _)| name == wanted) {
            Some((name, value)) => {
                let _ = writeln!(out, "{name}={value}");
            }
            None => out.push_str("Variable not found\n"),
        },
    }
    Flow::Continue
}

fn show_cli_level(_: &Process, _: &[String], state: &mut CliState, out: &mut String) -> Flow {
    out.push_str(match state.level {
        CliLevel::User => "user\n",
        CliLevel::Operator => "operator\n",
        CliLevel::Admin => "admin\n",
    });
    Flow::Continue
}

/// `operator`: a session may lower its level, never raise it.
fn lower_to_operator(_: &Process, _: &[String], state: &mut CliState, out: &mut String) -> Flow {
    if state.level < CliLevel::Operator {
        out.push_str("Permission denied\n");
    } else {
        state.level = CliLevel::Operator;
    }
    Flow::Continue
}

fn lower_to_user(_: &Process, _: &[String], state: &mut CliState, _: &mut String) -> Flow {
    state.level = CliLevel::User;
    Flow::Continue
}

fn quit(_: &Process, _: &[String], _: &mut CliState, _: &mut String) -> Flow {
    Flow::Close
}

fn show_info(process: &Process, args: &[String], _: &mut CliState, out: &mut String) -> Flow {
    let format = args.first().map(String::as_str);
    if format.is_some_and(|f| f != "typed" && f != "json") {
        let _ = writeln!(
            out,
            "show info: format '{}' is not supported by Sluice yet",
            format.unwrap_or_default()
        );
        return Flow::Continue;
    }
    let uptime = process.started.elapsed().as_secs();
    let start = process
        .started_at
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let bytes_out: u64 = process
        .frontends
        .iter()
        .map(|f| f.traffic.bytes_out.get())
        .sum();
    // The stats sockets listen too, and their connections are jobs, as in HAProxy.
    let listeners: usize = process
        .frontends
        .iter()
        .map(|f| f.plan.binds.iter().map(|b| b.addrs.len()).sum::<usize>())
        .sum::<usize>()
        + process.global.stats_sockets.len();
    let cli = &process.cli_connections;
    // Connections as accepted, before any rule or PROXY header, as HAProxy counts them.
    let connections: u64 = process.frontends.iter().map(|f| f.connections.get()).sum();
    // True from SIGUSR1 on, `grace` included, as HAProxy's `stopping`.
    let stopping = process.is_stopping();
    let idle_pct = sluice_runtime::load::idle_percent_of_loops();
    let sessions = process.traffic.sessions.get();
    let dropped_logs = process.log_hub.as_ref().map_or(0, |h| h.dropped.get())
        + process.rings.iter().map(|r| r.dropped.get()).sum::<u64>();
    // HAProxy's streams: each HTTP request read whole (whatever its answer, but not the
    // invalid ones), each TCP session, each CLI connection.
    let requests: u64 = process
        .frontends
        .iter()
        .map(|f| match f.plan.mode {
            sluice_config::proxy::Mode::Http => f.stats.requests_read.get(),
            _ => f.traffic.total_sessions.get(),
        })
        .sum::<u64>()
        + cli.total_sessions.get();
    let session_rate = &process.traffic.session_rate;
    let [compression_in, compression_out] = &process.compression.rates;
    let mut fields: Vec<(&str, String)> = vec![
        ("Name", "Sluice".into()),
        ("Version", env!("CARGO_PKG_VERSION").into()),
        ("Release_date", crate_release_date().into()),
        ("Nbthread", process.nbthread.to_string()),
        ("Nbproc", "1".into()),
        ("Process_num", "1".into()),
        ("Pid", std::process::id().to_string()),
        ("Uptime", format_uptime(uptime)),
        ("Uptime_sec", uptime.to_string()),
        // No memory limit (`-m`) is supported: 0 means none, as in HAProxy.
        ("Memmax_MB", "0".into()),
        ("Ulimit-n", process.ulimit_n.to_string()),
        // Sluice raises its descriptor limit to what it may use and no further.
        ("Maxsock", process.ulimit_n.to_string()),
        ("Maxconn", process.runtime_maxconn().to_string()),
        ("Hard_maxconn", process.maxconn.to_string()),
        ("CurrConns", sessions.to_string()),
        (
            "CumConns",
            (connections + cli.total_sessions.get()).to_string(),
        ),
        ("CumReq", requests.to_string()),
        // Sluice terminates no TLS: no limit, nothing counted.
        ("MaxSslConns", "0".into()),
        ("CurrSslConns", "0".into()),
        ("CumSslConns", "0".into()),
        ("Maxpipes", process.pipes.max().unwrap_or(0).to_string()),
        ("PipesUsed", process.pipes.used().to_string()),
        // Pipes are closed when their session ends: none waits idle for reuse.
        ("PipesFree", "0".into()),
        ("ConnRate", process.connection_rate.get().to_string()),
        (
            "ConnRateLimit",
            process.accept_limits.connections.limit().to_string(),
        ),
        ("MaxConnRate", process.connection_rate.max().to_string()),
        ("SessRate", session_rate.get().to_string()),
        (
            "SessRateLimit",
            process.accept_limits.sessions.limit().to_string(),
        ),
        ("MaxSessRate", session_rate.max().to_string()),
        ("SslRate", "0".into()),
        ("SslRateLimit", "0".into()),
        ("MaxSslRate", "0".into()),
        ("SslFrontendKeyRate", "0".into()),
        ("SslFrontendMaxKeyRate", "0".into()),
        ("SslFrontendSessionReuse_pct", "0".into()),
        ("SslBackendKeyRate", "0".into()),
        ("SslBackendMaxKeyRate", "0".into()),
        ("SslCacheLookups", "0".into()),
        ("SslCacheMisses", "0".into()),
        // Bytes per second in and out of the compressors; no limit (`maxcomprate`).
        ("CompressBpsIn", compression_in.get().to_string()),
        ("CompressBpsOut", compression_out.get().to_string()),
        (
            "CompressBpsRateLim",
            process.compression.rate_limit().to_string(),
        ),
        ("Idle_pct", idle_pct.to_string()),
        ("node", process.global.node.clone().unwrap_or_default()),
        ("Stopping", u8::from(stopping).to_string()),
        // What keeps a process alive: its sessions, its CLI connections and its listeners.
        (
            "Jobs",
            (sessions + cli.sessions.get() + listeners as u64).to_string(),
        ),
        ("Unstoppable Jobs", "0".into()),
        ("Listeners", listeners.to_string()),
        // No `peers` sections.
        ("ActivePeers", "0".into()),
        ("ConnectedPeers", "0".into()),
        ("DroppedLogs", dropped_logs.to_string()),
        (
            "BusyPolling",
            u8::from(process.global.busy_polling).to_string(),
        ),
        // No `resolvers` sections.
        ("FailedResolutions", "0".into()),
        ("TotalBytesOut", bytes_out.to_string()),
        (
            "TotalSplicdedBytesOut",
            process.pipes.spliced_out().to_string(),
        ),
        // No debugging commands, no log receivers (`log-forward`).
        ("DebugCommandsIssued", "0".into()),
        ("CumRecvLogs", "0".into()),
        ("Build info", env!("CARGO_PKG_VERSION").into()),
        ("Memmax_bytes", "0".into()),
        ("Start_time_sec", start.to_string()),
        ("Tainted", "0".into()),
    ];
    // HAProxy lists `description` (when set) after `node`, in field order.
    if let Some(description) = &process.global.description {
        let at = fields
            .iter()
            .position(|(n, _)| *n == "node")
            .map_or(0, |i| i + 1);
        fields.insert(at, ("description", description.clone()));
    }
    match format {
        Some("typed") => info::typed(&fields, out),
        Some("json") => info::json(&fields, out),
        _ => {
            for (name, value) in fields {
                let _ = writeln!(out, "{name}: {value}");
            }
        }
    }
    Flow::Continue
}

/// Sluice has no release date separate from its version yet.
fn crate_release_date() -> &'static str {
    "unreleased"
}

/// HAProxy's uptime format: `1d 2h03m04s`.
pub fn format_uptime(secs: u64) -> String {
    format!(
        "{}d {}h{:02}m{:02}s",
        secs / 86400,
        secs % 86400 / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_commands_and_words_with_escapes() {
        assert_eq!(
            split_commands("show info;help  show ;set x a\\;b\\ c"),
            vec![
                vec!["show".to_string(), "info".into()],
                vec!["help".into(), "show".into()],
                vec!["set".into(), "x".into(), "a;b c".into()],
            ]
        );
        assert_eq!(split_commands(""), vec![Vec::<String>::new()]);
    }

    #[test]
    fn uptime_format_matches_haproxy() {
        assert_eq!(format_uptime(0), "0d 0h00m00s");
        assert_eq!(format_uptime(93784), "1d 2h03m04s");
    }
}
