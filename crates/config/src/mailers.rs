//! `mailers` sections and the `email-alert` keywords of proxies (configuration.txt §4.2,
//! §12.3): who is told by mail when a server changes state.
//!
//! A `mailers` section lists SMTP servers (`mailer NAME IP:PORT`) and the time a mail may take
//! (`timeout mail`, 10 s by default). A proxy sends its alerts once it names a section
//! (`email-alert mailers`), a sender (`from`) and a recipient (`to`); `level` (alert by
//! default) filters the events and `myhostname` is what the proxy calls itself to the
//! mailers (the system's host name by default). As in HAProxy, a proxy setting only some of
//! them is warned about and sends nothing, and a section that does not exist is an error.
//! Read [`parse_mailers`], then [`resolve`].

use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::directive::Directive;
use crate::logging;
use crate::preprocess::Line;
use crate::sections::{Section, SectionKind};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// HAProxy's default `timeout mail`.
pub const DEFAULT_MAIL_TIMEOUT: Duration = Duration::from_secs(10);

/// One `mailers` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MailersConf {
    /// The section's name.
    pub name: String,
    /// Its `mailer` lines: name and address.
    pub mailers: Vec<(String, SocketAddr)>,
    /// `timeout mail`: how long one mail may take, connection included.
    pub timeout: Duration,
}

/// What a proxy's `email-alert` lines say, as read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EmailAlertConf {
    /// Where the first `email-alert` line was, for the warnings.
    pub span: Option<Span>,
    /// `email-alert mailers`.
    pub mailers: Option<String>,
    /// `email-alert from`.
    pub from: Option<String>,
    /// `email-alert to`.
    pub to: Option<String>,
    /// `email-alert level`, as a syslog level code.
    pub level: Option<u8>,
    /// `email-alert myhostname`.
    pub myhostname: Option<String>,
}

/// A proxy's complete alert settings, its mailers resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmailAlert {
    /// The SMTP servers, each sent every alert.
    pub mailers: Arc<MailersConf>,
    /// Sender, in the envelope and the `From` field.
    pub from: String,
    /// Recipient, in the envelope and the `To` field.
    pub to: String,
    /// The highest syslog level sent (alert, 1, by default: only servers going down).
    pub level: u8,
    /// The name given in `HELO`; `None` for the system's host name.
    pub myhostname: Option<String>,
}

/// HAProxy's default `email-alert level`: alert.
const DEFAULT_LEVEL: u8 = 1;

/// Reads every `mailers` section; two of one name are an error.
pub fn parse_mailers(sections: &[Section], diags: &mut Diagnostics) -> Vec<Arc<MailersConf>> {
    let mut all: Vec<Arc<MailersConf>> = Vec::new();
    for section in sections.iter().filter(|s| s.kind == SectionKind::Mailers) {
        let Some(name) = section.name.clone() else {
            continue;
        };
        if all.iter().any(|m| m.name == name) {
            let message = format!("mailers section '{name}' is declared twice");
            diags.push(Diagnostic::alert(&section.span, "mailers", message));
            continue;
        }
        let mut conf = MailersConf {
            name,
            mailers: Vec::new(),
            timeout: DEFAULT_MAIL_TIMEOUT,
        };
        for line in &section.lines {
            parse_mailers_line(&mut conf, line, diags);
        }
        all.push(Arc::new(conf));
    }
    all
}

fn parse_mailers_line(conf: &mut MailersConf, line: &Line, diags: &mut Diagnostics) {
    let d = Directive::new(line, 1);
    match line.words.first().map_or("", String::as_str) {
        "mailer" => {
            let (Some(name), Some(addr)) =
                (d.word(1, "a name and an address", diags), line.words.get(2))
            else {
                return;
            };
            match addr.parse::<SocketAddr>() {
                Ok(sa) if sa.port() != 0 => {
                    if conf.mailers.iter().any(|(n, _)| n == name) {
                        diags.push(d.alert(format!("mailer '{name}' is declared twice")));
                    } else if d.no_more_than(3, diags) {
                        conf.mailers.push((name.to_owned(), sa));
                    }
                }
                _ => diags.push(d.alert(format!(
                    "expects IP:PORT, not '{addr}' (host names are not supported by Sluice here)"
                ))),
            }
        }
        "timeout" => match line.words.get(1).map(String::as_str) {
            Some("mail") => {
                if let Some(time) = d.timeout(2, diags) {
                    conf.timeout = time;
                }
                d.no_more_than(3, diags);
            }
            _ => diags.push(d.alert("expects 'mail' and a time")),
        },
        _ => diags.push(Diagnostic::not_supported(&line.span, d.keyword.clone())),
    }
}

/// Applies an `email-alert <what> <value>` line of a proxy section.
pub(crate) fn parse_email_alert(conf: &mut EmailAlertConf, line: &Line, diags: &mut Diagnostics) {
    let d = Directive::new(line, 2);
    let Some(what) = line.words.get(1) else {
        diags.push(d.alert("expects 'from', 'to', 'level', 'mailers' or 'myhostname'"));
        return;
    };
    let Some(value) = d.word(2, "a value", diags) else {
        return;
    };
    if !d.no_more_than(3, diags) {
        return;
    }
    let value = value.to_owned();
    match what.as_str() {
        "from" => conf.from = Some(value),
        "to" => conf.to = Some(value),
        "mailers" => conf.mailers = Some(value),
        "myhostname" => conf.myhostname = Some(value),
        "level" => match logging::level_code(&value) {
            Some(code) => conf.level = Some(code),
            None => {
                diags.push(d.alert(format!("'{value}' is not a syslog level")));
                return;
            }
        },
        other => {
            diags.push(d.alert(format!(
                "expects 'from', 'to', 'level', 'mailers' or 'myhostname', not '{other}'"
            )));
            return;
        }
    }
    conf.span.get_or_insert_with(|| line.span.clone());
}

/// A proxy's alert settings, once complete: its `mailers` section found (an error when it
/// does not exist), `from` and `to` set (a warning, and no alerts, when some are missing).
pub fn resolve(
    conf: &EmailAlertConf,
    proxy: &str,
    all: &[Arc<MailersConf>],
    diags: &mut Diagnostics,
) -> Option<EmailAlert> {
    let span = conf.span.as_ref()?;
    let (Some(mailers), Some(from), Some(to)) = (&conf.mailers, &conf.from, &conf.to) else {
        diags.push(Diagnostic::warning(
            span,
            "email-alert",
            format!(
                "ignored for proxy '{proxy}': 'email-alert from', 'email-alert mailers' and \
                 'email-alert to' are all needed"
            ),
        ));
        return None;
    };
    let Some(section) = all.iter().find(|m| &m.name == mailers) else {
        diags.push(Diagnostic::alert(
            span,
            "email-alert",
            format!("proxy '{proxy}': mailers section '{mailers}' does not exist"),
        ));
        return None;
    };
    Some(EmailAlert {
        mailers: Arc::clone(section),
        from: from.clone(),
        to: to.clone(),
        level: conf.level.unwrap_or(DEFAULT_LEVEL),
        myhostname: conf.myhostname.clone(),
    })
}
