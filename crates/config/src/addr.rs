//! Parses the addresses of `bind`, `stats socket` and `server` lines (manual §2.9).
//!
//! Keyword parsers hand one lexed word to [`parse_listen_addrs`] (a comma-separated list of
//! addresses to listen on) or to [`parse_server_addr`] (exactly one address to connect to). The
//! result says what to bind or connect to without touching the network: host names are kept as
//! [`Host::Name`] and resolved later by the runtime. Sluice only speaks stream sockets over TCP
//! and unix sockets (named by a path or, on Linux, in the abstract namespace), so the
//! datagram, QUIC and socket-pair forms HAProxy knows are refused with a clear "not supported
//! by Sluice" rather than as unknown syntax.
//!
//! Read [`parse_listen_addrs`] first.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;

/// Which IP family an address is restricted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Not restricted: decided by the literal, or by name resolution for host names.
    Unspec,
    /// IPv4 only.
    V4,
    /// IPv6 only.
    V6,
}

/// The host part of an IP address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// Every local address: `*`, an empty host, `0.0.0.0` (V4) or `::` (V6). For a server this
    /// means "connect to the address the client connected to". `Any(Family::Unspec)` comes from
    /// `*` or an empty host without a family prefix; §2.9 says it stands for `0.0.0.0`.
    Any(Family),
    /// A literal IP address other than the unspecified ones.
    Ip(IpAddr),
    /// A host name, to be resolved later (not here).
    Name(String),
}

/// The longest abstract socket name: `sun_path` holds 108 bytes, the first being the NUL
/// that marks the abstract namespace.
pub const ABSTRACT_NAME_MAX: usize = 107;

/// A unix socket in Linux's abstract namespace (`abns@name`, `abnsz@name`): a name that
/// exists only while a socket is bound to it, with no file and so no permissions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AbstractName {
    /// The name, without the NUL byte that starts the socket address.
    pub name: String,
    /// `abns@`: the socket address is the whole of `sun_path`, the name padded with NUL
    /// bytes, as HAProxy forms it; `abnsz@`: it ends with the name, as most other programs
    /// (socat, systemd) form it. The two forms of one name are different sockets.
    pub padded: bool,
}

impl fmt::Display for AbstractName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = if self.padded { "abns" } else { "abnsz" };
        write!(f, "{prefix}@{}", self.name)
    }
}

/// One address to listen on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddr {
    /// A TCP address with a port or a port range.
    Inet {
        /// The family forced by a prefix (`ipv4@`, `tcp6@`...) or implied by the IP literal;
        /// `Unspec` for `*` and host names without a prefix.
        family: Family,
        /// What to bind to.
        host: Host,
        /// The ports, `start <= end`, never 0.
        ports: RangeInclusive<u16>,
    },
    /// A unix socket path (absolute, or relative after `unix@`).
    Unix(String),
    /// A unix socket in the abstract namespace.
    Abstract(AbstractName),
    /// An inherited, already bound file descriptor (`fd@<n>`).
    Fd(i32),
}

/// The port of a server address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerPort {
    /// No port (or port 0): connect to the port the client connected to.
    SameAsClient,
    /// `:80`: this port.
    Fixed(u16),
    /// `:+1000` or `:-10`: the client's destination port plus this offset.
    Offset(i32),
}

/// The address of a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerAddr {
    /// A TCP address.
    Inet {
        /// As in [`ListenAddr::Inet`].
        family: Family,
        /// What to connect to; host names are resolved later.
        host: Host,
        /// Which port.
        port: ServerPort,
    },
    /// A unix socket path.
    Unix(String),
    /// A unix socket in the abstract namespace.
    Abstract(AbstractName),
}

/// Why an address was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddrError {
    /// The address (or one element of a list) is empty.
    Empty,
    /// A prefix HAProxy knows but Sluice does not implement (`udp@`, `quic4@`...).
    UnsupportedPrefix(String),
    /// A `xxx@` prefix nobody knows.
    UnknownPrefix(String),
    /// A listening IP address without a port.
    MissingPort(String),
    /// A port that is not a number from 1 to 65535 (or an offset beyond ±65535).
    InvalidPort(String),
    /// A port range whose start is after its end.
    InvalidPortRange(String),
    /// A port range in a server address.
    PortRangeNotAllowed(String),
    /// Neither an IP address nor a valid host name.
    InvalidHost(String),
    /// The literal's family contradicts the prefix (`ipv6@1.2.3.4`).
    FamilyMismatch {
        /// The prefix, with its `@`.
        prefix: String,
        /// The host part.
        host: String,
    },
    /// A `[` without its `]`, or something other than `:port` after the `]`.
    BadBrackets(String),
    /// `fd@` not followed by a non-negative integer.
    InvalidFd(String),
    /// `fd@` in a server address.
    FdNotAllowed,
    /// `unix@` with nothing after it.
    EmptyPath,
    /// `abns@` or `abnsz@` with nothing after it.
    EmptyAbstractName,
    /// An abstract socket name longer than [`ABSTRACT_NAME_MAX`] bytes.
    AbstractNameTooLong(String),
    /// A comma-separated list where exactly one address is expected.
    MultipleAddresses,
}

impl fmt::Display for AddrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddrError::Empty => f.write_str("empty address"),
            AddrError::UnsupportedPrefix(p) => {
                write!(f, "address prefix '{p}' is not supported by Sluice")
            }
            AddrError::UnknownPrefix(p) => write!(f, "unknown address prefix '{p}'"),
            AddrError::MissingPort(a) => write!(f, "missing port in '{a}'"),
            AddrError::InvalidPort(p) => {
                write!(f, "invalid port '{p}' (expected a number from 1 to 65535)")
            }
            AddrError::InvalidPortRange(r) => {
                write!(
                    f,
                    "invalid port range '{r}' (the first port is above the last)"
                )
            }
            AddrError::PortRangeNotAllowed(r) => {
                write!(f, "port range '{r}' is not allowed in a server address")
            }
            AddrError::InvalidHost(h) if h.contains(':') => write!(
                f,
                "invalid address '{h}' (an IPv6 address needs brackets, as in [::1]:80, or a \
                 final ':' when there is no port)"
            ),
            AddrError::InvalidHost(h) => write!(f, "invalid address or host name '{h}'"),
            AddrError::FamilyMismatch { prefix, host } => {
                let family = if prefix.ends_with("6@") {
                    "IPv6"
                } else {
                    "IPv4"
                };
                write!(
                    f,
                    "'{host}' is not an {family} address, as '{prefix}' requires"
                )
            }
            AddrError::BadBrackets(a) => write!(f, "malformed bracketed IPv6 address '{a}'"),
            AddrError::InvalidFd(n) => {
                write!(
                    f,
                    "invalid file descriptor '{n}' after 'fd@' (expected a number >= 0)"
                )
            }
            AddrError::FdNotAllowed => f.write_str("'fd@' can only be used to listen"),
            AddrError::EmptyPath => f.write_str("empty unix socket path"),
            AddrError::EmptyAbstractName => f.write_str("empty abstract socket name"),
            AddrError::AbstractNameTooLong(name) => write!(
                f,
                "abstract socket name '{name}' is longer than {ABSTRACT_NAME_MAX} bytes"
            ),
            AddrError::MultipleAddresses => {
                f.write_str("exactly one address is expected, not a comma-separated list")
            }
        }
    }
}

impl std::error::Error for AddrError {}

/// Which word of a configuration line holds an address that names environment variables
/// with a bare `$` ([`expand_env`]), if any: `bind ADDR`, `server NAME ADDR`,
/// `server-template PREFIX NUM ADDR`, `source ADDR`, `log ADDR`, `stats socket ADDR`,
/// `mailer NAME ADDR`, `peer NAME ADDR`, `nameserver NAME ADDR`, `dgram-bind ADDR`.
pub fn address_word(words: &[String]) -> Option<usize> {
    let index = match words.first()?.as_str() {
        "bind" | "source" | "log" | "dgram-bind" => 1,
        "server" | "mailer" | "peer" | "nameserver" => 2,
        "server-template" => 3,
        "stats" if words.get(1).is_some_and(|w| w == "socket") => 2,
        _ => return None,
    };
    (index < words.len()).then_some(index)
}

/// Replaces every `$NAME` and `${NAME}` of an address with the variable's value (nothing if
/// it is not set), `NAME` being letters, digits and underscores. HAProxy's address parser
/// expands them wherever the address came from, quoted or not, so configurations write
/// `bind *:$PORT`; elsewhere only double-quoted text is expanded (configuration.txt §2.2).
/// Unlike the quoted form, no `${NAME-default}`: the text after the name stays as it is.
pub fn expand_env(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        let (braced, name_start) = match after.strip_prefix('{') {
            Some(inner) => (true, inner),
            None => (false, after),
        };
        let name_len = name_start
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(name_start.len());
        let name = &name_start[..name_len];
        let mut tail = &name_start[name_len..];
        if braced && let Some(closed) = tail.strip_prefix('}') {
            tail = closed;
        }
        if let Some(value) = lookup(name) {
            out.push_str(&value);
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// Parses the address list of `bind` or `stats socket`: addresses separated by commas, each
/// being a unix path (`/...` or `unix@...`), an inherited descriptor (`fd@<n>`), or an IP
/// address or host name with a mandatory port or port range (`*:80`, `:80`, `[::1]:443`,
/// `:::80`, `10.0.0.1:8000-8010`, `ipv6@:80`...).
pub fn parse_listen_addrs(s: &str) -> Result<Vec<ListenAddr>, AddrError> {
    s.split(',').map(parse_listen_addr).collect()
}

/// Parses the address of a `server` line: a unix path, or an IP address or host name with an
/// optional port (`:80`), port offset (`:+1000`, `:-10`) or no port at all. Host names are kept
/// as [`Host::Name`].
pub fn parse_server_addr(s: &str) -> Result<ServerAddr, AddrError> {
    match classify(s)? {
        Kind::Unix(path) => Ok(ServerAddr::Unix(path.to_string())),
        Kind::Abstract(name) => Ok(ServerAddr::Abstract(name)),
        Kind::Fd(_) => Err(AddrError::FdNotAllowed),
        Kind::Inet {
            prefix,
            family,
            rest,
        } => {
            // A unix path may contain commas; an IP address or host name may not.
            if rest.contains(',') {
                return Err(AddrError::MultipleAddresses);
            }
            let (host, port) = split_host_port(rest)?;
            let (family, host) = parse_host(prefix, family, host)?;
            let port = match port {
                None => ServerPort::SameAsClient,
                Some(port) => parse_server_port(port)?,
            };
            Ok(ServerAddr::Inet { family, host, port })
        }
    }
}

/// One element of a listen list.
fn parse_listen_addr(s: &str) -> Result<ListenAddr, AddrError> {
    match classify(s)? {
        Kind::Unix(path) => Ok(ListenAddr::Unix(path.to_string())),
        Kind::Abstract(name) => Ok(ListenAddr::Abstract(name)),
        Kind::Fd(fd) => Ok(ListenAddr::Fd(fd)),
        Kind::Inet {
            prefix,
            family,
            rest,
        } => {
            let (host, port) = split_host_port(rest)?;
            let (family, host) = parse_host(prefix, family, host)?;
            let ports = match port {
                Some(port) if !port.is_empty() => parse_port_range(port)?,
                _ => return Err(AddrError::MissingPort(s.to_string())),
            };
            Ok(ListenAddr::Inet {
                family,
                host,
                ports,
            })
        }
    }
}

/// What an address is, once its prefix is known.
enum Kind<'a> {
    Unix(&'a str),
    Abstract(AbstractName),
    Fd(i32),
    Inet {
        /// The prefix as written, with its `@` (empty if none), for error messages.
        prefix: &'a str,
        family: Family,
        rest: &'a str,
    },
}

/// Reads the optional `xxx@` prefix (§2.9.1 to §2.9.3) and says what kind of address follows.
fn classify(s: &str) -> Result<Kind<'_>, AddrError> {
    if s.is_empty() {
        return Err(AddrError::Empty);
    }
    // §2.9: an address starting with '/' is a unix socket path, even if it contains '@'.
    if s.starts_with('/') {
        return Ok(Kind::Unix(s));
    }
    let Some(at) = s.find('@') else {
        return Ok(Kind::Inet {
            prefix: "",
            family: Family::Unspec,
            rest: s,
        });
    };
    let (name, rest) = (&s[..at], &s[at + 1..]);
    let prefix = &s[..=at];
    let inet = |family| {
        Ok(Kind::Inet {
            prefix,
            family,
            rest,
        })
    };
    match name {
        "ip" | "tcp" => inet(Family::Unspec),
        "ipv4" | "tcp4" => inet(Family::V4),
        "ipv6" | "tcp6" => inet(Family::V6),
        "unix" if rest.is_empty() => Err(AddrError::EmptyPath),
        "unix" => Ok(Kind::Unix(rest)),
        "fd" => parse_fd(rest).map(Kind::Fd),
        "abns" | "abnsz" => parse_abstract(rest, name == "abns").map(Kind::Abstract),
        "sockpair" | "udp" | "udp4" | "udp6" | "quic4" | "quic6" | "uxst" | "uxdg" | "rhttp"
        | "mptcp" | "mptcp4" | "mptcp6" => Err(AddrError::UnsupportedPrefix(prefix.to_string())),
        // The socket-type prefixes of §2.9.2 ("stream+ipv4@", "dgram+unix@", ...).
        _ if ["stream+", "dgram+", "quic+"]
            .iter()
            .any(|p| name.starts_with(p)) =>
        {
            Err(AddrError::UnsupportedPrefix(prefix.to_string()))
        }
        _ => Err(AddrError::UnknownPrefix(prefix.to_string())),
    }
}

/// The name after `abns@` or `abnsz@`: any bytes but NUL (which the lexer cannot produce)
/// and the comma that separates listening addresses, up to the room `sun_path` leaves.
fn parse_abstract(name: &str, padded: bool) -> Result<AbstractName, AddrError> {
    if name.is_empty() {
        return Err(AddrError::EmptyAbstractName);
    }
    if name.len() > ABSTRACT_NAME_MAX {
        return Err(AddrError::AbstractNameTooLong(name.to_string()));
    }
    Ok(AbstractName {
        name: name.to_string(),
        padded,
    })
}

/// `fd@<n>`: a non-negative descriptor number (any `${VAR}` was expanded by the lexer).
fn parse_fd(s: &str) -> Result<i32, AddrError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AddrError::InvalidFd(s.to_string()));
    }
    s.parse().map_err(|_| AddrError::InvalidFd(s.to_string()))
}

/// Splits `host[:port]`. `[v6]` and `[v6]:port` use brackets; otherwise the last colon
/// separates the port, as in HAProxy, so `:::80` is `::` port 80 and an IPv6 address without
/// brackets and without a port must end with a colon (`::1:`). The port part is `None` when
/// there is no colon and may be empty (`host:`).
fn split_host_port(s: &str) -> Result<(&str, Option<&str>), AddrError> {
    if let Some(inner) = s.strip_prefix('[') {
        let Some(close) = inner.find(']') else {
            return Err(AddrError::BadBrackets(s.to_string()));
        };
        let host = &inner[..close];
        let after = &inner[close + 1..];
        if host.parse::<Ipv6Addr>().is_err() {
            return Err(AddrError::BadBrackets(s.to_string()));
        }
        return match after.strip_prefix(':') {
            Some(port) => Ok((host, Some(port))),
            None if after.is_empty() => Ok((host, None)),
            None => Err(AddrError::BadBrackets(s.to_string())),
        };
    }
    Ok(match s.rfind(':') {
        Some(colon) => (&s[..colon], Some(&s[colon + 1..])),
        None => (s, None),
    })
}

/// Interprets the host part under the prefix's family; returns the effective family (the
/// prefix's, else the literal's) and the host.
fn parse_host(prefix: &str, family: Family, host: &str) -> Result<(Family, Host), AddrError> {
    if host.is_empty() || host == "*" {
        return Ok((family, Host::Any(family)));
    }
    let ip = match host.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) if is_host_name(host) => return Ok((family, Host::Name(host.to_string()))),
        Err(_) => return Err(AddrError::InvalidHost(host.to_string())),
    };
    let literal_family = if ip.is_ipv4() { Family::V4 } else { Family::V6 };
    if family != Family::Unspec && family != literal_family {
        return Err(AddrError::FamilyMismatch {
            prefix: prefix.to_string(),
            host: host.to_string(),
        });
    }
    let host = match ip {
        IpAddr::V4(v4) if v4 == Ipv4Addr::UNSPECIFIED => Host::Any(Family::V4),
        IpAddr::V6(v6) if v6 == Ipv6Addr::UNSPECIFIED => Host::Any(Family::V6),
        ip => Host::Ip(ip),
    };
    Ok((literal_family, host))
}

/// A plausible DNS name: letters, digits, `-`, `.` and `_` (for SRV records such as
/// `_http._tcp.example.org`), at most 253 characters, and not only digits and dots (that would
/// be a mistyped IPv4 address such as `10.0.0` or `10.0.0.300`).
fn is_host_name(s: &str) -> bool {
    s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        && !s.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// A port number: digits only, 1 to 65535.
fn parse_port(s: &str) -> Result<u16, AddrError> {
    let invalid = || AddrError::InvalidPort(s.to_string());
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    match s.parse::<u16>() {
        Ok(0) | Err(_) => Err(invalid()),
        Ok(port) => Ok(port),
    }
}

/// `port` or `first-last` for listening addresses.
fn parse_port_range(s: &str) -> Result<RangeInclusive<u16>, AddrError> {
    let Some((first, last)) = s.split_once('-') else {
        let port = parse_port(s)?;
        return Ok(port..=port);
    };
    // Report the whole range, which is what the user wrote, when either end is invalid.
    let invalid = |_| AddrError::InvalidPort(s.to_string());
    let (first, last) = (
        parse_port(first).map_err(invalid)?,
        parse_port(last).map_err(invalid)?,
    );
    if first > last {
        return Err(AddrError::InvalidPortRange(s.to_string()));
    }
    Ok(first..=last)
}

/// The port of a server: empty or `0` (same as the client's), `N`, `+N` or `-N`.
fn parse_server_port(s: &str) -> Result<ServerPort, AddrError> {
    if s.is_empty() || s.bytes().all(|b| b == b'0') {
        // HAProxy treats a zero port like a missing one: the client's port is used.
        return Ok(ServerPort::SameAsClient);
    }
    let offset = |digits: &str| -> Result<i32, AddrError> {
        let invalid = || AddrError::InvalidPort(s.to_string());
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        let value = digits.parse::<u16>().map_err(|_| invalid())?;
        Ok(i32::from(value))
    };
    if let Some(digits) = s.strip_prefix('+') {
        return Ok(ServerPort::Offset(offset(digits)?));
    }
    if let Some(digits) = s.strip_prefix('-') {
        return Ok(ServerPort::Offset(-offset(digits)?));
    }
    if s.contains('-') {
        return Err(AddrError::PortRangeNotAllowed(s.to_string()));
    }
    parse_port(s).map(ServerPort::Fixed)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::Family::{Unspec, V4, V6};
    use super::*;

    fn any(family: Family) -> Host {
        Host::Any(family)
    }

    fn ip(s: &str) -> Host {
        Host::Ip(s.parse().unwrap())
    }

    fn name(s: &str) -> Host {
        Host::Name(s.into())
    }

    /// Asserts that `s` is a single listening inet address.
    fn check_listen(s: &str, family: Family, host: Host, ports: RangeInclusive<u16>) {
        let want = ListenAddr::Inet {
            family,
            host,
            ports,
        };
        assert_eq!(parse_listen_addrs(s), Ok(vec![want]), "{s}");
    }

    fn check_server(s: &str, family: Family, host: Host, port: ServerPort) {
        let want = ServerAddr::Inet { family, host, port };
        assert_eq!(parse_server_addr(s), Ok(want), "{s}");
    }

    fn listen_err(s: &str) -> AddrError {
        parse_listen_addrs(s).unwrap_err()
    }

    fn server_err(s: &str) -> AddrError {
        parse_server_addr(s).unwrap_err()
    }

    #[test]
    fn addresses_expand_bare_variables() {
        let env = |name: &str| match name {
            "PORT" => Some("8080".to_string()),
            "HOST" => Some("10.0.0.1".to_string()),
            _ => None,
        };
        assert_eq!(expand_env("*:$PORT", &env), "*:8080");
        assert_eq!(expand_env("${HOST}:${PORT}", &env), "10.0.0.1:8080");
        assert_eq!(expand_env("[$HOST]:80", &env), "[10.0.0.1]:80");
        assert_eq!(
            expand_env("$HOST.internal:$UNSET", &env),
            "10.0.0.1.internal:"
        );
        // No default value here: the rest of the braces stays.
        assert_eq!(expand_env("${HOST-x}", &env), "10.0.0.1-x}");
        assert_eq!(expand_env("/run/a.sock", &env), "/run/a.sock");
        let words = |line: &str| line.split(' ').map(str::to_string).collect::<Vec<_>>();
        assert_eq!(address_word(&words("bind *:$PORT ssl")), Some(1));
        assert_eq!(address_word(&words("server s1 $HOST:80 check")), Some(2));
        assert_eq!(
            address_word(&words("server-template s 10 $HOST:80")),
            Some(3)
        );
        assert_eq!(address_word(&words("stats socket $DIR/s.sock")), Some(2));
        assert_eq!(address_word(&words("stats enable")), None);
        assert_eq!(
            address_word(&words("http-request set-header X $PORT")),
            None
        );
        assert_eq!(address_word(&words("server")), None);
    }

    #[test]
    fn listen_any() {
        check_listen("*:80", Unspec, any(Unspec), 80..=80);
        check_listen(":80", Unspec, any(Unspec), 80..=80);
        check_listen("0.0.0.0:80", V4, any(V4), 80..=80);
        check_listen(":::80", V6, any(V6), 80..=80);
        check_listen("[::]:80", V6, any(V6), 80..=80);
        check_listen("ipv6@:80", V6, any(V6), 80..=80);
        check_listen("ipv4@*:80", V4, any(V4), 80..=80);
    }

    #[test]
    fn listen_literals() {
        check_listen("127.0.0.1:8080", V4, ip("127.0.0.1"), 8080..=8080);
        check_listen("[::1]:443", V6, ip("::1"), 443..=443);
        check_listen("::1:8080", V6, ip("::1"), 8080..=8080);
        check_listen("2001:db8::5:65535", V6, ip("2001:db8::5"), 65535..=65535);
        check_listen("ipv4@10.0.0.1:1", V4, ip("10.0.0.1"), 1..=1);
        check_listen("ipv6@[fe80::1]:80", V6, ip("fe80::1"), 80..=80);
    }

    #[test]
    fn listen_protocol_prefixes() {
        check_listen("tcp@:80", Unspec, any(Unspec), 80..=80);
        check_listen("ip@1.2.3.4:80", V4, ip("1.2.3.4"), 80..=80);
        check_listen("tcp4@1.2.3.4:80", V4, ip("1.2.3.4"), 80..=80);
        check_listen("tcp6@[::1]:80", V6, ip("::1"), 80..=80);
        check_listen("tcp6@:80", V6, any(V6), 80..=80);
    }

    #[test]
    fn listen_host_names() {
        check_listen("localhost:80", Unspec, name("localhost"), 80..=80);
        check_listen(
            "ipv4@lb-1.example.org:80",
            V4,
            name("lb-1.example.org"),
            80..=80,
        );
    }

    #[test]
    fn listen_port_ranges() {
        check_listen(":8000-8010", Unspec, any(Unspec), 8000..=8010);
        check_listen(":80-80", Unspec, any(Unspec), 80..=80);
        let err = listen_err(":8010-8000");
        assert_eq!(err, AddrError::InvalidPortRange("8010-8000".into()));
        let msg = "invalid port range '8010-8000' (the first port is above the last)";
        assert_eq!(err.to_string(), msg);
        for range in ["0-10", "10-", "-10", "1-2-3", "1-65536", "a-b"] {
            let err = listen_err(&format!(":{range}"));
            assert_eq!(err, AddrError::InvalidPort(range.into()), "{range}");
        }
    }

    #[test]
    fn listen_bad_ports() {
        let msg = "invalid port '0' (expected a number from 1 to 65535)";
        assert_eq!(listen_err(":0").to_string(), msg);
        for port in [
            "0",
            "00",
            "65536",
            "http",
            "+80",
            "-80",
            "8 0",
            "99999999999999999999",
        ] {
            let err = listen_err(&format!(":{port}"));
            assert_eq!(err, AddrError::InvalidPort(port.into()), "{port}");
        }
        for addr in ["1.2.3.4", "1.2.3.4:", "[::1]", "[::1]:", "*", "localhost"] {
            assert_eq!(
                listen_err(addr),
                AddrError::MissingPort(addr.into()),
                "{addr}"
            );
        }
        assert_eq!(listen_err("*").to_string(), "missing port in '*'");
    }

    #[test]
    fn listen_lists() {
        let want = [
            ListenAddr::Inet {
                family: Unspec,
                host: any(Unspec),
                ports: 80..=80,
            },
            ListenAddr::Inet {
                family: V6,
                host: any(V6),
                ports: 80..=80,
            },
            ListenAddr::Unix("/run/a.sock".into()),
            ListenAddr::Fd(3),
        ];
        assert_eq!(
            parse_listen_addrs(":80,[::]:80,/run/a.sock,fd@3").unwrap(),
            want
        );
        for list in [":80,", "", ",:80", ":80,,:81"] {
            assert_eq!(listen_err(list), AddrError::Empty, "{list}");
        }
        assert_eq!(listen_err(",:80").to_string(), "empty address");
        assert_eq!(listen_err(":80,:0"), AddrError::InvalidPort("0".into()));
    }

    #[test]
    fn unix_and_fd() {
        let unix = |s: &str| Ok(vec![ListenAddr::Unix(s.into())]);
        assert_eq!(
            parse_listen_addrs("/var/run/h.sock"),
            unix("/var/run/h.sock")
        );
        assert_eq!(parse_listen_addrs("/tmp/odd@name"), unix("/tmp/odd@name"));
        assert_eq!(
            parse_listen_addrs("unix@rel/admin.sock"),
            unix("rel/admin.sock")
        );
        assert_eq!(listen_err("unix@"), AddrError::EmptyPath);
        assert_eq!(listen_err("unix@").to_string(), "empty unix socket path");
        assert_eq!(parse_listen_addrs("fd@0"), Ok(vec![ListenAddr::Fd(0)]));
        assert_eq!(parse_listen_addrs("fd@12"), Ok(vec![ListenAddr::Fd(12)]));
        for bad in ["fd@", "fd@-1", "fd@x", "fd@3:80", "fd@99999999999", "fd@+3"] {
            let n = bad.trim_start_matches("fd@");
            assert_eq!(listen_err(bad), AddrError::InvalidFd(n.into()), "{bad}");
        }
        let msg = "invalid file descriptor 'x' after 'fd@' (expected a number >= 0)";
        assert_eq!(listen_err("fd@x").to_string(), msg);
    }

    #[test]
    fn abstract_names() {
        let abns = |name: &str, padded| AbstractName {
            name: name.into(),
            padded,
        };
        assert_eq!(
            parse_listen_addrs("abns@fe2,abnsz@other"),
            Ok(vec![
                ListenAddr::Abstract(abns("fe2", true)),
                ListenAddr::Abstract(abns("other", false)),
            ])
        );
        assert_eq!(
            parse_server_addr("abns@a/b:c"),
            Ok(ServerAddr::Abstract(abns("a/b:c", true)))
        );
        assert_eq!(abns("fe2", true).to_string(), "abns@fe2");
        assert_eq!(abns("fe2", false).to_string(), "abnsz@fe2");
        assert_eq!(listen_err("abns@"), AddrError::EmptyAbstractName);
        assert_eq!(server_err("abnsz@"), AddrError::EmptyAbstractName);
        let longest = "n".repeat(ABSTRACT_NAME_MAX);
        assert!(parse_server_addr(&format!("abns@{longest}")).is_ok());
        let err = server_err(&format!("abns@{longest}x"));
        assert_eq!(err, AddrError::AbstractNameTooLong(format!("{longest}x")));
        assert!(err.to_string().ends_with("is longer than 107 bytes"));
    }

    #[test]
    fn unsupported_and_unknown_prefixes() {
        for prefix in [
            "sockpair@",
            "udp@",
            "udp4@",
            "udp6@",
            "quic4@",
            "quic6@",
            "uxst@",
            "uxdg@",
            "rhttp@",
            "mptcp@",
            "mptcp4@",
            "mptcp6@",
            "stream+ipv4@",
            "dgram+unix@",
            "quic+ipv6@",
        ] {
            let addr = format!("{prefix}x:80");
            let want = AddrError::UnsupportedPrefix(prefix.into());
            assert_eq!(listen_err(&addr), want, "{prefix}");
            assert_eq!(server_err(&addr), want, "{prefix}");
        }
        let msg = "address prefix 'udp@' is not supported by Sluice";
        assert_eq!(listen_err("udp@foo:514").to_string(), msg);
        for prefix in ["foo@", "IPV4@", "@", "unix:@"] {
            let err = listen_err(&format!("{prefix}:80"));
            assert_eq!(err, AddrError::UnknownPrefix(prefix.into()), "{prefix}");
        }
        assert_eq!(
            listen_err("foo@:80").to_string(),
            "unknown address prefix 'foo@'"
        );
    }

    #[test]
    fn family_mismatch() {
        let err = listen_err("ipv6@1.2.3.4:80");
        let want = AddrError::FamilyMismatch {
            prefix: "ipv6@".into(),
            host: "1.2.3.4".into(),
        };
        assert_eq!(err, want);
        let msg = "'1.2.3.4' is not an IPv6 address, as 'ipv6@' requires";
        assert_eq!(err.to_string(), msg);
        let msg = "'::1' is not an IPv4 address, as 'ipv4@' requires";
        assert_eq!(listen_err("ipv4@[::1]:80").to_string(), msg);
        assert!(matches!(
            listen_err("tcp4@:::80"),
            AddrError::FamilyMismatch { .. }
        ));
        assert!(matches!(
            server_err("tcp6@0.0.0.0"),
            AddrError::FamilyMismatch { .. }
        ));
    }

    #[test]
    fn bad_hosts_and_brackets() {
        for addr in ["[::1:80", "[::1]80", "[1.2.3.4]:80", "[]:80", "[*]:80"] {
            assert_eq!(
                listen_err(addr),
                AddrError::BadBrackets(addr.into()),
                "{addr}"
            );
        }
        let msg = "malformed bracketed IPv6 address '[x]:80'";
        assert_eq!(listen_err("[x]:80").to_string(), msg);
        let long = "a".repeat(254);
        for host in ["10.0.0", "10.0.0.300", "a b", "a/b", "é", long.as_str()] {
            let err = listen_err(&format!("{host}:80"));
            assert_eq!(err, AddrError::InvalidHost(host.into()), "{host}");
        }
        let msg = "invalid address or host name 'a/b'";
        assert_eq!(listen_err("a/b:80").to_string(), msg);
    }

    #[test]
    fn server_ports() {
        let lo = || ip("127.0.0.1");
        check_server("127.0.0.1", V4, lo(), ServerPort::SameAsClient);
        check_server("127.0.0.1:", V4, lo(), ServerPort::SameAsClient);
        check_server("127.0.0.1:0", V4, lo(), ServerPort::SameAsClient);
        check_server("127.0.0.1:8000", V4, lo(), ServerPort::Fixed(8000));
        check_server("127.0.0.1:+1000", V4, lo(), ServerPort::Offset(1000));
        check_server("127.0.0.1:-10", V4, lo(), ServerPort::Offset(-10));
        check_server("127.0.0.1:+0", V4, lo(), ServerPort::Offset(0));
        check_server("127.0.0.1:-65535", V4, lo(), ServerPort::Offset(-65535));
    }

    #[test]
    fn server_port_errors() {
        for port in ["65536", "+65536", "+", "-", "-x", "http", "1 2"] {
            let err = server_err(&format!("1.2.3.4:{port}"));
            assert_eq!(err, AddrError::InvalidPort(port.into()), "{port}");
        }
        let err = server_err("1.2.3.4:80-90");
        assert_eq!(err, AddrError::PortRangeNotAllowed("80-90".into()));
        let msg = "port range '80-90' is not allowed in a server address";
        assert_eq!(err.to_string(), msg);
    }

    #[test]
    fn server_hosts() {
        let srv = "_http._tcp.example.org";
        check_server(
            "backend.example.org:80",
            Unspec,
            name("backend.example.org"),
            ServerPort::Fixed(80),
        );
        check_server(srv, Unspec, name(srv), ServerPort::SameAsClient);
        check_server("ipv6@db:5432", V6, name("db"), ServerPort::Fixed(5432));
        check_server("0.0.0.0", V4, any(V4), ServerPort::SameAsClient);
        check_server("*:80", Unspec, any(Unspec), ServerPort::Fixed(80));
        check_server("[::1]", V6, ip("::1"), ServerPort::SameAsClient);
        check_server("::1:", V6, ip("::1"), ServerPort::SameAsClient);
        check_server(
            "[2001:db8::1]:443",
            V6,
            ip("2001:db8::1"),
            ServerPort::Fixed(443),
        );
        // The last colon separates the port, so a bare IPv6 address needs brackets.
        let msg = "invalid address 'fe80:' (an IPv6 address needs brackets, as in [::1]:80, or a \
                   final ':' when there is no port)";
        assert_eq!(server_err("fe80::1").to_string(), msg);
    }

    #[test]
    fn server_other_forms() {
        let unix = |s: &str| Ok(ServerAddr::Unix(s.into()));
        assert_eq!(parse_server_addr("/run/app.sock"), unix("/run/app.sock"));
        assert_eq!(parse_server_addr("/run/a,b.sock"), unix("/run/a,b.sock"));
        assert_eq!(parse_server_addr("unix@app.sock"), unix("app.sock"));
        assert_eq!(server_err("fd@3"), AddrError::FdNotAllowed);
        assert_eq!(
            server_err("fd@3").to_string(),
            "'fd@' can only be used to listen"
        );
        assert_eq!(server_err("a:80,b:80"), AddrError::MultipleAddresses);
        let msg = "exactly one address is expected, not a comma-separated list";
        assert_eq!(server_err("a:80,b:80").to_string(), msg);
        assert_eq!(server_err(""), AddrError::Empty);
    }

    #[test]
    fn never_panics_on_odd_input() {
        let odd = [
            "@", "[", "]", "[:", ":", "::", "[::]", "é@x", "x@é", "é:80", ":é", "[é]:1",
        ];
        for s in odd.iter().chain(&["-", "+", "[::1]:é", "fd@é", ":1-é"]) {
            let _ = parse_listen_addrs(s);
            let _ = parse_server_addr(s);
        }
    }
}
