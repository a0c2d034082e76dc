#!/usr/bin/env bash
# Regenerates .cargo/startup-order.txt: the functions gjc runs from exec to an idle, answered
# `get_state`, which the linker places side by side (see config.toml).
#
# Why: the kernel maps file-backed pages in 64 KB windows around each page touched, so start-up
# code scattered over the 7+ MB of .text makes ~60 windows resident; grouped, it makes a handful.
# The list holds mangled names; their hashes change with the toolchain or a dependency's version,
# and names that no longer exist are ignored. Rerun this after such a change and compare
# `bench_startup`'s idle RSS. Needs valgrind (apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."

# The ordered static glibc build (with the current list; the names are what matter here).
.cargo/release.sh glibc
bin=target/x86_64-unknown-linux-gnu/release/gjc
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# Start, answer two get_state requests (plain and with the tool and prompt dump), then idle.
{
    printf '%s\n' '{"id":"1","type":"get_state"}' \
        '{"id":"2","type":"get_state","include":["tools","systemPrompt"]}'
    sleep 3
} | valgrind --tool=callgrind --callgrind-out-file="$out" --demangle=no \
    "$bin" --mode rpc --no-session >/dev/null 2>&1

# Function names as callgrind first declares them: `fn=(12) name` or `cfn=(12) name`, with
# recursion depths (`'2`) removed, skipping unnamed addresses and the loader stub.
grep -hE '^c?fn=\([0-9]+\) ' "$out" |
    sed -E "s/^c?fn=\([0-9]+\) //; s/'[0-9]+$//" |
    grep -vE '^(0x|\(below main\))' |
    sort -u >.cargo/startup-order.txt
echo "$(wc -l <.cargo/startup-order.txt) functions in .cargo/startup-order.txt"

# Relink so the binary uses the new list.
.cargo/release.sh glibc
