#!/usr/bin/env python3
"""Memory per idle kept-alive HTTP connection, for quick iterations on issue 8.

Starts one proxy (Sluice or HAProxy, one thread) in front of a tiny keep-alive origin run by
this script, opens N client connections, makes `--requests` requests on each (0: connect
only), leaves them idle and prints the proxy's RSS growth per connection, with the
breakdown of /proc/PID/smaps_rollup (anonymous memory vs the rest) and how many connections
the proxy keeps open to the origin. The origin runs in a child process so its own memory
and work never mix with the proxy's; the figure reported in BENCHMARKS.md stays
`bench/run.py idle-memory`.

    python3 bench/idle_rss.py --proxy sluice --count 2000
    python3 bench/idle_rss.py --proxy haproxy --count 2000 --reuse safe
"""
import argparse
import multiprocessing
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import wait_port  # noqa: E402  (one way of waiting for a port across the scripts)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORIGIN_PORT = 18810
PROXY_PORT = 18811
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 64\r\nContent-Type: text/plain\r\n\r\n" + b"x" * 64


def origin(port, counts):
    """A keep-alive origin answering every request head with a 64-byte body; `counts[0]`
    is the number of connections open to it right now, `counts[1]` all it ever accepted."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(4096)
    listener.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    pending = {}
    while True:
        for key, _ in sel.select():
            if key.data is None:
                try:
                    conn, _ = listener.accept()
                except BlockingIOError:
                    continue
                conn.setblocking(False)
                pending[conn] = b""
                sel.register(conn, selectors.EVENT_READ, True)
                counts[0] += 1
                counts[1] += 1
                continue
            conn = key.fileobj
            try:
                data = conn.recv(65536)
            except BlockingIOError:
                continue
            except ConnectionError:
                data = b""
            if not data:
                sel.unregister(conn)
                conn.close()
                del pending[conn]
                counts[0] -= 1
                continue
            buf = pending[conn] + data
            while b"\r\n\r\n" in buf:
                _, buf = buf.split(b"\r\n\r\n", 1)
                conn.sendall(RESPONSE)
            pending[conn] = buf


def memory(pid):
    """VmRSS and smaps_rollup's anonymous share, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    with open(f"/proc/{pid}/smaps_rollup") as f:
        anon = next(int(line.split()[1]) for line in f if line.startswith("Anonymous:"))
    return rss, anon


def config(reuse, extra):
    return f"""global
    nbthread 1
    maxconn 9000
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
    http-reuse {reuse}
listen idle
    bind 127.0.0.1:{PROXY_PORT}
{extra}    server origin 127.0.0.1:{ORIGIN_PORT}
"""


def request_all(socks, requests, burst=True):
    """Sends `requests` requests on every connection. In a burst, each round sends on every
    connection before reading any answer (as bench/run.py's idle-memory does for one
    request), so the proxy has many exchanges in flight at once; otherwise one connection
    at a time, which leaves out the burst's high-water mark."""
    if not burst:
        for s in socks:
            request_all([s], requests)
        return
    for _ in range(requests):
        for s in socks:
            s.sendall(b"GET /small HTTP/1.1\r\nHost: bench\r\n\r\n")
        for s in socks:
            got = b""
            while len(got) < len(RESPONSE) or not got.endswith(b"x" * 64):
                chunk = s.recv(4096)
                if not chunk:
                    raise RuntimeError("the proxy closed a connection")
                got += chunk
            if not got.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"unexpected answer: {got[:80]!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proxy", choices=("sluice", "haproxy"), default="sluice")
    parser.add_argument("--binary", default=os.path.join(ROOT, "target/release/sluice"))
    parser.add_argument("--count", type=int, default=2000, help="client connections")
    parser.add_argument("--requests", type=int, default=1, help="requests per connection (0: none)")
    parser.add_argument("--reuse", default="always", help="http-reuse mode")
    parser.add_argument("--extra", default="", help="more lines for the listen section")
    parser.add_argument("--sequential", action="store_true",
                        help="one connection's requests at a time instead of a burst")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds idle before measuring")
    args = parser.parse_args()

    counts = multiprocessing.Array("i", 2)
    server = multiprocessing.Process(target=origin, args=(ORIGIN_PORT, counts), daemon=True)
    server.start()
    wait_port(ORIGIN_PORT)
    work = tempfile.mkdtemp(prefix="sluice-idle-")
    cfg = os.path.join(work, "proxy.cfg")
    extra = "".join(f"    {line}\n" for line in args.extra.split(";") if line.strip())
    with open(cfg, "w") as f:
        f.write(config(args.reuse, extra))
    cmd = [args.binary if args.proxy == "sluice" else "haproxy", "-db", "-f", cfg]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    socks = []
    try:
        wait_port(PROXY_PORT)
        # Warm up: one request through a connection that then closes, so start-up
        # allocations (the first buffers, the pool's table) are not counted.
        warm = socket.create_connection(("127.0.0.1", PROXY_PORT))
        request_all([warm], 1)
        warm.close()
        time.sleep(0.3)
        rss0, anon0 = memory(proc.pid)
        for _ in range(args.count):
            socks.append(socket.create_connection(("127.0.0.1", PROXY_PORT)))
        request_all(socks, args.requests, not args.sequential)
        time.sleep(args.settle)
        rss1, anon1 = memory(proc.pid)
        n = args.count
        print(f"{args.proxy} reuse={args.reuse} conns={n} requests={args.requests}"
              f"{' sequential' if args.sequential else ''}: "
              f"RSS +{(rss1 - rss0) / 1024:.2f} MiB = {(rss1 - rss0) * 1024 / n:.0f} B/conn "
              f"(anonymous {(anon1 - anon0) * 1024 / n:.0f} B/conn); "
              f"server connections open {counts[0]}, accepted {counts[1]}")
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        server.terminate()
        server.join()


if __name__ == "__main__":
    main()
