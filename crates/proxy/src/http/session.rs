//! The client side of an HTTP session: read a request head, check it, hand it to
//! [`super::exchange`], and go on while both ends keep the connection alive.
//!
//! Waiting for a head is bounded by the timeouts of configuration.txt §4.2: `timeout
//! http-request` for the whole head once it has started (and for the first request from the
//! accept), `timeout http-keep-alive` for the next request on an idle kept-alive connection,
//! and `timeout client` between bytes when those are not set. A request that does not arrive
//! whole in time is answered with 408, one the client gave up on (closing its side) with 400,
//! even on a connection that sent nothing, as HAProxy does unless `option
//! http-ignore-probes`; a kept-alive connection's idle wait ends without a word. A malformed
//! head gets the status its error names (400, 414, 431, 501, 505), and the connection is then
//! closed: after a bad message, the framing of the rest is unknown.

use super::buffer::{InBuf, ReadError};
use super::exchange::{self, Attached, Next};
use super::invalid;
use super::rules::{self, BodyWait, RequestVerdict, Scope};
use super::settings::{BufferSizes, HttpSettings};
use crate::park::{self, Parking};
use crate::report::report;
use crate::stream_context::StreamView;
use crate::vars::Inspected;
use sluice_config::http_options::HttpConnMode;
use sluice_config::rules::{NameMatch, StreamTimeout};
use sluice_http::encode::connection_tokens;
use sluice_http::framing::{BodyFraming, http10_body_on_bodyless_method, request_framing};
use sluice_http::head::{MessageHead, Parse, RequestHead, Version, header_values, parse_request};
use sluice_net::splice::SpliceEnd;
use sluice_net::stream::Stream;
use sluice_runtime::clock;
use sluice_runtime::record::{Cause, Counts, Phase, ServerEnds, StreamRecord, Termination, Timers};
use std::borrow::Cow;
use std::cell::Cell;
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long an error answer may take to write when `timeout client` is not set.
const ANSWER_WRITE_LIMIT: Duration = Duration::from_secs(5);

/// How long, and how many bytes, to drain from a client after an error answer.
const LINGER_LIMIT: Duration = Duration::from_secs(1);
const LINGER_MAX_BYTES: usize = 64 * 1024;

/// Why no request will be read.
enum HeadEnd {
    /// Close without a word: a kept-alive connection's client left, or its wait expired.
    Quiet,
    /// Answer with this status, log it with this cause, then close: the status of a
    /// malformed head (`PR`), 408 `cR` when a request was not complete in time, 400 `CR`
    /// when the client closed before it was (configuration.txt "option
    /// http-ignore-probes": HAProxy answers even a connection that sent nothing).
    Answer(u16, Cause),
}

/// Where [`run`] takes a client connection up. A reference to the parked wait, which the
/// woken session's task holds anyway: every future level this passes through keeps its
/// argument for the connection's whole life.
#[derive(Clone, Copy)]
pub enum Start<'p> {
    /// Just accepted (or switched from TCP): its first request is awaited.
    New,
    /// Woken from the parked wait for its next request ([`crate::park`]).
    Resumed(&'p Parking),
}

/// Serves one client connection of an HTTP frontend; `input` is empty, or holds the bytes a
/// TCP frontend inspected before `switch-mode http`. Returns when the connection closed, or
/// with the wait to hand to [`crate::park`] when it has been idle (before its first request
/// or between two) for [`park::PARK_AFTER`].
///
/// While a connection is idle between requests, only this future's small state remains: the
/// input buffer (holding no memory while empty) and the wait for the next request's first
/// bytes. The state of [`serve`], rules' settings and a kept server connection included, is
/// boxed and dropped while the client thinks, as HAProxy keeps only a small connection
/// context for an idle client.
// Not an `async fn`: it would keep a second copy of its arguments (see `accept::session`).
#[allow(clippy::manual_async_fn)]
pub fn run<'s>(
    scope: &'s Scope<'s>,
    client: &'s mut Stream,
    buffers: BufferSizes,
    mut input: InBuf,
    start: Start<'s>,
) -> impl std::future::Future<Output = Option<Parking>> + 's {
    // An `async move` block, not an `async fn`: see `accept::session`.
    async move {
        // A new connection waits for its first request here too, outside the boxed state, as
        // an idle kept-alive one waits for its next: a client that connects and says nothing
        // yet (a browser's preconnection, a slow client) holds no more than an idle one. For
        // the first request `timeout http-request` counts from the accept (`serve` goes on
        // from `waited_since`), and one that never starts is logged as the 408 `cR` HAProxy
        // logs for it (here, or by the parking lot if the connection was parked). The same
        // few variables serve both waits: this future is what every idle connection holds
        // until it is parked.
        let (mut waited_since, mut first, mut deadline) = match start {
            Start::New => {
                let settings = HttpSettings::new(scope.frontend, buffers);
                let (since, deadline) =
                    wait_from_now(sooner(settings.http_request, settings.client));
                (since, true, deadline)
            }
            Start::Resumed(parking) => (parking.since, parking.first, parking.deadline),
        };
        // Set if this thread turns out unable to park connections.
        let mut no_lot = false;
        loop {
            if input.is_empty() {
                // A connection still idle after `PARK_AFTER`, before its first request or
                // between two, leaves this task for the thread's parking lot, unless its
                // limit comes first.
                let limit = deadline.map(|at| at.saturating_duration_since(clock::now_std()));
                let parks = !no_lot && limit.is_none_or(|limit| limit > park::PARK_AFTER);
                let wait = if parks { Some(park::PARK_AFTER) } else { limit };
                let waited = match wait {
                    Some(wait) => clock::timeout(wait, first_bytes(client, &mut input))
                        .await
                        .ok(),
                    None => Some(first_bytes(client, &mut input).await),
                };
                match waited {
                    Some(Ok(())) => {}
                    // A stopping process closes its idle kept-alive connections, as
                    // HAProxy's does, unless `option idle-close-on-response` has them wait
                    // for their next request; one still to send its first request waits on.
                    None if !first
                        && scope.process.ends_kept_alive()
                        && !scope.frontend.plan.http.idle_close_on_response =>
                    {
                        return None;
                    }
                    None if parks && park::available(scope.process) => {
                        return Some(Parking {
                            since: waited_since,
                            deadline,
                            first,
                        });
                    }
                    // This thread cannot park connections: wait here for the rest.
                    None if parks => {
                        no_lot = true;
                        continue;
                    }
                    // A first request that never came is answered (boxed: this future is
                    // what every idle connection holds).
                    None if first => {
                        let end = (408, Cause::ClientTimeout);
                        Box::pin(turn_away(scope, client, buffers, &input, waited_since, end))
                            .await;
                        return None;
                    }
                    Some(Err(_)) if first => {
                        let end = (400, Cause::ClientAbort);
                        Box::pin(turn_away(scope, client, buffers, &input, waited_since, end))
                            .await;
                        return None;
                    }
                    // The client left, or `timeout http-keep-alive` passed: close without a
                    // word.
                    _ => return None,
                }
            }
            let serving = Box::pin(serve(
                scope,
                &mut *client,
                buffers,
                &mut input,
                (waited_since, first),
            ));
            (waited_since, deadline) = match serving.await {
                Served::Closed => return None,
                Served::Idle(since, deadline) => (since, deadline),
                Served::Tunnel(tunnel) => {
                    // The request's state is gone: the relay runs from the tunnel's own,
                    // boxed so that connections that never upgrade do not carry its size.
                    Box::pin(async move {
                        exchange::relay_tunnel(tunnel, client).await;
                        scope.vars.trackers.end_transaction();
                    })
                    .await;
                    return None;
                }
            };
            // Idle: the next request's wait counts from the end of the last answer in its
            // log, as it does when the request comes while `serve` still waits for it.
            first = false;
        }
    }
}

/// How [`serve`] left the connection.
enum Served<'s> {
    /// Closed.
    Closed,
    /// Waiting for its next request with nothing else to keep, since then, until then (if
    /// ever).
    Idle((std::time::Instant, SystemTime), Option<std::time::Instant>),
    /// Upgraded: the relay is still to run.
    Tunnel(Box<exchange::Tunnel<'s>>),
}

/// Serves requests on a client connection until it closes, waits idle for its next request
/// with nothing else to keep, or is upgraded to a tunnel. `waited_since` is when the wait for
/// the first request served here started (the accept, for a new connection); `first` says
/// whether that request is the connection's first.
// Not an `async fn`: it would keep a second copy of its arguments (see `accept::session`).
#[allow(clippy::manual_async_fn)]
fn serve<'x, 's: 'x>(
    scope: &'s Scope<'s>,
    client: &'x mut Stream,
    buffers: BufferSizes,
    input: &'x mut InBuf,
    (waited_since, mut first): ((std::time::Instant, SystemTime), bool),
) -> impl std::future::Future<Output = Served<'s>> + 'x {
    async move {
        // The first request's wait started in `run`; later ones here (pipelined requests,
        // or a connection kept with its private server connection) start when asked.
        let mut waited_since = Some(waited_since);
        let settings = HttpSettings::new(scope.frontend, buffers);
        let mut attached: Option<Attached> = None;
        let session = Session {
            settings: &settings,
            scope,
            buffers,
        };
        loop {
            // A kept-alive connection waiting for its next request, with no server connection
            // to keep for it, waits in `run` with none of this state, once it has waited
            // `STAY_AFTER_ANSWER` here.
            if !first && input.is_empty() && attached.is_none() {
                let limit = settings
                    .http_keep_alive
                    .or(settings.http_request)
                    .or(settings.client);
                let (since, deadline) = wait_from_now(limit);
                let stay = limit.map_or(STAY_AFTER_ANSWER, |limit| limit.min(STAY_AFTER_ANSWER));
                match clock::timeout(stay, first_bytes(client, input)).await {
                    // The next request started: its wait began with this one.
                    Ok(Ok(())) => waited_since = Some(since),
                    // The client left: close without a word, as `run` would.
                    Ok(Err(_)) => return Served::Closed,
                    Err(_) => return Served::Idle(since, deadline),
                }
            } else if !first && input.is_empty() {
                // A connection keeping its own server connection waits here for its next
                // request, for as long as its limit allows; a soft stop ends it as it ends
                // the idle connections waiting elsewhere.
                let limit = settings
                    .http_keep_alive
                    .or(settings.http_request)
                    .or(settings.client);
                let (since, _) = wait_from_now(limit);
                let next = async {
                    match limit {
                        Some(limit) => clock::timeout(limit, first_bytes(client, input)).await.ok(),
                        None => Some(first_bytes(client, input).await),
                    }
                };
                let stays = scope.frontend.plan.http.idle_close_on_response;
                let waited = tokio::select! {
                    biased;
                    waited = next => waited,
                    () = kept_alive_ends(scope.process), if !stays => None,
                };
                match waited {
                    Some(Ok(())) => waited_since = Some(since),
                    // The client left, the limit passed, or the process stops.
                    _ => return Served::Closed,
                }
            }
            let started = waited_since
                .take()
                .unwrap_or_else(|| (clock::now_std(), clock::wall_now()));
            let (head, framing) =
                match read_head(client, input, &settings, (first, started.0)).await {
                    Ok(read) => read,
                    Err(HeadEnd::Quiet) => break,
                    // Boxed: the answer's state is only needed on this rare path, not in that
                    // of every request.
                    Err(HeadEnd::Answer(status, cause)) => {
                        Box::pin(refuse(
                            scope,
                            &settings,
                            client,
                            input,
                            (first, started),
                            (status, cause),
                        ))
                        .await;
                        break;
                    }
                };
            // Not boxed on its own: this whole future is (`run` boxes it while the connection
            // is busy and drops it when it goes idle), so what a request needs while it is
            // handled (rules, the exchange with both bodies in flight) costs one allocation
            // per busy period, requests that follow within `STAY_AFTER_ANSWER` included, and
            // an idle connection holds none of it. Only a connection that keeps a private
            // server connection waits idle in here for longer, with this state.
            let request = (head, framing);
            let mut tunnel = None;
            let handled = session
                .handle(
                    client,
                    input,
                    (&mut attached, &mut tunnel),
                    first,
                    request,
                    started,
                )
                .await;
            if let Some(tunnel) = tunnel {
                return Served::Tunnel(tunnel);
            }
            // Counters tracked by this transaction's content and HTTP rules are let go, and
            // its rules' effects (`set-log-level`, `set-src`...) do not reach what comes
            // next (a refused next head is logged on its own terms).
            scope.vars.trackers.end_transaction();
            scope.vars.end_transaction();
            match handled {
                Next::KeepAlive => first = false,
                Next::Close | Next::CloseAfterAnswer | Next::Tunnel | Next::Drop => {
                    return Served::Closed;
                }
            }
        }
        Served::Closed
    }
}

/// What every request of a session shares.
struct Session<'x, 's> {
    settings: &'x HttpSettings<'s>,
    /// The session's scope, for as long as the connection lives: an exchange hands what
    /// outlives this request's state (an upgraded connection's relay) back up to `run`.
    scope: &'s Scope<'s>,
    buffers: BufferSizes,
}

impl<'s> Session<'_, 's> {
    /// Sends an answer of the proxy's own (or the cache's, naming `cached` the backend it
    /// answered for), logs and counts it, and says whether the connection goes on.
    async fn send_answer(
        &self,
        client: &mut Stream,
        input: &mut InBuf,
        (head, framing): (&RequestHead, BodyFraming),
        reply: super::rules::Answer<'_>,
        started: (std::time::Instant, SystemTime),
        cached: Option<&str>,
    ) -> Next {
        let (settings, scope) = (self.settings, self.scope);
        let request_start = started.0;
        if let Some(delay) = reply.tarpit {
            // `http-request tarpit`: the request is held, then answered as if
            // nothing special had happened (configuration.txt "tarpit").
            tokio::time::sleep(delay).await;
        }
        // A stopping process ends kept-alive connections after their answer.
        let keep_alive = !reply.close
            && !self.scope.process.ends_kept_alive()
            && can_answer_and_keep_alive(
                framing,
                connection_tokens(input.filled(), head).persistent(head.version),
                settings,
            );
        let mut reply = reply;
        if !keep_alive {
            reply.bytes = with_connection(reply.bytes, "close");
        } else if head.version == Version::Http10 {
            reply.bytes = with_connection(reply.bytes, "keep-alive");
        }
        // configuration.txt §8.5: a denied request is "PR", one the proxy answered
        // itself (return, redirect, monitor) "LR".
        let cause = if reply.denied || reply.close {
            Cause::Proxy
        } else {
            Cause::Local
        };
        let head_took = clock::since(request_start);
        let line = request_line_of(input.filled());
        let answered = Answered {
            status: Some(reply.status),
            bytes: reply.bytes.len(),
            received: head.head_len,
            cause,
            // configuration.txt §8.5: "PT" for a tarpitted request.
            phase: if reply.tarpit.is_some() {
                Phase::Tarpit
            } else {
                Phase::Request
            },
            request: Some((line, head_took)),
            head: Some((input.filled(), head)),
            cached,
        };
        // The log (which may read the stick counters) and the end of the transaction
        // for the counters come before the client hears the answer, so what the
        // client does next, or asks the CLI, sees the entry released.
        log_answer(scope, started, answered);
        if let Some(backend) = reply.backend {
            let bytes = (head.head_len as u64, reply.bytes.len() as u64);
            sluice_runtime::proxy::count_backend_answer(backend, reply.status, bytes);
        }
        scope.vars.trackers.end_transaction();
        let sent = clock::timeout(
            settings.client.unwrap_or(ANSWER_WRITE_LIMIT),
            client.write_all(&reply.bytes),
        )
        .await;
        if !matches!(sent, Ok(Ok(()))) {
            return Next::Close;
        }
        if keep_alive {
            input.consume(head.head_len);
            return Next::KeepAlive;
        }
        // A request read whole with nothing after it leaves nothing to drain: the
        // connection (and the session's stick counters) ends at once, as HAProxy's.
        let pending = framing != BodyFraming::None || input.len() > head.head_len;
        close_after_exchange(client, settings.client, pending).await;
        Next::Close
    }

    /// Handles one request whose head was read: rules, then the proxy's own answer or the
    /// exchange with a server. Says whether the client connection carries another request
    /// (it was already closed gracefully otherwise), or was upgraded: then the tunnel to
    /// relay is left in `tunnel`.
    async fn handle(
        &self,
        client: &mut Stream,
        input: &mut InBuf,
        (attached, tunnel): (
            &mut Option<Attached>,
            &mut Option<Box<exchange::Tunnel<'s>>>,
        ),
        first: bool,
        (mut head, framing): (RequestHead, BodyFraming),
        started: (std::time::Instant, SystemTime),
    ) -> Next {
        let (settings, scope) = (self.settings, self.scope);
        let (process, frontend) = (scope.process, scope.frontend);
        let (request_start, request_start_at) = started;
        frontend.stats.request_rate.incr();
        frontend.stats.requests_read.incr();
        frontend.stats.requests.incr();
        // The first request of a connection a TCP frontend inspected continues its stream.
        if !(first && scope.vars.inspected() != Inspected::None) {
            scope.vars.end_transaction();
        }
        scope.vars.set_first_request(first);
        scope.vars.trackers.http_request();
        // `option http-buffer-request`: the rules see the whole body, or as much of it as the
        // buffer takes before the rewrite reserve; `timeout http-request` covers it too.
        // (Boxed: a future in every request's state for a rarely set option.)
        if settings.buffer_request {
            let wait = BodyNeed {
                deadline: settings.http_request.map(|t| request_start + t),
                at_least: 0,
            };
            let message = (&mut *input, &mut head, framing);
            if !Box::pin(await_body(scope, settings, client, message, wait, started)).await {
                return Next::Close;
            }
        }
        // `unique-id-format`: the id is made once per request, before any rule reads it.
        if let Some(fmt) = &frontend.plan.log.unique_id_format {
            let view = StreamView {
                request: Some((input.filled(), &head)),
                started_at: Some(request_start_at),
                ..StreamView::new(process, frontend, *scope.endpoints, scope.vars)
            };
            let mut id = Vec::with_capacity(64);
            fmt.render(&view, &mut id);
            scope.vars.set_unique_id(id);
        }
        let limits = (&settings.request_limits, settings.bufsize);
        let mut resume = None;
        let backend = loop {
            let verdict = rules::process_request(scope, input, &mut head, limits, resume);
            scope.vars.apply_client_marks(client);
            // `early-hint`: the 103 answers leave before anything else, whatever the rules
            // then decided, as HAProxy sends them when its rules build them.
            if let Some(hints) = scope.vars.take_early_hints()
                && !crate::forward::write_within(client, &hints, settings.client).await
            {
                return Next::Close;
            }
            break match verdict {
                // `http-request wait-for-body`: the wait, then the rules after it.
                RequestVerdict::WaitForBody(wait, rest) => {
                    let wait = match wait {
                        BodyWait::Action { time, at_least } => BodyNeed {
                            deadline: Some(clock::now_std() + time),
                            at_least: usize::try_from(at_least).unwrap_or(usize::MAX),
                        },
                        BodyWait::BackendOption { http_request } => BodyNeed {
                            deadline: http_request.map(|t| request_start + t),
                            at_least: 0,
                        },
                    };
                    let message = (&mut *input, &mut head, framing);
                    let waited = await_body(scope, settings, client, message, wait, started);
                    if !Box::pin(waited).await {
                        return Next::Close;
                    }
                    resume = Some(rest);
                    continue;
                }
                RequestVerdict::Forward(backend) => backend,
                RequestVerdict::Reject => {
                    log_unanswered(scope, started, input.filled(), &head);
                    // HAProxy kills the connection: a reset, whatever is still unsent.
                    let _ = client.set_nolinger();
                    return Next::Close;
                }
                RequestVerdict::Drop => {
                    log_unanswered(scope, started, input.filled(), &head);
                    // Should the socket refuse the options, it still closes, only less quietly.
                    let _ = client.abort_silently();
                    return Next::Close;
                }
                RequestVerdict::Stats(page) => {
                    // The frontend's own page: an intercepted request, as HAProxy counts it.
                    frontend.intercepted.incr();
                    self.stats_page(client, input, &head, page, frontend.name(), started)
                        .await;
                    return Next::Close;
                }
                RequestVerdict::Answer(reply) => {
                    return self
                        .send_answer(client, input, (&head, framing), reply, started, None)
                        .await;
                }
            };
        };
        // `cache-use` found a fresh copy: it answers, through the backend's response rules.
        if let Some(found) = super::cache::take_hit(scope)
            && let Some(reply) =
                super::cache::answer(scope, settings, backend, (input.filled(), &head), &found)
        {
            let cached = Some(backend.name());
            return self
                .send_answer(client, input, (&head, framing), reply, started, cached)
                .await;
        }
        // A backend's statistics page, after the backend's own rules (a frontend's was served
        // before choosing a backend).
        if let Some(page) = &backend.plan.rules.stats_page
            && super::stats_page::wants(page, input.filled(), &head)
        {
            let request = (input.filled(), &head);
            if let RequestVerdict::Answer(reply) =
                rules::stats_verdict(scope, Some(backend), page, request)
            {
                return self
                    .send_answer(client, input, (&head, framing), reply, started, None)
                    .await;
            }
            self.stats_page(client, input, &head, page, backend.name(), started)
                .await;
            return Next::Close;
        }
        // The settings combine the frontend with the backend the request goes to.
        let chosen;
        let settings = if frontend
            .backend
            .as_deref()
            .is_some_and(|default| std::ptr::eq(default, backend))
        {
            settings
        } else {
            chosen = HttpSettings::with_backend(frontend, Some(backend), self.buffers);
            &chosen
        };
        // `set-timeout`: what the backend's rules (or a `listen` section's) set for this
        // request.
        let mut exchange_settings = settings.clone();
        let uid = backend.plan.id.uid;
        if let Some(time) = scope.vars.timeout(StreamTimeout::Server, uid) {
            exchange_settings.server = Some(time);
        }
        if let Some(time) = scope.vars.timeout(StreamTimeout::Tunnel, uid) {
            exchange_settings.tunnel = Some(time);
        }
        let ctx = exchange::Context {
            situation: exchange::Situation {
                process,
                request_start,
                request_start_at,
                head_at: clock::now_std(),
                frontend,
                backend,
                endpoints: scope.addresses(),
                first,
                scope,
                live_counted: Cell::new((0, 0)),
            },
            settings: exchange_settings,
        };
        let next = exchange::run(&ctx, client, input, (head, framing), (attached, tunnel)).await;
        match next {
            Next::Close => close_after_exchange(client, settings.client, !input.is_empty()).await,
            // The client may still be sending the request the proxy answered.
            Next::CloseAfterAnswer => close_gracefully(client, settings.client).await,
            Next::KeepAlive | Next::Tunnel | Next::Drop => {}
        }
        next
    }
}

impl<'s> Session<'_, 's> {
    /// Serves the statistics page of proxy `own`, logs the answer like the proxy's other own
    /// answers, then closes.
    async fn stats_page(
        &self,
        client: &mut Stream,
        input: &mut InBuf,
        head: &RequestHead,
        page: &sluice_config::stats_page::StatsPage,
        own: &str,
        started: (std::time::Instant, SystemTime),
    ) {
        let request = (&mut *input, head);
        let (status, bytes, sent) =
            super::stats_page::serve(self.scope, client, request, page, own, self.settings.client)
                .await;
        let head_took = clock::since(started.0);
        let answered = Answered {
            status: Some(status),
            bytes,
            received: head.head_len,
            cause: Cause::Local,
            phase: Phase::Request,
            request: Some((request_line_of(input.filled()), head_took)),
            head: Some((input.filled(), head)),
            cached: None,
        };
        log_answer(self.scope, started, answered);
        if sent {
            close_gracefully(client, self.settings.client).await;
        }
    }
}

/// How much of a request body a wait wants, and until when.
#[derive(Clone, Copy)]
struct BodyNeed {
    /// When the wait fails (`timeout http-request` from the request's start for `option
    /// http-buffer-request`, the action's time for `wait-for-body`).
    deadline: Option<std::time::Instant>,
    /// Enough body bytes to go on (`wait-for-body ... at-least`); 0 for the whole body.
    at_least: usize,
}

/// Whether the client waits for a `100 Continue` before it sends its body (an HTTP/1.1
/// request's `Expect: 100-continue`; HTTP/1.0 knows no such wait).
pub(super) fn expects_continue(buf: &[u8], head: &RequestHead) -> bool {
    head.version == Version::Http11
        && header_values(buf, &head.headers, "expect")
            .any(|v| v.eq_ignore_ascii_case(b"100-continue"))
}

/// Reads the request body into `input` until it is whole, `need.at_least` bytes of it came,
/// or `input` holds the most a head may (`tune.bufsize` less `tune.maxrewrite`, the room
/// rewrites need), or the client stops sending (the exchange then finds out); false if the
/// deadline passed first. A client that expects `100-continue` is told to go on here, and its
/// `Expect` field is dropped, as HAProxy does, since it was answered.
async fn wait_for_body(
    client: &mut Stream,
    input: &mut InBuf,
    head: &mut RequestHead,
    framing: BodyFraming,
    settings: &HttpSettings<'_>,
    need: BodyNeed,
) -> bool {
    let most = settings.request_limits.max_head;
    let complete = |input: &InBuf, head: &RequestHead| {
        let (body, whole) = super::body::buffered(input.filled(), head.head_len, framing);
        whole || (need.at_least > 0 && body.len() >= need.at_least) || input.len() >= most
    };
    if complete(input, head) {
        return true;
    }
    if expects_continue(input.filled(), head) {
        let expect = NameMatch::Str("expect".to_owned());
        let dropped = super::rewrite::edit_request(
            input,
            head,
            &super::rewrite::FieldEdit::Delete(&expect),
            &settings.request_limits.for_rewrites(settings.bufsize),
        );
        if dropped.is_err()
            || client
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await
                .is_err()
        {
            return true;
        }
    }
    while !complete(input, head) {
        let remaining = need
            .deadline
            .map(|d| d.saturating_duration_since(clock::now_std()));
        match input
            .read_more_up_to(client, sooner(remaining, settings.client), most)
            .await
        {
            Ok(_) => {}
            Err(ReadError::Timeout) => return false,
            Err(_) => return true,
        }
    }
    true
}

/// Waits for the request body as `need` says (`option http-buffer-request`,
/// `wait-for-body`); false, once the client was answered 408, if it did not come in time.
async fn await_body(
    scope: &Scope<'_>,
    settings: &HttpSettings<'_>,
    client: &mut Stream,
    (input, head, framing): (&mut InBuf, &mut RequestHead, BodyFraming),
    need: BodyNeed,
    started: (std::time::Instant, SystemTime),
) -> bool {
    if wait_for_body(client, input, head, framing, settings, need).await {
        return true;
    }
    body_timed_out(scope, settings, client, input, head, started).await;
    false
}

/// Answers a request whose body did not come in time (the wait of `option
/// http-buffer-request` or `wait-for-body`): a 408, counted and logged, then the connection
/// ends.
async fn body_timed_out(
    scope: &Scope<'_>,
    settings: &HttpSettings<'_>,
    client: &mut Stream,
    input: &InBuf,
    head: &RequestHead,
    started: (std::time::Instant, SystemTime),
) {
    let page = settings.request_error(408, &scope.view(None, Some((input.filled(), head))));
    let page = rules::finish_page(scope, None, page);
    let sent = answer(client, &page, settings.client).await;
    sluice_runtime::proxy::count_request_error(scope.front());
    let answered = Answered {
        status: Some(408),
        bytes: page.len(),
        received: input.len(),
        cause: Cause::ClientTimeout,
        phase: Phase::Request,
        request: Some((request_line_of(input.filled()), clock::since(started.0))),
        head: Some((input.filled(), head)),
        cached: None,
    };
    log_answer(scope, started, answered);
    if sent {
        close_gracefully(client, settings.client).await;
    }
}

/// `answer` with a `connection: <value>` field after its status line, unless it has a
/// Connection field already: an answer after which the connection closes says so (RFC 9112
/// §9.6), as HAProxy's redirections and returns do, and one that keeps an HTTP/1.0 client's
/// connection says that (an HTTP/1.0 client assumes a close otherwise).
pub(super) fn with_connection<'a>(answer: Cow<'a, [u8]>, value: &str) -> Cow<'a, [u8]> {
    let limits = sluice_http::head::Limits::default();
    let Ok(Parse::Complete(head)) = sluice_http::head::parse_response(&answer, &limits) else {
        return answer;
    };
    if head.has_header(&answer, "connection") {
        return answer;
    }
    let line_end = answer.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut with = Vec::with_capacity(answer.len() + 14 + value.len());
    with.extend_from_slice(&answer[..line_end]);
    with.extend_from_slice(b"connection: ");
    with.extend_from_slice(value.as_bytes());
    with.extend_from_slice(b"\r\n");
    with.extend_from_slice(&answer[line_end..]);
    Cow::Owned(with)
}

/// An answer of the proxy's own (a rule's, an error page after a 503 or 504) may keep the
/// connection when the request has no body to skip (`framing`) and both the client
/// (`client_keeps`) and the configuration allow keep-alive.
pub(super) fn can_answer_and_keep_alive(
    framing: BodyFraming,
    client_keeps: bool,
    settings: &HttpSettings<'_>,
) -> bool {
    framing == BodyFraming::None
        && client_keeps
        // `http-server-close` closes the server side only: the client keeps its connection.
        && settings.conn_mode != HttpConnMode::Close
}

/// The request line at the start of `buf`.
fn request_line_of(buf: &[u8]) -> &[u8] {
    let end = buf
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(buf.len());
    &buf[..end]
}

/// What the log says of a request the proxy answered itself (or closed unanswered: no
/// status).
struct Answered<'r> {
    status: Option<u16>,
    bytes: usize,
    /// Bytes of the request received (`option dontlognull` skips a request of none).
    received: usize,
    cause: Cause,
    phase: Phase,
    /// The request line and the time its head took, when there was a head.
    request: Option<(&'r [u8], std::time::Duration)>,
    /// The request head, for log formats that read it.
    head: Option<(&'r [u8], &'r RequestHead)>,
    /// Answered from a cache for this backend: the log names the server `<CACHE>`.
    cached: Option<&'r str>,
}

impl Answered<'static> {
    /// The answer to a request whose head never arrived whole, of which `received` bytes
    /// came. HAProxy's multiplexer sends it outside any stream, and its log line counts none
    /// of the page's bytes (`400 0`, `408 0`).
    fn without_head(status: u16, cause: Cause, received: usize) -> Self {
        Answered {
            status: Some(status),
            bytes: 0,
            received,
            cause,
            phase: Phase::Request,
            request: None,
            head: None,
            cached: None,
        }
    }
}

/// Reports a request the proxy answered itself (error, rule, monitor) to the logs.
fn log_answer(
    scope: &Scope<'_>,
    (start, start_at): (std::time::Instant, SystemTime),
    answered: Answered<'_>,
) {
    let Answered {
        status,
        bytes,
        received,
        cause,
        phase,
        request,
        head,
        cached,
    } = answered;
    if let Some(status) = status {
        scope.frontend.stats.count_response(status);
    }
    // The request read and the answer are the frontend's traffic, as HAProxy counts them.
    let listener = scope.vars.listener().map(|l| &l.traffic);
    for traffic in std::iter::once(&scope.frontend.traffic).chain(listener) {
        traffic.bytes_in.add(received as u64);
        traffic.bytes_out.add(bytes as u64);
    }
    scope.vars.trackers.bytes(received as u64, bytes as u64);
    // A request that could not be parsed has no captures (HAProxy prints none).
    let captures = scope.vars.captures();
    let mut record = StreamRecord {
        start: start_at,
        client: scope.addresses().client,
        frontend: scope.frontend.name(),
        backend: cached,
        server: cached.map(|_| "<CACHE>"),
        timers: Timers {
            // An unanswered request shows no head time in HAProxy's log (-1).
            request: status.and(request.map(|(_, took)| took)),
            // The cache answers at once, as a server would that took no time: HAProxy
            // logs `0` for its queue, connect and response times.
            queue: cached.map(|_| Duration::ZERO),
            connect: cached.map(|_| Duration::ZERO),
            response: cached.map(|_| Duration::ZERO),
            total: clock::since(start),
        },
        status,
        bytes_to_client: bytes as u64,
        bytes_from_client: received as u64,
        termination: Termination { cause, phase },
        retries: 0,
        request_line: request.map(|(line, _)| scope.process.global.logged_request_line(line)),
        response_version: None,
        counts: Counts::default(),
        captures: request.is_some().then_some(&*captures),
        early: false,
        server_ends: ServerEnds::default(),
        http: true,
        reused: false,
        compression: None,
    };
    let view = StreamView {
        request: head,
        ..StreamView::new(scope.process, scope.frontend, *scope.endpoints, scope.vars)
    };
    report(
        scope.process,
        scope.frontend,
        None,
        None,
        &mut record,
        true,
        view,
    );
}

/// Reports a request the rules closed without an answer (`reject`, `silent-drop`), as
/// HAProxy logs it: no status (`-1`), no head time, `PR`.
fn log_unanswered(
    scope: &Scope<'_>,
    started: (std::time::Instant, SystemTime),
    buf: &[u8],
    head: &RequestHead,
) {
    let unanswered = Answered {
        status: None,
        bytes: 0,
        received: head.head_len,
        cause: Cause::Proxy,
        phase: Phase::Request,
        request: Some((request_line_of(buf), Duration::ZERO)),
        head: Some((buf, head)),
        cached: None,
    };
    log_answer(scope, started, unanswered);
}

/// Reads until `input` starts with a complete request head.
async fn read_head(
    client: &mut Stream,
    input: &mut InBuf,
    settings: &HttpSettings<'_>,
    (first, accepted): (bool, std::time::Instant),
) -> Result<(RequestHead, BodyFraming), HeadEnd> {
    // The whole head must arrive within `timeout http-request`, counted from the accept for a
    // first request (`accepted`) and from its first byte for the next ones.
    let mut deadline = if first {
        settings
            .http_request
            .map(|t| tokio::time::Instant::from_std(accepted) + t)
    } else if !input.is_empty() {
        settings.http_request.map(|t| clock::now() + t)
    } else {
        None
    };
    loop {
        if !input.is_empty() {
            match parse_request(input.filled(), &settings.request_limits) {
                // The body's framing is decided here, from the head as the client sent it:
                // rules may rewrite fields later, but never how the body is delimited
                // (request smuggling). An ambiguous message is refused before any rule.
                Ok(Parse::Complete(head)) => {
                    let framing = request_framing(input.filled(), &head);
                    if !settings.any_method_payload
                        && http10_body_on_bodyless_method(input.filled(), &head, &framing)
                    {
                        return Err(HeadEnd::Answer(413, Cause::Proxy));
                    }
                    return match framing {
                        // A chunked body already malformed in what came with the head is
                        // refused with it, before any rule or server, as HAProxy's parser
                        // refuses it while it reads the request (no server connection is
                        // opened only to be closed unused).
                        Ok(BodyFraming::Chunked)
                            if !super::body::chunks_so_far_valid(
                                input.filled().get(head.head_len..).unwrap_or(&[]),
                            ) =>
                        {
                            Err(HeadEnd::Answer(400, Cause::Proxy))
                        }
                        Ok(framing) => Ok((head, framing)),
                        Err(err) => Err(HeadEnd::Answer(err.status(), Cause::Proxy)),
                    };
                }
                Ok(Parse::Partial) => {}
                Err(err) => return Err(HeadEnd::Answer(err.status(), Cause::Proxy)),
            }
        }
        let idle_keepalive = !first && input.is_empty() && deadline.is_none();
        let limit = if idle_keepalive {
            settings
                .http_keep_alive
                .or(settings.http_request)
                .or(settings.client)
        } else {
            let remaining = deadline.map(|d| d.saturating_duration_since(clock::now()));
            sooner(remaining, settings.client)
        };
        if input.is_empty() {
            // Wait for the client's first bytes without holding a buffer (HAProxy keeps no
            // buffer on an idle connection either): a buffer is taken only to try a read
            // when the socket says it is readable, and given back if that was stale (a new
            // socket is reported readable before anything arrived).
            let waited = match limit {
                Some(limit) => clock::timeout(limit, first_bytes(client, input)).await.ok(),
                None => Some(first_bytes(client, input).await),
            };
            match waited {
                Some(Ok(())) => {
                    if deadline.is_none() {
                        deadline = settings.http_request.map(|t| clock::now() + t);
                    }
                    continue;
                }
                Some(Err(_)) if first => return Err(HeadEnd::Answer(400, Cause::ClientAbort)),
                Some(Err(_)) => return Err(HeadEnd::Quiet),
                None if idle_keepalive => return Err(HeadEnd::Quiet),
                None => return Err(HeadEnd::Answer(408, Cause::ClientTimeout)),
            }
        }
        match input.read_more(client, limit).await {
            Ok(_) => {
                if deadline.is_none() {
                    deadline = settings.http_request.map(|t| clock::now() + t);
                }
            }
            Err(ReadError::Timeout) if idle_keepalive => return Err(HeadEnd::Quiet),
            Err(ReadError::Timeout) => return Err(HeadEnd::Answer(408, Cause::ClientTimeout)),
            // The parser refuses heads larger than its limit before the buffer fills; a full
            // buffer can only mean an oversized head.
            Err(ReadError::Full) => return Err(HeadEnd::Answer(431, Cause::Proxy)),
            // Only reached with part of a head read (the first bytes come through
            // `first_bytes`).
            Err(ReadError::Closed | ReadError::Io(_)) => {
                return Err(HeadEnd::Answer(400, Cause::ClientAbort));
            }
        }
    }
}

/// A connection's first request that did not come (408 `cR`: its wait ended; 400 `CR`: the
/// client closed) while it waited in [`run`], or parked: answered as [`read_head`]'s other
/// ends are.
async fn turn_away(
    scope: &Scope<'_>,
    client: &mut Stream,
    buffers: BufferSizes,
    input: &InBuf,
    waited_since: (std::time::Instant, SystemTime),
    end: (u16, Cause),
) {
    let settings = HttpSettings::new(scope.frontend, buffers);
    refuse(scope, &settings, client, input, (true, waited_since), end).await;
}

/// Ends a session whose request head will not be read whole, with `status` logged with
/// `cause`: the error page, counted and logged, then a graceful close. A first request of
/// which nothing came is let go without a word, a log or a count under `option
/// http-ignore-probes` (browsers' preconnections).
async fn refuse(
    scope: &Scope<'_>,
    settings: &HttpSettings<'_>,
    client: &mut Stream,
    input: &InBuf,
    (first, started): (bool, (std::time::Instant, SystemTime)),
    (status, cause): (u16, Cause),
) {
    let frontend = scope.frontend;
    if first && input.is_empty() && frontend.plan.log.ignore_probes {
        return;
    }
    sluice_runtime::proxy::count_request_error(scope.front());
    frontend.stats.requests.incr();
    // An invalid or late request is an error of the client's (`http_err_cnt`).
    scope.vars.trackers.http_request();
    scope.vars.trackers.http_error();
    // Only a message the proxy refused is an invalid one (`show errors`); one that was late
    // or cut short is not.
    if cause == Cause::Proxy {
        invalid::request(
            scope.process,
            frontend,
            scope.endpoints.client,
            (input.filled(), settings.bufsize),
            &settings.request_limits,
            None,
        );
    }
    // No request head to read: a page with a format sees the connection only.
    let page = settings.request_error(status, &scope.view(None, None));
    let page = rules::finish_page(scope, None, page);
    let sent = answer(client, &page, settings.client).await;
    let answered = Answered::without_head(status, cause, input.filled().len());
    log_answer(scope, started, answered);
    if sent {
        close_gracefully(client, settings.client).await;
    }
}

/// How long a kept-alive connection waits for its next request with the state of the last
/// one (a few kilobytes: rules' settings, the exchange) before giving it up to wait in `run`
/// with almost nothing. A client that sends its next request at once, as a busy one does,
/// then costs no new state per request (allocation, settings, a pass through `run`); one
/// that pauses holds that state for this long only.
const STAY_AFTER_ANSWER: Duration = Duration::from_millis(10);

/// The shorter of two time limits, either of which may be unset.
fn sooner(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A wait for a request starting now, for at most `limit`: its start (monotonic, and the wall
/// clock for the log) and its deadline.
fn wait_from_now(
    limit: Option<Duration>,
) -> ((std::time::Instant, SystemTime), Option<std::time::Instant>) {
    let now = clock::now_std();
    ((now, clock::wall_now()), limit.map(|limit| now + limit))
}

/// Completes when a soft stop ends the kept-alive connections (`Process::ends_kept_alive`:
/// at once, or over `close-spread-time`; never under `infinite`).
async fn kept_alive_ends(process: &sluice_runtime::process::Process) {
    use sluice_config::global::CloseSpread;
    use sluice_runtime::process::ListenState;
    let mut state = process.watch_listen_state();
    if state
        .wait_for(|s| *s == ListenState::Stopped)
        .await
        .is_err()
    {
        return std::future::pending().await;
    }
    loop {
        if process.ends_kept_alive() {
            return;
        }
        match process.global.close_spread_time {
            Some(CloseSpread::Window(window)) => {
                tokio::time::sleep((window / 16).max(Duration::from_millis(10))).await;
            }
            _ => return std::future::pending().await,
        }
    }
}

/// Waits for the client's first bytes and reads them into the (empty) `input`; an error at
/// the end of stream.
///
/// Polled by hand rather than through `readable().await`: the wait sits in every idle
/// connection for as long as it is idle, and this way it holds two references, where the
/// awaited readiness future holds a waiter of its own (about 200 bytes more per connection).
fn first_bytes<'a>(
    client: &'a Stream,
    input: &'a mut InBuf,
) -> impl std::future::Future<Output = std::io::Result<()>> + 'a {
    // The previous request's buffer, emptied, goes back to the pool for the wait.
    input.release_if_empty();
    // A new connection is not in the event loop yet, and its request is most often there
    // already: a read before the wait may spare it the registration.
    let mut read_first = !client.is_registered();
    std::future::poll_fn(move |cx| {
        loop {
            if !std::mem::take(&mut read_first) {
                std::task::ready!(client.poll_read_ready(cx))?;
            }
            // A read that would block clears the readiness, so the next poll waits.
            match input.try_fill(client) {
                Ok(0) => {
                    return std::task::Poll::Ready(Err(std::io::ErrorKind::UnexpectedEof.into()));
                }
                Ok(_) => return std::task::Poll::Ready(Ok(())),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return std::task::Poll::Ready(Err(e)),
            }
        }
    })
}

/// Sends an answer of the proxy's own (an error page, built-in or from `errorfile`, where an
/// empty page sends nothing; a redirection; the statistics page) as the connection's last
/// bytes: true when it was sent whole. The caller counts and logs it, then closes with
/// [`close_gracefully`]: a client that sees its connection end finds its answer in the
/// statistics, as HAProxy counts a reply when it produces it. A page taken whole at once waits
/// in the socket for that end of stream and leaves with it, in one segment
/// (`SocketRef::send_before_end`).
#[must_use = "a sent answer is followed by close_gracefully"]
pub async fn answer(client: &mut Stream, page: &[u8], limit: Option<Duration>) -> bool {
    let limit = limit.unwrap_or(ANSWER_WRITE_LIMIT);
    let Ok(at_once) = client.socket().send_before_end(page) else {
        return false;
    };
    let sent = clock::timeout(limit, client.write_all(&page[at_once..])).await;
    matches!(sent, Ok(Ok(())))
}

/// Sends an answer of the proxy's own after which the connection goes on (`page` without its
/// `Connection` field, which frames itself: see `rules::has_length`); the bytes sent, or
/// `None` if that failed or took too long.
pub async fn answer_and_keep(
    client: &mut Stream,
    page: &[u8],
    limit: Option<Duration>,
) -> Option<usize> {
    let limit = limit.unwrap_or(ANSWER_WRITE_LIMIT);
    let sent = clock::timeout(limit, client.write_all(page)).await;
    matches!(sent, Ok(Ok(()))).then_some(page.len())
}

/// Closes our side, then drains what the client still sends for a moment, so the kernel does
/// not answer unread input with a reset that could destroy our last response in flight (after
/// an error answer, the client may well be sending still).
pub async fn close_gracefully(client: &mut Stream, limit: Option<Duration>) {
    if shut_write(client, limit).await {
        // Boxed: the drain's scratch space is only needed while it runs, not in the state
        // of every future that may close a connection.
        Box::pin(linger(client, 0)).await;
    }
}

/// Closes after a completed exchange, now that it is counted and logged: the end of stream
/// goes at once, with the answer if that waits for it in the socket (`exchange`), so a client
/// that sees the connection end sees the statistics and the log include its exchange. The
/// request was read whole, so when nothing more came with it (`pending` is false: the usual
/// case, the client sent its request and waits for the answer) the connection closes at
/// once, as HAProxy's does; closing then sends no reset. A client that sent more (pipelined
/// requests we will not serve) gets the lingering drain.
async fn close_after_exchange(client: &mut Stream, limit: Option<Duration>, pending: bool) {
    if pending {
        close_gracefully(client, limit).await;
    } else {
        shut_write(client, limit).await;
    }
}

/// Sends our end of stream; false if that failed or took longer than `limit`.
async fn shut_write(client: &mut Stream, limit: Option<Duration>) -> bool {
    let limit = limit.unwrap_or(ANSWER_WRITE_LIMIT);
    matches!(clock::timeout(limit, client.shutdown()).await, Ok(Ok(())))
}

/// Reads and drops what the client sends, for a moment and up to a bound.
async fn linger(client: &mut Stream, mut drained: usize) {
    let mut scratch = [0u8; 1024];
    let _ = clock::timeout(LINGER_LIMIT, async {
        while drained < LINGER_MAX_BYTES {
            match client.read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiting_for_the_next_request_holds_no_buffer() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut peer = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let client = Stream::Tcp(listener.accept().await.unwrap().0);
        let mut input = InBuf::new(16384);
        peer.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .unwrap();
        first_bytes(&client, &mut input).await.unwrap();
        // The request was served: its bytes are consumed, the buffer is empty.
        input.consume(input.len());
        let free = super::super::buffer::free_buffers();
        let mut waiting = std::pin::pin!(first_bytes(&client, &mut input));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        assert_eq!(super::super::buffer::free_buffers(), free + 1);
    }
}
