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
//! These two only for release builds on x86_64 Linux with glibc, where Rust ships LLD with the
//! toolchain (`gcc-ld`), when no other linker was chosen (other linkers may not know the
//! options) and `GJC_NO_STARTUP_ORDER` is not set.
//!
//! - The unwinder linked in (`libgcc_eh.a`) instead of loaded (`libgcc_s.so.1`), in every
//!   profile on Linux with glibc when the C compiler has the archive and no other linker was
//!   chosen: one shared library fewer for the loader to find, map and bind at each start, and no
//!   run of its constructor, which asks the CPU for its features (each `cpuid` a trap to the
//!   hypervisor in a virtual machine). A trivial Rust program linked so started 0.10–0.18 ms
//!   sooner, and gjc 0.09–0.19 ms.
//!
//! Nothing else in the package is affected (the arguments are for the `gjc` binary alone).

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    static_unwinder();
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

/// Rust's `unwind` crate asks the linker for `-lgcc_s`. A folder searched first holds a
/// `libgcc_s.so` that is a linker script naming the C compiler's static unwinder, so that
/// request takes `libgcc_eh.a` (what `-static-libgcc` would, which Rust's explicit `-lgcc_s`
/// overrides).
fn static_unwinder() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("HOST") != var("TARGET")
        || custom_linker()
    {
        return;
    }
    let Ok(out) = std::process::Command::new("cc")
        .arg("-print-file-name=libgcc_eh.a")
        .output()
    else {
        return;
    };
    let archive = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // Without the archive, cc prints the bare name back.
    if !archive.is_absolute() || !archive.is_file() {
        return;
    }
    // The script names the archive by path: a compiler upgrade that moves it runs this again.
    println!("cargo:rerun-if-changed={}", archive.display());
    let dir = PathBuf::from(var("OUT_DIR")).join("static-unwinder");
    let script = format!("INPUT({})\n", archive.display());
    if std::fs::create_dir_all(&dir).is_err()
        || std::fs::write(dir.join("libgcc_s.so"), script).is_err()
    {
        return;
    }
    println!("cargo:rustc-link-arg-bin=gjc=-L{}", dir.display());
}

/// Whether a linker was chosen in the configuration or the flags (it may not be LLD, or may not
/// read linker scripts).
fn custom_linker() -> bool {
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    std::env::var_os("RUSTC_LINKER").is_some()
        || ["linker", "fuse-ld", "link-self-contained"]
            .iter()
            .any(|f| flags.contains(f))
}

/// The folder of the toolchain's LLD driver shim, when the target is x86_64 Linux with glibc,
/// the build uses the default linker, and the toolchain has the shim.
fn toolchain_lld() -> Option<PathBuf> {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("TARGET") != "x86_64-unknown-linux-gnu" || var("HOST") != var("TARGET") {
        return None;
    }
    if custom_linker() {
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
