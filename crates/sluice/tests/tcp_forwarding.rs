//! TCP forwarding end to end: bytes relayed both ways through a `mode tcp` proxy, half-closes
//! passed on in each direction (a client that shuts down its write side still gets the whole
//! answer; a server's end of stream reaches the client while the client can still send), a
//! multi-megabyte payload arriving intact, and the three kinds of `bind` address a test can
//! use hermetically: an inherited listening socket (`fd@N`), a unix socket path, and a unix
//! socket server address.
#![allow(clippy::unwrap_used)]

mod common;

use common::{
    Backend, Closed, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_n, read_to_close,
    sluice,
};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// A `listen` section forwarding the inherited `fe` to `server`.
fn listen(bind: &str, server: &str) -> String {
    format!("{TCP_DEFAULTS}\nlisten app\n    bind {bind}\n    server s1 {server}\n")
}

#[test]
fn echo_round_trips_through_the_proxy() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let _proxy = common::sluice(&listen(&fd_bind(&fe), &backend.addr().to_string()))
        .inherit(fe)
        .start();
    let mut c = connect(addr);
    for round in 0..3 {
        let msg = format!("hello number {round}\n");
        c.write_all(msg.as_bytes()).unwrap();
        assert_eq!(read_n(&mut c, msg.len()), msg.as_bytes());
    }
    assert_eq!(
        backend.accepted(),
        1,
        "one client connection, one server connection"
    );
}

#[test]
fn client_half_close_still_gets_the_whole_answer() {
    // The server answers only once it has seen the client's end of stream, then closes.
    let backend = Backend::start(|mut s| {
        let mut request = Vec::new();
        s.read_to_end(&mut request).unwrap();
        let answer = format!(
            "got {} bytes: {}",
            request.len(),
            String::from_utf8_lossy(&request)
        );
        s.write_all(answer.as_bytes()).unwrap();
        s.shutdown(Shutdown::Both).unwrap();
    });
    let (fe, addr) = frontend();
    let _proxy = common::sluice(&listen(&fd_bind(&fe), &backend.addr().to_string()))
        .inherit(fe)
        .start();
    let mut c = connect(addr);
    c.write_all(b"question").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    match read_to_close(&mut c, GENEROUS) {
        Closed::Eof(data) => assert_eq!(data, b"got 8 bytes: question"),
        other => panic!("expected the answer then a clean end of stream, got {other:?}"),
    }
}

#[test]
fn server_half_close_reaches_the_client_which_can_still_send() {
    // The server greets, closes its sending side, then reads what the client still sends and
    // reports it out of band through a channel.
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let tx = std::sync::Mutex::new(tx);
    let backend = Backend::start(move |mut s| {
        s.write_all(b"bye from server").unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        tx.lock().unwrap().send(rest).unwrap();
    });
    let (fe, addr) = frontend();
    let _proxy = common::sluice(&listen(&fd_bind(&fe), &backend.addr().to_string()))
        .inherit(fe)
        .start();
    let mut c = connect(addr);
    let mut greeting = Vec::new();
    // The server's end of stream arrives as an end of stream on the client side.
    c.read_to_end(&mut greeting).unwrap();
    assert_eq!(greeting, b"bye from server");
    // The other direction is still open.
    c.write_all(b"late data").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let received = rx
        .recv_timeout(GENEROUS)
        .expect("the server got the client's late data");
    assert_eq!(received, b"late data");
}

#[test]
fn large_payload_arrives_intact_both_ways() {
    const SIZE: usize = 4 * 1024 * 1024 + 123;
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let _proxy = common::sluice(&listen(&fd_bind(&fe), &backend.addr().to_string()))
        .inherit(fe)
        .start();
    let payload: Vec<u8> = (0..SIZE).map(|i| (i * 7 % 251) as u8).collect();
    let c = connect(addr);
    let mut writer = c.try_clone().unwrap();
    let sent = payload.clone();
    let sender = std::thread::spawn(move || {
        for chunk in sent.chunks(100_000) {
            writer.write_all(chunk).unwrap();
        }
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let mut reader = c;
    let started = Instant::now();
    let got = match read_to_close(&mut reader, Duration::from_secs(60)) {
        Closed::Eof(data) => data,
        other => panic!(
            "echo of {SIZE} bytes did not end cleanly after {:?}: {} bytes",
            started.elapsed(),
            other.data().len()
        ),
    };
    sender.join().unwrap();
    assert_eq!(got.len(), SIZE);
    assert!(got == payload, "the echoed bytes differ from the sent ones");
}

#[test]
fn inherited_fd_listener_serves_and_keeps_its_address() {
    // `bind "fd@N"`: the proxy accepts on the very socket the test bound, so the address the
    // client connects to is the test's, and no other listener exists.
    let backend = Backend::named("via-fd");
    let (fe, addr) = frontend();
    let bind = fd_bind(&fe);
    assert!(bind.starts_with("\"fd@"), "{bind}");
    let _proxy = common::sluice(&listen(&bind, &backend.addr().to_string()))
        .inherit(fe)
        .start();
    let mut c = connect(addr);
    match read_to_close(&mut c, GENEROUS) {
        Closed::Eof(data) => assert_eq!(data, b"via-fd"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unix_socket_bind_serves() {
    let backend = Backend::echo();
    let dir = common::TempDir::new();
    let path = dir.join("front.sock");
    let cfg = listen(
        &format!("\"{}\"", path.display()),
        &backend.addr().to_string(),
    );
    let _proxy = common::sluice(&cfg).start();
    // The proxy created the socket itself: readiness is a successful connect.
    assert!(
        common::wait_until(GENEROUS, || UnixStream::connect(&path).is_ok()),
        "unix listener {} never accepted connections",
        path.display()
    );
    let mut c = UnixStream::connect(&path).unwrap();
    c.set_read_timeout(Some(GENEROUS)).unwrap();
    c.write_all(b"over unix").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"over unix");
}

#[test]
fn unix_prefixed_bind_serves() {
    let backend = Backend::named("unix-prefix");
    let dir = common::TempDir::new();
    let path = dir.join("front.sock");
    let cfg = listen(
        &format!("\"unix@{}\"", path.display()),
        &backend.addr().to_string(),
    );
    let _proxy = common::sluice(&cfg).start();
    assert!(common::wait_until(GENEROUS, || UnixStream::connect(&path).is_ok()));
    let mut c = UnixStream::connect(&path).unwrap();
    c.set_read_timeout(Some(GENEROUS)).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"unix-prefix");
}

/// `unix-bind prefix P mode M`: a bind line's unix socket path is put after P, and gets
/// mode M unless the line sets its own, as in HAProxy.
#[test]
fn unix_bind_prefixes_the_paths_and_sets_the_modes_of_bind_sockets() {
    use std::os::unix::fs::PermissionsExt;
    let backend = Backend::named("prefixed");
    let dir = common::TempDir::new();
    let cfg = format!(
        "global\n    unix-bind prefix {}/ mode 600\n{TCP_DEFAULTS}\nlisten app\n    bind unix@a.sock\n    bind unix@b.sock mode 644\n    server s1 {}\n",
        dir.path().display(),
        backend.addr()
    );
    let _proxy = common::sluice(&cfg).start();
    let (a, b) = (dir.join("a.sock"), dir.join("b.sock"));
    assert!(common::wait_until(GENEROUS, || UnixStream::connect(&a).is_ok()));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&a), mode(&b)), (0o600, 0o644));
    let mut c = UnixStream::connect(&a).unwrap();
    c.set_read_timeout(Some(GENEROUS)).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"prefixed");
}

/// `bind ... uid|gid` and `user|group`: the unix socket file gets that owner and group (as
/// root, another user's; otherwise the only ones the system lets a user give: its own).
#[test]
fn bind_lines_set_the_owner_of_their_unix_sockets() {
    use std::os::unix::fs::MetadataExt;
    let backend = Backend::named("owned");
    let dir = common::TempDir::new();
    let (uid, gid) = if nix::unistd::geteuid().is_root() {
        (65534, 65534)
    } else {
        (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        )
    };
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .unwrap()
        .unwrap()
        .name;
    let group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
        .unwrap()
        .unwrap()
        .name;
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind unix@{dir}/ids.sock uid {uid} gid {gid} mode 660\n    \
         bind unix@{dir}/names.sock user {user} group {group}\n    server s1 {}\n",
        backend.addr(),
        dir = dir.path().display(),
    );
    let _proxy = common::sluice(&cfg).start();
    let (ids, names) = (dir.join("ids.sock"), dir.join("names.sock"));
    assert!(common::wait_until(GENEROUS, || {
        UnixStream::connect(&ids).is_ok() && UnixStream::connect(&names).is_ok()
    }));
    let owner = |p: &std::path::Path| {
        let meta = std::fs::metadata(p).unwrap();
        (meta.uid(), meta.gid())
    };
    assert_eq!(owner(&ids), (uid, gid));
    assert_eq!(owner(&names), (uid, gid));
}

#[test]
fn unix_socket_server_address_is_reached() {
    let dir = common::TempDir::new();
    let server_path = dir.join("server.sock");
    let server = UnixListener::bind(&server_path).unwrap();
    let handle = std::thread::spawn(move || {
        let (mut s, _) = server.accept().unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        s.write_all(b"pong from unix server").unwrap();
    });
    let (fe, addr) = frontend();
    let cfg = listen(&fd_bind(&fe), &format!("\"{}\"", server_path.display()));
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let mut c = connect(addr);
    c.write_all(b"ping").unwrap();
    match read_to_close(&mut c, GENEROUS) {
        Closed::Eof(data) => assert_eq!(data, b"pong from unix server"),
        other => panic!("{other:?}"),
    }
    handle.join().unwrap();
}

#[test]
fn frontend_and_backend_sections_forward_like_listen() {
    let backend = Backend::named("from-backend-section");
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nfrontend fe\n    bind {}\n    default_backend be\n\nbackend be\n    server s1 {}\n",
        fd_bind(&fe),
        backend.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let mut c = connect(addr);
    match read_to_close(&mut c, GENEROUS) {
        Closed::Eof(data) => assert_eq!(data, b"from-backend-section"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn many_concurrent_clients_are_all_served() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let _proxy = common::sluice(&listen(&fd_bind(&fe), &backend.addr().to_string()))
        .inherit(fe)
        .start();
    let clients: Vec<_> = (0..20)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c: TcpStream = connect(addr);
                let msg = format!("client {i} says hi");
                c.write_all(msg.as_bytes()).unwrap();
                c.shutdown(Shutdown::Write).unwrap();
                let mut got = Vec::new();
                c.read_to_end(&mut got).unwrap();
                assert_eq!(got, msg.as_bytes());
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    assert_eq!(backend.accepted(), 20);
}

/// Relays a megabyte each way through `config` (a listen section in front of an echo server)
/// and checks every byte, then the half-close. Returns the proxy, still running.
fn echo_a_megabyte(extra: &str, global: &str) -> common::Sluice {
    let echo = Backend::echo();
    let (listener, addr) = common::frontend();
    let config = format!(
        "global\n{global}\n{TCP_DEFAULTS}\nlisten l\n    bind {}\n{extra}\n    server s {}\n",
        common::fd_bind(&listener),
        echo.addr()
    );
    let p = sluice(&config).inherit(listener).start();
    let mut s = connect(addr);
    let data: Vec<u8> = (0..1_048_576u32)
        .map(|i| (i.wrapping_mul(31) % 253) as u8)
        .collect();
    let mut writer = s.try_clone().unwrap();
    let sending = data.clone();
    let sender = std::thread::spawn(move || {
        writer.write_all(&sending).unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let Closed::Eof(got) = read_to_close(&mut s, GENEROUS) else {
        panic!("the echo and its end of stream must come back");
    };
    sender.join().unwrap();
    assert_eq!(got.len(), data.len());
    assert!(got == data, "the bytes come back unchanged");
    p
}

/// `TotalSplicdedBytesOut` of `show info`.
fn spliced_out(p: &common::Sluice) -> u64 {
    common::info_field(&p.cli("show info"), "TotalSplicdedBytesOut")
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn splicing_relays_every_byte_both_ways() {
    let p = echo_a_megabyte(
        "    option splice-request\n    option splice-response",
        "    tune.pipesize 16384",
    );
    // Both megabytes went through pipes.
    assert_eq!(spliced_out(&p), 2 * 1_048_576);
}

#[test]
fn splice_auto_splices_a_stream_once_it_streams_fast() {
    // Small buffers: a megabyte sent at once fills every read, so the copy turns to a pipe.
    let p = echo_a_megabyte(
        "    option splice-auto",
        "    tune.bufsize 4096\n    tune.pipesize 16384",
    );
    let spliced = spliced_out(&p);
    assert!(spliced > 1_048_576, "{spliced}");
}

#[test]
fn splice_auto_copies_a_slow_exchange() {
    let echo = Backend::echo();
    let (listener, addr) = common::frontend();
    let config = format!(
        "{TCP_DEFAULTS}\nlisten l\n    bind {}\n    option splice-auto\n    server s {}\n",
        common::fd_bind(&listener),
        echo.addr()
    );
    let p = sluice(&config).inherit(listener).start();
    let mut s = connect(addr);
    for _ in 0..3 {
        s.write_all(b"ping").unwrap();
        assert_eq!(common::read_n(&mut s, 4), b"ping");
    }
    let info = p.cli("show info");
    assert_eq!(common::info_field(&info, "PipesUsed"), Some("0"), "{info}");
    assert_eq!(spliced_out(&p), 0);
}

/// Without `maxpipes`, HAProxy's default: no pipe at all when no proxy splices, else a
/// quarter of what the splicing proxies may hold (here the backend side of the `listen`,
/// read as the process's `maxconn`, over the frontend side's `maxconn 100`).
#[test]
fn maxpipes_defaults_to_a_quarter_of_what_splicing_proxies_hold() {
    let echo = Backend::echo();
    for (option, pipes) in [("", "0"), ("    option splice-response\n", "100")] {
        let (listener, _addr) = common::frontend();
        let config = format!(
            "global\n    maxconn 400\n{TCP_DEFAULTS}\nlisten l\n    bind {}\n    maxconn 100\n{option}    server s {}\n",
            common::fd_bind(&listener),
            echo.addr()
        );
        let p = sluice(&config).inherit(listener).start();
        let info = p.cli("show info");
        assert_eq!(common::info_field(&info, "Maxpipes"), Some(pipes), "{info}");
    }
}

#[test]
fn a_spliced_session_holds_one_pipe_per_direction() {
    let echo = Backend::echo();
    let (listener, addr) = common::frontend();
    let config = format!(
        "global\n    maxpipes 10\n{TCP_DEFAULTS}\nlisten l\n    bind {}\n    option splice-request\n    server s {}\n",
        common::fd_bind(&listener),
        echo.addr()
    );
    let p = sluice(&config).inherit(listener).start();
    let pipes_used = || {
        let info = p.cli("show info");
        common::info_field(&info, "PipesUsed").map(str::to_owned)
    };
    assert_eq!(pipes_used().as_deref(), Some("0"));
    let mut s = connect(addr);
    s.write_all(b"ping").unwrap();
    assert_eq!(common::read_n(&mut s, 4), b"ping");
    // splice-request: only the client-to-server direction has a pipe.
    assert_eq!(pipes_used().as_deref(), Some("1"));
    assert_eq!(
        common::info_field(&p.cli("show info"), "Maxpipes"),
        Some("10")
    );
    drop(s);
    assert!(common::wait_until(GENEROUS, || pipes_used().as_deref() == Some("0")));
}

#[test]
fn splicing_one_direction_and_running_out_of_pipes_fall_back_to_copies() {
    echo_a_megabyte("    option splice-response", "");
    // No pipe may be created at all: both directions copy.
    echo_a_megabyte("    option splice-auto", "    maxpipes 0");
    echo_a_megabyte("    option splice-auto", "    nosplice");
}

/// A Remote Desktop client's first packet (TPKT, X.224 Connection Request) with `cookie`.
fn rdp_request(cookie: &str) -> Vec<u8> {
    let line = format!("Cookie: {cookie}\r\n");
    let len = u16::try_from(11 + line.len()).unwrap();
    let mut packet = vec![3, 0];
    packet.extend_from_slice(&len.to_be_bytes());
    packet.extend_from_slice(&[u8::try_from(6 + line.len()).unwrap(), 0xe0, 0, 0, 0, 0, 0]);
    packet.extend_from_slice(line.as_bytes());
    packet
}

/// A server that reads the client's first packet, then answers its name and closes.
fn rdp_server(name: &'static str) -> Backend {
    Backend::start(move |mut s| {
        let mut packet = [0u8; 512];
        if matches!(s.read(&mut packet), Ok(n) if n > 0) {
            let _ = s.write_all(name.as_bytes());
        }
    })
}

/// Which server answered a client sending `cookie`.
fn rdp_served_by(addr: std::net::SocketAddr, cookie: &str) -> String {
    let mut c = connect(addr);
    c.write_all(&rdp_request(cookie)).unwrap();
    match read_to_close(&mut c, GENEROUS) {
        Closed::Eof(name) => String::from_utf8(name).unwrap(),
        other => panic!("{cookie}: {other:?}"),
    }
}

#[test]
fn rdp_cookies_choose_the_server_by_hash_and_by_the_address_a_redirection_wrote() {
    let (s1, s2) = (rdp_server("s1"), rdp_server("s2"));
    let (fe, addr) = frontend();
    let config = format!(
        "{TCP_DEFAULTS}\nlisten rdp\n    bind {}\n    tcp-request inspect-delay 5s\n    \
         tcp-request content accept if RDP_COOKIE\n    persist rdp-cookie\n    \
         balance rdp-cookie\n    server s1 {}\n    server s2 {}\n",
        fd_bind(&fe),
        s1.addr(),
        s2.addr()
    );
    let _proxy = sluice(&config).inherit(fe).start();
    // `balance rdp-cookie`: a user always reaches the same server, and users spread.
    let mut seen = std::collections::HashSet::new();
    for user in 0..20 {
        let cookie = format!("mstshash=user{user}");
        let first = rdp_served_by(addr, &cookie);
        assert_eq!(rdp_served_by(addr, &cookie), first, "{cookie}");
        seen.insert(first);
    }
    assert_eq!(seen.len(), 2, "twenty users on one server: {seen:?}");
    // `persist rdp-cookie`: an `msts` cookie names the server to come back to, whatever the
    // hash would choose: the address's bytes read little-endian, the port's swapped.
    for (backend, name) in [(&s1, "s1"), (&s2, "s2")] {
        let std::net::SocketAddr::V4(at) = backend.addr() else {
            panic!("IPv4 expected")
        };
        let msts = format!(
            "msts={}.{}.0000",
            u32::from_le_bytes(at.ip().octets()),
            at.port().swap_bytes()
        );
        for _ in 0..3 {
            assert_eq!(rdp_served_by(addr, &msts), name, "{msts}");
        }
    }
}

/// The keep-alive timer of an established IPv4 socket whose local and remote ports pass
/// `wanted`, in seconds, as `/proc/net/tcp` shows it (`tm->when` in clock ticks); `None`
/// while another timer is pending (`tr` other than 2: data not acknowledged yet).
fn keepalive_timer(wanted: impl Fn(u16, u16) -> bool) -> Option<f64> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as f64;
    let port =
        |address: &str| u16::from_str_radix(address.rsplit(':').next().unwrap(), 16).unwrap();
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields[3] != "01" || !wanted(port(fields[1]), port(fields[2])) {
            return None;
        }
        let (timer, when) = fields[5].split_once(':')?;
        (timer == "02").then(|| u64::from_str_radix(when, 16).unwrap() as f64 / ticks)
    })
}

/// `clitcpka-idle` and `srvtcpka-idle` set when the first keep-alive probe of an idle
/// connection goes (TCP_KEEPIDLE), on each side's sockets; the system's two hours apply
/// where they are not set.
#[test]
fn keepalive_probes_follow_clitcpka_and_srvtcpka_settings() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let config = format!(
        "{TCP_DEFAULTS}
listen app
    bind {}
    option tcpka
    clitcpka-idle 40
    clitcpka-intvl 5
    clitcpka-cnt 3
    srvtcpka-idle 1m
    server s1 {}
",
        fd_bind(&fe),
        backend.addr()
    );
    let _proxy = common::sluice(&config).inherit(fe).start();
    let mut c = connect(addr);
    c.write_all(b"ping").unwrap();
    assert_eq!(read_n(&mut c, 4), b"ping");
    let client_port = c.local_addr().unwrap().port();
    // The proxy's side of each connection: from its listening port to the client, and from
    // its own port to the server's. Once their data is acknowledged, both are idle and wait
    // on their keep-alive timers.
    let server_port = backend.addr().port();
    let (mut client_side, mut server_side) = (None, None);
    let idle = common::wait_until(GENEROUS, || {
        client_side =
            keepalive_timer(|local, remote| local == addr.port() && remote == client_port);
        server_side = keepalive_timer(|_, remote| remote == server_port);
        client_side.is_some() && server_side.is_some()
    });
    assert!(idle, "keep-alive timers: {client_side:?} {server_side:?}");
    let (client_side, server_side) = (client_side.unwrap(), server_side.unwrap());
    assert!(client_side > 30.0 && client_side <= 40.0, "{client_side}");
    assert!(server_side > 50.0 && server_side <= 60.0, "{server_side}");
}
