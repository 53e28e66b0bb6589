//! One request and its response: choose a server, get a connection, send the re-encoded head,
//! stream both bodies, and decide whether each connection may carry another message.
//!
//! The request body and the response run concurrently in one task, so a server may answer
//! before it has read the whole body (an early 413, a `100 Continue`), and a client waiting for
//! `100 Continue` is not deadlocked. Framing is always our own: we re-encode heads with exactly
//! one `Content-Length` or `Transfer-Encoding: chunked` matching what we parsed, and drop
//! hop-by-hop headers (RFC 9110 §7.6.1). Failures become the statuses HAProxy sends: 503 when
//! no server can be reached, 502 for an invalid or missing response, 504 when the server does
//! not answer within `timeout server`.

use super::body::{self, BodyError, BodySpec, BodyTimeouts, Meter, OutFraming};
use super::buffer::{InBuf, ReadError};
use super::cacheability::{self, Cacheability};
use super::compress::{self, Compressing};
use super::persist::{self, PersistState};
use super::pool::{self, ServerKey};
use super::rules::{self, KeptRequest, ResponseVerdict, Scope};
use super::scratch::Scratch;
use super::session::{answer, answer_and_keep};
use super::settings::HttpSettings;
use crate::forward::{self, IdleTimeouts};
use crate::live_bytes::LiveBytes;
use crate::report::report;
use crate::stream_context::StreamView;
use sluice_balance::Algorithm;
use sluice_config::compression::Algo;
use sluice_config::http_options::{AddressHeader, HttpConnMode, HttpReuse};
use sluice_config::logging::LineFormat;
use sluice_config::proxy::SpliceMode;
use sluice_http::encode::{self, HeadEdits};
use sluice_http::error::Side;
use sluice_http::framing::{BodyFraming, response_framing, transfer_encoding_value};
use sluice_http::head::{
    Limits, MessageHead, Parse, RequestHead, ResponseHead, Version, parse_request, parse_response,
};
use sluice_net::listen::Endpoints;
use sluice_net::splice::{Pipe, SpliceEnd};
use sluice_net::stream::Stream;
use sluice_runtime::clock;
use sluice_runtime::counters::SessionMark;
use sluice_runtime::process::Process;
use sluice_runtime::proxy::{Backend, Frontend, Server, ServerLease, Unserved};
use sluice_runtime::record::{Cause, Counts, Phase, ServerEnds, StreamRecord, Termination, Timers};
use std::cell::Cell;
use std::future::Future;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::time::{Duration, Instant, SystemTime};

/// What the session does after an exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Read the next request on the same client connection.
    KeepAlive,
    /// Close the client connection.
    Close,
    /// Close the client connection at once, without an end of stream: `silent-drop` readied
    /// it for a reset.
    Drop,
    /// Close the client connection after an answer of the proxy's own, draining what the
    /// client may still send of the request it answered (`session::close_gracefully`).
    CloseAfterAnswer,
    /// Relay the upgraded connection handed over in the [`Tunnel`] slot, then close.
    Tunnel,
}

/// A server connection kept by a session between its requests: only one that may not be
/// shared with other clients (see [`release`]); the others wait in the thread's pool.
#[derive(Debug)]
pub struct Attached {
    key: ServerKey,
    stream: Stream,
    /// How many requests it carried.
    served: u32,
    /// The connection started with a PROXY header naming this session's client: it must
    /// never serve another client, so it never enters the shared pool.
    private: bool,
}

/// Everything an exchange needs besides the connections: where it stands, and the HTTP
/// settings it runs with. It reads as its [`Situation`] (`ctx.frontend`...).
pub struct Context<'a> {
    /// Where the exchange stands.
    pub situation: Situation<'a>,
    /// Combined HTTP settings, with this request's `set-timeout` values.
    pub settings: HttpSettings<'a>,
}

impl<'a> std::ops::Deref for Context<'a> {
    type Target = Situation<'a>;

    fn deref(&self) -> &Situation<'a> {
        &self.situation
    }
}

/// Where an exchange stands: the process, the proxies on both sides, the session and its
/// client, and when the request came. An upgraded connection keeps this, not the settings,
/// until its tunnel ends, for its log line and statistics.
#[derive(Clone)]
pub struct Situation<'a> {
    /// The process (for its stream log).
    pub process: &'a Process,
    /// When the session started waiting for this request.
    pub request_start: Instant,
    /// The same moment on the wall clock, for the log's date.
    pub request_start_at: SystemTime,
    /// When the request head was complete.
    pub head_at: Instant,
    /// The accepting proxy.
    pub frontend: &'a Frontend,
    /// The proxy holding the servers.
    pub backend: &'a Backend,
    /// The client's addresses.
    pub endpoints: Endpoints,
    /// True for the first request of the client connection.
    pub first: bool,
    /// What rules see of the session (variables, addresses).
    pub scope: &'a Scope<'a>,
    /// Bytes from and to the client that `option contstats` already counted in the
    /// statistics while they moved; the exchange's final count leaves them out.
    pub live_counted: Cell<(u64, u64)>,
}

impl<'a> Situation<'a> {
    /// Under `option contstats`, what counts the bytes of bodies and tunnels relayed with
    /// `server` as they move.
    fn live_bytes(&'a self, server: &'a Server) -> Option<LiveBytes<'a>> {
        self.frontend.plan.contstats.then(|| {
            let traffic = [
                Some(&self.frontend.traffic),
                self.scope.vars.listener().map(|l| &l.traffic),
                Some(&self.backend.traffic),
                Some(&server.traffic),
            ];
            LiveBytes::new(traffic, &self.scope.vars.trackers, &self.live_counted)
        })
    }
}

impl Context<'_> {
    /// An error page of ours as `http-after-response` rules leave it.
    fn after<'p>(&self, page: std::borrow::Cow<'p, [u8]>) -> std::borrow::Cow<'p, [u8]> {
        rules::finish_page(self.scope, Some(self.backend), page)
    }
}

/// Whether a server connection may serve other clients: `http-reuse` is not `never`, the
/// proxy keeps connections alive, and the connection carries no PROXY header of its client.
fn shareable(settings: &HttpSettings<'_>, conn: &Attached) -> bool {
    settings.reuse != HttpReuse::Never
        && settings.conn_mode == HttpConnMode::KeepAlive
        && !conn.private
}

/// What the exchange learns as its transfer goes (of the response, and of what moved),
/// read after the transfer whatever its outcome.
#[derive(Default)]
struct ResponseSeen {
    /// When the client got a response head, its status and version (what the log shows).
    sent: Cell<Option<(Instant, u16, Version)>>,
    /// The status of the server's final response head as it came, before any rule: counted
    /// then in the server's `hrsp_*` and the stick counters, as HAProxy counts it.
    received: Cell<Option<u16>>,
    /// What a transfer that broke off had moved (to the server, to the client), counted in
    /// the statistics and the log as HAProxy counts what went through.
    moved: Cell<Option<(u64, u64)>>,
}

/// How the response side ended.
struct ResponseDone {
    /// The client connection must close after this response.
    close_client: bool,
    /// The server connection may carry another request.
    server_reusable: bool,
    /// A `101 Switching Protocols` or a successful CONNECT: relay raw bytes from now on.
    tunnel: bool,
    /// Request bytes (head and body) sent to the server.
    bytes_up: u64,
    /// Response bytes (heads and body) sent to the client.
    bytes_down: u64,
    /// The proxy answered in the server's place (a response rule, `option checkcache`): why,
    /// a denial (`P`) or an answer of its own (`L`). As in HAProxy, the log then shows no
    /// response time.
    replaced: Option<Cause>,
    /// The body went to the client compressed with this.
    compressed: Option<Algo>,
}

/// Why the response side failed.
enum ResponseFailure {
    /// Nothing usable came back: answer this status if nothing was sent yet.
    Status(u16),
    /// The server closed a reused connection before answering: the request may be retried.
    ClosedBeforeAnswer,
    /// The transfer broke after the head was sent: just close. Names who broke it, and how
    /// many bytes of the response's heads the client got before (what the bodies moved is
    /// tallied apart, see `ResponseSeen::moved`).
    Broken(Cause, u64),
    /// The response's status is one `retry-on` retries; nothing was sent to the client.
    RetryStatus(u16),
    /// `http-response wait-for-body` ran out of time; nothing was sent to the client.
    BodyTimeout,
    /// `http-response silent-drop`: the client's connection, readied for a reset that does
    /// not reach it, is to close at once; nothing was sent to it.
    Dropped,
}

/// What an exchange ends with: what the session does next, and what the log reports.
struct Ending {
    next: Next,
    status: Option<u16>,
    termination: Termination,
    /// Bytes of the proxy's own answer sent to the client (its log counts them, as
    /// HAProxy's does for a 502, 503 or 504 page).
    answer_bytes: u64,
}

impl Ending {
    fn close(status: Option<u16>, cause: Cause, phase: Phase) -> Self {
        Ending {
            next: Next::Close,
            status,
            termination: Termination { cause, phase },
            answer_bytes: 0,
        }
    }

    /// Ends the exchange with an answer of the proxy's own, `page` with `status`: sent now,
    /// counted and logged by [`run`], and followed by the graceful close.
    async fn answered(
        client: &mut Stream,
        page: &[u8],
        limit: Option<Duration>,
        (status, cause, phase): (u16, Cause, Phase),
    ) -> Self {
        let sent = answer(client, page, limit).await;
        Ending {
            next: if sent {
                Next::CloseAfterAnswer
            } else {
                Next::Close
            },
            answer_bytes: if sent { page.len() as u64 } else { 0 },
            ..Ending::close(Some(status), cause, phase)
        }
    }

    /// Like [`Ending::answered`], but the connection goes on when `keep` says it may and the
    /// page frames itself (an empty or unframed errorfile is delimited by the close): as
    /// HAProxy 2.6 does after a 503 (no server, a queue or connection that failed) and a 504.
    async fn answered_or_kept(
        client: &mut Stream,
        page: &[u8],
        (limit, keep): (Option<Duration>, bool),
        ending: (u16, Cause, Phase),
    ) -> Self {
        let kept_page = keep.then(|| rules::page_without_connection(page));
        let Some(kept_page) = kept_page.filter(|p| rules::has_length(p)) else {
            return Ending::answered(client, page, limit, ending).await;
        };
        let sent = answer_and_keep(client, &kept_page, limit).await;
        let (status, cause, phase) = ending;
        Ending {
            next: if sent.is_some() {
                Next::KeepAlive
            } else {
                Next::Close
            },
            answer_bytes: sent.unwrap_or(0) as u64,
            ..Ending::close(Some(status), cause, phase)
        }
    }
}

/// Facts gathered along an exchange for its log record.
#[derive(Default)]
struct Facts<'a> {
    server: Option<&'a str>,
    /// The server that answered, for its statistics.
    chosen: Option<&'a sluice_runtime::proxy::Server>,
    /// The status of the server's final response head as it came, if a valid one came
    /// (what `observe layer7` judges, whatever the rules then answered).
    server_status: Option<u16>,
    connect: Option<Duration>,
    request_sent: Option<Instant>,
    response_head: Option<Instant>,
    /// The version of the server's response head, for `capture.res.ver`.
    response_version: Option<&'static [u8]>,
    bytes_up: u64,
    bytes_down: u64,
    retries: u32,
    queue: Option<Duration>,
    /// The server connection's addresses, read once connected when the log line prints
    /// them.
    server_ends: ServerEnds,
    /// The server connection was kept from an earlier request (`bc_reused`).
    reused: bool,
    /// The response was compressed with this (`res.comp_algo`).
    compressed: Option<Algo>,
}

/// What an upgraded connection keeps from its exchange until its relay ends: the server
/// side, the server's slot (`maxconn`) and session counts, and its kill signal, subscribed
/// before the request was sent so no `shutdown sessions` is missed in between.
struct TunnelParts<'a> {
    server_stream: Stream,
    server: &'a Server,
    /// The server connection is counted in use until the relay ends.
    _in_use: pool::InUse,
    /// Held until the relay ends, then released with the tunnel.
    _lease: ServerLease<'a>,
    _sessions: (SessionMark<'a>, SessionMark<'a>),
    killed: sluice_runtime::health::KillSignal<'a>,
}

/// An upgraded connection (a `101` to a WebSocket upgrade, a 2xx to CONNECT) handed back to
/// the session with what its relay and its log line need ([`relay_tunnel`]). The request's
/// handling state, sized for a whole exchange, is dropped before the relay starts: an idle
/// tunnel costs this and the relay only.
pub struct Tunnel<'a> {
    situation: Situation<'a>,
    /// The relay's inactivity limits (`timeout tunnel`...) and buffer size, from the
    /// exchange's settings, which the tunnel does not keep.
    timeouts: IdleTimeouts,
    bufsize: usize,
    facts: Facts<'a>,
    parts: TunnelParts<'a>,
    status: Option<u16>,
    request_line: Option<Box<[u8]>>,
    /// Boxed: only a custom log format keeps it, and every idle tunnel would carry its room.
    logged_head: Option<Box<LoggedHead>>,
    /// The log line is still to be written (logging is on and `logasap` did not write it).
    log_at_end: bool,
}

/// Relays an upgraded connection until either side ends it (or its server is shut down),
/// then counts its bytes and writes its log line, as the end of its exchange.
pub async fn relay_tunnel(mut tunnel: Box<Tunnel<'_>>, client: &mut Stream) {
    // Worked on in place, through the box alone: moving the fields out would copy them into
    // this future, and references to each, held across the wait, would cost a word apiece
    // in every idle tunnel.
    let directions = (
        forward::Direction::Copy(tunnel.bufsize),
        forward::Direction::Copy(tunnel.bufsize),
    );
    let live = tunnel.situation.live_bytes(tunnel.parts.server);
    let progress = forward::Progress::new(live.as_ref());
    let parts = &mut tunnel.parts;
    let relay = forward::forward_streams(
        client,
        &mut parts.server_stream,
        tunnel.timeouts,
        directions,
        &progress,
    );
    // `biased`: the kill signal is checked on every wake-up anyway; a fixed order spares the
    // random draw an unbiased `select!` makes on each poll.
    let termination = tokio::select! {
        biased;
        _ = relay => Termination::NORMAL,
        () = parts.killed.wait() => Termination { cause: Cause::Killed, phase: Phase::Data },
    };
    // A killed tunnel's bytes are what moved until then.
    let server = Some(tunnel.parts.server);
    count_bytes(
        &tunnel.situation,
        server,
        &mut tunnel.facts,
        progress.moved(),
    );
    let tunnel = &*tunnel;
    report_end(
        &tunnel.situation,
        &tunnel.facts,
        (tunnel.status, termination),
        tunnel.log_at_end,
        (
            tunnel.request_line.as_deref(),
            tunnel.logged_head.as_deref(),
        ),
    );
}

/// A copy of a request's head kept for a custom log format: the bytes and their parse.
type LoggedHead = (Vec<u8>, RequestHead);

/// The end of an exchange: the `show stat` time averages of the server it took, and its log
/// line when one is still to be written.
fn report_end(
    ctx: &Situation<'_>,
    facts: &Facts<'_>,
    (status, termination): (Option<u16>, Termination),
    log: bool,
    (request_line, logged_head): (Option<&[u8]>, Option<&LoggedHead>),
) {
    // The averages of `show stat` cover the requests a server took.
    if let Some(server) = facts.chosen {
        let timers = timers(ctx, facts, facts.response_head);
        ctx.backend.stats.note_times(&timers);
        server.stats.note_times(&timers);
    }
    if log {
        let outcome = Outcome {
            status,
            termination,
            response_head: facts.response_head,
            bytes_down: facts.bytes_down,
            early: false,
        };
        log_exchange(ctx, facts, &outcome, request_line, logged_head);
    }
}

/// Runs one exchange for the request whose head starts `input`, then reports it. An upgraded
/// connection is left in `tunnel` ([`Next::Tunnel`]): its relay and report come later, from
/// [`relay_tunnel`].
pub async fn run<'a>(
    ctx: &Context<'a>,
    client: &mut Stream,
    input: &mut InBuf,
    request: (RequestHead, BodyFraming),
    (attached, tunnel): (&mut Option<Attached>, &mut Option<Box<Tunnel<'a>>>),
) -> Next {
    let head = &request.0;
    let head_len = head.head_len as u64;
    // The request line is copied only when a log wants it: no allocation otherwise.
    let logged = ctx.process.stream_log.is_some() || ctx.frontend.logger.is_some();
    let request_line = logged.then(|| {
        let buf = input.filled();
        let end = buf
            .iter()
            .position(|&b| b == b'\r' || b == b'\n')
            .unwrap_or(buf.len());
        ctx.process.global.logged_request_line(&buf[..end]).to_vec()
    });
    // A `log-format` may read the request (`%r`, `%[req.hdr(...)]`) after it was forwarded:
    // keep a copy of its head only then (the offsets stay valid in the copy).
    let custom_log = ctx
        .frontend
        .logger
        .as_ref()
        .is_some_and(|l| matches!(l.conf.format, LineFormat::Custom(_) | LineFormat::Https(_)));
    let logged_head = custom_log.then(|| (input.filled()[..head.head_len].to_vec(), head.clone()));
    let mut facts = Facts::default();
    // `option logasap`: the line is written once the response head is sent, with the
    // numbers known then; the end of the exchange then logs nothing more.
    let logged_early = Cell::new(false);
    let early = |facts: &Facts<'_>, status: u16, bytes: u64| {
        if logged_early.replace(true) {
            return;
        }
        let outcome = Outcome {
            status: Some(status),
            termination: Termination::NORMAL,
            response_head: Some(clock::now_std()),
            bytes_down: bytes,
            early: true,
        };
        log_exchange(
            ctx,
            facts,
            &outcome,
            request_line.as_deref(),
            logged_head.as_ref(),
        );
    };
    let asap = logged && ctx.frontend.logger.as_ref().is_some_and(|l| l.conf.logasap);
    let on_head: Option<EarlyLog<'_>> = if asap { Some(&early) } else { None };
    let mut upgraded = None;
    let ending = exchange(
        ctx,
        client,
        input,
        request,
        (attached, &mut upgraded),
        &mut facts,
        on_head,
    )
    .await;
    // An answer of the proxy's own during the exchange (an error page, a server's `redir`
    // redirection) is traffic too, as HAProxy counts it: the request it read, when none of it
    // reached a server, and the answer.
    if ending.answer_bytes > 0 {
        let up = if facts.bytes_up == 0 { head_len } else { 0 };
        let chosen = facts.chosen;
        count_bytes(ctx, chosen, &mut facts, (up, ending.answer_bytes));
    }
    // `http_fail_cnt` and `http_err_cnt` when no valid head came from a server (one that
    // did was counted as it came, `count_server_head`), as HAProxy counts them: a server
    // that failed to answer (a response that is invalid, a 502, or late, a 504); an error of
    // the proxy's own (a broken request body).
    let server_failed = facts.server_status.is_none()
        && facts.chosen.is_some()
        && matches!(ending.status, Some(502 | 504));
    if server_failed {
        ctx.scope.vars.trackers.http_failure();
    }
    if let Some(status) = ending.status {
        if facts.server_status.is_none() && (400..500).contains(&status) {
            ctx.scope.vars.trackers.http_error();
        }
        ctx.frontend.stats.count_response(status);
        ctx.backend.stats.count_response(status);
    }
    // A transfer cut short, not an error the proxy answered (a broken request body's 400).
    if let Some(server) = facts.chosen
        && ending.answer_bytes == 0
    {
        sluice_runtime::proxy::count_abort(ctx.backend, server, ending.termination);
    }
    let log_at_end = logged && !logged_early.get();
    if let Some(parts) = upgraded {
        let s = &ctx.settings;
        *tunnel = Some(Box::new(Tunnel {
            situation: ctx.situation.clone(),
            timeouts: IdleTimeouts {
                client: s.tunnel.or(s.client),
                server: s.tunnel.or(s.server),
                client_fin: s.client_fin,
                server_fin: s.server_fin,
            },
            bufsize: s.bufsize,
            facts,
            parts,
            status: ending.status,
            request_line: request_line.map(Vec::into_boxed_slice),
            logged_head: logged_head.map(Box::new),
            log_at_end,
        }));
        return Next::Tunnel;
    }
    report_end(
        ctx,
        &facts,
        (ending.status, ending.termination),
        log_at_end,
        (request_line.as_deref(), logged_head.as_ref()),
    );
    ending.next
}

/// Logs an exchange early (`option logasap`) from its facts, the status and the bytes sent.
type EarlyLog<'l> = &'l dyn Fn(&Facts<'_>, u16, u64);

/// What the log line of an exchange reports beyond its [`Facts`].
struct Outcome {
    status: Option<u16>,
    termination: Termination,
    response_head: Option<Instant>,
    bytes_down: u64,
    /// Logged as soon as the response head was sent (`option logasap`).
    early: bool,
}

/// The exchange's times until now, the response head's arrival being `response_head`.
fn timers(ctx: &Situation<'_>, facts: &Facts<'_>, response_head: Option<Instant>) -> Timers {
    Timers {
        request: Some(ctx.head_at.duration_since(ctx.request_start)),
        queue: facts.queue,
        connect: facts.connect,
        response: facts
            .request_sent
            .zip(response_head)
            .map(|(sent, head)| head.saturating_duration_since(sent)),
        total: clock::since(ctx.request_start),
    }
}

/// Writes the exchange's log line (and the `-d` debug line).
fn log_exchange(
    ctx: &Situation<'_>,
    facts: &Facts<'_>,
    outcome: &Outcome,
    request_line: Option<&[u8]>,
    logged_head: Option<&LoggedHead>,
) {
    let timers = timers(ctx, facts, outcome.response_head);
    let captures = ctx.scope.vars.captures();
    let mut record = StreamRecord {
        start: ctx.request_start_at,
        client: ctx.endpoints.client,
        frontend: ctx.frontend.name(),
        backend: Some(ctx.backend.name()),
        server: facts.server,
        timers,
        status: outcome.status,
        bytes_to_client: outcome.bytes_down,
        bytes_from_client: facts.bytes_up,
        termination: outcome.termination,
        retries: facts.retries,
        request_line,
        response_version: facts.response_version,
        counts: Counts::default(),
        captures: Some(&captures),
        early: outcome.early,
        server_ends: facts.server_ends,
        http: true,
        reused: facts.reused,
        compression: facts.compressed.map(Algo::name),
    };
    let server = facts
        .server
        .and_then(|name| ctx.backend.server_named(name))
        .map(|(_, s)| s);
    let scope = ctx.scope;
    let view = StreamView {
        backend: Some(ctx.backend),
        server,
        request: logged_head.map(|(buf, head)| (&buf[..], head)),
        ..StreamView::new(scope.process, scope.frontend, *scope.endpoints, scope.vars)
    };
    report(
        ctx.process,
        ctx.frontend,
        Some(ctx.backend),
        server,
        &mut record,
        true,
        view,
    );
}

async fn exchange<'a>(
    ctx: &Context<'a>,
    client: &mut Stream,
    input: &mut InBuf,
    (mut head, framing): (RequestHead, BodyFraming),
    (attached, upgraded): (&mut Option<Attached>, &mut Option<TunnelParts<'a>>),
    facts: &mut Facts<'a>,
    on_head: Option<EarlyLog<'_>>,
) -> Ending {
    let s = &ctx.settings;
    // Other exchanges' head writes wait for this one's reads in a round (`batch`).
    let _carrying = crate::batch::Carrying::start();
    // Persistence (use-server, the cookie) reads the request as the client sent it, then may
    // rewrite its cookies: it runs before anything else reads the head.
    let limits = s.request_limits.for_rewrites(s.bufsize);
    let Ok(persistence) = persist::choose(ctx, input, &mut head, &limits) else {
        let ending = (500, Cause::Proxy, Phase::Request);
        let page = s.request_error(500, &view_of(ctx, input.filled(), &head));
        return Ending::answered(client, &page, s.client, ending).await;
    };
    let mut persist_state = persistence.state;
    // `framing` was decided from the head as received, before any rule rewrote it.
    let buf = input.filled();
    // `stick match|on`: when neither `use-server` nor the cookie chose, a table may.
    let stuck = if persistence.target.is_none() && !ctx.backend.plan.rules.stick_rules.is_empty() {
        crate::stick_rules::matched_server(&view_of(ctx, buf, &head), ctx.backend).map(|index| {
            persist::Target {
                index,
                forced: false,
            }
        })
    } else {
        None
    };
    // `option prefer-last-server`: the server of the connection the session kept (under
    // `http-reuse never`, or a private one), when the balancing would pick any server, as
    // HAProxy prefers the server it "still holds a connection" to, unless its queue is
    // longer than `max-keep-alive-queue`; shared connections go back to the pool after each
    // response, so there is then none.
    let last = if ctx.backend.plan.http.prefer_last_server
        && !ctx.backend.algorithm().is_deterministic()
    {
        attached
            .as_ref()
            .filter(|a| a.key.backend == ctx.backend.plan.id.uid)
            .and_then(|a| {
                ctx.backend
                    .servers
                    .iter()
                    .position(|s| s.id == a.key.server)
            })
            .filter(|&index| {
                ctx.backend.is_server_usable(index) && ctx.backend.keeps_alive_to(index)
            })
            .map(|index| persist::Target {
                index,
                forced: false,
            })
    } else {
        None
    };
    let target = persistence.target.or(stuck).or(last);
    let conn = encode::connection_tokens(buf, &head);
    let client_wants_keepalive = conn.persistent(head.version);
    let upgrade = conn.upgrade && head.header_values(buf, "upgrade").next().is_some();
    if upgrade && is_websocket_without_key(buf, &head) {
        sluice_runtime::proxy::count_request_error(ctx.scope.front());
        let page = ctx.after(s.request_error(400, &view_of(ctx, buf, &head)));
        return Ending::answered(client, &page, s.client, (400, Cause::Proxy, Phase::Request))
            .await;
    }
    let is_head = head.is_method(buf, "HEAD");
    let is_connect = head.is_method(buf, "CONNECT");
    let expects_continue = super::session::expects_continue(buf, &head);
    let client_version = head.version;
    let compression = Compression::of(ctx);
    let compress = compress::negotiate(buf, &head, compression.algos);
    // `option checkcache` and `cookie ... nocache` judge whether a cache could keep the
    // response, starting from the method.
    let judges_cache =
        s.check_cache || (ctx.backend.plan.persistence.cookie.as_ref()).is_some_and(|c| c.nocache);
    let cacheable_method = judges_cache.then(|| cacheability::is_safe_method(buf, &head));
    // After a 502, 503 or 504 of its own, the connection goes on as after any answer: when
    // nothing of the request is left to skip and the client, the proxy and the process keep
    // connections (HTTP/1.1 clients: the page says nothing of keep-alive).
    // (Asked when the page goes: a soft stop may have begun meanwhile.)
    let may_keep = super::session::can_answer_and_keep_alive(framing, client_wants_keepalive, s)
        && client_version == Version::Http11;
    let keep_after_error = || may_keep && !ctx.process.ends_kept_alive();

    // The key is extracted only for the algorithm that uses it (none for the rotations).
    let source;
    // `balance hash EXPR`: the key stays borrowed from the request when it can.
    let (hash_view, hash_sample, hash_key);
    let balance_key = match ctx.backend.algorithm() {
        Algorithm::Source => {
            source = ctx
                .endpoints
                .client
                .map(|a| sluice_balance::source_key(a.ip()));
            source.as_ref().map(|k| k.as_bytes())
        }
        Algorithm::Uri(options) => sluice_balance::uri_key(head.target_bytes(buf), options),
        Algorithm::UrlParam { name, .. } => {
            sluice_balance::url_param_key(head.target_bytes(buf), name)
        }
        Algorithm::Hdr {
            name,
            use_domain_only,
        } => head
            .header_values(buf, name)
            .next()
            .and_then(|v| sluice_balance::hdr_key(v, *use_domain_only)),
        Algorithm::Hash(_) => {
            hash_view = view_of(ctx, buf, &head);
            hash_sample = ctx
                .backend
                .plan
                .hash_expr
                .as_ref()
                .and_then(|e| e.eval(&hash_view));
            hash_key = hash_sample.as_ref().map(|s| s.to_binary());
            hash_key.as_deref()
        }
        _ => None,
    };
    // A backend session from the moment the request goes to the backend, queued or not
    // served, as HAProxy counts them.
    let _backend_session = SessionMark::open(&ctx.backend.traffic);
    // The session's clock: no clock reading unless the request waited in a queue.
    let queued_at = clock::now_std();
    let priority = ctx.scope.vars.priority();
    let acquire = async {
        match target {
            // `option persist`/`force-persist`: the down server is used on purpose, no queue.
            Some(target) if target.forced => ctx
                .backend
                .lease_server_forced(target.index)
                .ok_or(Unserved::NoServer),
            // A persisted or `use-server` server: its own queue when full; a full queue or an
            // unusable server gives the request back to the balancing (configuration.txt §5.2
            // `maxqueue`).
            Some(target) => match ctx.backend.acquire_server_at(target.index, priority).await {
                Err(Unserved::QueueFull | Unserved::NoServer) => {
                    persist_state.direct = false;
                    ctx.backend.acquire_server(balance_key, priority).await
                }
                other => other,
            },
            None => ctx.backend.acquire_server(balance_key, priority).await,
        }
    };
    // `option abortonclose`: a client that leaves while its request waits in a queue takes
    // it out (HAProxy's `CQ`).
    let picked = if s.abort_on_close {
        tokio::select! {
            biased;
            picked = acquire => picked,
            () = crate::connect::client_closed(client) => {
                facts.queue = Some(clock::since(queued_at));
                return Ending::close(None, Cause::ClientAbort, Phase::Queue);
            }
        }
    } else {
        acquire.await
    };
    facts.queue = Some(clock::since(queued_at));
    // Persistence (a cookie, `use-server`, a stick table) chose the server it got: `option
    // redispatch` then retries it before moving on (`option prefer-last-server` is no
    // persistence).
    let by_persistence = persistence.target.or(stuck);
    persist_state.persistent =
        matches!(&picked, Ok(lease) if by_persistence.is_some_and(|t| t.index == lease.index()));
    let mut lease = match picked {
        Ok(lease) => lease,
        Err(unserved) => {
            ctx.backend.failed_connections.incr();
            // configuration.txt §8.5: "sQ" for a queue timeout, "SC" when no server was usable.
            let ending = match unserved {
                Unserved::QueueTimeout => (503, Cause::ServerTimeout, Phase::Queue),
                _ => (503, Cause::ServerAbort, Phase::Connect),
            };
            let page = ctx.after(s.server_error(503, &view_of(ctx, input.filled(), &head)));
            let keep = keep_after_error();
            if keep {
                input.consume(head.head_len);
            }
            return Ending::answered_or_kept(client, &page, (s.client, keep), ending).await;
        }
    };
    let mut server = lease.server();
    let stick_stores = if ctx.backend.plan.rules.stick_rules.is_empty() {
        crate::stick_rules::PendingStores::default()
    } else {
        crate::stick_rules::request_stores(&view_of(ctx, buf, &head), ctx.backend)
    };
    facts.server = Some(server.name());
    facts.chosen = Some(server);
    // `redir PREFIX`: the server's GET and HEAD requests are redirected, never forwarded.
    if let Some(prefix) = &server.conf.redir
        && (is_head || head.is_method(buf, "GET"))
    {
        let page = super::redir::answer(prefix, head.target_bytes(buf));
        return Ending::answered(client, &page, s.client, (302, Cause::Local, Phase::Done)).await;
    }
    let mut _server_session = SessionMark::open(&server.traffic);
    let mut key = pool_key(ctx, server);

    // `compression offload`: the server is not asked for what the proxy will compress (a
    // coding the client asked for; `identity` applies whatever it asked).
    let offload = compression.offload && compress.is_some_and(|a| a.content_encoding().is_some());
    let mut request_head = encode_request(ctx, buf, &head, (framing, upgrade, offload), server);
    input.consume(head.head_len);
    // Response rules and error pages may read the request's method and version: keep the
    // head we sent, parsed again, only when there are such rules or pages.
    let keep_head = |request_head: &[u8]| {
        (ctx.frontend.response_reads_request || ctx.backend.response_reads_request)
            .then(|| match parse_request(request_head, &Limits::default()) {
                Ok(Parse::Complete(head)) => Some(head),
                _ => None,
            })
            .flatten()
    };
    let mut kept_head = keep_head(&request_head);

    // A request without a body can be replayed if a reused connection turns out to be dead,
    // and, with `retry-on`, after the failures it names (within `retries`).
    let mut attempts = if framing == BodyFraming::None { 2 } else { 1 };
    let retry_on = &ctx.backend.plan.retry_on;
    let l7 = retry_on.layer7() && !ctx.scope.vars.l7_retries_disabled();
    let mut l7_retries = if framing == BodyFraming::None && l7 {
        ctx.backend.plan.retries
    } else {
        0
    };
    let mut l7_retried = 0;
    loop {
        attempts -= 1;
        let force_new = attempts == 0 && framing == BodyFraming::None;
        let connecting = clock::now_std();
        let reused = if force_new {
            None
        } else {
            reusable_connection(ctx, lease.server(), key, attached)
        };
        let connection = match reused {
            Some(reused) => Ok(reused),
            // The connecting future is built only here: the state of a connection being made
            // (retries, timers) is a kilobyte and more, and built on every request it would be
            // written, cold, into this exchange's state just to be dropped when a kept
            // connection serves it.
            None => {
                let connecting_future = new_connection(ctx, &mut lease, &mut persist_state, facts);
                // `option abortonclose`: so does a client that leaves while the server
                // connection is being made (`CC`).
                if s.abort_on_close {
                    tokio::select! {
                        biased;
                        connection = connecting_future => connection,
                        () = crate::connect::client_closed(client) => {
                            return Ending::close(None, Cause::ClientAbort, Phase::Connect);
                        }
                    }
                } else {
                    connecting_future.await
                }
            }
        };
        facts.retries += l7_retried;
        if !std::ptr::eq(lease.server(), server) {
            // `option redispatch` moved the request to another server.
            server = lease.server();
            facts.server = Some(server.name());
            facts.chosen = Some(server);
            _server_session = SessionMark::open(&server.traffic);
            key = pool_key(ctx, server);
            if let Some(name) = s.send_name_header
                && let Some(renamed) =
                    persist::rename_server(&request_head, name, server.name(), s.server_case)
            {
                request_head = Scratch::from(renamed);
                kept_head = keep_head(&request_head);
            }
        }
        let kept = kept_head.as_ref().map(|h| (&request_head[..], h));
        let (mut server_stream, served_before, in_use) = match connection {
            Ok(c) => c,
            Err(failed_from) => {
                ctx.backend.failed_connections.incr();
                server.failed_connections.incr();
                let client_dst = ctx.scope.addresses().local;
                facts.server_ends = crate::report::attempted_server_ends(
                    ctx.frontend,
                    server,
                    client_dst,
                    failed_from,
                );
                let page = ctx.after(s.server_error(503, &kept_view(ctx, kept)));
                let ending = (503, Cause::ServerAbort, Phase::Connect);
                let keep = (s.client, keep_after_error());
                return Ending::answered_or_kept(client, &page, keep, ending).await;
            }
        };
        let was_reused = served_before > 0;
        if was_reused {
            ctx.backend.stats.reuses.incr();
            server.stats.reuses.incr();
        }
        {
            let scope = ctx.scope;
            let view = StreamView::new(scope.process, scope.frontend, *scope.endpoints, scope.vars);
            crate::stick_rules::commit(&stick_stores, &view, server);
        }
        // A reused connection costs no connect time (HAProxy logs Tc = 0 for it), and was
        // taken without waiting: the clock read before it is still the time.
        let connected = if was_reused {
            connecting
        } else {
            clock::now_std()
        };
        facts.connect = Some(connected.saturating_duration_since(connecting));
        facts.reused = was_reused;
        facts.server_ends = crate::report::server_ends(ctx.frontend, &server_stream);
        facts.request_sent = Some(connected);
        let seen = ResponseSeen::default();
        let sent_facts: &Facts<'_> = facts;
        let head_sent = |status: u16, bytes: u64| {
            if let Some(log) = on_head {
                log(sent_facts, status, bytes);
            }
        };
        // `on-marked-down shutdown-sessions` and `on-marked-up shutdown-backup-sessions` end
        // the exchange at once.
        let mut killed = server.health.kill_signal();
        let transferring = transfer(
            ctx,
            client,
            input,
            &mut server_stream,
            Outgoing {
                head: &request_head,
                kept,
                server,
                persist: &persist_state,
                head_sent: &head_sent,
            },
            TransferShape {
                retry_status: l7_retries > 0,
                framing,
                client_version,
                client_wants_keepalive,
                is_head,
                is_connect,
                upgrade,
                compress,
                cacheable_method,
                expects_continue,
            },
            &seen,
        );
        // `biased`: the kill signal is checked on every wake-up anyway; a fixed order spares
        // the random draw an unbiased `select!` makes on each poll.
        let outcome = tokio::select! {
            biased;
            outcome = transferring => outcome,
            () = killed.wait() => {
                let status = seen.sent.get().map(|(_, status, _)| status);
                return Ending::close(status, Cause::Killed, Phase::Data);
            }
        };
        let answered = seen.sent.get();
        facts.response_head = answered.map(|(at, _, _)| at);
        facts.response_version = answered.map(|(_, _, version)| version.as_bytes());
        let status = answered.map(|(_, status, _)| status);
        // `observe layer7`: the health checks learn how the server answered (not how the
        // rules or the proxy answered in its place).
        let observed = seen.received.get();
        facts.server_status = observed;
        facts.compressed = outcome.as_ref().ok().and_then(|done| done.compressed);
        if let Some(verdict) = layer7_verdict(&outcome, observed) {
            server.health.observe_response(verdict);
        }
        // `retry-on`: a failure it names, with nothing sent to the client yet, sends the
        // request again on a new connection.
        let retryable = match &outcome {
            Err(ResponseFailure::RetryStatus(_)) => true,
            Err(ResponseFailure::ClosedBeforeAnswer) => !was_reused && retry_on.empty_response,
            Err(ResponseFailure::Status(504)) => retry_on.response_timeout,
            Err(ResponseFailure::Status(502)) => retry_on.junk_response,
            _ => false,
        };
        if retryable && l7_retries > 0 && answered.is_none() {
            l7_retries -= 1;
            l7_retried += 1;
            ctx.backend.retries.incr();
            server.retries.incr();
            // Another connection attempt: a session of the server, as HAProxy counts it.
            server.traffic.count_attempt();
            attempts = 1;
            continue;
        }
        match outcome {
            Ok(done) if done.tunnel => {
                count_bytes(ctx, Some(server), facts, (done.bytes_up, done.bytes_down));
                // Bytes the client sent after its head already belong to the tunnel.
                if !input.is_empty() {
                    if body::write(&mut server_stream, input.filled(), s.server)
                        .await
                        .is_err()
                    {
                        return Ending::close(status, Cause::ServerAbort, Phase::Data);
                    }
                    let n = input.len();
                    input.consume(n);
                }
                // The relay has buffers of its own, held only while bytes move: an idle
                // tunnel (a WebSocket waiting for messages) keeps no input buffer.
                input.release_if_empty();
                *upgraded = Some(TunnelParts {
                    server_stream,
                    server,
                    _in_use: in_use,
                    _lease: lease,
                    _sessions: (_backend_session, _server_session),
                    killed,
                });
                return Ending {
                    next: Next::Tunnel,
                    ..Ending::close(status, Cause::Normal, Phase::Done)
                };
            }
            Ok(done) => {
                count_bytes(ctx, Some(server), facts, (done.bytes_up, done.bytes_down));
                let served = served_before.saturating_add(1);
                // `max-reuse` N: a connection carries N + 1 requests at most.
                let reuse_left = server.conf.max_reuse.is_none_or(|max| served <= max);
                if done.server_reusable && reuse_left {
                    let conn = Attached {
                        key,
                        stream: server_stream,
                        served,
                        private: server.conf.send_proxy().is_some(),
                    };
                    // A connection other clients may use goes back to the thread's pool as
                    // soon as its response is done, as HAProxy's do: an idle kept-alive
                    // client then holds no server connection, and the session's next request
                    // finds it there (the most recently used first), unless the pool
                    // already holds what the traffic needs. One that may not be shared
                    // stays with the session, no longer counted in use.
                    if shareable(&ctx.settings, &conn) {
                        let limits = pool::Limits::of(&server.conf);
                        pool::put(in_use, conn.stream, conn.served, &limits);
                    } else {
                        *attached = Some(conn);
                    }
                }
                let next = if done.close_client {
                    Next::Close
                } else {
                    Next::KeepAlive
                };
                let (cause, phase) = match done.replaced {
                    Some(reason) => {
                        facts.response_head = None;
                        (reason, Phase::Headers)
                    }
                    None => (Cause::Normal, Phase::Done),
                };
                return Ending {
                    next,
                    ..Ending::close(status, cause, phase)
                };
            }
            Err(ResponseFailure::ClosedBeforeAnswer) if was_reused && attempts > 0 => continue,
            Err(ResponseFailure::ClosedBeforeAnswer) => {
                ctx.backend.response_errors.incr();
                server.response_errors.incr();
                let page = ctx.after(s.server_error(502, &kept_view(ctx, kept)));
                let ending = (502, Cause::ServerAbort, Phase::Headers);
                let keep = (s.client, keep_after_error());
                return Ending::answered_or_kept(client, &page, keep, ending).await;
            }
            Err(ResponseFailure::Status(status)) => {
                if status >= 500 {
                    ctx.backend.response_errors.incr();
                    server.response_errors.incr();
                } else {
                    // A request body the client broke: a request error (`ereq`), not the
                    // server's, as HAProxy counts it.
                    sluice_runtime::proxy::count_request_error(ctx.scope.front());
                }
                let cause = match status {
                    504 => Cause::ServerTimeout,
                    502 => Cause::Proxy,
                    _ => Cause::ClientAbort,
                };
                let phase = if status >= 500 {
                    Phase::Headers
                } else {
                    Phase::Data
                };
                let page = ctx.after(s.server_error(status, &kept_view(ctx, kept)));
                // After a server that failed to answer (a 502 or a 504), the connection goes
                // on, as in HAProxy 2.6; after a broken request body (a 4xx) it ends.
                let keep = (s.client, status >= 500 && keep_after_error());
                return Ending::answered_or_kept(client, &page, keep, (status, cause, phase)).await;
            }
            Err(ResponseFailure::Broken(cause, sent)) => {
                // A response the server broke off (closed early, or framed wrong) is a
                // response error (`eresp`), as HAProxy counts it; one it was late to send
                // is not.
                if cause == Cause::ServerAbort {
                    ctx.backend.response_errors.incr();
                    server.response_errors.incr();
                }
                // The statistics and the log count what went through before the break, as
                // HAProxy's do.
                let moved = seen.moved.get().unwrap_or((0, sent));
                count_bytes(ctx, Some(server), facts, moved);
                return Ending::close(status, cause, Phase::Data);
            }
            // `http-response wait-for-body` waited in vain for the body of a response the
            // server did answer: a 504, logged as a server timeout in the data phase, with
            // no response error counted (as in HAProxy) and no retry. The server failed all
            // the same (`http_fail_cnt`).
            Err(ResponseFailure::BodyTimeout) => {
                ctx.scope.vars.trackers.http_failure();
                let page = ctx.after(s.server_error(504, &kept_view(ctx, kept)));
                let keep = (s.client, keep_after_error());
                let ending = (504, Cause::ServerTimeout, Phase::Data);
                return Ending::answered_or_kept(client, &page, keep, ending).await;
            }
            // Logged as HAProxy logs it: the server's status, no response time, `PR`.
            Err(ResponseFailure::Dropped) => {
                // Should the socket refuse the options, it still closes, only less quietly.
                let _ = client.abort_silently();
                facts.response_head = None;
                return Ending {
                    next: Next::Drop,
                    ..Ending::close(status, Cause::Proxy, Phase::Request)
                };
            }
            // Only produced while retries are left; reached when an interim response was
            // already relayed, so the request cannot be sent again.
            Err(ResponseFailure::RetryStatus(status)) => {
                ctx.backend.response_errors.incr();
                server.response_errors.incr();
                let page = ctx.after(s.server_error(status, &kept_view(ctx, kept)));
                let ending = (status, Cause::ServerAbort, Phase::Headers);
                return Ending::answered(client, &page, s.client, ending).await;
            }
        }
    }
}

/// The stream as an answer built after the request was sent sees it: with the request head
/// kept for the response side, if it was.
fn kept_view<'b>(ctx: &Context<'b>, request: KeptRequest<'b>) -> StreamView<'b> {
    let scope = ctx.scope;
    StreamView {
        backend: Some(ctx.backend),
        request,
        ..StreamView::new(scope.process, scope.frontend, *scope.endpoints, scope.vars)
    }
}

/// What rules and `balance hash` see of the request while the server is chosen.
fn view_of<'b>(ctx: &Context<'b>, buf: &'b [u8], head: &'b RequestHead) -> StreamView<'b> {
    kept_view(ctx, Some((buf, head)))
}

/// What `observe layer7` makes of an exchange (configuration.txt §5.2 "observe": statuses
/// 100 to 499, 501 and 505 are good); `None` when the server is not to blame.
fn layer7_verdict<T>(
    outcome: &Result<T, ResponseFailure>,
    status: Option<u16>,
) -> Option<Result<(), sluice_runtime::health::Observed>> {
    use sluice_runtime::health::Observed;
    match (outcome, status) {
        (_, Some(code)) if server_failed_with(code) => Some(Err(Observed::WrongStatus)),
        (Ok(_), Some(_)) => Some(Ok(())),
        (Err(ResponseFailure::ClosedBeforeAnswer), None) => Some(Err(Observed::InvalidResponse)),
        (Err(ResponseFailure::Status(504)), None) => Some(Err(Observed::Timeout)),
        (Err(ResponseFailure::Status(502)), None) => Some(Err(Observed::InvalidResponse)),
        _ => None,
    }
}

/// The key of `server`'s connections in the thread's pool.
fn pool_key(ctx: &Context<'_>, server: &Server) -> ServerKey {
    ServerKey {
        backend: ctx.backend.plan.id.uid,
        server: server.id,
        location: server.pool_id(),
    }
}

/// The kept connection this request can go over at once: the session's own if it goes to
/// the same server, then an idle one from the thread's pool when `http-reuse` allows. Says
/// how many requests it carried before, and counts it in use on its server.
fn reusable_connection(
    ctx: &Context<'_>,
    server: &Server,
    key: ServerKey,
    attached: &mut Option<Attached>,
) -> Option<(Stream, u32, pool::InUse)> {
    // Only connections that may not be shared are attached: one this request does not use
    // is taken and closes here.
    if let Some(conn) = attached.take()
        && conn.key == key
        && conn.stream.is_idle_usable()
    {
        let in_use = pool::in_use(key, &pool::Limits::of(&server.conf));
        return Some((conn.stream, conn.served, in_use));
    }
    // configuration.txt §4.2 "http-reuse": `safe` never sends a first request over a shared
    // connection, `aggressive` only over one that already proved reusable. A send-proxy
    // server's connections carry the PROXY header of the client that opened them: HAProxy
    // never shares them between clients, nor do we (see `Attached::private`).
    let only_reused = match ctx.settings.reuse {
        _ if server.conf.send_proxy().is_some() => return None,
        HttpReuse::Never => return None,
        HttpReuse::Safe if ctx.first => return None,
        HttpReuse::Aggressive if ctx.first => true,
        _ => false,
    };
    pool::take(key, only_reused)
}

/// A new connection for this request, to the leased server or, after `option redispatch`,
/// another; counted in use on its server. When none could be made: the failed attempt's own
/// address, if the log line prints it.
async fn new_connection<'b>(
    ctx: &Context<'b>,
    lease: &mut ServerLease<'b>,
    persist_state: &mut PersistState,
    facts: &mut Facts<'_>,
) -> Result<(Stream, u32, pool::InUse), Option<std::net::SocketAddr>> {
    let connection = persist::connect(ctx, lease, persist_state).await;
    facts.retries = connection.retries;
    // `option redispatch` may have moved the request to another server.
    let server = lease.server();
    match connection.stream {
        Some(stream) => {
            let in_use = pool::in_use(pool_key(ctx, server), &pool::Limits::of(&server.conf));
            Ok((stream, 0, in_use))
        }
        None => Err(connection.failed_from),
    }
}

/// The request head as the server will see it.
/// Whether a Transfer-Encoding value's last coding is `chunked`.
fn ends_with_chunked(value: &[u8]) -> bool {
    value
        .rsplit(|&b| b == b',')
        .next()
        .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

fn encode_request(
    ctx: &Context<'_>,
    buf: &[u8],
    head: &RequestHead,
    (framing, upgrade, offload): (BodyFraming, bool, bool),
    server: &Server,
) -> Scratch {
    let s = &ctx.settings;
    // Framing is ours: the received framing fields go, exactly one of ours is added.
    let mut removed = ["content-length", "transfer-encoding", "", "", ""];
    let mut count = 2;
    for name in [s.send_name_header, offload.then_some("accept-encoding")]
        .into_iter()
        .flatten()
    {
        removed[count] = name;
        count += 1;
    }
    // Codings before `chunked` (gzip...) stay announced: we re-chunk, we do not decode them.
    // Only a value still ending in `chunked` is kept: a rule may have rewritten the field,
    // and the body is chunked whatever it says now.
    let coding = transfer_encoding_value(buf, head).filter(|v| ends_with_chunked(v));
    let client_ip = ctx.endpoints.client.map(|a| a.ip());
    let local_ip = ctx.endpoints.local.map(|a| a.ip());
    let mut add = AddedFields::default();
    let mut length = Decimal::default();
    match framing {
        BodyFraming::ContentLength(n) => add.push("Content-Length", length.of(n)),
        BodyFraming::Chunked => {
            add.push("Transfer-Encoding", coding.as_deref().unwrap_or(b"chunked"))
        }
        BodyFraming::None | BodyFraming::UntilClose => {}
    }
    if upgrade {
        add.push("Connection", b"upgrade");
    } else if s.conn_mode != HttpConnMode::KeepAlive && !s.pretend_keepalive {
        add.push("Connection", b"close");
    } else if head.version == Version::Http10 {
        // An HTTP/1.0 request ends its connection unless it says otherwise: said here, so
        // the server keeps the connection for the next requests, as with HAProxy.
        add.push("Connection", b"keep-alive");
    }
    // `option forwarded` (a backend's), before the address fields as HAProxy adds it: its
    // element follows those the request carries when they are all valid, in one field (the
    // received ones are merged into it); otherwise it is a field of its own.
    let mut forwarded = Vec::new();
    if let Some(option) = &ctx.backend.plan.http.forwarded {
        let mut own = Vec::with_capacity(64);
        let host = head.header_values(buf, "host").next();
        super::forwarded::element(option, &view_of(ctx, buf, head), host, &mut own);
        let existing = || head.header_values(buf, "forwarded");
        if sluice_http::rfc7239::fields_valid(existing()) == Some(true) {
            for value in existing() {
                forwarded.extend_from_slice(value);
                forwarded.extend_from_slice(b", ");
            }
            removed[count] = "forwarded";
            count += 1;
        }
        forwarded.extend_from_slice(&own);
        add.push("forwarded", &forwarded);
    }
    let mut forwarded_for = IpText::default();
    if let (Some(option), Some(ip)) = (s.forwardfor, client_ip)
        && wants_address_header(option, ip, buf, head)
    {
        add.push(option.header.as_str(), forwarded_for.of(ip));
    }
    let mut original_to = IpText::default();
    if let (Some(option), Some(ip), Some(local)) = (s.originalto, client_ip, local_ip)
        && wants_address_header(option, ip, buf, head)
    {
        add.push(option.header.as_str(), original_to.of(local));
    }
    if let Some(name) = s.send_name_header {
        add.push(name, server.name().as_bytes());
    }
    let unique_id = ctx.scope.vars.unique_id();
    if let (Some(name), Some(id)) = (&ctx.frontend.plan.log.unique_id_header, &unique_id) {
        add.push(name.as_str(), id);
    }
    let remove = &removed[..count];
    let mut out = Scratch::take();
    encode::encode_request(
        buf,
        head,
        &HeadEdits {
            remove,
            hop_by_hop: Some(upgrade),
            add: add.as_slice(),
            version: None,
            case: s.server_case,
        },
        &mut out,
    );
    out
}

/// The fields the proxy adds to a head it forwards, on the stack: at most one framing
/// field, `Connection`, the two address fields, the server name, `forwarded` and the unique
/// id.
#[derive(Default)]
struct AddedFields<'a> {
    fields: [(&'a str, &'a [u8]); 7],
    len: usize,
}

impl<'a> AddedFields<'a> {
    fn push(&mut self, name: &'a str, value: &'a [u8]) {
        self.fields[self.len] = (name, value);
        self.len += 1;
    }

    fn as_slice(&self) -> &[(&'a str, &'a [u8])] {
        &self.fields[..self.len]
    }
}

/// A number as decimal text, written on the stack (a `Content-Length` value).
#[derive(Default)]
struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl Decimal {
    fn of(&mut self, mut n: u64) -> &[u8] {
        self.start = self.digits.len();
        loop {
            self.start -= 1;
            self.digits[self.start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        &self.digits[self.start..]
    }
}

/// An address as text, written on the stack (`X-Forwarded-For`, `X-Original-To`).
struct IpText {
    text: [u8; 45],
    len: usize,
}

impl Default for IpText {
    fn default() -> Self {
        IpText {
            text: [0; 45],
            len: 0,
        }
    }
}

impl IpText {
    fn of(&mut self, ip: IpAddr) -> &[u8] {
        use std::io::Write;
        let capacity = self.text.len();
        let mut room = &mut self.text[..];
        // 45 bytes hold the longest IPv6 text (an IPv4-mapped address in full).
        let _ = write!(room, "{ip}");
        self.len = capacity - room.len();
        &self.text[..self.len]
    }
}

/// A WebSocket handshake needs its `Sec-WebSocket-Key` (RFC 6455 §4.1); HAProxy refuses an
/// upgrade without one with 400 rather than open a tunnel the server cannot validate.
fn is_websocket_without_key(buf: &[u8], head: &RequestHead) -> bool {
    let websocket = head.header_values(buf, "upgrade").any(|v| {
        v.split(|&b| b == b',')
            .any(|p| p.trim_ascii().eq_ignore_ascii_case(b"websocket"))
    });
    websocket
        && head
            .header_values(buf, "sec-websocket-key")
            .next()
            .is_none()
}

/// `except NET` skips clients of that network; `if-none` skips requests that already carry
/// the header.
fn wants_address_header(
    option: &AddressHeader,
    client_ip: IpAddr,
    buf: &[u8],
    head: &RequestHead,
) -> bool {
    if option.except.is_some_and(|net| net.contains(&client_ip)) {
        return false;
    }
    !(option.if_none && head.header_values(buf, &option.header).next().is_some())
}

/// The facts about the request that shape the response handling.
#[derive(Clone, Copy)]
struct TransferShape {
    /// A `retry-on` status may still be retried: such a response is not relayed.
    retry_status: bool,
    framing: BodyFraming,
    client_version: Version,
    client_wants_keepalive: bool,
    is_head: bool,
    is_connect: bool,
    upgrade: bool,
    /// The algorithm the client takes its answer compressed with, if it may be.
    compress: Option<Algo>,
    /// Whether the method lets a cache answer (GET, HEAD, OPTIONS, TRACE), when the
    /// backend judges the response's cacheability (`option checkcache`, `cookie ... nocache`).
    cacheable_method: Option<bool>,
    /// The client waits for a `100 Continue` before it sends its body: after an early final
    /// answer it may never send it, so the rest of the body is not waited for.
    expects_continue: bool,
}

/// The compression settings in force for an exchange: the backend's lists when it has
/// them, else the frontend's (`compression` may be set on either side).
struct Compression<'c> {
    algos: &'c [Algo],
    types: &'c [String],
    offload: bool,
}

impl<'c> Compression<'c> {
    fn of(ctx: &Context<'c>) -> Self {
        let (back, front) = (
            &ctx.backend.plan.compression,
            &ctx.frontend.plan.compression,
        );
        Compression {
            algos: if back.algos.is_empty() {
                &front.algos
            } else {
                &back.algos
            },
            types: if back.types.is_empty() {
                &front.types
            } else {
                &back.types
            },
            offload: back.offload || front.offload,
        }
    }
}

/// The request as it leaves for the server.
struct Outgoing<'r> {
    /// The re-encoded head.
    head: &'r [u8],
    /// The same head parsed, when response rules may read it.
    kept: KeptRequest<'r>,
    /// The server it goes to.
    server: &'r Server,
    /// What persistence learned from the request.
    persist: &'r PersistState,
    /// Called once the final response head was sent, with its status and the bytes sent so
    /// far (`option logasap`).
    head_sent: &'r dyn Fn(u16, u64),
}

/// Sends the request and relays the response, concurrently.
async fn transfer(
    ctx: &Context<'_>,
    client: &mut Stream,
    input: &mut InBuf,
    server: &mut Stream,
    outgoing: Outgoing<'_>,
    shape: TransferShape,
    seen: &ResponseSeen,
) -> Result<ResponseDone, ResponseFailure> {
    let s = &ctx.settings;
    let framing = shape.framing;
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    // Without `option contstats`, the bodies' bytes are only tallied, for a transfer that
    // breaks off: it counts them at its end (`ResponseSeen::moved`).
    let tally = Cell::new((0, 0));
    let live = ctx
        .live_bytes(outgoing.server)
        .unwrap_or_else(|| LiveBytes::tally(&tally));
    let live = Some(&live);
    let head_len = outgoing.head.len();
    let request_out = match framing {
        BodyFraming::Chunked => OutFraming::Chunked,
        _ => OutFraming::Raw,
    };
    // Set once the response is complete while the request body is not: the rest of the body
    // is read and dropped (`body::Discardable`), not sent.
    let draining = Cell::new(false);
    // Whether the body relay can drain (the spliced one moves bytes the proxy never reads).
    let can_drain = Cell::new(false);

    let upload = async {
        // The head leaves with the round's other sends, after the round's reads, and with
        // the body bytes that came with it, if any (`body::forward_body`). A buffer they
        // left empty goes back to the pool for the wait: the next exchange of the round
        // reads into it while it is still in the CPU's caches, where a buffer held by each
        // exchange of a round over thousands of connections would be a cold one each.
        input.release_if_empty();
        crate::batch::after_reads().await;
        let timeouts = BodyTimeouts {
            read: s.client,
            write: s.server,
        };
        // A request without a body sends its head alone. The body relays' state (over 2 KiB)
        // is boxed, only for requests that have a body: inline, it would be in the state of
        // every request, which then takes three pages instead of two.
        let moved = if !framing.has_payload() {
            body::write(&mut server_write, outgoing.head, s.server)
                .await
                .map(|()| 0)
        } else if let (Some(mut pipe), BodyFraming::ContentLength(len)) =
            (body_pipe(ctx, Side::Request, framing, request_out), framing)
        {
            Box::pin(body::splice_length(
                input,
                (&client_read, &mut server_write),
                (outgoing.head, len),
                &mut pipe,
                timeouts,
                Meter::new(live, Side::Request),
            ))
            .await
        } else {
            can_drain.set(true);
            Box::pin(body::forward_body(
                input,
                &mut client_read,
                &mut body::Discardable::new(&mut server_write, &draining),
                BodySpec {
                    framing,
                    out: request_out,
                    timeouts,
                    limits: &s.request_limits,
                    side: Side::Request,
                    case: s.server_case,
                    live,
                    trailers: None,
                    lead: outgoing.head,
                },
            ))
            .await
        };
        let body = moved.map_err(|e| match e {
            BodyError::Invalid(err) => UploadFailure::Invalid(err.status()),
            BodyError::WriteIo(_) | BodyError::WriteTimeout => UploadFailure::Server,
            _ => UploadFailure::Client,
        })?;
        Ok(outgoing.head.len() as u64 + body)
    };
    let download = relay_response(
        ctx,
        &mut server_read,
        &mut client_write,
        (
            outgoing.kept,
            outgoing.server,
            outgoing.persist,
            outgoing.head_sent,
            live,
        ),
        shape,
        seen,
    );

    tokio::pin!(upload, download);
    let mut uploaded: Option<Result<u64, UploadFailure>> = None;
    let response = loop {
        // `biased`: both halves belong to this one exchange, so fairness between them buys
        // nothing, and a fixed order spares a random draw on each poll.
        tokio::select! {
            biased;
            up = &mut upload, if uploaded.is_none() => {
                match up {
                    Ok(n) => uploaded = Some(Ok(n)),
                    // The client went away or sent a broken body: nothing more to do here.
                    Err(UploadFailure::Client) => {
                        record_broken(seen, live, None, head_len, 0);
                        return Err(ResponseFailure::Broken(Cause::ClientAbort, 0));
                    }
                    Err(UploadFailure::Invalid(status)) => {
                        if seen.sent.get().is_none() {
                            return Err(ResponseFailure::Status(status));
                        }
                        record_broken(seen, live, None, head_len, 0);
                        return Err(ResponseFailure::Broken(Cause::ClientAbort, 0));
                    }
                    // The server stopped reading; its response (maybe an early error) may
                    // still come, so keep relaying it.
                    Err(UploadFailure::Server) => uploaded = Some(Err(UploadFailure::Server)),
                }
            }
            down = &mut download => break down,
        }
    };
    if response.is_err() && uploaded.is_none() {
        // The server gave up, perhaps because of what we were sending: if the rest of the
        // request is already here and broken, the client's error is the true cause (400, not
        // 502). One poll decides it without waiting for any I/O.
        let pending =
            std::future::poll_fn(|cx| std::task::Poll::Ready(upload.as_mut().poll(cx))).await;
        if let std::task::Poll::Ready(Err(UploadFailure::Invalid(status))) = pending
            && seen.sent.get().is_none()
        {
            return Err(ResponseFailure::Status(status));
        }
    }
    if let Err(ResponseFailure::Broken(_, heads)) = &response {
        let sent_up = match &uploaded {
            Some(Ok(sent)) => Some(*sent),
            _ => None,
        };
        record_broken(seen, live, sent_up, head_len, *heads);
    }
    let mut done = response?;
    // The response ended before the request body did (a server answering early, a 401 or a
    // 413, say): the server's connection cannot be reused. The client's goes on once the rest
    // of the body is read and dropped, as HAProxy drains it, unless the answer closes it, the
    // client waits for a `100 Continue` it did not get (it may never send the body), or the
    // body is spliced.
    if uploaded.is_none() && !done.close_client && !shape.expects_continue && can_drain.get() {
        draining.set(true);
        uploaded = Some(upload.await);
    }
    match uploaded {
        Some(Ok(sent)) if !draining.get() => done.bytes_up = sent,
        Some(Ok(sent)) => {
            done.bytes_up = sent;
            done.server_reusable = false;
        }
        _ => {
            done.close_client = true;
            done.server_reusable = false;
        }
    }
    Ok(done)
}

/// Records what a transfer that broke off had moved (`ResponseSeen::moved`): the request,
/// whole if its upload ended (`sent_up`), else its head (`head_len` bytes) and the body bytes
/// that went; the response's heads (`heads` bytes) and the body bytes that went.
fn record_broken(
    seen: &ResponseSeen,
    live: Option<&LiveBytes<'_>>,
    sent_up: Option<u64>,
    head_len: usize,
    heads: u64,
) {
    let (body_up, body_down) = live.map_or((0, 0), LiveBytes::counted);
    let up = sent_up.unwrap_or(head_len as u64 + body_up);
    seen.moved.set(Some((up, heads + body_down)));
}

/// Why the request side failed.
enum UploadFailure {
    Client,
    Server,
    Invalid(u16),
}

/// What a valid response head from the server counts as it comes, before any rule sees it,
/// as HAProxy counts it: the server's `hrsp_*` (and so its `req_tot`), interim heads
/// included; for a final head, the stick counters' `http_err_cnt` on a 4xx and
/// `http_fail_cnt` on a 5xx but 501 and 505 (those two a client asks for). The frontend and
/// backend count the answer the client got, at the exchange's end.
fn count_server_head(ctx: &Context<'_>, chosen: &Server, status: u16, interim: bool) {
    chosen.stats.count_response(status);
    if interim {
        return;
    }
    let trackers = &ctx.scope.vars.trackers;
    if (400..500).contains(&status) {
        trackers.http_error();
    } else if server_failed_with(status) {
        trackers.http_failure();
    }
}

/// A server's status that says it failed: a 5xx but 501 and 505 (HAProxy's `http_fail_cnt`,
/// and what `observe layer7` takes for an error).
fn server_failed_with(status: u16) -> bool {
    (500..600).contains(&status) && status != 501 && status != 505
}

/// What the response side works with: the request as rules may read it, the server, what
/// persistence learned, the `option logasap` call and the `option contstats` counting.
type ResponseSide<'r> = (
    KeptRequest<'r>,
    &'r Server,
    &'r PersistState,
    &'r dyn Fn(u16, u64),
    Option<&'r LiveBytes<'r>>,
);

/// Reads the response head (passing `1xx` interim responses on), sends it to the client, and
/// relays the body.
async fn relay_response<R, W>(
    ctx: &Context<'_>,
    server: &mut R,
    client: &mut W,
    (kept, chosen, persist_state, head_sent, live): ResponseSide<'_>,
    shape: TransferShape,
    seen: &ResponseSeen,
) -> Result<ResponseDone, ResponseFailure>
where
    R: tokio::io::AsyncRead + SpliceEnd + Unpin,
    W: body::BodyOutput + SpliceEnd,
{
    let s = &ctx.settings;
    let mut input = InBuf::new(s.bufsize);
    let mut out = Scratch::take();
    let mut got_anything = false;
    let mut sent_heads = 0u64;
    loop {
        let read = read_response_head(server, &mut input, s, &mut got_anything).await;
        if let Err(ResponseFailure::Status(502)) = read {
            super::invalid::response(
                ctx.process,
                (ctx.frontend, ctx.backend, chosen),
                ctx.endpoints.client,
                (input.filled(), s.bufsize),
                &s.response_limits,
            );
        }
        let mut head = read?;
        // The log's response time ends here, when the head came, however long the rules
        // then wait for the body (`http-response wait-for-body`), as in HAProxy.
        let arrived = clock::now_std();
        // As the server answered, before any rule changes it.
        let received_status = head.status;
        let interim = (100..200).contains(&head.status) && head.status != 101;
        if shape.retry_status && ctx.backend.plan.retry_on.retries_status(head.status) {
            return Err(ResponseFailure::RetryStatus(head.status));
        }
        // The body's framing comes from the head as the server sent it, before any rule
        // rewrites it: rules change fields, never how the body is delimited.
        let framing = if interim {
            BodyFraming::None
        } else {
            response_framing(input.filled(), &head, shape.is_head, shape.is_connect)
                .map_err(|e| ResponseFailure::Status(e.status()))?
        };
        count_server_head(ctx, chosen, received_status, interim);
        // A protocol switch the request did not ask for, or that the response does not name
        // in its Connection field, is an invalid response (502), as HAProxy takes it.
        if head.status == 101
            && !(shape.upgrade && encode::connection_tokens(input.filled(), &head).upgrade)
        {
            return Err(ResponseFailure::Status(502));
        }
        if !interim {
            seen.received.set(Some(received_status));
        }
        if !interim {
            let mut resume = None;
            let verdict = loop {
                let verdict = rules::process_response(
                    ctx.scope,
                    ctx.backend,
                    Some((chosen, server.as_fd())),
                    kept,
                    &mut input,
                    &mut head,
                    (&s.response_limits, s.bufsize),
                    resume,
                );
                ctx.scope.vars.apply_client_marks(client);
                // `http-response wait-for-body`: the wait, then the rules after it. A body
                // that does not come in time is a server timeout (a 504), as in HAProxy.
                let wait = match verdict {
                    Ok(verdict) => break verdict,
                    Err(wait) => wait,
                };
                let need = (
                    wait.time,
                    usize::try_from(wait.at_least).unwrap_or(usize::MAX),
                );
                let message = (&mut input, &head, framing);
                if !wait_for_response_body(server, message, need, s).await {
                    return Err(ResponseFailure::BodyTimeout);
                }
                resume = Some(wait.resume);
            };
            if matches!(verdict, ResponseVerdict::Relay)
                && !ctx.backend.plan.rules.stick_rules.is_empty()
            {
                let scope = ctx.scope;
                let view = StreamView {
                    backend: Some(ctx.backend),
                    server: Some(chosen),
                    response: Some((input.filled(), &head)),
                    ..StreamView::new(scope.process, scope.frontend, *scope.endpoints, scope.vars)
                };
                crate::stick_rules::store_response(&view, ctx.backend, chosen);
            }
            let reply = match verdict {
                ResponseVerdict::Relay => {
                    // Judged on the status as received and the fields as the rules left them,
                    // before our cookie goes in, as HAProxy judges it.
                    let mut cache = shape.cacheable_method.map(|safe| {
                        Cacheability::of((safe, received_status), input.filled(), &head)
                    });
                    let server_cookie =
                        s.check_cache && cacheability::sets_cookie(input.filled(), &head);
                    let limits = s.response_limits.for_rewrites(s.bufsize);
                    let response = (&mut input, &mut head, cache.as_mut());
                    persist::on_response(ctx.backend, chosen, persist_state, response, &limits)
                        .map_err(|_| ResponseFailure::Status(502))?;
                    if server_cookie && cache.is_some_and(Cacheability::exposes_cookies) {
                        Some(refuse_cacheable_cookie(ctx, chosen, kept))
                    } else {
                        None
                    }
                }
                ResponseVerdict::Drop => {
                    // The log shows the server's status, as HAProxy's does.
                    seen.sent
                        .set(Some((arrived, received_status, head.version)));
                    return Err(ResponseFailure::Dropped);
                }
                ResponseVerdict::Replace(reply) => {
                    let reason = if reply.denied {
                        Cause::Proxy
                    } else {
                        Cause::Local
                    };
                    Some((reply.bytes, reply.status, reason))
                }
            };
            // Relayed: the `http-after-response` rules come last; one that fails under
            // `strict-mode` replaces the response too.
            let reply = reply.or_else(|| {
                let limits = (&s.response_limits, s.bufsize);
                let response = (ctx.backend, Some(chosen));
                rules::after_response(ctx.scope, response, kept, &mut input, &mut head, limits)
                    .err()
                    .map(|answer| (answer.bytes, answer.status, Cause::Proxy))
            });
            if let Some((bytes, status, reason)) = reply {
                // The server's response is dropped: its connection cannot be reused. The
                // client's goes on, as in HAProxy, when it and the configuration keep
                // connections alive and the answer frames itself (the caller still closes
                // it if the request's body did not all come); otherwise the answer says it
                // ends.
                seen.sent
                    .set(Some((clock::now_std(), status, Version::Http11)));
                let keep = shape.client_wants_keepalive
                    && s.conn_mode != HttpConnMode::Close
                    && !ctx.process.ends_kept_alive();
                let kept = keep
                    .then(|| rules::page_without_connection(&bytes))
                    .filter(|page| rules::has_length(page));
                let close_client = kept.is_none();
                let bytes = match kept {
                    Some(page) => std::borrow::Cow::Owned(page),
                    None => super::session::with_connection(bytes, "close"),
                };
                body::write(client, &bytes, s.client)
                    .await
                    .map_err(client_write_failure)?;
                return Ok(ResponseDone {
                    close_client,
                    server_reusable: false,
                    tunnel: false,
                    bytes_up: 0,
                    bytes_down: sent_heads + bytes.len() as u64,
                    replaced: Some(reason),
                    compressed: None,
                });
            }
        }
        let buf = input.filled();
        if interim {
            // HTTP/1.0 clients do not know interim responses (RFC 9110 §15.2).
            if shape.client_version == Version::Http11 {
                out.clear();
                let edits = HeadEdits {
                    remove: &[],
                    hop_by_hop: Some(false),
                    add: &[],
                    version: Some(Version::Http11),
                    case: s.client_case,
                };
                encode::encode_response(buf, &head, &edits, &mut out);
                body::write(client, &out, s.client)
                    .await
                    .map_err(client_write_failure)?;
                seen.sent
                    .set(Some((clock::now_std(), head.status, head.version)));
                sent_heads += out.len() as u64;
            }
            let len = head.head_len;
            input.consume(len);
            continue;
        }
        let tunnel = (head.status == 101 && shape.upgrade)
            || (shape.is_connect && (200..300).contains(&head.status));
        let server_keepalive = encode::connection_tokens(buf, &head).persistent(head.version);
        // `compression`: a client that may take the answer compressed gets it so when the
        // answer is one to compress (only HTTP/1.1 clients may: the body goes chunked), and
        // the process's budget allows it.
        let compressing = shape.compress.filter(|&algo| {
            !tunnel
                && compress::compressible(buf, &head, framing, Compression::of(ctx).types)
                && compress::admits(&ctx.process.compression, algo)
        });
        // `cache-store`: the body is copied as it goes to the client, then stored with the
        // head the rule kept; a compressed body is not (as in HAProxy), nor a tunnel.
        let mut storing =
            super::cache::take_pending(ctx.scope).filter(|_| compressing.is_none() && !tunnel);
        // A body delimited by the server's close cannot be passed on as such to a client we
        // keep: HTTP/1.1 clients get it re-chunked, HTTP/1.0 clients get the close.
        let chunk_to_client = compressing.is_some()
            || (matches!(framing, BodyFraming::Chunked | BodyFraming::UntilClose)
                && shape.client_version == Version::Http11);
        let out_framing = if chunk_to_client {
            OutFraming::Chunked
        } else {
            OutFraming::Raw
        };
        let framing_header = chunk_to_client.then(|| match compressing {
            Some(_) => b"chunked".to_vec(),
            None => response_coding(buf, &head, framing),
        });
        let weak_etag = compressing.and_then(|_| compress::weak_etag(buf, &head));
        let length_only = matches!(framing, BodyFraming::ContentLength(_) | BodyFraming::None);
        // A stopping process ends kept-alive connections after their answer, as HAProxy
        // does (configuration.txt `close-spread-time`).
        let close_client = tunnel
            || !shape.client_wants_keepalive
            || s.conn_mode == HttpConnMode::Close
            || (shape.client_version == Version::Http10 && !length_only)
            || ctx.process.ends_kept_alive();
        let upgrading = tunnel && head.status == 101;
        // A 204 has no body, nor any field saying how long one is (RFC 9110 §8.6, §15.3.5):
        // a client trusting a server's Content-Length there would wait for a body that never
        // comes. A HEAD's answer and a 304 keep theirs, which describe the resource.
        let mut remove: &[&str] = if head.status == 204 {
            &["content-length", "transfer-encoding"]
        } else {
            &[]
        };
        let mut length = Decimal::default();
        let mut add = AddedFields::default();
        if framing != BodyFraming::None {
            // Bodiless responses (HEAD, 304) keep their Content-Length: it describes the
            // resource, not this message.
            remove = if weak_etag.is_some() {
                &["content-length", "transfer-encoding", "etag"]
            } else {
                &["content-length", "transfer-encoding"]
            };
            if let Some(te) = &framing_header {
                add.push("Transfer-Encoding", te);
            } else if let BodyFraming::ContentLength(n) = framing {
                add.push("Content-Length", length.of(n));
            }
        }
        if let Some(algo) = compressing {
            if let Some(coding) = algo.content_encoding() {
                add.push("Content-Encoding", coding.as_bytes());
            }
            add.push("Vary", b"Accept-Encoding");
            if let Some(etag) = &weak_etag {
                add.push("ETag", etag);
            }
        }
        if upgrading {
            add.push("Connection", b"upgrade");
        } else if close_client {
            add.push("Connection", b"close");
        } else if shape.client_version == Version::Http10 {
            add.push("Connection", b"keep-alive");
        }
        out.clear();
        // Clients always get HTTP/1.1 status lines: the version names what we speak on this
        // connection, not what the server spoke on its own.
        let edits = HeadEdits {
            remove,
            hop_by_hop: Some(upgrading),
            add: add.as_slice(),
            version: Some(Version::Http11),
            case: s.client_case,
        };
        encode::encode_response(buf, &head, &edits, &mut out);
        let head_len = head.head_len;
        input.consume(head_len);
        // A small body that arrived with its head leaves in the same write: one system call
        // instead of two, as HAProxy sends one buffer holding both.
        let mut inline_body = None;
        if let BodyFraming::ContentLength(length) = framing
            && !tunnel
            && out_framing == OutFraming::Raw
            && let Ok(length) = usize::try_from(length)
            && input.len() >= length
        {
            out.extend_from_slice(&input.filled()[..length]);
            input.consume(length);
            inline_body = Some(length as u64);
        }
        if let Some(length) = inline_body
            && let Some(pending) = storing.take()
        {
            let body = out[out.len() - length as usize..].to_vec();
            super::cache::finish_store(ctx.scope, pending, body);
        }
        seen.sent.set(Some((arrived, head.status, head.version)));
        // The head leaves with the round's other sends, after the round's reads; an emptied
        // buffer goes back to the pool for the wait, as the request's does.
        input.release_if_empty();
        crate::batch::after_reads().await;
        // A whole answer after which the connection closes waits in the socket for the end
        // of stream, which the session sends once it has counted and logged the exchange
        // (`session::close_after_exchange`), and leaves with it: one packet, where HAProxy
        // sends the answer, then the FIN (`SocketRef::send_before_end`).
        let held = if close_client && inline_body.is_some() {
            client
                .socket()
                .send_before_end(&out)
                .map_err(|err| client_write_failure(BodyError::WriteIo(err)))?
        } else {
            0
        };
        // Body bytes that came with the head and are relayed as they come leave in one write
        // with it (`body::forward_body`): the head is their lead.
        let lead_body = inline_body.is_none()
            && !tunnel
            && compressing.is_none()
            && storing.is_none()
            && !input.is_empty()
            && framing.has_payload();
        if !lead_body {
            body::write(client, &out[held..], s.client)
                .await
                .map_err(client_write_failure)?;
        }
        sent_heads += out.len() as u64;
        // `option logasap` reports what was sent so far, the inline body included.
        head_sent(head.status, sent_heads);
        if let Some(length) = inline_body {
            sent_heads -= length;
        }
        if tunnel {
            // Bytes the server sent after its head already belong to the tunnel.
            if !input.is_empty() {
                body::write(client, input.filled(), s.client)
                    .await
                    .map_err(client_write_failure)?;
                sent_heads += input.len() as u64;
            }
            return Ok(ResponseDone {
                close_client: true,
                server_reusable: false,
                tunnel: true,
                bytes_up: 0,
                bytes_down: sent_heads,
                replaced: None,
                compressed: None,
            });
        }
        let sent = if let Some(length) = inline_body {
            length
        } else if let Some(algo) = compressing {
            // Boxed, as the cache's copy below: both are larger than the plain relay, whose
            // size the state of every request would otherwise take.
            Box::pin(compress_response_body(
                ctx, &mut input, server, client, framing, algo, s,
            ))
            .await
            .map_err(|failure| match failure {
                ResponseFailure::Broken(cause, _) => ResponseFailure::Broken(cause, sent_heads),
                other => other,
            })?
        } else if let Some(pending) = storing {
            let mut tee = super::cache::Tee::new(client, pending.body_limit);
            let spec = response_body_spec((framing, out_framing), s, live);
            let sent = Box::pin(body::forward_body(&mut input, server, &mut tee, spec))
                .await
                .map_err(|e| ResponseFailure::Broken(body_failure_cause(&e), sent_heads))?;
            if let Some(body) = tee.into_copy() {
                super::cache::finish_store(ctx.scope, pending, body);
            }
            sent
        } else {
            let pipe = body_pipe(ctx, Side::Response, framing, out_framing);
            let lead = if lead_body { &out[..] } else { &[] };
            let spec = (framing, out_framing, pipe);
            forward_response_body(&mut input, server, client, (lead, spec), s, live)
                .await
                .map_err(|failure| match failure {
                    ResponseFailure::Broken(cause, _) => ResponseFailure::Broken(cause, sent_heads),
                    other => other,
                })?
        };
        let exact = matches!(
            framing,
            BodyFraming::ContentLength(_) | BodyFraming::Chunked | BodyFraming::None
        );
        return Ok(ResponseDone {
            close_client,
            server_reusable: exact
                && server_keepalive
                && input.is_empty()
                && s.conn_mode == HttpConnMode::KeepAlive,
            tunnel: false,
            bytes_up: 0,
            bytes_down: sent_heads + sent,
            replaced: None,
            compressed: compressing,
        });
    }
}

/// A kernel pipe for a body that may be spliced: one whose length is known and passed on
/// as is, in a direction the frontend's or backend's `option splice-request|response` allows
/// (`splice-auto`: when the body is larger than a buffer, where splicing pays), unless
/// `nosplice` forbids it or `maxpipes` are all in use (the body is then copied).
fn body_pipe(
    ctx: &Context<'_>,
    side: Side,
    framing: BodyFraming,
    out_framing: OutFraming,
) -> Option<Pipe> {
    let (BodyFraming::ContentLength(len), OutFraming::Raw) = (framing, out_framing) else {
        return None;
    };
    let global = &ctx.process.global;
    let options = ctx.frontend.plan.splice.or(ctx.backend.plan.splice);
    let mode = match side {
        Side::Request => options.request_mode(),
        Side::Response => options.response_mode(),
    };
    let wanted = match mode {
        SpliceMode::Always => true,
        SpliceMode::Auto => len > u64::from(global.bufsize()),
        SpliceMode::Never => false,
    };
    if !wanted || global.nosplice {
        return None;
    }
    Pipe::new(global.pipesize, &ctx.process.pipes)
}

/// Relays a response body by its framing (spliced through `pipe` when there is one), naming
/// who failed when it breaks.
async fn forward_response_body<R, W>(
    input: &mut InBuf,
    server: &mut R,
    client: &mut W,
    (lead, (framing, out_framing, pipe)): (&[u8], (BodyFraming, OutFraming, Option<Pipe>)),
    s: &HttpSettings<'_>,
    live: Option<&LiveBytes<'_>>,
) -> Result<u64, ResponseFailure>
where
    R: tokio::io::AsyncRead + SpliceEnd + Unpin,
    W: body::BodyOutput + SpliceEnd,
{
    let timeouts = BodyTimeouts {
        read: s.server,
        write: s.client,
    };
    let moved = match (pipe, framing) {
        (Some(mut pipe), BodyFraming::ContentLength(len)) => {
            let meter = Meter::new(live, Side::Response);
            let body = (lead, len);
            body::splice_length(input, (&*server, client), body, &mut pipe, timeouts, meter).await
        }
        _ => {
            let spec = BodySpec {
                lead,
                ..response_body_spec((framing, out_framing), s, live)
            };
            body::forward_body(input, server, client, spec).await
        }
    };
    moved.map_err(|e| ResponseFailure::Broken(body_failure_cause(&e), 0))
}

/// How a response body is relayed by copy: read by `framing`, written by `out_framing`,
/// within the server's and client's timeouts.
fn response_body_spec<'a>(
    (framing, out_framing): (BodyFraming, OutFraming),
    s: &'a HttpSettings<'_>,
    live: Option<&'a LiveBytes<'a>>,
) -> BodySpec<'a> {
    BodySpec {
        framing,
        out: out_framing,
        timeouts: BodyTimeouts {
            read: s.server,
            write: s.client,
        },
        limits: &s.response_limits,
        side: Side::Response,
        case: s.client_case,
        live,
        trailers: None,
        lead: &[],
    }
}

/// Relays a response body compressed with `algo`, as chunks, and counts it in the
/// statistics (`comp_in`, `comp_out`); the body's bytes before compression, which HAProxy
/// counts as the bytes sent (`bout`, the log's `%B`: its compression is a filter the count
/// does not see).
async fn compress_response_body<R, W>(
    ctx: &Context<'_>,
    input: &mut InBuf,
    server: &mut R,
    client: &mut W,
    framing: BodyFraming,
    algo: Algo,
    s: &HttpSettings<'_>,
) -> Result<u64, ResponseFailure>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let timeouts = BodyTimeouts {
        read: s.server,
        write: s.client,
    };
    let mut compressing = Compressing::new(client, algo, &ctx.process.compression);
    // A chunked body's trailers follow the compressed body, as in HAProxy.
    let trailers = std::cell::RefCell::new(None);
    let spec = BodySpec {
        framing,
        // The decoded payload goes into the compressor, which frames its output.
        out: OutFraming::Raw,
        timeouts,
        limits: &s.response_limits,
        side: Side::Response,
        case: s.client_case,
        // The statistics count the compressed bytes, known only at the end.
        live: None,
        trailers: Some(&trailers),
        lead: &[],
    };
    body::forward_body(input, server, &mut compressing, spec)
        .await
        .map_err(|e| ResponseFailure::Broken(body_failure_cause(&e), 0))?;
    let trailers = trailers.take();
    let finish = compressing.finish(trailers.as_deref(), s.client_case);
    let ended = match s.client {
        Some(limit) => clock::timeout(limit, finish)
            .await
            .map_err(|_| ResponseFailure::Broken(Cause::ClientTimeout, 0))?,
        None => finish.await,
    };
    let (consumed, produced) = ended.map_err(|_| ResponseFailure::Broken(Cause::ClientAbort, 0))?;
    for stats in [&ctx.frontend.stats, &ctx.backend.stats] {
        let [bytes_in, bytes_out, responses] = &stats.compressed;
        bytes_in.add(consumed);
        bytes_out.add(produced);
        responses.incr();
    }
    Ok(consumed)
}

/// Who a broken response body transfer is put down to.
fn body_failure_cause(e: &BodyError) -> Cause {
    match e {
        BodyError::ReadTimeout => Cause::ServerTimeout,
        BodyError::WriteTimeout => Cause::ClientTimeout,
        BodyError::WriteIo(_) => Cause::ClientAbort,
        _ => Cause::ServerAbort,
    }
}

/// The Transfer-Encoding announced to a client that gets the body re-chunked: the server's
/// codings (ending in `chunked`), or its codings followed by `chunked` for a body the server
/// delimited by closing.
fn response_coding(buf: &[u8], head: &ResponseHead, framing: BodyFraming) -> Vec<u8> {
    // The field may have been rewritten by a rule: only a coherent value is passed on.
    match (transfer_encoding_value(buf, head), framing) {
        (Some(value), BodyFraming::Chunked) if ends_with_chunked(&value) => value,
        (Some(mut value), BodyFraming::UntilClose)
            if !value.is_empty() && !ends_with_chunked(&value) =>
        {
            value.extend_from_slice(b", chunked");
            value
        }
        _ => b"chunked".to_vec(),
    }
}

/// `http-response wait-for-body`: reads the response body into the buffer until it is whole,
/// `at_least` bytes of it came, the buffer holds the most a head may (`tune.bufsize` less
/// `tune.maxrewrite`: the room rewrites need stays free), or the server ends its side (the
/// relay then finds out); false if `time`, or `timeout server` between two reads, passed
/// first.
async fn wait_for_response_body<R: tokio::io::AsyncRead + Unpin>(
    server: &mut R,
    (input, head, framing): (&mut InBuf, &ResponseHead, BodyFraming),
    (time, at_least): (Duration, usize),
    s: &HttpSettings<'_>,
) -> bool {
    let most = s.response_limits.max_head;
    let deadline = clock::now_std() + time;
    loop {
        let (body, whole) = body::buffered(input.filled(), head.head_len, framing);
        if whole || (at_least > 0 && body.len() >= at_least) || input.len() >= most {
            return true;
        }
        let remaining = deadline.saturating_duration_since(clock::now_std());
        let limit = s.server.map_or(remaining, |server| server.min(remaining));
        match input.read_more_up_to(server, Some(limit), most).await {
            Ok(_) => {}
            Err(ReadError::Timeout) => return false,
            Err(_) => return true,
        }
    }
}

/// `option checkcache` refuses a response a shared cache could keep with the server's cookie,
/// as an `http-response deny` would: the backend's (or else the frontend's) 502 page, counted
/// as a denied response, and an alert on standard error and in the log (the frontend's,
/// where HAProxy uses the backend's: Sluice's backends log through their frontends).
///
/// HAProxy 2.6 sends its `200 OK` page here instead, contrary to its manual; Sluice follows
/// the manual.
fn refuse_cacheable_cookie<'p>(
    ctx: &Context<'p>,
    server: &Server,
    request: KeptRequest<'_>,
) -> (std::borrow::Cow<'p, [u8]>, u16, Cause) {
    sluice_runtime::proxy::count_denied_response(ctx.scope.front(), ctx.backend, Some(server));
    let alert = format!(
        "Blocking cacheable cookie in response from instance {}, server {}.",
        ctx.backend.name(),
        server.name()
    );
    ctx.frontend.log_alert(&alert, ctx.process.global.quiet);
    let page = ctx.settings.server_error(502, &kept_view(ctx, request));
    (ctx.after(page), 502, Cause::Proxy)
}

async fn read_response_head<R: tokio::io::AsyncRead + Unpin>(
    server: &mut R,
    input: &mut InBuf,
    s: &HttpSettings<'_>,
    got_anything: &mut bool,
) -> Result<ResponseHead, ResponseFailure> {
    loop {
        if !input.is_empty() {
            match parse_response(input.filled(), &s.response_limits) {
                Ok(Parse::Complete(head)) => return Ok(head),
                Ok(Parse::Partial) => {}
                Err(_) => return Err(ResponseFailure::Status(502)),
            }
        }
        match input.read_more(server, s.server).await {
            Ok(_) => *got_anything = true,
            Err(ReadError::Timeout) => return Err(ResponseFailure::Status(504)),
            Err(ReadError::Closed | ReadError::Io(_)) if !*got_anything => {
                return Err(ResponseFailure::ClosedBeforeAnswer);
            }
            Err(_) => return Err(ResponseFailure::Status(502)),
        }
    }
}

/// Counts bytes on every level that reports them (`bin`/`bout` in `show stat`: the frontend,
/// the backend, the server when one was chosen) and in the stream's log record.
fn count_bytes(
    ctx: &Situation<'_>,
    server: Option<&Server>,
    facts: &mut Facts<'_>,
    (up, down): (u64, u64),
) {
    facts.bytes_up += up;
    facts.bytes_down += down;
    // What `option contstats` counted as it moved is not counted again.
    let (live_up, live_down) = ctx.live_counted.take();
    let (up, down) = (up.saturating_sub(live_up), down.saturating_sub(live_down));
    let server = server.map(|s| &s.traffic);
    let listener = ctx.scope.vars.listener().map(|l| &l.traffic);
    for traffic in [
        Some(&ctx.frontend.traffic),
        listener,
        Some(&ctx.backend.traffic),
        server,
    ]
    .into_iter()
    .flatten()
    {
        traffic.bytes_in.add(up);
        traffic.bytes_out.add(down);
    }
    ctx.scope.vars.trackers.bytes(up, down);
}

/// A failed write to the client ends the stream on the client's side.
fn client_write_failure(err: BodyError) -> ResponseFailure {
    ResponseFailure::Broken(
        match err {
            BodyError::WriteTimeout => Cause::ClientTimeout,
            _ => Cause::ClientAbort,
        },
        0,
    )
}
