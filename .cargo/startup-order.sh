#!/usr/bin/env bash
# Regenerates .cargo/startup-order.ld: a linker script that places the functions gjc runs from
# exec to an idle, answered `get_state` side by side, in the default release build (build.rs)
# and in the ordered static glibc build (release.sh).
#
# Why: the kernel maps file-backed pages in 64 KB windows around each page touched, so start-up
# code scattered over the 10 MB of .text makes ~100 windows resident; grouped, it makes a handful.
#
# The script names input sections (`.text.<mangled name>`, one per function) by pattern, with the
# parts of a mangled name that change without the function changing replaced by `*`: the legacy
# hash (`17h<16 hex digits>E`), v0 crate disambiguators (`Cs<base62>_`) and ThinLTO's `.llvm.<n>`
# suffix. Those change with the toolchain, a dependency's version, the build's target options
# (the default and the static build name the same function differently) and ThinLTO's module
# hashes, so an exact list of names goes stale with almost any change; the patterns only when
# start-up runs other functions. A pattern may match several instances of a generic function,
# and a pattern that matches nothing is ignored: a stale script costs start-up speed, never
# correctness. Rerun this after start-up changes and compare the startup benchmark's idle RSS
# (cargo bench --bench startup). Needs valgrind (apt-get install valgrind).
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."

out=$(mktemp)
names=$(mktemp)
agent=$(mktemp -d)
trap 'rm -rf "$out" "$names" "$agent"' EXIT

# Start, answer two get_state requests (plain and with the tool and prompt dump), then idle; the
# function names as callgrind first declares them: `fn=(12) name` or `cfn=(12) name`, with
# recursion depths (`'2`) removed, skipping unnamed addresses and the loader stub. Run with the
# session file and registry as the startup benchmark does, and with `--no-session`.
record() {
    {
        printf '%s\n' '{"id":"1","type":"get_state"}' \
            '{"id":"2","type":"get_state","include":["tools","systemPrompt"]}'
        sleep 3
    } | GJC_CODING_AGENT_DIR="$agent" valgrind --tool=callgrind --callgrind-out-file="$out" \
        --demangle=no "$@" >/dev/null 2>&1
    grep -hE '^c?fn=\([0-9]+\) ' "$out" |
        sed -E "s/^c?fn=\([0-9]+\) //; s/'[0-9]+$//" |
        grep -vE '^(0x|\(below main\))' >>"$names"
}

# The binary cargo builds (CARGO_TARGET_DIR, when set, moves it).
gjc="${CARGO_TARGET_DIR:-target}/release/gjc"
cargo build --release --locked --bin gjc
record "$gjc" --mode rpc
record "$gjc" --mode rpc --no-session

# One pattern per function that ran, for the sections LLVM names after it (`.text.unlikely.`
# for cold functions). A ThinLTO suffix and v0 crate disambiguators become `*`; the legacy hash
# does too where the build holds one instance of the name, and stays where it holds several
# (generic code), so that the other instances stay where they are.
normalize() {
    sed -E 's/\.llvm\.[0-9]+$//; s/Cs[0-9A-Za-z]+_/Cs*_/g'
}
patterns() {
    local defined counts
    defined=$(mktemp)
    counts=$(mktemp)
    nm --defined-only "$gjc" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | sort -u >"$defined"
    normalize <"$defined" | sed -E 's/17h[0-9a-f]{16}E$/17h*E/' | sort | uniq -c |
        awk '{ print $2, $1 }' >"$counts"
    sort -u "$names" | comm -12 - "$defined" | normalize | sort -u |
        awk -v counts="$counts" '
            BEGIN { while ((getline line < counts) > 0) { split(line, f, " "); n[f[1]] = f[2] } }
            { g = $0; sub(/17h[0-9a-f]+E$/, "17h*E", g); print (n[g] == 1 ? g : $0) }' |
        grep -E '^[A-Za-z0-9_.$*]+$' | sort -u |
        sed -E 's/^(.*)$/    *(.text.\1 .text.\1.* .text.unlikely.\1 .text.unlikely.\1.*)/'
    rm -f "$defined" "$counts"
}

{
    echo '/* Made by .cargo/startup-order.sh: the functions that run from exec to an answered'
    echo '   get_state, placed side by side before the rest of .text (docs/architecture.md,'
    echo '   "Start-up cost"). */'
    echo 'SECTIONS {'
    echo '  .text.startup_order : {'
    patterns
    echo '  }'
    echo '}'
    echo 'INSERT BEFORE .text;'
} >.cargo/startup-order.ld
echo "$(grep -c '^    \*' .cargo/startup-order.ld) patterns in .cargo/startup-order.ld"

# Relink so the build uses the new script (cargo does not track it).
touch src/main.rs
cargo build --release --locked --bin gjc
