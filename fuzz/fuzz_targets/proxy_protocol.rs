//! The PROXY protocol header a client (or a load balancer in front) sends first. A header
//! the parser accepts must fit the input and give both addresses or neither, its records must
//! be readable, and the addresses must survive our own v1 and v2 encodings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_net::proxy_protocol::{Parse, SentTlvs, encode_v1, encode_v2, parse, received_tlvs};

fuzz_target!(|data: &[u8]| {
    let Parse::Parsed {
        header_len,
        source,
        destination,
    } = parse(data)
    else {
        return;
    };
    assert!(header_len <= data.len());
    assert_eq!(source.is_some(), destination.is_some());
    received_tlvs(&data[..header_len]);
    let (Some(source), Some(destination)) = (source, destination) else {
        return;
    };
    if source.is_ipv4() != destination.is_ipv4() {
        return;
    }
    for version in [1, 2] {
        let mut out = Vec::new();
        if version == 1 {
            encode_v1(Some(source), Some(destination), &mut out);
        } else {
            encode_v2(Some(source), Some(destination), &SentTlvs::NONE, &mut out);
        }
        match parse(&out) {
            Parse::Parsed {
                header_len,
                source: s,
                destination: d,
            } => {
                assert_eq!(header_len, out.len());
                assert_eq!((s, d), (Some(source), Some(destination)), "v{version}");
            }
            other => panic!("our v{version} header is refused: {other:?}"),
        }
    }
});
