//! Layer-4 fetches (configuration.txt §7.3.3): the client connection's addresses and ports,
//! the names and numbers (`id`) of the frontend, backend and server handling the stream, and
//! the error that ended the connection (`fc_err`, `fc_err_str`, for `error-log-format`), and
//! what the client's PROXY protocol header said (`fc_rcvd_proxy`, `fc_pp_authority`,
//! `fc_pp_unique_id`).
//!
//! Addresses exist from the first `tcp-request connection` rule on; the backend's name
//! from the backend's own rules on, the server's once one is chosen ([`Source`]).

use std::net::SocketAddr;

use super::{Fetch, FetchDef, Sink, emit};
use crate::context::{Context, ProxyTlv};
use crate::stages::Source;
use crate::value::{Sample, SampleType};

/// A compiled connection fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Conn {
    /// `src`.
    Src,
    /// `src_port`.
    SrcPort,
    /// `dst`.
    Dst,
    /// `dst_port`.
    DstPort,
    /// `fe_name`.
    FrontendName,
    /// `be_name`.
    BackendName,
    /// `srv_name`.
    ServerName,
    /// `fe_id`.
    FrontendId,
    /// `be_id`.
    BackendId,
    /// `srv_id`.
    ServerId,
    /// `fc_err`.
    ErrorCode,
    /// `fc_err_str`.
    ErrorText,
    /// `fc_rcvd_proxy`.
    ReceivedProxy,
    /// `fc_pp_authority`, `fc_pp_unique_id`.
    ProxyTlv(ProxyTlv),
}

impl Conn {
    pub fn run<'a>(&self, ctx: &'a dyn Context, out: Sink<'_, 'a>) -> bool {
        let ip = |a: Option<SocketAddr>| a.map(|a| Sample::Ip(a.ip()));
        let port = |a: Option<SocketAddr>| a.map(|a| Sample::Int(i64::from(a.port())));
        let name = |n: &'a str| Sample::str(n.as_bytes());
        let value = match *self {
            Conn::Src => ip(ctx.src()),
            Conn::SrcPort => port(ctx.src()),
            Conn::Dst => ip(ctx.dst()),
            Conn::DstPort => port(ctx.dst()),
            Conn::FrontendName => Some(name(ctx.frontend_name())),
            // Until a backend is chosen, the stream's backend is its frontend (§7.3.3
            // "be_name").
            Conn::BackendName => Some(name(ctx.backend_name().unwrap_or(ctx.frontend_name()))),
            Conn::ServerName => ctx.server_name().map(name),
            Conn::FrontendId => ctx.frontend_id().map(Sample::Int),
            // Like `be_name`: the frontend's until a backend is chosen.
            Conn::BackendId => ctx.backend_id().or(ctx.frontend_id()).map(Sample::Int),
            Conn::ServerId => ctx.server_id().map(Sample::Int),
            // A connection that became a stream had no error: 0, which HAProxy names
            // "Success".
            Conn::ErrorCode => Some(Sample::Int(
                error(ctx).map_or(0, |(code, _)| i64::from(code)),
            )),
            Conn::ErrorText => Some(name(error(ctx).map_or("Success", |(_, text)| text))),
            Conn::ReceivedProxy => Some(Sample::Bool(ctx.received_proxy())),
            Conn::ProxyTlv(tlv) => ctx.received_proxy_tlv(tlv).map(Sample::str),
        };
        emit(value, out)
    }
}

fn error(ctx: &dyn Context) -> Option<(u8, &'static str)> {
    ctx.log_facts().and_then(|f| f.connection_error())
}

fn build(def: &FetchDef, _: &[String]) -> Result<Fetch, String> {
    let conn = match def.name {
        "src" => Conn::Src,
        "src_port" => Conn::SrcPort,
        "dst" => Conn::Dst,
        "dst_port" => Conn::DstPort,
        "fe_name" => Conn::FrontendName,
        "be_name" => Conn::BackendName,
        "fe_id" => Conn::FrontendId,
        "be_id" => Conn::BackendId,
        "srv_id" => Conn::ServerId,
        "fc_err" => Conn::ErrorCode,
        "fc_err_str" => Conn::ErrorText,
        "fc_rcvd_proxy" => Conn::ReceivedProxy,
        "fc_pp_authority" => Conn::ProxyTlv(ProxyTlv::Authority),
        "fc_pp_unique_id" => Conn::ProxyTlv(ProxyTlv::UniqueId),
        _ => Conn::ServerName,
    };
    Ok(Fetch::Conn(conn))
}

macro_rules! def {
    ($name:literal, $out:ident, $source:ident) => {
        FetchDef {
            name: $name,
            min_args: 0,
            max_args: 0,
            out: SampleType::$out,
            source: Source::$source,
            build,
        }
    };
}

/// The connection fetches.
pub(super) static FETCHES: &[FetchDef] = &[
    def!("src", Ip, ClientAddress),
    def!("src_port", Int, ClientAddress),
    def!("dst", Ip, ClientAddress),
    def!("dst_port", Int, ClientAddress),
    def!("fe_name", Str, ClientAddress),
    def!("be_name", Str, Backend),
    def!("srv_name", Str, Server),
    def!("fe_id", Int, ClientAddress),
    def!("be_id", Int, Backend),
    def!("srv_id", Int, Server),
    def!("fc_err", Int, ClientAddress),
    def!("fc_err_str", Str, ClientAddress),
    def!("fc_rcvd_proxy", Bool, ClientAddress),
    def!("fc_pp_authority", Str, ClientAddress),
    def!("fc_pp_unique_id", Str, ClientAddress),
];
