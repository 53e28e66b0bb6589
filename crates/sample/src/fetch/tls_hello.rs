//! A TLS hello read from the client's first bytes without decrypting anything, for SNI
//! routing in `mode tcp` (configuration.txt §7.3.5 `req.ssl_sni`, `req.ssl_hello_type`,
//! `req.ssl_ver`...).
//!
//! The bytes come straight from the network, so every length is checked before it is
//! used: a [`Reader`] hands out sub-slices and answers `None` past the end, and any
//! truncation, garbage or inconsistent length makes the parse answer `None` (the fetch
//! then has no sample, and a `tcp-request content` rule can wait for more data). Only the
//! first handshake message of the first record is looked at, as HAProxy does; a hello
//! split over several records is not reassembled.

/// A cursor over untrusted bytes.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.rest.split_at_checked(n)?;
        self.rest = tail;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }

    fn u16(&mut self) -> Option<u16> {
        let b = self.take(2)?;
        Some(u16::from_be_bytes([*b.first()?, *b.get(1)?]))
    }

    fn u24(&mut self) -> Option<usize> {
        let b = self.take(3)?;
        Some(
            usize::from(*b.first()?) << 16 | usize::from(*b.get(1)?) << 8 | usize::from(*b.get(2)?),
        )
    }

    /// A block preceded by its one-byte length.
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }

    /// A block preceded by its two-byte length.
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
}

/// TLS record content type of handshake messages.
const HANDSHAKE: u8 = 22;
/// Extension numbers (IANA "TLS ExtensionType Values").
const EXT_SERVER_NAME: u16 = 0;
const EXT_SUPPORTED_GROUPS: u16 = 10;
const EXT_ALPN: u16 = 16;
const EXT_SESSION_TICKET: u16 = 35;

/// The first handshake message of the buffer: its type and body, when the record header
/// says handshake (SSLv3 or later) and the whole message is in the record and the buffer.
fn handshake(buf: &[u8]) -> Option<(u8, &[u8])> {
    let mut r = Reader::new(buf);
    if r.u8()? != HANDSHAKE {
        return None;
    }
    let (major, _minor) = (r.u8()?, r.u8()?);
    if major < 3 {
        return None;
    }
    let record = r.vec16()?;
    let mut r = Reader::new(record);
    let kind = r.u8()?;
    let len = r.u24()?;
    Some((kind, r.take(len)?))
}

/// `req.ssl_hello_type`: 1 for a complete ClientHello, 2 for a ServerHello (or any other
/// handshake type number found complete at the start of the buffer).
pub(crate) fn hello_type(buf: &[u8]) -> Option<i64> {
    handshake(buf).map(|(kind, _)| i64::from(kind))
}

/// `req.ssl_ver`: the protocol version as major × 65536 + minor. For a hello, the version
/// it announces (TLS 1.2 and 1.3 clients both say 3.3), once the whole message is in; for
/// another SSLv3-style record, the record's version; for an SSLv2 ClientHello, the version
/// it asks for.
pub(crate) fn version(buf: &[u8]) -> Option<i64> {
    let as_int = |major: u8, minor: u8| i64::from(major) << 16 | i64::from(minor);
    let mut r = Reader::new(buf);
    let first = r.u8()?;
    if (20..=23).contains(&first) {
        let (major, minor) = (r.u8()?, r.u8()?);
        if major < 3 {
            return None;
        }
        if first != HANDSHAKE {
            return Some(as_int(major, minor));
        }
        // A handshake record: wait for the whole message, whose version is the one that
        // counts.
        return match handshake(buf)? {
            (1 | 2, body) => {
                let mut h = Reader::new(body);
                Some(as_int(h.u8()?, h.u8()?))
            }
            _ => Some(as_int(major, minor)),
        };
    }
    // SSLv2 record: a two-byte length with the high bit set, then message type 1
    // (CLIENT-HELLO) and the version asked for.
    if first & 0x80 != 0 {
        let _len_low = r.u8()?;
        if r.u8()? != 1 {
            return None;
        }
        let (major, minor) = (r.u8()?, r.u8()?);
        if major >= 2 {
            return Some(as_int(major, minor));
        }
    }
    None
}

/// A ClientHello's extension block, checked to be well formed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClientHello<'a> {
    extensions: &'a [u8],
}

impl<'a> ClientHello<'a> {
    /// Parses the ClientHello at the start of `buf`; `None` unless a complete one is
    /// there. A hello without extensions has an empty block.
    pub fn parse(buf: &'a [u8]) -> Option<ClientHello<'a>> {
        let (kind, body) = handshake(buf)?;
        if kind != 1 {
            return None;
        }
        let mut r = Reader::new(body);
        let _version = r.take(2)?;
        let _random = r.take(32)?;
        let _session_id = r.vec8()?;
        let _ciphers = r.vec16()?;
        let _compression = r.vec8()?;
        if r.is_empty() {
            return Some(ClientHello { extensions: &[] });
        }
        let extensions = r.vec16()?;
        // Every extension must fit, so that the iteration below never stops early on a
        // length that lies.
        let mut check = Reader::new(extensions);
        while !check.is_empty() {
            check.u16()?;
            check.vec16()?;
        }
        Some(ClientHello { extensions })
    }

    /// The data of extension `kind`, if the client sent it.
    pub fn extension(&self, kind: u16) -> Option<&'a [u8]> {
        let mut r = Reader::new(self.extensions);
        while !r.is_empty() {
            let ty = r.u16()?;
            let data = r.vec16()?;
            if ty == kind {
                return Some(data);
            }
        }
        None
    }

    /// `req.ssl_sni`: the first host name of the server_name extension (RFC 6066 §3).
    pub fn server_name(&self) -> Option<&'a [u8]> {
        let mut list = Reader::new(Reader::new(self.extension(EXT_SERVER_NAME)?).vec16()?);
        while !list.is_empty() {
            let name_type = list.u8()?;
            let name = list.vec16()?;
            if name_type == 0 && !name.is_empty() {
                return Some(name);
            }
        }
        None
    }

    /// `req.ssl_alpn`: the protocols offered (RFC 7301 §3.1), in the client's order.
    pub fn alpn(&self) -> impl Iterator<Item = &'a [u8]> + use<'a> {
        let mut list = self
            .extension(EXT_ALPN)
            .and_then(|ext| Reader::new(ext).vec16())
            .map(Reader::new);
        std::iter::from_fn(move || {
            let r = list.as_mut()?;
            match r.vec8() {
                Some(name) if !name.is_empty() => Some(name),
                // A malformed or empty entry ends the list.
                _ => {
                    list = None;
                    None
                }
            }
        })
    }

    /// `req.ssl_ec_ext`: whether the supported_groups (elliptic curves) extension is there.
    pub fn has_supported_groups(&self) -> bool {
        self.extension(EXT_SUPPORTED_GROUPS).is_some()
    }

    /// `req.ssl_st_ext`: 0 without a SessionTicket extension, 1 with an empty one, 2 with a
    /// ticket.
    pub fn session_ticket(&self) -> i64 {
        match self.extension(EXT_SESSION_TICKET) {
            None => 0,
            Some([]) => 1,
            Some(_) => 2,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    /// Appends `data` preceded by its length on `width` bytes.
    fn with_len(out: &mut Vec<u8>, width: usize, data: &[u8]) {
        let len = data.len().to_be_bytes();
        out.extend_from_slice(&len[len.len() - width..]);
        out.extend_from_slice(data);
    }

    fn extension(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut out = kind.to_be_bytes().to_vec();
        with_len(&mut out, 2, data);
        out
    }

    /// A ClientHello as a TLS 1.3 client sends it: record version 3.1, hello version 3.3,
    /// SNI `www.example.com`, ALPN h2 and http/1.1, supported groups, an empty session
    /// ticket.
    pub(crate) fn client_hello() -> Vec<u8> {
        let mut sni_list = vec![0];
        with_len(&mut sni_list, 2, b"www.example.com");
        let mut sni = Vec::new();
        with_len(&mut sni, 2, &sni_list);
        let mut protocols = Vec::new();
        with_len(&mut protocols, 1, b"h2");
        with_len(&mut protocols, 1, b"http/1.1");
        let mut alpn = Vec::new();
        with_len(&mut alpn, 2, &protocols);
        let mut extensions = extension(EXT_SERVER_NAME, &sni);
        extensions.extend(extension(EXT_SUPPORTED_GROUPS, &[0, 4, 0, 0x1d, 0, 0x17]));
        extensions.extend(extension(EXT_ALPN, &alpn));
        extensions.extend(extension(EXT_SESSION_TICKET, &[]));
        extensions.extend(extension(43, &[2, 3, 4]));

        let mut body = vec![3, 3];
        body.extend_from_slice(&[0x42; 32]);
        with_len(&mut body, 1, &[7; 32]);
        with_len(&mut body, 2, &[0x13, 0x01, 0x13, 0x02, 0xc0, 0x2f]);
        with_len(&mut body, 1, &[0]);
        with_len(&mut body, 2, &extensions);

        let mut message = vec![1];
        with_len(&mut message, 3, &body);
        let mut record = vec![HANDSHAKE, 3, 1];
        with_len(&mut record, 2, &message);
        record
    }

    #[test]
    fn reads_a_client_hello() {
        let buf = client_hello();
        assert_eq!(hello_type(&buf), Some(1));
        assert_eq!(version(&buf), Some(0x0003_0003));
        let hello = ClientHello::parse(&buf).unwrap();
        assert_eq!(hello.server_name(), Some(&b"www.example.com"[..]));
        assert_eq!(hello.alpn().collect::<Vec<_>>(), [&b"h2"[..], b"http/1.1"]);
        assert!(hello.has_supported_groups());
        assert_eq!(hello.session_ticket(), 1);
        assert_eq!(hello.extension(43), Some(&[2u8, 3, 4][..]));
        // Bytes after the record (the next record) do not matter.
        let mut more = buf.clone();
        more.extend_from_slice(&[23, 3, 3, 0, 1, 0]);
        assert!(ClientHello::parse(&more).is_some());
    }

    #[test]
    fn other_messages_and_versions() {
        let mut server_hello = client_hello();
        server_hello[5] = 2;
        assert_eq!(hello_type(&server_hello), Some(2));
        assert!(ClientHello::parse(&server_hello).is_none());
        // Application data: the record's version.
        assert_eq!(version(&[23, 3, 3, 0, 1, 0]), Some(0x0003_0003));
        assert_eq!(hello_type(&[23, 3, 3, 0, 1, 0]), None);
        // SSLv2 ClientHello asking for SSLv3.
        assert_eq!(version(&[0x80, 0x2e, 1, 3, 0, 0, 0x15]), Some(0x0003_0000));
        // SSLv2 itself and plain text are not SSLv3+.
        assert_eq!(version(&[22, 2, 0, 0, 0]), None);
        assert_eq!(version(b"GET / HTTP/1.1\r\n"), None);
        assert_eq!(hello_type(b"GET / HTTP/1.1\r\n"), None);
        // A hello without extensions.
        let mut body = vec![3, 3];
        body.extend_from_slice(&[0; 32]);
        body.extend_from_slice(&[0, 0, 2, 0, 0x2f, 1, 0]);
        let mut message = vec![1];
        with_len(&mut message, 3, &body);
        let mut record = vec![HANDSHAKE, 3, 0];
        with_len(&mut record, 2, &message);
        let hello = ClientHello::parse(&record).unwrap();
        assert_eq!(hello.server_name(), None);
        assert_eq!(hello.alpn().count(), 0);
        assert!(!hello.has_supported_groups());
        assert_eq!(hello.session_ticket(), 0);
    }

    #[test]
    fn every_prefix_is_incomplete() {
        let buf = client_hello();
        for n in 0..buf.len() {
            let prefix = &buf[..n];
            assert_eq!(hello_type(prefix), None, "prefix {n}");
            assert!(ClientHello::parse(prefix).is_none(), "prefix {n}");
            assert_eq!(version(prefix), None, "prefix {n}");
        }
    }

    #[test]
    fn mutations_never_panic() {
        let original = client_hello();
        // A small xorshift generator: deterministic, no dependency.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let mut buf = original.clone();
            let edits = 1 + next() % 4;
            for _ in 0..edits {
                let at = (next() % buf.len() as u64) as usize;
                match next() % 3 {
                    0 => buf[at] = next() as u8,
                    1 => buf.truncate(at),
                    _ => buf.insert(at, next() as u8),
                }
                if buf.is_empty() {
                    break;
                }
            }
            let _ = hello_type(&buf);
            let _ = version(&buf);
            if let Some(hello) = ClientHello::parse(&buf) {
                let _ = hello.server_name();
                let _ = hello.alpn().count();
                let _ = hello.has_supported_groups();
                let _ = hello.session_ticket();
            }
        }
    }
}
