#!/usr/bin/env bash
# Release binaries of gjc for Linux x86_64, beyond what a plain `cargo build --release` gives
# (which works on any platform Rust supports and puts the binary at target/release/gjc):
#
#   musl   target/x86_64-unknown-linux-musl/release/gjc: static, non-PIE, needs nothing from
#          the system (not even libc), for minimal containers (FROM scratch, distroless, Alpine).
#   glibc  target/x86_64-unknown-linux-gnu/release/gjc: static glibc, non-PIE, with the functions
#          that run at start-up placed side by side (.cargo/startup-order.ld, made by
#          .cargo/startup-order.sh). The kernel maps code in 64 KB windows around each page
#          touched, so grouping start-up code keeps the idle resident set small. Static glibc
#          still loads NSS modules for some name lookups (getaddrinfo with /etc/nsswitch.conf
#          beyond "files dns"): run it where the system glibc matches, else prefer musl.
#
# Usage: .cargo/release.sh [musl|glibc|all]   (default: all). Each build is checked with `file`
# and `ldd` and prints where it went. The flags are given with an explicit --target so that
# build scripts and proc macros, which run on the build machine, are built without them.
set -euo pipefail
cd "$(dirname "$0")/.."

# Cargo's unambiguous form of RUSTFLAGS: arguments separated by 0x1f, so paths may hold spaces.
encoded() {
    local IFS=$'\x1f'
    printf '%s' "$*"
}

# Static and non-PIE: no loader, no shared libraries to find, no self-relocation at start-up.
STATIC=(-C target-feature=+crt-static -C relocation-model=static)

# Fails unless `file` and `ldd` both see a static executable; a check that cannot run says so.
check_static() {
    local bin=$1
    if command -v file >/dev/null; then
        file "$bin"
        file "$bin" | grep -q 'statically linked' || { echo "error: $bin is not statically linked" >&2; exit 1; }
    else
        echo "note: 'file' is not installed; skipping that check"
    fi
    if command -v ldd >/dev/null; then
        # ldd exits non-zero for a static executable; its message is the check.
        local out
        out=$(ldd "$bin" 2>&1 || true)
        echo "ldd: $out"
        case $out in
            *"not a dynamic executable"* | *"statically linked"*) ;;
            *) echo "error: ldd lists shared libraries for $bin" >&2; exit 1 ;;
        esac
    fi
    "$bin" --version
}

build_musl() {
    local target=x86_64-unknown-linux-musl
    if ! rustc --print target-libdir --target "$target" >/dev/null 2>&1 ||
        [ ! -d "$(rustc --print target-libdir --target "$target")" ]; then
        echo "installing the $target standard library (needs network once)"
        rustup target add "$target" || {
            echo "error: the $target target is not installed and rustup could not add it;" \
                "run 'rustup target add $target' where the network is available" >&2
            exit 1
        }
    fi
    # The musl target links with the C runtime that ships with Rust, but ring (TLS) compiles C
    # for the target: that needs a musl C compiler (Debian, Ubuntu: apt-get install musl-tools).
    if ! command -v x86_64-linux-musl-gcc >/dev/null && ! command -v musl-gcc >/dev/null; then
        echo "error: no musl C compiler (x86_64-linux-musl-gcc or musl-gcc) for ring's C code;" \
            "install musl-tools (apt-get install musl-tools) or the distribution's musl-gcc" >&2
        exit 1
    fi
    CARGO_ENCODED_RUSTFLAGS=$(encoded "${STATIC[@]}") cargo build --release --locked --bin gjc --target "$target"
    check_static "target/$target/release/gjc"
}

build_glibc() {
    local target=x86_64-unknown-linux-gnu
    # Use the LLD that ships with Rust through its compiler-driver shim, whatever the system
    # linker is, as the default build does. Patterns that match nothing are ignored, so a stale
    # script costs start-up speed, never correctness.
    local gcc_ld
    gcc_ld="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/gcc-ld"
    local order=(
        -C "link-arg=-B$gcc_ld" -C link-arg=-fuse-ld=lld
        -C "link-arg=-Wl,-T,$PWD/.cargo/startup-order.ld"
    )
    # Cargo does not track the script: relink whenever it may have changed.
    touch src/main.rs
    CARGO_ENCODED_RUSTFLAGS=$(encoded "${STATIC[@]}" "${order[@]}") cargo build --release --locked --bin gjc --target "$target"
    check_static "target/$target/release/gjc"
}

case "${1:-all}" in
    musl) build_musl ;;
    glibc) build_glibc ;;
    all) build_musl && build_glibc ;;
    *) echo "usage: $0 [musl|glibc|all]" >&2; exit 2 ;;
esac
