//! The `source` keyword of servers and backends (configuration.txt §4.2 and §5.2 `source`):
//! the local address, and optionally port, outgoing connections are bound to before they
//! connect. Sluice implements the plain form `source ADDR[:PORT]`; transparent proxying
//! (`usesrc`), `interface` binding and port ranges need privileges and kernel features it does
//! not use, so they are refused as "not supported by Sluice" rather than ignored.

use crate::addr::{self, Family, Host, ServerAddr, ServerPort};
use crate::diag::{Diagnostic, Diagnostics};
use crate::directive::Directive;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Parses the address at `d.words[index]` (port 0 when none is given: the kernel chooses)
/// and refuses the options of the long forms that follow it.
pub(crate) fn parse_source(
    d: &Directive<'_>,
    index: usize,
    diags: &mut Diagnostics,
) -> Option<SocketAddr> {
    let text = d.word(index, "a source address", diags)?;
    if let Some(option @ ("usesrc" | "interface")) = d.words.get(index + 1).map(String::as_str) {
        diags.push(Diagnostic::not_supported(
            d.span,
            format!("source {option}"),
        ));
        return None;
    }
    match source_addr(text) {
        Ok(addr) => Some(addr),
        Err(message) => {
            diags.push(d.alert(format!("invalid source address '{text}': {message}")));
            None
        }
    }
}

fn source_addr(text: &str) -> Result<SocketAddr, String> {
    // A port range ("ip:1024-2048") is a server-only feature Sluice does not implement.
    if text
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.contains('-'))
    {
        return Err("port ranges are not supported by Sluice".into());
    }
    let ServerAddr::Inet { host, port, .. } =
        addr::parse_server_addr(text).map_err(|e| e.to_string())?
    else {
        return Err("a source must be an IP address".into());
    };
    let ip = match host {
        Host::Ip(ip) => ip,
        Host::Any(Family::V6) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        Host::Any(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        Host::Name(_) => return Err("a source must be an IP address, not a host name".into()),
    };
    let port = match port {
        ServerPort::SameAsClient => 0,
        ServerPort::Fixed(p) => p,
        ServerPort::Offset(_) => return Err("a source port cannot be an offset".into()),
    };
    Ok(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_forms() {
        let ok = |s: &str| source_addr(s).map(|a| a.to_string());
        assert_eq!(ok("10.0.0.1"), Ok("10.0.0.1:0".into()));
        assert_eq!(ok("10.0.0.1:2000"), Ok("10.0.0.1:2000".into()));
        assert_eq!(ok("0.0.0.0"), Ok("0.0.0.0:0".into()));
        assert_eq!(ok("[::1]:99"), Ok("[::1]:99".into()));
        assert!(ok("10.0.0.1:1024-2048").is_err());
        assert!(ok("example.com").is_err());
        assert!(ok("/tmp/sock").is_err());
    }
}
