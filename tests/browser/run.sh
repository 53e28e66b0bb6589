#!/usr/bin/env bash
# The browser test of the stats page: installs Debian's chromium if it is missing (failing, not
# skipping, when it cannot), then drives it with tests/browser/stats_page.mjs (Node's WebSocket
# client talks the DevTools protocol; no other dependency).
#
# Usage: tests/browser/run.sh [SLUICE_BINARY]   (default target/release/sluice)
# The screenshot is left in target/browser/stats_page.png.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${1:-$root/target/release/sluice}"
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
if [ ! -x "$bin" ]; then
    echo "browser test: '$bin' is not an executable (cargo build --release first)" >&2
    exit 2
fi
if ! command -v chromium >/dev/null 2>&1; then
    echo "browser test: installing chromium (Debian package)" >&2
    if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
    "${sudo[@]}" apt-get update >/dev/null
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium </dev/null >/dev/null
fi
if ! command -v node >/dev/null 2>&1; then
    echo "browser test: node is required (Debian package nodejs)" >&2
    exit 2
fi
out="$root/target/browser"
mkdir -p "$out"
exec node --experimental-websocket --no-warnings "$root/tests/browser/stats_page.mjs" "$bin" "$out"
