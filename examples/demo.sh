#!/usr/bin/env bash
# Starts the demo: Sluice on 127.0.0.1:8080, balancing between "servers" that are Sluice's
# own listen sections (examples/demo.cfg), logging each request on stdout. Ctrl-C stops it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/.."
cargo build --release --quiet
echo "Sluice demo: try 'curl http://127.0.0.1:8080/' (answers alternate between app1 and app2),"
echo "'curl http://127.0.0.1:8080/api/hello', 'curl -i http://127.0.0.1:8080/old'."
echo "Runtime API: echo 'show info' | socat stdio unix-connect:/tmp/sluice-demo.sock"
exec ./target/release/sluice -db -f "$here/demo.cfg"
