//! Content inspection of `mode tcp` sessions: `tcp-request content` rules and `use_backend`
//! over the first bytes the client sends (configuration.txt §4.2 `tcp-request content`,
//! `tcp-request inspect-delay`), which is how SNI routing works without terminating TLS.
//!
//! Rules are evaluated on what has arrived so far. When no rule has decided yet and a rule
//! reads the client's data (`req.len`, `req.payload`, `req.ssl_sni`...), the session waits for
//! more, until `tcp-request inspect-delay` expires, the buffer is full or the client stops
//! sending; then the rules run a last time with `WAIT_END` true, and a session no rule
//! rejected is accepted (HAProxy's default). Without an inspect delay the rules run once, on
//! whatever is already there. The bytes read stay in the buffer and are sent to the server
//! first: inspection never consumes client data.
//!
//! Limitation: Sluice's fetches do not tell "no data yet" from "never", so a negated
//! condition on client data (`!{ req.ssl_hello_type 1 }`) can match before the data
//! arrives. Write such rules positively (`accept if { ... }` then `reject`).

use crate::http::buffer::{InBuf, ReadError};
use crate::http::rules::{Scope, TcpVerdict, run_tcp_rules};
use crate::stream_context::StreamView;
use sluice_config::plan::BackendChoice;
use sluice_config::proxy::Mode;
use sluice_net::stream::Stream;
use sluice_runtime::proxy::Backend;
use sluice_sample::Source;
use tokio::time::Instant;

/// What inspection decided.
pub enum Inspection<'a> {
    /// Forward the session to this backend.
    Forward(&'a Backend),
    /// Close the connection (`reject`).
    Reject,
    /// No `use_backend` rule applied and there is no default backend.
    NoBackend,
}

/// Runs the frontend's content rules and `use_backend` rules, reading client data into
/// `input` as they need it.
pub async fn inspect<'a>(
    scope: &Scope<'a>,
    client: &mut Stream,
    input: &mut InBuf,
) -> Inspection<'a> {
    let frontend = scope.frontend;
    let rules = &frontend.plan.rules;
    let reads_data = rules.tcp_content.iter().any(|r| {
        r.cond
            .as_ref()
            .is_some_and(|c| c.uses(Source::RequestBuffer))
    }) || frontend.plan.use_backend.iter().any(|r| {
        r.cond
            .as_ref()
            .is_some_and(|c| c.uses(Source::RequestBuffer))
    });
    let deadline = rules.inspect_delay.map(|d| Instant::now() + d);
    let mut ended = deadline.is_none() || !reads_data;
    loop {
        let verdict = {
            let view = payload_view(scope, input, ended);
            run_tcp_rules(&view, scope.vars, &rules.tcp_content)
        };
        match verdict {
            Some(TcpVerdict::Reject) => return Inspection::Reject,
            Some(TcpVerdict::Accept) => break,
            None if ended => break,
            None => {}
        }
        let remaining = deadline.map_or(std::time::Duration::ZERO, |d| {
            d.saturating_duration_since(Instant::now())
        });
        match input.read_more(client, Some(remaining)).await {
            Ok(_) => {}
            Err(ReadError::Timeout | ReadError::Full | ReadError::Closed | ReadError::Io(_)) => {
                ended = true;
            }
        }
    }
    let view = payload_view(scope, input, true);
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
        if let Some(backend) = found {
            return Inspection::Forward(backend);
        }
    }
    match frontend.backend.as_deref() {
        Some(backend) => Inspection::Forward(backend),
        None => Inspection::NoBackend,
    }
}

fn payload_view<'v>(scope: &Scope<'v>, input: &'v InBuf, ended: bool) -> StreamView<'v> {
    StreamView {
        payload: Some(input.filled()),
        inspection_ended: ended,
        ..StreamView::new(scope.process, scope.frontend, scope.endpoints, scope.vars)
    }
}
