//! The RFC 7239 converters (configuration.txt §7.3.1): `rfc7239_is_valid` (is the input a
//! valid `forwarded` element), `rfc7239_field(<param>)` (the value of `proto`, `host`, `for`
//! or `by`, without quotes), `rfc7239_n2nn` and `rfc7239_n2np` (a node's name, as an address
//! or the `unknown`/`_identifier` string, and its port, as an integer or `_identifier`). The
//! grammar is `sluice_http::rfc7239`'s, which `option forwarded` also uses.

use super::{Built, ConvBuild, Convert, into_bytes};
use crate::context::Context;
use crate::value::{Sample, SampleType};
use sluice_http::rfc7239::{self, NodeName, NodePort, Param};
use std::borrow::Cow;
use std::net::IpAddr;

/// A compiled RFC 7239 converter.
#[derive(Debug)]
pub(super) enum Rfc7239 {
    /// `rfc7239_is_valid`.
    IsValid,
    /// `rfc7239_field(<param>)`.
    Field(Param),
    /// `rfc7239_n2nn`.
    NodeName,
    /// `rfc7239_n2np`.
    NodePort,
}

pub(super) fn build(b: &ConvBuild<'_>) -> Result<Built, String> {
    let (conv, out) = match b.name {
        "rfc7239_is_valid" => (Rfc7239::IsValid, SampleType::Bool),
        "rfc7239_field" => {
            let name = b.args.first().map(String::as_str).unwrap_or_default();
            let param = Param::named(name).ok_or_else(|| {
                format!("unknown field '{name}' (expects 'proto', 'host', 'for' or 'by')")
            })?;
            (Rfc7239::Field(param), SampleType::Str)
        }
        // An address, or a string (`unknown`, `_identifier`): declared as a string, which
        // every type casts to.
        "rfc7239_n2nn" => (Rfc7239::NodeName, SampleType::Str),
        // An integer, or an `_identifier` string.
        _ => (Rfc7239::NodePort, SampleType::Str),
    };
    Built::new(conv, out)
}

impl Convert for Rfc7239 {
    fn convert<'a>(&'a self, input: Sample<'a>, _ctx: &'a dyn Context) -> Option<Sample<'a>> {
        let bytes = into_bytes(input)?;
        match self {
            Rfc7239::IsValid => Some(Sample::Bool(rfc7239::valid_element(&bytes))),
            Rfc7239::Field(param) => {
                let value = rfc7239::parse_element(&bytes)?.get(*param)?;
                Some(Sample::Str(Cow::Owned(value.to_vec())))
            }
            Rfc7239::NodeName => {
                let (name, _) = rfc7239::parse_node(&bytes)?;
                Some(match name {
                    NodeName::Ipv4(ip) => Sample::Ip(IpAddr::V4(ip)),
                    NodeName::Ipv6(ip) => Sample::Ip(IpAddr::V6(ip)),
                    NodeName::Unknown => Sample::Str(Cow::Borrowed(b"unknown")),
                    NodeName::Obfuscated => {
                        let n = 1 + rfc7239::obfuscated_len(&bytes[1..]);
                        Sample::Str(Cow::Owned(bytes[..n].to_vec()))
                    }
                })
            }
            Rfc7239::NodePort => match rfc7239::parse_node(&bytes)?.1? {
                NodePort::Number(port) => Some(Sample::Int(i64::from(port))),
                NodePort::Obfuscated(id) => Some(Sample::Str(Cow::Owned(id.to_vec()))),
            },
        }
    }
}
