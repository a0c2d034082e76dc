//! Where a session's MCP servers come from: `mcp.json` in the agent dir and, for a trusted
//! project only, `.gjc/mcp.json`, in the shape users already keep for other agents:
//! `{"mcpServers": {"name": {"command", "args", "env", "cwd"} | {"url", "headers"}}}`.
//! `${VAR}` and `${VAR:-default}` are expanded in `env` and `headers`; the values are secrets
//! and are never logged (errors name the variable, never a value).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

/// A config file larger than this is refused: it is a list of commands, not data.
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// More servers than this in one session is a mistake, not a setup.
pub const MAX_SERVERS: usize = 64;

/// How to reach one server.
#[derive(Clone, PartialEq, Eq)]
pub enum Spec {
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to gjc's environment, expanded.
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP; the headers go with every request.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// The old HTTP+SSE transport: accepted in the config, reported as failed (not supported).
    Sse { url: String },
}

impl std::fmt::Debug for Spec {
    // Values of env and headers are secrets: only their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Spec::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.iter().map(|(k, _)| k).collect::<Vec<_>>())
                .field("cwd", cwd)
                .finish(),
            Spec::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field(
                    "headers",
                    &headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                )
                .finish(),
            Spec::Sse { url } => f.debug_struct("Sse").field("url", url).finish(),
        }
    }
}

/// One configured server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    pub name: String,
    pub spec: Spec,
    /// How long starting (handshake and listing) may take.
    pub startup_timeout: Duration,
    /// How long one tool call may go without an answer or progress.
    pub tool_timeout: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(rename = "mcpServers", default)]
    mcp_servers: BTreeMap<String, Value>,
}

#[derive(Deserialize)]
struct Entry {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// `"stdio"`, `"http"` or `"sse"` (Claude's files say so; Cursor's leave it out).
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(rename = "startupTimeoutSec")]
    startup_timeout_sec: Option<f64>,
    #[serde(rename = "toolTimeoutSec")]
    tool_timeout_sec: Option<f64>,
}

/// A timeout in seconds from the config, bounded to something sane.
fn seconds(value: Option<f64>, default: f64) -> Duration {
    let secs = value
        .filter(|v| v.is_finite() && *v > 0.0)
        .unwrap_or(default);
    Duration::from_secs_f64(secs.clamp(0.05, 3600.0))
}

/// A server name: 1-64 letters, digits, `_`, `-` or `.`, without `__` (which separates the
/// server from the tool in `mcp__<server>__<tool>`, so `a` never covers `a__b`).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !name.contains("__");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid MCP server name {name:?}: 1-64 letters, digits, _, - or ., without \"__\""
        ))
    }
}

/// The servers of the agent dir's `mcp.json` and, when the project is trusted, of its
/// `.gjc/mcp.json` (a project server replaces an agent-dir server of the same name). A broken
/// file is an error for that file only: the other file's servers still come.
pub fn load(agent_dir: &Path, project: &Path, trusted: bool) -> (Vec<ServerConfig>, Vec<String>) {
    let mut servers: Vec<ServerConfig> = Vec::new();
    let mut errors = Vec::new();
    let mut files = vec![agent_dir.join("mcp.json")];
    if trusted {
        files.push(project.join(".gjc").join("mcp.json"));
    }
    for path in files {
        match read_file(&path, &|v| std::env::var(v).ok()) {
            Ok(found) => {
                for server in found {
                    servers.retain(|s| s.name != server.name);
                    servers.push(server);
                }
            }
            Err(e) => errors.push(format!("{}: {e}", path.display())),
        }
    }
    servers.truncate(MAX_SERVERS);
    (servers, errors)
}

/// One file's servers; a missing file has none.
fn read_file(
    path: &Path,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ServerConfig>, String> {
    let text = match crate::fs::bounded::read_to_string(
        path,
        MAX_FILE_BYTES,
        crate::fs::bounded::Links::Follow,
    ) {
        Ok(text) => text,
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(e) => return Err(e.to_string()),
    };
    parse(&text, var)
}

/// Parses a config file's text.
pub fn parse(
    text: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ServerConfig>, String> {
    let file: File = serde_json::from_str(text)
        .map_err(|e| format!("invalid mcp.json: {}", redact(&e.to_string())))?;
    if file.mcp_servers.len() > MAX_SERVERS {
        return Err(format!("more than {MAX_SERVERS} servers"));
    }
    file.mcp_servers
        .into_iter()
        .map(|(name, value)| entry(&name, value, var).map_err(|e| e.to_string()))
        .collect()
}

/// Why a server's entry was refused: which server and what is wrong with it. Its values never
/// appear, since env values and headers may hold keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryError {
    /// The name breaks the naming rule (`check_name`'s words).
    Name(String),
    /// Not an entry of the expected shape (serde's words, values redacted).
    Shape {
        server: String,
        message: String,
    },
    /// A `${VAR}` in the env value or header `key` that cannot be expanded.
    Variable {
        server: String,
        key: String,
        message: String,
    },
    EmptyCommand(String),
    /// A `url` that is not an http(s) URL gjc can use.
    Url {
        server: String,
        message: String,
    },
    /// Neither a `command` nor a `url`, or both, or a `type` that does not go with the one given.
    NoTransport(String),
}

impl std::fmt::Display for EntryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EntryError::Name(message) => f.write_str(message),
            EntryError::Shape { server, message } | EntryError::Url { server, message } => {
                write!(f, "MCP server {server}: {message}")
            }
            EntryError::Variable {
                server,
                key,
                message,
            } => write!(f, "MCP server {server}: {key}: {message}"),
            EntryError::EmptyCommand(server) => write!(f, "MCP server {server}: empty command"),
            EntryError::NoTransport(server) => write!(
                f,
                "MCP server {server}: give either \"command\" (stdio) or \"url\" (HTTP)"
            ),
        }
    }
}

impl std::error::Error for EntryError {}

/// One server's entry (also the shape of `mcp_add_server`'s `config`).
pub fn entry(
    name: &str,
    value: Value,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, EntryError> {
    check_name(name).map_err(EntryError::Name)?;
    let server = || name.to_string();
    let e: Entry = serde_json::from_value(value).map_err(|e| EntryError::Shape {
        server: server(),
        message: redact(&e.to_string()),
    })?;
    let expand_all = |map: BTreeMap<String, String>| {
        map.into_iter()
            .map(|(key, v)| match expand(&v, var) {
                Ok(v) => Ok((key, v)),
                Err(message) => Err(EntryError::Variable {
                    server: server(),
                    key,
                    message,
                }),
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let spec = match (e.command, e.url) {
        (Some(command), None) if e.kind.as_deref().is_none_or(|k| k == "stdio") => {
            if command.trim().is_empty() {
                return Err(EntryError::EmptyCommand(server()));
            }
            Spec::Stdio {
                command,
                args: e.args,
                env: expand_all(e.env)?,
                cwd: e.cwd.map(PathBuf::from),
            }
        }
        (None, Some(url)) if e.kind.as_deref().is_none_or(|k| k == "http" || k == "sse") => {
            super::http::check_url(&url).map_err(|message| EntryError::Url {
                server: server(),
                message,
            })?;
            if e.kind.as_deref() == Some("sse") {
                Spec::Sse { url }
            } else {
                Spec::Http {
                    url,
                    headers: expand_all(e.headers)?,
                }
            }
        }
        _ => return Err(EntryError::NoTransport(server())),
    };
    Ok(ServerConfig {
        name: name.to_string(),
        spec,
        startup_timeout: seconds(e.startup_timeout_sec, 10.0),
        tool_timeout: seconds(e.tool_timeout_sec, 60.0),
    })
}

/// A parse error without the quoted text it may carry (serde quotes the string it found where
/// another type was expected, and that string may be a secret).
fn redact(message: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in message.chars() {
        match (c, quoted) {
            ('"', false) => {
                quoted = true;
                out.push_str("\"…");
            }
            ('"', true) => {
                quoted = false;
                out.push('"');
            }
            (_, true) => {}
            (c, false) => out.push(c),
        }
    }
    out
}

/// `${VAR}` and `${VAR:-default}`; an unset variable without a default is an error naming it.
pub fn expand(text: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| "unterminated ${ in value".to_string())?;
        let body = &after[..end];
        let (name, default) = match body.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (body, None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("invalid variable name {name:?}"));
        }
        match (
            var(name).filter(|v| !v.is_empty() || default.is_none()),
            default,
        ) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(format!("variable {name} is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_string())
    }

    #[test]
    fn expands_variables_with_defaults() {
        assert_eq!(expand("Bearer ${TOKEN}", &vars).unwrap(), "Bearer s3cret");
        assert_eq!(expand("${NOPE:-x}-${TOKEN:-y}", &vars).unwrap(), "x-s3cret");
        let err = expand("${NOPE}", &vars).unwrap_err();
        assert!(err.contains("NOPE") && !err.contains("s3cret"), "{err}");
        assert!(expand("${TOKEN", &vars).is_err());
    }

    /// A config file that is a FIFO, a link to `/dev/zero` or too large is an error for that
    /// file at once (nothing blocks or reads without end), and the other file still counts.
    #[test]
    fn hostile_config_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let (agent, project) = (dir.path().join("agent"), dir.path().join("project"));
        std::fs::create_dir_all(project.join(".gjc")).unwrap();
        std::fs::create_dir_all(&agent).unwrap();
        let good = r#"{"mcpServers": {"ok": {"command": "true"}}}"#;
        std::fs::write(project.join(".gjc/mcp.json"), good).unwrap();
        let fifo = std::ffi::CString::new(agent.join("mcp.json").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo only reads the NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let (servers, errors) = load(&agent, &project, true);
        assert_eq!(servers.len(), 1, "{errors:?}");
        assert_eq!(errors.len(), 1, "the FIFO is refused: {errors:?}");

        std::fs::remove_file(agent.join("mcp.json")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", agent.join("mcp.json")).unwrap();
        let (servers, errors) = load(&agent, &project, true);
        assert_eq!((servers.len(), errors.len()), (1, 1), "{errors:?}");

        std::fs::remove_file(agent.join("mcp.json")).unwrap();
        let huge = vec![b' '; MAX_FILE_BYTES as usize + 1];
        std::fs::write(agent.join("mcp.json"), huge).unwrap();
        let (servers, errors) = load(&agent, &project, true);
        assert_eq!((servers.len(), errors.len()), (1, 1), "{errors:?}");
    }

    #[test]
    fn parses_stdio_and_http_and_checks_names() {
        let text = r#"{"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "x"], "env": {"K": "${TOKEN}"}},
            "web": {"type": "http", "url": "https://x/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
        }}"#;
        let servers = parse(text, &vars).unwrap();
        assert_eq!(servers.len(), 2);
        assert!(matches!(&servers[0].spec, Spec::Stdio { env, .. } if env[0].1 == "s3cret"));
        assert!(!format!("{:?}", servers).contains("s3cret"));
        assert!(parse(r#"{"mcpServers": {"a__b": {"command": "x"}}}"#, &vars).is_err());
        assert!(parse(r#"{"mcpServers": {"a": {}}}"#, &vars).is_err());
        assert!(parse(
            r#"{"mcpServers": {"a": {"command": "x", "url": "y"}}}"#,
            &vars
        )
        .is_err());
        assert!(parse(r#"{"servers": {}}"#, &vars).is_err());
        let err = parse(
            r#"{"mcpServers": {"a": {"command": "x", "args": "s3cret"}}}"#,
            &vars,
        )
        .unwrap_err();
        assert!(
            err.contains("invalid type") && !err.contains("s3cret"),
            "{err}"
        );
    }

    #[test]
    fn a_refused_entry_says_which_server_and_why_without_its_values() {
        let refused = |name: &str, value: Value| entry(name, value, &vars).unwrap_err();
        assert!(matches!(
            refused("a__b", json!({"command": "x"})),
            EntryError::Name(_)
        ));
        assert_eq!(
            refused("a", json!({"command": " "})),
            EntryError::EmptyCommand("a".into())
        );
        assert_eq!(
            refused("a", json!({"command": "x", "url": "y"})).to_string(),
            "MCP server a: give either \"command\" (stdio) or \"url\" (HTTP)"
        );
        assert!(matches!(
            refused("a", json!({"url": "ftp://x"})),
            EntryError::Url { server, .. } if server == "a"
        ));
        let missing = refused("a", json!({"command": "x", "env": {"K": "${NOPE} s3cret"}}));
        assert!(
            matches!(&missing, EntryError::Variable { server, key, .. } if server == "a" && key == "K"),
            "{missing:?}"
        );
        let shape = refused("a", json!({"command": "x", "args": "s3cret"}));
        assert!(matches!(shape, EntryError::Shape { .. }));
        assert!(!shape.to_string().contains("s3cret"), "{shape}");
    }
}
