//! Authentication fetches (configuration.txt §7.3.6): `http_auth(list)`,
//! `http_auth_group(list)`, `http_auth_user`, `http_auth_pass`, `http_auth_type` and
//! `http_auth_bearer([field])`.
//!
//! They read the request's `Authorization` field (the last one, as HAProxy does), or its
//! `Proxy-Authorization` field when the frontend takes proxied requests' credentials from
//! there (`option http-use-proxy-header`, [`Context::proxy_credentials`]). The two
//! that check credentials name a `userlist`, resolved when the expression is compiled
//! ([`Auth::resolve`]) so that an unknown list is a configuration error. As a sample,
//! `http_auth_group` is the user's name; when an ACL iterates over it, it yields the
//! user's groups instead, which is how `acl admins http_auth_group(L) G1 G2` "belongs to
//! one of the groups" matching works with the ordinary string matcher.

use std::sync::Arc;

use sluice_http::header_values;

use super::{Fetch, FetchDef, Sink, emit};
use crate::args::str_arg;
use crate::auth::{Userlist, auth_scheme, basic_credentials};
use crate::context::Context;
use crate::map::MapStore;
use crate::stages::Source;
use crate::value::{Sample, SampleType};

/// A compiled authentication fetch.
#[derive(Clone, Debug)]
pub(crate) enum Auth {
    /// `http_auth(list)` (`group` false) and `http_auth_group(list)` (`group` true); `list`
    /// is filled by [`Auth::resolve`].
    Check {
        name: String,
        list: Option<Arc<Userlist>>,
        group: bool,
    },
    /// `http_auth_user`.
    User,
    /// `http_auth_pass`.
    Pass,
    /// `http_auth_type`.
    Type,
    /// `http_auth_bearer([field])`; without a field, the credentials' usual one.
    Bearer { field: Option<String> },
}

impl Auth {
    /// Finds the user list a checking fetch names.
    pub fn resolve(&mut self, maps: &MapStore) -> Result<(), String> {
        if let Auth::Check { name, list, .. } = self {
            let found = maps
                .userlist(name)
                .ok_or_else(|| format!("unable to find userlist '{name}'"))?;
            *list = Some(found);
        }
        Ok(())
    }

    pub fn run<'a>(&'a self, ctx: &'a dyn Context, all: bool, out: Sink<'_, 'a>) -> bool {
        let field = match self {
            Auth::Bearer { field: Some(field) } => field.as_str(),
            _ if ctx.proxy_credentials() => "proxy-authorization",
            _ => "authorization",
        };
        let Some(value) = ctx
            .request()
            .and_then(|(buf, head)| header_values(buf, &head.headers, field).last())
        else {
            return false;
        };
        match self {
            Auth::Check { list, group, .. } => {
                let Some(list) = list else {
                    return false;
                };
                let user = basic_credentials(value).and_then(|(u, p)| list.authenticate(&u, &p));
                match (user, group) {
                    (None, false) => emit(Some(Sample::Bool(false)), out),
                    (None, true) => false,
                    (Some(_), false) => emit(Some(Sample::Bool(true)), out),
                    (Some(user), true) if all => {
                        for g in &user.groups {
                            if out(Sample::str(g.as_bytes())) {
                                return true;
                            }
                        }
                        false
                    }
                    (Some(user), true) => emit(Some(Sample::str(user.name.as_bytes())), out),
                }
            }
            Auth::User | Auth::Pass => {
                let value = basic_credentials(value).map(|(u, p)| {
                    Sample::owned_str(if matches!(self, Auth::User) { u } else { p })
                });
                emit(value, out)
            }
            Auth::Type => emit(auth_scheme(value).map(|(s, _)| Sample::str(s)), out),
            Auth::Bearer { .. } => {
                let token = auth_scheme(value)
                    .filter(|(s, _)| s.eq_ignore_ascii_case(b"bearer"))
                    .map(|(_, t)| Sample::str(t));
                emit(token, out)
            }
        }
    }
}

fn build(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let arg = str_arg(args, 0).unwrap_or("");
    let auth = match def.name {
        "http_auth" | "http_auth_group" => {
            if arg.is_empty() {
                return Err("expects the name of a userlist".to_owned());
            }
            Auth::Check {
                name: arg.to_owned(),
                list: None,
                group: def.name == "http_auth_group",
            }
        }
        "http_auth_user" => Auth::User,
        "http_auth_pass" => Auth::Pass,
        "http_auth_type" => Auth::Type,
        _ => Auth::Bearer {
            field: (!arg.is_empty()).then(|| arg.to_owned()),
        },
    };
    Ok(Fetch::Auth(auth))
}

macro_rules! def {
    ($name:literal, $min:literal, $max:literal, $out:ident) => {
        FetchDef {
            name: $name,
            min_args: $min,
            max_args: $max,
            out: SampleType::$out,
            source: Source::RequestHeaders,
            build,
        }
    };
}

pub(crate) static FETCHES: &[FetchDef] = &[
    def!("http_auth", 1, 1, Bool),
    def!("http_auth_group", 1, 1, Str),
    def!("http_auth_user", 0, 0, Str),
    def!("http_auth_pass", 0, 0, Str),
    def!("http_auth_type", 0, 0, Str),
    def!("http_auth_bearer", 0, 1, Str),
];
