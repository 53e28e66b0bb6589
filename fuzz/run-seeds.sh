#!/usr/bin/env bash
# Replays the committed seeds (and the configuration corpus of tests/cfg) through every fuzz
# target once, with the stable toolchain and a debug build (overflow checks on): the targets
# keep compiling and their invariants hold on known inputs. Finding new inputs is the job of
# `cargo +nightly fuzz run <target>` (README.md here), not of the test suite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

cargo fmt -- --check
# Its own target directory, whatever CARGO_TARGET_DIR says: the binaries are run from there.
cargo build --quiet --bins --target-dir target
for dir in seeds/*/; do
    target=$(basename "$dir")
    inputs=("$dir"*)
    if [ "$target" = config ]; then
        inputs+=(../tests/cfg/ok/*.cfg ../tests/cfg/err/*.cfg)
    fi
    printf '%s: %d inputs\n' "$target" "${#inputs[@]}"
    # libFuzzer runs each file named on its command line once and fails on the first crash.
    "target/debug/$target" -runs=1 "${inputs[@]}"
done
