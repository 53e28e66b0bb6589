//! User lists and HTTP Basic authentication (configuration.txt §3.4 `userlist`, §7.3.6
//! `http_auth`, `http_auth_group`, `http_auth_user`, `http_auth_pass`, `http_auth_type`).
//!
//! A [`Userlist`] is what a `userlist` section declares: users with a clear or hashed
//! password and the groups they belong to. The configuration builds them and registers them
//! in the [`MapStore`](crate::MapStore) before any proxy is read, so an `http_auth(L)` fetch
//! resolves its list when it is compiled and a missing list is a configuration error.
//! Hashed passwords are crypt(3) strings checked with maintained crates rather than the C
//! library: SHA-256 (`$5$`) and SHA-512 (`$6$`) with `sha-crypt`, bcrypt (`$2a$`, `$2b$`,
//! `$2x$`, `$2y$`) with `bcrypt`; MD5 (`$1$`) and DES hashes are refused at load time as not
//! supported. [`basic_credentials`] decodes an `Authorization: Basic` value; nothing here
//! panics on what a client sends. Read [`Userlist::authenticate`] first.

use crate::conv::base64_decode;

/// A password as a `user` line gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Password {
    /// `insecure-password`: compared as it is.
    Clear(String),
    /// `password` with a SHA-256 or SHA-512 crypt string.
    ShaCrypt(String),
    /// `password` with a bcrypt string.
    Bcrypt(String),
    /// No password given: the user never authenticates.
    Locked,
}

impl Password {
    /// Checks a `password` argument, a crypt(3) string. The error says why it is refused.
    pub fn hashed(text: &str) -> Result<Password, String> {
        if let Some(len) = sha_crypt_hash_len(text) {
            return if valid_sha_crypt(text, len) {
                Ok(Password::ShaCrypt(text.to_owned()))
            } else {
                Err(format!("invalid SHA-crypt password hash '{text}'"))
            };
        }
        if ["$2a$", "$2b$", "$2x$", "$2y$"]
            .iter()
            .any(|p| text.starts_with(p))
        {
            return match text.parse::<bcrypt::HashParts>() {
                Ok(_) => Ok(Password::Bcrypt(text.to_owned())),
                Err(_) => Err(format!("invalid bcrypt password hash '{text}'")),
            };
        }
        let scheme = if text.starts_with("$1$") {
            "MD5-crypt ('$1$')".to_owned()
        } else if let Some(id) = text.strip_prefix('$').and_then(|t| t.split('$').next()) {
            format!("'${id}$'")
        } else {
            "DES-crypt".to_owned()
        };
        Err(format!(
            "password hash scheme {scheme} is not supported by Sluice (use SHA-256 '$5$', SHA-512 '$6$' or bcrypt '$2b$', or 'insecure-password')"
        ))
    }

    /// True if `given` is the password.
    pub fn verify(&self, given: &[u8]) -> bool {
        match self {
            Password::Clear(p) => constant_time_eq(p.as_bytes(), given),
            Password::ShaCrypt(hash) => {
                // crypt(3) takes bytes but the crate takes text: a password that is not UTF-8
                // cannot match a hash made from text.
                let Ok(given) = std::str::from_utf8(given) else {
                    return false;
                };
                if hash.starts_with("$5$") {
                    sha_crypt::sha256_check(given, hash).is_ok()
                } else {
                    sha_crypt::sha512_check(given, hash).is_ok()
                }
            }
            Password::Bcrypt(hash) => bcrypt::verify(given, hash).unwrap_or(false),
            Password::Locked => false,
        }
    }
}

/// The length of the encoded digest of a `$5$` (SHA-256) or `$6$` (SHA-512) string.
fn sha_crypt_hash_len(text: &str) -> Option<usize> {
    if text.starts_with("$5$") {
        Some(43)
    } else if text.starts_with("$6$") {
        Some(86)
    } else {
        None
    }
}

/// Checks the form `$5$[rounds=N$]SALT$DIGEST` (the crate only says whether a password
/// matches, not whether the string was well formed).
fn valid_sha_crypt(text: &str, digest_len: usize) -> bool {
    let mut parts = text[3..].split('$').collect::<Vec<_>>();
    if let Some(rounds) = parts.first().and_then(|p| p.strip_prefix("rounds=")) {
        let in_range = rounds
            .parse::<u32>()
            .is_ok_and(|r| (1000..=999_999_999).contains(&r));
        if !in_range {
            return false;
        }
        parts.remove(0);
    }
    let crypt_alphabet = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/')
    };
    match parts[..] {
        [salt, digest] => {
            salt.len() <= 16
                && !salt.contains(['\0', '\n', ':'])
                && digest.len() == digest_len
                && crypt_alphabet(digest)
        }
        _ => false,
    }
}

/// Compares without stopping at the first difference, so timing does not tell how much of
/// a clear password a guess got right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A user of a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// The name.
    pub name: String,
    /// The password.
    pub password: Password,
    /// The groups the user belongs to, from its `groups` option and the groups' `users`.
    pub groups: Vec<String>,
}

/// A `userlist` section.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Userlist {
    /// The section's name.
    pub name: String,
    /// Users in declaration order.
    pub users: Vec<User>,
    /// Group names in declaration order.
    pub groups: Vec<String>,
}

impl Userlist {
    /// The user whose name and password `credentials` carries, if they are valid.
    pub fn authenticate(&self, user: &[u8], password: &[u8]) -> Option<&User> {
        let found = self.users.iter().find(|u| u.name.as_bytes() == user)?;
        found.password.verify(password).then_some(found)
    }
}

/// The user name and password of an `Authorization: Basic` value (RFC 7617), `None` for
/// another scheme or a malformed value.
pub fn basic_credentials(value: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let (scheme, rest) = auth_scheme(value)?;
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    let decoded = base64_decode(rest, false)?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

/// Splits an Authorization value into its scheme and its (trimmed) parameters.
pub fn auth_scheme(value: &[u8]) -> Option<(&[u8], &[u8])> {
    let value = value.trim_ascii();
    let end = value
        .iter()
        .position(|&b| b == b' ' || b == b'\t')
        .unwrap_or(value.len());
    if end == 0 {
        return None;
    }
    Some((&value[..end], value[end..].trim_ascii()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    // Generated once with the crates themselves (sha_crypt::sha256_simple / sha512_simple
    // and bcrypt::hash at cost 4) for the password "secret".
    const SHA256: &str =
        "$5$rounds=1000$CzCgMB7e5VTSM5wE$ZErSu9omkcLRVuiLWwC5v1bMWz8y.3NT8k3o6DgkEhA";
    const SHA512: &str = "$6$rounds=1000$bGXHicm05pzWAtO3$.J7Du7KcmU6rJeupTwqJluEewn.nvfEH0aPIPo4UgfB.Cx/CUfP6DbS5pjz.KHmUpN8dlnAYzaJ7rXxDXgReI.";
    const BCRYPT: &str = "$2b$04$/sAp.id2NxcHp86rg5arVONV/VYfD0pgY0Wh5I38PaH90CyqpRsue";

    #[test]
    fn hashes_made_by_the_crates_verify() {
        for hash in [SHA256, SHA512, BCRYPT] {
            let p = Password::hashed(hash).unwrap();
            assert!(p.verify(b"secret"), "{hash}");
            assert!(!p.verify(b"secreT"), "{hash}");
            assert!(!p.verify(b""), "{hash}");
            assert!(!p.verify(&[0xff, 0xfe]), "{hash}");
        }
    }

    #[test]
    fn a_hash_made_by_glibc_crypt_verifies() {
        // crypt("secret", "$6$saltsalt$") on glibc, the library HAProxy calls.
        let glibc = "$6$saltsalt$TVLlQcbpFVof5W3Yz4DTP6gRstiNuHwwTt6GLc1E5n0U0aDehy0S5knV8wiOQSpT0Y77vwPZN.Pq.H91p5hVO1";
        assert!(Password::hashed(glibc).unwrap().verify(b"secret"));
    }

    #[test]
    fn unsupported_and_broken_hashes_are_refused() {
        let md5 = Password::hashed("$1$salt$qJH7.N4xYta3aEG/dfqo/0").unwrap_err();
        assert!(md5.contains("MD5-crypt"), "{md5}");
        assert!(md5.contains("not supported by Sluice"), "{md5}");
        assert!(
            Password::hashed("abJnggxhB/yWI")
                .unwrap_err()
                .contains("DES")
        );
        assert!(Password::hashed("$6$").is_err());
        assert!(Password::hashed("$2b$04$short").is_err());
        assert!(
            Password::hashed("$y$j9T$abc$def")
                .unwrap_err()
                .contains("'$y$'")
        );
    }

    #[test]
    fn clear_passwords_compare_exactly() {
        let p = Password::Clear("pw".into());
        assert!(p.verify(b"pw"));
        assert!(!p.verify(b"pw "));
        assert!(!p.verify(b"p"));
    }

    #[test]
    fn basic_credentials_decode() {
        // "tiger:pw:1" — only the first colon separates.
        assert_eq!(
            basic_credentials(b"Basic dGlnZXI6cHc6MQ=="),
            Some((b"tiger".to_vec(), b"pw:1".to_vec()))
        );
        assert_eq!(
            basic_credentials(b"  bAsIc   dGlnZXI6cHc6MQ==  "),
            Some((b"tiger".to_vec(), b"pw:1".to_vec()))
        );
        assert_eq!(basic_credentials(b"Bearer abc"), None);
        assert_eq!(basic_credentials(b"Basic !!!"), None);
        // No colon.
        assert_eq!(basic_credentials(b"Basic dGlnZXI="), None);
        assert_eq!(basic_credentials(b""), None);
        assert_eq!(basic_credentials(b"Basic"), None);
    }

    #[test]
    fn authenticate_finds_the_user() {
        let list = Userlist {
            name: "L".into(),
            users: vec![User {
                name: "tiger".into(),
                password: Password::Clear("pw".into()),
                groups: vec!["G1".into()],
            }],
            groups: vec!["G1".into()],
        };
        assert_eq!(
            list.authenticate(b"tiger", b"pw").map(|u| &u.groups[..]),
            Some(&["G1".to_owned()][..])
        );
        assert!(list.authenticate(b"tiger", b"no").is_none());
        assert!(list.authenticate(b"lion", b"pw").is_none());
    }
}
