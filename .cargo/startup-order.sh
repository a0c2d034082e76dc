#!/usr/bin/env bash
# Regenerates .cargo/startup-order.ld: a linker script that places the functions gjc runs from
# exec to an idle, answered `get_state` side by side, and the read-only data they read, in the
# default release build (build.rs) and in the ordered static glibc build (release.sh).
#
# Why: the kernel maps file-backed pages in 64 KB windows around each page touched, so start-up
# code scattered over the 10 MB of .text makes ~100 windows resident; grouped, it makes a handful.
# The same holds for the ~300 constants start-up reads (tables, messages, vtables' neighbours)
# among the 10,000 in .rodata: scattered, they kept 9 windows resident; grouped, 3.
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
# (cargo bench --bench startup). Needs valgrind (apt-get install valgrind) and python3.
#
# The constants are found by address: valgrind's lackey tool lists every load and store of a
# run, the linker's map of the same build says which input section (`.rodata.<symbol>` or
# `.rodata..Lanon.<crate>.<n>`) holds each address, and those sections are placed before the rest
# of .rodata, next to the linker's merged strings and literals (which start it). The anonymous
# constants' numbers change when their crate changes, so this part goes stale sooner than the
# functions': rerun the script.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."

out=$(mktemp)
names=$(mktemp)
agent=$(mktemp -d)
map=$(mktemp)
loads=$(mktemp)
trap 'rm -rf "$out" "$names" "$agent" "$map" "$loads"' EXIT

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

# The data addresses start-up reads or writes, one per line in hex, deduplicated (lackey writes
# ` L addr,size`, ` S ...` and ` M ...` lines to its log; instructions are `I` lines).
record_loads() {
    local trace
    trace=$(mktemp)
    {
        printf '%s\n' '{"id":"1","type":"get_state"}' \
            '{"id":"2","type":"get_state","include":["tools","systemPrompt"]}'
        sleep 3
    } | GJC_CODING_AGENT_DIR="$agent" valgrind --tool=lackey --trace-mem=yes \
        --log-file="$trace" "$@" >/dev/null 2>&1
    awk '/^ [LSM] / { split($2, f, ","); print f[1] }' "$trace" | sort -u >>"$loads"
    rm -f "$trace"
}

# The binary cargo builds (CARGO_TARGET_DIR, when set, moves it), with the linker's map of it (the
# map changes nothing in the binary).
gjc="${CARGO_TARGET_DIR:-target}/release/gjc"
cargo rustc --release --locked --bin gjc -- -C link-arg=-Wl,-Map="$map"
record "$gjc" --mode rpc
record "$gjc" --mode rpc --no-session
record_loads "$gjc" --mode rpc
record_loads "$gjc" --mode rpc --no-session

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

# The .rodata input sections that hold an address start-up touched, by the linker's map.
touched_data() {
    python3 - "$map" "$loads" <<'PY'
import bisect, re, sys
sections, inside = [], False
line = re.compile(r"\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s+(\S.*):\((\.rodata\.[^)]+)\)\s*$")
for text in open(sys.argv[1]):
    fields = text.split()
    if len(fields) == 5 and fields[4].startswith("."):
        # .rodata, and the section the script made last time (its constants are still read).
        inside = fields[4] in (".rodata", ".rodata.startup_order")
        continue
    m = inside and line.match(text)
    # The linker's own merged sections (strings, literals) are not named by input: they stay.
    if m and not m.group(3).startswith("<internal>"):
        sections.append((int(m.group(1), 16), int(m.group(2), 16), m.group(4)))
sections.sort()
starts = [s[0] for s in sections]
for text in open(sys.argv[2]):
    address = int(text, 16)
    i = bisect.bisect_right(starts, address) - 1
    if i >= 0 and address < sections[i][0] + sections[i][1]:
        print(sections[i][2])
PY
}

# Those sections named as `patterns` names functions (a ThinLTO suffix, a crate disambiguator or
# a legacy hash becomes `*`).
data_patterns() {
    touched_data | normalize | sed -E 's/17h[0-9a-f]{16}E$/17h*E/' |
        grep -E '^[A-Za-z0-9_.$*]+$' | sort -u | sed -E 's/^(.*)$/    *(\1 \1.*)/'
}

{
    echo '/* Made by .cargo/startup-order.sh: the functions that run from exec to an answered'
    echo '   get_state, placed side by side before the rest of .text, and the read-only data'
    echo '   they read, before the rest of .rodata (docs/architecture.md, "Start-up cost"). */'
    echo 'SECTIONS {'
    echo '  .text.startup_order : {'
    patterns
    echo '  }'
    echo '}'
    echo 'INSERT BEFORE .text;'
    echo 'SECTIONS {'
    echo '  .rodata.startup_order : {'
    data_patterns
    echo '  }'
    echo '}'
    echo 'INSERT BEFORE .rodata;'
} >.cargo/startup-order.ld
echo "$(grep -c '^    \*(.text' .cargo/startup-order.ld) function and $(grep -c '^    \*(.rodata' .cargo/startup-order.ld) data patterns in .cargo/startup-order.ld"

# Relink so the build uses the new script (cargo does not track it).
touch src/main.rs
cargo build --release --locked --bin gjc
