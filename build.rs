//! Links the `gjc` binary with its start-up functions side by side, where the toolchain's own
//! linker can do it (docs/architecture.md, "Start-up cost").
//!
//! The kernel maps a binary's code in 64 KB windows around each page touched, so the ~800
//! functions that run from `exec` to an answered `get_state`, scattered over 10 MB of `.text`,
//! would keep most of it resident at idle and fault it in one window at a time. LLD places the
//! functions named in `.cargo/startup-order.txt` first, in that order (names it does not find
//! are ignored, so a stale list costs start-up speed, never correctness).
//!
//! Only for x86_64 Linux with glibc, where Rust ships LLD with the toolchain (`gcc-ld`), and only
//! when no other linker was chosen: other linkers do not know the option. Nothing else in the
//! package is affected (the arguments are for the `gjc` binary alone).

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Cargo does not watch files named in link arguments: `.cargo/startup-order.sh` touches
    // src/main.rs after writing the list, which relinks the binary.
    println!("cargo:rerun-if-env-changed=GJC_NO_STARTUP_ORDER");
    if std::env::var_os("GJC_NO_STARTUP_ORDER").is_some() {
        return;
    }
    let Some(lld_dir) = toolchain_lld() else {
        return;
    };
    let list = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join(".cargo")
        .join("startup-order.txt");
    if !list.is_file() {
        return;
    }
    for arg in [
        format!("-B{}", lld_dir.display()),
        "-fuse-ld=lld".to_string(),
        format!("-Wl,--symbol-ordering-file={}", list.display()),
        "-Wl,--no-warn-symbol-ordering".to_string(),
    ] {
        println!("cargo:rustc-link-arg-bin=gjc={arg}");
    }
}

/// The folder of the toolchain's LLD driver shim, when the target is x86_64 Linux with glibc,
/// the build uses the default linker, and the toolchain has the shim.
fn toolchain_lld() -> Option<PathBuf> {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("TARGET") != "x86_64-unknown-linux-gnu" || var("HOST") != var("TARGET") {
        return None;
    }
    // A linker chosen in the configuration or the flags may not be LLD.
    if std::env::var_os("RUSTC_LINKER").is_some() {
        return None;
    }
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    if ["linker", "fuse-ld", "link-self-contained"]
        .iter()
        .any(|f| flags.contains(f))
    {
        return None;
    }
    let rustc = std::env::var_os("RUSTC")?;
    let out = std::process::Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8(out.stdout).ok()?;
    let dir = Path::new(sysroot.trim())
        .join("lib/rustlib")
        .join(var("TARGET"))
        .join("bin/gcc-ld");
    dir.join("ld.lld").is_file().then_some(dir)
}
