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

/// 16 bytes from this thread's generator.
#[cfg(feature = "agent")]
fn random_bytes() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&next_u64().to_le_bytes());
    bytes[8..].copy_from_slice(&next_u64().to_le_bytes());
    bytes
}

/// A random RFC 9562 version-4 UUID, lower-case and hyphenated. `uuid` sets the version and
/// variant bits and writes the text; the bytes come from [`next_u64`] rather than from `uuid`'s
/// own `v4`, which asks the OS for randomness on every call: one is made per event frame.
#[cfg(feature = "agent")]
pub fn uuid_v4() -> String {
    uuid::Builder::from_random_bytes(random_bytes())
        .into_uuid()
        .to_string()
}

/// A time-ordered version-7 UUID (session ids sort by creation time).
#[cfg(feature = "agent")]
pub fn uuid_v7() -> String {
    let bytes = random_bytes();
    let mut rest = [0u8; 10];
    rest.copy_from_slice(&bytes[..10]);
    uuid::Builder::from_unix_timestamp_millis(now_ms(), &rest)
        .into_uuid()
        .to_string()
}

/// A short random hex id (tool call ids, entry ids).
pub fn short_id() -> String {
    format!("{:016x}", next_u64())
}

/// The longest id accepted from outside (session ids, run ids).
pub const MAX_ID_LEN: usize = 128;

/// The one pattern every id that names a file must match, wherever it comes from (a session
/// file's header, a command, a record): 1 to 128 ASCII letters, digits, `.`, `_`, `:` or `-`,
/// not starting with `.`. Such an id is one harmless file-name component: never empty, `.`,
/// `..`, absolute, nor holding a `/` or a NUL.
pub fn is_valid_id(id: &str) -> bool {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-');
    (1..=MAX_ID_LEN).contains(&id.len()) && !id.starts_with('.') && id.bytes().all(allowed)
}

/// Why `id` was refused, for error messages.
pub fn invalid_id(what: &str, id: &str) -> String {
    let shown: String = id.chars().take(MAX_ID_LEN + 8).collect();
    format!(
        "invalid {what} {shown:?}: an id is 1 to {MAX_ID_LEN} letters, digits, '.', '_', ':' or '-', not starting with '.'"
    )
}

/// Why an id cannot name a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdError {
    /// The id does not match [`is_valid_id`].
    Invalid(String),
    /// The id and suffix together would not be one name directly in `dir`.
    Leaves {
        name: String,
        dir: std::path::PathBuf,
    },
}

impl std::fmt::Display for IdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdError::Invalid(id) => f.write_str(&invalid_id("id", id)),
            IdError::Leaves { name, dir } => {
                write!(f, "{name} does not stay in {}", dir.display())
            }
        }
    }
}

impl std::error::Error for IdError {}

/// `<dir>/<name>` for a file named after an id: `name` must be `id` (checked against
/// [`is_valid_id`]) with a fixed `suffix`, and the joined path must stay directly in `dir`.
pub fn join_id(
    dir: &std::path::Path,
    id: &str,
    suffix: &str,
) -> Result<std::path::PathBuf, IdError> {
    if !is_valid_id(id) {
        return Err(IdError::Invalid(id.to_string()));
    }
    let path = dir.join(format!("{id}{suffix}"));
    // Belt and braces: a suffix holding a separator would also leave the folder.
    let stays = path.parent() == Some(dir)
        && path
            .file_name()
            .is_some_and(|n| n.as_encoded_bytes() == format!("{id}{suffix}").as_bytes());
    if !stays {
        return Err(IdError::Leaves {
            name: format!("{id}{suffix}"),
            dir: dir.to_path_buf(),
        });
    }
    Ok(path)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// An ISO-8601 UTC timestamp with milliseconds, e.g. `2026-06-05T05:00:00.000Z`.
#[cfg(feature = "agent")]
pub fn iso_now() -> String {
    iso_from_ms(now_ms())
}

/// The timestamp `ms` milliseconds after the epoch, always with three fraction digits (the form
/// JavaScript's `toISOString` writes, which session files share with their other readers).
#[cfg(feature = "agent")]
pub fn iso_from_ms(ms: u64) -> String {
    let at = i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    format!("{at:.3}")
}

/// Milliseconds since the epoch of an RFC 3339 timestamp (`2026-06-05T05:00:00.000Z`; any
/// fraction, `Z` or an offset). `None` for anything else or a time before 1970.
#[cfg(feature = "agent")]
pub fn ms_from_iso(s: &str) -> Option<u64> {
    let at: jiff::Timestamp = s.parse().ok()?;
    u64::try_from(at.as_millisecond()).ok()
}

#[cfg(all(test, feature = "agent"))]
mod tests {
    use super::*;

    #[test]
    fn uuids_have_version_and_variant() {
        let a = uuid_v4();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
        assert_ne!(a, uuid_v4());
        let v7 = uuid_v7();
        assert_eq!(&v7[14..15], "7");
        assert!(matches!(&v7[19..20], "8" | "9" | "a" | "b"));
        // The first 48 bits are the creation time in milliseconds.
        let ms = u64::from_str_radix(&v7[..13].replace('-', ""), 16).unwrap();
        assert!(now_ms().abs_diff(ms) < 60_000);
    }

    #[test]
    fn ids_that_name_files_stay_one_component() {
        for id in [
            "abc",
            "0192f0c4-3b1e-7c55-9a3e-5d2b1f4e8a01",
            "ed:conv.7_x",
            "a..",
        ] {
            assert!(is_valid_id(id), "{id}");
        }
        let long = "a".repeat(129);
        for id in [
            "",
            ".",
            "..",
            ".hidden",
            "../../x",
            "/etc/x",
            "a/b",
            "a\\b",
            "a b",
            "a\0b",
            "\u{7}",
            "é",
            long.as_str(),
        ] {
            assert!(!is_valid_id(id), "{id:?}");
        }
        let dir = std::path::Path::new("/agent/s");
        assert_eq!(
            join_id(dir, "abc", ".json").unwrap(),
            std::path::PathBuf::from("/agent/s/abc.json")
        );
        let e = join_id(dir, "/etc/x", ".json").unwrap_err();
        assert_eq!(e, IdError::Invalid("/etc/x".into()));
        assert!(e.to_string().starts_with("invalid id \"/etc/x\""), "{e}");
        assert!(join_id(dir, "../../x", ".json").is_err());
        assert!(matches!(
            join_id(dir, "abc", "/../../x"),
            Err(IdError::Leaves { name, .. }) if name == "abc/../../x"
        ));
    }

    #[test]
    fn iso_dates() {
        assert_eq!(iso_from_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_from_ms(1_780_635_600_123), "2026-06-05T05:00:00.123Z");
        for ms in [0, 951_782_400_123, 1_700_000_000_000, 4_102_444_800_999] {
            assert_eq!(ms_from_iso(&iso_from_ms(ms)), Some(ms));
        }
        assert_eq!(ms_from_iso("1970-01-01T00:00:01Z"), Some(1000));
        assert_eq!(ms_from_iso("1970-01-01T00:00:00.5Z"), Some(500));
        assert_eq!(
            ms_from_iso("2026-06-05T07:00:00+02:00"),
            Some(1_780_635_600_000)
        );
        for bad in [
            "",
            "2026-06-05",
            "2026-06-05T05:00:00.000",
            "2026-13-05T05:00:00Z",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(ms_from_iso(bad), None, "{bad}");
        }
    }
}
