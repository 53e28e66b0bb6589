//! Server persistence on the HTTP data path (configuration.txt §4.2 `cookie`, `use-server`,
//! `option persist`, `force-persist`, `ignore-persist`): which server a request must go to
//! before the balancing algorithm is asked, and what the response tells the client so that
//! its next request comes back to the same server.
//!
//! [`choose`] runs once the backend is known: the `force-persist`/`ignore-persist` rules
//! first, then `use-server`, then the client's persistence cookie, all of them reading the
//! request as the client sent it. The cookie is then edited for the server (the `VALUE~`
//! prefix stripped, or the inserted cookie removed with `indirect`), by rebuilding the head
//! and parsing it again as `rewrite` does for rules. [`on_response`] edits the server's own
//! `Set-Cookie` fields and appends ours, with `Cache-control: private` under `nocache` when
//! the response could otherwise be stored by a cache (`super::cacheability`). Under `maxidle`/`maxlife` the inserted
//! value carries HAProxy's dates (`VALUE|last|first`, 30-bit counts of 4-second units in
//! base64), so cookies issued by one proxy are understood by the other. The behaviour follows
//! HAProxy 2.6 as observed. A backend without a cookie and without rules pays nothing here.

use super::buffer::InBuf;
use super::cacheability::Cacheability;
use super::exchange::Context;
use super::rewrite::{self, RewriteFailed, push_field};
use crate::connect::{Connection, connect_redispatching};
use crate::stream_context::StreamView;
use sluice_config::cookie::{CookieConf, CookieMode, PersistAction};
use sluice_http::encode::{self, HeadEdits, HeaderCase};
use sluice_http::head::{
    HeaderSpan, Limits, MessageHead, Parse, RequestHead, ResponseHead, header_name, header_value,
    parse_request,
};
use sluice_runtime::proxy::{Backend, Server, ServerLease};

/// The server chosen before balancing, if any, and what the response side must know.
pub struct Choice {
    /// The server a `use-server` rule or the cookie chose; the exchange takes it (waiting in
    /// its queue if it is full).
    pub target: Option<Target>,
    /// The facts [`on_response`] needs.
    pub state: PersistState,
}

/// A server chosen by persistence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// Its index in the backend.
    pub index: usize,
    /// True when it is down but used anyway (`option persist`, `force-persist`).
    pub forced: bool,
}

/// What the request side learned, for the response side.
#[derive(Clone, Copy, Debug, Default)]
pub struct PersistState {
    /// The server was chosen by a `use-server` rule or by a valid cookie (HAProxy's "direct"
    /// access): the client already has the right cookie, none is inserted.
    pub direct: bool,
    /// `ignore-persist` applied: the cookie neither chose the server nor is inserted.
    pub ignored: bool,
    /// `force-persist` applied: the chosen server is kept even if it fails (no redispatch).
    pub forced: bool,
    /// The server was chosen by persistence (a cookie, `use-server`, a stick table), not by
    /// the balancing: a failed connection is retried on it before `option redispatch` moves
    /// the request.
    pub persistent: bool,
    /// The request is a POST (`postonly`).
    post: bool,
    /// The last-seen date of the client's valid cookie, in 4-second units.
    last_date: Option<u32>,
    /// The first-emission date of the client's valid cookie, in 4-second units.
    first_date: Option<u32>,
    /// When the request was handled, in seconds since the epoch.
    now: u64,
}

/// Runs the persistence rules, `use-server` and the cookie for the request in `input`,
/// rewriting its Cookie fields when the cookie mode says so. Fails only when the rewritten
/// head does not fit (answered 500, as a failed rule rewrite is).
pub fn choose(
    ctx: &Context<'_>,
    input: &mut InBuf,
    head: &mut RequestHead,
    limits: &Limits,
) -> Result<Choice, RewriteFailed> {
    let backend = ctx.backend;
    let plan = &backend.plan.persistence;
    let mut state = PersistState::default();
    let mut lease = None;
    let buf = input.filled();
    if !plan.rules.is_empty() || !backend.plan.use_server.is_empty() {
        let scope = ctx.scope;
        let view = StreamView {
            backend: Some(backend),
            request: Some((buf, head)),
            ..StreamView::new(scope.process, scope.frontend, *scope.endpoints, scope.vars)
        };
        // The first persistence rule that applies decides (configuration.txt §4.2).
        match plan
            .rules
            .iter()
            .find(|r| r.applies(&view))
            .map(|r| r.action)
        {
            Some(PersistAction::Force) => state.forced = true,
            Some(PersistAction::Ignore) => state.ignored = true,
            None => {}
        }
        let down_ok = plan.persist || state.forced;
        // A rule naming a down server gives way to the next rule, as in HAProxy.
        lease = backend
            .plan
            .use_server
            .iter()
            .filter(|r| r.applies(&view))
            .find_map(|r| lease_server(backend, r.action, down_ok));
        state.direct = lease.is_some();
    }
    let Some(cookie) = &plan.cookie else {
        return Ok(Choice {
            target: lease,
            state,
        });
    };
    state.post = head.is_method(buf, "POST");

    let down_ok = plan.persist || state.forced;
    state.now = unix_now();
    let mut changed: Vec<(usize, Vec<u8>)> = Vec::new();
    for (i, h) in head.headers().iter().enumerate() {
        if !header_name(buf, h).eq_ignore_ascii_case(b"cookie") {
            continue;
        }
        let edited = edit_cookie_field(header_value(buf, h), cookie.name.as_bytes(), |value| {
            let (id, real) = split_value(cookie.mode, value);
            // An empty identifier never matches: a client that learned an empty cookie
            // (from a server without `cookie`) must not stick to anything.
            if lease.is_none() && !state.ignored && !id.is_empty() {
                let (last, first) = match (cookie.mode, real) {
                    (CookieMode::Prefix, _) | (_, None) => (None, None),
                    (_, Some(dates)) => parse_dates(dates),
                };
                if dates_valid(cookie, last, first, state.now) {
                    state.last_date = last;
                    state.first_date = first;
                    lease = find_server(backend, id, down_ok);
                    state.direct = lease.is_some();
                }
            }
            match (cookie.mode, real) {
                (CookieMode::Prefix, Some(real)) => ElementEdit::Value(real),
                (CookieMode::Insert, _) if cookie.indirect => ElementEdit::Delete,
                _ => ElementEdit::Keep,
            }
        });
        if let Some(value) = edited {
            changed.push((i, value));
        }
    }
    if !changed.is_empty() {
        let new_head = rebuild(buf, head.headers(), &changed, &[])?;
        rewrite::install_request(input, head, &new_head, limits)?;
    }
    Ok(Choice {
        target: lease,
        state,
    })
}

/// The server at `index` if it is usable, or whatever its state when `down_ok`.
fn lease_server(backend: &Backend, index: usize, down_ok: bool) -> Option<Target> {
    backend.servers.get(index)?;
    if backend.is_server_usable(index) {
        Some(Target {
            index,
            forced: false,
        })
    } else {
        down_ok.then_some(Target {
            index,
            forced: true,
        })
    }
}

/// The first server whose `cookie` is `id` and that may take the request: several servers
/// may share a value (a backup standing in for an active one).
fn find_server(backend: &Backend, id: &[u8], down_ok: bool) -> Option<Target> {
    backend
        .servers
        .iter()
        .filter(|s| s.conf.cookie.as_deref().map(str::as_bytes) == Some(id))
        .find_map(|s| lease_server(backend, s.index, down_ok))
}

/// Connects to the leased server with the backend's retries; under `option redispatch`
/// (and without `force-persist`), the retries it names go to another server, which then
/// replaces the lease. The request is no longer a direct access then: the client gets the
/// new server's cookie.
pub async fn connect<'b>(
    ctx: &Context<'b>,
    lease: &mut ServerLease<'b>,
    state: &mut PersistState,
) -> Connection {
    let redispatch = (!state.forced, state.persistent);
    let (connection, moved) = connect_redispatching(
        ctx.backend,
        lease,
        (&ctx.endpoints, ctx.scope.vars),
        redispatch,
        crate::report::logs_server_ends(ctx.frontend),
    )
    .await;
    if moved {
        state.direct = false;
    }
    connection
}

/// `request_head` (a head Sluice encoded) with the `http-send-name-header` field `name`
/// naming `server` instead, after a redispatch.
pub fn rename_server(
    request_head: &[u8],
    name: &str,
    server: &str,
    case: Option<&HeaderCase>,
) -> Option<Vec<u8>> {
    let Ok(Parse::Complete(head)) = parse_request(request_head, &Limits::default()) else {
        return None;
    };
    let mut out = Vec::with_capacity(request_head.len() + server.len());
    encode::encode_request(
        request_head,
        &head,
        &HeadEdits {
            remove: &[name],
            hop_by_hop: None,
            add: &[(name, server.as_bytes())],
            version: None,
            case,
        },
        &mut out,
    );
    Some(out)
}

/// Splits a persistence cookie's value into the server identifier and what follows its
/// delimiter: in prefix mode the application's value after `~`, in the other modes the dates
/// after `|`. Without a delimiter the whole value is the identifier.
fn split_value(mode: CookieMode, value: &[u8]) -> (&[u8], Option<&[u8]>) {
    let delimiter = if mode == CookieMode::Prefix {
        b'~'
    } else {
        b'|'
    };
    match value.iter().position(|&b| b == delimiter) {
        Some(at) => (&value[..at], Some(&value[at + 1..])),
        None => (value, None),
    }
}

/// The characters of HAProxy's cookie dates (standard base64).
const DATE_DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// A 30-bit date in 4-second units as five base64 digits, most significant first.
fn encode_date(units: u32) -> String {
    [24, 18, 12, 6, 0]
        .iter()
        .map(|shift| char::from(DATE_DIGITS[((units >> shift) & 63) as usize]))
        .collect()
}

/// The date written in the first five bytes of `text`, if they are all date digits.
fn decode_date(text: &[u8]) -> Option<u32> {
    let digits = text.get(..5)?;
    digits.iter().try_fold(0u32, |acc, &b| {
        let digit = DATE_DIGITS.iter().position(|&d| d == b)?;
        Some((acc << 6) | digit as u32)
    })
}

/// The dates after the identifier's `|`: the last-seen date, then after another `|` the
/// first-emission date. Anything shorter than a date is no date, as in HAProxy.
fn parse_dates(dates: &[u8]) -> (Option<u32>, Option<u32>) {
    let last = decode_date(dates);
    let first = match dates.get(5) {
        Some(b'|') => decode_date(&dates[6..]),
        _ => None,
    };
    (last, first)
}

/// The current date in 4-second units, rounded up as HAProxy rounds it.
fn date_units(now: u64) -> u32 {
    ((now.saturating_add(3) >> 2) & 0x3fff_ffff) as u32
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A dated cookie is ignored when `maxidle` or `maxlife` has passed since its dates, or when
/// a date lies more than a day in the future (configuration.txt §4.2 `cookie`).
fn dates_valid(cookie: &CookieConf, last: Option<u32>, first: Option<u32>, now: u64) -> bool {
    let fresh = |limit: Option<u32>, date: Option<u32>| match (limit, date) {
        (Some(limit), Some(date)) => {
            let seconds = u64::from(date) << 2;
            seconds + u64::from(limit) >= now && seconds <= now + 86_400
        }
        _ => true,
    };
    fresh(cookie.maxidle, last) && fresh(cookie.maxlife, first)
}

/// What becomes of one `name=value` element of a Cookie field.
#[derive(Debug, PartialEq, Eq)]
enum ElementEdit<'v> {
    /// Left as it is.
    Keep,
    /// Removed with its delimiter.
    Delete,
    /// Its value replaced.
    Value(&'v [u8]),
}

/// One element of a Cookie field value, as offsets into the value.
#[derive(Clone, Copy, Debug)]
struct Element {
    /// First byte of the element (blanks skipped).
    start: usize,
    /// One past its last byte (blanks trimmed).
    end: usize,
    /// The `=` between its name and value, if any.
    eq: Option<usize>,
    /// The delimiter after it (`;` or `,`), if any.
    delimiter: Option<u8>,
}

/// The elements of a Cookie field value. HAProxy accepts both `;` and `,` between cookies,
/// and a delimiter inside a quoted value does not count.
fn elements(value: &[u8]) -> impl Iterator<Item = Element> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        while pos < value.len() && matches!(value[pos], b' ' | b'\t') {
            pos += 1;
        }
        if pos >= value.len() {
            return None;
        }
        let start = pos;
        let mut quoted = false;
        let mut eq = None;
        while pos < value.len() {
            match value[pos] {
                b'"' => quoted = !quoted,
                b';' | b',' if !quoted => break,
                b'=' if eq.is_none() && !quoted => eq = Some(pos),
                _ => {}
            }
            pos += 1;
        }
        let mut end = pos;
        while end > start && matches!(value[end - 1], b' ' | b'\t') {
            end -= 1;
        }
        let delimiter = value.get(pos).copied();
        pos += 1;
        Some(Element {
            start,
            end,
            eq,
            delimiter,
        })
    })
}

fn trim(bytes: &[u8]) -> &[u8] {
    bytes.trim_ascii()
}

/// Applies `edit` to each element of the Cookie field `value` named `name` (given its value),
/// and returns the new field value, `None` if nothing changed. An empty result means the
/// field must go. A removed element takes its preceding delimiter with it, and the element
/// after it gets the removed one's delimiter followed by a space, as HAProxy writes it.
fn edit_cookie_field<'v>(
    value: &'v [u8],
    name: &[u8],
    mut edit: impl FnMut(&'v [u8]) -> ElementEdit<'v>,
) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::new();
    let mut changed = false;
    let mut previous: Option<Element> = None;
    let mut deleted_delimiter: Option<u8> = None;
    let mut kept_any = false;
    for element in elements(value) {
        let action = match element.eq {
            Some(eq) if trim(&value[element.start..eq]) == name => {
                let value_start = eq + 1;
                edit(trim(&value[value_start.min(element.end)..element.end]))
            }
            _ => ElementEdit::Keep,
        };
        if action == ElementEdit::Delete {
            changed = true;
            deleted_delimiter = element.delimiter.or(deleted_delimiter);
            previous = Some(element);
            continue;
        }
        if kept_any {
            match (deleted_delimiter.take(), previous) {
                (Some(d), _) => {
                    out.push(d);
                    out.push(b' ');
                }
                (None, Some(p)) => out.extend_from_slice(&value[p.end..element.start]),
                (None, None) => {}
            }
        } else {
            deleted_delimiter = None;
        }
        match action {
            ElementEdit::Value(new) => {
                let eq = element.eq.unwrap_or(element.end);
                // The name and the blanks around `=` stay as the client wrote them.
                let value_start = eq
                    + 1
                    + value[eq + 1..element.end]
                        .iter()
                        .take_while(|b| matches!(b, b' ' | b'\t'))
                        .count();
                out.extend_from_slice(&value[element.start..value_start.min(element.end)]);
                out.extend_from_slice(new);
                changed = true;
            }
            _ => out.extend_from_slice(&value[element.start..element.end]),
        }
        kept_any = true;
        previous = Some(element);
    }
    changed.then_some(out)
}

/// A head rebuilt from `buf`: its start line as it was, its fields with those listed in
/// `changed` replaced (an empty value removes the field), then the `added` fields.
fn rebuild(
    buf: &[u8],
    headers: &[HeaderSpan],
    changed: &[(usize, Vec<u8>)],
    added: &[(&str, &[u8])],
) -> Result<Vec<u8>, RewriteFailed> {
    let line_end = buf.iter().position(|&b| b == b'\n').ok_or(RewriteFailed)?;
    let mut out = Vec::with_capacity(buf.len().min(8192) + 128);
    out.extend_from_slice(&buf[..=line_end]);
    for (i, h) in headers.iter().enumerate() {
        let name = header_name(buf, h);
        let value = match changed.iter().find(|(at, _)| *at == i) {
            Some((_, v)) if v.is_empty() => continue,
            Some((_, v)) => v.as_slice(),
            None => header_value(buf, h),
        };
        push_field(name, value, &mut out)?;
    }
    for (name, value) in added {
        push_field(name.as_bytes(), value, &mut out)?;
    }
    out.extend_from_slice(b"\r\n");
    Ok(out)
}

/// Edits the server's `Set-Cookie` fields for our cookie and appends the inserted cookie
/// (and `Cache-control: private` under `nocache`, when `cache`, judged under `nocache`, says
/// a cache could store it; `cache` then says it no longer can), for the final response `head`
/// from `server`. Fails only when the new head does not fit (answered 502).
pub fn on_response(
    backend: &Backend,
    server: &Server,
    state: &PersistState,
    (input, head, cache): (&mut InBuf, &mut ResponseHead, Option<&mut Cacheability>),
    limits: &Limits,
) -> Result<(), RewriteFailed> {
    let Some(cookie) = &backend.plan.persistence.cookie else {
        return Ok(());
    };
    let buf = input.filled();
    let server_cookie = server.conf.cookie.as_deref();
    let mut changed: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut server_set_ours = false;
    for (i, h) in head.headers().iter().enumerate() {
        if !header_name(buf, h).eq_ignore_ascii_case(b"set-cookie") {
            continue;
        }
        let value = header_value(buf, h);
        let Some(parts) = set_cookie_parts(value) else {
            continue;
        };
        if trim(&value[..parts.eq]) != cookie.name.as_bytes() {
            continue;
        }
        server_set_ours = true;
        if cookie.preserve {
            continue;
        }
        let delete = cookie.mode == CookieMode::Insert || (state.direct && cookie.indirect);
        let new_value = match (cookie.mode, server_cookie) {
            _ if delete => Some(Vec::new()),
            (CookieMode::Rewrite, Some(id)) => Some(id.as_bytes().to_vec()),
            (CookieMode::Prefix, Some(id)) => {
                let mut v = id.as_bytes().to_vec();
                v.push(b'~');
                v.extend_from_slice(&value[parts.value_start..parts.value_end]);
                Some(v)
            }
            _ => None,
        };
        if let Some(new_value) = new_value {
            let field = if delete {
                Vec::new()
            } else {
                let mut field = Vec::with_capacity(value.len() + 16);
                field.extend_from_slice(&value[..parts.value_start]);
                field.extend_from_slice(&new_value);
                field.extend_from_slice(&value[parts.value_end..]);
                field
            };
            changed.push((i, field));
        }
    }
    // No cookie for a client that already has the right one, nor when the server set its
    // own under `preserve`, nor outside POST under `postonly`.
    let preserved = server_set_ours && cookie.preserve;
    let wrong_method = cookie.postonly && !state.post;
    // A direct access still gets a new cookie when its dates need refreshing, or when dates
    // must be added or dropped after a configuration change.
    let stale = (cookie.maxidle.is_some() || state.last_date.is_some())
        && state
            .last_date
            .is_none_or(|last| (u64::from(last) << 2) < state.now);
    let dates_change = cookie.maxlife.is_some() != state.first_date.is_some();
    let insert = cookie.mode == CookieMode::Insert
        && (!state.direct || stale || dates_change)
        && !(preserved || state.ignored || wrong_method);
    let set_cookie = insert.then(|| {
        let dates = Dates {
            now: state.now,
            first: state.first_date,
        };
        set_cookie_value(cookie, server_cookie, dates)
    });
    let mut added: Vec<(&str, &[u8])> = Vec::with_capacity(2);
    if let Some(value) = &set_cookie {
        added.push(("Set-Cookie", value.as_bytes()));
        // A cached copy of this response would hand our cookie to every client of the
        // cache, sending them all to one server.
        if let Some(cache) = cache.filter(|c| cookie.nocache && c.storable) {
            added.push(("Cache-control", b"private"));
            cache.forbid();
        }
    }
    if changed.is_empty() && added.is_empty() {
        return Ok(());
    }
    let new_head = rebuild(buf, head.headers(), &changed, &added)?;
    rewrite::install_response(input, head, &new_head, limits)
}

/// Where the cookie of a Set-Cookie field value sits: its `=`, and its value's bounds
/// (blanks trimmed, up to the first `;`).
struct SetCookieParts {
    eq: usize,
    value_start: usize,
    value_end: usize,
}

fn set_cookie_parts(value: &[u8]) -> Option<SetCookieParts> {
    let end = value.iter().position(|&b| b == b';').unwrap_or(value.len());
    let eq = value[..end].iter().position(|&b| b == b'=')?;
    let mut value_start = eq + 1;
    while value_start < end && matches!(value[value_start], b' ' | b'\t') {
        value_start += 1;
    }
    let mut value_end = end;
    while value_end > value_start && matches!(value[value_end - 1], b' ' | b'\t') {
        value_end -= 1;
    }
    Some(SetCookieParts {
        eq,
        value_start,
        value_end,
    })
}

/// The dates an inserted cookie carries under `maxidle`/`maxlife`.
#[derive(Clone, Copy, Debug)]
pub struct Dates {
    /// Now, in seconds since the epoch: the last-seen date.
    pub now: u64,
    /// The first-emission date the client's cookie had, in 4-second units (now if none).
    pub first: Option<u32>,
}

/// The value of the Set-Cookie field inserted for a server whose `cookie` is `id`. A server
/// without one gets a cookie that expired long ago, which makes the client forget any
/// persistence it had.
pub fn set_cookie_value(cookie: &CookieConf, id: Option<&str>, dates: Dates) -> String {
    let mut out = match id {
        Some(id) if cookie.maxidle.is_some() || cookie.maxlife.is_some() => {
            let now = date_units(dates.now);
            let mut value = format!("{}={id}|{}", cookie.name, encode_date(now));
            if cookie.maxlife.is_some() {
                value.push('|');
                value.push_str(&encode_date(dates.first.unwrap_or(now)));
            }
            value.push_str("; path=/");
            value
        }
        Some(id) => format!("{}={id}; path=/", cookie.name),
        None => format!(
            "{}=; Expires=Thu, 01-Jan-1970 00:00:01 GMT; path=/",
            cookie.name
        ),
    };
    for domain in &cookie.domains {
        out.push_str("; domain=");
        out.push_str(domain);
    }
    if cookie.httponly {
        out.push_str("; HttpOnly");
    }
    if cookie.secure {
        out.push_str("; Secure");
    }
    for attr in &cookie.attrs {
        out.push_str("; ");
        out.push_str(attr);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_http::head::{Parse, parse_response};

    /// Deletes every `SRV` element, as insert mode with `indirect` does.
    fn delete_srv(value: &str) -> Option<String> {
        edit_cookie_field(value.as_bytes(), b"SRV", |_| ElementEdit::Delete)
            .map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn deleting_a_cookie_keeps_the_others_as_haproxy_writes_them() {
        // Each pair was observed on HAProxy 2.6 (`cookie SRV insert indirect`).
        let cases = [
            ("SRV=two", ""),
            ("SRV=two;", ""),
            ("a=1; SRV=two; b=2", "a=1; b=2"),
            ("a=1;SRV=two;b=2", "a=1; b=2"),
            ("SRV=two; b=2", "b=2"),
            ("SRV=two ,b=2", "b=2"),
            ("a=1, SRV=two", "a=1"),
            ("a=1,SRV=two,b=2", "a=1, b=2"),
            ("a=1 ; SRV=two ; b=2", "a=1; b=2"),
            ("a=1, SRV=two; b=2", "a=1; b=2"),
            ("a=1; SRV=two, b=2", "a=1, b=2"),
            ("a=1;  SRV=two;b=2;SRV=one;c=3", "a=1; b=2; c=3"),
            ("a=1;SRV=two;;b=2", "a=1; ;b=2"),
            ("x=\"a;b\"; SRV=two", "x=\"a;b\""),
            (" SRV = two ;b", "b"),
        ];
        for (input, output) in cases {
            assert_eq!(delete_srv(input).as_deref(), Some(output), "{input}");
        }
        // A name without `=` is not a cookie, and other names are left alone.
        assert_eq!(delete_srv("SRV;a=1"), None);
        assert_eq!(delete_srv("SRVX=1; a=SRV"), None);
    }

    #[test]
    fn prefix_values_are_stripped_in_place() {
        let strip = |value: &str| {
            edit_cookie_field(value.as_bytes(), b"JS", |v| {
                match split_value(CookieMode::Prefix, v) {
                    (_, Some(real)) => ElementEdit::Value(real),
                    _ => ElementEdit::Keep,
                }
            })
            .map(|v| String::from_utf8(v).unwrap())
        };
        assert_eq!(strip("JS=two~a~b").as_deref(), Some("JS=a~b"));
        assert_eq!(strip("JS=two~").as_deref(), Some("JS="));
        assert_eq!(strip("JS=two"), None);
        assert_eq!(
            strip("x=1; JS=one~a, JS=two~b").as_deref(),
            Some("x=1; JS=a, JS=b")
        );
        assert_eq!(strip("JS = s~v ; y").as_deref(), Some("JS = v ; y"));
    }

    #[test]
    fn identifiers() {
        assert_eq!(
            split_value(CookieMode::Prefix, b"s1~abc"),
            (&b"s1"[..], Some(&b"abc"[..]))
        );
        assert_eq!(split_value(CookieMode::Prefix, b"abc"), (&b"abc"[..], None));
        assert_eq!(
            split_value(CookieMode::Insert, b"s1|AbCdE"),
            (&b"s1"[..], Some(&b"AbCdE"[..]))
        );
        assert_eq!(
            split_value(CookieMode::Rewrite, b"s1~x"),
            (&b"s1~x"[..], None)
        );
    }

    fn conf(name: &str) -> CookieConf {
        CookieConf {
            span: sluice_config::diag::Span::new(&std::sync::Arc::from("t.cfg"), 1),
            name: name.to_owned(),
            mode: CookieMode::Insert,
            indirect: false,
            nocache: false,
            postonly: false,
            preserve: false,
            httponly: false,
            secure: false,
            domains: Vec::new(),
            attrs: Vec::new(),
            maxidle: None,
            maxlife: None,
        }
    }

    #[test]
    fn set_cookie_values_match_haproxy() {
        let mut c = conf("SRV");
        let at = Dates {
            now: 1_795_327_649,
            first: None,
        };
        assert_eq!(set_cookie_value(&c, Some("one"), at), "SRV=one; path=/");
        assert_eq!(
            set_cookie_value(&c, None, at),
            "SRV=; Expires=Thu, 01-Jan-1970 00:00:01 GMT; path=/"
        );
        c.domains = vec![".a.com".into(), "b.com".into()];
        c.httponly = true;
        c.secure = true;
        c.attrs = vec!["x=y".into(), "z".into()];
        // Observed on HAProxy 2.6 with the same options.
        assert_eq!(
            set_cookie_value(&c, Some("one"), at),
            "SRV=one; path=/; domain=.a.com; domain=b.com; HttpOnly; Secure; x=y; z"
        );
        // HAProxy 2.6 sent these at that second with `maxidle 30m` and `maxidle 30m maxlife 8h`.
        let mut c = conf("SRV");
        c.maxidle = Some(1800);
        assert_eq!(
            set_cookie_value(&c, Some("one"), at),
            "SRV=one|awKGp; path=/"
        );
        c.maxlife = Some(8 * 3600);
        assert_eq!(
            set_cookie_value(&c, Some("one"), at),
            "SRV=one|awKGp|awKGp; path=/"
        );
        let kept = Dates {
            first: decode_date(b"awJ4r"),
            ..at
        };
        assert_eq!(
            set_cookie_value(&c, Some("one"), kept),
            "SRV=one|awKGp|awJ4r; path=/"
        );
        assert_eq!(
            set_cookie_value(&c, None, at),
            "SRV=; Expires=Thu, 01-Jan-1970 00:00:01 GMT; path=/"
        );
    }

    #[test]
    fn cookie_dates() {
        assert_eq!(encode_date(date_units(1_795_327_649)), "awKGp");
        for t in [0u32, 1, 448_831_913, 0x3fff_ffff] {
            assert_eq!(decode_date(encode_date(t).as_bytes()), Some(t));
        }
        assert_eq!(parse_dates(b"abc"), (None, None));
        assert_eq!(parse_dates(b"aw?Gp"), (None, None));
        let (last, first) = parse_dates(b"awKGp|awJ4r");
        assert_eq!(last, decode_date(b"awKGp"));
        assert_eq!(first, decode_date(b"awJ4r"));
        assert_eq!(parse_dates(b"awKGpX").1, None);

        let now = 1_795_327_649;
        let units = |t: u64| Some(date_units(t));
        let mut c = conf("SRV");
        c.maxidle = Some(1800);
        c.maxlife = Some(8 * 3600);
        assert!(dates_valid(&c, None, None, now));
        assert!(dates_valid(&c, units(now - 600), units(now - 3600), now));
        assert!(dates_valid(&c, units(now + 3600), None, now));
        assert!(!dates_valid(&c, units(now - 2400), None, now));
        assert!(!dates_valid(&c, units(now + 90_000), None, now));
        assert!(!dates_valid(&c, units(now), units(now - 40_000), now));
        // Without limits the dates are not checked.
        assert!(dates_valid(&conf("SRV"), units(0), units(0), now));
    }

    fn response(text: &str) -> (Vec<u8>, ResponseHead) {
        let buf = text.replace('\n', "\r\n").into_bytes();
        let head = match parse_response(&buf, &Limits::default()).unwrap() {
            Parse::Complete(head) => head,
            Parse::Partial => panic!("partial"),
        };
        (buf, head)
    }

    #[test]
    fn rebuilt_heads_keep_the_start_line_and_refuse_bad_values() {
        let (buf, head) = response("HTTP/1.1 200 OK\nA: 1\nSet-Cookie: x\nB: 2\n\n");
        let out = rebuild(&buf, head.headers(), &[(1, Vec::new())], &[("C", b"3")]).unwrap();
        assert_eq!(out, b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n");
        assert!(rebuild(&buf, head.headers(), &[(0, b"a\r\nb".to_vec())], &[]).is_err());
    }
}
