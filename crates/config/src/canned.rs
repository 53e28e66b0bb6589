//! The ready-made checks of configuration.txt §4.2 (`option redis-check`, `smtpchk`,
//! `pgsql-check`, `mysql-check`, `ldap-check`, `ssl-hello-chk`), each written as a list of
//! `tcp-check` rules so one engine runs them all.
//!
//! The protocol messages are built here from the protocols' own descriptions: a PostgreSQL
//! StartupMessage, a MySQL 4.1 handshake response and COM_QUIT, an LDAPv3 anonymous simple
//! bind (RFC 4511, BER-encoded), a TLS ClientHello (RFC 5246). Answers are judged by
//! [`CheckRule::Protocol`] steps, which the check engine evaluates as soon as enough of the
//! answer has arrived and reports with HAProxy's wording (an SMTP code, a MySQL error...).

use crate::checks::{CheckRule, Reply};

fn send(bytes: &[u8]) -> CheckRule {
    CheckRule::Send(bytes.to_vec())
}

/// `option redis-check`: `PING`, then `+PONG`.
pub fn redis() -> Vec<CheckRule> {
    vec![send(b"PING\r\n"), CheckRule::Protocol(Reply::RedisPong)]
}

/// `option smtpchk [HELO|EHLO <domain>]`: a 2xx banner, then a 2xx answer to the greeting.
pub fn smtp(hello: &str, domain: &str) -> Vec<CheckRule> {
    vec![
        CheckRule::Protocol(Reply::Smtp),
        send(format!("{hello} {domain}\r\n").as_bytes()),
        CheckRule::Protocol(Reply::Smtp),
        send(b"QUIT\r\n"),
    ]
}

/// `option pgsql-check user <name>`: a StartupMessage (protocol 3.0); an Authentication
/// request (`R`) passes, an ErrorResponse (`E`) fails.
pub fn pgsql(user: &str) -> Vec<CheckRule> {
    let mut body = Vec::new();
    body.extend_from_slice(&0x0003_0000u32.to_be_bytes());
    body.extend_from_slice(b"user\0");
    body.extend_from_slice(user.as_bytes());
    body.extend_from_slice(b"\0\0");
    let mut message = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    message.extend_from_slice(&body);
    vec![send(&message), CheckRule::Protocol(Reply::PgsqlStartup)]
}

/// A MySQL packet: 3-byte little-endian length, sequence number, payload.
fn mysql_packet(sequence: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut p = len.to_le_bytes()[..3].to_vec();
    p.push(sequence);
    p.extend_from_slice(payload);
    p
}

/// `option mysql-check [user <name> [post-41]]`: the server's handshake must be protocol 10
/// (an error packet starts with FF instead); with a user, a 4.1 handshake response without
/// password must be answered with an OK packet, then COM_QUIT closes the session cleanly.
pub fn mysql(user: Option<&str>) -> Vec<CheckRule> {
    let mut rules = vec![CheckRule::Protocol(Reply::MysqlHandshake)];
    if let Some(user) = user {
        // CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION.
        let mut payload = 0x0000_8201u32.to_le_bytes().to_vec();
        payload.extend_from_slice(&0x0100_0000u32.to_le_bytes());
        payload.push(0x08);
        payload.extend_from_slice(&[0; 23]);
        payload.extend_from_slice(user.as_bytes());
        payload.push(0);
        payload.push(0);
        rules.push(send(&mysql_packet(1, &payload)));
        rules.push(CheckRule::Protocol(Reply::MysqlOk));
        rules.push(send(&mysql_packet(0, &[0x01])));
    }
    rules
}

/// `option ldap-check`: an anonymous LDAPv3 simple bind; the BindResponse must carry
/// resultCode 0 (success).
pub fn ldap() -> Vec<CheckRule> {
    // SEQUENCE { messageID 1, [APPLICATION 0] BindRequest { version 3, name "", simple "" } }
    let bind = [
        0x30, 0x0c, 0x02, 0x01, 0x01, 0x60, 0x07, 0x02, 0x01, 0x03, 0x04, 0x00, 0x80, 0x00,
    ];
    vec![send(&bind), CheckRule::Protocol(Reply::LdapBind)]
}

/// `option ssl-hello-chk`: a TLS ClientHello; the server must answer with a handshake record.
pub fn ssl_hello() -> Vec<CheckRule> {
    vec![send(&client_hello()), CheckRule::Protocol(Reply::SslHello)]
}

/// A TLS 1.2 ClientHello offering common suites, with the extensions ECDHE needs.
pub fn client_hello() -> Vec<u8> {
    fn with_len16(out: &mut Vec<u8>, body: &[u8]) {
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(body);
    }
    let mut hello = vec![0x03, 0x03];
    // A fixed "random": the check only looks at the record type of the answer.
    hello.extend((0u8..32).map(|i| i.wrapping_mul(37) ^ 0x5a));
    hello.push(0); // no session id
    let suites: [u16; 10] = [
        0xc02f, 0xc030, 0xc02b, 0xc02c, 0x009c, 0x009d, 0x002f, 0x0035, 0x000a, 0x00ff,
    ];
    let suite_bytes: Vec<u8> = suites.iter().flat_map(|s| s.to_be_bytes()).collect();
    with_len16(&mut hello, &suite_bytes);
    hello.extend_from_slice(&[0x01, 0x00]); // compression: null only
    let mut extensions = Vec::new();
    // supported_groups: x25519, secp256r1, secp384r1.
    extensions.extend_from_slice(&[0x00, 0x0a]);
    with_len16(
        &mut extensions,
        &[0x00, 0x06, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x18],
    );
    // ec_point_formats: uncompressed.
    extensions.extend_from_slice(&[0x00, 0x0b]);
    with_len16(&mut extensions, &[0x01, 0x00]);
    // signature_algorithms.
    extensions.extend_from_slice(&[0x00, 0x0d]);
    with_len16(
        &mut extensions,
        &[
            0x00, 0x0a, 0x08, 0x04, 0x04, 0x01, 0x04, 0x03, 0x05, 0x01, 0x02, 0x01,
        ],
    );
    with_len16(&mut hello, &extensions);
    let mut handshake = vec![0x01];
    handshake.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&hello);
    let mut record = vec![0x16, 0x03, 0x01];
    with_len16(&mut record, &handshake);
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgsql_startup_message() {
        let CheckRule::Send(m) = &pgsql("hap")[0] else {
            panic!("a send first")
        };
        assert_eq!(&m[..4], &[0, 0, 0, 18]);
        assert_eq!(&m[4..8], &[0, 3, 0, 0]);
        assert_eq!(&m[8..], b"user\0hap\0\0");
    }

    #[test]
    fn mysql_packets() {
        assert_eq!(mysql_packet(0, &[1]), vec![1, 0, 0, 0, 1]);
        let rules = mysql(Some("u"));
        assert_eq!(rules.len(), 4);
        let CheckRule::Send(auth) = &rules[1] else {
            panic!("auth packet second")
        };
        assert_eq!(auth[0] as usize, auth.len() - 4);
        assert_eq!(auth[3], 1);
        assert_eq!(mysql(None).len(), 1);
    }

    #[test]
    fn client_hello_lengths_add_up() {
        let r = client_hello();
        assert_eq!(r[0], 0x16);
        let record_len = u16::from_be_bytes([r[3], r[4]]) as usize;
        assert_eq!(record_len, r.len() - 5);
        let hs_len = u32::from_be_bytes([0, r[6], r[7], r[8]]) as usize;
        assert_eq!(hs_len, r.len() - 9);
    }
}
