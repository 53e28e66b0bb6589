//! Re-encoding heads for the next hop, and the Connection header (RFC 9112 §9, RFC 9110 §7.6).
//!
//! The last step of the head's trip through the proxy: after rules have run, the proxy
//! writes the head it forwards with [`encode_request`] / [`encode_response`], from the
//! offsets `head` produced and a [`HeadEdits`] (fields to drop, fields to add, version).
//! Re-encoding rather than copying means the next hop only ever sees canonical syntax: CRLF
//! line ends, `name: value` with one space, no obs-fold, no leading empty lines, whatever
//! the sender's spelling was. Field names keep their case and order (some applications
//! depend on them). [`connection_tokens`] reads the Connection options that decide
//! keep-alive and close, and [`HeadEdits::hop_by_hop`] leaves out the fields that belong to
//! one connection and must not be forwarded. Read [`encode_request`] first.

use crate::field::{self, is_token, list_elements};
use crate::head::{MessageHead, RequestHead, ResponseHead, Version, header_name, header_value};

/// Changes applied while re-encoding a head.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeadEdits<'a> {
    /// Names of fields to leave out, compared ignoring ASCII case (e.g. the hop-by-hop ones).
    pub remove: &'a [&'a str],
    /// Leave out the hop-by-hop fields as well (RFC 9110 §7.6.1): the [`HOP_BY_HOP`] set,
    /// and every field named by an option of a Connection field, except `close` (an option,
    /// not a field) and the protected framing and routing names (`content-length`,
    /// `transfer-encoding`, `host`). With `Some(true)` (the proxy forwards a protocol switch,
    /// e.g. WebSocket), `upgrade` is not removed, so the Upgrade field is kept; the caller
    /// then writes `connection: upgrade` itself. Nothing is allocated for this.
    pub hop_by_hop: Option<bool>,
    /// Fields appended after the kept ones, in order. A pair that is not a valid field (name
    /// not a token, value with CR, LF, NUL or another control character) is skipped, so no
    /// value can inject a line; check with [`is_valid_field`] beforehand to report it.
    pub add: &'a [(&'a str, &'a [u8])],
    /// Version to write on the start line instead of the received one.
    pub version: Option<Version>,
    /// Names to write with another case (`h1-case-adjust`), for peers that need it.
    pub case: Option<&'a HeaderCase>,
}

/// The case some field names must have for HTTP/1 peers that wrongly depend on it
/// (`h1-case-adjust`, `h1-case-adjust-file`): each entry is a name as the peer wants it
/// written; a field whose name matches it ignoring case is written that way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeaderCase {
    names: Vec<Box<str>>,
}

impl HeaderCase {
    /// Adds the entry writing `from` (lower case) as `to`, which differs only by case.
    /// Refuses an entry for a name already there.
    pub fn add(&mut self, from: &str, to: &str) -> Result<(), String> {
        if !is_token(from.as_bytes()) {
            return Err(format!("'{from}' is not a header name"));
        }
        if from.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(format!("<from> must be in lower case, not '{from}'"));
        }
        if !from.eq_ignore_ascii_case(to) {
            return Err(format!(
                "<from> and <to> must differ only by case, not '{from}' and '{to}'"
            ));
        }
        if self.names.iter().any(|n| n.eq_ignore_ascii_case(from)) {
            return Err(format!("duplicate entry '{from}'"));
        }
        self.names.push(to.into());
        Ok(())
    }

    /// Adds the entries of an `h1-case-adjust-file`: two names per line, blanks around them
    /// ignored, as are empty lines and lines starting with `#`. An error names its line.
    pub fn add_lines(&mut self, text: &str) -> Result<(), (usize, String)> {
        for (index, line) in text.lines().enumerate() {
            let line = line.trim_matches([' ', '\t', '\r']);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split([' ', '\t']).filter(|w| !w.is_empty());
            let (from, to) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
            let result = match words.next() {
                Some(extra) => Err(format!("unexpected '{extra}' after two names")),
                None if to.is_empty() => Err("expects <from> and <to>".to_owned()),
                None => self.add(from, to),
            };
            result.map_err(|message| (index + 1, message))?;
        }
        Ok(())
    }

    /// Whether no name is adjusted.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// `name` as it must be written: the entry's spelling, or `name` itself.
    pub fn adjust<'n>(&'n self, name: &'n [u8]) -> &'n [u8] {
        // Linear: lists are short, and only proxies that enable the option pay for it.
        self.names
            .iter()
            .find(|n| n.len() == name.len() && n.as_bytes().eq_ignore_ascii_case(name))
            .map_or(name, |n| n.as_bytes())
    }
}

/// True if `name: value` can be written as one field line: a token name and a value of
/// HTAB, SP, visible characters and obs-text only (RFC 9110 §5.1, §5.5).
pub fn is_valid_field(name: &str, value: &[u8]) -> bool {
    is_token(name.as_bytes()) && value.iter().all(|&b| field::is_field_value_byte(b))
}

/// Writes the kept fields of `head`, the added ones and the closing empty line.
fn write_fields(buf: &[u8], head: &impl MessageHead, edits: &HeadEdits<'_>, out: &mut Vec<u8>) {
    // Whether Connection names fields beyond the fixed set: almost never, so the fields are
    // usually compared with the fixed set only.
    let listed = edits.hop_by_hop.is_some_and(|keep_upgrade| {
        connection_fields(buf, head, keep_upgrade).any(|option| !in_fixed_set(option, false))
    });
    for h in head.headers() {
        let name = header_name(buf, h);
        if edits
            .remove
            .iter()
            .any(|r| name.eq_ignore_ascii_case(r.as_bytes()))
        {
            continue;
        }
        if let Some(keep_upgrade) = edits.hop_by_hop
            && (in_fixed_set(name, keep_upgrade)
                || listed
                    && connection_fields(buf, head, keep_upgrade)
                        .any(|option| option.eq_ignore_ascii_case(name)))
        {
            continue;
        }
        write_field(adjusted(edits, name), header_value(buf, h), out);
    }
    for (name, value) in edits.add {
        if is_valid_field(name, value) {
            write_field(adjusted(edits, name.as_bytes()), value, out);
        }
    }
    out.extend_from_slice(b"\r\n");
}

fn adjusted<'n>(edits: &HeadEdits<'n>, name: &'n [u8]) -> &'n [u8] {
    edits.case.map_or(name, |case| case.adjust(name))
}

fn write_field(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends the re-encoded request head to `out`: `method SP target SP version CRLF`, the
/// fields of `head` not named in `edits.remove` (case and order kept), `edits.add`, CRLF.
/// `buf` must be the buffer `head` was parsed from; the target is written as received.
pub fn encode_request(buf: &[u8], head: &RequestHead, edits: &HeadEdits<'_>, out: &mut Vec<u8>) {
    out.reserve(head.head_len.saturating_add(64));
    out.extend_from_slice(head.method_bytes(buf));
    out.push(b' ');
    out.extend_from_slice(head.target_bytes(buf));
    out.push(b' ');
    out.extend_from_slice(edits.version.unwrap_or(head.version).as_bytes());
    out.extend_from_slice(b"\r\n");
    write_fields(buf, head, edits, out);
}

/// Appends the re-encoded response head to `out`: `version SP status SP reason CRLF` (the
/// space before an empty reason is kept, as RFC 9112 §4 requires it), the fields not
/// removed, `edits.add`, CRLF. `buf` must be the buffer `head` was parsed from.
pub fn encode_response(buf: &[u8], head: &ResponseHead, edits: &HeadEdits<'_>, out: &mut Vec<u8>) {
    out.reserve(head.head_len.saturating_add(64));
    out.extend_from_slice(edits.version.unwrap_or(head.version).as_bytes());
    out.push(b' ');
    write_decimal(head.status, out);
    out.push(b' ');
    out.extend_from_slice(head.reason_bytes(buf));
    out.extend_from_slice(b"\r\n");
    write_fields(buf, head, edits, out);
}

fn write_decimal(n: u16, out: &mut Vec<u8>) {
    let mut digits = [0u8; 5];
    let mut len = 0;
    let mut n = n;
    for slot in digits.iter_mut() {
        *slot = b'0' + (n % 10) as u8;
        n /= 10;
        len += 1;
        if n == 0 {
            break;
        }
    }
    out.extend(digits.iter().take(len).rev());
}

/// The options of the Connection fields that matter to the proxy (RFC 9110 §7.6.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ConnectionOptions {
    /// `close`: the sender closes after this message.
    pub close: bool,
    /// `keep-alive`: an HTTP/1.0 sender asks for a persistent connection.
    pub keep_alive: bool,
    /// `upgrade`: the message asks to switch protocols (RFC 9110 §7.8).
    pub upgrade: bool,
}

impl ConnectionOptions {
    /// Whether the connection stays open after this message (RFC 9112 §9.3): `close` always
    /// ends it; otherwise HTTP/1.1 persists and HTTP/1.0 persists only with `keep-alive`.
    pub fn persistent(&self, version: Version) -> bool {
        !self.close && (version == Version::Http11 || self.keep_alive)
    }
}

/// Reads every Connection field of `head` as one comma list, options compared ignoring case.
/// Unknown options are ignored here (they name fields; see [`HeadEdits::hop_by_hop`]).
pub fn connection_tokens(buf: &[u8], head: &impl MessageHead) -> ConnectionOptions {
    let mut options = ConnectionOptions::default();
    for value in head.header_values(buf, "connection") {
        for option in list_elements(value) {
            if option.eq_ignore_ascii_case(b"close") {
                options.close = true;
            } else if option.eq_ignore_ascii_case(b"keep-alive") {
                options.keep_alive = true;
            } else if option.eq_ignore_ascii_case(b"upgrade") {
                options.upgrade = true;
            }
        }
    }
    options
}

/// The fields that are hop-by-hop whatever the Connection field says. `connection` itself
/// (the proxy writes its own), `keep-alive` (RFC 2068's parameters for one connection),
/// `proxy-connection` (a non-standard Connection sent by old clients to proxies), `te` (what
/// the *sender's* hop accepts, RFC 9110 §10.1.4 makes it hop-by-hop) and `upgrade` (a
/// protocol switch is negotiated per connection, RFC 9110 §7.8).
///
/// Not in the list: `transfer-encoding` and `content-length`, which are framing: the proxy
/// decides them itself from `framing` (see its module documentation) rather than by
/// removal here; `trailer`, which RFC 9110 §6.6.2 does not make hop-by-hop, and since
/// trailers are forwarded the announcement stays true; `proxy-authenticate` and
/// `proxy-authorization`, which HAProxy forwards to the server.
pub const HOP_BY_HOP: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "upgrade",
];

/// Fields a Connection option can never remove: framing and routing fields. A client
/// sending `Connection: content-length` or `Connection: host` would otherwise have the proxy
/// strip the very fields the server needs to frame or route the message.
const PROTECTED: [&str; 3] = ["content-length", "transfer-encoding", "host"];

/// Whether `name` is in the [`HOP_BY_HOP`] set (without `upgrade` when it is kept).
fn in_fixed_set(name: &[u8], keep_upgrade: bool) -> bool {
    HOP_BY_HOP
        .iter()
        .any(|n| !(keep_upgrade && *n == "upgrade") && name.eq_ignore_ascii_case(n.as_bytes()))
}

/// The options of the Connection fields that name a field to remove: tokens, except
/// `close`, `upgrade` when it is kept, and the protected names.
fn connection_fields<'a>(
    buf: &'a [u8],
    head: &'a impl MessageHead,
    keep_upgrade: bool,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    head.header_values(buf, "connection")
        .flat_map(list_elements)
        .filter(move |option| {
            let kept_upgrade = keep_upgrade && option.eq_ignore_ascii_case(b"upgrade");
            let protected = PROTECTED
                .iter()
                .any(|p| option.eq_ignore_ascii_case(p.as_bytes()));
            is_token(option)
                && !option.eq_ignore_ascii_case(b"close")
                && !kept_upgrade
                && !protected
        })
}

#[cfg(test)]
mod tests;
