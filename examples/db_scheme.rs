//! A host that owns virtual files: registers a writable `db://` scheme and serves the agent's
//! reads and writes of `db://users/<id>` from an in-memory table. gjc runs in an empty scratch
//! folder, and the example fails unless the write reached the table: nothing lands on disk.
//!
//! `cargo build --release --bins --examples && target/release/examples/db_scheme`

use std::collections::BTreeMap;
use std::time::Duration;

use gjc::client::RpcClient;
use serde_json::json;

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
    gjc.recv(WAIT)?;
    let r = gjc.request(json!({"type": "set_host_uri_schemes", "schemes": [{"scheme": "db", "description": "Rows of the users table", "writable": true}]}), WAIT)?;
    println!("schemes: {}", r["data"]["schemes"]);
    gjc.request(
        json!({"type": "prompt", "message": "Set user 42's full name to Alice Liddell."}),
        WAIT,
    )?;
    loop {
        let f = gjc.recv(WAIT)?.value;
        if f["type"] == "host_uri_request" {
            let url = f["url"].as_str().unwrap_or("").to_string();
            println!("host_uri_request {} {url}", f["operation"]);
            let reply = match (f["operation"].as_str(), rows.get(&url)) {
                (Some("read"), Some(row)) => {
                    json!({"type": "host_uri_result", "id": f["id"], "content": row, "contentType": "text/plain"})
                }
                (Some("read"), None) => {
                    json!({"type": "host_uri_result", "id": f["id"], "isError": true, "error": format!("{url} not found")})
                }
                _ => {
                    rows.insert(url, f["content"].as_str().unwrap_or("").to_string());
                    json!({"type": "host_uri_result", "id": f["id"]})
                }
            };
            gjc.send(&reply)?;
        } else if f["payload"]["event_type"] == "agent_end" {
            break;
        }
    }
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
