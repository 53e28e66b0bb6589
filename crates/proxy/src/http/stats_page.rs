//! The statistics page (`stats enable`, `stats uri` ...): requests for the configured URI are
//! answered by the proxy itself with an HTML table of every frontend, backend and server, or
//! with `show stat`'s CSV when the URI has `;csv` (`show stat json` with `;json`); with `stats admin`, a form posts server
//! actions (ready, drain, maint, health and agent checks on or off).
//!
//! The page is built from the same rows as the CLI's `show stat` ([`sluice_runtime::stats`]),
//! so both always agree, and actions go through the same entry points as the CLI's. It is
//! served after the frontend's `http-request` rules (which may deny it), and then only if
//! its own `stats http-request` rules let the request through ([`super::rules::stats_verdict`]);
//! it is never forwarded. `stats auth` credentials are compared in constant time; the POST body is read up
//! to a small fixed limit; every answer closes the connection.

use super::buffer::InBuf;
use super::rules::Scope;
use super::session;
use sluice_config::stats_page::StatsPage;
use sluice_http::head::{MessageHead, RequestHead};
use sluice_net::stream::Stream;
use sluice_runtime::health::Admin;
use sluice_runtime::process::Process;
use sluice_runtime::stats::{self, Field, Filter, Row, RowKind};
use sluice_runtime::stats_typed;
use std::fmt::Write;
use std::time::Duration;

/// The largest admin form accepted: a few server names and an action.
const MAX_FORM: usize = 8192;

/// How long the client may take to send the form when no `timeout client` is set.
const FORM_TIMEOUT: Duration = Duration::from_secs(10);

/// True if the request is for the page: its target starts with the configured URI.
pub fn wants(page: &StatsPage, buf: &[u8], head: &RequestHead) -> bool {
    head.target_bytes(buf).starts_with(page.uri.as_bytes())
}

/// Answers a request for the page of proxy `own` (the `.` of `stats scope`) as the
/// connection's last bytes (`session::answer`); returns the status and size of the answer,
/// for the log, and whether it was sent whole (then the caller closes gracefully).
pub async fn serve(
    scope: &Scope<'_>,
    client: &mut Stream,
    (input, head): (&mut InBuf, &RequestHead),
    page: &StatsPage,
    own: &str,
    client_timeout: Option<Duration>,
) -> (u16, usize, bool) {
    let process = scope.process;
    let buf = input.filled();
    let reply = if !authorized(page, buf, head) {
        unauthorized(page)
    } else {
        let admin = page
            .admin
            .as_ref()
            .is_some_and(|cond| cond.eval(&scope.view(None, Some((buf, head)))));
        let target = String::from_utf8_lossy(head.target_bytes(buf)).into_owned();
        let options = target.get(page.uri.len()..).unwrap_or_default();
        let filter = Scoped::new(page, own);
        if head.is_method(buf, "POST") {
            let outcome = if admin {
                match read_form(client, input, head, client_timeout).await {
                    Some(form) => apply(process, &form),
                    None => "ERRP",
                }
            } else {
                "DENY"
            };
            redirect(&format!("{};st={outcome}", page.uri))
        } else if options.split(';').any(|o| o == "csv") {
            let mut csv = String::new();
            stats::write_csv_header(&mut csv);
            for row in stats::collect(process)
                .iter()
                .filter(|r| filter.keeps(r.pxname()))
            {
                stats::write_csv_row(row, &mut csv);
            }
            ok("text/plain", &csv, None)
        } else if options.split(';').any(|o| o == "json") {
            let json = stats_typed::json(process, |r| filter.keeps(r.pxname()));
            ok("application/json", &json, None)
        } else {
            let notice = options
                .split(';')
                .find_map(|o| o.strip_prefix("st="))
                .map(str::to_owned);
            let html = render(process, page, &filter, admin, notice.as_deref());
            ok("text/html", &html, page.refresh)
        }
    };
    let status = reply.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let sent = session::answer(client, reply.as_bytes(), client_timeout).await;
    (status, reply.len(), sent)
}

/// Which proxies the page shows (`stats scope`).
struct Scoped<'a> {
    names: Vec<&'a str>,
}

impl<'a> Scoped<'a> {
    fn new(page: &'a StatsPage, own: &'a str) -> Self {
        Scoped {
            names: page
                .scope
                .iter()
                .map(|s| if s == "." { own } else { s.as_str() })
                .collect(),
        }
    }

    fn keeps(&self, proxy: &str) -> bool {
        self.names.is_empty() || self.names.contains(&proxy)
    }
}

/// Checks `Authorization: Basic` against the `stats auth` pairs, in constant time per pair.
fn authorized(page: &StatsPage, buf: &[u8], head: &RequestHead) -> bool {
    if page.auth.is_empty() {
        return true;
    }
    let Some(given) = head
        .header_values(buf, "authorization")
        .next()
        .and_then(|v| {
            let v = std::str::from_utf8(v).ok()?;
            let (scheme, token) = v.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("basic")
                .then(|| base64_decode(token.trim().as_bytes()))?
        })
    else {
        return false;
    };
    let mut ok = false;
    for (user, pass) in &page.auth {
        let expected = format!("{user}:{pass}");
        // Every pair is compared, so the time does not tell which one matched.
        ok |= constant_time_eq(expected.as_bytes(), &given);
    }
    ok
}

/// Compares without stopping at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// Standard padded base64; `None` on anything else.
fn base64_decode(input: &[u8]) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    if !input.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(input.len() / 4 * 3);
    for (i, group) in input.chunks(4).enumerate() {
        let last = i + 1 == input.len() / 4;
        let pad = group.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &group[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

fn response(status: &str, headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nCache-Control: no-cache\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn ok(content_type: &str, body: &str, refresh: Option<Duration>) -> String {
    let mut headers = format!("Content-Type: {content_type}\r\n");
    if let Some(r) = refresh {
        let _ = write!(headers, "Refresh: {}\r\n", r.as_secs().max(1));
    }
    response("200 OK", &headers, body)
}

fn unauthorized(page: &StatsPage) -> String {
    // A quote cannot be escaped in a realm: drop it rather than break the field.
    let realm = page.realm.replace('"', "");
    response(
        "401 Unauthorized",
        &format!("Content-Type: text/html\r\nWWW-Authenticate: Basic realm=\"{realm}\"\r\n"),
        "<html><body><h1>401 Unauthorized</h1>\nYou need a valid user and password to access this content.\n</body></html>\n",
    )
}

fn redirect(location: &str) -> String {
    response(
        "303 See Other",
        &format!("Location: {location}\r\nContent-Type: text/plain\r\n"),
        "",
    )
}

/// Reads a `Content-Length` form body of at most [`MAX_FORM`] bytes.
async fn read_form(
    client: &mut Stream,
    input: &mut InBuf,
    head: &RequestHead,
    limit: Option<Duration>,
) -> Option<Vec<(String, String)>> {
    let length: usize = {
        let buf = input.filled();
        let mut values = head.header_values(buf, "content-length");
        let value = std::str::from_utf8(values.next()?)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        if values.next().is_some()
            || head
                .header_values(buf, "transfer-encoding")
                .next()
                .is_some()
        {
            return None;
        }
        value
    };
    if length > MAX_FORM {
        return None;
    }
    let need = head.head_len() + length;
    let deadline = limit.unwrap_or(FORM_TIMEOUT);
    while input.len() < need {
        input.read_more(client, Some(deadline)).await.ok()?;
    }
    let body = input.filled().get(head.head_len()..need)?;
    Some(parse_form(body))
}

/// `a=1&b=x+y%21` → pairs, `+` and `%XX` decoded.
fn parse_form(body: &[u8]) -> Vec<(String, String)> {
    fn decode(s: &[u8]) -> String {
        let mut out = Vec::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            match s[i] {
                b'+' => out.push(b' '),
                b'%' if i + 3 <= s.len() => {
                    let hex = std::str::from_utf8(&s[i + 1..i + 3]).ok();
                    match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                        Some(b) => {
                            out.push(b);
                            i += 2;
                        }
                        None => out.push(b'%'),
                    }
                }
                c => out.push(c),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    body.split(|&b| b == b'&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = match pair.iter().position(|&b| b == b'=') {
                Some(at) => (&pair[..at], &pair[at + 1..]),
                None => (pair, &[][..]),
            };
            (decode(k), decode(v))
        })
        .collect()
}

/// Applies an admin form (`b` backend, `s` servers, `action`); returns the notice code the
/// page shows after the redirect: DONE, NONE (nothing selected) or ERRP (bad form).
fn apply(process: &Process, form: &[(String, String)]) -> &'static str {
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let Some(backend) = field("b") else {
        return "ERRP";
    };
    let backend = process.backends.iter().find(|b| {
        b.name() == backend
            || backend
                .strip_prefix('#')
                .is_some_and(|id| id == stats::proxy_iid(b.plan.id.uid).to_string())
    });
    let Some(backend) = backend else {
        return "ERRP";
    };
    let action = field("action").unwrap_or_default();
    let servers: Vec<&str> = form
        .iter()
        .filter(|(k, _)| k == "s")
        .map(|(_, v)| v.as_str())
        .collect();
    if servers.is_empty() {
        return "NONE";
    }
    for name in servers {
        let Some((index, server)) = backend.server_named(name) else {
            return "ERRP";
        };
        match action {
            "ready" | "drain" | "maint" => {
                let admin = match action {
                    "ready" => Admin::Ready,
                    "drain" => Admin::Drain,
                    _ => Admin::Maint,
                };
                backend.set_admin(index, |a| *a = admin);
            }
            "dhlth" | "ehlth" => server.stats.set_checks_enabled(action == "ehlth"),
            "dagent" | "eagent" => server.stats.set_agent_enabled(action == "eagent"),
            _ => return "ERRP",
        }
    }
    "DONE"
}

/// Escapes text for HTML.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `1d2h`, `3h4m`, `5m6s`, `7s`: short ages for the "last change" column.
fn human_age(secs: u64) -> String {
    match secs {
        s if s >= 86400 => format!("{}d{}h", s / 86400, s % 86400 / 3600),
        s if s >= 3600 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{}m{}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

/// The CSS class of a row, from its kind and status.
fn row_class(row: &Row) -> &'static str {
    let status = row.get(Field::status);
    match row.kind {
        RowKind::Frontend => "frontend",
        RowKind::Listener => "socket",
        RowKind::Backend => {
            if status == "UP" {
                "backend"
            } else {
                "down"
            }
        }
        RowKind::Server => match status {
            "MAINT" => "maint",
            "DRAIN" | "NOLB" => "drain",
            "no check" => "nocheck",
            s if s.starts_with("UP ") => "goingdown",
            s if s.starts_with("DOWN ") => "goingup",
            s if s.starts_with("UP") => "up",
            _ => "down",
        },
    }
}

const STYLE: &str = "\
body{font-family:system-ui,sans-serif;font-size:13px;margin:1em;color:#222}
h1{font-size:20px;margin:0 0 .2em}
.info{color:#555;margin-bottom:1em}
.notice{padding:.4em .8em;margin-bottom:1em;border:1px solid #888;background:#ffd}
table{border-collapse:collapse;margin-bottom:1.5em}
caption{text-align:left;font-weight:bold;font-size:15px;padding:.2em 0;color:#035}
th,td{border:1px solid #bbb;padding:2px 5px;white-space:nowrap;font-size:12px}
th{background:#035;color:#fff;font-weight:normal}
td{text-align:right}
td.name,td.status{text-align:left}
tr.frontend td,tr.backend td{background:#e8eef4;font-weight:bold}
tr.up td{background:#d4f7d4}
tr.nocheck td{background:#eee}
tr.down td{background:#ffb3b3}
tr.goingdown td{background:#fff3a0}
tr.goingup td{background:#ffd27f}
tr.drain td{background:#9cd0ff}
tr.maint td{background:#d9a066}
.legend span{display:inline-block;padding:2px 8px;margin-right:4px;border:1px solid #bbb}
";

/// The columns of the table: title, and the fields shown (joined by " / " when several).
const COLUMNS: &[(&str, &[Field])] = &[
    (
        "Queue<br>cur/max/limit",
        &[Field::qcur, Field::qmax, Field::qlimit],
    ),
    ("Session rate<br>cur/max", &[Field::rate, Field::rate_max]),
    (
        "Sessions<br>cur/max/limit/total",
        &[Field::scur, Field::smax, Field::slim, Field::stot],
    ),
    ("LbTot", &[Field::lbtot]),
    ("Bytes<br>in/out", &[Field::bin, Field::bout]),
    ("Denied<br>req", &[Field::dreq]),
    (
        "Errors<br>req/conn/resp",
        &[Field::ereq, Field::econ, Field::eresp],
    ),
    ("Retries", &[Field::wretr]),
    ("Status", &[Field::status]),
    ("Last<br>check", &[Field::check_status]),
    ("Weight", &[Field::weight]),
    ("Servers<br>act/bck", &[Field::act, Field::bck]),
    ("Checks<br>failed/down", &[Field::chkfail, Field::chkdown]),
    ("Downtime", &[Field::downtime]),
    ("Last<br>change", &[Field::lastchg]),
];

fn cell(row: &Row, title: &str, fields: &[Field]) -> String {
    match fields {
        [Field::lastchg] | [Field::downtime] => {
            let v = row.get(fields[0]);
            v.parse().map(human_age).unwrap_or_default()
        }
        [Field::check_status] => {
            let mut text = row.get(Field::check_status).to_owned();
            if !text.is_empty() {
                let code = row.get(Field::check_code);
                if !code.is_empty() {
                    let _ = write!(text, "/{code}");
                }
                let _ = write!(text, " in {}ms", row.get(Field::check_duration));
            }
            text
        }
        _ => {
            let values: Vec<&str> = fields.iter().map(|f| row.get(*f)).collect();
            if values.iter().all(|v| v.is_empty()) {
                String::new()
            } else if title.contains('/') {
                values
                    .iter()
                    .map(|v| if v.is_empty() { "-" } else { v })
                    .collect::<Vec<_>>()
                    .join(" / ")
            } else {
                values.concat()
            }
        }
    }
}

/// The HTML page: a header, then one table per proxy with its rows.
fn render(
    process: &Process,
    page: &StatsPage,
    filter: &Scoped<'_>,
    admin: bool,
    notice: Option<&str>,
) -> String {
    let mut html = String::with_capacity(16384);
    html.push_str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">");
    let title = if page.hide_version {
        "Statistics Report for Sluice".to_owned()
    } else {
        format!("Statistics Report for Sluice {}", env!("CARGO_PKG_VERSION"))
    };
    let _ = write!(html, "<title>{}</title>", esc(&title));
    let _ = write!(
        html,
        "<style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        esc(&title)
    );
    let uptime = process.started.elapsed().as_secs();
    let _ = write!(
        html,
        "<div class=\"info\">pid {} · uptime {} · current connections {} of {} · threads {}",
        std::process::id(),
        human_age(uptime),
        process.traffic.sessions.get(),
        process.runtime_maxconn(),
        process.nbthread
    );
    if let Some(node) = &page.show_node {
        let name = node
            .clone()
            .or_else(|| process.global.node.clone())
            .unwrap_or_default();
        let _ = write!(html, " · node {}", esc(&name));
    }
    // Without a text or a global `description`, nothing (HAProxy ignores the line then).
    let desc = page
        .show_desc
        .as_ref()
        .and_then(|d| d.clone().or_else(|| process.global.description.clone()))
        .filter(|d| !d.is_empty());
    if let Some(desc) = desc {
        let _ = write!(html, " · {}", esc(&desc));
    }
    html.push_str("</div>\n");
    if let Some(code) = notice {
        let text = match code {
            "DONE" => "Action processed successfully.",
            "NONE" => "Nothing has changed: no server was selected.",
            "DENY" => "Action denied.",
            _ => "The request could not be processed.",
        };
        let _ = writeln!(html, "<div class=\"notice\">{text}</div>");
    }
    if page.show_legends {
        html.push_str(
            "<div class=\"legend\"><span style=\"background:#d4f7d4\">up</span>\
             <span style=\"background:#fff3a0\">going down</span>\
             <span style=\"background:#ffd27f\">going up</span>\
             <span style=\"background:#ffb3b3\">down</span>\
             <span style=\"background:#9cd0ff\">draining</span>\
             <span style=\"background:#d9a066\">maintenance</span>\
             <span style=\"background:#eee\">not checked</span></div><p></p>\n",
        );
    }
    let rows: Vec<Row> = stats::collect(process)
        .into_iter()
        .filter(|r| filter.keeps(r.pxname()) && Filter::ALL.keeps(r))
        .collect();
    let mut start = 0;
    while start < rows.len() {
        // One table per proxy: a frontend and a backend may share a name, not an id.
        let proxy = rows[start].pxname().to_owned();
        let iid = rows[start].get(Field::iid).to_owned();
        let end = rows[start..]
            .iter()
            .position(|r| r.pxname() != proxy || r.get(Field::iid) != iid)
            .map_or(rows.len(), |n| start + n);
        // The proxy's `description`, from whichever side of it has one.
        let description = process
            .frontends
            .iter()
            .map(|f| &f.plan.id)
            .chain(process.backends.iter().map(|b| &b.plan.id))
            .find(|id| {
                id.name == proxy
                    && stats::proxy_iid(id.uid).to_string() == iid
                    && id.description.is_some()
            })
            .and_then(|id| id.description.as_deref());
        proxy_table(&mut html, &rows[start..end], admin, description);
        start = end;
    }
    html.push_str("</body></html>\n");
    html
}

fn proxy_table(html: &mut String, rows: &[Row], admin: bool, description: Option<&str>) {
    let Some(first) = rows.first() else {
        return;
    };
    let proxy = esc(first.pxname());
    let has_servers = rows.iter().any(|r| r.kind == RowKind::Server);
    let form = admin && has_servers;
    if form {
        let _ = write!(
            html,
            "<form method=\"post\"><input type=\"hidden\" name=\"b\" value=\"{proxy}\">"
        );
    }
    let caption = match description {
        Some(text) => format!("{proxy} <span class=\"desc\">({})</span>", esc(text)),
        None => proxy.to_string(),
    };
    let _ = write!(
        html,
        "<table id=\"{proxy}\"><caption>{caption}</caption>\n<tr>"
    );
    if form {
        html.push_str("<th></th>");
    }
    html.push_str("<th>Name</th>");
    for (title, _) in COLUMNS {
        let _ = write!(html, "<th>{title}</th>");
    }
    html.push_str("</tr>\n");
    for row in rows {
        let name = esc(row.svname());
        let _ = write!(
            html,
            "<tr class=\"{}\" data-name=\"{name}\">",
            row_class(row)
        );
        if form {
            if row.kind == RowKind::Server {
                let _ = write!(
                    html,
                    "<td><input type=\"checkbox\" name=\"s\" value=\"{name}\"></td>"
                );
            } else {
                html.push_str("<td></td>");
            }
        }
        let _ = write!(html, "<td class=\"name\">{name}</td>");
        for (title, fields) in COLUMNS {
            let class = if *title == "Status" {
                " class=\"status\""
            } else {
                ""
            };
            let _ = write!(html, "<td{class}>{}</td>", esc(&cell(row, title, fields)));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>\n");
    if form {
        html.push_str(
            "<p>Choose the action to perform on the checked servers: <select name=\"action\">\
             <option value=\"ready\">Set state to READY</option>\
             <option value=\"drain\">Set state to DRAIN</option>\
             <option value=\"maint\">Set state to MAINT</option>\
             <option value=\"dhlth\">Health: disable checks</option>\
             <option value=\"ehlth\">Health: enable checks</option>\
             <option value=\"dagent\">Agent: disable checks</option>\
             <option value=\"eagent\">Agent: enable checks</option>\
             </select> <input type=\"submit\" value=\"Apply\"></p></form>\n",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_and_constant_time_comparison() {
        assert_eq!(base64_decode(b"YWRtaW46cHc="), Some(b"admin:pw".to_vec()));
        assert_eq!(base64_decode(b"YQ=="), Some(b"a".to_vec()));
        assert_eq!(base64_decode(b"YQ="), None);
        assert_eq!(base64_decode(b"Y=Q="), None);
        assert_eq!(base64_decode(b"!!!!"), None);
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }

    #[test]
    fn forms_are_decoded() {
        assert_eq!(
            parse_form(b"s=a+b&s=c%21&action=maint&b=%23"),
            [
                ("s".to_owned(), "a b".to_owned()),
                ("s".to_owned(), "c!".to_owned()),
                ("action".to_owned(), "maint".to_owned()),
                ("b".to_owned(), "#".to_owned()),
            ]
        );
        assert_eq!(
            parse_form(b"x&=&%zz=%"),
            [
                ("x".to_owned(), String::new()),
                (String::new(), String::new()),
                ("%zz".to_owned(), "%".to_owned()),
            ]
        );
    }

    #[test]
    fn ages_and_escapes() {
        assert_eq!(human_age(5), "5s");
        assert_eq!(human_age(125), "2m5s");
        assert_eq!(human_age(7322), "2h2m");
        assert_eq!(human_age(90000), "1d1h");
        assert_eq!(esc("<a&'\">"), "&lt;a&amp;&#39;&quot;&gt;");
    }
}
