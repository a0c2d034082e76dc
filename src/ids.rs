//! Identifiers and clocks: UUIDs for frames and sessions, millisecond timestamps, ISO-8601 times.
//! A small splitmix64 generator seeded from the OS serves ids; none of them guards a secret.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

thread_local! {
    static STATE: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let mut bytes = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut bytes);
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let tid = std::thread::current().id();
    u64::from_le_bytes(bytes) ^ nanos ^ (std::process::id() as u64) << 32 ^ hash_of(&tid)
}

fn hash_of<T: std::hash::Hash>(t: &T) -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(t)
}

/// The next pseudo-random 64-bit number of this thread's generator.
pub fn next_u64() -> u64 {
    STATE.with(|s| {
        let mut z = s.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        s.set(z);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

fn format_uuid(mut bytes: [u8; 16], version: u8) -> String {
    bytes[6] = (bytes[6] & 0x0f) | (version << 4);
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A random RFC 4122 version-4 UUID, lower-case and hyphenated.
pub fn uuid_v4() -> String {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&next_u64().to_le_bytes());
    bytes[8..].copy_from_slice(&next_u64().to_le_bytes());
    format_uuid(bytes, 4)
}

/// A time-ordered version-7 UUID (session ids sort by creation time).
pub fn uuid_v7() -> String {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&next_u64().to_le_bytes());
    bytes[8..].copy_from_slice(&next_u64().to_le_bytes());
    let ms = now_ms();
    bytes[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    format_uuid(bytes, 7)
}

/// A short random hex id (tool call ids, entry ids).
pub fn short_id() -> String {
    format!("{:016x}", next_u64())
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// An ISO-8601 UTC timestamp with milliseconds, e.g. `2026-06-05T05:00:00.000Z`.
pub fn iso_now() -> String {
    iso_from_ms(now_ms())
}

pub fn iso_from_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_have_version_and_variant() {
        let a = uuid_v4();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
        assert_ne!(a, uuid_v4());
        assert_eq!(&uuid_v7()[14..15], "7");
    }

    #[test]
    fn iso_dates() {
        assert_eq!(iso_from_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_from_ms(1_780_635_600_123), "2026-06-05T05:00:00.123Z");
    }
}
