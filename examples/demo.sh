#!/usr/bin/env bash
# Starts the demo: two small web servers on 127.0.0.1:8081 and :8082, and Sluice on
# 127.0.0.1:8080 balancing between them (examples/demo.cfg). Ctrl-C stops everything.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/.."
cargo build --release --quiet
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT
for n in 1 2; do
    python3 -m http.server "808$n" --bind 127.0.0.1 --directory "$here/www$n" >/dev/null 2>&1 &
    pids+=($!)
done
echo "Sluice demo: try 'curl http://127.0.0.1:8080/' (answers alternate between app1 and app2)."
echo "Runtime API: echo 'show info' | socat stdio unix-connect:/tmp/sluice-demo.sock"
./target/release/sluice -db -f "$here/demo.cfg"
