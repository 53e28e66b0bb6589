//! Rule evaluation on the HTTP data path: what happens to a request between its parsing and
//! its forwarding, and to a response between its parsing and its relay (configuration.txt
//! §4.2 `http-request`, `http-response`, `redirect`, `use_backend`, `monitor-uri`).
//!
//! [`process_request`] follows HAProxy's order: the frontend's `tcp-request content` rules,
//! the monitor URI, the frontend's `http-request` rules then `redirect` rules, the
//! `use_backend` choice, then the same rule sets of the backend when it is another proxy.
//! [`process_response`] runs the backend's `http-response` rules, then the frontend's, then
//! their `http-after-response` rules, which [`finish_answer`] and [`finish_page`] also run
//! over every answer the proxy makes itself (rule answers, error pages). An
//! action stops the evaluation (`allow` for its own rule set; `deny`, `return`, `redirect` for
//! the whole message) or changes the message and goes on with the next rule, which sees the
//! change. Rules cost no allocation on a warm thread: computed values are rendered into a
//! per-thread [`Scratch`] buffer, and header actions edit the head in place (see
//! [`super::rewrite`]).

use super::buffer::InBuf;
use super::normalize;
use super::rewrite::{self, FieldEdit, RewriteFailed};
use super::scratch::Scratch;
use crate::stream_context::StreamView;
use crate::track::Stage;
use crate::vars::{Inspected, Vars};
use sluice_config::errors::{ErrorPage, ErrorPages};
use sluice_config::http_options::HeaderNamePolicy;
use sluice_config::plan::BackendChoice;
use sluice_config::proxy::Mode;
use sluice_config::rules::{
    AddressPart, HttpAction, IntValue, LinePart, NameMatch, PacketField, PatternEdit, PriorityPart,
    Redirect, RedirectKind, Reply, ReplyBody, Rule, TcpAction, TimeoutValue, VarValue,
};
use sluice_http::encode::HeadEdits;
use sluice_http::error::error_response;
use sluice_http::head::{
    HeaderSpan, Limits, MessageHead, Parse, RequestHead, ResponseHead, Version, header_values,
    parse_response,
};
use sluice_http::reason_phrase;
use sluice_net::listen::Endpoints;
use sluice_runtime::listener::ListenerStats;
use sluice_runtime::process::Process;
use sluice_runtime::proxy::{Backend, Frontend, Server};
use sluice_sample::{Context, LogFormat, Sample, SampleType};
use std::borrow::Cow;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// The parts of a stream that do not change while its rules run.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    /// The process (backends by name, counters).
    pub process: &'a Process,
    /// The accepting proxy.
    pub frontend: &'a Frontend,
    /// The client's addresses (a reference: a scope is made once per session and lives in
    /// its task beside the addresses it was made from).
    pub endpoints: &'a Endpoints,
    /// The session's variables.
    pub vars: &'a Vars,
}

impl<'a> Scope<'a> {
    /// The frontend and, under `option socket-stats`, the session's listener: where the
    /// session's frontend counts go.
    pub(crate) fn front(&self) -> (&'a Frontend, Option<&'a ListenerStats>) {
        (self.frontend, self.vars.listener())
    }

    /// The addresses now: the connection's, unless a `set-src`/`set-dst` rule of the
    /// transaction changed them.
    pub(crate) fn addresses(&self) -> Endpoints {
        self.vars.addresses().unwrap_or(*self.endpoints)
    }

    pub(crate) fn view<'v>(
        &self,
        backend: Option<&'v Backend>,
        request: Option<(&'v [u8], &'v RequestHead)>,
    ) -> StreamView<'v>
    where
        'a: 'v,
    {
        StreamView {
            backend,
            request,
            ..StreamView::new(self.process, self.frontend, *self.endpoints, self.vars)
        }
    }
}

/// An answer the proxy sends itself instead of forwarding.
#[derive(Debug)]
pub struct Answer<'a> {
    /// The complete response.
    pub bytes: Cow<'a, [u8]>,
    /// Its status, for the log and the counters.
    pub status: u16,
    /// True if the connection must close after it (an error page of the proxy's own, a page
    /// without a length to frame it).
    pub close: bool,
    /// A denied request (`deny`, `tarpit`, an error page): logged as the proxy's doing (`PR`).
    pub denied: bool,
    /// `http-request tarpit`: how long to hold the request before answering.
    pub tarpit: Option<std::time::Duration>,
    /// A rewrite that did not fit: the proxy's own failure, counted as a failed rewrite
    /// (`wrew`) and an internal error (`eint`), as HAProxy counts it.
    pub internal: bool,
    /// The backend whose own rules answered (another proxy than the frontend), which counts
    /// the request as its own too (a session, its bytes, its status), as HAProxy counts it.
    pub backend: Option<&'a Backend>,
}

impl<'a> Answer<'a> {
    /// The 500 that ends a request or response whose rewrite did not fit.
    fn failed_rewrite(pages: &[&'a ErrorPages], view: &dyn Context) -> Self {
        Answer {
            internal: true,
            ..Answer::page(error_page(pages, 500, view), 500)
        }
    }

    fn page(bytes: Cow<'a, [u8]>, status: u16) -> Self {
        Answer {
            bytes,
            status,
            close: true,
            denied: true,
            tarpit: None,
            internal: false,
            backend: None,
        }
    }
}

/// What the request rules decided.
pub enum RequestVerdict<'a> {
    /// Forward the request to this backend.
    Forward(&'a Backend),
    /// Answer the client ourselves.
    Answer(Answer<'a>),
    /// Close the connection without a word (`tcp-request content reject`, `http-request
    /// reject`).
    Reject,
    /// Make the connection disappear without telling the client (`http-request
    /// silent-drop`).
    Drop,
    /// Serve the statistics page ([`super::stats_page`]).
    Stats(&'a sluice_config::stats_page::StatsPage),
    /// `http-request wait-for-body`: wait for the body as `BodyWait` says, then run the
    /// rules again from `Resume`.
    WaitForBody(BodyWait, Resume<'a>),
}

/// How long and for how much of the body the rules wait.
#[derive(Clone, Copy, Debug)]
pub enum BodyWait {
    /// `http-request wait-for-body`: at most `time`, until the whole body or `at_least`
    /// bytes of it (0: the whole body) or a full buffer came; then a 408.
    Action {
        /// The longest wait.
        time: std::time::Duration,
        /// Enough body bytes to go on with.
        at_least: u64,
    },
    /// A backend's `option http-buffer-request` (the frontend's waits before any rule):
    /// until the whole body or a full buffer came, within `timeout http-request` from the
    /// request's start (none: no limit).
    BackendOption {
        /// The frontend's `timeout http-request`, else the backend's.
        http_request: Option<std::time::Duration>,
    },
}

/// Where the request rules go on after a wait for the body: at rule `next` of the
/// frontend's `http-request` rules, or of the backend's when `backend` is set (chosen
/// already), with the backend's `tcp-request content` rules first when `content`. The
/// stages before it ran once and do not run again, so no action runs twice.
#[derive(Clone, Copy)]
pub struct Resume<'a> {
    backend: Option<&'a Backend>,
    content: bool,
    next: RulePosition,
}

/// Where a rule set goes on after a wait for the body: the next rule, and the
/// `strict-mode` the rules before it left (HAProxy resets it only when a set starts, not
/// when it resumes).
#[derive(Clone, Copy, Debug)]
pub struct RulePosition {
    next: usize,
    strict: bool,
}

impl RulePosition {
    /// A rule set's start: its first rule, in strict mode.
    const START: RulePosition = RulePosition {
        next: 0,
        strict: true,
    };
}

/// What a rule set decided.
enum Flow<'a> {
    /// Go on with the next stage.
    Continue,
    /// Answer the client.
    Answer(Answer<'a>),
    /// Close without answering.
    Reject,
    /// Make the connection disappear (`silent-drop`).
    Drop,
    /// Wait for the body, then go on from there in the set.
    Wait(BodyWait, RulePosition),
}

/// The error page for `status`: the proxy's own, else the other side's, else the built-in;
/// one with a format is built from `view`.
fn error_page<'a>(pages: &[&'a ErrorPages], status: u16, view: &dyn Context) -> Cow<'a, [u8]> {
    match pages.iter().find_map(|p| p.get(&status)) {
        Some(page) => page_bytes(page, view),
        None => Cow::Borrowed(error_response(status)),
    }
}

/// The bytes of a configured error page: a fixed one as it is, one with a format built for
/// the stream `view` shows (`http-error ... lf-string`).
pub(super) fn page_bytes<'a>(page: &'a ErrorPage, view: &dyn Context) -> Cow<'a, [u8]> {
    match page {
        ErrorPage::Fixed(bytes) => Cow::Borrowed(&bytes[..]),
        ErrorPage::Formatted(reply) => Cow::Owned(reply_bytes(reply, view)),
    }
}

/// Runs the request-side rules of the frontend and of the backend they choose; an answer
/// of the proxy's own then goes through the `http-after-response` rules.
///
/// `resume` is where a `wait-for-body` left them, `None` for a new request.
pub fn process_request<'a>(
    scope: &Scope<'a>,
    input: &mut InBuf,
    head: &mut RequestHead,
    (limits, bufsize): (&Limits, usize),
    resume: Option<Resume<'a>>,
) -> RequestVerdict<'a> {
    let mut chosen = resume.and_then(|r| r.backend);
    match request_verdict(scope, input, head, (limits, bufsize), resume, &mut chosen) {
        RequestVerdict::Answer(mut answer) => {
            let frontend = scope.frontend;
            if answer.internal {
                sluice_runtime::proxy::count_failed_rewrite(scope.front(), chosen, None, true);
            } else if !answer.denied && chosen.is_none() {
                // The frontend's own rules answered (redirect, return, auth, monitor, a
                // service): an intercepted request, as HAProxy counts it.
                frontend.intercepted.incr();
            }
            answer.backend = chosen.filter(|b| b.plan.id.uid != frontend.plan.id.uid);
            let request = Some((input.filled(), &*head));
            RequestVerdict::Answer(finish_answer(scope, chosen, request, answer))
        }
        verdict => verdict,
    }
}

fn request_verdict<'a>(
    scope: &Scope<'a>,
    input: &mut InBuf,
    head: &mut RequestHead,
    (limits, bufsize): (&Limits, usize),
    resume: Option<Resume<'a>>,
    chosen: &mut Option<&'a Backend>,
) -> RequestVerdict<'a> {
    let frontend = scope.frontend;
    let rules = &frontend.plan.rules;
    let front_pages = [&frontend.plan.error_pages];
    let limits = limits.for_rewrites(bufsize);
    let backend = match resume {
        None => match frontend_verdict(scope, input, head, &limits) {
            Ok(backend) => backend,
            Err(verdict) => return verdict,
        },
        Some(Resume {
            backend: None,
            next,
            ..
        }) => {
            match http_request_rules(scope, None, rules, &front_pages, input, head, &limits, next) {
                Flow::Continue => {}
                Flow::Reject => return RequestVerdict::Reject,
                Flow::Drop => return RequestVerdict::Drop,
                Flow::Answer(a) => return RequestVerdict::Answer(a),
                Flow::Wait(wait, next) => {
                    let resume = Resume {
                        backend: None,
                        content: false,
                        next,
                    };
                    return RequestVerdict::WaitForBody(wait, resume);
                }
            }
            match after_frontend_rules(scope, input, head) {
                Ok(backend) => backend,
                Err(verdict) => return verdict,
            }
        }
        Some(Resume {
            backend: Some(backend),
            content,
            next,
        }) => {
            if content && let Err(verdict) = backend_content(scope, backend, input, head) {
                return verdict;
            }
            return backend_verdict(scope, backend, input, head, &limits, next);
        }
    };
    *chosen = Some(backend);
    if backend.plan.id.uid != frontend.plan.id.uid {
        // A backend's `option http-buffer-request` waits before the backend's rules, as
        // HAProxy's does once the request switched to it.
        if backend.plan.http.buffer_request && !frontend.plan.http.buffer_request {
            let http_request = frontend
                .plan
                .timeouts
                .http_request
                .or(backend.plan.timeouts.http_request);
            let resume = Resume {
                backend: Some(backend),
                content: true,
                next: RulePosition::START,
            };
            return RequestVerdict::WaitForBody(BodyWait::BackendOption { http_request }, resume);
        }
        if let Err(verdict) = backend_content(scope, backend, input, head) {
            return verdict;
        }
        return backend_verdict(scope, backend, input, head, &limits, RulePosition::START);
    }
    RequestVerdict::Forward(backend)
}

/// A backend's `tcp-request content` rules; `Err` with the verdict when they end the request.
fn backend_content<'a>(
    scope: &Scope<'a>,
    backend: &Backend,
    input: &InBuf,
    head: &RequestHead,
) -> Result<(), RequestVerdict<'a>> {
    // Those the TCP frontend's inspection ran for this stream do not run again.
    let ran = scope.vars.inspected() == Inspected::FrontendAndBackend;
    let content: &[_] = if ran {
        &[]
    } else {
        &backend.plan.rules.tcp_content
    };
    match tcp_content(scope, Some(backend), content, input, head) {
        Flow::Continue | Flow::Wait(..) => Ok(()),
        Flow::Reject => Err(RequestVerdict::Reject),
        Flow::Drop => Err(RequestVerdict::Drop),
        Flow::Answer(a) => Err(RequestVerdict::Answer(a)),
    }
}

/// The frontend's stages, from the captures to its `http-request` rules, then the choice
/// of a backend; `Err` with the verdict when they end the request's way there.
fn frontend_verdict<'a>(
    scope: &Scope<'a>,
    input: &mut InBuf,
    head: &mut RequestHead,
    limits: &Limits,
) -> Result<&'a Backend, RequestVerdict<'a>> {
    let frontend = scope.frontend;
    capture_headers(scope, false, input.filled(), head.headers());
    let rules = &frontend.plan.rules;
    let front_pages = [&frontend.plan.error_pages];
    // Content rules that ran during a TCP frontend's inspection do not run again.
    let ran = scope.vars.inspected() != Inspected::None;
    let content: &[_] = if ran { &[] } else { &rules.tcp_content };
    match tcp_content(scope, None, content, input, head) {
        Flow::Continue | Flow::Wait(..) => {}
        Flow::Reject => return Err(RequestVerdict::Reject),
        Flow::Drop => return Err(RequestVerdict::Drop),
        Flow::Answer(a) => return Err(RequestVerdict::Answer(a)),
    }
    if let Some(uri) = &rules.monitor_uri
        && head.target_bytes(input.filled()) == uri.as_bytes()
    {
        let view = scope.view(None, Some((input.filled(), head)));
        let failing = rules.monitor_fail.iter().any(|c| c.eval(&view));
        return Err(RequestVerdict::Answer(if failing {
            // Every monitor hit is intercepted (`process_request` counts the others, which
            // are not denials).
            scope.frontend.intercepted.incr();
            Answer::page(error_page(&front_pages, 503, &view), 503)
        } else {
            Answer {
                bytes: Cow::Borrowed(MONITOR_OK),
                status: 200,
                close: false,
                denied: false,
                tarpit: None,
                internal: false,
                backend: None,
            }
        }));
    }
    let start = RulePosition::START;
    match http_request_rules(scope, None, rules, &front_pages, input, head, limits, start) {
        Flow::Continue => {}
        Flow::Reject => return Err(RequestVerdict::Reject),
        Flow::Drop => return Err(RequestVerdict::Drop),
        Flow::Answer(a) => return Err(RequestVerdict::Answer(a)),
        Flow::Wait(wait, next) => {
            let resume = Resume {
                backend: None,
                content: false,
                next,
            };
            return Err(RequestVerdict::WaitForBody(wait, resume));
        }
    }
    after_frontend_rules(scope, input, head)
}

/// `addresses` with the part `set-src`, `set-src-port`, `set-dst` or `set-dst-port` names
/// set to `value`. A new address keeps the port when the family allows (an IPv4 port stays
/// with an IPv6 address too); a new port given an address-less side goes with 0.0.0.0, as
/// HAProxy does.
fn changed_addresses(
    addresses: Endpoints,
    part: AddressPart,
    value: Sample<'_>,
) -> Option<Endpoints> {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    let mut changed = addresses;
    let side = match part {
        AddressPart::SourceIp | AddressPart::SourcePort => &mut changed.client,
        AddressPart::DestinationIp | AddressPart::DestinationPort => &mut changed.local,
    };
    match part {
        AddressPart::SourceIp | AddressPart::DestinationIp => {
            let Some(Sample::Ip(ip)) = value.cast(SampleType::Ip) else {
                return None;
            };
            let port = side.map_or(0, |a| a.port());
            *side = Some(SocketAddr::new(ip, port));
        }
        AddressPart::SourcePort | AddressPart::DestinationPort => {
            let Some(Sample::Int(port)) = value.cast(SampleType::Int) else {
                return None;
            };
            let port = u16::try_from(port).ok()?;
            let ip = side.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip());
            *side = Some(SocketAddr::new(ip, port));
        }
    }
    Some(changed)
}

/// Whether a field name holds a character other than a letter, a digit or `-`, which
/// `option http-restrict-req-hdr-names` restricts.
fn restricted_name(name: &[u8]) -> bool {
    name.iter()
        .any(|&b| !(b.is_ascii_alphanumeric() || b == b'-'))
}

/// Whether the request has a field with a restricted name.
fn has_restricted_name(buf: &[u8], head: &RequestHead) -> bool {
    head.headers
        .iter()
        .any(|h| restricted_name(sluice_http::header_name(buf, h)))
}

/// Removes every field with a restricted name (`delete`).
fn delete_restricted_names(
    input: &mut InBuf,
    head: &mut RequestHead,
    limits: &Limits,
) -> Result<(), RewriteFailed> {
    let buf = input.filled();
    let names: Vec<String> = head
        .headers
        .iter()
        .map(|h| sluice_http::header_name(buf, h))
        .filter(|name| restricted_name(name))
        .map(|name| String::from_utf8_lossy(name).into_owned())
        .collect();
    for name in names {
        let matching = NameMatch::Str(name);
        rewrite::edit_request(input, head, &FieldEdit::Delete(&matching), limits)?;
    }
    Ok(())
}

/// After the frontend's `http-request` rules: its statistics page, or the backend chosen.
fn after_frontend_rules<'a>(
    scope: &Scope<'a>,
    input: &InBuf,
    head: &RequestHead,
) -> Result<&'a Backend, RequestVerdict<'a>> {
    let frontend = scope.frontend;
    let rules = &frontend.plan.rules;
    // The statistics page, once the frontend's rules had their say (they may deny it).
    if let Some(page) = &rules.stats_page
        && super::stats_page::wants(page, input.filled(), head)
    {
        return Err(stats_verdict(scope, None, page, (input.filled(), head)));
    }
    choose_backend(scope, input, head).ok_or_else(|| {
        // Nowhere to send the request: HAProxy answers 503.
        frontend.failed.incr();
        let front_pages = [&frontend.plan.error_pages];
        let view = scope.view(None, Some((input.filled(), head)));
        RequestVerdict::Answer(Answer::page(error_page(&front_pages, 503, &view), 503))
    })
}

/// A request for the statistics page of `backend` (else of the frontend): the page, unless
/// one of its `stats http-request` rules denies it or asks for credentials. The first rule
/// that applies decides; with none, the page is served.
pub fn stats_verdict<'a>(
    scope: &Scope<'a>,
    backend: Option<&'a Backend>,
    page: &'a sluice_config::stats_page::StatsPage,
    request: (&[u8], &RequestHead),
) -> RequestVerdict<'a> {
    let view = scope.view(backend, Some(request));
    let Some(rule) = page.rules.iter().find(|rule| rule.applies(&view)) else {
        return RequestVerdict::Stats(page);
    };
    let front = &scope.frontend.plan.error_pages;
    let pages: &[&'a ErrorPages] = match backend {
        Some(backend) => &[&backend.plan.error_pages, front],
        None => &[front],
    };
    match &rule.action {
        HttpAction::Deny(reply) => {
            sluice_runtime::proxy::count_denied_request(view.front(), backend);
            scope.vars.trackers.http_error();
            RequestVerdict::Answer(reply_answer(reply, &view, pages, true))
        }
        // Without its own realm, the page's: HAProxy's default statistics realm.
        HttpAction::Auth { realm } => {
            let realm = realm.as_deref().unwrap_or(&page.realm);
            RequestVerdict::Answer(ask_credentials(pages, &view, realm))
        }
        // `allow`, the only other action the configuration lets through.
        _ => RequestVerdict::Stats(page),
    }
}

/// A backend's own `http-request` rules from rule `next` on (its `tcp-request content` rules
/// ran before them), then the verdict to forward there.
fn backend_verdict<'a>(
    scope: &Scope<'a>,
    backend: &'a Backend,
    input: &mut InBuf,
    head: &mut RequestHead,
    limits: &Limits,
    next: RulePosition,
) -> RequestVerdict<'a> {
    let rules = &backend.plan.rules;
    let pages = [&backend.plan.error_pages, &scope.frontend.plan.error_pages];
    match http_request_rules(
        scope,
        Some(backend),
        rules,
        &pages,
        input,
        head,
        limits,
        next,
    ) {
        Flow::Continue => RequestVerdict::Forward(backend),
        Flow::Reject => RequestVerdict::Reject,
        Flow::Drop => RequestVerdict::Drop,
        Flow::Answer(a) => RequestVerdict::Answer(a),
        Flow::Wait(wait, next) => {
            let resume = Resume {
                backend: Some(backend),
                content: false,
                next,
            };
            RequestVerdict::WaitForBody(wait, resume)
        }
    }
}

/// The answer of the monitor URI while the service is up (our own words, HAProxy's layout).
const MONITOR_OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 47\r\ncache-control: no-cache\r\ncontent-type: text/html\r\n\r\n<html><body><h1>200 OK</h1>\nUp.\n</body></html>\n";

/// `tcp-request content` rules (in `mode http` they see the parsed request).
fn tcp_content<'a>(
    scope: &Scope<'a>,
    backend: Option<&Backend>,
    rules: &[Rule<TcpAction>],
    input: &InBuf,
    head: &RequestHead,
) -> Flow<'a> {
    let view = scope.view(backend, Some((input.filled(), head)));
    // Either ends a denied request, as HAProxy counts them: a reject on the frontend only, a
    // drop also on a backend whose own rules dropped it.
    match run_tcp_rules(&view, scope.vars, rules, Stage::Content, &mut 0) {
        Some(TcpVerdict::Reject) => {
            sluice_runtime::proxy::count_denied_request(scope.front(), None);
            Flow::Reject
        }
        Some(TcpVerdict::SilentDrop) => {
            sluice_runtime::proxy::count_denied_request(scope.front(), backend);
            Flow::Drop
        }
        // Already HTTP: `switch-mode http` has nothing to switch.
        Some(TcpVerdict::Accept | TcpVerdict::Wait | TcpVerdict::SwitchHttp) | None => {
            Flow::Continue
        }
    }
}

/// What `tcp-request` rules decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpVerdict {
    /// An `accept` rule applied: go on.
    Accept,
    /// A `reject` rule applied: close the connection.
    Reject,
    /// A `silent-drop` rule applied: close the client's connection with a reset that does
    /// not reach it ([`sluice_net::stream::Stream::abort_silently`]).
    SilentDrop,
    /// A rule's condition needs data that has not arrived yet (content inspection only).
    Wait,
    /// A `switch-mode http` rule applied: the connection is HTTP from now on.
    SwitchHttp,
}

/// Runs `tcp-request connection|session|content` (and `tcp-response content`) rules over
/// `view`, from rule `*next` on, until one waits for data ([`TcpVerdict::Wait`]); `None` when
/// no `accept` or `reject` rule applied (the session then goes on, as HAProxy's default is to
/// accept). `*next` is left at the rule to evaluate again once more data has arrived, so an
/// inspection that waits resumes there, as HAProxy's does, and never runs an action
/// (`sc-inc-gpc0`...) twice.
pub fn run_tcp_rules(
    view: &StreamView<'_>,
    vars: &Vars,
    rules: &[Rule<TcpAction>],
    stage: Stage,
    next: &mut usize,
) -> Option<TcpVerdict> {
    while let Some(rule) = rules.get(*next) {
        match rule.decide(view) {
            // HAProxy stops at a rule missing its data and evaluates again once more
            // has arrived (or the inspection delay is over).
            None => return Some(TcpVerdict::Wait),
            Some(false) => {
                *next += 1;
                continue;
            }
            Some(true) => *next += 1,
        }
        let verdict = match &rule.action {
            TcpAction::Accept => TcpVerdict::Accept,
            TcpAction::Reject => TcpVerdict::Reject,
            TcpAction::SilentDrop => TcpVerdict::SilentDrop,
            TcpAction::SwitchModeHttp => TcpVerdict::SwitchHttp,
            TcpAction::SetVar { name, value } => {
                set_var(vars, name, value, view);
                continue;
            }
            TcpAction::UnsetVar { name } => {
                vars.unset(name);
                continue;
            }
            TcpAction::ExpectProxy => {
                vars.expect_proxy();
                continue;
            }
            // As in HAProxy, a capture reading a buffer still being filled waits for its
            // sample (or the inspection's end), like a condition missing its data.
            TcpAction::Capture { expr, slot } => {
                let growing = expr.source() == sluice_sample::Source::RequestBuffer
                    && !view.inspection_ended();
                match expr.eval(view) {
                    Some(sample) => store_capture(view, *slot, &sample),
                    None if growing => {
                        *next -= 1;
                        return Some(TcpVerdict::Wait);
                    }
                    None => {}
                }
                continue;
            }
            TcpAction::Stick(action) => {
                crate::track::apply(action, view, stage);
                continue;
            }
            TcpAction::SetLogLevel(level) => {
                vars.set_log_level(*level);
                continue;
            }
            TcpAction::SetPriority(part, expr) => {
                set_priority(vars, *part, expr, view);
                continue;
            }
            TcpAction::MarkClientPackets(field, value) => {
                mark_client_packets(vars, *field, value, view);
                continue;
            }
        };
        // As in HAProxy, only content rules (of a stream) note where the verdict came from.
        if stage == Stage::Content {
            vars.note_final_rule(&rule.span);
        }
        return Some(verdict);
    }
    None
}

/// `set-var` and `set-var-fmt`, in any rule set: an expression keeps its type (and one
/// without a value sets nothing), a format is stored as a string.
fn set_var(vars: &Vars, name: &str, value: &VarValue, view: &StreamView<'_>) {
    match value {
        VarValue::Expr(expr) => {
            if let Some(sample) = expr.eval(view) {
                vars.set(name, sample);
            }
        }
        VarValue::Format(fmt) => vars.set(name, Sample::owned_str(render(fmt, view))),
    }
}

/// `set-priority-class|offset`: the expression's value as an integer; none changes nothing.
fn set_priority(
    vars: &Vars,
    part: PriorityPart,
    expr: &sluice_sample::Expr,
    view: &StreamView<'_>,
) {
    if let Some(Sample::Int(value)) = expr.eval(view).and_then(|s| s.cast(SampleType::Int)) {
        vars.set_priority(part, value);
    }
}

/// `set-fc-tos|set-fc-mark`: the value, written or computed as an integer; none changes
/// nothing.
fn mark_client_packets(vars: &Vars, field: PacketField, value: &IntValue, view: &StreamView<'_>) {
    let value = match value {
        IntValue::Fixed(value) => Some(*value),
        IntValue::Expr(expr) => match expr.eval(view).and_then(|s| s.cast(SampleType::Int)) {
            Some(Sample::Int(value)) => Some(value),
            _ => None,
        },
    };
    if let Some(value) = value {
        vars.mark_client_packets(field, value);
    }
}

/// The backend of the first `use_backend` rule that applies, else the default one. A
/// computed name that names no backend (or one of another mode) skips its rule, as in HAProxy.
fn choose_backend<'a>(scope: &Scope<'a>, input: &InBuf, head: &RequestHead) -> Option<&'a Backend> {
    let frontend = scope.frontend;
    let backends = &scope.process.backends;
    if !frontend.plan.use_backend.is_empty() {
        let view = scope.view(None, Some((input.filled(), head)));
        for rule in &frontend.plan.use_backend {
            if !rule.applies(&view) {
                continue;
            }
            match &rule.action {
                // A TCP frontend upgraded by `switch-mode http` may also name TCP backends
                // for the connections it does not upgrade: those rules do not apply here.
                BackendChoice::Index(i) => {
                    if let Some(backend) = backends.get(*i).filter(|b| b.plan.mode == Mode::Http) {
                        return Some(&**backend);
                    }
                }
                BackendChoice::Dynamic(fmt) => {
                    let name = render(fmt, &view);
                    let found = backends
                        .iter()
                        .find(|b| b.name().as_bytes() == &name[..] && b.plan.mode == Mode::Http);
                    if let Some(backend) = found {
                        return Some(&**backend);
                    }
                }
            }
        }
    }
    frontend
        .backend
        .as_deref()
        .filter(|b| b.plan.mode == Mode::Http)
}

/// Renders `fmt` into `scratch`, a buffer reused by the actions of a rule set.
fn render_into<'s>(fmt: &LogFormat, ctx: &dyn Context, scratch: &'s mut Vec<u8>) -> &'s [u8] {
    scratch.clear();
    fmt.render(ctx, scratch);
    scratch
}

fn render(fmt: &LogFormat, ctx: &dyn Context) -> Vec<u8> {
    let mut out = Vec::new();
    fmt.render(ctx, &mut out);
    out
}

/// What one action asks of the rule loop.
enum Step<'a, 'e> {
    /// Go on with the next rule.
    Next,
    /// Stop this rule set (`allow`).
    Stop,
    /// Stop everything and answer.
    Answer(Answer<'a>),
    /// Replace the head with these bytes, then go on.
    Rewrite(Vec<u8>),
    /// Change the head's fields, then go on.
    Edit(FieldEdit<'e>),
}

/// A proxy's `http-request` rules from rule `first` on, then its `redirect` rules.
#[allow(clippy::too_many_arguments)]
fn http_request_rules<'a>(
    scope: &Scope<'a>,
    backend: Option<&Backend>,
    rules: &sluice_config::rules::ProxyRules,
    pages: &[&'a ErrorPages],
    input: &mut InBuf,
    head: &mut RequestHead,
    limits: &Limits,
    from: RulePosition,
) -> Flow<'a> {
    // Values computed by the actions are rendered here, one buffer for the whole set.
    let mut scratch = Scratch::take();
    // `strict-mode`: on at the start of each rule set, as it was on a resume.
    let mut strict = from.strict;
    for (index, rule) in rules.http_request.iter().enumerate().skip(from.next) {
        let step = {
            let view = scope.view(backend, Some((input.filled(), head)));
            if !rule.applies(&view) {
                continue;
            }
            match rule.action {
                HttpAction::WaitForBody { time, at_least } => {
                    let next = RulePosition {
                        next: index + 1,
                        strict,
                    };
                    return Flow::Wait(BodyWait::Action { time, at_least }, next);
                }
                // Both end the request as a denied one (not an HTTP error for the stick
                // counters, which HAProxy counts for `deny` and `tarpit` only).
                HttpAction::Reject | HttpAction::SilentDrop => {
                    sluice_runtime::proxy::count_denied_request(scope.front(), backend);
                    scope.vars.note_final_rule(&rule.span);
                    return if matches!(rule.action, HttpAction::Reject) {
                        Flow::Reject
                    } else {
                        Flow::Drop
                    };
                }
                HttpAction::StrictMode(on) => {
                    strict = on;
                    continue;
                }
                // HTTP/1.0 clients get no interim answer (RFC 9110 §15.2).
                HttpAction::EarlyHint {
                    ref name,
                    ref value,
                } if head.version != Version::Http10 => {
                    let value = render_into(value, &view, &mut scratch);
                    // As in HAProxy, a run of early-hint rules makes one 103 answer.
                    let last = !matches!(
                        rules.http_request.get(index + 1).map(|r| &r.action),
                        Some(HttpAction::EarlyHint { .. })
                    );
                    let case = scope.frontend.plan.http.case_adjust_client.as_deref();
                    scope.vars.add_early_hint((name, value), case, last);
                    continue;
                }
                HttpAction::EarlyHint { .. } => continue,
                HttpAction::CacheUse(ref name) => {
                    super::cache::use_cache(scope, backend, name, input.filled(), head);
                    continue;
                }
                _ => {}
            }
            let buf = input.filled();
            request_action(
                &rule.action,
                &view,
                scope.vars,
                pages,
                buf,
                head,
                &mut scratch,
            )
        };
        let done = match step {
            Step::Next => Ok(()),
            Step::Stop => {
                scope.vars.note_final_rule(&rule.span);
                break;
            }
            // A rewrite that does not fit, under `strict-mode off`: counted, then ignored.
            Step::Answer(answer) if answer.internal && !strict => Err(RewriteFailed),
            Step::Answer(answer) => {
                scope.vars.note_final_rule(&rule.span);
                return Flow::Answer(answer);
            }
            Step::Rewrite(new_head) => rewrite::install_request(input, head, &new_head, limits),
            Step::Edit(edit) => rewrite::edit_request(input, head, &edit, limits).map(drop),
        };
        if done.is_err() {
            if !strict {
                sluice_runtime::proxy::count_failed_rewrite(scope.front(), backend, None, false);
                continue;
            }
            scope.vars.note_final_rule(&rule.span);
            let view = scope.view(backend, Some((input.filled(), head)));
            return Flow::Answer(Answer::failed_rewrite(pages, &view));
        }
    }
    // `option http-restrict-req-hdr-names`, after the proxy's `http-request` rules.
    let http = backend.map_or(&scope.frontend.plan.http, |b| &b.plan.http);
    match http.restrict_header_names {
        Some(HeaderNamePolicy::Reject) if has_restricted_name(input.filled(), head) => {
            sluice_runtime::proxy::count_denied_request(scope.front(), backend);
            let view = scope.view(backend, Some((input.filled(), head)));
            return Flow::Answer(Answer::page(error_page(pages, 403, &view), 403));
        }
        Some(HeaderNamePolicy::Delete)
            if has_restricted_name(input.filled(), head)
                && delete_restricted_names(input, head, limits).is_err() =>
        {
            let view = scope.view(backend, Some((input.filled(), head)));
            return Flow::Answer(Answer::failed_rewrite(pages, &view));
        }
        _ => {}
    }
    let view = scope.view(backend, Some((input.filled(), head)));
    for rule in &rules.redirects {
        if rule.applies(&view)
            && let Some(answer) = redirect(&rule.action, &view, input.filled(), head)
        {
            return Flow::Answer(answer);
        }
    }
    Flow::Continue
}

fn request_action<'a, 'e>(
    action: &'e HttpAction,
    view: &StreamView<'_>,
    vars: &Vars,
    pages: &[&'a ErrorPages],
    buf: &[u8],
    head: &RequestHead,
    scratch: &'e mut Vec<u8>,
) -> Step<'a, 'e> {
    let failed = |_: RewriteFailed| Step::Answer(Answer::failed_rewrite(pages, view));
    match action {
        HttpAction::SetLine { part, value } => {
            let value = render(value, view);
            match rewrite::request_line(buf, head, *part, &value) {
                Ok(new_head) => Step::Rewrite(new_head),
                Err(e) => failed(e),
            }
        }
        HttpAction::ReplaceLine {
            part,
            regex,
            replacement,
        } => {
            let current = rewrite::line_part(buf, head, *part);
            let Some(caps) = regex.captures(&current) else {
                return Step::Next;
            };
            let template = render(replacement, view);
            let value = rewrite::expand(&template, &caps);
            match rewrite::request_line(buf, head, *part, &value) {
                Ok(new_head) => Step::Rewrite(new_head),
                Err(e) => failed(e),
            }
        }
        HttpAction::NormalizeUri(normalizer) => {
            let current = rewrite::line_part(buf, head, LinePart::PathQ);
            match normalize::normalize(*normalizer, &current) {
                Ok(new) if new[..] == current[..] => Step::Next,
                Ok(new) => match rewrite::request_line(buf, head, LinePart::PathQ, &new) {
                    Ok(new_head) => Step::Rewrite(new_head),
                    Err(e) => failed(e),
                },
                // A `strict` normalizer met a malformed percent sequence.
                Err(normalize::Invalid) => {
                    Step::Answer(Answer::page(error_page(pages, 400, view), 400))
                }
            }
        }
        HttpAction::Auth { realm } => {
            // Without a realm, HAProxy names the proxy whose rule asks.
            let proxy = view
                .backend
                .map_or_else(|| view.frontend.name(), |b| b.name());
            let realm = realm.as_deref().unwrap_or(proxy);
            Step::Answer(ask_credentials(pages, view, realm))
        }
        other => common_action(other, view, vars, pages, buf, Some(head), scratch),
    }
}

/// `http-request auth` and `stats http-request auth`: a 401 asking for credentials in
/// `realm`, or for a request to a proxy (`option http-use-proxy-header`) a 407 asking for
/// the proxy's.
fn ask_credentials<'a>(pages: &[&'a ErrorPages], view: &StreamView<'_>, realm: &str) -> Answer<'a> {
    let status = if view.proxy_credentials() { 407 } else { 401 };
    auth_answer(&error_page(pages, status, view), status, realm)
}

/// The answer of `http-request auth`: the proxy's 401 page with every `WWW-Authenticate`
/// field replaced by a Basic challenge for `realm` (configuration.txt `http-request auth`),
/// or for a request to a proxy its 407 page with `Proxy-Authenticate` instead.
/// Like HAProxy, it keeps the connection alive (the client is expected to try again with
/// credentials) when the page has a Content-Length to frame it.
fn auth_answer<'a>(page: &[u8], status: u16, realm: &str) -> Answer<'a> {
    let challenge: &[u8] = if status == 407 {
        b"proxy-authenticate"
    } else {
        b"www-authenticate"
    };
    let head_end = page
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(page.len(), |p| p + 2);
    let (head, body) = page.split_at(head_end);
    let mut bytes = Vec::with_capacity(page.len() + 64 + realm.len());
    let mut framed = false;
    for (i, line) in head.split_inclusive(|&b| b == b'\n').enumerate() {
        let name = line.split(|&b| b == b':').next().unwrap_or_default();
        let name = name.trim_ascii();
        if i > 0
            && (name.eq_ignore_ascii_case(challenge) || name.eq_ignore_ascii_case(b"connection"))
        {
            continue;
        }
        framed |= i > 0 && name.eq_ignore_ascii_case(b"content-length");
        bytes.extend_from_slice(line);
    }
    push_field(
        challenge,
        format!("Basic realm=\"{realm}\"").as_bytes(),
        &mut bytes,
    );
    if !framed {
        bytes.extend_from_slice(b"connection: close\r\n");
    }
    bytes.extend_from_slice(body);
    Answer {
        bytes: Cow::Owned(bytes),
        status,
        close: !framed,
        denied: false,
        tarpit: None,
        internal: false,
        backend: None,
    }
}

/// The actions shared by requests and responses; a field edit is left to the caller, which
/// owns the head, with its computed value rendered into `scratch`.
fn common_action<'a, 'e>(
    action: &'e HttpAction,
    view: &StreamView<'_>,
    vars: &Vars,
    pages: &[&'a ErrorPages],
    buf: &[u8],
    request: Option<&RequestHead>,
    scratch: &'e mut Vec<u8>,
) -> Step<'a, 'e> {
    match action {
        HttpAction::Allow => Step::Stop,
        // Request and response rules stop at these before they get here
        // (`http_request_rules`, `process_response`); response rules never have `reject`.
        HttpAction::WaitForBody { .. }
        | HttpAction::Reject
        | HttpAction::SilentDrop
        | HttpAction::StrictMode(_)
        | HttpAction::CacheUse(_)
        | HttpAction::CacheStore(_) => Step::Next,
        HttpAction::SetLogLevel(level) => {
            vars.set_log_level(*level);
            Step::Next
        }
        HttpAction::DisableL7Retry => {
            vars.disable_l7_retries();
            Step::Next
        }
        HttpAction::SetPriority(part, expr) => {
            set_priority(vars, *part, expr, view);
            Step::Next
        }
        HttpAction::MarkClientPackets(field, value) => {
            mark_client_packets(vars, *field, value, view);
            Step::Next
        }
        // Request rules handle it (`http_request_rules`); response rules never have it.
        HttpAction::EarlyHint { .. } => Step::Next,
        HttpAction::SetTimeout { which, value } => {
            let time = match value {
                TimeoutValue::Fixed(time) => Some(*time),
                // Milliseconds; no value, or none above zero, changes nothing.
                TimeoutValue::Expr(expr) => expr
                    .eval(view)
                    .and_then(|sample| match sample.cast(SampleType::Int) {
                        Some(Sample::Int(ms)) => u64::try_from(ms).ok(),
                        _ => None,
                    })
                    .filter(|&ms| ms > 0)
                    .map(Duration::from_millis),
            };
            if let Some(time) = time {
                // Kept for the proxy whose rules set it: its own backend side only.
                let owner = view
                    .backend
                    .map_or(view.frontend.plan.id.uid, |b| b.plan.id.uid);
                vars.set_timeout(*which, owner, time);
            }
            Step::Next
        }
        HttpAction::EditPatterns {
            edit,
            file,
            key,
            value,
        } => {
            edit_patterns(view, (*edit, file), key, value.as_ref());
            Step::Next
        }
        HttpAction::SetAddress { part, expr } => {
            // A value that cannot be had, or is not an address (a port), changes nothing.
            if let Some(addresses) = expr
                .eval(view)
                .and_then(|value| changed_addresses(view.endpoints, *part, value))
            {
                vars.set_addresses(addresses, view.endpoints);
            }
            Step::Next
        }
        HttpAction::PrometheusExporter => {
            let body = sluice_runtime::prometheus::render(view.process);
            let bytes = format!(
                "HTTP/1.1 200 OK\r\nCache-Control: no-cache\r\nContent-Type: {}\r\nContent-Length: {}\r\n\r\n{body}",
                sluice_runtime::prometheus::CONTENT_TYPE,
                body.len()
            );
            Step::Answer(Answer {
                bytes: Cow::Owned(bytes.into_bytes()),
                status: 200,
                close: false,
                denied: false,
                tarpit: None,
                internal: false,
                backend: None,
            })
        }
        HttpAction::Deny(reply) => {
            match (request, view.backend) {
                // `http-response deny`: a denied response (`dresp`), not a request.
                (None, Some(backend)) => {
                    sluice_runtime::proxy::count_denied_response(view.front(), backend, view.server)
                }
                _ => sluice_runtime::proxy::count_denied_request(view.front(), view.backend),
            }
            if request.is_some() {
                vars.trackers.http_error();
            }
            Step::Answer(reply_answer(reply, view, pages, true))
        }
        HttpAction::Return(reply) => Step::Answer(reply_answer(reply, view, pages, false)),
        HttpAction::Tarpit(reply) => {
            sluice_runtime::proxy::count_denied_request(view.front(), view.backend);
            vars.trackers.http_error();
            Step::Answer(Answer {
                tarpit: Some(tarpit_delay(view)),
                ..reply_answer(reply, view, pages, true)
            })
        }
        HttpAction::Stick(action) => {
            let stage = if request.is_some() {
                Stage::HttpRequest
            } else {
                Stage::HttpResponse
            };
            crate::track::apply(action, view, stage);
            Step::Next
        }
        HttpAction::Redirect(r) => match request {
            Some(head) => redirect(r, view, buf, head).map_or(Step::Next, Step::Answer),
            None => redirect_without_request(r, view).map_or(Step::Next, Step::Answer),
        },
        HttpAction::SetHeader { name, value } => {
            Step::Edit(FieldEdit::Set(name, render_into(value, view, scratch)))
        }
        HttpAction::AddHeader { name, value } => {
            Step::Edit(FieldEdit::Add(name, render_into(value, view, scratch)))
        }
        HttpAction::DelHeader(matcher) => Step::Edit(FieldEdit::Delete(matcher)),
        HttpAction::ReplaceHeader {
            name,
            regex,
            replacement,
        } => Step::Edit(FieldEdit::ReplaceValue(
            name,
            regex,
            render_into(replacement, view, scratch),
        )),
        HttpAction::ReplaceValue {
            name,
            regex,
            replacement,
        } => Step::Edit(FieldEdit::ReplaceElements(
            name,
            regex,
            render_into(replacement, view, scratch),
        )),
        HttpAction::SetVar { name, value } => {
            set_var(vars, name, value, view);
            Step::Next
        }
        HttpAction::UnsetVar { name } => {
            vars.unset(name);
            Step::Next
        }
        HttpAction::Capture { expr, slot } => {
            capture_sample(expr, *slot, request.is_none(), view);
            Step::Next
        }
        // Request-line and status actions are handled by the callers that own those heads;
        // the configuration only accepts them on the matching side.
        HttpAction::SetLine { .. }
        | HttpAction::ReplaceLine { .. }
        | HttpAction::SetStatus { .. }
        | HttpAction::Auth { .. }
        | HttpAction::NormalizeUri(_) => Step::Next,
    }
}

/// `set-map`, `del-map`, `add-acl`, `del-acl`: the entries of a loaded map or ACL file
/// change for every later lookup, as the CLI's `set map`... change them. `set-map` replaces
/// the value of the key's entries, or adds one; `add-acl` adds a pattern not there yet.
fn edit_patterns(
    view: &StreamView<'_>,
    (edit, file): (PatternEdit, &str),
    key: &LogFormat,
    value: Option<&LogFormat>,
) {
    // Checked at start-up: the configuration loads the file.
    let Some(patterns) = view.process.maps.find_ref(file, edit.of_map()) else {
        return;
    };
    // Entries are text: a key or value that is not (bytes a client sent) changes nothing,
    // rather than an altered form a lookup of the same bytes would never find.
    let Ok(key) = String::from_utf8(render(key, view)) else {
        return;
    };
    // A value that no view can read (a map of numbers given a word) changes nothing, as in
    // HAProxy.
    let _ = match edit {
        PatternEdit::SetMap => {
            let value = value.map(|v| render(v, view)).unwrap_or_default();
            let Ok(value) = String::from_utf8(value) else {
                return;
            };
            patterns.set_or_add(&key, &value)
        }
        PatternEdit::AddAcl => patterns.add_if_absent(&key),
        PatternEdit::DelMap | PatternEdit::DelAcl => {
            patterns.delete_key(&key);
            Ok(())
        }
    };
}

/// How long `http-request tarpit` holds a request: the `timeout tarpit` of the proxy whose
/// rule applied, else its `timeout connect` when it has servers (HAProxy 2.6 sets that
/// default only for proxies with a backend side; a plain frontend answers at once).
fn tarpit_delay(view: &StreamView<'_>) -> std::time::Duration {
    let (timeouts, has_servers) = match view.backend {
        Some(b) => (&b.plan.timeouts, true),
        None => (
            &view.frontend.plan.timeouts,
            view.frontend.plan.id.kind.has_backend(),
        ),
    };
    timeouts
        .tarpit
        .or(if has_servers { timeouts.connect } else { None })
        .unwrap_or_default()
}

/// Builds the answer of a `return`, `deny` or `tarpit` rule (`denied` for the last two). As in
/// HAProxy 2.6, the connection goes on after it when the answer has a length to frame it and
/// the request left nothing to skip (the session decides); a page without one ends it.
fn reply_answer<'a>(
    reply: &Reply,
    view: &dyn Context,
    pages: &[&'a ErrorPages],
    denied: bool,
) -> Answer<'a> {
    match &reply.body {
        ReplyBody::ErrorPage => {
            // The error page with the rule's extra fields after its status line.
            let page = page_without_connection(&error_page(pages, reply.status, view));
            let line_end = page
                .windows(2)
                .position(|w| w == b"\r\n")
                .map_or(page.len(), |p| p + 2);
            let mut bytes = page[..line_end].to_vec();
            write_reply_fields(reply, view, &mut bytes);
            bytes.extend_from_slice(&page[line_end..]);
            return Answer {
                close: !has_length(&bytes),
                bytes: Cow::Owned(bytes),
                status: reply.status,
                denied,
                tarpit: None,
                internal: false,
                backend: None,
            };
        }
        ReplyBody::Raw(bytes) => {
            let bytes = page_without_connection(bytes);
            return Answer {
                close: !has_length(&bytes),
                bytes: Cow::Owned(bytes),
                status: reply.status,
                denied,
                tarpit: None,
                internal: false,
                backend: None,
            };
        }
        ReplyBody::Empty | ReplyBody::Fixed(_) | ReplyBody::Format(_) => {}
    }
    Answer {
        bytes: Cow::Owned(reply_bytes(reply, view)),
        status: reply.status,
        close: false,
        denied,
        tarpit: None,
        internal: false,
        backend: None,
    }
}

/// The answer a reply with a body of its own (none, fixed or formatted) makes for `view`: its
/// status line, its fields, the length and type, the body.
fn reply_bytes(reply: &Reply, view: &dyn Context) -> Vec<u8> {
    let body: Cow<'_, [u8]> = match &reply.body {
        ReplyBody::Fixed(bytes) => Cow::Borrowed(&bytes[..]),
        ReplyBody::Format(fmt) => Cow::Owned(render(fmt, view)),
        // The others are complete pages, built by their callers.
        ReplyBody::Empty | ReplyBody::Raw(_) | ReplyBody::ErrorPage => Cow::Borrowed(&[]),
    };
    let mut bytes = Vec::with_capacity(128 + body.len());
    status_line(reply.status, &mut bytes);
    write_reply_fields(reply, view, &mut bytes);
    bytes.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    if let Some(content_type) = &reply.content_type {
        push_field(b"content-type", content_type.as_bytes(), &mut bytes);
    }
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(&body);
    bytes
}

/// `page` without its `Connection` field: whether the connection goes on after the answer
/// is the session's to say (it adds `connection: close` when it ends it), not the page's. A
/// page the response parser cannot read is left as it is (it will not be found framed).
pub(super) fn page_without_connection(page: &[u8]) -> Vec<u8> {
    let Ok(Parse::Complete(head)) = parse_response(page, &Limits::default()) else {
        return page.to_vec();
    };
    let (head_bytes, body) = page.split_at(head.head_len);
    let mut bytes = Vec::with_capacity(page.len());
    for (i, line) in head_bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        let name = line.split(|&b| b == b':').next().unwrap_or_default();
        if i > 0 && name.trim_ascii().eq_ignore_ascii_case(b"connection") {
            continue;
        }
        bytes.extend_from_slice(line);
    }
    bytes.extend_from_slice(body);
    bytes
}

/// Whether a page of the proxy's own frames itself: a head the response parser reads, and a
/// `Content-Length` that is its body's exact length. Only then may the connection go on
/// after it; otherwise its end is what delimits the page.
pub(super) fn has_length(page: &[u8]) -> bool {
    let Ok(Parse::Complete(head)) = parse_response(page, &Limits::default()) else {
        return false;
    };
    let body = (page.len() - head.head_len) as u64;
    let mut lengths = head.header_values(page, "content-length");
    let exact = lengths
        .next()
        .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok())
        == Some(body);
    exact && lengths.next().is_none()
}

fn write_reply_fields(reply: &Reply, view: &dyn Context, out: &mut Vec<u8>) {
    for (name, value) in &reply.headers {
        push_field(name.as_bytes(), &render(value, view), out);
    }
}

fn status_line(status: u16, out: &mut Vec<u8>) {
    out.extend_from_slice(format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status)).as_bytes());
}

/// Appends `name: value` unless the value could break the head (it is then left out: a
/// computed value must never inject a line).
fn push_field(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    let valid =
        std::str::from_utf8(name).is_ok_and(|n| sluice_http::encode::is_valid_field(n, value));
    if valid {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
}

/// Builds a redirect for a request; `None` when `ignore-empty` skips it.
fn redirect<'a>(
    r: &Redirect,
    view: &dyn Context,
    buf: &[u8],
    head: &RequestHead,
) -> Option<Answer<'a>> {
    let target = head.target_bytes(buf);
    let parts = rewrite::split_target(target);
    // The path and query as the redirect repeats them (`*` and a missing path become `/`).
    let path = if parts.path.is_empty() || parts.path == b"*" {
        &b"/"[..]
    } else {
        parts.path
    };
    let mut location = Vec::with_capacity(64 + target.len());
    let (value, with_uri) = match &r.kind {
        RedirectKind::Location(fmt) => (render(fmt, view), false),
        RedirectKind::Prefix(fmt) => (render(fmt, view), true),
        RedirectKind::Scheme(fmt) => {
            let mut v = render(fmt, view);
            v.extend_from_slice(b"://");
            if let Some(host) = head.header_values(buf, "host").next() {
                v.extend_from_slice(host);
            }
            (v, true)
        }
    };
    if r.ignore_empty && value.is_empty() {
        return None;
    }
    if with_uri {
        // A prefix of exactly "/" inserts nothing before the path (configuration.txt).
        if !(matches!(r.kind, RedirectKind::Prefix(_)) && value == b"/") {
            location.extend_from_slice(&value);
        }
        location.extend_from_slice(path);
        if r.append_slash && !path.ends_with(b"/") {
            location.push(b'/');
        }
        if !r.drop_query
            && let Some(q) = parts.query
        {
            location.push(b'?');
            location.extend_from_slice(q);
        }
    } else {
        location.extend_from_slice(&value);
    }
    Some(redirect_answer(r, &location))
}

/// A redirect from a response rule: only `location` needs no request.
fn redirect_without_request<'a>(r: &Redirect, view: &dyn Context) -> Option<Answer<'a>> {
    let RedirectKind::Location(fmt) = &r.kind else {
        return None;
    };
    let location = render(fmt, view);
    if r.ignore_empty && location.is_empty() {
        return None;
    }
    Some(redirect_answer(r, &location))
}

fn redirect_answer<'a>(r: &Redirect, location: &[u8]) -> Answer<'a> {
    let mut bytes = Vec::with_capacity(128 + location.len());
    status_line(r.code, &mut bytes);
    bytes.extend_from_slice(b"content-length: 0\r\n");
    push_field(b"location", location, &mut bytes);
    // Temporary redirects must not be cached; permanent ones are meant to be.
    if matches!(r.code, 302 | 303 | 307) {
        bytes.extend_from_slice(b"cache-control: no-cache\r\n");
    }
    if let Some(cookie) = &r.cookie {
        push_field(b"set-cookie", cookie.as_bytes(), &mut bytes);
    }
    bytes.extend_from_slice(b"\r\n");
    Answer {
        bytes: Cow::Owned(bytes),
        status: r.code,
        close: false,
        denied: false,
        tarpit: None,
        internal: false,
        backend: None,
    }
}

/// What the response rules decided.
pub enum ResponseVerdict<'a> {
    /// Relay the (possibly rewritten) response.
    Relay,
    /// Send this instead of the server's response (which is then discarded).
    Replace(Answer<'a>),
    /// `http-response silent-drop`: the client's connection disappears without an answer.
    Drop,
}

/// `http-response wait-for-body`: the response rules wait for the body (at most `time`,
/// until it is whole, `at_least` bytes of it came, or a full buffer), then run again from
/// `resume`.
#[derive(Clone, Copy, Debug)]
pub struct ResponseWait {
    /// The longest wait.
    pub time: std::time::Duration,
    /// Enough body bytes to go on with (0: the whole body).
    pub at_least: u64,
    /// Where the rules go on.
    pub resume: ResponseResume,
}

/// Where the response rules go on after a wait for the body: at rule `next` of rule set
/// `set` (the backend's, then the frontend's). The rules before it ran once and do not run
/// again.
#[derive(Clone, Copy, Debug)]
pub struct ResponseResume {
    set: usize,
    next: RulePosition,
}

/// The request as response rules see it (`method`, `req.ver`...), when it was kept.
pub type KeptRequest<'r> = Option<(&'r [u8], &'r RequestHead)>;

/// Runs the backend's `http-response` rules, then the frontend's (once for a `listen`), from
/// where a `wait-for-body` left them when `resume` says so; `Err` when a `wait-for-body`
/// stops them. The `http-after-response` rules come later ([`after_response`]), or over
/// the proxy's own answer when one replaces the response. `server` is the server that
/// answered and its connection (none for a response from the cache).
#[allow(clippy::too_many_arguments)]
pub fn process_response<'a>(
    scope: &Scope<'a>,
    backend: &'a Backend,
    server: Option<(&Server, BorrowedFd<'_>)>,
    request: KeptRequest<'_>,
    input: &mut InBuf,
    head: &mut ResponseHead,
    (limits, bufsize): (&Limits, usize),
    resume: Option<ResponseResume>,
) -> Result<ResponseVerdict<'a>, ResponseWait> {
    let frontend = scope.frontend;
    let (server, server_socket) = (server.map(|s| s.0), server.map(|s| s.1));
    if resume.is_none() {
        capture_headers(scope, true, input.filled(), head.headers());
    }
    let pages = [&backend.plan.error_pages, &frontend.plan.error_pages];
    let limits = limits.for_rewrites(bufsize);
    let own = backend.plan.id.uid != frontend.plan.id.uid;
    let sets = std::iter::once(&backend.plan.rules.http_response)
        .chain(own.then_some(&frontend.plan.rules.http_response));
    let mut scratch = Scratch::take();
    let (first_set, resumed) = resume.map_or((0, RulePosition::START), |r| (r.set, r.next));
    for (set, rules) in sets.enumerate().skip(first_set) {
        let from = if set == first_set {
            resumed
        } else {
            RulePosition::START
        };
        // `strict-mode`: on at the start of each rule set, as it was on a resume.
        let mut strict = from.strict;
        for (index, rule) in rules.iter().enumerate().skip(from.next) {
            let step = {
                let view = StreamView {
                    server,
                    server_socket,
                    response: Some((input.filled(), head)),
                    ..scope.view(Some(backend), request)
                };
                if !rule.applies(&view) {
                    continue;
                }
                match rule.action {
                    HttpAction::WaitForBody { time, at_least } => {
                        let resume = ResponseResume {
                            set,
                            next: RulePosition {
                                next: index + 1,
                                strict,
                            },
                        };
                        return Err(ResponseWait {
                            time,
                            at_least,
                            resume,
                        });
                    }
                    // Counted before the client can see it.
                    HttpAction::SilentDrop => {
                        sluice_runtime::proxy::count_dropped_response(scope.front(), backend);
                        scope.vars.note_final_rule(&rule.span);
                        return Ok(ResponseVerdict::Drop);
                    }
                    HttpAction::StrictMode(on) => {
                        strict = on;
                        continue;
                    }
                    HttpAction::CacheStore(ref name) => {
                        super::cache::mark_store(scope, name, input.filled(), head);
                        continue;
                    }
                    _ => {}
                }
                let buf = input.filled();
                response_action(
                    &rule.action,
                    &view,
                    scope.vars,
                    &pages,
                    buf,
                    head,
                    &mut scratch,
                )
            };
            let rewritten = match step {
                Step::Next => continue,
                Step::Stop => {
                    scope.vars.note_final_rule(&rule.span);
                    break;
                }
                Step::Answer(answer) => Err(Some(answer)),
                Step::Rewrite(new_head) => {
                    rewrite::install_response(input, head, &new_head, &limits).map_err(|_| None)
                }
                Step::Edit(edit) => rewrite::edit_response(input, head, &edit, &limits)
                    .map(drop)
                    .map_err(|_| None),
            };
            let answer = match rewritten {
                Ok(()) => continue,
                Err(Some(answer)) => answer,
                // A rewrite that does not fit is the proxy's failure: a 500, as in HAProxy.
                Err(None) => {
                    let view = StreamView {
                        server,
                        server_socket,
                        response: Some((input.filled(), head)),
                        ..scope.view(Some(backend), request)
                    };
                    Answer::failed_rewrite(&pages, &view)
                }
            };
            if answer.internal {
                sluice_runtime::proxy::count_failed_rewrite(
                    scope.front(),
                    Some(backend),
                    server,
                    strict,
                );
                // Under `strict-mode off`, counted, then ignored.
                if !strict {
                    continue;
                }
            }
            scope.vars.note_final_rule(&rule.span);
            let answer = finish_answer(scope, Some(backend), request, answer);
            return Ok(ResponseVerdict::Replace(answer));
        }
    }
    Ok(ResponseVerdict::Relay)
}

/// Runs the `http-after-response` rules over a server's response the proxy relays, last, on
/// the response as the other rules, the persistence cookie and `option checkcache` left it
/// (as HAProxy runs them). A rewrite that does not fit is counted (`wrew`); under
/// `strict-mode on`, the default, it is an internal error and `Err` carries the 500 to send
/// instead (over which the rules run once more, as HAProxy runs them over its own answers);
/// under `strict-mode off` the response goes on without it.
pub fn after_response<'a>(
    scope: &Scope<'a>,
    (backend, server): (&'a Backend, Option<&Server>),
    request: KeptRequest<'_>,
    input: &mut InBuf,
    head: &mut ResponseHead,
    (limits, bufsize): (&Limits, usize),
) -> Result<(), Answer<'a>> {
    // Most responses meet no such rule: nothing is taken for them.
    let mut sets = after_sets(scope.frontend, Some(backend)).peekable();
    if sets.peek().is_none() {
        return Ok(());
    }
    let limits = limits.for_rewrites(bufsize);
    let mut scratch = Scratch::take();
    for rules in sets {
        // `strict-mode`, on at the start of each rule set.
        let mut strict = true;
        for rule in rules {
            let step = {
                let view = StreamView {
                    server,
                    response: Some((input.filled(), head)),
                    ..scope.view(Some(backend), request)
                };
                if !rule.applies(&view) {
                    continue;
                }
                if let HttpAction::StrictMode(on) = rule.action {
                    strict = on;
                    continue;
                }
                let buf = input.filled();
                response_action(
                    &rule.action,
                    &view,
                    scope.vars,
                    &[],
                    buf,
                    head,
                    &mut scratch,
                )
            };
            let fitted = match step {
                Step::Stop => {
                    scope.vars.note_final_rule(&rule.span);
                    break;
                }
                Step::Next => continue,
                Step::Rewrite(new_head) => {
                    rewrite::install_response(input, head, &new_head, &limits).is_ok()
                }
                Step::Edit(edit) => rewrite::edit_response(input, head, &edit, &limits).is_ok(),
                // Only a failed rewrite answers here (the configuration allows no answering
                // action).
                Step::Answer(_) => false,
            };
            if fitted {
                continue;
            }
            let front = scope.front();
            sluice_runtime::proxy::count_failed_rewrite(front, Some(backend), server, strict);
            if strict {
                scope.vars.note_final_rule(&rule.span);
                let pages = [&backend.plan.error_pages, &scope.frontend.plan.error_pages];
                let view = StreamView {
                    server,
                    response: Some((input.filled(), head)),
                    ..scope.view(Some(backend), request)
                };
                let answer = Answer::failed_rewrite(&pages, &view);
                return Err(finish_answer(scope, Some(backend), request, answer));
            }
        }
    }
    Ok(())
}

/// Fills the frontend's `capture request|response header` slots from a head, before any
/// rule runs (HAProxy captures them as the head arrives); a request starts the
/// transaction's captures.
fn capture_headers(scope: &Scope<'_>, response: bool, buf: &[u8], headers: &[HeaderSpan]) {
    let rules = &scope.frontend.plan.rules;
    // A request continuing a TCP frontend's inspected stream keeps what it captured.
    if !response && scope.vars.inspected() == Inspected::None {
        scope.vars.start_captures(rules);
    }
    if let Some((name, len)) = &rules.cookie_capture
        && let Some(cookie) = captured_cookie(buf, headers, response, name.as_bytes())
    {
        // No longer than `tune.http.cookielen`, whatever the capture's `len`.
        let len = (*len).min(scope.process.global.http_cookielen());
        scope.vars.capture_cookie(response, cookie, len);
    }
    let slots = if response {
        &rules.response_captures
    } else {
        &rules.request_captures
    };
    for (index, slot) in slots.iter().enumerate() {
        let Some(name) = &slot.header else {
            continue;
        };
        if let Some(value) = header_values(buf, headers, name).next() {
            scope.vars.capture(response, index, value, slot.len, true);
        }
    }
}

/// `capture cookie NAME`: the first `name=value` whose name starts with `name`, among the
/// request's `Cookie` fields, or the response's `Set-Cookie` fields (where only each field's
/// first cookie counts, the rest being its attributes).
fn captured_cookie<'b>(
    buf: &'b [u8],
    headers: &'b [HeaderSpan],
    response: bool,
    name: &[u8],
) -> Option<&'b [u8]> {
    let trim = |c: &'b [u8]| c.trim_ascii();
    if response {
        header_values(buf, headers, "set-cookie")
            .filter_map(|value| value.split(|&b| b == b';').next().map(trim))
            .find(|cookie| cookie.starts_with(name))
    } else {
        header_values(buf, headers, "cookie")
            .flat_map(|value| value.split(|&b| b == b';').map(trim))
            .find(|cookie| cookie.starts_with(name))
    }
}

/// `http-request|http-response capture`: the sample, as text, into a frontend slot.
fn capture_sample(
    action_expr: &sluice_sample::Expr,
    slot: usize,
    response: bool,
    view: &StreamView<'_>,
) {
    let rules = &view.frontend.plan.rules;
    let slots = if response {
        &rules.response_captures
    } else {
        &rules.request_captures
    };
    // A backend rule may name a slot this frontend does not have: nothing is captured.
    let Some(declared) = slots.get(slot) else {
        return;
    };
    if let Some(sample) = action_expr.eval(view) {
        view.vars
            .capture(response, slot, &sample.to_bytes(), declared.len, false);
    }
}

/// `tcp-request content capture`: `sample` into request slot `slot` of the frontend, which
/// declared it with the rule.
fn store_capture(view: &StreamView<'_>, slot: usize, sample: &Sample<'_>) {
    if let Some(declared) = view.frontend.plan.rules.request_captures.get(slot) {
        view.vars
            .capture(false, slot, &sample.to_bytes(), declared.len, false);
    }
}

/// The `http-after-response` rule sets of a stream: the backend's, then the frontend's
/// (once for a `listen` section), as HAProxy evaluates them.
fn after_sets<'r>(
    frontend: &'r Frontend,
    backend: Option<&'r Backend>,
) -> impl Iterator<Item = &'r [Rule<HttpAction>]> {
    let back = backend
        .filter(|b| b.plan.id.uid != frontend.plan.id.uid)
        .map(|b| &b.plan.rules.http_after_response[..]);
    back.into_iter()
        .chain(std::iter::once(
            &frontend.plan.rules.http_after_response[..],
        ))
        .filter(|set| !set.is_empty())
}

/// Runs the `http-after-response` rules over an answer the proxy makes itself (`deny`,
/// `return`, `redirect`, `auth`, an error page), whose status may change.
pub fn finish_answer<'a>(
    scope: &Scope<'_>,
    backend: Option<&Backend>,
    request: KeptRequest<'_>,
    answer: Answer<'a>,
) -> Answer<'a> {
    match after_response_bytes(scope, backend, request, &answer.bytes, false) {
        Some((bytes, status)) => Answer {
            bytes: Cow::Owned(bytes),
            status,
            ..answer
        },
        None => answer,
    }
}

/// Runs the `http-after-response` rules over an error page the proxy sends (400, 408, 502,
/// 503, 504...), configured or built for this answer, returning the page to send.
pub fn finish_page<'p>(
    scope: &Scope<'_>,
    backend: Option<&Backend>,
    page: Cow<'p, [u8]>,
) -> Cow<'p, [u8]> {
    match after_response_bytes(scope, backend, None, &page, false) {
        Some((bytes, _)) => Cow::Owned(bytes),
        None => page,
    }
}

/// The `http-after-response` rules over a complete response in `bytes`, then the field
/// names the frontend's bogus clients want (`option h1-case-adjust-bogus-client`); `None`
/// when nothing changed it (or it is not a response our parser takes, such as an empty
/// page).
///
/// An answer must fit in one buffer (`tune.bufsize`), as HAProxy builds its own in one. A
/// rewrite that does not fit, or that a field cannot take, is counted (`wrew`); under
/// `strict-mode on` the answer becomes the 500 page, over which the rules run once more
/// (`replacing`), unless they fail on it too: then the page goes as it is.
fn after_response_bytes(
    scope: &Scope<'_>,
    backend: Option<&Backend>,
    request: KeptRequest<'_>,
    bytes: &[u8],
    replacing: bool,
) -> Option<(Vec<u8>, u16)> {
    let case = scope.frontend.plan.http.case_adjust_client.as_deref();
    let mut sets = after_sets(scope.frontend, backend).peekable();
    if sets.peek().is_none() && case.is_none() {
        return None;
    }
    let bufsize = scope.process.global.bufsize() as usize;
    let limits = Limits::default().for_rewrites(bufsize);
    // An `errorfile` may be larger than a buffer: it is sent, and its rules run, all the same.
    let received = Limits::default().for_rewrites(bufsize.max(bytes.len()));
    let Ok(Parse::Complete(mut head)) = parse_response(bytes, &received) else {
        return None;
    };
    let mut owned: Option<Vec<u8>> = None;
    let mut scratch = Scratch::take();
    for rules in sets {
        // `strict-mode`, on at the start of each rule set.
        let mut strict = true;
        for rule in rules {
            let step = {
                let current = owned.as_deref().unwrap_or(bytes);
                let view = StreamView {
                    response: Some((current, &head)),
                    ..scope.view(backend, request)
                };
                if !rule.applies(&view) {
                    continue;
                }
                if let HttpAction::StrictMode(on) = rule.action {
                    strict = on;
                    continue;
                }
                response_action(
                    &rule.action,
                    &view,
                    scope.vars,
                    &[],
                    current,
                    &head,
                    &mut scratch,
                )
            };
            let current = owned.as_deref().unwrap_or(bytes);
            let new_head = match step {
                Step::Stop => {
                    scope.vars.note_final_rule(&rule.span);
                    break;
                }
                Step::Next => continue,
                Step::Rewrite(new_head) => Ok(new_head),
                // The page is not in a buffer of ours: its head is rebuilt.
                Step::Edit(edit) => match rewrite::response_fields(current, &head, &edit) {
                    Ok(Some(new_head)) => Ok(new_head),
                    Ok(None) => continue,
                    Err(failed) => Err(failed),
                },
                Step::Answer(_) => Err(RewriteFailed),
            };
            let rewritten = new_head.ok().and_then(|mut new_head| {
                let body = current.get(head.head_len..).unwrap_or_default();
                if new_head.len() + body.len() > bufsize {
                    return None;
                }
                new_head.extend_from_slice(body);
                match parse_response(&new_head, &limits) {
                    Ok(Parse::Complete(new)) => Some((new, new_head)),
                    _ => None,
                }
            });
            if let Some((new, new_bytes)) = rewritten {
                head = new;
                owned = Some(new_bytes);
                continue;
            }
            sluice_runtime::proxy::count_failed_rewrite(scope.front(), backend, None, strict);
            if !strict {
                continue;
            }
            scope.vars.note_final_rule(&rule.span);
            if replacing {
                return None;
            }
            let front_pages = &scope.frontend.plan.error_pages;
            let view = scope.view(backend, request);
            let page = match backend {
                Some(b) => error_page(&[&b.plan.error_pages, front_pages], 500, &view),
                None => error_page(&[front_pages], 500, &view),
            };
            let replaced = after_response_bytes(scope, backend, request, &page, true);
            return Some(replaced.unwrap_or_else(|| (page.to_vec(), 500)));
        }
    }
    if let Some(case) = case {
        let current = owned.as_deref().unwrap_or(bytes);
        let mut adjusted = Vec::with_capacity(current.len());
        let edits = HeadEdits {
            case: Some(case),
            ..HeadEdits::default()
        };
        sluice_http::encode::encode_response(current, &head, &edits, &mut adjusted);
        adjusted.extend_from_slice(current.get(head.head_len..).unwrap_or_default());
        owned = Some(adjusted);
    }
    owned.map(|bytes| (bytes, head.status))
}

fn response_action<'a, 'e>(
    action: &'e HttpAction,
    view: &StreamView<'_>,
    vars: &Vars,
    pages: &[&'a ErrorPages],
    buf: &[u8],
    head: &ResponseHead,
    scratch: &'e mut Vec<u8>,
) -> Step<'a, 'e> {
    let failed = || Step::Answer(Answer::failed_rewrite(pages, view));
    match action {
        HttpAction::SetStatus { status, reason } => {
            let reason = reason
                .as_deref()
                .unwrap_or_else(|| reason_phrase(*status))
                .as_bytes();
            match rewrite::response_status(buf, head, *status, reason) {
                Ok(new_head) => Step::Rewrite(new_head),
                Err(_) => failed(),
            }
        }
        other => common_action(other, view, vars, pages, buf, None, scratch),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn set_src_and_set_dst_change_one_part_of_the_addresses() {
        use sluice_sample::Sample;
        let addresses = Endpoints {
            client: Some("127.0.0.1:5000".parse().unwrap()),
            local: None,
        };
        // A new address keeps the port, across families too; text is read as an address.
        let moved = changed_addresses(addresses, AddressPart::SourceIp, Sample::str(b"::1"));
        assert_eq!(moved.unwrap().client, Some("[::1]:5000".parse().unwrap()));
        // A port on a side with no address goes with 0.0.0.0.
        let port = changed_addresses(addresses, AddressPart::DestinationPort, Sample::Int(80));
        assert_eq!(port.unwrap().local, Some("0.0.0.0:80".parse().unwrap()));
        // Values that are no address or port change nothing.
        let text = Sample::str(b"not an address");
        assert_eq!(
            changed_addresses(addresses, AddressPart::SourceIp, text),
            None
        );
        let big = Sample::Int(70_000);
        assert_eq!(
            changed_addresses(addresses, AddressPart::SourcePort, big),
            None
        );
    }

    #[test]
    fn an_error_page_leaves_the_connection_to_the_session_and_closes_only_unframed() {
        let framed = page_without_connection(error_response(403));
        let text = String::from_utf8_lossy(&framed);
        assert!(text.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{text}");
        assert!(!text.contains("connection:"), "{text}");
        assert!(text.ends_with("</body></html>\n"), "{text}");
        assert!(has_length(&framed));
        let unframed = page_without_connection(b"HTTP/1.1 403 No\r\nConnection: close\r\n\r\nbody");
        assert_eq!(unframed, b"HTTP/1.1 403 No\r\n\r\nbody");
        assert!(
            !has_length(&unframed),
            "no length: the connection must end to frame it"
        );
        // A wrong length, an empty page, and a head ended by bare LFs whose body says
        // `Connection:` (not a field).
        assert!(!has_length(
            b"HTTP/1.1 403 No\r\nContent-Length: 9\r\n\r\nbody"
        ));
        assert!(!has_length(b""));
        let lf = b"HTTP/1.1 403 No\nContent-Length: 20\n\nConnection: close\nx\n";
        assert!(has_length(lf));
        assert_eq!(
            page_without_connection(lf),
            lf.to_vec(),
            "the body is not the head"
        );
    }

    #[test]
    fn the_auth_answer_replaces_the_challenge_and_keeps_the_connection() {
        let page = error_response(401);
        let answer = auth_answer(page, 401, "My app");
        let text = String::from_utf8_lossy(&answer.bytes).into_owned();
        assert!(!answer.close);
        assert!(text.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{text}");
        assert!(
            text.contains("\r\nwww-authenticate: Basic realm=\"My app\"\r\n\r\n<html>"),
            "{text}"
        );
        assert!(!text.contains("connection:"), "{text}");
        // A custom page's own challenge is replaced; without a length it closes.
        let custom = b"HTTP/1.1 401 No\r\nWWW-Authenticate: Digest x\r\n\r\nbody";
        let answer = auth_answer(custom, 401, "r");
        assert!(answer.close);
        assert_eq!(
            &answer.bytes[..],
            b"HTTP/1.1 401 No\r\nwww-authenticate: Basic realm=\"r\"\r\nconnection: close\r\n\r\nbody"
        );
        // A request to a proxy is asked for the proxy's credentials.
        let answer = auth_answer(error_response(407), 407, "p");
        let text = String::from_utf8_lossy(&answer.bytes).into_owned();
        assert_eq!(answer.status, 407);
        assert!(text.starts_with("HTTP/1.1 407 "), "{text}");
        assert!(
            text.contains("\r\nproxy-authenticate: Basic realm=\"p\"\r\n"),
            "{text}"
        );
        assert!(!text.contains("www-authenticate"), "{text}");
    }

    #[test]
    fn the_monitor_page_announces_its_length() {
        let text = std::str::from_utf8(MONITOR_OK).unwrap_or_default();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.contains(&format!("content-length: {}", body.len())));
    }
}
