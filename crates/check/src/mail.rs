//! Email alerts (`email-alert`, `mailers` sections, configuration.txt §12.3): the message of a
//! server's state change, mailed to each mailer of its backend, as HAProxy 2.6 sends it.
//!
//! Each mailer gets one SMTP transaction in a task of the checks' thread, within the section's
//! `timeout mail`: the greeting (`220`), `HELO` with `email-alert myhostname` (or the system's
//! name), `MAIL FROM`, `RCPT TO`, `DATA` (`354`), the mail (`From`, `To`, `Date` and a
//! `Subject` of `[HAProxy Alert] ` and the message, then the message as the body), `QUIT`
//! (`221`). A mailer that fails, answers otherwise or takes too long loses that alert, as in
//! HAProxy, without holding up the checks.

use sluice_config::mailers::EmailAlert;
use std::io;
use std::net::SocketAddr;
use std::time::SystemTime;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The longest reply line read from a mailer (SMTP's limit is 512 bytes).
const MAX_REPLY_LINE: u64 = 4096;

/// Mails `message` to every mailer of `alert` when an event of syslog `level` passes its
/// `email-alert level`. `message` is HAProxy's log text of the event; its final period goes.
pub fn send(alert: &EmailAlert, level: u8, message: &str) {
    if level > alert.level {
        return;
    }
    let message = message.strip_suffix('.').unwrap_or(message);
    let hostname = alert
        .myhostname
        .clone()
        .unwrap_or_else(|| sluice_runtime::logging::hostname().to_owned());
    let steps = transaction(alert, &hostname, message, SystemTime::now());
    for &(_, addr) in &alert.mailers.mailers {
        let steps = steps.clone();
        let limit = alert.mailers.timeout;
        tokio::task::spawn_local(async move {
            let _ = tokio::time::timeout(limit, exchange(addr, &steps)).await;
        });
    }
}

/// One step of the exchange: what to send (nothing for the greeting) and the reply code that
/// lets it go on.
type Step = (Option<String>, &'static str);

/// The whole SMTP exchange for one alert sent `at`.
fn transaction(alert: &EmailAlert, hostname: &str, message: &str, at: SystemTime) -> Vec<Step> {
    let (from, to) = (&alert.from, &alert.to);
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let mut date = Vec::new();
    // The process's dates are in UTC (logs too).
    sluice_sample::strftime(
        b"%a, %d %b %Y %T %z (%Z)",
        (secs, 0),
        0,
        Some("UTC"),
        &mut date,
    );
    let date = String::from_utf8_lossy(&date);
    let mail = format!(
        "From: {from}\r\nTo: {to}\r\nDate: {date}\r\nSubject: [HAProxy Alert] {message}\r\n\r\n\
         {message}\r\n\r\n.\r\n"
    );
    vec![
        (None, "220"),
        (Some(format!("HELO {hostname}\r\n")), "250"),
        (Some(format!("MAIL FROM:<{from}>\r\n")), "250"),
        (Some(format!("RCPT TO:<{to}>\r\n")), "250"),
        (Some("DATA\r\n".to_owned()), "354"),
        (Some(mail), "250"),
        (Some("QUIT\r\n".to_owned()), "221"),
    ]
}

/// Runs `steps` with the mailer at `addr`.
async fn exchange(addr: SocketAddr, steps: &[Step]) -> io::Result<()> {
    let stream = TcpStream::connect(addr).await?;
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    for (command, code) in steps {
        if let Some(command) = command {
            writer.write_all(command.as_bytes()).await?;
        }
        expect_reply(&mut reader, code).await?;
    }
    Ok(())
}

/// Reads one reply, its `NNN-` continuation lines first, and checks the code of its last
/// line (`NNN `).
async fn expect_reply<R>(reader: &mut BufReader<R>, code: &str) -> io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
{
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut *reader)
            .take(MAX_REPLY_LINE)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 || !line.ends_with(b"\n") || line.len() < 4 {
            return Err(io::ErrorKind::InvalidData.into());
        }
        match line[3] {
            b'-' => continue,
            b' ' | b'\r' if line.starts_with(code.as_bytes()) => return Ok(()),
            _ => return Err(io::ErrorKind::InvalidData.into()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_config::mailers::MailersConf;
    use std::sync::Arc;
    use std::time::Duration;

    fn alert() -> EmailAlert {
        EmailAlert {
            mailers: Arc::new(MailersConf {
                name: "m".into(),
                mailers: Vec::new(),
                timeout: Duration::from_secs(10),
            }),
            from: "lb@example.com".into(),
            to: "ops@example.com".into(),
            level: 1,
            myhostname: None,
        }
    }

    #[test]
    fn the_transaction_is_haproxys() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_712_397);
        let steps = transaction(&alert(), "lb1", "Server be/s1 is DOWN", at);
        let sent: Vec<&str> = steps.iter().filter_map(|(c, _)| c.as_deref()).collect();
        assert_eq!(
            sent,
            [
                "HELO lb1\r\n",
                "MAIL FROM:<lb@example.com>\r\n",
                "RCPT TO:<ops@example.com>\r\n",
                "DATA\r\n",
                "From: lb@example.com\r\nTo: ops@example.com\r\n\
                 Date: Thu, 26 Nov 2026 16:59:57 +0000 (UTC)\r\n\
                 Subject: [HAProxy Alert] Server be/s1 is DOWN\r\n\r\n\
                 Server be/s1 is DOWN\r\n\r\n.\r\n",
                "QUIT\r\n",
            ]
        );
        let codes: Vec<&str> = steps.iter().map(|(_, code)| *code).collect();
        assert_eq!(codes, ["220", "250", "250", "250", "354", "250", "221"]);
    }

    #[tokio::test]
    async fn replies_are_read_whole_and_checked() {
        let read = |text: &'static [u8], code: &'static str| async move {
            let mut reader = BufReader::new(text);
            expect_reply(&mut reader, code).await.is_ok()
        };
        assert!(read(b"250-mail.example\r\n250-SIZE 10\r\n250 OK\r\n", "250").await);
        assert!(read(b"220\r\n", "220").await);
        assert!(!read(b"550 no\r\n", "250").await);
        assert!(!read(b"250-cut", "250").await);
        assert!(!read(b"", "250").await);
        assert!(!read(b"25\r\n", "250").await);
        let long = [b'2'; 5000];
        let mut reader = BufReader::new(&long[..]);
        assert!(expect_reply(&mut reader, "250").await.is_err());
    }
}
