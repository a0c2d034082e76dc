//! Shared by the benchmarks (`cargo bench --bench <name>`): statistics, process memory, the gjc
//! binary, the command line.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

#[path = "../../tests/support/procfs.rs"]
mod procfs;
#[allow(unused_imports)]
pub use procfs::*;

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `GJC_BIN` when set, else the `gjc` that cargo built with this benchmark (same profile).
pub fn gjc_bin() -> PathBuf {
    std::env::var_os("GJC_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gjc")))
}

/// The benchmark's own arguments (what follows `--` in `cargo bench --bench <name> -- ...`),
/// without the `--bench` flag that `cargo bench` appends for test harnesses.
pub fn args() -> std::vec::IntoIter<String> {
    std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect::<Vec<_>>()
        .into_iter()
}

/// Whether a process whose command line contains `pattern` exists.
pub fn running(pattern: &str) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(Result::ok).any(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        text.starts_with(pattern)
            && std::fs::read_to_string(e.path().join("stat"))
                .map(|s| !s.contains(") Z "))
                .unwrap_or(false)
    })
}
