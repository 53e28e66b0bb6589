#!/usr/bin/env python3
"""Instructions per request of Sluice and HAProxy, counted by valgrind's callgrind.

On a shared 2-core machine rates and CPU times move with the neighbours' load; instruction
counts do not. Each proxy runs under `valgrind --tool=callgrind` in front of a small origin
(a thread of this script answering every request with a 64-byte body), with the very
configuration `bench/run.py` gives it for the scenario. A client sends requests one after
the other, over one kept-alive connection (`keepalive`, `rules`) or one connection each
(`close`). Each proxy is run twice, with N and with 2N measured requests after the same
warm-up, and the difference between the two runs' totals, divided by N, is the cost of one
request: start-up, configuration loading and shutdown cancel out. The same difference per
function gives the top functions (self cost, instructions per request). Sluice's count moves
by a few percent from run to run (its timers' wheel does more or less work depending on how
much real time passed under valgrind): each figure is the median of `--rounds` pairs of
runs, printed with its range.

With `--allocs`, the same two runs under memcheck give heap allocations per request from
its "total heap usage" line (HAProxy allocates from its own pools, so this mostly tells
Sluice's count).

Needs `apt-get install -y valgrind haproxy` and a release build with symbols (the release
profile keeps line tables: `cargo build --release`). Everything stays on 127.0.0.1.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the scenarios' configurations and ports)

ROOT = run.ROOT
BODY = b"x" * 64
ORIGIN_ANSWER = (b"HTTP/1.1 200 OK\r\nServer: origin\r\nContent-Type: application/octet-stream\r\n"
                 b"Content-Length: 64\r\n\r\n" + BODY)
# Which configuration of run.py each scenario uses, and whether the client keeps its
# connection alive.
SCENARIOS = {
    "keepalive": ("http-keepalive", True),
    "rules": ("rules", True),
    "close": ("http-close", False),
}


def free_port():
    """A port nothing listens on now: other benchmarks (bench/run.py) use fixed ones."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Origin:
    """A threaded origin on run.ORIGIN_PORT answering every request head with ORIGIN_ANSWER."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", run.ORIGIN_PORT))
        self.sock.listen(128)
        self.thread = threading.Thread(target=self.accept, daemon=True)
        self.thread.start()

    def accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    @staticmethod
    def serve(conn):
        pending = b""
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                pending += data
                while b"\r\n\r\n" in pending:
                    head, pending = pending.split(b"\r\n\r\n", 1)
                    conn.sendall(ORIGIN_ANSWER)
                    if b"connection: close" in head.lower():
                        return

    def stop(self):
        self.sock.close()


def read_response(sock, pending):
    """Reads one response framed by Content-Length; returns (status, leftover bytes)."""
    while b"\r\n\r\n" not in pending:
        data = sock.recv(65536)
        if not data:
            raise RuntimeError("the proxy closed the connection")
        pending += data
    head, rest = pending.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    length = int(re.search(rb"(?im)^content-length:\s*(\d+)", head).group(1))
    while len(rest) < length:
        data = sock.recv(65536)
        if not data:
            raise RuntimeError("the proxy closed the connection mid-body")
        rest += data
    return status, rest[length:]


def send_requests(count, keepalive):
    """`count` requests like wrk's, one after the other; every answer must be a 200."""
    request = f"GET /small HTTP/1.1\r\nHost: 127.0.0.1:{run.PROXY_PORT}\r\n".encode()
    if keepalive:
        sock = socket.create_connection(("127.0.0.1", run.PROXY_PORT))
        pending = b""
        for _ in range(count):
            sock.sendall(request + b"\r\n")
            status, pending = read_response(sock, pending)
            if status != 200:
                raise RuntimeError(f"status {status}")
        sock.close()
        return
    for _ in range(count):
        with socket.create_connection(("127.0.0.1", run.PROXY_PORT)) as sock:
            sock.sendall(request + b"Connection: close\r\n\r\n")
            status, _ = read_response(sock, b"")
            if status != 200:
                raise RuntimeError(f"status {status}")


def proxy_command(kind, cfg, binary):
    if kind == "sluice":
        return [binary, "-db", "-f", cfg]
    return ["haproxy", "-db", "-f", cfg]


def measured_run(kind, scenario, work, binary, tool, warmup, count):
    """Runs the proxy under valgrind `tool` for warmup+count requests; returns its output file."""
    config_name, keepalive = SCENARIOS[scenario]
    cfg = run.proxy_config(kind, "http", work, config_name)
    out = os.path.join(work, f"{tool}-{kind}-{scenario}-{count}.out")
    if tool == "callgrind":
        vg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        log = out + ".log"
    else:
        vg = ["valgrind", "--tool=memcheck", "--leak-check=no", f"--log-file={out}"]
        log = out + ".stderr"
    with open(log, "w") as err:
        proc = subprocess.Popen(vg + proxy_command(kind, cfg, binary), stdout=subprocess.DEVNULL, stderr=err)
        try:
            run.wait_port(run.PROXY_PORT, limit=120.0)
            send_requests(warmup, keepalive)
            send_requests(count, keepalive)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    time.sleep(0.2)  # let the port be released before the next proxy binds it
    return out


def callgrind_totals(path):
    """Total instructions and self instructions per function of a callgrind output."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=no", path],
                          capture_output=True, text=True, check=True).stdout
    total = None
    functions = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?PROGRAM TOTALS", line)
        if m:
            total = int(m.group(1).replace(",", ""))
            continue
        m = re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*?)\s*$", line)
        if m and total is not None and ":" in m.group(2):
            # Inlined code is listed under its source file: add a function's parts up.
            name = function_name(m.group(2))
            functions[name] = functions.get(name, 0) + int(m.group(1).replace(",", ""))
    if total is None:
        raise RuntimeError(f"no totals in {path}")
    return total, functions


def memcheck_allocs(path):
    with open(path) as f:
        text = f.read()
    m = re.search(r"total heap usage: ([\d,]+) allocs", text)
    if not m:
        raise RuntimeError(f"no heap summary in {path}")
    return int(m.group(1).replace(",", ""))


def function_name(entry):
    """The function of a callgrind_annotate line "file:function [object]"."""
    entry = re.sub(r"\s*\[[^\]]*\]$", "", entry)
    return entry.split(":", 1)[1] if not entry.startswith("???:") else entry[4:]


def short(name, width=90):
    return name if len(name) <= width else name[: width - 3] + "..."


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(ROOT, "target/release/sluice"))
    parser.add_argument("--requests", type=int, default=500, help="N: the runs measure N and 2N requests")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--top", type=int, default=15, help="functions shown per proxy")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of runs per figure (median)")
    parser.add_argument("--proxies", default="sluice,haproxy")
    parser.add_argument("--allocs", action="store_true", help="also count heap allocations (memcheck)")
    parser.add_argument("--keep", metavar="DIR", help="keep valgrind's output files in DIR")
    parser.add_argument("scenarios", nargs="*", default=["rules", "keepalive", "close"])
    args = parser.parse_args()
    for tool in ("valgrind", "callgrind_annotate", "haproxy"):
        if shutil.which(tool) is None:
            sys.exit(f"bench: '{tool}' is missing (apt-get install -y valgrind haproxy)")
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"bench: build Sluice first (cargo build --release): {args.binary} missing")
    for scenario in args.scenarios:
        if scenario not in SCENARIOS:
            sys.exit(f"bench: unknown scenario {scenario} (one of {', '.join(SCENARIOS)})")
    proxies = args.proxies.split(",")
    # run.py's configurations read these: ports of our own, so that a bench/run.py running
    # meanwhile cannot answer our requests.
    run.ORIGIN_PORT, run.PROXY_PORT = free_port(), free_port()
    work = tempfile.mkdtemp(prefix="sluice-callgrind-")
    origin = Origin()
    n = args.requests
    try:
        summary = []
        for scenario in args.scenarios:
            per_request = {}
            for kind in proxies:
                rounds = []
                for _ in range(args.rounds):
                    small = measured_run(kind, scenario, work, args.binary, "callgrind", args.warmup, n)
                    large = measured_run(kind, scenario, work, args.binary, "callgrind", args.warmup, 2 * n)
                    total_small, funcs_small = callgrind_totals(small)
                    total_large, funcs_large = callgrind_totals(large)
                    rounds.append(((total_large - total_small) / n, funcs_small, funcs_large))
                rounds.sort(key=lambda r: r[0])
                per_request[kind], funcs_small, funcs_large = rounds[len(rounds) // 2]
                spread = (rounds[0][0], rounds[-1][0])
                allocs = None
                if args.allocs:
                    a_small = memcheck_allocs(measured_run(kind, scenario, work, args.binary, "memcheck",
                                                           args.warmup, n))
                    a_large = memcheck_allocs(measured_run(kind, scenario, work, args.binary, "memcheck",
                                                           args.warmup, 2 * n))
                    allocs = (a_large - a_small) / n
                summary.append((scenario, kind, per_request[kind], spread, allocs))
                print(f"\n{scenario} / {kind}: {per_request[kind]:,.0f} instructions per request"
                      f" [{spread[0]:,.0f}-{spread[1]:,.0f}]"
                      + (f", {allocs:.1f} allocations per request" if allocs is not None else ""))
                diffs = sorted(((funcs_large.get(f, 0) - funcs_small.get(f, 0)) / n, f)
                               for f in set(funcs_large) | set(funcs_small))
                for cost, name in reversed(diffs[-args.top:]):
                    print(f"  {cost:>9,.0f}  {100 * cost / per_request[kind]:5.1f}%  {short(name)}")
        print(f"\n{'scenario':<10} {'proxy':<8} {'instr/req (median [min-max])':<30} {'allocs/req':>10}"
              "  ratio to haproxy")
        for scenario, kind, cost, spread, allocs in summary:
            ref = next((c for s, k, c, _, _ in summary if s == scenario and k == "haproxy"), None)
            ratio = f"{cost / ref:.2f}" if ref else "-"
            alloc_text = f"{allocs:.1f}" if allocs is not None else "-"
            figure = f"{cost:,.0f} [{spread[0]:,.0f}-{spread[1]:,.0f}]"
            print(f"{scenario:<10} {kind:<8} {figure:<30} {alloc_text:>10}  {ratio}")
    finally:
        origin.stop()
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for name in os.listdir(work):
                if name.startswith(("callgrind-", "memcheck-")):
                    shutil.copy(os.path.join(work, name), args.keep)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
