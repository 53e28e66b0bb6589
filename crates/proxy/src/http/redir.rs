//! The answer of a server with `redir PREFIX` (configuration.txt §5.2 `redir`): GET and HEAD
//! requests given to it get a 302 whose `Location` is the prefix followed by the request's
//! URI from the leading `/` of its path (query included), and the connection closes, exactly
//! as HAProxy 2.6 answers (same fields, same order).

use super::rewrite::split_target;

/// The whole 302 answer for a request of `target` to a server redirecting to `prefix`.
pub fn answer(prefix: &str, target: &[u8]) -> Vec<u8> {
    let parts = split_target(target);
    let mut page = Vec::with_capacity(128 + prefix.len() + target.len());
    page.extend_from_slice(
        b"HTTP/1.1 302 Found\r\ncache-control: no-cache\r\ncontent-length: 0\r\nlocation: ",
    );
    page.extend_from_slice(prefix.as_bytes());
    // An absolute target without a path (`http://host`) and `*` redirect to the root.
    if parts.path.is_empty() || parts.path == b"*" {
        page.push(b'/');
    } else {
        page.extend_from_slice(parts.path);
    }
    if let Some(query) = parts.query {
        page.push(b'?');
        page.extend_from_slice(query);
    }
    page.extend_from_slice(b"\r\nconnection: close\r\n\r\n");
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_is_the_prefix_and_the_uri_from_its_path() {
        let text =
            |t: &[u8]| String::from_utf8(answer("http://img.example.com", t)).unwrap_or_default();
        assert_eq!(
            text(b"/a/b?x=1"),
            "HTTP/1.1 302 Found\r\ncache-control: no-cache\r\ncontent-length: 0\r\n\
             location: http://img.example.com/a/b?x=1\r\nconnection: close\r\n\r\n"
        );
        assert!(text(b"http://h/z").contains("location: http://img.example.com/z\r\n"));
        assert!(text(b"http://h").contains("location: http://img.example.com/\r\n"));
    }
}
