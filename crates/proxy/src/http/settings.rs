//! The HTTP settings of one frontend/backend pair, combined once per session.
//!
//! HAProxy combines a frontend's and a backend's options with fixed rules (configuration.txt §4
//! and §4.2): the connection mode is the stronger of the two (close > server-close >
//! keep-alive), `option forwardfor` applies if either side sets it (the backend's header name
//! winning), and each timeout comes from the side that owns it.

use sluice_config::errors::ErrorPages;
use sluice_config::http_options::{AddressHeader, HttpConnMode, HttpReuse};
use sluice_http::encode::HeaderCase;
use sluice_http::error::error_response;
use sluice_http::head::Limits;
use sluice_runtime::proxy::{Backend, Frontend};
use sluice_sample::Context;
use std::borrow::Cow;
use std::time::Duration;

/// Buffer sizes and head limits from the global section (`tune.bufsize`, `tune.maxrewrite`,
/// `tune.http.maxhdr`, `h1-accept-payload-with-any-method`).
#[derive(Clone, Copy, Debug)]
pub struct BufferSizes {
    /// Size of each I/O buffer.
    pub bufsize: u32,
    /// Part of a buffer kept free for header rewrites.
    pub maxrewrite: u32,
    /// The most lines of a received head, start line included.
    pub maxhdr: u16,
    /// `h1-accept-payload-with-any-method`.
    pub any_method_payload: bool,
}

/// What one HTTP session needs to know about its proxies.
#[derive(Clone, Debug)]
pub struct HttpSettings<'a> {
    /// Effective connection mode.
    pub conn_mode: HttpConnMode,
    /// `option forwardfor`, after combining both sides.
    pub forwardfor: Option<&'a AddressHeader>,
    /// `option originalto`, after combining both sides.
    pub originalto: Option<&'a AddressHeader>,
    /// `http-send-name-header` of the backend.
    pub send_name_header: Option<&'a str>,
    /// `http-reuse` of the backend.
    pub reuse: HttpReuse,
    /// Limits and tolerance of the request parser.
    pub request_limits: Limits,
    /// `h1-accept-payload-with-any-method`: an HTTP/1.0 GET, HEAD or DELETE may have a body.
    pub any_method_payload: bool,
    /// Limits and tolerance of the response parser.
    pub response_limits: Limits,
    /// Size of each I/O buffer (`tune.bufsize`).
    pub bufsize: usize,
    /// `option http-buffer-request` on the frontend: the rules wait for the body.
    pub buffer_request: bool,
    /// `option http-pretend-keepalive` (the backend's).
    pub pretend_keepalive: bool,
    /// `option abortonclose` (the backend's).
    pub abort_on_close: bool,
    /// `option checkcache` (the backend's).
    pub check_cache: bool,
    /// Field names adjusted in the heads sent to the client (`h1-case-adjust`, under the
    /// frontend's `option h1-case-adjust-bogus-client`).
    pub client_case: Option<&'a HeaderCase>,
    /// Field names adjusted in the heads sent to the server (under the backend's
    /// `option h1-case-adjust-bogus-server`).
    pub server_case: Option<&'a HeaderCase>,
    /// `timeout client`.
    pub client: Option<Duration>,
    /// `timeout server`.
    pub server: Option<Duration>,
    /// `timeout http-request`.
    pub http_request: Option<Duration>,
    /// `timeout http-keep-alive`.
    pub http_keep_alive: Option<Duration>,
    /// `timeout tunnel` (WebSocket and CONNECT tunnels).
    pub tunnel: Option<Duration>,
    /// `timeout client-fin`.
    pub client_fin: Option<Duration>,
    /// `timeout server-fin`.
    pub server_fin: Option<Duration>,
    /// The frontend's custom error pages.
    pub front_pages: &'a ErrorPages,
    /// The backend's custom error pages (the frontend's when it has no backend).
    pub back_pages: &'a ErrorPages,
}

impl<'a> HttpSettings<'a> {
    /// Combines `frontend`'s and its default backend's settings (the frontend's own when it
    /// has none).
    pub fn new(frontend: &'a Frontend, buffers: BufferSizes) -> Self {
        Self::with_backend(frontend, frontend.backend.as_deref(), buffers)
    }

    /// Combines `frontend`'s and `backend`'s settings (a backend chosen by `use_backend`).
    pub fn with_backend(
        frontend: &'a Frontend,
        backend: Option<&'a Backend>,
        buffers: BufferSizes,
    ) -> Self {
        let f = &frontend.plan.http;
        let b = backend.map_or(f, |b| &b.plan.http);
        let back_timeouts = backend.map_or(&frontend.plan.timeouts, |b| &b.plan.timeouts);
        let (bufsize, maxrewrite) = (buffers.bufsize, buffers.maxrewrite);
        let conn_mode = f
            .conn_mode
            .unwrap_or_default()
            .max(b.conn_mode.unwrap_or_default());
        let forwardfor = combine_address_header(f.forwardfor.as_ref(), b.forwardfor.as_ref());
        let originalto = b.originalto.as_ref().or(f.originalto.as_ref());
        // Room kept free for rewrites: a head must fit in the buffer minus that reserve.
        let max_head = (bufsize - maxrewrite) as usize;
        HttpSettings {
            conn_mode,
            forwardfor,
            originalto,
            send_name_header: b.send_name_header.as_deref(),
            reuse: b.reuse.unwrap_or_default(),
            any_method_payload: buffers.any_method_payload,
            request_limits: Limits {
                max_head,
                max_headers: usize::from(buffers.maxhdr),
                accept_unsafe: f.accept_unsafe_request,
            },
            response_limits: Limits {
                max_head,
                max_headers: usize::from(buffers.maxhdr),
                accept_unsafe: b.accept_unsafe_response,
            },
            bufsize: bufsize as usize,
            buffer_request: f.buffer_request,
            pretend_keepalive: b.pretend_keepalive,
            abort_on_close: b.abort_on_close,
            check_cache: b.check_cache,
            client_case: f.case_adjust_client.as_deref(),
            server_case: b.case_adjust_server.as_deref(),
            client: frontend.plan.timeouts.client,
            server: back_timeouts.server,
            http_request: frontend
                .plan
                .timeouts
                .http_request
                .or(back_timeouts.http_request),
            http_keep_alive: frontend
                .plan
                .timeouts
                .http_keep_alive
                .or(back_timeouts.http_keep_alive),
            tunnel: back_timeouts.tunnel,
            client_fin: frontend.plan.timeouts.client_fin,
            server_fin: back_timeouts.server_fin,
            front_pages: &frontend.plan.error_pages,
            back_pages: backend.map_or(&frontend.plan.error_pages, |b| &b.plan.error_pages),
        }
    }

    /// The answer to a request refused before any backend was involved: the frontend's
    /// `errorfile` for `status`, or the built-in page. A page with a format is built from
    /// `view`.
    pub fn request_error(&self, status: u16, view: &dyn Context) -> Cow<'a, [u8]> {
        match self.front_pages.get(&status) {
            Some(page) => super::rules::page_bytes(page, view),
            None => Cow::Borrowed(error_response(status)),
        }
    }

    /// The answer to a failure on the server side: the backend's page, then the frontend's,
    /// then the built-in one (the order HAProxy looks them up). A page with a format is
    /// built from `view`.
    pub fn server_error(&self, status: u16, view: &dyn Context) -> Cow<'a, [u8]> {
        let page = self
            .back_pages
            .get(&status)
            .or_else(|| self.front_pages.get(&status));
        match page {
            Some(page) => super::rules::page_bytes(page, view),
            None => Cow::Borrowed(error_response(status)),
        }
    }
}

/// `option forwardfor` applies when either side sets it; the backend's header name wins, and
/// `if-none` holds only if every side that set the option asked for it.
fn combine_address_header<'a>(
    front: Option<&'a AddressHeader>,
    back: Option<&'a AddressHeader>,
) -> Option<&'a AddressHeader> {
    match (front, back) {
        (Some(f), Some(b)) if f.if_none && !b.if_none => Some(b),
        (Some(f), Some(b)) if !f.if_none && b.if_none && f.header == b.header => Some(f),
        (_, Some(b)) => Some(b),
        (f, None) => f,
    }
}
