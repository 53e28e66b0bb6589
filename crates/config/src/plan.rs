//! The last stage of the reader: sections and their typed `*Conf` values become a validated,
//! immutable [`Plan`], the only thing the runtime is built from.
//!
//! This is where names are resolved (`from DEFAULTS`, `default_backend`), inherited settings
//! are applied, defaults are filled in, and cross-section rules are checked (unique proxy
//! names, unique server names, existing backends). [`check`] runs the whole reader: files in,
//! plan and every diagnostic out.

use crate::addr::ListenAddr;
use crate::cond::CondContext;
use crate::cookie::PersistPlan;
use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::environment::EnvChanges;
use crate::errors::{self, ErrorPages, HttpErrorSections};
use crate::global::{self, GlobalConf};
use crate::http_options::HttpConf;
use crate::logging::{LineFormat, ProxyLogConf};
use crate::preprocess;
use crate::proxy::{
    self, BindConf, KeepaliveProbes, Mode, ProxyConf, ServerConf, SpliceOptions, Timeouts,
};
use crate::reader::Source;
use crate::retry::RetryOn;
use crate::ring::{self, RingConf};
use crate::rules::{self, BackendTarget, ProxyRules, Rule, TcpAction, VarValue};
use crate::sections::{self, Section, SectionKind};
use crate::userlist;
use sluice_balance::{Algorithm, HashType};
use sluice_sample::{Expr, LogFormat, MapStore};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

/// HAProxy's default number of connection retries (configuration.txt §4.2 "retries").
pub const DEFAULT_RETRIES: u32 = 3;

/// A validated configuration: what the runtime builds its live objects from.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Process-wide settings.
    pub global: GlobalConf,
    /// Proxies that accept connections (`frontend` and `listen`), in declaration order.
    pub frontends: Vec<FrontendPlan>,
    /// Proxies that hold servers (`backend` and `listen`), in declaration order.
    pub backends: Vec<BackendPlan>,
    /// The configuration files that were read, in order.
    pub files: Vec<Arc<str>>,
    /// `ring` sections, in declaration order.
    pub rings: Vec<RingConf>,
    /// `cache` sections, in declaration order.
    pub caches: Vec<crate::cache::CacheConf>,
    /// The stick tables (`stick-table`), each named after its section, in declaration order.
    pub tables: Vec<sluice_stick::TableConf>,
    /// The pattern and map files and ACL values the rules use, editable at run time.
    pub maps: MapStore,
    /// What `setenv` and the like did to the environment (the `env()` fetch sees it).
    pub env: EnvChanges,
}

/// A proxy's identity: its name, the keyword that declared it and a unique number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyId {
    /// The proxy's name.
    pub name: String,
    /// `frontend`, `backend` or `listen`.
    pub kind: SectionKind,
    /// The proxy's `id`, or else the first number not taken, in declaration order from 1
    /// (HAProxy's `iid` in statistics starts after its internal proxies; ours does not).
    pub uid: u32,
    /// Where the section starts.
    pub span: Span,
    /// `description`.
    pub description: Option<String>,
}

/// The accepting side of a `frontend` or `listen` section.
#[derive(Clone, Debug)]
pub struct FrontendPlan {
    /// Name and number.
    pub id: ProxyId,
    /// Protocol.
    pub mode: Mode,
    /// Listening addresses and their options.
    pub binds: Vec<BindConf>,
    /// Concurrent connection limit; `None` means the global one.
    pub maxconn: Option<u32>,
    /// `rate-limit sessions`: new sessions per second; 0 for no limit.
    pub session_rate_limit: u32,
    /// Index into [`Plan::backends`] of the backend taking this frontend's traffic.
    pub default_backend: Option<usize>,
    /// Timeouts (the client-side ones apply here).
    pub timeouts: Timeouts,
    /// SO_KEEPALIVE on client connections.
    pub clitcpka: bool,
    /// Their keep-alive probes (`clitcpka-cnt|idle|intvl`).
    pub client_probes: KeepaliveProbes,
    /// `option nolinger`: client connections close with a reset (SO_LINGER 0).
    pub nolinger: bool,
    /// Delay the ACK of a new client connection's first data (`option tcp-smart-accept`, on by
    /// default in `mode http`, where the response acknowledges the request).
    pub smart_accept: bool,
    /// `option contstats`: the statistics count the bytes of a transfer as they move (its
    /// frontend, backend, server and tracked counters), not only when it ends.
    pub contstats: bool,
    /// `option socket-stats`: each listening socket counts its sessions apart, shown in its
    /// own statistics row.
    pub socket_stats: bool,
    /// HTTP options (used in `mode http`).
    pub http: HttpConf,
    /// `compression algo|type|offload`.
    pub compression: crate::compression::CompressionConf,
    /// Custom pages replacing the built-in error answers.
    pub error_pages: ErrorPages,
    /// `use_backend` rules, backend names resolved to indices into [`Plan::backends`].
    pub use_backend: Vec<Rule<BackendChoice>>,
    /// Logging settings (`log global` still to be resolved against [`Plan::global`]).
    pub log: ProxyLogConf,
    /// `option splice-*` of the frontend.
    pub splice: SpliceOptions,
    /// The other rules of the section (`use_backend` is moved out to the field above).
    pub rules: Arc<ProxyRules>,
}

/// The backend a `use_backend` rule chooses.
#[derive(Clone, Debug)]
pub enum BackendChoice {
    /// An index into [`Plan::backends`].
    Index(usize),
    /// A name computed per request, looked up among the backends at run time.
    Dynamic(LogFormat),
}

/// The server side of a `backend` or `listen` section.
#[derive(Clone, Debug)]
pub struct BackendPlan {
    /// Name and number.
    pub id: ProxyId,
    /// `disabled`: no servers, no statistics row; requests sent here get 503.
    pub disabled: bool,
    /// `load-server-state-from-file` (`None`: not set) and `server-state-file-name`.
    pub server_state: (Option<crate::proxy::ServerStateFrom>, Option<String>),
    /// Protocol.
    pub mode: Mode,
    /// Algorithm choosing a server (`roundrobin` unless set, as in HAProxy 2.6).
    pub balance: Algorithm,
    /// How hash-based algorithms hash their key.
    pub hash_type: HashType,
    /// The key expression of `balance hash EXPR`.
    pub hash_expr: Option<Expr>,
    /// `option allbackups`.
    pub allbackups: bool,
    /// `hash-balance-factor`, when set and not 0.
    pub hash_balance_factor: Option<u32>,
    /// Servers, in declaration order.
    pub servers: Vec<ServerConf>,
    /// `source`: the local address of connections to servers without their own.
    pub source: Option<std::net::SocketAddr>,
    /// `fullconn`, when set and not 0; otherwise the runtime computes HAProxy's default from
    /// the frontends that reach this backend.
    pub fullconn: Option<u32>,
    /// Extra connection attempts after a failed one.
    pub retries: u32,
    /// The kernel buffers of its server connections (`tune.rcvbuf.server`,
    /// `tune.sndbuf.server`).
    pub server_buffers: global::SocketBuffers,
    /// `max-keep-alive-queue`: under `option prefer-last-server`, the session's last server
    /// is kept only while it has a free slot or fewer requests than this in its queue
    /// (`None`: always).
    pub max_keep_alive_queue: Option<u32>,
    /// Which failures are retried (`retry-on`; connection failures by default).
    pub retry_on: RetryOn,
    /// Timeouts (the server-side ones apply here).
    pub timeouts: Timeouts,
    /// SO_KEEPALIVE on server connections.
    pub srvtcpka: bool,
    /// Their keep-alive probes (`srvtcpka-cnt|idle|intvl`).
    pub server_probes: KeepaliveProbes,
    /// `option nolinger`: server connections close with a reset (SO_LINGER 0).
    pub nolinger: bool,
    /// Send the request with the handshake's last ACK (`option tcp-smart-connect`).
    pub smart_connect: bool,
    /// HTTP options (used in `mode http`).
    pub http: HttpConf,
    /// `compression algo|type|offload`.
    pub compression: crate::compression::CompressionConf,
    /// Custom pages replacing the built-in error answers.
    pub error_pages: ErrorPages,
    /// `use-server` rules, server names resolved to indices into `servers`.
    pub use_server: Vec<Rule<usize>>,
    /// The section's rules (shared with the frontend side of a `listen` section).
    pub rules: Arc<ProxyRules>,
    /// `option splice-*` of the backend.
    pub splice: SpliceOptions,
    /// Cookie persistence, `option persist|redispatch`, `force-persist`, `ignore-persist`.
    pub persistence: PersistPlan,
    /// Health-check kind and rules.
    pub checks: crate::checks::ProxyChecks,
    /// `email-alert`: who is told by mail when a server changes state, when complete.
    pub email_alert: Option<crate::mailers::EmailAlert>,
}

/// The outcome of reading a configuration: the plan if it is valid, and every diagnostic.
#[derive(Debug)]
pub struct Checked {
    /// `Some` only when no diagnostic is fatal.
    pub plan: Option<Plan>,
    /// Everything found, in file order within each stage.
    pub diagnostics: Diagnostics,
}

/// Runs the whole reader on `sources` with the environment and capabilities of `ctx`.
pub fn check(sources: &[Source], ctx: &CondContext<'_>) -> Checked {
    let mut diags = Vec::new();
    // One file cache for the whole configuration: a pattern or map file named by several
    // rules is read once.
    let maps = MapStore::new();
    let mut sections_all = Vec::new();
    // `setenv` and the like carry over from one file to the next, as lines do.
    let mut env = EnvChanges::default();
    for source in sources {
        let lines = preprocess::preprocess(&source.name, &source.text, (ctx, &mut env), &mut diags);
        sections_all.extend(sections::group_sections(lines, &mut diags));
    }
    let mut plan = build(&sections_all, sources, &maps, &mut diags);
    plan.env = env;
    let fatal = diags.iter().any(Diagnostic::is_fatal);
    Checked {
        plan: if fatal { None } else { Some(plan) },
        diagnostics: diags,
    }
}

/// A proxy section after its lines were applied over its defaults.
struct ParsedProxy<'a> {
    section: &'a Section,
    name: String,
    conf: ProxyConf,
}

fn build(
    sections: &[Section],
    sources: &[Source],
    maps: &MapStore,
    diags: &mut Diagnostics,
) -> Plan {
    let mut global = GlobalConf::default();
    let mut named_defaults: HashMap<&str, ProxyConf> = HashMap::new();
    let mut last_defaults = ProxyConf::default();
    let mut proxies: Vec<ParsedProxy<'_>> = Vec::new();
    // `default-path`: relative file names resolve from where it says while lines are read.
    let mut relative_files = crate::default_path::RelativeFiles::scan(sections, sources, diags);
    // `errorfiles` may name a section declared later: read them all first.
    let mut http_errors = HttpErrorSections::new();
    for section in sections
        .iter()
        .filter(|s| s.kind == SectionKind::HttpErrors)
    {
        relative_files.enter(&section.span);
        let pages = errors::parse_http_errors_section(&section.lines, diags);
        if let Some(name) = &section.name
            && http_errors.insert(name.clone(), pages).is_some()
        {
            diags.push(Diagnostic::alert(
                &section.span,
                "http-errors",
                format!("http-errors section '{name}' is declared twice"),
            ));
        }
    }

    // `http_auth(L)` may name a list declared after the proxy using it.
    userlist::parse_userlists(sections, maps, diags);
    // `log ring@NAME` may name a ring declared later.
    let rings = ring::parse_rings(sections, diags);
    ring::check_ring_targets(sections, &rings, diags);
    let mailers = crate::mailers::parse_mailers(sections, diags);
    // `cache-use` and `cache-store` may name a cache declared later.
    let caches = crate::cache::parse_caches(sections, diags);
    crate::cache::check_cache_references(sections, &caches, diags);
    // Likewise a stick-counter fetch or a `table_*` converter may name a table declared
    // further down.
    maps.declare_tables(
        sections
            .iter()
            .filter(|s| s.kind.has_frontend() || s.kind.has_backend())
            .filter(|s| {
                s.lines
                    .iter()
                    .any(|l| l.words.first().is_some_and(|w| w == "stick-table"))
            })
            .filter_map(|s| s.name.clone()),
    );

    for section in sections {
        match section.kind {
            SectionKind::HttpErrors
            | SectionKind::Userlist
            | SectionKind::Ring
            | SectionKind::Mailers
            | SectionKind::Cache => {}
            SectionKind::Global => {
                for line in &section.lines {
                    relative_files.enter(&line.span);
                    global::parse_global_line(&mut global, line, diags);
                }
            }
            kind => {
                let mut conf = match &section.from {
                    // A defaults section starts from the documented defaults, unless it names
                    // another one with `from` (configuration.txt §4).
                    None if kind == SectionKind::Defaults => ProxyConf::default(),
                    None => last_defaults.clone(),
                    Some(from) => match named_defaults.get(from.as_str()) {
                        Some(conf) => conf.clone(),
                        None => {
                            diags.push(Diagnostic::alert(
                                &section.span,
                                kind.keyword(),
                                format!("unknown defaults section '{from}' after 'from'"),
                            ));
                            ProxyConf::default()
                        }
                    },
                };
                // `src_*` fetches without a table name use this proxy's table.
                maps.set_current_proxy(
                    section
                        .name
                        .as_deref()
                        .filter(|_| kind != SectionKind::Defaults),
                );
                for line in &section.lines {
                    relative_files.enter(&line.span);
                    proxy::parse_proxy_line(&mut conf, kind, line, maps, diags);
                }
                maps.set_current_proxy(None);
                if kind == SectionKind::Defaults {
                    if let Some(name) = &section.name {
                        named_defaults.insert(name, conf.clone());
                    }
                    last_defaults = conf;
                } else if let Some(name) = &section.name {
                    proxies.push(ParsedProxy {
                        section,
                        name: name.clone(),
                        conf,
                    });
                }
            }
        }
    }

    check_unique_names(&proxies, diags);
    for p in &proxies {
        crate::checks::check_ports(&p.conf.checks, &p.conf.servers, diags);
        rules::check_rule_order(&p.section.lines, diags);
        diags.extend(rules::check_capture_ids(
            &p.conf.rules,
            p.section.kind,
            &p.name,
        ));
        if !global.expose_experimental {
            diags.extend(rules::check_experimental(&p.conf.rules));
        }
        diags.extend(rules::check_pattern_edits(&p.conf.rules, maps));
    }
    if let Some((_, span)) = &global.header_case_file {
        relative_files.enter(span);
    }
    read_header_case_file(&mut global, diags);
    // Back to the starting directory: names used once the configuration is read (sockets,
    // the server state file) are relative to it, as in HAProxy.
    drop(relative_files);
    check_inherited_fds(&global, &proxies, diags);
    let uids = proxy_uids(&proxies, diags);
    let (mut frontends, mut backends) = plan_proxies(&proxies, &uids, &http_errors, diags);
    for p in &proxies {
        warn_log_format_without_target(p, &global, diags);
    }
    check_external_checks(&global, &proxies, diags);
    // `email-alert`: checked for every proxy, kept where servers change state.
    for p in &proxies {
        let alert = crate::mailers::resolve(&p.conf.email_alert, &p.name, &mailers, diags);
        if let Some(backend) = backends.iter_mut().find(|b| b.id.name == p.name) {
            backend.email_alert = alert;
        }
    }
    // A process-wide setting, kept where the server connections are made.
    for backend in &mut backends {
        backend.server_buffers = global.server_buffers;
    }
    // The proxies that enable `h1-case-adjust` share the global list; with no list, the
    // option has nothing to change.
    let header_case = Arc::new(global.header_case.clone());
    let https = frontends.iter_mut().map(|f| &mut f.http);
    for http in https.chain(backends.iter_mut().map(|b| &mut b.http)) {
        for slot in [&mut http.case_adjust_client, &mut http.case_adjust_server] {
            *slot = slot
                .take()
                .filter(|_| !header_case.is_empty())
                .map(|_| Arc::clone(&header_case));
        }
    }
    // `unix-bind`: the unix sockets of `bind` lines get its prefix (put before the path as
    // written, absolute or not, as HAProxy does) and, where they set none, its mode.
    for bind in frontends.iter_mut().flat_map(|f| f.binds.iter_mut()) {
        if !bind.addrs.iter().any(|a| matches!(a, ListenAddr::Unix(_))) {
            continue;
        }
        for addr in &mut bind.addrs {
            if let (ListenAddr::Unix(path), Some(prefix)) = (addr, &global.unix_bind_prefix) {
                *path = format!("{prefix}{path}");
            }
        }
        bind.unix_mode = bind.unix_mode.or(global.unix_bind_mode);
    }
    // Tables that `stick` rules use keep the server of each key (configuration.txt §4.2:
    // `server_id` is stored automatically, and HAProxy 2.6 adds the server's name).
    let sticky: Vec<&str> = proxies
        .iter()
        .flat_map(|p| {
            p.conf
                .rules
                .stick_rules
                .iter()
                .map(|r| r.action.table.as_deref().unwrap_or(&p.name))
        })
        .collect();
    let tables = proxies
        .iter()
        .filter_map(|p| {
            let mut table = p.conf.stick_table.clone()?;
            table.name.clone_from(&p.name);
            if sticky.contains(&p.name.as_str()) {
                for data in [
                    sluice_stick::DataType::ServerId,
                    sluice_stick::DataType::ServerKey,
                ] {
                    if !table.layout.has(data) {
                        // Cannot fail: the type is not stored yet.
                        let _ = table.layout.add(data, 0);
                    }
                }
            }
            Some(table)
        })
        .collect();
    Plan {
        global,
        frontends,
        backends,
        files: sources.iter().map(|s| Arc::clone(&s.name)).collect(),
        rings,
        caches,
        tables,
        maps: maps.clone(),
        env: EnvChanges::default(),
    }
}

/// Adds the entries of `h1-case-adjust-file` to the `h1-case-adjust` ones. A file that cannot
/// be read, or a bad line in it, is an error on the line naming the file.
fn read_header_case_file(global: &mut GlobalConf, diags: &mut Diagnostics) {
    let Some((path, span)) = &global.header_case_file else {
        return;
    };
    let keyword = "h1-case-adjust-file";
    match std::fs::read_to_string(path) {
        Ok(text) => {
            if let Err((line, message)) = global.header_case.add_lines(&text) {
                let message = format!("'{path}' line {line}: {message}");
                diags.push(Diagnostic::alert(span, keyword, message));
            }
        }
        Err(e) => {
            let message = format!("cannot read '{path}': {e}");
            diags.push(Diagnostic::alert(span, keyword, message));
        }
    }
}

/// `option external-check` needs the global `external-check` and a command, as in HAProxy;
/// without `insecure-fork-wanted` it will likely fail (the process may not create one).
fn check_external_checks(
    global: &GlobalConf,
    proxies: &[ParsedProxy<'_>],
    diags: &mut Diagnostics,
) {
    let external = proxies
        .iter()
        .filter(|p| p.section.kind.has_backend())
        .filter(|p| p.conf.checks.mode == crate::checks::CheckMode::External);
    for p in external {
        let keyword = "option external-check";
        let span = &p.section.span;
        let name = &p.name;
        if global.external_check.is_none() {
            let message = format!("proxy '{name}': needs the global 'external-check'");
            diags.push(Diagnostic::alert(span, keyword, message));
        }
        if p.conf.checks.external_command.is_none() {
            let message = format!("proxy '{name}': needs 'external-check command'");
            diags.push(Diagnostic::alert(span, keyword, message));
        }
        if !global.insecure_fork {
            let message = format!(
                "proxy '{name}': 'insecure-fork-wanted' is not set in the global section: the \
                 checks will likely fail"
            );
            diags.push(Diagnostic::warning(span, keyword, message));
        }
    }
}

/// Two proxies that share a side may not share a name: a frontend's name must differ from
/// every other frontend's and `listen`'s, a backend's from every other backend's and
/// `listen`'s, since rules and the CLI name them by side (`use_backend`, `disable frontend`).
/// A frontend and a backend may share one (configuration.txt §2.1: "two sections of
/// different types may use the same name"), as HAProxy accepts and many configurations do.
fn check_unique_names(proxies: &[ParsedProxy<'_>], diags: &mut Diagnostics) {
    let mut frontends: HashMap<&str, &Span> = HashMap::new();
    let mut backends: HashMap<&str, &Span> = HashMap::new();
    // A table is named after its section: a frontend and a backend of one name cannot both
    // declare one.
    let mut tables: HashMap<&str, &ParsedProxy<'_>> = HashMap::new();
    for p in proxies {
        let kind = p.section.kind;
        if p.conf.stick_table.is_some()
            && let Some(first) = tables.insert(&p.name, p)
        {
            fn line_of<'a>(p: &'a ParsedProxy<'_>) -> &'a Span {
                p.section
                    .lines
                    .iter()
                    .find(|l| l.words.first().is_some_and(|w| w == "stick-table"))
                    .map_or(&p.section.span, |l| &l.span)
            }
            diags.push(Diagnostic::alert(
                line_of(p),
                "stick-table",
                format!(
                    "stick-table name '{}' conflicts with the table declared in {} '{}' at {}",
                    p.name,
                    first.section.kind.keyword(),
                    first.name,
                    line_of(first)
                ),
            ));
        }
        // The first proxy of the name on either side is the one reported.
        let mut first = None;
        for (side, seen) in [
            (kind.has_frontend(), &mut frontends),
            (kind.has_backend(), &mut backends),
        ] {
            if side {
                let declared = *seen.entry(&p.name).or_insert(&p.section.span);
                if !std::ptr::eq(declared, &p.section.span) {
                    first = first.or(Some(declared));
                }
            }
        }
        if let Some(first) = first {
            diags.push(Diagnostic::alert(
                &p.section.span,
                kind.keyword(),
                format!(
                    "proxy name '{}' is already used by the proxy declared at {first}",
                    p.name
                ),
            ));
        }
    }
}

/// An inherited socket (`fd@N`) can be adopted once: two owners would close it twice.
fn check_inherited_fds(global: &GlobalConf, proxies: &[ParsedProxy<'_>], diags: &mut Diagnostics) {
    let stats = global
        .stats_sockets
        .iter()
        .map(|s| (&s.span, "stats socket", std::slice::from_ref(&s.addr)));
    let binds = proxies.iter().flat_map(|p| {
        p.conf
            .binds
            .iter()
            .map(|b| (&b.span, "bind", b.addrs.as_slice()))
    });
    let mut seen: HashMap<i32, &Span> = HashMap::new();
    for (span, keyword, addrs) in stats.chain(binds) {
        for addr in addrs {
            if let ListenAddr::Fd(fd) = addr
                && let Some(first) = seen.insert(*fd, span)
            {
                diags.push(Diagnostic::alert(
                    span,
                    keyword,
                    format!("fd@{fd} is already used at {first}"),
                ));
            }
        }
    }
}

fn plan_proxies(
    proxies: &[ParsedProxy<'_>],
    uids: &[u32],
    http_errors: &HttpErrorSections,
    diags: &mut Diagnostics,
) -> (Vec<FrontendPlan>, Vec<BackendPlan>) {
    let pages: Vec<ErrorPages> = proxies
        .iter()
        .map(|p| errors::resolve(&p.conf.error_directives, http_errors, diags))
        .collect();
    let mut rules: Vec<ProxyRules> = proxies.iter().map(|p| mode_rules(p, diags)).collect();
    proxies.iter().for_each(|p| {
        warn_http_only_options(p, diags);
        check_tcp_formats(p, diags);
    });
    let table_names: Vec<&str> = proxies
        .iter()
        .filter(|p| p.conf.stick_table.is_some())
        .map(|p| p.name.as_str())
        .collect();
    for (r, p) in rules.iter_mut().zip(proxies) {
        crate::stick::resolve_tables(r, &p.name, &table_names, diags);
    }
    let use_backends: Vec<Vec<Rule<BackendTarget>>> = rules
        .iter_mut()
        .map(|r| std::mem::take(&mut r.use_backend))
        .collect();
    let rules: Vec<Arc<ProxyRules>> = rules.into_iter().map(Arc::new).collect();
    let mut backends = Vec::new();
    let mut backend_index: HashMap<&str, usize> = HashMap::new();
    for (i, p) in proxies.iter().enumerate() {
        if !p.section.kind.has_backend() {
            continue;
        }
        check_unique_servers(&p.conf.servers, diags);
        let servers = with_server_ids(&p.conf.servers, diags);
        let keyword = p.section.kind.keyword();
        crate::checks::warn_unused_rules(&p.conf.checks, &p.name, &p.section.span, keyword, diags);
        let http = p.conf.mode == Some(Mode::Http);
        crate::checks::check_server_modes(http, &p.conf.servers, diags);
        check_redir_mode(http, &p.name, &p.conf.servers, diags);
        backend_index.insert(&p.name, backends.len());
        backends.push(BackendPlan {
            id: proxy_id(p, uids[i]),
            server_state: (
                p.conf.load_server_state,
                p.conf.server_state_file_name.clone(),
            ),
            mode: p.conf.mode.unwrap_or(Mode::Tcp),
            balance: p.conf.balance.clone().unwrap_or(Algorithm::RoundRobin),
            hash_type: p.conf.hash_type.unwrap_or_default(),
            hash_expr: p.conf.hash_expr.clone(),
            allbackups: p.conf.allbackups.unwrap_or(false),
            hash_balance_factor: p.conf.hash_balance_factor.filter(|&n| n != 0),
            // A `disabled` backend has no server to give (503), and no statistics row.
            servers: if disabled(p) { Vec::new() } else { servers },
            disabled: disabled(p),
            fullconn: p.conf.fullconn.filter(|&n| n > 0),
            source: p.conf.source,
            retries: p.conf.retries.unwrap_or(DEFAULT_RETRIES),
            server_buffers: global::SocketBuffers::default(),
            max_keep_alive_queue: p.conf.max_keep_alive_queue.flatten(),
            retry_on: p.conf.retry_on.clone().unwrap_or_default(),
            timeouts: p.conf.timeouts,
            srvtcpka: p.conf.srvtcpka.unwrap_or(false),
            server_probes: p.conf.server_probes,
            nolinger: p.conf.server_nolinger.unwrap_or(false),
            smart_connect: p.conf.smart_connect.unwrap_or(false),
            http: p.conf.http.clone(),
            compression: p.conf.compression.clone(),
            error_pages: pages[i].clone(),
            use_server: resolve_use_server(p, &rules[i], diags),
            splice: p.conf.splice,
            rules: Arc::clone(&rules[i]),
            persistence: plan_persistence(p, diags),
            checks: p.conf.checks.clone(),
            email_alert: None,
        });
    }
    let mut named: Vec<(String, &mut Vec<ServerConf>)> = backends
        .iter_mut()
        .map(|b: &mut BackendPlan| (b.id.name.clone(), &mut b.servers))
        .collect();
    crate::checks::resolve_tracks(&mut named, diags);

    let mut frontends = Vec::new();
    for (i, p) in proxies.iter().enumerate() {
        // A `disabled` frontend does not listen, and is not shown.
        if !p.section.kind.has_frontend() || disabled(p) {
            continue;
        }
        let default_backend = match &p.conf.default_backend {
            Some((name, span)) => match backend_index.get(name.as_str()) {
                Some(&index) => Some(index),
                None => {
                    diags.push(Diagnostic::alert(
                        span,
                        "default_backend",
                        format!(
                            "unable to find backend '{name}' referenced by proxy '{}'",
                            p.name
                        ),
                    ));
                    None
                }
            },
            // A listen section sends its traffic to its own servers.
            None => backend_index.get(p.name.as_str()).copied(),
        };
        if let Some(index) = default_backend {
            let span = p
                .conf
                .default_backend
                .as_ref()
                .map_or(&p.section.span, |(_, span)| span);
            check_modes(p, &backends[index], span, "default_backend", diags);
        }
        let mut use_backend = Vec::new();
        for r in &use_backends[i] {
            let choice = match &r.action {
                BackendTarget::Dynamic(fmt) => BackendChoice::Dynamic(fmt.clone()),
                BackendTarget::Named(name) => match backend_index.get(name.as_str()) {
                    Some(&index) => {
                        check_modes(p, &backends[index], &r.span, "use_backend", diags);
                        BackendChoice::Index(index)
                    }
                    None => {
                        diags.push(Diagnostic::alert(
                            &r.span,
                            "use_backend",
                            format!(
                                "unable to find backend '{name}' referenced by proxy '{}'",
                                p.name
                            ),
                        ));
                        continue;
                    }
                },
            };
            use_backend.push(Rule {
                action: choice,
                cond: r.cond.clone(),
                span: r.span.clone(),
            });
        }
        // A `bind` line that was refused has its own alert: no warning on top of it.
        let has_bind_line = p
            .section
            .lines
            .iter()
            .any(|l| l.words.first().is_some_and(|w| w == "bind"));
        if p.conf.binds.is_empty() && p.section.kind == SectionKind::Frontend && !has_bind_line {
            diags.push(Diagnostic::warning(
                &p.section.span,
                "frontend",
                format!(
                    "proxy '{}' has no 'bind' directive and will accept nothing",
                    p.name
                ),
            ));
        }
        frontends.push(FrontendPlan {
            id: proxy_id(p, uids[i]),
            mode: p.conf.mode.unwrap_or(Mode::Tcp),
            binds: p.conf.binds.clone(),
            maxconn: p.conf.maxconn.filter(|&n| n > 0),
            session_rate_limit: p.conf.session_rate_limit.unwrap_or(0),
            default_backend,
            timeouts: p.conf.timeouts,
            clitcpka: p.conf.clitcpka.unwrap_or(false),
            client_probes: p.conf.client_probes,
            nolinger: p.conf.client_nolinger.unwrap_or(false),
            smart_accept: p
                .conf
                .smart_accept
                .unwrap_or(p.conf.mode == Some(Mode::Http)),
            contstats: p.conf.contstats.unwrap_or(false),
            socket_stats: p.conf.socket_stats.unwrap_or(false),
            http: p.conf.http.clone(),
            compression: p.conf.compression.clone(),
            error_pages: pages[i].clone(),
            use_backend,
            log: p.conf.log.clone(),
            splice: p.conf.splice,
            rules: Arc::clone(&rules[i]),
        });
    }
    warn_missing_timeouts(proxies, diags);
    (frontends, backends)
}

/// A frontend and the backend it uses must speak compatible protocols: an HTTP frontend
/// cannot hand its parsed requests to a TCP backend. A TCP frontend may use an HTTP backend:
/// the connection is upgraded to HTTP when that backend is chosen (configuration.txt §4
/// "HTTP upgrade": the historical, implicit way, where only the backend's HTTP settings
/// apply), as with `tcp-request content switch-mode http`.
fn check_modes(
    frontend: &ParsedProxy<'_>,
    backend: &BackendPlan,
    span: &Span,
    keyword: &str,
    diags: &mut Diagnostics,
) {
    let front_mode = frontend.conf.mode.unwrap_or(Mode::Tcp);
    if front_mode == Mode::Http && backend.mode == Mode::Tcp {
        let message = format!(
            "frontend '{}' in mode http cannot use backend '{}' in mode tcp",
            frontend.name, backend.id.name
        );
        diags.push(Diagnostic::alert(span, keyword, message));
    }
}

/// The rules of a proxy as its mode allows them: HTTP rules in a `mode tcp` proxy are
/// ignored with a warning, as HAProxy does.
fn mode_rules(p: &ParsedProxy<'_>, diags: &mut Diagnostics) -> ProxyRules {
    let mut rules = p.conf.rules.clone();
    if p.conf.mode.unwrap_or(Mode::Tcp) == Mode::Http {
        // HAProxy also runs them before the HTTP analysis of a response; Sluice only in
        // `mode tcp`, and says so rather than ignoring them.
        if let Some(first) = rules.tcp_response.first() {
            diags.push(Diagnostic::not_supported(
                &first.span,
                "'tcp-response content' in a 'mode http' proxy",
            ));
        }
        return rules;
    }
    // A TCP frontend that upgrades with `switch-mode http` applies them after the upgrade.
    if !rules.has_http_rules() || rules.switches_to_http() {
        return rules;
    }
    let ignored = [
        ("http-request", !rules.http_request.is_empty()),
        ("http-response", !rules.http_response.is_empty()),
        ("http-after-response", !rules.http_after_response.is_empty()),
        ("redirect", !rules.redirects.is_empty()),
        ("monitor-uri", rules.monitor_uri.is_some()),
    ];
    for (keyword, present) in ignored {
        if present {
            diags.push(Diagnostic::warning(
                &p.section.span,
                keyword,
                format!(
                    "'{keyword}' rules ignored for proxy '{}' as they require HTTP mode",
                    p.name
                ),
            ));
        }
    }
    rules.http_request.clear();
    rules.http_response.clear();
    rules.http_after_response.clear();
    rules.redirects.clear();
    rules.monitor_uri = None;
    rules.monitor_fail.clear();
    // A page inherited from `defaults` by a `mode tcp` proxy is not an error: dropped quietly.
    rules.stats_page = None;
    rules
}

/// A `mode tcp` proxy's formats may not use the aliases reserved for HTTP (`%r`, `%HM`,
/// `%Ta`...): HAProxy 2.6 refuses them at the line that gave the format (in `defaults` when
/// inherited), even when the proxy switches to HTTP (`switch-mode http`): a frontend's log
/// and unique-id formats, and the `set-var-fmt` values of any TCP proxy's rules.
fn check_tcp_formats(p: &ParsedProxy<'_>, diags: &mut Diagnostics) {
    if p.conf.mode.unwrap_or(Mode::Tcp) != Mode::Tcp {
        return;
    }
    let reserved = |alias: &str| {
        format!(
            "format variable '{alias}' is reserved for HTTP mode ('{}' is in mode tcp)",
            p.name
        )
    };
    let r = &p.conf.rules;
    let rule_sets = [
        ("tcp-request connection", &r.tcp_connection),
        ("tcp-request session", &r.tcp_session),
        ("tcp-request content", &r.tcp_content),
        ("tcp-response content", &r.tcp_response),
    ];
    for (keyword, rules) in rule_sets {
        for rule in rules.iter() {
            if let TcpAction::SetVar {
                value: VarValue::Format(fmt),
                ..
            } = &rule.action
                && let Some(alias) = fmt.http_only_alias()
            {
                diags.push(Diagnostic::alert(&rule.span, keyword, reserved(alias)));
            }
        }
    }
    if !p.section.kind.has_frontend() {
        return;
    }
    for (keyword, fmt, line) in p.conf.log.given_formats() {
        if let Some(alias) = fmt.http_only_alias() {
            let line = line.unwrap_or(&p.section.span);
            diags.push(Diagnostic::alert(line, keyword, reserved(alias)));
        }
    }
}

/// The options that add fields to HTTP requests (`forwardfor`, `originalto`, `forwarded`)
/// do nothing in a `mode tcp` proxy that never switches to HTTP: a warning, as HAProxy's.
fn warn_http_only_options(p: &ParsedProxy<'_>, diags: &mut Diagnostics) {
    if p.conf.mode.unwrap_or(Mode::Tcp) == Mode::Http || p.conf.rules.switches_to_http() {
        return;
    }
    // A frontend logs the `tcplog` line instead of the HTTP one, as HAProxy says.
    let log = &p.conf.log;
    let http_log = match log.format {
        LineFormat::Http | LineFormat::HttpClf => Some("httplog"),
        LineFormat::Https(_) => Some("httpslog"),
        _ => None,
    };
    if let (Some(name), Some(span), true) = (
        http_log,
        &log.http_format_line,
        p.section.kind.has_frontend(),
    ) {
        diags.push(Diagnostic::warning(
            span,
            "option",
            format!(
                "'option {name}' not usable with proxy '{}' (needs 'mode http'). Falling back to 'option tcplog'",
                p.name
            ),
        ));
    }
    let http = &p.conf.http;
    let options = [
        ("forwardfor", http.forwardfor.is_some()),
        ("originalto", http.originalto.is_some()),
        ("forwarded", http.forwarded.is_some()),
    ];
    for (name, set) in options {
        if set {
            diags.push(Diagnostic::warning(
                &p.section.span,
                "option",
                format!(
                    "'option {name}' ignored for proxy '{}' as it requires HTTP mode",
                    p.name
                ),
            ));
        }
    }
}

/// A frontend with a line format (`option httplog|tcplog`, `log-format`...) but nowhere to
/// send its lines: a warning, as HAProxy gives.
fn warn_log_format_without_target(
    p: &ParsedProxy<'_>,
    global: &GlobalConf,
    diags: &mut Diagnostics,
) {
    let log = &p.conf.log;
    let has_target = !log.targets.is_empty() || (log.use_global && !global.logs.is_empty());
    if !p.section.kind.has_frontend() || matches!(log.format, LineFormat::Minimal) || has_target {
        return;
    }
    let kind = if p.section.kind == SectionKind::Frontend {
        "frontend"
    } else {
        "proxy"
    };
    diags.push(Diagnostic::warning(
        &p.section.span,
        p.section.kind.keyword(),
        format!(
            "log format ignored for {kind} '{}' since it has no log address",
            p.name
        ),
    ));
}

/// `use-server` names a server of the same backend (configuration.txt §4.2).
fn resolve_use_server(
    p: &ParsedProxy<'_>,
    rules: &ProxyRules,
    diags: &mut Diagnostics,
) -> Vec<Rule<usize>> {
    rules
        .use_server
        .iter()
        .filter_map(|r| {
            let index = p.conf.servers.iter().position(|s| s.name == r.action);
            if index.is_none() {
                diags.push(Diagnostic::alert(
                    &r.span,
                    "use-server",
                    format!(
                        "unable to find server '{}' referenced in a 'use-server' rule of backend '{}'",
                        r.action, p.name
                    ),
                ));
            }
            Some(Rule {
                action: index?,
                cond: r.cond.clone(),
                span: r.span.clone(),
            })
        })
        .collect()
}

/// The persistence of a backend: a cookie needs `mode http` (HAProxy ignores it, and the
/// servers' values, with a warning otherwise).
fn plan_persistence(p: &ParsedProxy<'_>, diags: &mut Diagnostics) -> PersistPlan {
    let http = p.conf.mode.unwrap_or(Mode::Tcp) == Mode::Http;
    let persistence = &p.conf.persistence;
    if !http && let Some(cookie) = &persistence.cookie {
        diags.push(Diagnostic::warning(
            &cookie.span,
            "cookie",
            format!(
                "cookie ignored for backend '{}' as it requires 'mode http'",
                p.name
            ),
        ));
    }
    persistence.plan(http)
}

/// Whether the proxy is `disabled`.
fn disabled(p: &ParsedProxy<'_>) -> bool {
    p.conf.disabled.unwrap_or(false)
}

fn proxy_id(p: &ParsedProxy<'_>, uid: u32) -> ProxyId {
    ProxyId {
        name: p.name.clone(),
        kind: p.section.kind,
        uid,
        span: p.section.span.clone(),
        description: p.conf.description.clone(),
    }
}

/// The numbers of `wanted.len()` objects: the explicit ones (checked unique; a duplicate is
/// reported through `duplicate(index, first_index)`), and for the others the smallest free
/// number from a counter that HAProxy moves on after every object (so the n-th gets at least
/// n), skipping every explicit number.
fn assign_ids(wanted: &[Option<u32>], mut duplicate: impl FnMut(usize, usize)) -> Vec<u32> {
    let mut taken: HashMap<u32, usize> = HashMap::new();
    for (i, id) in wanted.iter().enumerate() {
        let Some(id) = id else { continue };
        match taken.entry(*id) {
            Entry::Occupied(first) => duplicate(i, *first.get()),
            Entry::Vacant(slot) => {
                slot.insert(i);
            }
        }
    }
    // HAProxy's counter moves on after every object, numbered or not: the n-th object gets at
    // least n.
    let mut next = 1u32;
    wanted
        .iter()
        .map(|id| {
            let id = match id {
                Some(id) => *id,
                None => {
                    while taken.contains_key(&next) {
                        next = next.saturating_add(1);
                    }
                    taken.insert(next, usize::MAX);
                    next
                }
            };
            next = next.saturating_add(1);
            id
        })
        .collect()
}

/// The proxies' numbers (`id`, or the first free one, in declaration order).
fn proxy_uids(proxies: &[ParsedProxy<'_>], diags: &mut Diagnostics) -> Vec<u32> {
    let wanted: Vec<Option<u32>> = proxies
        .iter()
        .map(|p| p.conf.id.as_ref().map(|(id, _)| *id))
        .collect();
    assign_ids(&wanted, |i, first| {
        if let Some((id, span)) = &proxies[i].conf.id {
            diags.push(Diagnostic::alert(
                span,
                "id",
                format!(
                    "proxy '{}' has the same id {id} as proxy '{}'",
                    proxies[i].name, proxies[first].name
                ),
            ));
        }
    })
}

/// A backend's servers, each with its `id` (given, or the first free one) and `maxconn`
/// completed by `minconn`.
fn with_server_ids(servers: &[ServerConf], diags: &mut Diagnostics) -> Vec<ServerConf> {
    let wanted: Vec<Option<u32>> = servers.iter().map(|s| s.id).collect();
    let ids = assign_ids(&wanted, |i, first| {
        diags.push(Diagnostic::alert(
            &servers[i].span,
            "server",
            format!(
                "server '{}' has the same id {} as server '{}'",
                servers[i].name,
                wanted[i].unwrap_or_default(),
                servers[first].name
            ),
        ));
    });
    servers
        .iter()
        .zip(ids)
        .map(|(s, id)| {
            // HAProxy's reading of `minconn`: alone or above `maxconn`, it is the `maxconn`.
            let maxconn = match (s.minconn, s.maxconn) {
                (Some(min), max) if min > max.unwrap_or(0) => Some(min),
                (_, max) => max,
            };
            ServerConf {
                id: Some(id),
                maxconn,
                ..s.clone()
            }
        })
        .collect()
}

/// `redir` answers HTTP requests: HAProxy refuses it in a `mode tcp` backend.
fn check_redir_mode(http: bool, backend: &str, servers: &[ServerConf], diags: &mut Diagnostics) {
    for server in servers.iter().filter(|s| !http && s.redir.is_some()) {
        diags.push(Diagnostic::alert(
            &server.span,
            "server",
            format!(
                "server '{}' of backend '{backend}' cannot have a redirect prefix ('redir') in non-HTTP mode",
                server.name
            ),
        ));
    }
}

fn check_unique_servers(servers: &[ServerConf], diags: &mut Diagnostics) {
    let mut seen: HashMap<&str, &Span> = HashMap::new();
    for server in servers {
        if let Some(first) = seen.insert(&server.name, &server.span) {
            diags.push(Diagnostic::alert(
                &server.span,
                "server",
                format!("server name '{}' is already used at {first}", server.name),
            ));
        }
    }
}

/// HAProxy warns when a proxy lacks the timeouts its side needs (configuration.txt §4.2
/// "timeout client"): without them a stuck peer holds its connection forever.
fn warn_missing_timeouts(proxies: &[ParsedProxy<'_>], diags: &mut Diagnostics) {
    for p in proxies {
        let t = &p.conf.timeouts;
        let mut missing = Vec::new();
        if p.section.kind.has_frontend() && t.client.is_none() {
            missing.push("'client'");
        }
        if p.section.kind.has_backend() {
            if t.connect.is_none() {
                missing.push("'connect'");
            }
            if t.server.is_none() {
                missing.push("'server'");
            }
        }
        if !missing.is_empty() {
            diags.push(Diagnostic::warning(
                &p.section.span,
                p.section.kind.keyword(),
                format!(
                    "missing timeouts for proxy '{}': set {} to avoid connections that never expire",
                    p.name,
                    missing.join(", ")
                ),
            ));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn plan_of(text: &str) -> Plan {
        let no_env = |_: &str| None;
        let ctx = CondContext {
            lookup: &no_env,
            features: &[],
            enabled: &[],
            version: "2.6",
        };
        let source = Source {
            name: Arc::from("t.cfg"),
            text: text.to_owned(),
        };
        let checked = check(&[source], &ctx);
        let alerts: Vec<String> = checked
            .diagnostics
            .iter()
            .filter(|d| d.is_fatal())
            .map(|d| d.to_string())
            .collect();
        assert!(alerts.is_empty(), "{alerts:?}");
        checked.plan.unwrap()
    }

    #[test]
    fn proxies_inherit_the_last_defaults_or_the_named_one() {
        let plan = plan_of(
            "defaults a\n timeout connect 1s\n retries 5\n\
             defaults b\n timeout connect 2s\n\
             backend x\n\
             backend y from a\n timeout server 3s\n",
        );
        let x = &plan.backends[0];
        let y = &plan.backends[1];
        assert_eq!(x.timeouts.connect, Some(Duration::from_secs(2)));
        assert_eq!(x.retries, DEFAULT_RETRIES);
        assert_eq!(y.timeouts.connect, Some(Duration::from_secs(1)));
        assert_eq!(y.retries, 5);
        assert_eq!(y.timeouts.server, Some(Duration::from_secs(3)));
    }

    #[test]
    fn smart_accept_follows_the_mode_unless_set_and_smart_connect_is_asked_for() {
        let plan = plan_of(
            "defaults\n mode http\n\
             frontend h\n bind :1\n default_backend b\n\
             frontend t\n mode tcp\n bind :2\n default_backend c\n\
             frontend n\n bind :3\n no option tcp-smart-accept\n default_backend b\n\
             frontend f\n mode tcp\n bind :4\n option tcp-smart-accept\n default_backend c\n\
             backend b\n option tcp-smart-connect\n\
             backend c\n mode tcp\n",
        );
        let smart: Vec<bool> = plan.frontends.iter().map(|f| f.smart_accept).collect();
        assert_eq!(smart, [true, false, false, true]);
        assert!(plan.backends[0].smart_connect);
        assert!(!plan.backends[1].smart_connect);
    }

    #[test]
    fn keepalive_probes_come_from_defaults_and_default_to_the_system() {
        let plan = plan_of(
            "defaults\n mode tcp\n clitcpka-idle 1m\n srvtcpka-cnt 4\n\
             frontend f\n bind :1\n option clitcpka\n clitcpka-intvl 15\n clitcpka-cnt 0\n\
             default_backend b\n\
             backend b\n option srvtcpka\n srvtcpka-idle 2h\n srvtcpka-intvl 2500ms\n\
             backend c\n",
        );
        let front = plan.frontends[0].client_probes;
        assert_eq!(front.idle, Some(Duration::from_secs(60)));
        // Seconds by default; zero leaves the system's setting.
        assert_eq!(front.interval, Some(Duration::from_secs(15)));
        assert_eq!(front.count, None);
        let back = plan.backends[0].server_probes;
        assert_eq!(back.idle, Some(Duration::from_secs(7200)));
        // Whole seconds, as the kernel counts them, rounded up as HAProxy rounds.
        assert_eq!(back.interval, Some(Duration::from_secs(3)));
        assert_eq!(back.count, Some(4));
        assert_eq!(plan.backends[1].server_probes.count, Some(4));
        assert_eq!(plan.backends[1].server_probes.idle, None);
    }

    #[test]
    fn socket_buffer_sizes_are_global_and_reach_the_backends() {
        let plan = plan_of(
            "global\n tune.rcvbuf.client 65536\n tune.sndbuf.server 32768\n tune.sndbuf.client 0\n\
             defaults\n mode tcp\n\
             backend b\n",
        );
        let client = plan.global.client_buffers;
        // 0 is the kernel's own size, as by default.
        assert_eq!((client.receive, client.send), (Some(65536), None));
        let server = plan.backends[0].server_buffers;
        assert_eq!((server.receive, server.send), (None, Some(32768)));
    }

    #[test]
    fn defaults_chain_through_from() {
        let plan =
            plan_of("defaults a\n option tcpka\ndefaults b from a\n retries 1\nbackend x from b\n");
        assert!(plan.backends[0].srvtcpka);
        assert_eq!(plan.backends[0].retries, 1);
    }

    #[test]
    fn listen_sends_traffic_to_itself_unless_told_otherwise() {
        let plan = plan_of(
            "listen l\n bind :1\n server s 127.0.0.1:2\n\
             listen m\n bind :3\n default_backend b\n\
             backend b\n",
        );
        assert_eq!(plan.frontends[0].default_backend, Some(0));
        assert_eq!(
            plan.backends[plan.frontends[1].default_backend.unwrap()]
                .id
                .name,
            "b"
        );
    }

    #[test]
    fn several_global_sections_merge() {
        let plan = plan_of("global\n maxconn 10\nglobal\n nbthread 2\n maxconn 20\n");
        assert_eq!(plan.global.maxconn, Some(20));
        assert_eq!(plan.global.nbthread, Some(2));
    }

    #[test]
    fn proxy_ids_follow_declaration_order() {
        let plan = plan_of("frontend f\n bind :1\nbackend b\nlisten l\n bind :2\n");
        let ids: Vec<(String, u32)> = plan
            .frontends
            .iter()
            .map(|f| (f.id.name.clone(), f.id.uid))
            .collect();
        assert_eq!(ids, [("f".to_owned(), 1), ("l".to_owned(), 3)]);
        let backend_ids: Vec<u32> = plan.backends.iter().map(|b| b.id.uid).collect();
        assert_eq!(backend_ids, [2, 3]);
    }

    #[test]
    fn explicit_ids_are_kept_and_automatic_ones_skip_them() {
        let plan = plan_of(
            "backend b\n id 1\n server a 127.0.0.1:1\n server c 127.0.0.1:2 id 1\n\
             server d 127.0.0.1:3\n server e 127.0.0.1:4 id 3\n server f 127.0.0.1:5\n\
             backend g\n",
        );
        let ids: Vec<Option<u32>> = plan.backends[0].servers.iter().map(|s| s.id).collect();
        assert_eq!(ids, [Some(2), Some(1), Some(4), Some(3), Some(6)]);
        assert_eq!(plan.backends[0].id.uid, 1);
        assert_eq!(plan.backends[1].id.uid, 2);
    }

    #[test]
    fn server_templates_declare_numbered_servers_like_haproxy() {
        // The ids HAProxy 2.6 gives this backend (`show servers state`): 1, 10, 3, 4, 5.
        let plan = plan_of(
            "backend b\n server x 127.0.0.1:80\n\
             server-template srv 2-4 127.0.0.1:80 id 10 weight 3\n server y 127.0.0.1:80\n",
        );
        let servers: Vec<(&str, Option<u32>, u32)> = plan.backends[0]
            .servers
            .iter()
            .map(|s| (s.name.as_str(), s.id, s.weight))
            .collect();
        assert_eq!(
            servers,
            [
                ("x", Some(1), 1),
                ("srv2", Some(10), 3),
                ("srv3", Some(3), 3),
                ("srv4", Some(4), 3),
                ("y", Some(5), 1)
            ]
        );
    }

    #[test]
    fn duplicate_ids_are_alerts() {
        let no_env = |_: &str| None;
        let ctx = CondContext {
            lookup: &no_env,
            features: &[],
            enabled: &[],
            version: "2.6",
        };
        let text = "backend b\n id 7\n server a 127.0.0.1:1 id 2\n server c 127.0.0.1:2 id 2\nbackend g\n id 7\n";
        let source = Source {
            name: Arc::from("t.cfg"),
            text: text.to_owned(),
        };
        let checked = check(&[source], &ctx);
        let alerts: Vec<String> = checked
            .diagnostics
            .iter()
            .filter(|d| d.is_fatal())
            .map(|d| d.to_string())
            .collect();
        assert_eq!(
            alerts,
            [
                "[ALERT] t.cfg:6: id: proxy 'g' has the same id 7 as proxy 'b'",
                "[ALERT] t.cfg:4: server: server 'c' has the same id 2 as server 'a'",
            ]
        );
        assert!(checked.plan.is_none());
    }

    #[test]
    fn default_server_applies_to_following_servers_and_tracks_resolve() {
        let plan = plan_of(
            "defaults\n default-server inter 3s\n\
             backend b\n server a 127.0.0.1:1 check\n default-server fall 5 check\n\
             server c 127.0.0.1:2 inter 1s\n server d 127.0.0.1:3 no-check track a\n\
             backend e\n server f 127.0.0.1:4 track b/c\n",
        );
        let s = &plan.backends[0].servers;
        assert_eq!(s[0].checks.inter(), Duration::from_secs(3));
        assert_eq!(s[0].checks.fall(), 3);
        assert_eq!(s[1].checks.inter(), Duration::from_secs(1));
        assert_eq!(s[1].checks.fall(), 5);
        assert!(s[1].checks.check);
        assert_eq!(s[2].checks.track.as_ref().unwrap().resolved, Some((0, 0)));
        let f = &plan.backends[1].servers[0];
        assert_eq!(f.checks.track.as_ref().unwrap().resolved, Some((0, 1)));
    }

    #[test]
    fn pool_settings_come_from_the_server_line_or_default_server() {
        let plan = plan_of(
            "defaults\n mode http\n\
             backend b\n server a 127.0.0.1:1\n default-server pool-low-conn 2 max-reuse 0\n\
             server c 127.0.0.1:2 pool-low-conn 4 pool-max-conn 100 pool-purge-delay 10s \
             max-reuse 7\n\
             server d 127.0.0.1:3\n server e 127.0.0.1:4 max-reuse -1\n",
        );
        let s = &plan.backends[0].servers;
        let pools: Vec<_> = s
            .iter()
            .map(|s| {
                (
                    s.pool_low_conn,
                    s.pool_max_conn,
                    s.pool_purge_delay,
                    s.max_reuse,
                )
            })
            .collect();
        let five = proxy::DEFAULT_POOL_PURGE_DELAY;
        assert_eq!(
            pools,
            [
                (0, None, five, None),
                (4, Some(100), Duration::from_secs(10), Some(7)),
                (2, None, five, Some(0)),
                (2, None, five, None)
            ]
        );
    }

    #[test]
    fn response_rules_that_may_read_the_request_are_found_in_either_rule_set() {
        let plan = plan_of(
            "defaults\n mode http\n\
             backend constant\n\
             http-response set-header X-A yes\n\
             http-response del-header X-B\n\
             http-after-response set-status 200\n\
             backend after-only\n\
             http-after-response set-header X-M %[method]\n\
             backend condition\n\
             http-response set-header X-A yes if METH_POST\n\
             backend response-value\n\
             http-response set-header X-A %[req.ver]\n\
             backend status-only\n\
             http-response set-header X-S %[status]\n",
        );
        let reads: Vec<(&str, bool)> = plan
            .backends
            .iter()
            .map(|b| (b.id.name.as_str(), b.rules.response_rules_read_request()))
            .collect();
        assert_eq!(
            reads,
            [
                ("constant", false),
                ("after-only", true),
                ("condition", true),
                ("response-value", true),
                // A computed value counts as reading it: the check looks at the kind of
                // action, not at what its format fetches.
                ("status-only", true),
            ]
        );
    }
}
