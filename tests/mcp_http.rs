//! MCP servers as tools over streamable HTTP: the reference "everything" server from npm in its
//! `streamableHttp` mode (installed in tests/mcp with `npm ci`; a test that cannot find it
//! fails), bound to 127.0.0.1 by a preload (tests/mcp/loopback.cjs), and a small HTTP server of
//! our own for the failure paths.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Value};

use crate::mcp::{
    abort_during_progress, add, call, fixtures, reference_calls_checked, results, say, state_event,
    text_of,
};
use crate::support::{gjc, TIMEOUT};

/// The reference server in streamable HTTP mode; killed when dropped.
pub(crate) struct Everything {
    child: Child,
    pub url: String,
    /// What it prints on stdout, line by line (one line per request it receives).
    pub stdout: crossbeam_channel::Receiver<String>,
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the reference server on a free port of 127.0.0.1 and waits (bounded) until it says
/// it listens; missing is a failure, never a skip.
pub(crate) fn everything_http() -> Everything {
    let entry = crate::mcp::everything_entry();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new("node")
        .arg("--require")
        .arg(fixtures().join("loopback.cjs"))
        .arg(&entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node is needed for the MCP tests");
    let stdout = child.stdout.take().unwrap();
    let (out_tx, out_rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = out_tx.send(line);
        }
    });
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        // Read to the end, so the server never blocks on a full pipe.
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let server = Everything {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
        stdout: out_rx,
    };
    let deadline = Instant::now() + TIMEOUT;
    let mut said = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("listening on port") => return server,
            Ok(line) => said.push(line),
            Err(_) => panic!("the reference server did not start: {said:?}"),
        }
    }
}

#[test]
fn the_reference_server_over_http_lists_calls_reports_progress_and_returns_images() {
    let everything = everything_http();
    let mut g = gjc()
        .script(json!({"turns": [
            call("mcp__everything__echo", json!({"message": "hello http"})),
            call("mcp__everything__get-tiny-image", json!({})),
            call("mcp__everything__trigger-long-running-operation", json!({"duration": 1, "steps": 3})),
            say("done"),
        ]}))
        .spawn();
    add(&mut g, "everything", json!({"url": everything.url}));
    let ready = state_event(&mut g, "everything", "ready");
    assert!(ready["tools"].as_u64().unwrap() >= 5, "{ready}");

    g.ok(json!({"type": "prompt", "message": "use the tools"}));
    let events = g.run_events();
    let ends = reference_calls_checked(&events, 3, "hello http");
    assert_eq!(ends[2]["isError"], false, "{}", ends[2]);
}

#[test]
fn aborting_a_long_call_over_http_cancels_it_and_the_server_stays_ready() {
    let everything = everything_http();
    let mut g = gjc()
        .script(json!({"turns": [
            call("mcp__everything__trigger-long-running-operation", json!({"duration": 60, "steps": 60})),
            call("mcp__everything__echo", json!({"message": "still here"})),
            say("after"),
        ]}))
        .spawn();
    add(&mut g, "everything", json!({"url": everything.url}));
    state_event(&mut g, "everything", "ready");
    abort_during_progress(&mut g);
    // The session on the server goes on.
    g.ok(json!({"type": "prompt", "message": "again"}));
    let ends = results(&g.run_events());
    assert!(text_of(&ends[0]).contains("still here"), "{}", ends[0]);
}

/// One request as our server read it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

type Handler = dyn Fn(&Seen, &mut TcpStream) + Send + Sync;

/// A small HTTP/1.1 server on 127.0.0.1 (a thread per connection); the handler writes each
/// answer. Returns its URL and what it was sent.
pub(crate) fn serve(
    handler: impl Fn(&Seen, &mut TcpStream) + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let handler: Arc<Handler> = Arc::new(handler);
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let (log, handler) = (log.clone(), handler.clone());
            std::thread::spawn(move || connection(stream, &log, &*handler));
        }
    });
    (url, seen)
}

fn connection(mut stream: TcpStream, log: &Mutex<Vec<Seen>>, handler: &Handler) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            match h.trim_end().split_once(':') {
                Some((k, v)) => headers.push((k.trim().to_string(), v.trim().to_string())),
                None => break,
            }
        }
        let length: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let seen = Seen {
            method: line.split(' ').next().unwrap_or("").to_string(),
            headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        };
        log.lock().unwrap().push(seen.clone());
        handler(&seen, &mut stream);
    }
}

pub(crate) fn reply(stream: &mut TcpStream, status: &str, headers: &[(&str, &str)], body: &str) {
    let mut head = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let _ = stream.write_all(format!("{head}\r\n{body}").as_bytes());
}

/// A reply to `request` as an SSE answer, with its priming event first.
pub(crate) fn sse_result(
    stream: &mut TcpStream,
    extra: &[(&str, &str)],
    request: &Value,
    result: Value,
) {
    let message = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
    let body = format!("id: p\ndata: \n\nevent: message\ndata: {message}\n\n");
    let mut headers = vec![("content-type", "text/event-stream")];
    headers.extend_from_slice(extra);
    reply(stream, "200 OK", &headers, &body);
}

#[test]
fn a_refused_token_is_a_failed_state_with_the_servers_challenge() {
    let (url, _) = serve(|_, stream| {
        let challenge = r#"Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource", scope="tools""#;
        reply(
            stream,
            "401 Unauthorized",
            &[("www-authenticate", challenge)],
            "",
        )
    });
    let mut g = gjc().script(json!({"turns": []})).spawn();
    add(&mut g, "locked", json!({"url": url}));
    let failed = state_event(&mut g, "locked", "failed");
    let reason = failed["reason"].as_str().unwrap();
    assert!(
        reason.contains("needs OAuth authorization: Bearer resource_metadata=\"https://mcp.example/.well-known/oauth-protected-resource\", scope=\"tools\"")
            && reason.contains("gjc does not run OAuth flows"),
        "{failed}"
    );
    // The old HTTP+SSE transport is a failed state that says so.
    add(&mut g, "old", json!({"type": "sse", "url": url}));
    let failed = state_event(&mut g, "old", "failed");
    assert!(
        failed["reason"]
            .as_str()
            .unwrap()
            .contains("HTTP+SSE transport (type \"sse\") is not supported"),
        "{failed}"
    );
}

/// A legacy server with one session at a time, which forgets it after its first `tools/call`
/// and answers calls with that session 404 from then on; `endless` streams one event forever.
fn forgetful(seen: &Seen, stream: &mut TcpStream, sessions: &Mutex<u32>, forgotten: &Mutex<bool>) {
    let m = &seen.body;
    let current = format!("s{}", *sessions.lock().unwrap());
    let session_ok = seen.header("mcp-session-id") == Some(current.as_str());
    match m["method"].as_str() {
        Some("initialize") => {
            let id = {
                let mut n = sessions.lock().unwrap();
                *n += 1;
                format!("s{n}")
            };
            *forgotten.lock().unwrap() = false;
            let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}});
            sse_result(stream, &[("mcp-session-id", &id)], m, result);
        }
        Some(_) if !session_ok || *forgotten.lock().unwrap() => {
            reply(stream, "404 Not Found", &[], "session not found")
        }
        Some("tools/list") => {
            let tool = |name: &str| json!({"name": name, "inputSchema": {"type": "object"}});
            sse_result(
                stream,
                &[],
                m,
                json!({"tools": [tool("ok"), tool("endless")]}),
            );
        }
        Some("tools/call") if m["params"]["name"] == "endless" => {
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\nid: p\ndata: \n\ndata: ",
            );
            let chunk = [b'x'; 64 * 1024];
            while stream.write_all(&chunk).is_ok() {}
        }
        Some("tools/call") => {
            *forgotten.lock().unwrap() = true;
            let text = format!("fine in {current}");
            sse_result(
                stream,
                &[],
                m,
                json!({"content": [{"type": "text", "text": text}]}),
            );
        }
        Some(_) if m.get("id").is_some() => {
            sse_result(stream, &[], m, json!({}));
        }
        _ => reply(stream, "202 Accepted", &[], ""),
    }
}

#[test]
fn a_forgotten_session_is_opened_again_on_the_next_call_with_the_configured_headers() {
    let sessions = Arc::new(Mutex::new(0));
    let forgotten = Arc::new(Mutex::new(false));
    let (s, f) = (sessions.clone(), forgotten.clone());
    let (url, seen) = serve(move |seen, stream| forgetful(seen, stream, &s, &f));
    let agent = tempfile::tempdir().unwrap();
    let server = json!({"type": "http", "url": url,
        "headers": {"Authorization": "Bearer ${GJC_TEST_MCP_TOKEN}", "X-Team": "tools"}});
    std::fs::write(
        agent.path().join("mcp.json"),
        json!({"mcpServers": {"remote": server}}).to_string(),
    )
    .unwrap();
    let mut g = gjc()
        .env("GJC_CODING_AGENT_DIR", agent.path().to_str().unwrap())
        .env("GJC_TEST_MCP_TOKEN", "t0ken-from-env")
        .script(json!({"turns": [
            call("mcp__remote__ok", json!({})),
            call("mcp__remote__ok", json!({})),
            call("mcp__remote__ok", json!({})),
            say("done"),
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let ends = results(&g.run_events());
    assert_eq!(text_of(&ends[0]), "fine in s1", "{}", ends[0]);
    // The server forgot the session: that call fails and says so...
    assert_eq!(ends[1]["isError"], true);
    assert!(
        text_of(&ends[1]).contains("ended the MCP session (HTTP 404)"),
        "{}",
        ends[1]
    );
    // ...and the next one opens a new session, without waiting out a back-off.
    assert_eq!(text_of(&ends[2]), "fine in s2", "{}", ends[2]);
    let seen = seen.lock().unwrap().clone();
    let posts: Vec<&Seen> = seen.iter().filter(|s| !s.body.is_null()).collect();
    assert!(posts.len() >= 6, "{seen:?}");
    for s in &posts {
        assert_eq!(s.header("authorization"), Some("Bearer t0ken-from-env"));
        assert_eq!(s.header("x-team"), Some("tools"));
    }
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["mcpServers"][0]["state"], "ready", "{state}");
    assert!(
        !state.to_string().contains("t0ken-from-env"),
        "header values are never shown"
    );
}

#[test]
fn an_endless_event_stream_is_cut_at_the_cap_and_the_server_goes_on() {
    let sessions = Arc::new(Mutex::new(0));
    let forgotten = Arc::new(Mutex::new(false));
    let (s, f) = (sessions.clone(), forgotten.clone());
    let (url, _) = serve(move |seen, stream| forgetful(seen, stream, &s, &f));
    let mut g = gjc()
        .script(json!({"turns": [
            call("mcp__remote__endless", json!({})),
            call("mcp__remote__ok", json!({})),
            say("done"),
        ]}))
        .spawn();
    add(&mut g, "remote", json!({"url": url}));
    state_event(&mut g, "remote", "ready");
    g.ok(json!({"type": "prompt", "message": "go"}));
    let ends = results(&g.run_events());
    assert_eq!(ends[0]["isError"], true);
    assert!(text_of(&ends[0]).contains("over 16 MB"), "{}", ends[0]);
    assert_eq!(text_of(&ends[1]), "fine in s1", "{}", ends[1]);
}
