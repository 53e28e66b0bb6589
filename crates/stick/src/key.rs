//! Stick-table keys (configuration.txt §4.2 `stick-table type`): what a key of each table
//! type is made of, how a value becomes one, and how `show table` prints it.
//!
//! Keys are stored as bytes in a canonical form, so lookups compare bytes: an IPv4 address
//! is its 4 bytes, an IPv6 address its 16, an integer 4 big-endian bytes (HAProxy's keys are
//! 32-bit), a string its bytes cut at the table's `len`, and a binary key its bytes cut or
//! padded with zeros to exactly `len`, as HAProxy pads them.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The default `len` of string and binary keys.
pub const DEFAULT_KEY_LEN: usize = 32;

/// The type of a table's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    /// `ip`: IPv4 addresses (an IPv6-mapped IPv4 address is taken as IPv4).
    Ip,
    /// `ipv6`: IPv6 addresses (an IPv4 address is stored mapped).
    Ipv6,
    /// `integer`: 32-bit unsigned integers.
    Integer,
    /// `string [len N]`: strings of at most N bytes.
    String(usize),
    /// `binary [len N]`: blocks of exactly N bytes.
    Binary(usize),
}

impl KeyType {
    /// The name `show table` prints (`ip`, `ipv6`, `integer`, `string`, `binary`).
    pub fn name(self) -> &'static str {
        match self {
            KeyType::Ip => "ip",
            KeyType::Ipv6 => "ipv6",
            KeyType::Integer => "integer",
            KeyType::String(_) => "string",
            KeyType::Binary(_) => "binary",
        }
    }

    /// The key of an address; `None` for an IPv6 address in an `ip` table (unless mapped).
    pub fn ip_key(self, ip: IpAddr) -> Option<Vec<u8>> {
        match (self, ip) {
            (KeyType::Ip, IpAddr::V4(v4)) => Some(v4.octets().to_vec()),
            (KeyType::Ip, IpAddr::V6(v6)) => v6.to_ipv4_mapped().map(|v4| v4.octets().to_vec()),
            (KeyType::Ipv6, IpAddr::V4(v4)) => Some(v4.to_ipv6_mapped().octets().to_vec()),
            (KeyType::Ipv6, IpAddr::V6(v6)) => Some(v6.octets().to_vec()),
            (KeyType::Integer, IpAddr::V4(v4)) => Some(u32::from(v4).to_be_bytes().to_vec()),
            (KeyType::Integer, IpAddr::V6(_)) => None,
            (KeyType::String(_) | KeyType::Binary(_), ip) => {
                self.bytes_key(ip.to_string().as_bytes())
            }
        }
    }

    /// The key of an integer (an IPv4 address from its low 32 bits for `ip` tables).
    pub fn int_key(self, n: i64) -> Option<Vec<u8>> {
        match self {
            // HAProxy keeps the low 32 bits of the sample's integer.
            KeyType::Integer => Some((n as u32).to_be_bytes().to_vec()),
            KeyType::Ip | KeyType::Ipv6 => self.ip_key(IpAddr::V4(Ipv4Addr::from(n as u32))),
            KeyType::String(_) | KeyType::Binary(_) => self.bytes_key(n.to_string().as_bytes()),
        }
    }

    /// The key of a string or binary value (parsed as an address or a number for the other
    /// types).
    pub fn bytes_key(self, bytes: &[u8]) -> Option<Vec<u8>> {
        match self {
            KeyType::String(len) => Some(bytes[..bytes.len().min(len)].to_vec()),
            KeyType::Binary(len) => {
                let mut key = bytes[..bytes.len().min(len)].to_vec();
                key.resize(len, 0);
                Some(key)
            }
            KeyType::Ip | KeyType::Ipv6 => {
                let ip = std::str::from_utf8(bytes).ok()?.parse::<IpAddr>().ok()?;
                self.ip_key(ip)
            }
            KeyType::Integer => {
                let n = std::str::from_utf8(bytes)
                    .ok()?
                    .trim()
                    .parse::<i64>()
                    .ok()?;
                self.int_key(n)
            }
        }
    }

    /// The key a CLI user typed (`show table T key K`, `set table T key K`): an IPv4 address
    /// for `ip`, an IPv6 address for `ipv6`, an unsigned 32-bit number for `integer`, the
    /// text for `string`, hexadecimal for `binary`.
    pub fn parse_text(self, text: &str) -> Option<Vec<u8>> {
        match self {
            KeyType::Ip => Some(text.parse::<Ipv4Addr>().ok()?.octets().to_vec()),
            KeyType::Ipv6 => Some(text.parse::<Ipv6Addr>().ok()?.octets().to_vec()),
            KeyType::Integer => Some(text.parse::<u32>().ok()?.to_be_bytes().to_vec()),
            KeyType::Binary(_) => {
                if !text.len().is_multiple_of(2) {
                    return None;
                }
                let bytes = (0..text.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
                    .collect::<Option<Vec<u8>>>()?;
                self.bytes_key(&bytes)
            }
            _ => self.bytes_key(text.as_bytes()),
        }
    }

    /// The key as `show table` prints it.
    pub fn display(self, key: &[u8]) -> String {
        match self {
            KeyType::Ip => <[u8; 4]>::try_from(key)
                .map(|b| Ipv4Addr::from(b).to_string())
                .unwrap_or_default(),
            KeyType::Ipv6 => <[u8; 16]>::try_from(key)
                .map(|b| Ipv6Addr::from(b).to_string())
                .unwrap_or_default(),
            KeyType::Integer => <[u8; 4]>::try_from(key)
                .map(|b| u32::from_be_bytes(b).to_string())
                .unwrap_or_default(),
            KeyType::String(_) => String::from_utf8_lossy(key).into_owned(),
            KeyType::Binary(_) => key.iter().fold(String::new(), |mut s, b| {
                let _ = write!(s, "{b:02X}");
                s
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::KeyType;
    use std::net::IpAddr;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    #[test]
    fn addresses() {
        let k = KeyType::Ip.ip_key(ip("10.1.2.3")).expect("key");
        assert_eq!(k, [10, 1, 2, 3]);
        assert_eq!(KeyType::Ip.display(&k), "10.1.2.3");
        assert_eq!(KeyType::Ip.ip_key(ip("::ffff:10.1.2.3")), Some(k.clone()));
        assert_eq!(KeyType::Ip.ip_key(ip("2001:db8::1")), None);
        let v6 = KeyType::Ipv6.ip_key(ip("10.1.2.3")).expect("key");
        assert_eq!(KeyType::Ipv6.display(&v6), "::ffff:10.1.2.3");
        assert_eq!(KeyType::Ip.parse_text("10.1.2.3"), Some(k));
        assert_eq!(KeyType::Ip.parse_text("abc"), None);
        assert_eq!(KeyType::Ip.parse_text("::1"), None);
        assert_eq!(KeyType::Ipv6.parse_text("10.1.2.3"), None);
        assert_eq!(KeyType::Ip.parse_text("::1"), None);
        assert_eq!(KeyType::Ipv6.parse_text("10.1.2.3"), None);
    }

    #[test]
    fn strings_and_binaries() {
        assert_eq!(
            KeyType::String(3).bytes_key(b"abcdef"),
            Some(b"abc".to_vec())
        );
        let bin = KeyType::Binary(4).parse_text("0aff").expect("key");
        assert_eq!(bin, [0x0a, 0xff, 0, 0]);
        assert_eq!(KeyType::Binary(4).display(&bin), "0AFF0000");
        assert_eq!(KeyType::Binary(4).parse_text("0g"), None);
    }

    #[test]
    fn integers() {
        let k = KeyType::Integer.parse_text("12").expect("key");
        assert_eq!(KeyType::Integer.display(&k), "12");
        assert_eq!(KeyType::Integer.parse_text("-12"), None);
        assert_eq!(
            KeyType::Integer.int_key(7),
            Some(7u32.to_be_bytes().to_vec())
        );
        let wrapped = KeyType::Integer.int_key(-1).expect("key");
        assert_eq!(KeyType::Integer.display(&wrapped), "4294967295");
    }
}
