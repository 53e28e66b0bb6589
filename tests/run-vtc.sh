#!/usr/bin/env bash
# Runs every tests/vtc/**/*.vtc with varnishtest against a proxy binary.
#
# Usage: tests/run-vtc.sh [BINARY]
#   BINARY defaults to target/release/sluice. Any HAProxy-compatible binary works, e.g.
#   tests/run-vtc.sh /usr/sbin/haproxy checks that the tests encode HAProxy's behaviour.
# Environment: VTC_JOBS (parallel tests, default 2), VTC_TIMEOUT (seconds per test, default
# 120).
#
# Prints varnishtest's log of every failing test, then a last line "N passed, M failed", and
# exits non-zero if any test failed (or none ran).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$root/target/release/sluice}"

# varnishtest starts the program from its own working directory: the path must be absolute.
case "$bin" in
    /*) ;;
    */*) bin="$PWD/$bin" ;;
    *) bin="$(command -v "$bin" || echo "$bin")" ;;
esac
if [ ! -x "$bin" ]; then
    echo "run-vtc: '$bin' is not an executable (build it first: cargo build --release)" >&2
    echo "0 passed, 0 failed"
    exit 2
fi
if ! command -v varnishtest >/dev/null 2>&1; then
    echo "run-vtc: varnishtest not found (Debian/Ubuntu: apt-get install varnish)" >&2
    echo "0 passed, 0 failed"
    exit 2
fi

mapfile -t files < <(find "$root/tests/vtc" -type f -name '*.vtc' | LC_ALL=C sort)
if [ "${#files[@]}" -eq 0 ]; then
    echo "run-vtc: no .vtc file under $root/tests/vtc" >&2
    echo "0 passed, 0 failed"
    exit 1
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT

echo "run-vtc: ${#files[@]} tests against $bin"
HAPROXY_PROGRAM="$bin" varnishtest \
    -j "${VTC_JOBS:-2}" -k -t "${VTC_TIMEOUT:-120}" "${files[@]}" >"$log" 2>&1
status=$?

# The full log of failing tests, then one line per test ("# top TEST <file> passed|FAILED").
grep -v -E '^#[[:space:]]+top[[:space:]]+TEST .* passed' "$log" | grep -v -E '^[0-9]+ tests failed' || true
grep -E '^#[[:space:]]+top[[:space:]]+TEST .* passed' "$log" || true

passed=$(grep -c -E '^#[[:space:]]+top[[:space:]]+TEST .* passed' "$log")
failed=$(grep -c -E '^#[[:space:]]+top[[:space:]]+TEST .* FAILED' "$log")
skipped=$(grep -c -E '^#[[:space:]]+top[[:space:]]+TEST .* skipped' "$log")
# Tests that left no verdict (varnishtest itself crashed or was killed) count as failed.
missing=$(( ${#files[@]} - passed - failed - skipped ))
if [ "$missing" -gt 0 ]; then
    failed=$(( failed + missing ))
fi
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1
fi
if [ "$skipped" -gt 0 ]; then
    echo "run-vtc: $skipped test(s) skipped"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
