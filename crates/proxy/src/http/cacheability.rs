//! Whether a shared cache could keep a response, as HAProxy 2.6 judges it: `cookie ...
//! nocache` marks such a response `Cache-control: private` when it inserts a cookie, and
//! `option checkcache` refuses one that carries the server's own cookie (configuration.txt
//! §4.2), which a cache would otherwise hand to every client.
//!
//! The judgement is two flags, kept as HAProxy keeps them: the response may be stored, and
//! it may be stored with its cookies. A safe method (GET, HEAD, OPTIONS, TRACE) sets both. A
//! status not cacheable by default (RFC 9110 §15.1), a first `Pragma` field reading exactly
//! `no-cache`, or a forbidding Cache-Control directive clears both; `public` sets both again,
//! even after a forbidding directive or for an unsafe method; `no-cache="set-cookie…"`
//! clears the second. A response with neither freshness information (`max-age`,
//! `s-maxage`, `Expires`) nor a validator (`ETag`, `Last-Modified`) is not stored (RFC 9111
//! §3). Each rule was checked against HAProxy 2.6; only backends with `nocache` or
//! `checkcache` pay for the judgement.

use sluice_http::head::{MessageHead, ResponseHead, header_name, header_value};

/// What a shared cache could do with a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cacheability {
    /// It may store the response.
    pub storable: bool,
    /// It may store the response with the cookies it sets.
    pub cookies_too: bool,
}

/// Cache-Control directives that forbid storing (compared whole, ignoring case, as HAProxy
/// does: `max-age = 0` is freshness information, not one of these).
const FORBIDDING: [&[u8]; 5] = [
    b"private",
    b"no-cache",
    b"no-store",
    b"max-age=0",
    b"s-maxage=0",
];

impl Cacheability {
    /// Judges the final response `head` (in `buf`) to a request whose method is safe or not,
    /// with the `status` the server answered (rules may have changed the head's since).
    pub fn of((safe_method, status): (bool, u16), buf: &[u8], head: &ResponseHead) -> Self {
        let mut judged = Cacheability {
            storable: safe_method,
            cookies_too: safe_method,
        };
        if !matches!(
            status,
            200 | 203 | 204 | 206 | 300 | 301 | 404 | 405 | 410 | 414 | 501
        ) {
            judged.forbid();
        }
        let fields = |name: &'static [u8]| {
            head.headers()
                .iter()
                .filter(move |h| header_name(buf, h).eq_ignore_ascii_case(name))
                .map(move |h| header_value(buf, h).trim_ascii())
        };
        // Only the first `Pragma` field counts, and only when it says just that.
        if fields(b"pragma")
            .next()
            .is_some_and(|v| v.eq_ignore_ascii_case(b"no-cache"))
        {
            judged.forbid();
            return judged;
        }
        let mut fresh = false;
        let directives = fields(b"cache-control")
            .flat_map(list_items)
            .map(<[u8]>::trim_ascii);
        for directive in directives {
            if directive.eq_ignore_ascii_case(b"public") {
                judged.storable = true;
                judged.cookies_too = true;
            } else if FORBIDDING.iter().any(|f| directive.eq_ignore_ascii_case(f)) {
                judged.forbid();
            } else if starts_with_ignoring_case(directive, b"no-cache=\"set-cookie") {
                judged.cookies_too = false;
            } else if starts_with_ignoring_case(directive, b"max-age")
                || starts_with_ignoring_case(directive, b"s-maxage")
            {
                fresh = true;
            }
        }
        let present = |name| fields(name).next().is_some();
        if !(fresh || present(b"expires") || present(b"etag") || present(b"last-modified")) {
            judged.storable = false;
        }
        judged
    }

    /// Nothing may be stored (also what `Cache-control: private` makes of it).
    pub fn forbid(&mut self) {
        self.storable = false;
        self.cookies_too = false;
    }

    /// A cache could keep the response with the cookies it sets.
    pub fn exposes_cookies(self) -> bool {
        self.storable && self.cookies_too
    }
}

/// The response sets a cookie of the server's (`Set-Cookie`, or the older `Set-Cookie2`).
pub fn sets_cookie(buf: &[u8], head: &ResponseHead) -> bool {
    head.headers().iter().any(|h| {
        let name = header_name(buf, h);
        name.eq_ignore_ascii_case(b"set-cookie") || name.eq_ignore_ascii_case(b"set-cookie2")
    })
}

/// The method lets a cache answer in the server's place (RFC 9110 §9.2.1: the safe ones).
pub fn is_safe_method(buf: &[u8], head: &sluice_http::head::RequestHead) -> bool {
    ["GET", "HEAD", "OPTIONS", "TRACE"]
        .iter()
        .any(|m| head.is_method(buf, m))
}

/// The comma-separated items of a field value; a comma inside a quoted string (with its
/// backslash escapes) separates nothing, as HAProxy reads lists.
pub(super) fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    let (mut quoted, mut escaped) = (false, false);
    value.split(move |&b| {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b',' if !quoted => return true,
            _ => {}
        }
        false
    })
}

fn starts_with_ignoring_case(text: &[u8], prefix: &[u8]) -> bool {
    text.get(..prefix.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(prefix))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_http::head::{Limits, Parse, parse_response};

    fn judge(safe_method: bool, status_and_fields: &str) -> Cacheability {
        let text = format!("HTTP/1.1 {status_and_fields}\n").replace('\n', "\r\n");
        let buf = text.into_bytes();
        let head = match parse_response(&buf, &Limits::default()).unwrap() {
            Parse::Complete(head) => head,
            Parse::Partial => panic!("partial"),
        };
        Cacheability::of((safe_method, head.status), &buf, &head)
    }

    /// Storable with its cookies, after a GET.
    fn exposed(status_and_fields: &str) -> bool {
        judge(true, status_and_fields).exposes_cookies()
    }

    #[test]
    fn freshness_or_a_validator_is_needed() {
        assert!(!exposed("200 OK\nContent-Length: 0\n"));
        assert!(!exposed("200 OK\nCache-Control: public\n"));
        assert!(exposed("200 OK\nCache-Control: max-age=60\n"));
        assert!(exposed("200 OK\nCache-Control: s-maxage=10\n"));
        // Not `max-age=0` as written: freshness information.
        assert!(exposed("200 OK\nCache-Control: max-age = 0\n"));
        assert!(exposed("200 OK\nExpires: Thu, 01 Jan 2099 00:00:00 GMT\n"));
        assert!(exposed("200 OK\nETag: \"x\"\n"));
        assert!(exposed(
            "200 OK\nLast-Modified: Thu, 01 Jan 2009 00:00:00 GMT\n"
        ));
    }

    #[test]
    fn statuses_cacheable_by_default_only() {
        for status in [200, 203, 204, 206, 300, 301, 404, 405, 410, 414, 501] {
            assert!(exposed(&format!("{status} X\nCache-Control: max-age=60\n")));
        }
        for status in [201, 302, 307, 400, 403, 500, 502, 503] {
            assert!(!exposed(&format!(
                "{status} X\nCache-Control: max-age=60\n"
            )));
        }
    }

    #[test]
    fn directives_in_order_as_haproxy_reads_them() {
        assert!(!exposed("200 OK\nCache-Control: max-age=60, private\n"));
        assert!(!exposed("200 OK\nCache-Control: MAX-AGE=0, max-age=60\n"));
        assert!(!exposed("200 OK\nCache-Control: s-maxage=0, max-age=60\n"));
        assert!(!exposed(
            "200 OK\nCache-Control: max-age=60\nCache-Control: no-store\n"
        ));
        // `public` sets both flags again, whatever came before.
        assert!(exposed(
            "200 OK\nCache-Control: private, public, max-age=60\n"
        ));
        assert!(exposed(
            "200 OK\nCache-Control: no-store\nCache-Control: public\nETag: \"x\"\n"
        ));
        // A quoted directive is not the directive, nor a comma in quotes a separator.
        assert!(exposed("200 OK\nCache-Control: \"private\", max-age=60\n"));
        assert!(exposed(
            "200 OK\nCache-Control: x=\"a,private\", max-age=60\n"
        ));
        assert!(exposed(
            "200 OK\nCache-Control: x=\"a\\\",private\", max-age=60\n"
        ));
        assert!(!exposed(
            "200 OK\nCache-Control: x=\"a\", private, max-age=60\n"
        ));
        // The cookies only.
        let judged = judge(
            true,
            "200 OK\nCache-Control: max-age=60, no-cache=\"set-cookie\"\n",
        );
        assert_eq!((judged.storable, judged.cookies_too), (true, false));
        assert!(!exposed(
            "200 OK\nCache-Control: no-cache=\"set-cookie,foo\", max-age=60\n"
        ));
    }

    #[test]
    fn only_the_first_pragma_field_counts_and_only_whole() {
        assert!(!exposed(
            "200 OK\nPragma: no-cache\nCache-Control: max-age=60\n"
        ));
        assert!(!exposed(
            "200 OK\nPragma: NO-CACHE\nCache-Control: public, max-age=60\n"
        ));
        assert!(exposed(
            "200 OK\nPragma: no-cache, x\nCache-Control: max-age=60\n"
        ));
        assert!(exposed(
            "200 OK\nPragma: x\nPragma: no-cache\nCache-Control: max-age=60\n"
        ));
    }

    #[test]
    fn unsafe_methods_need_public() {
        assert!(!judge(false, "200 OK\nCache-Control: max-age=60\n").exposes_cookies());
        assert!(judge(false, "200 OK\nCache-Control: public, max-age=60\n").exposes_cookies());
        assert!(!judge(false, "200 OK\nCache-Control: public\n").exposes_cookies());
    }

    #[test]
    fn cookies_of_either_generation() {
        let sets = |fields: &str| {
            let text = format!("HTTP/1.1 200 OK\n{fields}\n").replace('\n', "\r\n");
            let buf = text.into_bytes();
            let Parse::Complete(head) = parse_response(&buf, &Limits::default()).unwrap() else {
                panic!("partial")
            };
            sets_cookie(&buf, &head)
        };
        assert!(sets("Set-Cookie: a=1\n"));
        assert!(sets("set-cookie2: a=1\n"));
        assert!(!sets("Cookie: a=1\nX-Set-Cookie: a=1\n"));
    }
}
