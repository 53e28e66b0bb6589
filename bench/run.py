#!/usr/bin/env python3
"""Side-by-side benchmark of Sluice, HAProxy and nginx on this machine (see BENCHMARKS.md).

Every proxy runs pinned to CPU 0 with one thread/worker; the load generator and the origin
server (an nginx instance serving static files) share CPU 1. Runs are interleaved, each round
starting with the next proxy (A B C, B C A, C A B ...), and each figure is reported as median
[min-max] with its ratio to HAProxy. Work per proxy CPU-second is reported beside raw rates,
since on a 2-core machine the load generator is often the ceiling. Everything stays on
127.0.0.1 and every run is bounded in time.
"""
import argparse
import os
import resource
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORIGIN_PORT = 18800
PROXY_PORT = 18801
WS_ORIGIN_PORT = 18802
PROXY_CPU = "0"
# The shortest `latency` run, whatever `--seconds` says.
LATENCY_SECONDS = 10
LOAD_CPU = "1"
# How long an idle CPU of a KVM guest polls before it halts (cpuidle-haltpoll). A halted CPU
# must be woken by an inter-processor interrupt, which costs the waker's CPU a VM exit: on a
# 2-core machine, the load CPU pays for each wake-up of a proxy that went idle (BENCHMARKS.md,
# thirtieth session). `--halt-poll-ns` sets it for the run, as a host could be set up.
HALT_POLL = "/sys/module/haltpoll/parameters/guest_halt_poll_ns"


def need(tool, package):
    if shutil.which(tool) is None:
        sys.exit(f"bench: '{tool}' is missing (apt-get install {package})")


def wait_port(port, limit=10.0):
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def process_tree(pid):
    """`pid` and its child processes (nginx serves from a worker, not its master)."""
    pids = [pid]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def cpu_time_ns(pid):
    """Time on CPU of a process tree (all threads), in nanoseconds: the scheduler's own
    account (`schedstat`), exact where `/proc/PID/stat` counts in clock ticks."""
    total = 0
    for p in process_tree(pid):
        try:
            threads = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                with open(f"/proc/{p}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass
    return total


def load_cpu_busy():
    """Busy time (seconds) of the load generator's CPU so far, from /proc/stat: everything
    that ran there (wrk, the origin, the kernel on their behalf), idle and iowait excluded."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{LOAD_CPU} "):
                ticks = [int(t) for t in line.split()[1:9]]
                return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    return 0.0


def cpu_seconds(pid, system=True):
    """User+system CPU time of a process tree (all threads), from /proc; user time only
    without `system`."""
    total = 0
    for p in process_tree(pid):
        with open(f"/proc/{p}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + (int(fields[12]) if system else 0)
    return total / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    """Resident memory of a process tree."""
    total = 0
    for p in process_tree(pid):
        with open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


class Origin:
    """nginx serving the test objects on ORIGIN_PORT, on the load generator's CPU."""

    def __init__(self, work):
        self.dir = os.path.join(work, "origin")
        os.makedirs(os.path.join(self.dir, "www"), exist_ok=True)
        with open(os.path.join(self.dir, "www", "small"), "wb") as f:
            f.write(b"x" * 64)
        with open(os.path.join(self.dir, "www", "big"), "wb") as f:
            f.write(os.urandom(10 * 1024 * 1024))
        # The `compression` scenario's page: 64 KiB of table rows, text that compresses about
        # as a generated HTML page does (each row differs).
        with open(os.path.join(self.dir, "www", "page.html"), "wb") as f:
            rows = (f"<tr><td>row {n}</td><td>{n * 7919 % 10007}</td></tr>\n" for n in range(5000))
            f.write("".join(rows).encode()[:64 * 1024])
        # The `http-chunked` scenario's answer: 1 KiB that nginx sends chunked (sub_filter
        # rewrites it as it goes, so its length is not announced).
        with open(os.path.join(self.dir, "www", "chunked"), "wb") as f:
            f.write(b"x" * 1024)
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""
worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log;
daemon off;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{ORIGIN_PORT} reuseport backlog=4096;
        root {self.dir}/www;
        location = /small {{ return 200 "{'x' * 64}"; }}
        location = /chunked {{ sub_filter_types *; sub_filter "<none>" ""; }}
    }}
}}
""")
        self.proc = subprocess.Popen(["taskset", "-c", LOAD_CPU, "nginx", "-c", conf, "-p", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(ORIGIN_PORT)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


# The `http-post` scenario's requests (wrk adds their Content-Length).
POST_SCRIPT = os.path.join(ROOT, "bench", "post.lua")

# The `rules` scenario's rule set, the same for Sluice and HAProxy (see bench/rules.cfg).
with open(os.path.join(ROOT, "bench", "rules.cfg")) as _f:
    RULES = "".join(line for line in _f if not line.startswith("#"))


def proxy_config(kind, mode, work, scenario="", busy_polling=False):
    """The same scenario for each proxy: one thread, keep-alive both sides."""
    origin_port = WS_ORIGIN_PORT if scenario == "idle-websocket" else ORIGIN_PORT
    extra = ""
    global_extra = ""
    # `http-close-defer`: connections are accepted once their request has arrived
    # (TCP_DEFER_ACCEPT: HAProxy's and Sluice's `defer-accept`, nginx's `deferred`), as they
    # mostly are from real clients, whose request follows the handshake's last ACK at once.
    bind_extra = " defer-accept" if scenario == "http-close-defer" else ""
    if scenario == "tcp-splice":
        # Spliced from the first byte: with `splice-auto`, HAProxy 2.6 copies these streams
        # (BENCHMARKS.md, sixth session), and the row would compare splicing with copying.
        extra = "    option splice-response\n"
        # HAProxy reserves two descriptors per possible pipe at start-up: keep it under the
        # file-descriptor limit.
        global_extra = "    maxpipes 512\n"
    elif scenario == "idle-websocket":
        # The upgraded connections need a tunnel timeout longer than the run.
        extra = "    timeout tunnel 1h\n"
    elif scenario == "compression":
        # gzip at each proxy's default level (HAProxy 2.6 from Debian: libslz).
        extra = "    compression algo gzip\n    compression type text/html\n"
    elif scenario == "rules" and kind != "nginx":
        with open(os.path.join(work, "routes.map"), "w") as f:
            f.writelines(f"/section{n}/ backend{n}\n" for n in range(200))
            f.write("/ origin\n")
        extra = RULES.replace("@ROUTES_MAP@", os.path.join(work, "routes.map"))
    # `maxconn` covers the idle scenarios' default 10,000 connections. Both proxies raise their
    # descriptor limit to what it needs (two per connection) if they may; where they may not
    # (a container's hard limit of 20000), `no strict-limits` lets them run short of it, which
    # only the upgraded connections (two descriptors each, see websocket_capacity) would feel.
    if kind in ("sluice", "haproxy"):
        if busy_polling:
            global_extra += "    busy-polling\n"
        path = os.path.join(work, f"{kind}-{mode}-{scenario}.cfg")
        with open(path, "w") as f:
            f.write(f"""global
    nbthread 1
    maxconn 12000
    no strict-limits
{global_extra}defaults
    mode {mode}
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    http-reuse always
listen bench
    bind 127.0.0.1:{PROXY_PORT}{bind_extra}
{extra}    server origin 127.0.0.1:{origin_port}
""")
        return path
    path = os.path.join(work, f"nginx-{mode}.conf")
    # nginx forwards an upgrade only when told to; otherwise it keeps the origin alive.
    connection = ('proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection "upgrade"; '
                  'proxy_read_timeout 1h;' if scenario == "idle-websocket"
                  else 'proxy_set_header Connection "";')
    body = (f"""stream {{
    server {{ listen 127.0.0.1:{PROXY_PORT}; proxy_pass 127.0.0.1:{ORIGIN_PORT}; }}
}}""" if mode == "tcp" else f"""http {{
    access_log off;
    keepalive_requests 1000000;
    upstream origin {{ server 127.0.0.1:{origin_port}; keepalive 128; }}
    server {{
        listen 127.0.0.1:{PROXY_PORT} backlog=4096{' deferred' if bind_extra else ''};
        location / {{ proxy_pass http://origin; proxy_http_version 1.1; {connection} }}
        {'gzip on; gzip_comp_level 1; gzip_types text/html; gzip_proxied any;' if scenario == 'compression' else ''}
    }}
}}""")
    # Debian ships nginx's stream (TCP) proxy as a dynamic module (libnginx-mod-stream).
    load = "load_module /usr/lib/nginx/modules/ngx_stream_module.so;" if mode == "tcp" else ""
    with open(path, "w") as f:
        f.write(f"""{load}
worker_processes 1;
pid {work}/nginx-proxy.pid;
error_log {work}/nginx-proxy.log;
daemon off;
events {{ worker_connections 20000; }}
{body}
""")
    return path


def start_proxy(kind, mode, work, binary, scenario="", busy_polling=False):
    cfg = proxy_config(kind, mode, work, scenario, busy_polling)
    if kind == "sluice":
        cmd = [binary, "-db", "-f", cfg]
    elif kind == "haproxy":
        cmd = ["haproxy", "-db", "-f", cfg]
    else:
        cmd = ["nginx", "-c", cfg, "-p", work]
    log = open(os.path.join(work, f"{kind}.log"), "w")
    proc = subprocess.Popen(["taskset", "-c", PROXY_CPU] + cmd, stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_port(PROXY_PORT)
    except RuntimeError:
        proc.kill()
        with open(log.name) as f:
            raise RuntimeError(f"{kind} did not start:\n{f.read()[-2000:]}")
    return proc


def stop_proxy(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    time.sleep(0.2)  # let the port be released before the next proxy binds it


def wrk(path, seconds, connections, extra=()):
    out = subprocess.run(["taskset", "-c", LOAD_CPU, "wrk", "-t1", f"-c{connections}", f"-d{seconds}s",
                          *extra, f"http://127.0.0.1:{PROXY_PORT}{path}"],
                         capture_output=True, text=True, timeout=seconds + 30).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"load run had failures:\n{out}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    transfer = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", out)
    scale = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9}[transfer.group(2)]
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    return rate, float(transfer.group(1)) * scale * 8 / 1e9, requests


# How long idle connections sit before their proxy's memory is read: past what a proxy keeps
# of the traffic that brought them. Sluice lets go of buffers and request states unused for a
# whole second, at its next look (a second later at most): 3 s reads what idle connections
# hold, not the wave of requests that opened them. HAProxy keeps its pools' memory anyway.
IDLE_SETTLE = 3.0


def idle_memory(pid, count):
    """RSS growth of the proxy while `count` keep-alive connections sit idle through it."""
    before = rss_kib(pid)
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", PROXY_PORT))
        s.sendall(b"GET /small HTTP/1.1\r\nHost: bench\r\n\r\n")
        socks.append(s)
    for n, s in enumerate(socks):
        # Well inside `timeout client` (30 s): a connection the proxy did not take (a
        # `maxconn` below `count`) is an error, not an answer after others timed out.
        s.settimeout(10)
        try:
            s.recv(4096)
        except TimeoutError:
            raise RuntimeError(f"idle connection {n} of {count} not answered in 10 s")
    time.sleep(IDLE_SETTLE)
    after = rss_kib(pid)
    for s in socks:
        s.close()
    return (after - before) / 1024.0


def websocket_capacity(count):
    """How many of `count` upgraded connections every proxy can hold here. Each takes two of
    the proxy's descriptors (client and server), and without the right to raise the hard
    limit (a container without CAP_SYS_RESOURCE: 20000) that falls short of 10,000; nginx
    resets new connections from about 9,500 on at that limit, so a tenth of the
    descriptors is kept aside."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return min(count, hard * 9 // 10 // 2)


def idle_websockets(pid, count):
    """RSS growth of the proxy while `count` upgraded WebSocket connections sit idle through it."""
    before = rss_kib(pid)
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", PROXY_PORT))
        s.sendall(b"GET /ws HTTP/1.1\r\nHost: bench\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        socks.append(s)
    for n, s in enumerate(socks):
        s.settimeout(10)
        try:
            answer = s.recv(4096)
        except TimeoutError:
            raise RuntimeError(f"upgraded connection {n} of {count} not answered in 10 s")
        if not answer.startswith(b"HTTP/1.1 101"):
            raise RuntimeError(f"upgrade refused: {answer[:200]!r}")
    time.sleep(IDLE_SETTLE)
    after = rss_kib(pid)
    for s in socks:
        s.close()
    return (after - before) / 1024.0


def paced_load(seconds, rate, connections):
    """Sends requests at a fixed total `rate` over kept-alive connections; returns each
    request's time in ms, from h2load's per-request log.

    h2load paces each connection (`--rps`), so the load is the same for every proxy and the
    figures are not distorted by the proxy's own speed (coordinated omission)."""
    with tempfile.NamedTemporaryFile(prefix="sluice-bench-paced-") as log:
        out = subprocess.run(["taskset", "-c", LOAD_CPU, "h2load", "--h1", f"-c{connections}",
                              f"--rps={max(1, rate // connections)}", f"-D{seconds}", f"--log-file={log.name}",
                              f"http://127.0.0.1:{PROXY_PORT}/small"],
                             capture_output=True, text=True, timeout=seconds + 30).stdout
        if not re.search(r" 0 failed, 0 errored, 0 timeout", out):
            raise RuntimeError(f"paced run had failures:\n{out}")
        times = []
        for line in log.read().decode().splitlines():
            _, status, micros = line.split("\t")[:3]
            if not status.startswith("2"):
                raise RuntimeError(f"paced run got status {status}")
            times.append(int(micros) / 1000.0)
    return times


def fixed_rate_latency(seconds, rate, connections=10):
    """p99 and p50 (ms) of requests sent at a fixed total `rate` over kept-alive connections."""
    times = sorted(paced_load(seconds, rate, connections))
    return times[int(len(times) * 0.99) - 1], times[len(times) // 2]


# `cpu-sparse`: h2load paces each of its connections at 2 requests per second.
SPARSE_CONNECTIONS = 2000
SPARSE_RATE = 4000


def cpu_at_rate(pid, seconds, rate, connections=50):
    """The proxy's CPU time per request (microseconds, all of it and the user part) while
    requests come at a fixed total `rate`: the same work for every proxy, so the figure is
    the proxy's cost per request, not a rate it could reach."""
    ns0, user0 = cpu_time_ns(pid), cpu_seconds(pid, system=False)
    requests = len(paced_load(seconds, rate, connections))
    user = cpu_seconds(pid, system=False) - user0
    return (cpu_time_ns(pid) - ns0) / 1000 / requests, user * 1e6 / requests


SCENARIOS = {
    # name: (mode, what it measures)
    "http-keepalive": ("http", "req/s"),
    "http-close": ("http", "conn/s"),
    "http-post": ("http", "req/s of POSTs with a 512-byte body, 64-byte answers, 50 kept-alive connections"),
    "http-chunked": ("http", "req/s of a 1 KiB chunked answer, 50 kept-alive connections"),
    "http-page": ("http", "req/s of a 64 KiB page, 50 kept-alive connections"),
    "http-many": ("http", "req/s over 2,000 kept-alive connections"),
    "http-close-defer": ("http", "conn/s, accepted once the request is there (defer-accept)"),
    "tcp-throughput": ("tcp", "Gbit/s"),
    "tcp-splice": ("tcp", "Gbit/s (option splice-response; nginx copies)"),
    "latency": ("http", "p99 ms at a fixed total rate over 10 kept-alive connections (p50 in the per-CPU column)"),
    "cpu-at-rate": ("http", "proxy CPU us per request at a fixed total rate over 50 kept-alive connections "
                            "(user part in the per-CPU column; lower is better)"),
    "cpu-sparse": ("http", "proxy CPU us per request at 4,000 req/s over 2,000 kept-alive connections, "
                           "2 req/s each (user part in the per-CPU column; lower is better)"),
    "rules": ("http", "req/s with 20 ACLs, rewrites and a map (nginx without rules)"),
    "compression": ("http", "req/s of a 64 KiB HTML page, gzip at level 1 (HAProxy: libslz), 10 kept-alive connections"),
    "idle-memory": ("http", "MiB for N idle connections"),
    "idle-websocket": ("http", "MiB for N idle upgraded WebSocket connections"),
}


def run_once(scenario, kind, work, binary, seconds, idle, latency_rate, cpu_rate, busy_polling):
    mode = SCENARIOS[scenario][0]
    proc = start_proxy(kind, mode, work, binary, scenario, busy_polling)
    try:
        cpu0, load0 = cpu_seconds(proc.pid), load_cpu_busy()
        if scenario in ("http-keepalive", "rules"):
            rate, _, requests = wrk("/small", seconds, 50)
            value = rate
        elif scenario == "latency":
            # Lower is better here; the second column carries the median instead of a rate.
            # At least LATENCY_SECONDS: the p99 of a 3 s run at 2000 req/s is its 60th slowest
            # request, which a single stall of the host moves.
            return (*fixed_rate_latency(max(seconds, LATENCY_SECONDS), latency_rate), None)
        elif scenario == "cpu-at-rate":
            return (*cpu_at_rate(proc.pid, seconds, cpu_rate), None)
        elif scenario == "cpu-sparse":
            # Many connections, each mostly idle: what a request costs when the proxy cannot
            # keep every connection's state hot, and its idle waits end between requests.
            return (*cpu_at_rate(proc.pid, seconds, SPARSE_RATE, SPARSE_CONNECTIONS), None)
        elif scenario == "http-post":
            rate, _, requests = wrk("/small", seconds, 50, ("-s", POST_SCRIPT))
            value = rate
        elif scenario == "http-chunked":
            rate, _, requests = wrk("/chunked", seconds, 50)
            value = rate
        elif scenario == "http-many":
            rate, _, requests = wrk("/small", seconds, 2000)
            value = rate
        elif scenario == "http-page":
            rate, _, requests = wrk("/page.html", seconds, 50)
            value = rate
        elif scenario == "compression":
            rate, _, requests = wrk("/page.html", seconds, 10, ("-H", "Accept-Encoding: gzip"))
            value = rate
        elif scenario in ("http-close", "http-close-defer"):
            rate, _, requests = wrk("/small", seconds, 50, ("-H", "Connection: close"))
            value = rate
        elif scenario in ("tcp-throughput", "tcp-splice"):
            _, gbits, requests = wrk("/big", seconds, 4)
            value = gbits
        elif scenario == "idle-websocket":
            requests = 0
            value = idle_websockets(proc.pid, websocket_capacity(idle))
        else:
            requests = 0
            value = idle_memory(proc.pid, idle)
        cpu = cpu_seconds(proc.pid) - cpu0
        per_cpu = requests / cpu if cpu > 0 and requests else None
        # What each request cost the other side (load generator and origin): on a 2-core
        # machine its CPU is often the ceiling, and what the proxy does changes that cost.
        load = (load_cpu_busy() - load0) * 1e6 / requests if requests else None
        return value, per_cpu, load
    finally:
        stop_proxy(proc)


def fmt(values):
    if not values:
        return "n/a"
    return f"{statistics.median(values):.4g} [{min(values):.4g}-{max(values):.4g}]"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(ROOT, "target/release/sluice"))
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per scenario")
    parser.add_argument("--seconds", type=int, default=5, help="duration of each load run")
    parser.add_argument("--idle", type=int, default=10000, help="idle connections for idle-memory")
    parser.add_argument("--latency-rate", type=int, default=2000,
                        help="total requests per second of the latency scenario")
    parser.add_argument("--cpu-rate", type=int, default=20000,
                        help="total requests per second of the cpu-at-rate scenario")
    parser.add_argument("--proxies", default="sluice,haproxy,nginx")
    parser.add_argument("--busy-polling", action="store_true",
                        help="Sluice and HAProxy never sleep in the poller (nginx has no such setting)")
    parser.add_argument("--halt-poll-ns", type=int,
                        help="idle CPUs poll this long before halting (KVM guests with cpuidle-haltpoll; "
                             "needs root; the host's value is restored at the end)")
    parser.add_argument("scenarios", nargs="*", default=list(SCENARIOS))
    args = parser.parse_args()
    for tool, package in (("wrk", "wrk"), ("h2load", "nghttp2-client"), ("nginx", "nginx libnginx-mod-stream"),
                          ("haproxy", "haproxy"), ("taskset", "util-linux")):
        need(tool, package)
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"bench: build Sluice first (cargo build --release): {args.binary} missing")
    # The idle scenarios hold `--idle` client sockets here, and the WebSocket origin (a child)
    # as many server ones: take the whole descriptor limit allowed.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    proxies = args.proxies.split(",")
    host_halt_poll = read_halt_poll()
    if args.halt_poll_ns is not None:
        if host_halt_poll is None:
            sys.exit(f"bench: --halt-poll-ns needs the cpuidle-haltpoll driver ({HALT_POLL} missing)")
        write_halt_poll(args.halt_poll_ns)
    try:
        run_scenarios(args, proxies)
    finally:
        if args.halt_poll_ns is not None:
            write_halt_poll(host_halt_poll)


def read_halt_poll():
    """The guest's idle poll time in ns, or None on a host without cpuidle-haltpoll."""
    try:
        with open(HALT_POLL) as f:
            return int(f.read())
    except OSError:
        return None


def write_halt_poll(ns):
    with open(HALT_POLL, "w") as f:
        f.write(str(ns))


def run_scenarios(args, proxies):
    work = tempfile.mkdtemp(prefix="sluice-bench-")
    # nginx workers run as an unprivileged user: the origin's files must be readable by it.
    os.chmod(work, 0o755)
    origin = Origin(work)
    ws_origin = subprocess.Popen(["taskset", "-c", LOAD_CPU, sys.executable,
                                  os.path.join(ROOT, "bench", "ws_origin.py"), str(WS_ORIGIN_PORT)])
    wait_port(WS_ORIGIN_PORT)
    try:
        halt_poll = read_halt_poll()
        if halt_poll is not None:
            # It moves the rates of scenarios where a proxy sleeps between events: say it.
            print(f"# idle CPUs poll {halt_poll} ns before halting ({HALT_POLL})")
        print(f"{'scenario':<16} {'proxy':<8} {'value (median [min-max])':<34} {'per proxy CPU-s':<26} "
              f"{'ratio':<6} load CPU µs per request/object")
        for scenario in args.scenarios:
            results = {p: ([], [], []) for p in proxies}
            for round_number in range(args.rounds):
                # Each round starts with the next proxy (A B C, B C A, C A B, ...): no proxy
                # always runs first, after the previous scenario or a different proxy.
                shift = round_number % len(proxies)
                for kind in proxies[shift:] + proxies[:shift]:
                    measured = run_once(scenario, kind, work, args.binary, args.seconds, args.idle,
                                        args.latency_rate, args.cpu_rate, args.busy_polling)
                    for column, figure in zip(results[kind], measured):
                        if figure is not None:
                            column.append(figure)
            reference = statistics.median(results["haproxy"][0]) if "haproxy" in results else None
            for kind in proxies:
                values, per_cpu, load = results[kind]
                ratio = f"{statistics.median(values) / reference:.2f}" if reference else "-"
                print(f"{scenario:<16} {kind:<8} {fmt(values):<34} {fmt(per_cpu):<26} {ratio:<6} "
                      f"{fmt(load) if load else '-'}")
            unit = SCENARIOS[scenario][1]
            if scenario == "idle-memory":
                unit = unit.replace("N ", f"{args.idle} ")
            elif scenario == "idle-websocket":
                unit = unit.replace("N ", f"{websocket_capacity(args.idle)} ")
            print(f"{'':<16} unit: {unit}")
    finally:
        ws_origin.terminate()
        ws_origin.wait()
        origin.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
