#!/usr/bin/env bash
# The test command: everything CI checks, in order, stopping at the first failure.
#
#   1. tools: varnishtest (Debian package "varnish"), ss (iproute2), rustfmt and clippy,
#      installed if missing;
#      dependencies fetched (cargo fetch)
#   2. cargo fmt --all -- --check
#   3. cargo clippy --workspace --all-targets -- -D warnings
#   4. cargo test --workspace             (unit tests and the end-to-end tests of crates/sluice)
#   5. cargo build --release
#   6. tests/run-vtc.sh target/release/sluice   (varnishtest scenarios under tests/vtc)
#   7. tests/browser/run.sh target/release/sluice (the stats page in headless Chromium, which
#      it installs from Debian's packages if missing)
#   8. tests/operator/socat.sh target/release/sluice (the runtime API driven through socat, as
#      operators' scripts do; socat is installed if missing)
#   9. fuzz/run-seeds.sh (every fuzz target replays its committed seeds once)
#
# Optional: VTC_REFERENCE=/usr/sbin/haproxy also runs the varnishtest scenarios against that
# HAProxy first, proving they describe HAProxy's behaviour.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() {
    printf '\n==> %s\n' "$*"
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "test.sh: need root to run: $*" >&2
        return 1
    fi
}

if ! command -v varnishtest >/dev/null 2>&1; then
    step "installing varnishtest (package varnish)"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends varnish </dev/null
fi
if ! command -v ss >/dev/null 2>&1; then
    # `ss` reads the proxy's socket options in tests/packet_marks.rs.
    step "installing ss (package iproute2)"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iproute2 </dev/null
fi
for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
        step "installing $component"
        rustup component add "$component"
    fi
done

step "cargo fetch"
cargo fetch

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test --workspace"
cargo test --workspace

step "cargo build --release"
cargo build --release

if [ -n "${VTC_REFERENCE:-}" ]; then
    step "varnishtest scenarios against the reference $VTC_REFERENCE"
    bash tests/run-vtc.sh "$VTC_REFERENCE"
fi

step "varnishtest scenarios against target/release/sluice"
bash tests/run-vtc.sh target/release/sluice

step "stats page in a browser (tests/browser/run.sh)"
bash tests/browser/run.sh target/release/sluice

step "runtime API through socat (tests/operator/socat.sh)"
if ! command -v socat >/dev/null 2>&1; then
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends socat </dev/null
fi
bash tests/operator/socat.sh target/release/sluice

step "fuzz targets on their seeds (fuzz/run-seeds.sh)"
bash fuzz/run-seeds.sh

step "all checks passed"
