//! Layer-4 fetches (configuration.txt §7.3.3): the client connection's addresses and ports
//! (the stream's, which `set-src`/`set-dst` change, and the connection's own, `fc_*`), the
//! server connection's (`bc_src`, `bc_dst` and their ports, and its error: `bc_err`,
//! `bc_err_str`), whether
//! they belong to this machine (`src_is_local`...), the names and numbers (`id`) of the
//! frontend, its listening socket (`so_id`, `so_name`) and the connections open on it
//! (`dst_conn`), what the kernel measures of the client's TCP connection (`fc_rtt`...), the
//! backend and server handling the
//! stream and their timeouts, the error that ended the connection (`fc_err`, `fc_err_str`,
//! for `error-log-format`), and what the client's PROXY protocol header said
//! (`fc_rcvd_proxy`, `fc_pp_authority`, `fc_pp_unique_id`).
//!
//! Addresses exist from the first `tcp-request connection` rule on; the backend's name
//! from the backend's own rules on, the server's once one is chosen ([`Source`]).

use std::net::SocketAddr;

use super::{Fetch, FetchDef, Sink, emit};
use crate::context::{Context, ProxyTlv, TcpMeasure, TimeoutFetch};
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
    /// `fc_src`.
    ConnectionSrc,
    /// `fc_src_port`.
    ConnectionSrcPort,
    /// `fc_dst`.
    ConnectionDst,
    /// `fc_dst_port`.
    ConnectionDstPort,
    /// `src_is_local`, `fc_src_is_local`: for the stream's or the connection's address.
    SrcIsLocal { connection: bool },
    /// `dst_is_local`, `fc_dst_is_local`.
    DstIsLocal { connection: bool },
    /// `bc_src`: the server connection's own address.
    ServerConnectionSrc,
    /// `bc_src_port`.
    ServerConnectionSrcPort,
    /// `bc_dst`: the server's address, as the server connection reaches it.
    ServerConnectionDst,
    /// `bc_dst_port`.
    ServerConnectionDstPort,
    /// `bc_err`, `bc_err_str`: the server connection's error, none (0, "Success") once it
    /// is made, as HAProxy 2.6 gives them; nothing before, or when it could not be made.
    ServerConnectionError { text: bool },
    /// `fe_name`.
    FrontendName,
    /// `fe_defbe`.
    FrontendDefaultBackend,
    /// `so_id`.
    SocketId,
    /// `so_name`.
    SocketName,
    /// `dst_conn`: the connections open on that socket.
    SocketConnections,
    /// `fc_rtt`, `fc_rttvar` (in milliseconds unless `micros`), `fc_unacked`...: what the
    /// kernel measures of the client's TCP connection.
    ClientTcp { which: TcpMeasure, micros: bool },
    /// `be_name`.
    BackendName,
    /// `srv_name`.
    ServerName,
    /// `bc_http_major`: the server connection's HTTP encoding, 1 (HTTP/1.x, which Sluice
    /// speaks to servers).
    ServerHttpMajor,
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
    /// `fe_client_timeout`, `be_server_timeout`, `cur_server_timeout` and the other
    /// `fe_*_timeout`, `be_*_timeout` and `cur_*_timeout`.
    Timeout(TimeoutFetch),
    /// `be_max_retries`, `cur_max_retries` (no rule changes them in Sluice: the same).
    MaxRetries,
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
            Conn::ConnectionSrc => ip(ctx.connection_src()),
            Conn::ConnectionSrcPort => port(ctx.connection_src()),
            Conn::ConnectionDst => ip(ctx.connection_dst()),
            Conn::ConnectionDstPort => port(ctx.connection_dst()),
            Conn::ServerConnectionSrc => ip(ctx.server_connection_src()),
            Conn::ServerConnectionSrcPort => port(ctx.server_connection_src()),
            Conn::ServerConnectionDst => ip(ctx.server_connection_dst()),
            Conn::ServerConnectionDstPort => port(ctx.server_connection_dst()),
            Conn::ServerConnectionError { text } => {
                ctx.server_connection_made().then(|| match text {
                    true => name("Success"),
                    false => Sample::Int(0),
                })
            }
            Conn::SrcIsLocal { connection } => {
                let addr = if connection {
                    ctx.connection_src()
                } else {
                    ctx.src()
                };
                is_local(addr).map(Sample::Bool)
            }
            Conn::DstIsLocal { connection } => {
                let addr = if connection {
                    ctx.connection_dst()
                } else {
                    ctx.dst()
                };
                is_local(addr).map(Sample::Bool)
            }
            Conn::FrontendName => Some(name(ctx.frontend_name())),
            Conn::FrontendDefaultBackend => ctx.frontend_default_backend().map(name),
            Conn::SocketId => ctx.socket_id().map(Sample::Int),
            Conn::SocketName => ctx.socket_name().map(name),
            Conn::SocketConnections => ctx.socket_connections().map(Sample::Int),
            Conn::ClientTcp { which, micros } => ctx
                .client_tcp(which)
                .map(|v| Sample::Int(if micros { v } else { v / 1000 })),
            // Until a backend is chosen, the stream's backend is its frontend (§7.3.3
            // "be_name").
            Conn::BackendName => Some(name(ctx.backend_name().unwrap_or(ctx.frontend_name()))),
            Conn::ServerName => ctx.server_name().map(name),
            Conn::ServerHttpMajor => ctx.server_name().map(|_| Sample::Int(1)),
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
            Conn::Timeout(which) => ctx.timeout_ms(which).map(Sample::Int),
            Conn::MaxRetries => ctx.max_retries().map(Sample::Int),
        };
        emit(value, out)
    }
}

/// Whether `addr` is one of this machine's addresses: a socket can be bound to it, as
/// HAProxy tests it (a few system calls: its manual advises one test per connection). A
/// unix socket's peer (no address) is local. `None` when the test itself fails for another
/// reason than an address that is not here.
fn is_local(addr: Option<SocketAddr>) -> Option<bool> {
    let Some(mut addr) = addr else {
        return Some(true);
    };
    // Port 0, the scope of a link-local IPv6 address kept.
    addr.set_port(0);
    match std::net::UdpSocket::bind(addr) {
        Ok(_) => Some(true),
        Err(err) if err.kind() == std::io::ErrorKind::AddrNotAvailable => Some(false),
        Err(_) => None,
    }
}

fn error(ctx: &dyn Context) -> Option<(u8, &'static str)> {
    ctx.log_facts().and_then(|f| f.connection_error())
}

fn build(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let tcp = |which| Conn::ClientTcp {
        which,
        micros: true,
    };
    let conn = match def.name {
        "fc_rtt" | "fc_rttvar" => {
            let micros = match args.first().map(String::as_str) {
                None | Some("" | "ms") => false,
                Some("us") => true,
                Some(other) => {
                    return Err(format!(
                        "invalid time unit '{other}' (expected 'ms' or 'us')"
                    ));
                }
            };
            let which = if def.name == "fc_rtt" {
                TcpMeasure::RttMicros
            } else {
                TcpMeasure::RttVarMicros
            };
            Conn::ClientTcp { which, micros }
        }
        "fc_unacked" => tcp(TcpMeasure::Unacked),
        "fc_sacked" => tcp(TcpMeasure::Sacked),
        "fc_retrans" => tcp(TcpMeasure::Retransmitted),
        "fc_fackets" => tcp(TcpMeasure::ForwardAcked),
        "fc_lost" => tcp(TcpMeasure::Lost),
        "fc_reordering" => tcp(TcpMeasure::Reordering),
        "src" => Conn::Src,
        "src_port" => Conn::SrcPort,
        "dst" => Conn::Dst,
        "dst_port" => Conn::DstPort,
        "fc_src" => Conn::ConnectionSrc,
        "fc_src_port" => Conn::ConnectionSrcPort,
        "fc_dst" => Conn::ConnectionDst,
        "fc_dst_port" => Conn::ConnectionDstPort,
        "bc_src" => Conn::ServerConnectionSrc,
        "bc_src_port" => Conn::ServerConnectionSrcPort,
        "bc_dst" => Conn::ServerConnectionDst,
        "bc_dst_port" => Conn::ServerConnectionDstPort,
        "bc_err" => Conn::ServerConnectionError { text: false },
        "bc_err_str" => Conn::ServerConnectionError { text: true },
        "src_is_local" => Conn::SrcIsLocal { connection: false },
        "fc_src_is_local" => Conn::SrcIsLocal { connection: true },
        "dst_is_local" => Conn::DstIsLocal { connection: false },
        "fc_dst_is_local" => Conn::DstIsLocal { connection: true },
        "fe_name" => Conn::FrontendName,
        "fe_defbe" => Conn::FrontendDefaultBackend,
        "so_id" => Conn::SocketId,
        "so_name" => Conn::SocketName,
        "dst_conn" => Conn::SocketConnections,
        "be_name" => Conn::BackendName,
        "fe_id" => Conn::FrontendId,
        "be_id" => Conn::BackendId,
        "srv_id" => Conn::ServerId,
        "bc_http_major" => Conn::ServerHttpMajor,
        "fc_err" => Conn::ErrorCode,
        "fc_err_str" => Conn::ErrorText,
        "fc_rcvd_proxy" => Conn::ReceivedProxy,
        "fc_pp_authority" => Conn::ProxyTlv(ProxyTlv::Authority),
        "fc_pp_unique_id" => Conn::ProxyTlv(ProxyTlv::UniqueId),
        "fe_client_timeout" => Conn::Timeout(TimeoutFetch::FrontendClient),
        "be_server_timeout" => Conn::Timeout(TimeoutFetch::BackendServer),
        "be_tunnel_timeout" => Conn::Timeout(TimeoutFetch::BackendTunnel),
        "cur_server_timeout" => Conn::Timeout(TimeoutFetch::CurrentServer),
        "cur_tunnel_timeout" => Conn::Timeout(TimeoutFetch::CurrentTunnel),
        "fe_tarpit_timeout" => Conn::Timeout(TimeoutFetch::FrontendTarpit),
        "be_connect_timeout" => Conn::Timeout(TimeoutFetch::BackendConnect),
        "be_queue_timeout" => Conn::Timeout(TimeoutFetch::BackendQueue),
        "be_tarpit_timeout" => Conn::Timeout(TimeoutFetch::BackendTarpit),
        "cur_client_timeout" => Conn::Timeout(TimeoutFetch::CurrentClient),
        "cur_connect_timeout" => Conn::Timeout(TimeoutFetch::CurrentConnect),
        "cur_queue_timeout" => Conn::Timeout(TimeoutFetch::CurrentQueue),
        "cur_tarpit_timeout" => Conn::Timeout(TimeoutFetch::CurrentTarpit),
        "be_max_retries" | "cur_max_retries" => Conn::MaxRetries,
        _ => Conn::ServerName,
    };
    Ok(Fetch::Conn(conn))
}

macro_rules! def {
    ($name:literal, $out:ident, $source:ident) => {
        def!($name, 0, $out, $source)
    };
    ($name:literal, $max_args:literal, $out:ident, $source:ident) => {
        FetchDef {
            name: $name,
            min_args: 0,
            max_args: $max_args,
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
    def!("fc_src", Ip, ClientAddress),
    def!("fc_src_port", Int, ClientAddress),
    def!("fc_dst", Ip, ClientAddress),
    def!("fc_dst_port", Int, ClientAddress),
    def!("bc_src", Ip, ServerConnection),
    def!("bc_src_port", Int, ServerConnection),
    def!("bc_dst", Ip, ServerConnection),
    def!("bc_dst_port", Int, ServerConnection),
    def!("bc_err", Int, ServerConnection),
    def!("bc_err_str", Str, ServerConnection),
    def!("src_is_local", Bool, ClientAddress),
    def!("fc_src_is_local", Bool, ClientAddress),
    def!("dst_is_local", Bool, ClientAddress),
    def!("fc_dst_is_local", Bool, ClientAddress),
    def!("fe_name", Str, ClientAddress),
    def!("fe_defbe", Str, ClientAddress),
    def!("so_id", Int, ClientAddress),
    def!("so_name", Str, ClientAddress),
    def!("dst_conn", Int, ClientAddress),
    def!("fc_rtt", 1, Int, ClientAddress),
    def!("fc_rttvar", 1, Int, ClientAddress),
    def!("fc_unacked", Int, ClientAddress),
    def!("fc_sacked", Int, ClientAddress),
    def!("fc_retrans", Int, ClientAddress),
    def!("fc_fackets", Int, ClientAddress),
    def!("fc_lost", Int, ClientAddress),
    def!("fc_reordering", Int, ClientAddress),
    def!("be_name", Str, Backend),
    def!("srv_name", Str, Server),
    def!("fe_id", Int, ClientAddress),
    def!("be_id", Int, Backend),
    def!("srv_id", Int, Server),
    def!("bc_http_major", Int, Server),
    def!("fc_err", Int, ClientAddress),
    def!("fc_err_str", Str, ClientAddress),
    def!("fc_rcvd_proxy", Bool, ClientAddress),
    def!("fc_pp_authority", Str, ClientAddress),
    def!("fc_pp_unique_id", Str, ClientAddress),
    def!("fe_client_timeout", Int, ClientAddress),
    def!("be_server_timeout", Int, Backend),
    def!("be_tunnel_timeout", Int, Backend),
    def!("cur_server_timeout", Int, Backend),
    def!("cur_tunnel_timeout", Int, Backend),
    def!("fe_tarpit_timeout", Int, ClientAddress),
    def!("be_connect_timeout", Int, Backend),
    def!("be_queue_timeout", Int, Backend),
    def!("be_tarpit_timeout", Int, Backend),
    def!("cur_client_timeout", Int, ClientAddress),
    def!("cur_connect_timeout", Int, Backend),
    def!("cur_queue_timeout", Int, Backend),
    def!("cur_tarpit_timeout", Int, ClientAddress),
    def!("be_max_retries", Int, Backend),
    def!("cur_max_retries", Int, Backend),
];
