#!/usr/bin/env bash
# Regenerates .cargo/startup-order.txt: the functions gjc runs from exec to an idle, answered
# `get_state`, which the linker places side by side: in the default release build (build.rs) and
# in the ordered static glibc build (release.sh).
#
# Why: the kernel maps file-backed pages in 64 KB windows around each page touched, so start-up
# code scattered over the 10 MB of .text makes ~100 windows resident; grouped, it makes a handful.
# The list holds mangled names; their hashes change with the toolchain, a dependency's version
# and the build's target options (the default build and the static one name the same function
# differently, so the list holds both builds' names), and names that no longer exist are ignored.
# Rerun this after such a change and compare the startup benchmark's idle RSS
# (cargo bench --bench startup). Needs valgrind (apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."

out=$(mktemp)
names=$(mktemp)
trap 'rm -f "$out" "$names"' EXIT

# Start, answer two get_state requests (plain and with the tool and prompt dump), then idle; the
# function names as callgrind first declares them: `fn=(12) name` or `cfn=(12) name`, with
# recursion depths (`'2`) removed, skipping unnamed addresses and the loader stub.
record() {
    {
        printf '%s\n' '{"id":"1","type":"get_state"}' \
            '{"id":"2","type":"get_state","include":["tools","systemPrompt"]}'
        sleep 3
    } | valgrind --tool=callgrind --callgrind-out-file="$out" --demangle=no \
        "$1" --mode rpc --no-session >/dev/null 2>&1
    grep -hE '^c?fn=\([0-9]+\) ' "$out" |
        sed -E "s/^c?fn=\([0-9]+\) //; s/'[0-9]+$//" |
        grep -vE '^(0x|\(below main\))' >>"$names"
}

# The builds with the current list (the names are what matter here).
cargo build --release --locked --bin gjc
record target/release/gjc
.cargo/release.sh glibc
record target/x86_64-unknown-linux-gnu/release/gjc
sort -u "$names" >.cargo/startup-order.txt
echo "$(wc -l <.cargo/startup-order.txt) functions in .cargo/startup-order.txt"

# Relink both so they use the new list (cargo does not track the file).
touch src/main.rs
cargo build --release --locked --bin gjc
.cargo/release.sh glibc
