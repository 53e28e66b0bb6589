//! The TLS fetches of configuration.txt §7.3.4 (`ssl_fc`, `ssl_fc_sni`, `ssl_c_used`...),
//! answered for the clear connections Sluice handles (it terminates no TLS).
//!
//! As HAProxy answers them on a connection without TLS: `ssl_fc`, `ssl_fc_has_sni` and
//! `ssl_fc_is_resumed` are false, `ssl_bc` and `ssl_bc_is_resumed` are false once a server
//! connection exists, and the fetches that describe a
//! TLS session (its protocol, cipher, SNI, ALPN, client certificate...) have no value. So
//! `http-request redirect scheme https unless { ssl_fc }`, the most common of them, works.

use super::{Fetch, FetchDef, Sink, emit};
use crate::context::Context;
use crate::stages::Source;
use crate::value::{Sample, SampleType};

/// A compiled TLS fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tls {
    /// A boolean that is false without TLS (`ssl_fc`, `ssl_fc_is_resumed`, `ssl_bc`...).
    False,
    /// A property of a TLS session: no value without one.
    Absent,
}

impl Tls {
    pub fn run<'a>(self, _ctx: &'a dyn Context, out: Sink<'_, 'a>) -> bool {
        match self {
            Tls::False => emit(Some(Sample::Bool(false)), out),
            Tls::Absent => false,
        }
    }
}

fn build(def: &FetchDef, _args: &[String]) -> Result<Fetch, String> {
    let falsy = matches!(
        def.name,
        "ssl_fc" | "ssl_fc_has_sni" | "ssl_fc_is_resumed" | "ssl_bc" | "ssl_bc_is_resumed"
    );
    Ok(Fetch::Tls(if falsy { Tls::False } else { Tls::Absent }))
}

pub(crate) static FETCHES: &[FetchDef] = &[
    fetch_def!("ssl_fc", 0, 0, Bool, ClientAddress),
    fetch_def!("ssl_fc_has_sni", 0, 0, Bool, ClientAddress),
    fetch_def!("ssl_fc_has_crt", 0, 0, Bool, ClientAddress),
    fetch_def!("ssl_fc_sni", 0, 0, Str, ClientAddress),
    fetch_def!("ssl_fc_protocol", 0, 0, Str, ClientAddress),
    fetch_def!("ssl_fc_cipher", 0, 0, Str, ClientAddress),
    fetch_def!("ssl_fc_alpn", 0, 0, Str, ClientAddress),
    fetch_def!("ssl_fc_npn", 0, 0, Str, ClientAddress),
    fetch_def!("ssl_fc_use_keysize", 0, 0, Int, ClientAddress),
    fetch_def!("ssl_fc_alg_keysize", 0, 0, Int, ClientAddress),
    fetch_def!("ssl_fc_session_id", 0, 0, Bin, ClientAddress),
    fetch_def!("ssl_fc_is_resumed", 0, 0, Bool, ClientAddress),
    fetch_def!("ssl_fc_err", 0, 0, Int, ClientAddress),
    fetch_def!("ssl_fc_err_str", 0, 0, Str, ClientAddress),
    fetch_def!("ssl_fc_protocol_hello_id", 0, 0, Int, ClientAddress),
    fetch_def!("ssl_fc_client_random", 0, 0, Bin, ClientAddress),
    fetch_def!("ssl_fc_server_random", 0, 0, Bin, ClientAddress),
    fetch_def!("ssl_fc_unique_id", 0, 0, Bin, ClientAddress),
    fetch_def!("ssl_c_used", 0, 0, Bool, ClientAddress),
    fetch_def!("ssl_c_err", 0, 0, Int, ClientAddress),
    fetch_def!("ssl_c_ca_err", 0, 0, Int, ClientAddress),
    fetch_def!("ssl_c_ca_err_depth", 0, 0, Int, ClientAddress),
    fetch_def!("ssl_c_version", 0, 0, Int, ClientAddress),
    fetch_def!("ssl_c_der", 0, 0, Bin, ClientAddress),
    fetch_def!("ssl_f_version", 0, 0, Int, ClientAddress),
    fetch_def!("ssl_c_verify", 0, 0, Int, ClientAddress),
    fetch_def!("ssl_c_s_dn", 0, 3, Str, ClientAddress),
    fetch_def!("ssl_c_i_dn", 0, 3, Str, ClientAddress),
    fetch_def!("ssl_c_serial", 0, 0, Bin, ClientAddress),
    fetch_def!("ssl_c_sha1", 0, 0, Bin, ClientAddress),
    fetch_def!("ssl_c_notafter", 0, 0, Str, ClientAddress),
    fetch_def!("ssl_c_notbefore", 0, 0, Str, ClientAddress),
    fetch_def!("ssl_f_s_dn", 0, 3, Str, ClientAddress),
    fetch_def!("ssl_f_i_dn", 0, 3, Str, ClientAddress),
    fetch_def!("ssl_bc", 0, 0, Bool, Server),
    fetch_def!("ssl_bc_protocol", 0, 0, Str, Server),
    fetch_def!("ssl_bc_cipher", 0, 0, Str, Server),
    fetch_def!("ssl_bc_alpn", 0, 0, Str, Server),
    fetch_def!("ssl_bc_is_resumed", 0, 0, Bool, Server),
    fetch_def!("ssl_bc_use_keysize", 0, 0, Int, Server),
    fetch_def!("ssl_bc_err", 0, 0, Int, Server),
];
