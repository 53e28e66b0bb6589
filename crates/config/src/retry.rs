//! `retry-on` (configuration.txt §4.2): which failures of a request are retried, within the
//! backend's `retries` budget.
//!
//! Connection failures are retried by default. The other events (an empty or junk response,
//! a response timeout, chosen status codes) are "layer 7 retries": the request is sent again
//! on a new connection, which Sluice does only for requests without a body (HAProxy needs the
//! whole request in one buffer; a bodiless request always is). `0rtt-rejected` concerns TLS
//! early data, which Sluice does not accept, so it never happens.

/// The failures `retry-on` retries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryOn {
    /// `conn-failure`: the connection could not be established.
    pub conn_failure: bool,
    /// `empty-response`: the server closed without a byte of response.
    pub empty_response: bool,
    /// `junk-response`: the server sent something that is not a valid response head.
    pub junk_response: bool,
    /// `response-timeout`: `timeout server` struck before the response head.
    pub response_timeout: bool,
    /// Response statuses that are retried.
    pub statuses: Vec<u16>,
}

impl Default for RetryOn {
    /// HAProxy's default: connection failures only.
    fn default() -> Self {
        RetryOn {
            conn_failure: true,
            empty_response: false,
            junk_response: false,
            response_timeout: false,
            statuses: Vec::new(),
        }
    }
}

/// The statuses `retry-on` accepts.
const RETRYABLE_STATUSES: [u16; 12] = [401, 403, 404, 408, 421, 425, 429, 500, 501, 502, 503, 504];

impl RetryOn {
    /// Parses the words after `retry-on`; the list replaces any previous one.
    pub fn parse(words: &[String]) -> Result<RetryOn, String> {
        if words.is_empty() {
            return Err("expects a list of events or status codes".to_owned());
        }
        let mut r = RetryOn {
            conn_failure: false,
            ..RetryOn::default()
        };
        for word in words {
            match word.as_str() {
                "none" if words.len() == 1 => {}
                "none" => return Err("'none' cannot be combined with other events".to_owned()),
                "conn-failure" => r.conn_failure = true,
                "empty-response" => r.empty_response = true,
                "junk-response" => r.junk_response = true,
                "response-timeout" => r.response_timeout = true,
                "0rtt-rejected" => {}
                "all-retryable-errors" => {
                    r.conn_failure = true;
                    r.empty_response = true;
                    r.junk_response = true;
                    r.response_timeout = true;
                    r.statuses.extend([500, 502, 503, 504]);
                }
                other => match other.parse::<u16>() {
                    Ok(status) if RETRYABLE_STATUSES.contains(&status) => r.statuses.push(status),
                    _ => {
                        return Err(format!(
                            "unknown event '{other}' (conn-failure, empty-response, junk-response, response-timeout, 0rtt-rejected, all-retryable-errors, none, or one of the statuses 401 403 404 408 421 425 429 500 501 502 503 504)"
                        ));
                    }
                },
            }
        }
        r.statuses.sort_unstable();
        r.statuses.dedup();
        Ok(r)
    }

    /// True if a failure past the connection is ever retried (the request must then be
    /// replayable).
    pub fn layer7(&self) -> bool {
        self.empty_response
            || self.junk_response
            || self.response_timeout
            || !self.statuses.is_empty()
    }

    /// True if a response with `status` is retried.
    pub fn retries_status(&self, status: u16) -> bool {
        self.statuses.contains(&status)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RetryOn, String> {
        let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        RetryOn::parse(&words)
    }

    #[test]
    fn lists_replace_the_default() {
        let r = parse("503 empty-response").unwrap();
        assert!(!r.conn_failure && r.empty_response && r.retries_status(503));
        assert!(r.layer7());
        let none = parse("none").unwrap();
        assert!(!none.conn_failure && !none.layer7());
        let all = parse("all-retryable-errors 404").unwrap();
        assert_eq!(all.statuses, [404, 500, 502, 503, 504]);
        assert!(all.conn_failure && all.junk_response && all.response_timeout);
        assert!(!RetryOn::default().layer7());
    }

    #[test]
    fn bad_lists_are_refused() {
        assert!(parse("").is_err());
        assert!(parse("200").unwrap_err().contains("unknown event '200'"));
        assert!(parse("none 503").is_err());
    }
}
