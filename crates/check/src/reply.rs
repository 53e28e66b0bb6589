//! The verdicts of the ready-made checks (`option smtpchk`, `redis-check`, `pgsql-check`,
//! `mysql-check`, `ldap-check`, `ssl-hello-chk`): each protocol's answer is judged as soon as
//! enough of it has arrived, and failures are reported with HAProxy's wording (the SMTP code
//! and text, the MySQL error code and message, the PostgreSQL severity...).
//!
//! Pure functions over the bytes received so far: [`judge`] answers [`Verdict::Pending`] while
//! more bytes could change the answer, and never reads past what it was given.

use crate::status::{Outcome, Status};
use sluice_config::checks::Reply;

/// What the bytes received so far say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not enough bytes yet.
    Pending,
    /// The answer is good; the report HAProxy gives when it is the check's last word.
    Pass(Outcome),
    /// The answer is bad, with the report.
    Fail(Outcome),
}

/// The first line of `buf` without its end of line, once complete.
fn first_line(buf: &[u8]) -> Option<&[u8]> {
    let end = buf.iter().position(|&b| b == b'\n')?;
    let line = &buf[..end];
    Some(line.strip_suffix(b"\r").unwrap_or(line))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Not enough bytes: keep reading.
struct Short;

/// A reader over the received bytes that reports running out of them.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn byte(&mut self) -> Result<u8, Short> {
        let b = *self.buf.get(self.pos).ok_or(Short)?;
        self.pos += 1;
        Ok(b)
    }

    /// A BER length (short form, or long form on 1 to 4 bytes).
    fn ber_len(&mut self) -> Result<Option<usize>, Short> {
        let first = self.byte()?;
        if first < 0x80 {
            return Ok(Some(usize::from(first)));
        }
        let n = first & 0x7f;
        if n == 0 || n > 4 {
            return Ok(None);
        }
        let mut len = 0usize;
        for _ in 0..n {
            len = len << 8 | usize::from(self.byte()?);
        }
        Ok(Some(len))
    }
}

/// Judges `buf`; `eof` says no more bytes will come (closed, or the buffer is full).
pub fn judge(reply: Reply, buf: &[u8], eof: bool) -> Verdict {
    let verdict = match reply {
        Reply::Smtp => smtp(buf),
        Reply::RedisPong => redis(buf),
        Reply::PgsqlStartup => pgsql(buf),
        Reply::MysqlHandshake => mysql(buf, 0x0a),
        Reply::MysqlOk => mysql(buf, 0x00),
        Reply::LdapBind => ldap(buf),
        Reply::SslHello => match buf.first() {
            None => Verdict::Pending,
            Some(0x16) => Verdict::Pass(Outcome::new(Status::L6Ok)),
            Some(_) => Verdict::Fail(Outcome::new(Status::L6Rsp)),
        },
    };
    match verdict {
        // The answer ended before it could be judged.
        Verdict::Pending if eof => Verdict::Fail(Outcome::new(match reply {
            Reply::SslHello => Status::L6Rsp,
            _ => Status::L7Rsp,
        })),
        v => v,
    }
}

fn smtp(buf: &[u8]) -> Verdict {
    let Some(line) = first_line(buf) else {
        return Verdict::Pending;
    };
    let code = line
        .get(..3)
        .filter(|c| c.iter().all(u8::is_ascii_digit))
        .and_then(|c| std::str::from_utf8(c).ok())
        .and_then(|c| c.parse::<u16>().ok());
    match code {
        Some(code) if (200..300).contains(&code) => {
            let rest = line.get(3..).unwrap_or_default();
            let rest = rest
                .strip_prefix(b" ")
                .or(rest.strip_prefix(b"-"))
                .unwrap_or(rest);
            Verdict::Pass(Outcome::new(Status::L7Ok).code(code).info(text(rest)))
        }
        Some(code) => {
            let rest = line.get(3..).unwrap_or_default();
            let rest = rest
                .strip_prefix(b" ")
                .or(rest.strip_prefix(b"-"))
                .unwrap_or(rest);
            Verdict::Fail(Outcome::new(Status::L7Sts).code(code).info(text(rest)))
        }
        None => Verdict::Fail(Outcome::new(Status::L7Rsp).info(text(line))),
    }
}

fn redis(buf: &[u8]) -> Verdict {
    match first_line(buf) {
        None => Verdict::Pending,
        Some(line) if line.starts_with(b"+PONG") => Verdict::Pass(
            Outcome::new(Status::L7Ok)
                .code(0)
                .info("Redis server is ok"),
        ),
        Some(line) => Verdict::Fail(Outcome::new(Status::L7Sts).code(0).info(text(line))),
    }
}

fn pgsql(buf: &[u8]) -> Verdict {
    match buf.first() {
        None => Verdict::Pending,
        Some(b'R') => Verdict::Pass(
            Outcome::new(Status::L7Ok)
                .code(0)
                .info("PostgreSQL server is ok"),
        ),
        Some(b'E') => {
            let Some(len) = buf
                .get(1..5)
                .map(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]))
            else {
                return Verdict::Pending;
            };
            let end = 1 + len as usize;
            let Some(body) = buf.get(5..end) else {
                return Verdict::Pending;
            };
            // The first field is the severity: a type byte, then a NUL-terminated string.
            let severity = body
                .get(1..)
                .and_then(|f| f.split(|&b| b == 0).next())
                .unwrap_or_default();
            Verdict::Fail(Outcome::new(Status::L7Rsp).info(text(severity)))
        }
        Some(_) => Verdict::Fail(Outcome::new(Status::L7Rsp).info("Unknown PostgreSQL response")),
    }
}

/// A MySQL packet whose first payload byte must be `good` (an error packet starts with FF).
fn mysql(buf: &[u8], good: u8) -> Verdict {
    let Some(header) = buf.get(..4) else {
        return Verdict::Pending;
    };
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let Some(payload) = buf.get(4..4 + len) else {
        return Verdict::Pending;
    };
    match payload.first() {
        Some(&b) if b == good => Verdict::Pass(Outcome::new(Status::L7Ok).code(0)),
        Some(0xff) => {
            let code = payload
                .get(1..3)
                .map_or(0, |c| u16::from_le_bytes([c[0], c[1]]));
            let message = payload.get(3..).unwrap_or_default();
            Verdict::Fail(Outcome::new(Status::L7Sts).code(code).info(text(message)))
        }
        _ => Verdict::Fail(Outcome::new(Status::L7Rsp).info("Unknown MySQL answer")),
    }
}

fn ldap(buf: &[u8]) -> Verdict {
    let not_ldap = || Verdict::Fail(Outcome::new(Status::L7Rsp).info("Not LDAPv3 protocol"));
    let mut c = Cursor { buf, pos: 0 };
    let parsed = (|| -> Result<Option<u8>, Short> {
        // LDAPMessage ::= SEQUENCE { messageID INTEGER, protocolOp ... }
        if c.byte()? != 0x30 || c.ber_len()?.is_none() {
            return Ok(None);
        }
        if c.byte()? != 0x02 {
            return Ok(None);
        }
        let Some(id_len) = c.ber_len()? else {
            return Ok(None);
        };
        for _ in 0..id_len {
            c.byte()?;
        }
        // BindResponse ::= [APPLICATION 1] SEQUENCE { resultCode ENUMERATED, ... }
        if c.byte()? != 0x61 || c.ber_len()?.is_none() {
            return Ok(None);
        }
        if c.byte()? != 0x0a || c.ber_len()? != Some(1) {
            return Ok(None);
        }
        c.byte().map(Some)
    })();
    match parsed {
        Err(Short) => Verdict::Pending,
        Ok(None) => not_ldap(),
        Ok(Some(0)) => Verdict::Pass(Outcome::new(Status::L7Ok).code(0)),
        Ok(Some(code)) => Verdict::Fail(
            Outcome::new(Status::L7Sts)
                .code(u16::from(code))
                .info("See RFC: http://tools.ietf.org/html/rfc4511#section-4.1.9"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail(reply: Reply, buf: &[u8]) -> Outcome {
        match judge(reply, buf, false) {
            Verdict::Fail(o) => o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn smtp_codes() {
        assert_eq!(judge(Reply::Smtp, b"220 hi", false), Verdict::Pending);
        assert!(matches!(
            judge(Reply::Smtp, b"220-hi\r\n", false),
            Verdict::Pass(_)
        ));
        assert_eq!(
            fail(Reply::Smtp, b"554 go away\r\n"),
            Outcome::new(Status::L7Sts).code(554).info("go away")
        );
        assert_eq!(fail(Reply::Smtp, b"hello\n").status, Status::L7Rsp);
        assert_eq!(
            judge(Reply::Smtp, b"220 hi", true),
            Verdict::Fail(Outcome::new(Status::L7Rsp))
        );
    }

    #[test]
    fn redis_and_ssl() {
        assert!(matches!(
            judge(Reply::RedisPong, b"+PONG\r\n", false),
            Verdict::Pass(_)
        ));
        assert_eq!(
            fail(Reply::RedisPong, b"-ERR no\r\n"),
            Outcome::new(Status::L7Sts).code(0).info("-ERR no")
        );
        assert!(matches!(
            judge(Reply::SslHello, b"\x16\x03\x03", false),
            Verdict::Pass(_)
        ));
        assert_eq!(fail(Reply::SslHello, b"\x15\x03").status, Status::L6Rsp);
        assert_eq!(judge(Reply::SslHello, b"", false), Verdict::Pending);
    }

    #[test]
    fn pgsql_answers() {
        assert!(matches!(
            judge(Reply::PgsqlStartup, b"R\0\0\0\x08", false),
            Verdict::Pass(_)
        ));
        let msg = b"SFATAL\0C28000\0\0";
        let mut e = vec![b'E'];
        e.extend_from_slice(&(msg.len() as u32 + 4).to_be_bytes());
        assert_eq!(judge(Reply::PgsqlStartup, &e, false), Verdict::Pending);
        e.extend_from_slice(msg);
        assert_eq!(
            fail(Reply::PgsqlStartup, &e),
            Outcome::new(Status::L7Rsp).info("FATAL")
        );
    }

    #[test]
    fn mysql_packets() {
        assert_eq!(
            judge(Reply::MysqlHandshake, b"\x05\0\0\0\x0a5.7", false),
            Verdict::Pending
        );
        assert!(matches!(
            judge(Reply::MysqlHandshake, b"\x05\0\0\0\x0a5.7.", false),
            Verdict::Pass(_)
        ));
        let err = b"\x16\0\0\0\xff\x15\x04#28000Access denied";
        assert_eq!(
            fail(Reply::MysqlOk, err),
            Outcome::new(Status::L7Sts)
                .code(1045)
                .info("#28000Access denied")
        );
        assert!(matches!(
            judge(Reply::MysqlOk, b"\x07\0\0\x02\0\0\0\x02\0\0\0", false),
            Verdict::Pass(_)
        ));
    }

    #[test]
    fn ldap_bind_responses() {
        let ok = [
            0x30, 0x0c, 0x02, 0x01, 0x01, 0x61, 0x07, 0x0a, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00,
        ];
        assert!(matches!(
            judge(Reply::LdapBind, &ok, false),
            Verdict::Pass(_)
        ));
        assert_eq!(judge(Reply::LdapBind, &ok[..6], false), Verdict::Pending);
        // Long-form lengths, as some directories send them.
        let long = [
            0x30, 0x84, 0, 0, 0, 0x10, 0x02, 0x01, 0x01, 0x61, 0x84, 0, 0, 0, 0x07, 0x0a, 0x01,
            0x31,
        ];
        assert_eq!(fail(Reply::LdapBind, &long).code, Some(0x31));
        assert_eq!(
            fail(Reply::LdapBind, b"HTTP/1.0 400"),
            Outcome::new(Status::L7Rsp).info("Not LDAPv3 protocol")
        );
    }
}
