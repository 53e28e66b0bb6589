//! The HTTP keywords of proxy sections (configuration.txt §4.2): connection modes
//! (`option http-keep-alive|http-server-close|httpclose`), added headers (`option forwardfor`,
//! `option originalto`, `http-send-name-header`), server connection sharing (`http-reuse`),
//! `option checkcache`, credentials of proxied requests (`option http-use-proxy-header`), the case of field names for bogus peers
//! (`option h1-case-adjust-bogus-client|server`) and the parser's tolerance (`option accept-unsafe-violations-in-http-request|response`).
//!
//! They are collected in [`HttpConf`], part of every [`crate::proxy::ProxyConf`], and inherited
//! from `defaults` like every other setting.

use crate::diag::Diagnostics;
use crate::directive::Directive;
use ipnet::IpNet;
use sluice_http::encode::HeaderCase;
use sluice_sample::{Expr, MapStore, Stages};
use std::sync::Arc;

/// How HTTP connections are kept between requests (configuration.txt §4 "KAL/SCL/CLO").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum HttpConnMode {
    /// `option http-keep-alive` (the default): both sides stay open between requests.
    #[default]
    KeepAlive,
    /// `option http-server-close`: the server side closes after each response.
    ServerClose,
    /// `option httpclose`: both sides close after each response.
    Close,
}

/// `option forwardfor` or `option originalto`: a header carrying an address to the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressHeader {
    /// The header's name (`X-Forwarded-For` / `X-Original-To` unless `header NAME`).
    pub header: String,
    /// Clients in this network get no header (`except NET`).
    pub except: Option<IpNet>,
    /// Only add the header when the request has none (`if-none`, forwardfor only).
    pub if_none: bool,
}

/// `option forwarded`: the RFC 7239 `forwarded` field added to requests sent to servers,
/// with the parameters it names (configuration.txt §4.2).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Forwarded {
    /// `proto`: `http` (Sluice's clients come in clear).
    pub proto: bool,
    /// `host` (the request's Host field) or `host-expr`.
    pub host: Option<ForwardedValue>,
    /// `by` (the address the client reached) or `by-expr`.
    pub by: Option<ForwardedValue>,
    /// `by_port` or `by_port-expr`: a port after the `by` node.
    pub by_port: Option<ForwardedValue>,
    /// `for` (the client's address) or `for-expr`.
    pub for_node: Option<ForwardedValue>,
    /// `for_port` or `for_port-expr`: a port after the `for` node.
    pub for_port: Option<ForwardedValue>,
}

/// Where a parameter of `option forwarded` takes its value.
#[derive(Clone, Debug)]
pub enum ForwardedValue {
    /// From the connection or the request (`for`, `by`, `host`...).
    Original,
    /// From an expression (`for-expr`...).
    Expr(Expr),
}

impl PartialEq for ForwardedValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ForwardedValue::Original, ForwardedValue::Original) => true,
            (ForwardedValue::Expr(a), ForwardedValue::Expr(b)) => a.text() == b.text(),
            _ => false,
        }
    }
}

impl Eq for ForwardedValue {}

/// How idle server connections may be shared between requests (`http-reuse`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HttpReuse {
    /// Never shared between client connections.
    Never,
    /// The default: a client's first request uses its own connection, later ones may share.
    #[default]
    Safe,
    /// First requests may use connections that were already reused once.
    Aggressive,
    /// Any idle connection may carry any request.
    Always,
}

/// Everything HTTP a proxy section says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpConf {
    /// Connection mode, if set.
    pub conn_mode: Option<HttpConnMode>,
    /// `option forwardfor`.
    pub forwardfor: Option<AddressHeader>,
    /// `option originalto`.
    pub originalto: Option<AddressHeader>,
    /// `option forwarded` (backends).
    pub forwarded: Option<Forwarded>,
    /// `http-send-name-header`: header carrying the chosen server's name.
    pub send_name_header: Option<String>,
    /// `http-reuse`.
    pub reuse: Option<HttpReuse>,
    /// `option accept-unsafe-violations-in-http-request` (or the older
    /// `accept-invalid-http-request`).
    pub accept_unsafe_request: bool,
    /// `option accept-unsafe-violations-in-http-response` (or `accept-invalid-http-response`).
    pub accept_unsafe_response: bool,
    /// `option http-buffer-request`: the request rules wait for the whole body (or a full
    /// buffer).
    pub buffer_request: bool,
    /// `option prefer-last-server`: a request goes to the server whose connection the
    /// session kept when the balancing would pick any (rotations, loads, draws).
    pub prefer_last_server: bool,
    /// `option abortonclose`: a request whose client closed its side while it waited for a
    /// server (queued, or connecting) is abandoned.
    pub abort_on_close: bool,
    /// `option http-pretend-keepalive`: under `http-server-close` or `httpclose`, requests
    /// do not tell the server the connection closes (it is closed after the response).
    pub pretend_keepalive: bool,
    /// `option idle-close-on-response` (frontends): at a soft stop, idle kept-alive client
    /// connections are not closed; each gets its next request answered, with `Connection:
    /// close`, then ends (or ends at its keep-alive limit).
    pub idle_close_on_response: bool,
    /// `option http-use-proxy-header` (frontends): a request sent to a proxy (its target is
    /// neither `/...` nor `*`) has its credentials in `Proxy-Authorization`, and
    /// `http-request auth` asks for them with a 407 and `Proxy-Authenticate`.
    pub use_proxy_header: bool,
    /// `option checkcache`: a response a shared cache could store with the server's
    /// `Set-Cookie` is refused (502), since the cache would hand that cookie to everyone.
    pub check_cache: bool,
    /// `option http-restrict-req-hdr-names`: what becomes of request fields whose names
    /// hold characters other than letters, digits and `-` (unset: they are kept).
    pub restrict_header_names: Option<HeaderNamePolicy>,
    /// `option h1-case-adjust-bogus-client` (frontends): the global `h1-case-adjust` names
    /// applied to the heads sent to clients. Set as the option is read, with an empty list;
    /// the plan puts the global list in its place.
    pub case_adjust_client: Option<Arc<HeaderCase>>,
    /// `option h1-case-adjust-bogus-server` (backends): the same for heads sent to servers.
    pub case_adjust_server: Option<Arc<HeaderCase>>,
}

/// `option http-restrict-req-hdr-names`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderNamePolicy {
    /// `preserve`: keep them.
    Preserve,
    /// `delete`: remove them before the request goes on.
    Delete,
    /// `reject`: answer 403.
    Reject,
}

/// Names of `option` keywords handled here.
pub(crate) fn is_http_option(name: &str) -> bool {
    matches!(
        name,
        "http-keep-alive"
            | "http-server-close"
            | "httpclose"
            | "forwardfor"
            | "originalto"
            | "forwarded"
            | "accept-unsafe-violations-in-http-request"
            | "accept-invalid-http-request"
            | "accept-unsafe-violations-in-http-response"
            | "accept-invalid-http-response"
            | "http-buffer-request"
            | "http-restrict-req-hdr-names"
            | "http-pretend-keepalive"
            | "abortonclose"
            | "prefer-last-server"
            | "checkcache"
            | "idle-close-on-response"
            | "h1-case-adjust-bogus-client"
            | "h1-case-adjust-bogus-server"
            | "http-use-proxy-header"
    )
}

/// Applies `option NAME …` (`enable`) or `no option NAME` to `conf`; `first_arg` is the index
/// of the first word after the option's name.
pub(crate) fn apply_http_option(
    conf: &mut HttpConf,
    d: &Directive<'_>,
    name: &str,
    first_arg: usize,
    enable: bool,
    diags: &mut Diagnostics,
) {
    match name {
        "http-keep-alive" | "http-server-close" | "httpclose" => {
            conf.conn_mode = Some(match (name, enable) {
                (_, false) | ("http-keep-alive", true) => HttpConnMode::KeepAlive,
                ("http-server-close", true) => HttpConnMode::ServerClose,
                _ => HttpConnMode::Close,
            });
            d.no_more_than(first_arg, diags);
        }
        "forwardfor" | "originalto" => {
            let slot = if name == "forwardfor" {
                &mut conf.forwardfor
            } else {
                &mut conf.originalto
            };
            let default_header = if name == "forwardfor" {
                "X-Forwarded-For"
            } else {
                "X-Original-To"
            };
            *slot = parse_address_header(d, first_arg, default_header, name == "forwardfor", diags);
        }
        "forwarded" => {
            if enable {
                conf.forwarded = parse_forwarded(d, first_arg, diags);
            } else {
                conf.forwarded = None;
                d.no_more_than(first_arg, diags);
            }
        }
        "accept-unsafe-violations-in-http-request" | "accept-invalid-http-request" => {
            conf.accept_unsafe_request = enable;
            d.no_more_than(first_arg, diags);
        }
        "http-buffer-request"
        | "http-pretend-keepalive"
        | "abortonclose"
        | "prefer-last-server"
        | "checkcache"
        | "idle-close-on-response"
        | "http-use-proxy-header" => {
            let flag = match name {
                "http-buffer-request" => &mut conf.buffer_request,
                "http-pretend-keepalive" => &mut conf.pretend_keepalive,
                "abortonclose" => &mut conf.abort_on_close,
                "checkcache" => &mut conf.check_cache,
                "idle-close-on-response" => &mut conf.idle_close_on_response,
                "http-use-proxy-header" => &mut conf.use_proxy_header,
                _ => &mut conf.prefer_last_server,
            };
            *flag = enable;
            d.no_more_than(first_arg, diags);
        }
        "h1-case-adjust-bogus-client" | "h1-case-adjust-bogus-server" => {
            let slot = if name == "h1-case-adjust-bogus-client" {
                &mut conf.case_adjust_client
            } else {
                &mut conf.case_adjust_server
            };
            *slot = enable.then(Arc::default);
            d.no_more_than(first_arg, diags);
        }
        "http-restrict-req-hdr-names" => {
            let policy = match d.word(first_arg, "'preserve', 'delete' or 'reject'", diags) {
                Some("preserve") => Some(HeaderNamePolicy::Preserve),
                Some("delete") => Some(HeaderNamePolicy::Delete),
                Some("reject") => Some(HeaderNamePolicy::Reject),
                Some(other) => {
                    diags.push(d.alert(format!(
                        "expects 'preserve', 'delete' or 'reject', not '{other}'"
                    )));
                    None
                }
                None => None,
            };
            if policy.is_some() {
                conf.restrict_header_names = policy;
            }
            d.no_more_than(first_arg + 1, diags);
        }
        _ => {
            conf.accept_unsafe_response = enable;
            d.no_more_than(first_arg, diags);
        }
    }
}

/// `option forwarded [proto] [host|host-expr E] [by|by-expr E] [by_port|by_port-expr E]
/// [for|for-expr E] [for_port|for_port-expr E]`; without arguments, `proto for`.
fn parse_forwarded(
    d: &Directive<'_>,
    first_arg: usize,
    diags: &mut Diagnostics,
) -> Option<Forwarded> {
    let mut option = Forwarded::default();
    if d.words.len() <= first_arg {
        option.proto = true;
        option.for_node = Some(ForwardedValue::Original);
        return Some(option);
    }
    let maps = MapStore::new();
    let mut i = first_arg;
    while let Some(word) = d.words.get(i) {
        let (name, with_expr) = match word.strip_suffix("-expr") {
            Some(name) => (name, true),
            None => (word.as_str(), false),
        };
        let slot = match name {
            "proto" if !with_expr => {
                option.proto = true;
                i += 1;
                continue;
            }
            "host" => &mut option.host,
            "by" => &mut option.by,
            "by_port" => &mut option.by_port,
            "for" => &mut option.for_node,
            "for_port" => &mut option.for_port,
            _ => {
                diags.push(d.alert(format!(
                    "unexpected argument '{word}' (expects 'proto', 'host', 'by', 'by_port', 'for', 'for_port' or their '-expr' forms)"
                )));
                return None;
            }
        };
        if with_expr {
            let text = d.word(i + 1, "a sample expression", diags)?;
            // Evaluated on the request a backend sends.
            let parsed = Expr::parse(text, &maps)
                .and_then(|mut expr| expr.check_stages(Stages::BE_HTTP_REQ).map(|()| expr));
            match parsed {
                Ok(expr) => *slot = Some(ForwardedValue::Expr(expr)),
                Err(message) => {
                    diags.push(d.alert(format!("'{word}': {message}")));
                    return None;
                }
            }
            i += 2;
        } else {
            *slot = Some(ForwardedValue::Original);
            i += 1;
        }
    }
    Some(option)
}

fn parse_address_header(
    d: &Directive<'_>,
    first_arg: usize,
    default_header: &str,
    allow_if_none: bool,
    diags: &mut Diagnostics,
) -> Option<AddressHeader> {
    let mut option = AddressHeader {
        header: default_header.to_owned(),
        except: None,
        if_none: false,
    };
    let mut i = first_arg;
    while let Some(word) = d.words.get(i) {
        match word.as_str() {
            "except" => {
                let net = d.word(i + 1, "a network after 'except'", diags)?;
                option.except = Some(parse_network(net).or_else(|| {
                    diags.push(d.alert(format!("invalid network '{net}' after 'except'")));
                    None
                })?);
                i += 2;
            }
            "header" => {
                let name = d.word(i + 1, "a header name after 'header'", diags)?;
                if name.is_empty() || !name.bytes().all(is_token_byte) {
                    diags.push(d.alert(format!("invalid header name '{name}'")));
                    return None;
                }
                option.header = name.to_owned();
                i += 2;
            }
            "if-none" if allow_if_none => {
                option.if_none = true;
                i += 1;
            }
            other => {
                diags.push(d.alert(format!("unexpected argument '{other}'")));
                return None;
            }
        }
    }
    Some(option)
}

/// An address or a network: `10.0.0.0/8`, `127.0.0.1` (a /32), `::1`.
fn parse_network(text: &str) -> Option<IpNet> {
    text.parse::<IpNet>()
        .ok()
        .or_else(|| text.parse::<std::net::IpAddr>().ok().map(IpNet::from))
}

/// RFC 9110 §5.6.2 token characters, the only ones allowed in a header name.
pub(crate) fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Applies `http-reuse MODE`.
pub(crate) fn parse_http_reuse(conf: &mut HttpConf, d: &Directive<'_>, diags: &mut Diagnostics) {
    conf.reuse = match d.word(1, "'never', 'safe', 'aggressive' or 'always'", diags) {
        Some("never") => Some(HttpReuse::Never),
        Some("safe") => Some(HttpReuse::Safe),
        Some("aggressive") => Some(HttpReuse::Aggressive),
        Some("always") => Some(HttpReuse::Always),
        Some(other) => {
            diags.push(d.alert(format!(
                "expects 'never', 'safe', 'aggressive' or 'always', not '{other}'"
            )));
            conf.reuse
        }
        None => conf.reuse,
    };
    d.no_more_than(2, diags);
}

/// Applies `http-send-name-header [NAME]`.
pub(crate) fn parse_send_name_header(
    conf: &mut HttpConf,
    d: &Directive<'_>,
    diags: &mut Diagnostics,
) {
    let name = d.words.get(1).map_or("X-Server", String::as_str);
    if name.is_empty() || !name.bytes().all(is_token_byte) {
        diags.push(d.alert(format!("invalid header name '{name}'")));
        return;
    }
    conf.send_name_header = Some(name.to_owned());
    d.no_more_than(2, diags);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_accept_addresses_and_prefixes() {
        assert_eq!(parse_network("127.0.0.1").map(|n| n.prefix_len()), Some(32));
        assert_eq!(parse_network("10.0.0.0/8").map(|n| n.prefix_len()), Some(8));
        assert_eq!(parse_network("::1").map(|n| n.prefix_len()), Some(128));
        assert_eq!(parse_network("10.0.0.0/33"), None);
        assert_eq!(parse_network("host"), None);
    }

    #[test]
    fn token_bytes() {
        assert!(b"X-Forwarded-For".iter().all(|&b| is_token_byte(b)));
        assert!(!is_token_byte(b' '));
        assert!(!is_token_byte(b':'));
    }
}
