//! Errors of the HTTP/1 codec and the canned answers the proxy sends for them.
//!
//! Every parser of this crate (`head`, `framing`, `chunked`) fails with one [`HttpError`]: a
//! [`HttpErrorKind`] naming the condition that was found, and the [`Side`] of the message (a
//! request from the client, or a response from the server). The side decides the status code:
//! a bad request is answered with 400 (or 414, 431, 501, 505 where a more precise code exists),
//! a bad response is always a 502 for the client, as configuration.txt "tune.bufsize" and
//! "tune.http.maxhdr" describe. [`error_response`] gives the complete HTTP/1.1 answer for a
//! status, in the shape of HAProxy's default error files (configuration.txt "errorfile").

use std::fmt;

/// Which message was being read when the error was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// A request, sent by the client: the proxy answers it with a 4xx/5xx of its own.
    Request,
    /// A response, sent by the server: the client receives a 502.
    Response,
}

/// The condition that made a message unacceptable. Variants name what was found, not where.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HttpErrorKind {
    /// The request line is not `method SP target SP version` (missing or doubled spaces,
    /// HTTP/0.9 line without a version, trailing bytes).
    BadRequestLine,
    /// The method is empty or holds a character that is not a token character (RFC 9110 §5.6.2).
    BadMethod,
    /// The request-target holds a space, a control character, a fragment or (strict mode) a
    /// byte above 127, or its form does not fit the method (RFC 9112 §3.2).
    BadTarget,
    /// The version is not of the form `HTTP/DIGIT.DIGIT` (RFC 9112 §2.3).
    BadVersion,
    /// A well-formed version other than HTTP/1.0 and HTTP/1.1 (505 on the request side).
    UnsupportedVersion,
    /// The status line of a response is malformed (RFC 9112 §4).
    BadStatusLine,
    /// The status code is not three digits of at least 100.
    BadStatus,
    /// A field name holds a character that is not a token character, or a field line has no
    /// colon.
    BadHeaderName,
    /// A field line starts with a colon.
    EmptyHeaderName,
    /// Whitespace between a field name and its colon (RFC 9112 §5.1 requires a 400).
    SpaceBeforeColon,
    /// A field line starts with whitespace: obsolete line folding, or a whitespace-led line
    /// right after the start line (RFC 9112 §5.2 and §2.2).
    ObsFold,
    /// A CR that is not followed by LF (RFC 9112 §2.2).
    BareCr,
    /// A LF without its CR where the codec requires CRLF (chunked framing in strict mode).
    BareLf,
    /// A NUL byte in the head or in chunked framing.
    NulByte,
    /// A control character other than HTAB in a field value or reason phrase.
    ControlChar,
    /// A field value rejected for another reason.
    BadHeaderValue,
    /// More field lines than `tune.http.maxhdr` allows (configuration.txt: 400 / 502).
    TooManyHeaders,
    /// The head did not end within `max_head` bytes although the request line did (431).
    HeaderTooLarge,
    /// The request line did not end within `max_head` bytes (414).
    UriTooLong,
    /// An HTTP/1.1 request without a Host field (RFC 9112 §3.2).
    MissingHost,
    /// Several Host fields with different values.
    DuplicateHost,
    /// A Host value that is not a valid `uri-host [":" port]`.
    BadHost,
    /// The authority of an absolute-form target differs from the Host field (strict mode).
    HostMismatch,
    /// Both Content-Length and Transfer-Encoding (RFC 9112 §6.3 item 3: a smuggling attempt).
    AmbiguousFraming,
    /// A Content-Length element that is empty, not only digits, or too large.
    BadContentLength,
    /// Several Content-Length values that are not all identical (RFC 9110 §8.6).
    ConflictingContentLength,
    /// A Transfer-Encoding list that is empty, malformed, does not end with `chunked` in a
    /// request, or names `chunked` more than once (RFC 9112 §6.1).
    BadTransferEncoding,
    /// A transfer coding before `chunked` that the codec does not know (501 for requests).
    UnknownTransferCoding,
    /// Transfer-Encoding in an HTTP/1.0 message (RFC 9112 §6.1: faulty framing).
    TransferEncodingInHttp10,
    /// A chunk-size line that is not `1*HEXDIG [ext] CRLF`, or a size over 2^63 - 1.
    BadChunkSize,
    /// A chunk extension with a forbidden byte, or longer than the codec allows.
    BadChunkExtension,
    /// Chunk data not followed by CRLF.
    MissingChunkCrlf,
    /// The trailer section did not end within its size or count limit.
    TrailersTooLarge,
}

impl HttpErrorKind {
    /// A short description, used by `Display`.
    pub fn describe(self) -> &'static str {
        use HttpErrorKind::*;
        match self {
            BadRequestLine => "malformed request line",
            BadMethod => "invalid method",
            BadTarget => "invalid request target",
            BadVersion => "malformed HTTP version",
            UnsupportedVersion => "unsupported HTTP version",
            BadStatusLine => "malformed status line",
            BadStatus => "invalid status code",
            BadHeaderName => "invalid header name",
            EmptyHeaderName => "empty header name",
            SpaceBeforeColon => "whitespace between header name and colon",
            ObsFold => "obsolete line folding",
            BareCr => "bare CR",
            BareLf => "bare LF in chunked framing",
            NulByte => "NUL byte",
            ControlChar => "control character",
            BadHeaderValue => "invalid header value",
            TooManyHeaders => "too many headers",
            HeaderTooLarge => "head too large",
            UriTooLong => "request line too long",
            MissingHost => "missing Host header",
            DuplicateHost => "several different Host headers",
            BadHost => "invalid Host header",
            HostMismatch => "Host header differs from the target authority",
            AmbiguousFraming => "both Content-Length and Transfer-Encoding",
            BadContentLength => "invalid Content-Length",
            ConflictingContentLength => "conflicting Content-Length values",
            BadTransferEncoding => "invalid Transfer-Encoding",
            UnknownTransferCoding => "unknown transfer coding",
            TransferEncodingInHttp10 => "Transfer-Encoding in an HTTP/1.0 message",
            BadChunkSize => "invalid chunk size",
            BadChunkExtension => "invalid chunk extension",
            MissingChunkCrlf => "missing CRLF after chunk data",
            TrailersTooLarge => "trailer section too large",
        }
    }
}

/// A message the codec refuses: what was found, and on which side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HttpError {
    /// The condition found.
    pub kind: HttpErrorKind,
    /// The message it was found in; decides [`HttpError::status`].
    pub side: Side,
}

impl HttpError {
    /// An error in a request received from a client.
    pub fn request(kind: HttpErrorKind) -> Self {
        HttpError {
            kind,
            side: Side::Request,
        }
    }

    /// An error in a response received from a server.
    pub fn response(kind: HttpErrorKind) -> Self {
        HttpError {
            kind,
            side: Side::Response,
        }
    }

    /// An error of `kind` on `side`.
    pub fn new(side: Side, kind: HttpErrorKind) -> Self {
        HttpError { kind, side }
    }

    /// The status code the proxy answers the client with.
    ///
    /// Request side: 414 for a request line longer than the buffer, 431 for a head (or trailer
    /// section) longer than the buffer, 501 for a transfer coding we do not know (RFC 9112
    /// §6.1), 505 for a well-formed version other than 1.0/1.1 (RFC 9110 §15.6.6), 400 for
    /// everything else. Response side: always 502.
    pub fn status(&self) -> u16 {
        if self.side == Side::Response {
            return 502;
        }
        match self.kind {
            HttpErrorKind::UriTooLong => 414,
            HttpErrorKind::HeaderTooLarge | HttpErrorKind::TrailersTooLarge => 431,
            HttpErrorKind::UnknownTransferCoding => 501,
            HttpErrorKind::UnsupportedVersion => 505,
            _ => 400,
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match self.side {
            Side::Request => "request",
            Side::Response => "response",
        };
        write!(f, "{side}: {}", self.kind.describe())
    }
}

impl std::error::Error for HttpError {}

/// Builds a canned answer at compile time; the `const` assertion proves that the
/// Content-Length written in the header is the length of the body.
macro_rules! canned {
    ($len:literal, $status:literal, $sentence:literal) => {{
        const BODY: &str = concat!(
            "<html><body><h1>",
            $status,
            "</h1>\n",
            $sentence,
            "\n</body></html>\n"
        );
        const _: () = assert!(BODY.len() == $len, "content-length does not match the body");
        concat!(
            "HTTP/1.1 ",
            $status,
            "\r\ncontent-length: ",
            $len,
            "\r\ncache-control: no-cache\r\ncontent-type: text/html\r\nconnection: close\r\n\r\n",
            "<html><body><h1>",
            $status,
            "</h1>\n",
            $sentence,
            "\n</body></html>\n"
        )
        .as_bytes()
    }};
}

/// The statuses [`error_response`] has a canned answer for.
pub const CANNED_STATUSES: [u16; 20] = [
    400, 401, 403, 404, 405, 407, 408, 410, 413, 414, 421, 425, 429, 431, 500, 501, 502, 503, 504,
    505,
];

/// A complete HTTP/1.1 answer for `status`, headers and HTML body, ending the connection
/// (`connection: close`), like HAProxy's default error files. The reason phrases follow
/// HAProxy's where they differ from RFC 9110 ("Bad request", "Request Time-out",
/// "Gateway Time-out"), so that clients and tests comparing them see the same text.
///
/// Accepts any status; one without a canned answer (see [`CANNED_STATUSES`]) gets the 500.
pub fn error_response(status: u16) -> &'static [u8] {
    match status {
        400 => canned!(
            106,
            "400 Bad request",
            "The request was malformed and could not be processed."
        ),
        401 => canned!(
            109,
            "401 Unauthorized",
            "Valid credentials are required to access this resource."
        ),
        403 => canned!(
            104,
            "403 Forbidden",
            "Access to this resource is denied by the proxy rules."
        ),
        404 => canned!(
            90,
            "404 Not Found",
            "No resource matches the requested path."
        ),
        405 => canned!(
            114,
            "405 Method Not Allowed",
            "This method is not allowed for the requested resource."
        ),
        407 => canned!(
            120,
            "407 Proxy Authentication Required",
            "Valid credentials are required to use this proxy."
        ),
        408 => canned!(
            106,
            "408 Request Time-out",
            "The request was not received completely in time."
        ),
        410 => canned!(
            92,
            "410 Gone",
            "The requested resource is no longer available."
        ),
        413 => canned!(
            99,
            "413 Payload Too Large",
            "The request body is larger than allowed."
        ),
        414 => canned!(
            96,
            "414 URI Too Long",
            "The request target is longer than allowed."
        ),
        421 => canned!(
            115,
            "421 Misdirected Request",
            "This server cannot answer for the requested authority."
        ),
        425 => canned!(
            118,
            "425 Too Early",
            "The request arrived too early to be processed safely; please retry."
        ),
        429 => canned!(
            121,
            "429 Too Many Requests",
            "Too many requests were sent in a short time; please slow down."
        ),
        431 => canned!(
            123,
            "431 Request Header Fields Too Large",
            "The request header fields are larger than allowed."
        ),
        501 => canned!(
            108,
            "501 Not Implemented",
            "The request uses a feature that is not implemented."
        ),
        502 => canned!(
            103,
            "502 Bad Gateway",
            "The server sent an invalid or incomplete response."
        ),
        503 => canned!(
            111,
            "503 Service Unavailable",
            "No server is currently available for this request."
        ),
        504 => canned!(
            92,
            "504 Gateway Time-out",
            "The server did not answer in time."
        ),
        505 => canned!(
            117,
            "505 HTTP Version Not Supported",
            "The HTTP version of the request is not supported."
        ),
        _ => canned!(
            122,
            "500 Internal Server Error",
            "The proxy met an internal error while handling the request."
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Splits a canned answer and checks it is a well-formed HTTP/1.1 response whose
    /// Content-Length is exact.
    fn check(status: u16) {
        let raw = error_response(status);
        let text = std::str::from_utf8(raw).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        assert!(
            status_line.starts_with(&format!("HTTP/1.1 {status} ")),
            "{status_line}"
        );
        let cl: usize = lines
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(cl, body.len(), "status {status}");
        assert!(body.contains(&format!("<h1>{status} ")));
        assert!(head.contains("\r\nconnection: close"));
        assert!(head.contains("\r\ncache-control: no-cache"));
        assert!(head.contains("\r\ncontent-type: text/html"));
    }

    #[test]
    fn canned_answers_have_exact_content_length() {
        for status in CANNED_STATUSES {
            check(status);
        }
        check(500);
    }

    #[test]
    fn canned_answers_parse_with_our_own_parser() {
        let limits = crate::Limits::default();
        for status in CANNED_STATUSES {
            let raw = error_response(status);
            match crate::parse_response(raw, &limits).unwrap() {
                crate::Parse::Complete(head) => {
                    assert_eq!(head.status, status);
                    let framing = crate::response_framing(raw, &head, false, false).unwrap();
                    let len = raw.len() - head.head_len;
                    assert_eq!(framing, crate::BodyFraming::ContentLength(len as u64));
                }
                crate::Parse::Partial => panic!("partial canned answer {status}"),
            }
        }
    }

    #[test]
    fn unknown_status_falls_back_to_500() {
        assert!(error_response(299).starts_with(b"HTTP/1.1 500 "));
        assert_eq!(error_response(0), error_response(500));
    }

    #[test]
    fn status_codes_by_side_and_kind() {
        use HttpErrorKind::*;
        assert_eq!(HttpError::request(UriTooLong).status(), 414);
        assert_eq!(HttpError::request(HeaderTooLarge).status(), 431);
        assert_eq!(HttpError::request(UnknownTransferCoding).status(), 501);
        assert_eq!(HttpError::request(UnsupportedVersion).status(), 505);
        assert_eq!(HttpError::request(AmbiguousFraming).status(), 400);
        assert_eq!(HttpError::request(TooManyHeaders).status(), 400);
        for kind in [
            UriTooLong,
            HeaderTooLarge,
            UnsupportedVersion,
            AmbiguousFraming,
        ] {
            assert_eq!(HttpError::response(kind).status(), 502);
        }
        assert_eq!(HttpError::request(BareCr).to_string(), "request: bare CR");
    }
}
