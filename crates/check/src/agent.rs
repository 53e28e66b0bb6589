//! The agent's answer (configuration.txt §5.2 "agent-check"): one line of words separated by
//! spaces, commas or tabs, each an administrative state (`ready`, `drain`, `maint`), an
//! operational state (`up`, `down`, `fail`, `stopped`, optionally followed by `#reason`) or a
//! weight (`75%`). Unknown words are ignored, as HAProxy ignores them, so an agent written for
//! a newer version does not take servers down.

/// What the agent asked for; `None` fields were not mentioned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentReply {
    /// `ready`, `drain` or `maint`.
    pub admin: Option<AgentAdmin>,
    /// `up`, or `down`/`fail`/`stopped` with the word itself.
    pub operational: Option<AgentOp>,
    /// `NN%`: the weight in percent of the configured one (0 to 256... capped as HAProxy does).
    pub weight_percent: Option<u32>,
    /// The text after `#`, if any.
    pub description: Option<String>,
}

/// An administrative word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentAdmin {
    /// `ready`: leave drain and maintenance.
    Ready,
    /// `drain`: weight 0.
    Drain,
    /// `maint`: out of service.
    Maint,
}

/// An operational word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentOp {
    /// `up`.
    Up,
    /// `down`, `fail` or `stopped`: the word, for the message.
    Down(&'static str),
}

/// Parses the first line of an agent's answer.
pub fn parse(reply: &[u8]) -> AgentReply {
    let line = reply
        .split(|&b| b == b'\n' || b == b'\r')
        .next()
        .unwrap_or_default();
    let text = String::from_utf8_lossy(line);
    let (words, description) = match text.split_once('#') {
        Some((w, d)) => (w.to_owned(), Some(d.trim().to_owned())),
        None => (text.into_owned(), None),
    };
    let mut out = AgentReply {
        description: description.filter(|d| !d.is_empty()),
        ..AgentReply::default()
    };
    for word in words
        .split([' ', ',', '\t'])
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
    {
        match word.as_str() {
            "ready" => out.admin = Some(AgentAdmin::Ready),
            "drain" => out.admin = Some(AgentAdmin::Drain),
            "maint" => out.admin = Some(AgentAdmin::Maint),
            "up" => out.operational = Some(AgentOp::Up),
            "down" => out.operational = Some(AgentOp::Down("down")),
            "fail" => out.operational = Some(AgentOp::Down("fail")),
            "stopped" => out.operational = Some(AgentOp::Down("stopped")),
            w => {
                if let Some(n) = w.strip_suffix('%').and_then(|n| n.parse::<u32>().ok()) {
                    // HAProxy caps relative weights at 256 times... keep it within the
                    // balancer's range: a weight never exceeds 256 anyway.
                    out.weight_percent = Some(n.min(25600));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(
            parse(b"drain\n"),
            AgentReply {
                admin: Some(AgentAdmin::Drain),
                ..Default::default()
            }
        );
        let r = parse(b"up 50% ready\r\n");
        assert_eq!(r.operational, Some(AgentOp::Up));
        assert_eq!(r.weight_percent, Some(50));
        assert_eq!(r.admin, Some(AgentAdmin::Ready));
        let r = parse(b"DOWN#going away\n");
        assert_eq!(r.operational, Some(AgentOp::Down("down")));
        assert_eq!(r.description.as_deref(), Some("going away"));
        assert_eq!(parse(b"maint,75%").admin, Some(AgentAdmin::Maint));
        assert_eq!(
            parse(b"stopped").operational,
            Some(AgentOp::Down("stopped"))
        );
        assert_eq!(parse(b"fail").operational, Some(AgentOp::Down("fail")));
        assert_eq!(parse(b"whatever 12x% \xff"), AgentReply::default());
        assert_eq!(parse(b""), AgentReply::default());
    }
}
