//! `http-request normalize-uri` (configuration.txt §4.2): the URI normalizers of RFC 3986
//! §6.2.2 that HAProxy 2.6 offers, as pure functions over the request's path and query.
//!
//! The path normalizers (`path-merge-slashes`, `path-strip-dot`, `path-strip-dotdot`) work
//! on the path alone; the percent normalizers, the fragment ones and `query-sort-by-name`
//! on the path and query together, as HAProxy applies them. Each returns the new bytes, or
//! [`Invalid`] when a `strict` normalizer meets a malformed percent sequence (the request
//! is then answered with 400). Segments are compared as written: `%2E%2E` is not `..`
//! until `percent-decode-unreserved` decoded it, as the manual warns. Read [`normalize`].

use sluice_config::rules::UriNormalizer;

/// A `strict` normalizer found a malformed percent-encoded sequence.
#[derive(Debug, PartialEq, Eq)]
pub struct Invalid;

/// Applies `normalizer` to `pathq` (the path followed by `?query`, as in the request line);
/// returns the new path and query.
pub fn normalize(normalizer: UriNormalizer, pathq: &[u8]) -> Result<Vec<u8>, Invalid> {
    let (path, query) = match pathq.iter().position(|&b| b == b'?') {
        Some(q) => pathq.split_at(q),
        None => (pathq, &b""[..]),
    };
    let with_path = |new_path: Vec<u8>| {
        let mut out = new_path;
        out.extend_from_slice(query);
        out
    };
    Ok(match normalizer {
        // Only a path that starts with '/' has segments (not `*`, not an empty path).
        UriNormalizer::MergeSlashes if path.starts_with(b"/") => with_path(merge_slashes(path)),
        UriNormalizer::StripDot if path.starts_with(b"/") => with_path(strip_dots(path, None)),
        UriNormalizer::StripDotDot { full } if path.starts_with(b"/") => {
            with_path(strip_dots(path, Some(full)))
        }
        UriNormalizer::MergeSlashes
        | UriNormalizer::StripDot
        | UriNormalizer::StripDotDot { .. } => pathq.to_vec(),
        UriNormalizer::PercentDecodeUnreserved { strict } => {
            percent_decode_unreserved(pathq, strict)?
        }
        UriNormalizer::PercentToUppercase { strict } => percent_to_uppercase(pathq, strict)?,
        UriNormalizer::QuerySortByName => match query.strip_prefix(b"?") {
            Some(q) => {
                let mut out = path.to_vec();
                out.push(b'?');
                out.extend_from_slice(&sort_query(q));
                out
            }
            None => pathq.to_vec(),
        },
        UriNormalizer::FragmentStrip => {
            let end = pathq.iter().position(|&b| b == b'#').unwrap_or(pathq.len());
            pathq[..end].to_vec()
        }
        UriNormalizer::FragmentEncode => {
            let mut out = Vec::with_capacity(pathq.len() + 4);
            for &b in pathq {
                if b == b'#' {
                    out.extend_from_slice(b"%23");
                } else {
                    out.push(b);
                }
            }
            out
        }
    })
}

/// `//a///b` → `/a/b`.
fn merge_slashes(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    for &b in path {
        if !(b == b'/' && out.last() == Some(&b'/')) {
            out.push(b);
        }
    }
    out
}

/// Removes `.` segments (`dotdot` `None`) or resolves `..` segments against the segment
/// before them (`Some(full)`; with `full`, a `..` with nothing before it is dropped, else
/// kept). A removed last segment leaves the path ending with `/`.
fn strip_dots(path: &[u8], dotdot: Option<bool>) -> Vec<u8> {
    // The path starts with '/': the segments are what follows each '/'.
    let segments: Vec<&[u8]> = path[1..].split(|&b| b == b'/').collect();
    let last = segments.len() - 1;
    let mut kept: Vec<&[u8]> = Vec::with_capacity(segments.len());
    for (i, seg) in segments.into_iter().enumerate() {
        match dotdot {
            None if seg == b"." => {}
            Some(full) if seg == b".." => {
                let parent = kept.last().is_some_and(|top| *top != b"..");
                if parent {
                    kept.pop();
                } else if !full {
                    kept.push(seg);
                    continue;
                }
            }
            _ => {
                kept.push(seg);
                continue;
            }
        }
        if i == last {
            kept.push(b"");
        }
    }
    let mut out = Vec::with_capacity(path.len());
    for seg in kept {
        out.push(b'/');
        out.extend_from_slice(seg);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

/// The value of a hexadecimal digit.
fn hex(b: u8) -> Option<u8> {
    char::from(b).to_digit(16).map(|d| d as u8)
}

/// The two hexadecimal digits after a `%` at `i`, if they are there.
fn percent_at(input: &[u8], i: usize) -> Option<(u8, u8)> {
    let hi = *input.get(i + 1)?;
    let lo = *input.get(i + 2)?;
    hex(hi)?;
    hex(lo)?;
    Some((hi, lo))
}

/// `%61` → `a` for letters, digits, `-`, `.`, `_` and `~`; other sequences stay.
fn percent_decode_unreserved(input: &[u8], strict: bool) -> Result<Vec<u8>, Invalid> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b != b'%' {
            out.push(b);
            i += 1;
            continue;
        }
        match percent_at(input, i) {
            Some((hi, lo)) => {
                let value = (hex(hi).unwrap_or(0) << 4) | hex(lo).unwrap_or(0);
                if value.is_ascii_alphanumeric() || b"-._~".contains(&value) {
                    out.push(value);
                } else {
                    out.extend_from_slice(&[b'%', hi, lo]);
                }
                i += 3;
            }
            None if strict => return Err(Invalid),
            None => {
                out.push(b'%');
                i += 1;
            }
        }
    }
    Ok(out)
}

/// `%6f` → `%6F`.
fn percent_to_uppercase(input: &[u8], strict: bool) -> Result<Vec<u8>, Invalid> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b != b'%' {
            out.push(b);
            i += 1;
            continue;
        }
        match percent_at(input, i) {
            Some((hi, lo)) => {
                out.extend_from_slice(&[b'%', hi.to_ascii_uppercase(), lo.to_ascii_uppercase()]);
                i += 3;
            }
            None if strict => return Err(Invalid),
            None => {
                out.push(b'%');
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Parameters sorted by name (bytes before `=`), equal names keeping their order.
fn sort_query(query: &[u8]) -> Vec<u8> {
    let mut params: Vec<&[u8]> = query.split(|&b| b == b'&').collect();
    let name = |p: &[u8]| -> Vec<u8> {
        let end = p.iter().position(|&b| b == b'=').unwrap_or(p.len());
        p[..end].to_vec()
    };
    params.sort_by_key(|p| name(p));
    params.join(&b'&')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run(n: UriNormalizer, input: &str) -> String {
        String::from_utf8(normalize(n, input.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn the_manuals_examples() {
        use UriNormalizer::*;
        let cases: &[(UriNormalizer, &str, &str)] = &[
            (FragmentEncode, "/#foo", "/%23foo"),
            (FragmentStrip, "/#foo", "/"),
            (StripDot, "/.", "/"),
            (StripDot, "/./bar/", "/bar/"),
            (StripDot, "/a/./a", "/a/a"),
            (StripDot, "/.well-known/", "/.well-known/"),
            (StripDotDot { full: false }, "/foo/../", "/"),
            (StripDotDot { full: false }, "/foo/../bar/", "/bar/"),
            (StripDotDot { full: false }, "/foo/bar/../", "/foo/"),
            (StripDotDot { full: false }, "/../bar/", "/../bar/"),
            (StripDotDot { full: false }, "/bar/../../", "/../"),
            (StripDotDot { full: false }, "/foo//../", "/foo/"),
            (StripDotDot { full: false }, "/foo/%2E%2E/", "/foo/%2E%2E/"),
            (StripDotDot { full: true }, "/../bar/", "/bar/"),
            (StripDotDot { full: true }, "/bar/../../", "/"),
            (MergeSlashes, "//", "/"),
            (MergeSlashes, "/foo//bar", "/foo/bar"),
            (
                PercentDecodeUnreserved { strict: false },
                "/%61dmin",
                "/admin",
            ),
            (
                PercentDecodeUnreserved { strict: false },
                "/foo%3Fbar=baz",
                "/foo%3Fbar=baz",
            ),
            (
                PercentDecodeUnreserved { strict: false },
                "/%%36%36",
                "/%66",
            ),
            (PercentDecodeUnreserved { strict: false }, "/%ZZ", "/%ZZ"),
            (PercentToUppercase { strict: false }, "/%6f", "/%6F"),
            (PercentToUppercase { strict: false }, "/%zz", "/%zz"),
            (QuerySortByName, "/?c=3&a=1&b=2", "/?a=1&b=2&c=3"),
            (QuerySortByName, "/?aaa=3&a=1&aa=2", "/?a=1&aa=2&aaa=3"),
            (
                QuerySortByName,
                "/?a=3&b=4&a=1&b=5&a=2",
                "/?a=3&a=1&a=2&b=4&b=5",
            ),
        ];
        for (n, input, want) in cases {
            assert_eq!(run(*n, input), *want, "{n:?} {input}");
        }
    }

    #[test]
    fn strict_percent_normalizers_refuse_malformed_sequences() {
        use UriNormalizer::*;
        let decode = PercentDecodeUnreserved { strict: true };
        assert_eq!(normalize(decode, b"/%%36%36"), Err(Invalid));
        assert_eq!(normalize(decode, b"/%ZZ"), Err(Invalid));
        assert_eq!(normalize(decode, b"/a%4"), Err(Invalid));
        assert_eq!(
            normalize(PercentToUppercase { strict: true }, b"/%zz"),
            Err(Invalid)
        );
        assert_eq!(run(decode, "/%7e%41?q=%2d"), "/~A?q=-");
    }

    #[test]
    fn path_normalizers_leave_the_query_and_odd_targets_alone() {
        use UriNormalizer::*;
        assert_eq!(run(MergeSlashes, "/a//b?x=//y"), "/a/b?x=//y");
        assert_eq!(
            run(StripDotDot { full: false }, "/a/b/..?q=../x"),
            "/a/?q=../x"
        );
        assert_eq!(run(StripDot, "*"), "*");
        assert_eq!(run(MergeSlashes, ""), "");
        assert_eq!(run(QuerySortByName, "/p"), "/p");
        assert_eq!(run(QuerySortByName, "/p?"), "/p?");
    }
}
