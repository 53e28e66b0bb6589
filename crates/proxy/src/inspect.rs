//! Content inspection of `mode tcp` sessions: `tcp-request content` rules and `use_backend`
//! over the first bytes the client sends (configuration.txt §4.2 `tcp-request content`,
//! `tcp-request inspect-delay`), which is how SNI routing works without terminating TLS.
//!
//! Rules are evaluated on what has arrived so far. When a rule's condition reads client data
//! that is not all there yet (`req.len`, `req.payload`, `req.ssl_sni`...), the session waits
//! for more, until `tcp-request inspect-delay` expires, the buffer is full or the client stops
//! sending; then the rules run a last time with `WAIT_END` true. A session whose rules all
//! judged the data for good without deciding is accepted at once (HAProxy's default), as is
//! one no rule rejected by the end of the delay. Without an inspect delay the rules run once,
//! on whatever is already there. A backend other than the frontend then runs its own
//! `tcp-request content` rules the same way, with its own inspect delay. The bytes read stay
//! in the buffer and are sent to the server first: inspection never consumes client data.
//!
//! [`inspect_response`] does the same on the server's side for `tcp-response content`
//! rules (`tcp-response inspect-delay`): the server's first bytes are read and kept, then
//! sent to the client before the relay starts; meanwhile the client's bytes go on to the
//! server, which may need them to answer.
//!
//! As in HAProxy, a rule whose condition misses data that may still arrive (a payload not
//! all there, a length that does not match yet) stops the evaluation until more comes or
//! the delay ends ([`TcpVerdict::Wait`]), so `accept if { ... }` followed by a plain
//! `reject`, or a negated condition such as `!{ req.ssl_hello_type 1 }`, waits for the
//! data instead of deciding on an empty buffer.

use crate::http::buffer::{InBuf, ReadError};
use crate::http::rules::{Scope, TcpVerdict, run_tcp_rules};
use crate::stream_context::StreamView;
use crate::track::Stage;
use sluice_config::plan::BackendChoice;
use sluice_config::proxy::Mode;
use sluice_config::rules::{ProxyRules, Rule, TcpAction};
use sluice_http::head::{Limits, Parse, RequestHead, parse_request};
use sluice_net::stream::Stream;
use sluice_runtime::clock;
use sluice_runtime::proxy::{Backend, Server};
use sluice_sample::Source;
use std::os::fd::AsFd;
use tokio::io::AsyncReadExt;

/// What inspection decided.
pub enum Inspection<'a> {
    /// Forward the session to this backend.
    Forward(&'a Backend),
    /// `switch-mode http`: serve the connection as HTTP, starting with the inspected bytes.
    SwitchHttp,
    /// Close the connection (`reject`).
    Reject,
    /// The connection was dropped without a word (`silent-drop`).
    Dropped,
    /// No `use_backend` rule applied and there is no default backend.
    NoBackend,
}

/// Runs the frontend's content rules and `use_backend` rules, then the chosen backend's
/// own content rules, reading client data into `input` as they need it.
pub async fn inspect<'a>(
    scope: &Scope<'a>,
    client: &mut Stream,
    input: &mut InBuf,
) -> Inspection<'a> {
    let frontend = scope.frontend;
    let rules = &frontend.plan.rules;
    let reads_data = reads_payload(&rules.tcp_content)
        || frontend.plan.use_backend.iter().any(|r| {
            r.cond
                .as_ref()
                .is_some_and(|c| c.uses(Source::RequestBuffer))
        });
    // Only a frontend that may upgrade to HTTP needs the buffered bytes parsed as a request
    // (`req.proto_http`, the `HTTP` ACL, header fetches before `switch-mode http`).
    let upgrades = rules.switches_to_http() || frontend.may_reach_http_backend;
    // Slots for `tcp-request content capture` (none declared: nothing is made), all of
    // them: an HTTP request continuing this stream keeps them.
    scope.vars.start_captures(rules);
    let proxy = (&**rules, None);
    if let Some(ended) = content_rules(scope, client, input, proxy, (reads_data, upgrades)).await {
        return ended;
    }
    let head = parsed_request(input, upgrades);
    let view = payload_view(scope, input, true, head.as_ref());
    let mut chosen = None;
    for rule in &frontend.plan.use_backend {
        if !rule.applies(&view) {
            continue;
        }
        let found = match &rule.action {
            BackendChoice::Index(i) => scope.process.backends.get(*i),
            BackendChoice::Dynamic(fmt) => {
                let mut name = Vec::new();
                fmt.render(&view, &mut name);
                scope
                    .process
                    .backends
                    .iter()
                    .find(|b| b.name().as_bytes() == &name[..] && b.plan.mode == Mode::Tcp)
            }
        };
        if found.is_some() {
            chosen = found.map(|b| &**b);
            break;
        }
    }
    let Some(backend) = chosen.or(frontend.backend.as_deref()) else {
        return Inspection::NoBackend;
    };
    // The backend's own rules, with its own inspect delay, once it is chosen (a `listen`
    // section's rules are its frontend's, which already ran).
    let own = &backend.plan.rules;
    if backend.plan.id.uid != frontend.plan.id.uid && !own.tcp_content.is_empty() {
        let reads_data = reads_payload(&own.tcp_content);
        let proxy = (&**own, Some(backend));
        if let Some(ended) = content_rules(scope, client, input, proxy, (reads_data, false)).await {
            return ended;
        }
    }
    Inspection::Forward(backend)
}

/// Whether any of `rules` reads the client's data, which may then be waited for.
fn reads_payload(rules: &[Rule<TcpAction>]) -> bool {
    rules.iter().any(|r| {
        r.cond
            .as_ref()
            .is_some_and(|c| c.uses(Source::RequestBuffer))
            || matches!(&r.action, TcpAction::Capture { expr, .. } if expr.source() == Source::RequestBuffer)
    })
}

/// Runs one proxy's `tcp-request content` rules (the frontend's, or a backend's, which
/// then sees itself as the stream's backend) until one decides or its inspect delay ends;
/// `None` when the connection goes on. A reject or a drop counts as a denied request on
/// the frontend (`dreq`), a drop also on the backend whose rules made it, as HAProxy counts
/// them, before the client can see it.
async fn content_rules<'a>(
    scope: &Scope<'a>,
    client: &mut Stream,
    input: &mut InBuf,
    (rules, backend): (&ProxyRules, Option<&Backend>),
    (reads_data, upgrades): (bool, bool),
) -> Option<Inspection<'a>> {
    let deadline = rules.inspect_delay.map(|d| clock::now() + d);
    let mut ended = deadline.is_none() || !reads_data;
    let mut next_rule = 0;
    loop {
        let verdict = {
            let head = parsed_request(input, upgrades);
            let view = StreamView {
                backend,
                ..payload_view(scope, input, ended, head.as_ref())
            };
            run_tcp_rules(
                &view,
                scope.vars,
                &rules.tcp_content,
                Stage::Content,
                &mut next_rule,
            )
        };
        scope.vars.apply_client_marks(client);
        // A backend whose own rules refuse the connection counts what they read as its
        // traffic, as HAProxy does (the frontend's count is the caller's).
        if let (Some(TcpVerdict::Reject | TcpVerdict::SilentDrop), Some(backend)) =
            (verdict, backend)
        {
            backend.traffic.bytes_in.add(input.len() as u64);
        }
        match verdict {
            Some(TcpVerdict::Reject) => {
                sluice_runtime::proxy::count_denied_request(scope.front(), None);
                return Some(Inspection::Reject);
            }
            Some(TcpVerdict::SilentDrop) => {
                sluice_runtime::proxy::count_denied_request(scope.front(), backend);
                // Should the socket refuse the options, it still closes, only less quietly.
                let _ = client.abort_silently();
                return Some(Inspection::Dropped);
            }
            Some(TcpVerdict::SwitchHttp) => return Some(Inspection::SwitchHttp),
            // Every rule judged what is there for good, and none decided: HAProxy's default
            // accept, at once rather than at the end of the delay.
            Some(TcpVerdict::Accept) | None => return None,
            Some(TcpVerdict::Wait) if ended => return None,
            Some(TcpVerdict::Wait) => {}
        }
        let remaining = deadline.map_or(std::time::Duration::ZERO, |d| {
            d.saturating_duration_since(clock::now())
        });
        match input.read_more(client, Some(remaining)).await {
            Ok(_) => {}
            Err(ReadError::Timeout | ReadError::Full | ReadError::Closed | ReadError::Io(_)) => {
                ended = true;
            }
        }
    }
}

/// What `tcp-response content` rules decided.
#[derive(Debug, PartialEq, Eq)]
pub enum ResponseInspection {
    /// Relay the session (the inspected bytes first).
    Forward,
    /// Close both connections (`reject`).
    Reject,
    /// The client's connection was dropped silently (`silent-drop`): close the server's.
    Dropped,
    /// The client's bytes could not be passed to the server within `timeout server`: the
    /// server connection is broken and both are closed.
    ServerStalled,
}

/// Runs the backend's `tcp-response content` rules over the server's first bytes, reading
/// them into `input` as the rules need them. Meanwhile the client's bytes are relayed to
/// the server (it may need them to answer); returns how many were.
pub async fn inspect_response(
    scope: &Scope<'_>,
    (backend, server): (&Backend, &Server),
    client: &mut Stream,
    upstream: &mut Stream,
    input: &mut InBuf,
) -> (ResponseInspection, u64) {
    let rules = &backend.plan.rules;
    let mut relayed = 0u64;
    if rules.tcp_response.is_empty() {
        return (ResponseInspection::Forward, relayed);
    }
    let mut relay = vec![0u8; RELAY_CHUNK];
    // After the client's end of stream, the relay that follows will see it again.
    let mut client_open = true;
    let reads_data = rules.tcp_response.iter().any(|r| {
        r.cond
            .as_ref()
            .is_some_and(|c| c.uses(Source::ResponseBuffer))
    });
    let deadline = rules.response_inspect_delay.map(|d| clock::now() + d);
    let mut ended = deadline.is_none() || !reads_data;
    let mut next_rule = 0;
    loop {
        let verdict = {
            let view = StreamView {
                backend: Some(backend),
                server: Some(server),
                server_socket: Some(upstream.as_fd()),
                response_payload: Some(input.filled()),
                inspection_ended: ended,
                ..StreamView::new(scope.process, scope.frontend, *scope.endpoints, scope.vars)
            };
            run_tcp_rules(
                &view,
                scope.vars,
                &rules.tcp_response,
                Stage::Content,
                &mut next_rule,
            )
        };
        scope.vars.apply_client_marks(client);
        // Counted as HAProxy counts them, before the client can see its connection end: a
        // rejected response is a denied response (`dresp`), a silent drop a denied request.
        let decided = match verdict {
            Some(TcpVerdict::Reject) => {
                let front = scope.front();
                sluice_runtime::proxy::count_denied_response(front, backend, Some(server));
                ResponseInspection::Reject
            }
            Some(TcpVerdict::SilentDrop) => {
                sluice_runtime::proxy::count_dropped_response(scope.front(), backend);
                let _ = client.abort_silently();
                ResponseInspection::Dropped
            }
            // The configuration allows `switch-mode` in request rules only.
            Some(TcpVerdict::Accept | TcpVerdict::SwitchHttp) | None => ResponseInspection::Forward,
            Some(TcpVerdict::Wait) if ended => ResponseInspection::Forward,
            Some(TcpVerdict::Wait) => {
                let remaining = deadline.map_or(std::time::Duration::ZERO, |d| {
                    d.saturating_duration_since(clock::now())
                });
                tokio::select! {
                    read = input.read_more(upstream, None) => ended |= read.is_err(),
                    got = client.read(&mut relay), if client_open => match got {
                        Ok(0) | Err(_) => client_open = false,
                        Ok(n) => {
                            // The bytes were taken from the client: they must reach the
                            // server whole, or the session ends (never dropped silently).
                            let limit = backend.plan.timeouts.server;
                            if !crate::forward::write_within(upstream, &relay[..n], limit).await {
                                return (ResponseInspection::ServerStalled, relayed);
                            }
                            relayed += n as u64;
                        }
                    },
                    () = tokio::time::sleep(remaining) => ended = true,
                }
                continue;
            }
        };
        return (decided, relayed);
    }
}

/// The most client bytes relayed at once while the server's answer is inspected.
const RELAY_CHUNK: usize = 16 * 1024;

fn payload_view<'v>(
    scope: &Scope<'v>,
    input: &'v InBuf,
    ended: bool,
    head: Option<&'v RequestHead>,
) -> StreamView<'v> {
    StreamView {
        payload: Some(input.filled()),
        request: head.map(|h| (input.filled(), h)),
        inspection_ended: ended,
        ..StreamView::new(scope.process, scope.frontend, *scope.endpoints, scope.vars)
    }
}

/// The buffered bytes as a complete HTTP request head, when `wanted`.
fn parsed_request(input: &InBuf, wanted: bool) -> Option<RequestHead> {
    if !wanted || input.is_empty() {
        return None;
    }
    match parse_request(input.filled(), &Limits::default()) {
        Ok(Parse::Complete(head)) => Some(head),
        _ => None,
    }
}
