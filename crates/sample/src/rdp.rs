//! The RDP cookie of a Remote Desktop client's first packet (configuration.txt
//! `req.rdp_cookie`, `balance rdp-cookie`, `persist rdp-cookie`).
//!
//! A client opens with an X.224 Connection Request inside a TPKT header (ISO 8073 over TCP,
//! RFC 1006), whose user data may start with a routing cookie line:
//! `Cookie: mstshash=<user>\r\n`, or `Cookie: msts=<address>.<port>.<reserved>\r\n` written by
//! a terminal server redirecting its client. Only that first cookie is looked at, as in
//! HAProxy; its name is compared ignoring case.

/// What the buffered bytes say about a cookie.
#[derive(Debug, PartialEq, Eq)]
pub enum RdpCookie<'a> {
    /// Not all there yet: a rule waiting for it may wait on.
    Incomplete,
    /// Not an RDP request, or one without (this) cookie.
    Absent,
    /// The cookie's value.
    Found(&'a [u8]),
}

/// TPKT (4 bytes) and the fixed part of an X.224 Connection Request (7 bytes).
const HEADERS: usize = 11;
/// The X.224 Connection Request code (CR, with no credit).
const CONNECTION_REQUEST: u8 = 0xe0;

/// The value of the cookie named `name` (any name when `None`) at the start of `buf`.
pub fn rdp_cookie<'a>(buf: &'a [u8], name: Option<&str>) -> RdpCookie<'a> {
    if buf.len() < HEADERS {
        return RdpCookie::Incomplete;
    }
    // TPKT version 3, reserved 0; then the X.224 code after its length indicator.
    if buf[0] != 3 || buf[1] != 0 || buf[5] != CONNECTION_REQUEST {
        return RdpCookie::Absent;
    }
    // The TPKT length says where the packet ends: what is missing within it may still come.
    let packet_len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
    let wait_or_absent = if buf.len() < packet_len {
        RdpCookie::Incomplete
    } else {
        RdpCookie::Absent
    };
    let line = buf
        .get(HEADERS..packet_len.min(buf.len()))
        .unwrap_or_default();
    const COOKIE: &[u8] = b"Cookie:";
    if line.len() < COOKIE.len() {
        return if COOKIE[..line.len()].eq_ignore_ascii_case(line) {
            wait_or_absent
        } else {
            RdpCookie::Absent
        };
    }
    if !line[..COOKIE.len()].eq_ignore_ascii_case(COOKIE) {
        return RdpCookie::Absent;
    }
    let rest = &line[COOKIE.len()..];
    let rest = &rest[rest.iter().take_while(|&&b| b == b' ').count()..];
    // The cookie is one line: its name, `=`, and its value up to the line's CR LF.
    let line_end = rest.iter().position(|&b| b == b'\r' || b == b'\n');
    let Some(equals) = rest[..line_end.unwrap_or(rest.len())]
        .iter()
        .position(|&b| b == b'=')
    else {
        return match line_end {
            Some(_) => RdpCookie::Absent,
            None => wait_or_absent,
        };
    };
    if name.is_some_and(|name| !rest[..equals].eq_ignore_ascii_case(name.as_bytes())) {
        return RdpCookie::Absent;
    }
    let value = &rest[equals + 1..];
    match line_end.map(|end| end - equals - 1) {
        Some(end) if value.get(end..end + 2) == Some(b"\r\n") => RdpCookie::Found(&value[..end]),
        // A line ended otherwise than by CR LF, or a CR whose LF is still to come.
        Some(end) if value.get(end..) == Some(b"\r") => wait_or_absent,
        Some(_) => RdpCookie::Absent,
        None => wait_or_absent,
    }
}

/// The server address a redirecting terminal server wrote into an `msts` cookie:
/// `<address>.<port>.<reserved>`, the IPv4 address as the decimal value of its four bytes
/// read in little-endian order, the port with its two bytes swapped.
pub fn msts_address(value: &[u8]) -> Option<std::net::SocketAddrV4> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.split('.');
    let address: u32 = parts.next()?.parse().ok()?;
    let port: u16 = parts.next()?.parse().ok()?;
    parts.next()?;
    Some(std::net::SocketAddrV4::new(
        address.to_le_bytes().into(),
        port.swap_bytes(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(line: &[u8]) -> Vec<u8> {
        let len = (HEADERS + line.len()) as u16;
        let mut p = vec![3, 0];
        p.extend_from_slice(&len.to_be_bytes());
        p.extend_from_slice(&[6 + line.len() as u8, 0xe0, 0, 0, 0, 0, 0]);
        p.extend_from_slice(line);
        p
    }

    #[test]
    fn the_first_cookie_is_read_by_name_ignoring_case() {
        let p = packet(b"Cookie: mstshash=alice\r\n\x01\x00\x08\x00");
        assert_eq!(rdp_cookie(&p, None), RdpCookie::Found(b"alice"));
        assert_eq!(rdp_cookie(&p, Some("MSTSHASH")), RdpCookie::Found(b"alice"));
        assert_eq!(rdp_cookie(&p, Some("msts")), RdpCookie::Absent);
        let lower = packet(b"cookie: msts=3640205228.15629.0000\r\n");
        assert_eq!(
            rdp_cookie(&lower, Some("msts")),
            RdpCookie::Found(&b"3640205228.15629.0000"[..])
        );
    }

    #[test]
    fn a_cookie_is_one_line_ended_by_cr_lf() {
        // Without a name, the `=` must be on the cookie's own line.
        let split = packet(b"Cookie: foo\r\nx=y\r\n");
        assert_eq!(rdp_cookie(&split, None), RdpCookie::Absent);
        let lone_cr = packet(b"Cookie: mstshash=a\rb\r\n");
        assert_eq!(rdp_cookie(&lone_cr, None), RdpCookie::Absent);
        let empty = packet(b"Cookie: mstshash=\r\n");
        assert_eq!(rdp_cookie(&empty, None), RdpCookie::Found(b""));
    }

    #[test]
    fn a_partial_packet_waits_and_other_bytes_have_no_cookie() {
        let p = packet(b"Cookie: mstshash=alice\r\n");
        for cut in [0, 5, 12, 20, p.len() - 1] {
            assert_eq!(rdp_cookie(&p[..cut], None), RdpCookie::Incomplete, "{cut}");
        }
        assert_eq!(
            rdp_cookie(b"GET / HTTP/1.1\r\n\r\n", None),
            RdpCookie::Absent
        );
        assert_eq!(
            rdp_cookie(&packet(b"\x01\x00\x08\x00\x00\x00\x00\x00"), None),
            RdpCookie::Absent
        );
        // A whole request without user data has no cookie (nothing more will come).
        assert_eq!(rdp_cookie(&packet(b""), None), RdpCookie::Absent);
    }

    #[test]
    fn an_msts_cookie_names_an_address_and_port() {
        // 10.0.0.1:3389, as a terminal server writes it.
        let value = format!(
            "{}.{}.0000",
            u32::from_le_bytes([10, 0, 0, 1]),
            3389u16.swap_bytes()
        );
        assert_eq!(
            msts_address(value.as_bytes()),
            Some("10.0.0.1:3389".parse().unwrap_or_else(|_| unreachable!()))
        );
        assert_eq!(msts_address(b"alice"), None);
        assert_eq!(msts_address(b"1.2"), None, "the reserved part is required");
    }
}
