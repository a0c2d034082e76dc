//! Path handling shared by the file tools: `~` expansion, a leading `@` (models copy it from
//! mentions), relative paths against the session cwd, and a few text helpers.

use std::path::{Path, PathBuf};

/// `path` as a local path: `~` is `home` (`Settings::home`, `/` when unset), a relative path
/// is under `cwd`.
pub fn resolve(cwd: &Path, home: Option<&Path>, path: &str) -> PathBuf {
    let path = path.strip_prefix('@').unwrap_or(path);
    let home = || home.map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    if path == "~" {
        return home();
    }
    if let Some(rest) = path.strip_prefix("~/") {
        return home().join(rest);
    }
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

/// The scheme of a URL-shaped path (`db://users/42`, `https://…`): RFC 3986 scheme characters
/// (a letter, then letters, digits, `+ . -`) followed by `://`. Such a path is never a local
/// file: without a host to serve it, `Path` would read `foo:` as a directory name.
pub fn url_scheme(path: &str) -> Option<&str> {
    let path = path.strip_prefix('@').unwrap_or(path);
    let (scheme, _) = path.split_once("://")?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c));
    valid.then_some(scheme)
}

/// A path for display: relative to `base` when inside it.
pub fn display(base: &Path, path: &Path) -> String {
    path.strip_prefix(base)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

/// Human-readable byte size.
pub fn size(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes}B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1}KB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1}MB", bytes as f64 / (1024.0 * 1024.0))
    }
}

/// Cuts a line to `max` characters, saying so.
pub fn clip_line(line: &str, max: usize) -> (String, bool) {
    match line.char_indices().nth(max) {
        Some((i, _)) => (format!("{}... [truncated]", &line[..i]), true),
        None => (line.to_string(), false),
    }
}

/// Standard base64 with padding (images for the model).
pub fn base64(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_home_and_at() {
        let cwd = Path::new("/work/x");
        assert_eq!(resolve(cwd, None, "a/b"), PathBuf::from("/work/x/a/b"));
        assert_eq!(resolve(cwd, None, "@a"), PathBuf::from("/work/x/a"));
        assert_eq!(resolve(cwd, None, "/etc"), PathBuf::from("/etc"));
    }

    /// `~` is the home the settings give, not the test process's `HOME`.
    #[test]
    fn tilde_is_the_settings_home() {
        let settings = crate::settings::Settings::from_vars(|name| {
            (name == "HOME").then(|| "/home/someone".to_string())
        });
        let cwd = Path::new("/work/x");
        let home = settings.home.as_deref();
        assert_eq!(resolve(cwd, home, "~"), PathBuf::from("/home/someone"));
        assert_eq!(resolve(cwd, home, "~/a"), PathBuf::from("/home/someone/a"));
        assert_eq!(resolve(cwd, None, "~/a"), PathBuf::from("/a"));
    }

    #[test]
    fn url_shaped_paths_have_a_scheme() {
        assert_eq!(url_scheme("db://users/42"), Some("db"));
        assert_eq!(url_scheme("@notes+v2://a"), Some("notes+v2"));
        assert_eq!(url_scheme("https://example.com"), Some("https"));
        assert_eq!(url_scheme("src/main.rs"), None);
        assert_eq!(url_scheme("./foo://x"), None);
        assert_eq!(url_scheme("1x://y"), None);
        assert_eq!(url_scheme("a/b://c"), None);
    }

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
