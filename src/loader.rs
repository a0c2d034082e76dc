//! What gjc defines itself so that the dynamic loader has less to do at every start.
//!
//! `log2` is the only function gjc's dependencies take from libm (num-bigint estimates a
//! number's digits with it, under jsonschema). Defined here, the link needs nothing from libm,
//! `--as-needed` leaves libm out of the binary's needed libraries, and the loader neither maps
//! nor relocates it. Relocating libm runs the resolvers of its many CPU-specific functions,
//! spread over its code: that cost every start time and resident pages (docs/architecture.md,
//! "Start-up cost"). The definition is the `libm` crate's, the Rust
//! port of musl's, accurate to within one unit in the last place as glibc's is.

/// `log2(3)` for every caller in the process.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[no_mangle]
pub extern "C" fn log2(x: f64) -> f64 {
    libm::log2(x)
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    #[test]
    fn log2_agrees_with_the_exact_powers_and_its_edges() {
        for k in -1074..=1023i32 {
            // 2^k exactly: a normal number's exponent field, or a subnormal's one bit.
            let bits = if k >= -1022 {
                ((k + 1023) as u64) << 52
            } else {
                1u64 << (k + 1074)
            };
            assert_eq!(super::log2(f64::from_bits(bits)), f64::from(k), "2^{k}");
        }
        assert!((super::log2(10.0) - std::f64::consts::LOG2_10).abs() < 1e-15);
        assert!(super::log2(-1.0).is_nan());
        assert_eq!(super::log2(0.0), f64::NEG_INFINITY);
        assert_eq!(super::log2(f64::INFINITY), f64::INFINITY);
    }
}
