//! A host that owns virtual files: registers a writable `db://` scheme and serves the agent's
//! reads and writes of `db://users/<id>` from an in-memory table. gjc runs in an empty scratch
//! folder, and the example fails unless the write reached the table: nothing lands on disk.
//!
//! `cargo build --release --bins --examples && target/release/examples/db_scheme`

use std::collections::BTreeMap;
use std::time::Duration;

use gjc::client::{Handlers, RpcClient, UriContent};
use gjc::protocol::command::{Command, HostUriSchemeDefinition, SetHostUriSchemesParams};
use gjc::protocol::frame::Event;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let script = json!({"turns": [
        {"content": [{"type": "toolCall", "name": "read", "arguments": {"path": "db://users/42"}}]},
        {"content": [{"type": "toolCall", "name": "write", "arguments": {"path": "db://users/42", "content": "id=42\nname=Alice Liddell\n"}}]},
        {"content": [{"type": "text", "text": "Updated user 42's name."}]}
    ]});
    // The working dir must stay empty; the script, sessions and registry live in the agent dir.
    // Both are removed at exit, also when a step fails; ~/.gjc is never touched.
    let scratch = tempfile::tempdir()?;
    let scratch = scratch.path();
    let agent_dir = tempfile::tempdir()?;
    let path = agent_dir.path().join("script.json");
    std::fs::write(&path, script.to_string())?;
    let mut rows: BTreeMap<String, String> = BTreeMap::from([(
        "db://users/42".to_string(),
        "id=42\nname=Alice\n".to_string(),
    )]);
    let mut gjc = RpcClient::builder(RpcClient::default_program())
        .args(["--provider", "scripted", "--script"])
        .arg(&path)
        .env("GJC_CODING_AGENT_DIR", agent_dir.path())
        .current_dir(scratch)
        .spawn()?;
    gjc.next_frame(WAIT)?;
    let db = HostUriSchemeDefinition {
        scheme: "db".into(),
        description: Some("Rows of the users table".into()),
        writable: true,
        immutable: false,
    };
    let r = gjc.call(
        Command::SetHostUriSchemes(SetHostUriSchemesParams { schemes: vec![db] }),
        WAIT,
    )?;
    println!("schemes: {}", r.data_as::<Value>()?["schemes"]);
    gjc.prompt("Set user 42's full name to Alice Liddell.", WAIT)?
        .data_as::<Value>()?;

    let mut handlers = Handlers::new().uri(|request| {
        println!("host_uri_request {} {}", request.operation, request.url);
        match (request.operation.as_str(), rows.get(&request.url)) {
            ("read", Some(row)) => Ok(UriContent::text(row.clone())),
            ("read", None) => Err(format!("{} not found", request.url)),
            _ => {
                let content = request.content.clone().unwrap_or_default();
                rows.insert(request.url.clone(), content);
                Ok(UriContent::default())
            }
        }
    });
    gjc.serve(&mut handlers, WAIT, |frame| {
        matches!(frame.event(), Some(Event::AgentEnd { .. }))
    })?;
    drop(handlers);
    println!("table now: {rows:?}");
    gjc.close_stdin();
    gjc.wait_exit(Duration::from_secs(5))
        .ok_or("gjc did not exit")?;
    let stray: Vec<_> = std::fs::read_dir(scratch)?.collect();
    if !stray.is_empty() {
        return Err("gjc wrote a local file instead of asking the host".into());
    }
    if rows["db://users/42"] != "id=42\nname=Alice Liddell\n" {
        return Err("the write never reached the host".into());
    }
    Ok(())
}
