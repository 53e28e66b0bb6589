//! What a backend's `balance` and `hash-type` lines say (configuration.txt §4.2 "balance",
//! "hash-type"), as typed values: [`Algorithm`] and [`HashType`], with [`parse_balance`] and
//! [`parse_hash_type`] turning the lines' words into them. The configuration crate calls these and
//! wraps the error strings into its diagnostics; the [`Balancer`](crate::Balancer) is built from
//! the results.
//!
//! The parsers accept what HAProxy accepts, including the words HAProxy silently ignores (extra
//! words after `roundrobin`, `check_post`'s old `<max_wait>`), so that a working `haproxy.cfg`
//! keeps working; malformed values (`depth 0`, `random(x)`) are refused with a message that names
//! the keyword and the offending word.

/// How a backend chooses a server (configuration.txt §4.2 "balance").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// `roundrobin`: each server in turn, according to its weight; weights are dynamic.
    RoundRobin,
    /// `static-rr`: like roundrobin, but weights are fixed at start-up (only 0 and "back to the
    /// configured weight" take effect at run time).
    StaticRr,
    /// `leastconn`: the server with the fewest connections relative to its weight; round robin
    /// among equally loaded servers.
    LeastConn,
    /// `first`: the first server, by id, with a free connection slot below its `maxconn`.
    First,
    /// `source`: a hash of the client's address ([`source_key`](crate::source_key)).
    Source,
    /// `uri [whole] [len N] [depth N] [path-only]`: a hash of (part of) the request target
    /// ([`uri_key`](crate::uri_key)).
    Uri(UriOptions),
    /// `url_param <name> [check_post]`: a hash of a query-string parameter's value
    /// ([`url_param_key`](crate::url_param_key)).
    UrlParam {
        /// The parameter name, compared case-sensitively.
        name: String,
        /// `check_post`: look in a form-encoded request body when the query string lacks the
        /// parameter ([`form_param_key`](crate::form_param_key)). The `<max_wait>` number that
        /// may follow is obsolete and ignored, as in HAProxy.
        check_post: bool,
    },
    /// `hdr(<name>) [use_domain_only]`: a hash of a request header's value
    /// ([`hdr_key`](crate::hdr_key)).
    Hdr {
        /// The header name as written; headers are matched case-insensitively by the caller.
        name: String,
        /// `use_domain_only`: hash only the main domain label of a Host-like value.
        use_domain_only: bool,
    },
    /// `random` / `random(<draws>)`: `draws` weighted random picks, the least loaded one wins
    /// (power of N choices); always on the consistent-hash ring.
    Random {
        /// Number of draws, at least 1; `random` alone means 2.
        draws: u32,
    },
    /// `hash <expression>`: a hash of a sample expression. The expression text is kept for the
    /// caller, which evaluates it per request and passes the result as the key.
    Hash(String),
    /// `rdp-cookie[(<name>)]`: a hash of an RDP client's cookie (`mstshash` by default), read
    /// by the caller from the connection's first bytes (`mode tcp`).
    RdpCookie(String),
}

impl Algorithm {
    /// Whether the same request always goes to the same server (a hash of something it
    /// carries), as opposed to rotations, loads and draws (`option prefer-last-server`
    /// applies only to those).
    pub fn is_deterministic(&self) -> bool {
        // The hashing algorithms are exactly those.
        self.uses_key()
    }

    /// The `balance` keyword naming this algorithm, for messages and `show` output.
    pub fn keyword(&self) -> &'static str {
        match self {
            Algorithm::RoundRobin => "roundrobin",
            Algorithm::StaticRr => "static-rr",
            Algorithm::LeastConn => "leastconn",
            Algorithm::First => "first",
            Algorithm::Source => "source",
            Algorithm::Uri(_) => "uri",
            Algorithm::UrlParam { .. } => "url_param",
            Algorithm::Hdr { .. } => "hdr",
            Algorithm::Random { .. } => "random",
            Algorithm::Hash(_) => "hash",
            Algorithm::RdpCookie(_) => "rdp-cookie",
        }
    }

    /// True for the algorithms that hash a key the caller extracts per request (`source`,
    /// `uri`, `url_param`, `hdr`, `hash`, `rdp-cookie`); those follow `hash-type`.
    pub fn uses_key(&self) -> bool {
        matches!(
            self,
            Algorithm::Source
                | Algorithm::Uri(_)
                | Algorithm::UrlParam { .. }
                | Algorithm::Hdr { .. }
                | Algorithm::Hash(_)
                | Algorithm::RdpCookie(_)
        )
    }

    /// True when only an HTTP backend can use the algorithm (§4.2 "balance": `uri`,
    /// `url_param` "may only be used in an HTTP backend"; `hdr` needs headers too).
    pub fn needs_http(&self) -> bool {
        matches!(
            self,
            Algorithm::Uri(_) | Algorithm::UrlParam { .. } | Algorithm::Hdr { .. }
        )
    }
}

/// The parameters of `balance uri` (§4.2 "balance", "uri").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UriOptions {
    /// `whole`: hash the query string too (by default hashing stops at `?`).
    pub whole: bool,
    /// `len N`: hash at most the first N bytes (N ≥ 1).
    pub len: Option<usize>,
    /// `depth N`: hash at most N directory levels, one per `/` (N ≥ 1).
    pub depth: Option<usize>,
    /// `path-only`: start at the path's first `/`, skipping an absolute URI's scheme and
    /// authority, so HTTP/1 and HTTP/2 requests hash alike.
    pub path_only: bool,
}

/// How a hash is mapped to a server (`hash-type <method>`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HashMethod {
    /// `map-based` (the default): a static table of the usable servers, `hash % total weight`.
    /// Smooth, but most keys move when a server goes up or down, and weights are static.
    #[default]
    MapBased,
    /// `consistent`: a ring with many points per server; only the keys of a server that goes
    /// away move. Weights are dynamic.
    Consistent,
}

/// The function hashing the key (`hash-type <method> <function>`); see [`mod@crate::hash`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HashFunction {
    /// `sdbm` (the default).
    #[default]
    Sdbm,
    /// `djb2`.
    Djb2,
    /// `wt6`.
    Wt6,
    /// `crc32`.
    Crc32,
    /// `none`: the key is a decimal number used as the hash ([`crate::integer_key`]).
    None,
}

/// A backend's `hash-type`: method, function and the `avalanche` modifier.
///
/// The default (no `hash-type` line) is `map-based sdbm` without avalanche. `hash-type
/// consistent` without a function means `consistent sdbm avalanche` (§4.2 "hash-type": "consistent
/// hash uses sdbm and avalanche if no hash function is specified"). `balance random` always uses
/// the consistent ring whatever this says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashType {
    /// Map-based or consistent.
    pub method: HashMethod,
    /// The hash function.
    pub function: HashFunction,
    /// Whether the `avalanche` modifier mixes the function's result.
    pub avalanche: bool,
}

/// The number of draws of `balance random` without an argument (§4.2 "balance": "The default
/// value is 2").
pub const DEFAULT_RANDOM_DRAWS: u32 = 2;

const KNOWN: &str = "roundrobin, static-rr, leastconn, first, source, uri, url_param, \
                     hdr(<name>), random, random(<draws>), rdp-cookie[(<name>)], hash <expression>";

/// Parses the arguments of a `balance` line (the words after `balance`), e.g. `["roundrobin"]`,
/// `["uri", "whole", "depth", "3"]`, `["hdr(host)", "use_domain_only"]`,
/// `["url_param", "userid", "check_post", "64"]`, `["random(2)"]`, `["hash", "req.cookie(id)"]`.
///
/// Refuses an unknown algorithm, the log-backend
/// algorithms `log-hash` and `sticky`, and malformed arguments; the error says which word is
/// wrong. Extra words after an algorithm that takes none are ignored, and `balance` alone
/// means `roundrobin`, as HAProxy does.
pub fn parse_balance(words: &[&str]) -> Result<Algorithm, String> {
    let Some((&name, args)) = words.split_first() else {
        return Ok(Algorithm::RoundRobin);
    };
    match name {
        "roundrobin" => Ok(Algorithm::RoundRobin),
        "static-rr" => Ok(Algorithm::StaticRr),
        "leastconn" => Ok(Algorithm::LeastConn),
        "first" => Ok(Algorithm::First),
        "source" => Ok(Algorithm::Source),
        "uri" => parse_uri(args).map(Algorithm::Uri),
        "url_param" => parse_url_param(args),
        "hash" => match args {
            [] => Err("'balance hash' expects a sample expression".to_string()),
            [expr] => Ok(Algorithm::Hash((*expr).to_string())),
            [_, extra, ..] => Err(format!(
                "'balance hash' takes a single expression (got extra argument '{extra}')"
            )),
        },
        _ if name == "random" || name.starts_with("random(") => parse_random(name),
        _ if name.starts_with("hdr(") || name == "hdr" => parse_hdr(name, args),
        "rdp-cookie" => Ok(Algorithm::RdpCookie("mstshash".to_string())),
        _ if name.starts_with("rdp-cookie(") => name
            .strip_prefix("rdp-cookie(")
            .and_then(|inner| inner.strip_suffix(')'))
            .filter(|cookie| !cookie.is_empty())
            .map(|cookie| Algorithm::RdpCookie(cookie.to_string()))
            .ok_or_else(|| format!("'balance {name}' expects a cookie name in parentheses")),
        "log-hash" | "sticky" => Err(format!(
            "'balance {name}' is for log backends, which are not supported by Sluice"
        )),
        _ => Err(format!(
            "unknown balance algorithm '{name}' (expected one of {KNOWN})"
        )),
    }
}

fn parse_uri(args: &[&str]) -> Result<UriOptions, String> {
    let mut opts = UriOptions::default();
    let mut rest = args.iter();
    while let Some(&word) = rest.next() {
        match word {
            "whole" => opts.whole = true,
            "path-only" => opts.path_only = true,
            "len" | "depth" => {
                let value = rest.next().copied().unwrap_or("");
                let n = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        format!(
                            "'balance uri': '{word}' expects a positive integer (got '{value}')"
                        )
                    })?;
                if word == "len" {
                    opts.len = Some(n);
                } else {
                    opts.depth = Some(n);
                }
            }
            other => {
                return Err(format!(
                    "'balance uri' only accepts 'whole', 'len <n>', 'depth <n>' and 'path-only' \
                     (got '{other}')"
                ));
            }
        }
    }
    Ok(opts)
}

fn parse_url_param(args: &[&str]) -> Result<Algorithm, String> {
    let Some((&name, rest)) = args.split_first() else {
        return Err("'balance url_param' expects a URL parameter name".to_string());
    };
    if name.is_empty() {
        return Err("'balance url_param' expects a URL parameter name".to_string());
    }
    let check_post = match rest.first() {
        None => false,
        // Whatever follows `check_post` (formerly <max_wait>) is ignored, as in HAProxy.
        Some(&"check_post") => true,
        Some(other) => {
            return Err(format!(
                "'balance url_param' only accepts the 'check_post' modifier (got '{other}')"
            ));
        }
    };
    Ok(Algorithm::UrlParam {
        name: name.to_string(),
        check_post,
    })
}

fn parse_hdr(word: &str, args: &[&str]) -> Result<Algorithm, String> {
    let name = word
        .strip_prefix("hdr(")
        .and_then(|inner| inner.strip_suffix(')'))
        .filter(|name| !name.is_empty() && !name.contains([' ', '\t', '(', ')']))
        .ok_or_else(|| {
            format!("'balance hdr' expects a header name in parentheses, as in 'hdr(host)' (got '{word}')")
        })?;
    let use_domain_only = match args.first() {
        None => false,
        Some(&"use_domain_only") => true,
        Some(other) => {
            return Err(format!(
                "'balance {word}' only accepts the 'use_domain_only' modifier (got '{other}')"
            ));
        }
    };
    Ok(Algorithm::Hdr {
        name: name.to_string(),
        use_domain_only,
    })
}

fn parse_random(word: &str) -> Result<Algorithm, String> {
    let Some(inner) = word.strip_prefix("random(") else {
        return Ok(Algorithm::Random {
            draws: DEFAULT_RANDOM_DRAWS,
        });
    };
    let Some(number) = inner.strip_suffix(')') else {
        return Err(format!(
            "'balance random': expects 'random(<draws>)' with a closing parenthesis (got '{word}')"
        ));
    };
    if number.is_empty() {
        return Ok(Algorithm::Random {
            draws: DEFAULT_RANDOM_DRAWS,
        });
    }
    let digits = number.strip_prefix('+').unwrap_or(number);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "'balance random': the number of draws must be a positive integer (got '{number}')"
        ));
    }
    match digits.parse::<u32>() {
        Ok(0) => Err(format!(
            "'balance random': the number of draws must be at least 1 (got '{number}')"
        )),
        Ok(draws) => Ok(Algorithm::Random { draws }),
        Err(_) => Err(format!(
            "'balance random': the number of draws is too large (got '{number}')"
        )),
    }
}

/// Parses the arguments of a `hash-type` line (the words after `hash-type`):
/// `<method> [<function> [avalanche]]`, e.g. `["consistent"]`, `["map-based", "crc32",
/// "avalanche"]`.
///
/// Refuses a missing or unknown method, an unknown function (including a modifier given without a
/// function, which HAProxy refuses too) and an unknown modifier. Words after the modifier are
/// ignored, as HAProxy does.
pub fn parse_hash_type(words: &[&str]) -> Result<HashType, String> {
    let method = match words.first() {
        Some(&"map-based") => HashMethod::MapBased,
        Some(&"consistent") => HashMethod::Consistent,
        Some(other) => {
            return Err(format!(
                "'hash-type' expects 'map-based' or 'consistent' (got '{other}')"
            ));
        }
        None => return Err("'hash-type' expects 'map-based' or 'consistent'".to_string()),
    };
    let Some(&function) = words.get(1) else {
        return Ok(HashType {
            method,
            function: HashFunction::Sdbm,
            avalanche: method == HashMethod::Consistent,
        });
    };
    let function = match function {
        "sdbm" => HashFunction::Sdbm,
        "djb2" => HashFunction::Djb2,
        "wt6" => HashFunction::Wt6,
        "crc32" => HashFunction::Crc32,
        "none" => HashFunction::None,
        other => {
            return Err(format!(
                "'hash-type' expects a hash function among 'sdbm', 'djb2', 'wt6', 'crc32' and \
                 'none' (got '{other}')"
            ));
        }
    };
    let avalanche = match words.get(2) {
        None => false,
        Some(&"avalanche") => true,
        Some(other) => {
            return Err(format!(
                "'hash-type' only accepts 'avalanche' as a modifier (got '{other}')"
            ));
        }
    };
    Ok(HashType {
        method,
        function,
        avalanche,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ok(words: &[&str]) -> Algorithm {
        parse_balance(words).unwrap()
    }

    fn err(words: &[&str]) -> String {
        parse_balance(words).unwrap_err()
    }

    #[test]
    fn simple_algorithms() {
        assert_eq!(ok(&["roundrobin"]), Algorithm::RoundRobin);
        assert_eq!(ok(&["static-rr"]), Algorithm::StaticRr);
        assert_eq!(ok(&["leastconn"]), Algorithm::LeastConn);
        assert_eq!(ok(&["first"]), Algorithm::First);
        assert_eq!(ok(&["source"]), Algorithm::Source);
        // HAProxy ignores extra words after these.
        assert_eq!(ok(&["roundrobin", "foo"]), Algorithm::RoundRobin);
        assert_eq!(ok(&["source", "x"]), Algorithm::Source);
    }

    #[test]
    fn uri_options() {
        assert_eq!(ok(&["uri"]), Algorithm::Uri(UriOptions::default()));
        assert_eq!(
            ok(&["uri", "whole", "depth", "3"]),
            Algorithm::Uri(UriOptions {
                whole: true,
                depth: Some(3),
                ..UriOptions::default()
            })
        );
        assert_eq!(
            ok(&["uri", "path-only", "depth", "2", "len", "10", "whole"]),
            Algorithm::Uri(UriOptions {
                whole: true,
                len: Some(10),
                depth: Some(2),
                path_only: true,
            })
        );
        assert_eq!(
            err(&["uri", "depth", "0"]),
            "'balance uri': 'depth' expects a positive integer (got '0')"
        );
        assert_eq!(
            err(&["uri", "len"]),
            "'balance uri': 'len' expects a positive integer (got '')"
        );
        assert!(err(&["uri", "len", "3x"]).contains("got '3x'"));
        assert!(err(&["uri", "depth", "-1"]).contains("got '-1'"));
        assert!(err(&["uri", "foo"]).contains("(got 'foo')"));
    }

    #[test]
    fn url_param() {
        assert_eq!(
            ok(&["url_param", "userid"]),
            Algorithm::UrlParam {
                name: "userid".into(),
                check_post: false
            }
        );
        let with_post = Algorithm::UrlParam {
            name: "session_id".into(),
            check_post: true,
        };
        assert_eq!(
            ok(&["url_param", "session_id", "check_post", "64"]),
            with_post
        );
        assert_eq!(ok(&["url_param", "session_id", "check_post"]), with_post);
        assert_eq!(
            err(&["url_param"]),
            "'balance url_param' expects a URL parameter name"
        );
        assert_eq!(
            err(&["url_param", "a", "b"]),
            "'balance url_param' only accepts the 'check_post' modifier (got 'b')"
        );
    }

    #[test]
    fn hdr() {
        assert_eq!(
            ok(&["hdr(host)"]),
            Algorithm::Hdr {
                name: "host".into(),
                use_domain_only: false
            }
        );
        assert_eq!(
            ok(&["hdr(Host)", "use_domain_only"]),
            Algorithm::Hdr {
                name: "Host".into(),
                use_domain_only: true
            }
        );
        assert!(err(&["hdr()"]).contains("expects a header name"));
        assert!(err(&["hdr"]).contains("expects a header name"));
        assert!(err(&["hdr(host"]).contains("expects a header name"));
        assert!(err(&["hdr(host)", "foo"]).contains("(got 'foo')"));
    }

    #[test]
    fn random() {
        assert_eq!(ok(&["random"]), Algorithm::Random { draws: 2 });
        assert_eq!(ok(&["random()"]), Algorithm::Random { draws: 2 });
        assert_eq!(ok(&["random(1)"]), Algorithm::Random { draws: 1 });
        assert_eq!(ok(&["random(+3)"]), Algorithm::Random { draws: 3 });
        assert_eq!(
            err(&["random(0)"]),
            "'balance random': the number of draws must be at least 1 (got '0')"
        );
        assert!(err(&["random(-1)"]).contains("positive integer"));
        assert!(err(&["random(x)"]).contains("(got 'x')"));
        assert!(err(&["random(2"]).contains("closing parenthesis"));
        assert!(err(&["random(99999999999)"]).contains("too large"));
    }

    #[test]
    fn hash_expression() {
        assert_eq!(
            ok(&["hash", "req.cookie(clientid)"]),
            Algorithm::Hash("req.cookie(clientid)".into())
        );
        assert_eq!(err(&["hash"]), "'balance hash' expects a sample expression");
        assert!(err(&["hash", "a", "extra"]).contains("'extra'"));
    }

    #[test]
    fn rdp_cookie_hashes_mstshash_unless_named() {
        assert_eq!(ok(&["rdp-cookie"]), Algorithm::RdpCookie("mstshash".into()));
        assert_eq!(
            ok(&["rdp-cookie(user)"]),
            Algorithm::RdpCookie("user".into())
        );
        assert!(ok(&["rdp-cookie"]).uses_key() && ok(&["rdp-cookie"]).is_deterministic());
    }

    #[test]
    fn refused_algorithms() {
        assert!(err(&["foo"]).starts_with("unknown balance algorithm 'foo'"));
        // Keywords are case-sensitive, as in HAProxy.
        assert!(err(&["Roundrobin"]).starts_with("unknown balance algorithm"));
        assert!(err(&["rdp-cookie()"]).contains("expects a cookie name"));
        assert!(err(&["log-hash", "x"]).contains("not supported by Sluice"));
        // Not refused: `balance` alone is round robin.
        assert!(matches!(ok(&[]), Algorithm::RoundRobin));
    }

    #[test]
    fn algorithm_properties() {
        assert!(ok(&["source"]).uses_key());
        assert!(!ok(&["random"]).uses_key());
        assert!(ok(&["uri"]).needs_http());
        assert!(!ok(&["hash", "src"]).needs_http());
        assert_eq!(ok(&["hdr(a)"]).keyword(), "hdr");
    }

    #[test]
    fn hash_types() {
        assert_eq!(
            HashType::default(),
            parse_hash_type(&["map-based"]).unwrap()
        );
        assert_eq!(
            parse_hash_type(&["consistent"]).unwrap(),
            HashType {
                method: HashMethod::Consistent,
                function: HashFunction::Sdbm,
                avalanche: true
            }
        );
        assert_eq!(
            parse_hash_type(&["consistent", "sdbm"]).unwrap(),
            HashType {
                method: HashMethod::Consistent,
                function: HashFunction::Sdbm,
                avalanche: false
            }
        );
        assert_eq!(
            parse_hash_type(&["map-based", "crc32", "avalanche", "extra"]).unwrap(),
            HashType {
                method: HashMethod::MapBased,
                function: HashFunction::Crc32,
                avalanche: true
            }
        );
        assert_eq!(
            parse_hash_type(&["consistent", "none"]).unwrap().function,
            HashFunction::None
        );
        assert_eq!(
            parse_hash_type(&["foo"]).unwrap_err(),
            "'hash-type' expects 'map-based' or 'consistent' (got 'foo')"
        );
        assert!(parse_hash_type(&[]).is_err());
        assert!(
            parse_hash_type(&["map-based", "avalanche"])
                .unwrap_err()
                .contains("(got 'avalanche')")
        );
        assert_eq!(
            parse_hash_type(&["map-based", "sdbm", "foo"]).unwrap_err(),
            "'hash-type' only accepts 'avalanche' as a modifier (got 'foo')"
        );
    }
}
