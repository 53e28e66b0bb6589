//! The PROXY protocol on live streams: [`read_header`] takes the header a client sends on an
//! `accept-proxy` listener, [`write_header`] sends ours to a `send-proxy`/`send-proxy-v2` server.
//!
//! Reading must not take a single byte beyond the header: what follows is the client's first
//! request, and the session's own buffer has not been created yet. So the reader peeks at the
//! socket (`MSG_PEEK`), lets [`crate::proxy_protocol::parse`] decide, and then consumes exactly
//! the header's bytes, which are already in the kernel's buffer. While the header is still
//! incomplete, the bytes seen so far are consumed (they all belong to the header) so that the
//! next peek waits for new data instead of spinning on the same bytes.

use crate::listen::Endpoints;
use crate::proxy_protocol::{self, Parse, SentTlvs};
use crate::stream::Stream;
use std::io;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The longest header accepted. A version 2 header may announce up to 64 KiB of TLVs; like
/// HAProxy, which refuses a header larger than its buffer, we stop at the default
/// `tune.bufsize` so a client cannot make us hold more than that.
pub const MAX_HEADER_LEN: usize = 16 * 1024;

/// How much is peeked at once: a whole v1 line (107 bytes) or a v2 header with unix addresses
/// (232 bytes) fits, so a header usually takes one peek and one read.
const PEEK_LEN: usize = 256;

/// Why no header was read; the connection must be closed.
#[derive(Debug)]
pub enum HeaderError {
    /// Nothing complete arrived within the time limit.
    Timeout,
    /// The client closed without sending anything.
    Closed,
    /// The client closed after part of a header.
    Truncated,
    /// The bytes are not a valid header (the reason comes from the codec).
    Invalid(&'static str),
    /// The header is longer than [`MAX_HEADER_LEN`].
    TooLong,
    /// The socket failed.
    Io(io::Error),
}

impl HeaderError {
    /// HAProxy's connection error number and message for this failure (`fc_err`,
    /// `fc_err_str`, the error log line).
    pub fn haproxy_error(&self) -> (u8, &'static str) {
        match self {
            HeaderError::Closed => (
                11,
                "Connection closed while waiting for PROXY protocol header",
            ),
            HeaderError::Truncated => (14, "Truncated PROXY protocol header received"),
            HeaderError::Io(_) => (
                12,
                "Connection error while waiting for PROXY protocol header",
            ),
            HeaderError::Timeout => (13, "Timeout while waiting for PROXY protocol header"),
            HeaderError::Invalid(
                "not a PROXY protocol header" | "bad v1 signature" | "bad v2 signature",
            ) => (
                15,
                "Received something which does not look like a PROXY protocol header",
            ),
            HeaderError::Invalid("unknown v1 protocol" | "unknown v2 family or transport") => (
                17,
                "Received an unhandled protocol in the PROXY protocol header",
            ),
            HeaderError::Invalid(_) | HeaderError::TooLong => {
                (16, "Received an invalid PROXY protocol header")
            }
        }
    }

    /// True if the client sent nothing at all (`option dontlognull` skips such probes).
    pub fn is_silent(&self) -> bool {
        matches!(self, HeaderError::Closed)
    }
}

impl From<io::Error> for HeaderError {
    fn from(err: io::Error) -> Self {
        // Reads only follow a peek that saw bytes: an early end cuts a header short.
        if err.kind() == io::ErrorKind::UnexpectedEof {
            HeaderError::Truncated
        } else {
            HeaderError::Io(err)
        }
    }
}

/// What a client's PROXY header said.
#[derive(Debug)]
pub struct Announced {
    /// The endpoints the session must use from now on: the header's addresses, or the
    /// connection's own when the header says to keep them (v1 `UNKNOWN`, v2 `LOCAL`...).
    pub endpoints: Endpoints,
    /// The TLVs kept for the session's fetches, boxed apart since few headers carry any.
    pub tlvs: Option<Box<proxy_protocol::ReceivedTlvs>>,
}

/// Reads the PROXY header (version 1 or 2) at the start of `stream` within `limit`, `real`
/// being the connection's own endpoints. Exactly the header's bytes are consumed.
pub async fn read_header(
    stream: &mut Stream,
    real: Endpoints,
    limit: Option<Duration>,
) -> Result<Announced, HeaderError> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, read_header_bytes(stream, real))
            .await
            .unwrap_or(Err(HeaderError::Timeout)),
        None => read_header_bytes(stream, real).await,
    }
}

async fn read_header_bytes(stream: &mut Stream, real: Endpoints) -> Result<Announced, HeaderError> {
    // The bytes of the header consumed so far (only while it is incomplete).
    let mut consumed: Vec<u8> = Vec::new();
    let mut peeked = [0u8; PEEK_LEN];
    loop {
        let n = stream.peek(&mut peeked).await?;
        if n == 0 {
            return Err(if consumed.is_empty() {
                HeaderError::Closed
            } else {
                HeaderError::Truncated
            });
        }
        let parsed = if consumed.is_empty() {
            proxy_protocol::parse(&peeked[..n])
        } else {
            let mut seen = consumed.clone();
            seen.extend_from_slice(&peeked[..n]);
            proxy_protocol::parse(&seen)
        };
        match parsed {
            Parse::Parsed {
                header_len,
                source,
                destination,
            } => {
                if header_len > MAX_HEADER_LEN {
                    return Err(HeaderError::TooLong);
                }
                let rest = header_len.saturating_sub(consumed.len());
                // The header ends within the bytes just peeked: they are in the kernel's buffer.
                stream.read_exact(&mut peeked[..rest.min(n)]).await?;
                let tlvs = if consumed.is_empty() {
                    proxy_protocol::received_tlvs(&peeked[..header_len])
                } else {
                    consumed.extend_from_slice(&peeked[..rest]);
                    proxy_protocol::received_tlvs(&consumed)
                };
                let endpoints = match source.zip(destination) {
                    Some((client, local)) => Endpoints {
                        client: Some(client),
                        local: Some(local),
                    },
                    None => real,
                };
                return Ok(Announced {
                    endpoints,
                    tlvs: tlvs.map(Box::new),
                });
            }
            Parse::Invalid(reason) => return Err(HeaderError::Invalid(reason)),
            Parse::Incomplete => {
                if consumed.len() + n >= MAX_HEADER_LEN {
                    return Err(HeaderError::TooLong);
                }
                stream.read_exact(&mut peeked[..n]).await?;
                consumed.extend_from_slice(&peeked[..n]);
            }
        }
    }
}

/// Which header a server receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// The text line (`send-proxy`).
    V1,
    /// The binary header (`send-proxy-v2`).
    V2,
}

/// The header describing `endpoints` (the client's addresses as the session sees them, so
/// those of an `accept-proxy` header are passed on); a v2 header carries `tlvs`.
pub fn header_for(version: Version, endpoints: &Endpoints, tlvs: &SentTlvs<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    match version {
        Version::V1 => proxy_protocol::encode_v1(endpoints.client, endpoints.local, &mut out),
        Version::V2 => {
            proxy_protocol::encode_v2(endpoints.client, endpoints.local, tlvs, &mut out);
        }
    }
    out
}

/// Writes the header for `endpoints` (with `tlvs` in a v2 header) on a server connection that
/// was just established, before anything else, within `limit`. The header is smaller than
/// any socket buffer, so on a fresh connection this completes at once.
pub async fn write_header(
    stream: &mut Stream,
    version: Version,
    (endpoints, tlvs): (&Endpoints, &SentTlvs<'_>),
    limit: Option<Duration>,
) -> io::Result<()> {
    let header = header_for(version, endpoints, tlvs);
    let writing = stream.write_all(&header);
    match limit {
        Some(limit) => tokio::time::timeout(limit, writing)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "PROXY header write timeout"))?,
        None => writing.await,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tokio::net::{TcpListener, TcpStream};

    /// A connected pair: the accepted side as a [`Stream`], and the client socket.
    async fn pair() -> (Stream, TcpStream, Endpoints) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, peer) = listener.accept().await.unwrap();
        let real = Endpoints {
            client: Some(peer),
            local: accepted.local_addr().ok(),
        };
        (Stream::Tcp(accepted), client, real)
    }

    async fn rest(stream: &mut Stream, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        stream.read_exact(&mut buf).await.unwrap();
        buf
    }

    #[tokio::test]
    async fn reads_exactly_the_header_and_leaves_the_data() {
        let (mut accepted, mut client, real) = pair().await;
        client
            .write_all(b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 80\r\nGET / HTTP/1.0\r\n\r\n")
            .await
            .unwrap();
        let got = read_header(&mut accepted, real, Some(Duration::from_secs(5)))
            .await
            .unwrap();
        assert_eq!(got.endpoints.client, Some("1.2.3.4:1111".parse().unwrap()));
        assert_eq!(got.endpoints.local, Some("5.6.7.8:80".parse().unwrap()));
        assert!(got.tlvs.is_none());
        assert_eq!(rest(&mut accepted, 18).await, b"GET / HTTP/1.0\r\n\r\n");
    }

    #[tokio::test]
    async fn a_header_arriving_in_pieces_is_assembled() {
        let (mut accepted, mut client, real) = pair().await;
        let mut header = Vec::new();
        // Longer than one peek, with its TLVs at the end.
        let authority = [b'a'; 250];
        let tlvs = SentTlvs {
            crc32c: true,
            authority: Some(&authority),
            unique_id: Some(b"the-id"),
            ssl: true,
        };
        proxy_protocol::encode_v2(
            Some("[2001:db8::1]:4000".parse().unwrap()),
            Some("[2001:db8::2]:443".parse().unwrap()),
            &tlvs,
            &mut header,
        );
        assert!(header.len() > PEEK_LEN);
        header.extend_from_slice(b"data");
        let reading = tokio::spawn(async move {
            let got = read_header(&mut accepted, real, Some(Duration::from_secs(5))).await;
            (got, rest(&mut accepted, 4).await)
        });
        for piece in header.chunks(5) {
            client.write_all(piece).await.unwrap();
            client.flush().await.unwrap();
            tokio::task::yield_now().await;
        }
        let (got, data) = reading.await.unwrap();
        let got = got.unwrap();
        assert_eq!(
            got.endpoints.client,
            Some("[2001:db8::1]:4000".parse().unwrap())
        );
        let kept = got.tlvs.unwrap();
        assert_eq!(kept.authority.as_deref(), Some(&authority[..]));
        assert_eq!(kept.unique_id.as_deref(), Some(&b"the-id"[..]));
        assert_eq!(data, b"data");
    }

    #[tokio::test]
    async fn unknown_keeps_the_real_addresses() {
        let (mut accepted, mut client, real) = pair().await;
        client.write_all(b"PROXY UNKNOWN\r\nx").await.unwrap();
        let got = read_header(&mut accepted, real, None).await.unwrap();
        assert_eq!(got.endpoints, real);
        assert_eq!(rest(&mut accepted, 1).await, b"x");
    }

    #[tokio::test]
    async fn garbage_close_and_timeout_are_errors() {
        let (mut accepted, mut client, real) = pair().await;
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        assert!(matches!(
            read_header(&mut accepted, real, None).await,
            Err(HeaderError::Invalid(_))
        ));

        let (mut accepted, mut client, real) = pair().await;
        client.write_all(b"PROXY TCP4 1.2").await.unwrap();
        drop(client);
        let err = read_header(&mut accepted, real, None).await.unwrap_err();
        assert!(matches!(err, HeaderError::Truncated));
        assert_eq!(err.haproxy_error().0, 14);

        let (mut accepted, client, real) = pair().await;
        drop(client);
        let err = read_header(&mut accepted, real, None).await.unwrap_err();
        assert!(err.is_silent());
        assert_eq!(
            err.haproxy_error(),
            (
                11,
                "Connection closed while waiting for PROXY protocol header"
            )
        );

        let (mut accepted, _client, real) = pair().await;
        assert!(matches!(
            read_header(&mut accepted, real, Some(Duration::from_millis(20))).await,
            Err(HeaderError::Timeout)
        ));
    }

    #[tokio::test]
    async fn writes_the_header_first() {
        let (mut accepted, mut client, _) = pair().await;
        let endpoints = Endpoints {
            client: Some("1.2.3.4:1111".parse().unwrap()),
            local: Some("5.6.7.8:80".parse().unwrap()),
        };
        write_header(
            &mut accepted,
            Version::V1,
            (&endpoints, &SentTlvs::NONE),
            None,
        )
        .await
        .unwrap();
        let mut buf = [0u8; 36];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 80\r\n");
    }
}
