//! Links the `gjc` binary for a quick start and a small idle footprint, where the toolchain's own
//! linker can do it (docs/architecture.md, "Start-up cost"):
//!
//! - Start-up code side by side. The kernel maps a binary's code in 64 KB windows around each
//!   page touched, so the ~700 functions of gjc that run from `exec` to an answered `get_state`,
//!   scattered over 10 MB of `.text`, would keep most of it resident at idle and fault it in one
//!   window at a time. The linker script `.cargo/startup-order.ld` places them first; it names
//!   them by patterns that survive the hash changes of ordinary edits, and patterns that match
//!   nothing are ignored, so a stale script costs start-up speed, never correctness.
//! - A position-dependent executable (`-no-pie`, as Go links by default and as the release
//!   script's static builds are). A position-independent one is relocated by the loader at every
//!   start (~19,000 relocations): it reads the relocation table (448 KB resident) and writes
//!   every pointer in `.data.rel.ro` (300 KB of private dirty pages), for the one benefit of a
//!   random address for the binary's own code; libraries, heap and stacks stay randomized.
//!
//! Only for release builds on x86_64 Linux with glibc, where Rust ships LLD with the toolchain
//! (`gcc-ld`), when no other linker was chosen (other linkers may not know the options) and
//! `GJC_NO_STARTUP_ORDER` is not set. Nothing else in the package is affected (the arguments
//! are for the `gjc` binary alone).

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Cargo does not watch files named in link arguments: `.cargo/startup-order.sh` touches
    // src/main.rs after writing the script, which relinks the binary.
    println!("cargo:rerun-if-env-changed=GJC_NO_STARTUP_ORDER");
    if std::env::var_os("GJC_NO_STARTUP_ORDER").is_some() {
        return;
    }
    // The shipped build only: debug and test binaries are linked often, and the script's
    // patterns add seconds to each link.
    if std::env::var("PROFILE").as_deref() != Ok("release") {
        return;
    }
    let Some(lld_dir) = toolchain_lld() else {
        return;
    };
    let script = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join(".cargo")
        .join("startup-order.ld");
    let mut args = vec![
        format!("-B{}", lld_dir.display()),
        "-fuse-ld=lld".to_string(),
    ];
    if script.is_file() {
        args.push(format!("-Wl,-T,{}", script.display()));
    }
    // After rustc's own `-pie`, which it overrides.
    args.push("-no-pie".to_string());
    for arg in args {
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
