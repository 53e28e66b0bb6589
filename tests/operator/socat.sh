#!/usr/bin/env bash
# Drives the runtime API the way operators' scripts do: `echo CMD | socat stdio UNIX:sock`,
# `show stat` cut with awk, `disable server` and `set weight` checked in the CSV afterwards.
# Usage: tests/operator/socat.sh path/to/sluice
set -euo pipefail

binary=$(realpath "$1")
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; cat "$work/stderr" >&2 2>/dev/null || true; rm -rf "$work"' EXIT

cat > "$work/op.cfg" <<CFG
global
    stats socket $work/admin.sock level admin
defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
frontend fe
    bind $work/fe.sock
    default_backend be
backend be
    server s1 127.0.0.1:1
    server s2 127.0.0.1:2 weight 7
CFG
"$binary" -db -f "$work/op.cfg" 2> "$work/stderr" &
pid=$!
for _ in $(seq 100); do
    [ -S "$work/admin.sock" ] && break
    sleep 0.05
done

cli() {
    echo "$1" | socat stdio "UNIX-CONNECT:$work/admin.sock"
}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# The field of server $1 named $2 in `show stat`, found by its header like scripts do.
field() {
    cli "show stat" | awk -F, -v sv="$1" -v name="$2" '
        NR == 1 { sub(/^# /, ""); for (i = 1; i <= NF; i++) col[$i] = i; next }
        $1 == "be" && $2 == sv { print $(col[name]) }'
}

header=$(cli "show stat" | head -1)
case "$header" in
    "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,"*) ;;
    *) fail "unexpected header: $header" ;;
esac
rows=$(cli "show stat" | awk -F, 'NF > 2' | wc -l)
[ "$rows" -eq 5 ] || fail "expected 5 lines (header, fe, s1, s2, be), got $rows"
[ "$(field s2 weight)" = 7 ] || fail "s2 weight is $(field s2 weight)"
[ "$(field s1 status)" = "no check" ] || fail "s1 status is $(field s1 status)"

[ -z "$(cli "disable server be/s1" | tr -d '\n')" ] || fail "disable server answered something"
[ "$(field s1 status)" = MAINT ] || fail "s1 is $(field s1 status) after disable"
cli "set weight be/s2 3" > /dev/null
[ "$(cli "get weight be/s2")" = "3 (initial 7)" ] || fail "get weight: $(cli "get weight be/s2")"
[ "$(field s2 weight)" = 3 ] || fail "s2 weight is $(field s2 weight) after set weight"
# Several commands on one line, as `;` lists.
[ "$(cli "enable server be/s1; show stat be 4 1" | awk -F, '$2 == "s1" { print $18 }')" = "no check" ] ||
    fail "enable server in a ; list"
echo "ok   socat drives show stat, disable server and set weight"
