//! The GET side of streamable HTTP: the stream a handshake-era server pushes on outside any
//! request (opened once the handshake is over, resumed with `Last-Event-ID`, ended with its
//! server) and the resumption of a POST's event stream that broke before its reply. Against the
//! reference server where it can show it, and against a small HTTP server of our own for what
//! it will not do on demand.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use serde_json::{json, Value};

use crate::mcp::{add, call, results, say, state_event, text_of};
use crate::mcp_http::{everything_http, reply, serve, sse_result, Seen};
use crate::support::procfs::threads;
use crate::support::{gjc, Gjc, TIMEOUT};

/// The GET stream's thread name.
const GET_THREAD: &str = "gjc-mcp-get";

/// How many of gjc's threads carry the GET stream's name.
fn get_threads(g: &Gjc) -> usize {
    let pid = g.client.pid();
    threads(pid).iter().filter(|n| *n == GET_THREAD).count()
}

/// Waits (bounded) until gjc has `n` GET stream threads.
fn await_get_threads(g: &Gjc, n: usize) {
    let deadline = Instant::now() + TIMEOUT;
    while get_threads(g) != n {
        assert!(
            Instant::now() < deadline,
            "gjc still has {} {GET_THREAD} threads, not {n}",
            get_threads(g)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The next item of `rx`, bounded.
fn next<T>(rx: &Receiver<T>, what: &str) -> T {
    rx.recv_timeout(TIMEOUT)
        .unwrap_or_else(|_| panic!("{what} never came"))
}

type Tools = Arc<Mutex<Vec<String>>>;

/// A handshake-era server's POSTs: session `s1`, the tools in `tools`, each call answered
/// with its name; the era probe refused as the reference server does, other requests `{}`,
/// notifications and responses 202.
fn legacy_post(seen: &Seen, stream: &mut TcpStream, tools: &Tools) {
    let m = &seen.body;
    match m["method"].as_str() {
        Some("server/discover") => reply(
            stream,
            "400 Bad Request",
            &[("content-type", "application/json")],
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Server not initialized"}}"#,
        ),
        Some("initialize") => {
            let result = json!({"protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": true}}});
            sse_result(stream, &[("mcp-session-id", "s1")], m, result);
        }
        Some("tools/list") => {
            let list: Vec<Value> = tools
                .lock()
                .unwrap()
                .iter()
                .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
                .collect();
            sse_result(stream, &[], m, json!({"tools": list}));
        }
        Some("tools/call") => {
            let text = format!("called {}", m["params"]["name"].as_str().unwrap_or(""));
            sse_result(
                stream,
                &[],
                m,
                json!({"content": [{"type": "text", "text": text}]}),
            );
        }
        Some(_) if m.get("id").is_some() => sse_result(stream, &[], m, json!({})),
        _ => reply(stream, "202 Accepted", &[], ""),
    }
}

/// Starts an event stream answer (its end is the connection's close).
fn open_stream(stream: &mut TcpStream) {
    let head =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n";
    let _ = stream.write_all(head.as_bytes());
}

fn send(stream: &mut TcpStream, text: &str) {
    let _ = stream.write_all(text.as_bytes());
    let _ = stream.flush();
}

/// Blocks until the client closes the connection (bounded); `true` when it did.
fn until_closed(stream: &mut TcpStream) -> bool {
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return e.kind() != std::io::ErrorKind::WouldBlock,
        }
    }
}

const LIST_CHANGED: &str =
    "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";

/// A legacy server whose GETs `on_get` answers (with the GET's number, from 0); every GET is
/// also sent on the returned channel.
fn legacy_server(
    tools: &[&str],
    on_get: impl Fn(usize, &Seen, &mut TcpStream, &Tools) + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<Seen>>>, Receiver<Seen>, Tools) {
    let tools: Tools = Arc::new(Mutex::new(tools.iter().map(|t| t.to_string()).collect()));
    let (gets_tx, gets): (Sender<Seen>, Receiver<Seen>) = unbounded();
    let count = Arc::new(Mutex::new(0));
    let t = tools.clone();
    let (url, seen) = serve(move |seen, stream| {
        if seen.method != "GET" {
            return legacy_post(seen, stream, &t);
        }
        let n = {
            let mut c = count.lock().unwrap();
            *c += 1;
            *c - 1
        };
        let _ = gets_tx.send(seen.clone());
        on_get(n, seen, stream, &t);
        let _ = stream.shutdown(std::net::Shutdown::Both);
    });
    (url, seen, gets, tools)
}

#[test]
fn the_reference_server_gets_a_get_stream_that_ends_with_its_server() {
    let everything = everything_http();
    let mut g = gjc()
        .script(json!({"turns": [
            call("mcp__everything__echo", json!({"message": "with a stream"})),
            say("done"),
        ]}))
        .spawn();
    add(&mut g, "everything", json!({"url": everything.url}));
    state_event(&mut g, "everything", "ready");
    let opened = |everything: &crate::mcp_http::Everything| loop {
        let line = next(&everything.stdout, "the reference server's GET stream");
        if line.contains("Establishing new SSE stream for session") {
            return;
        }
    };
    opened(&everything);
    await_get_threads(&g, 1);
    g.ok(json!({"type": "prompt", "message": "go"}));
    let ends = results(&g.run_events());
    assert_eq!(text_of(&ends[0]), "Echo: with a stream", "{}", ends[0]);

    // A restart ends the old stream and opens one for the new session: one thread, never two.
    g.ok(json!({"type": "restart_mcp_server", "name": "everything"}));
    state_event(&mut g, "everything", "ready");
    opened(&everything);
    await_get_threads(&g, 1);
    g.ok(json!({"type": "remove_mcp_server", "name": "everything"}));
    await_get_threads(&g, 0);
}

#[test]
fn a_tools_list_changed_pushed_on_the_get_stream_reaches_the_next_model_request() {
    let (push, pushed) = unbounded::<()>();
    let (url, seen, gets, _) = legacy_server(&["first"], move |_, _, stream, tools| {
        open_stream(stream);
        send(stream, "id: g0\ndata: \n\n");
        if pushed.recv_timeout(TIMEOUT).is_err() {
            return;
        }
        tools.lock().unwrap().push("fresh".into());
        // A log message and a server request come on the same stream.
        send(stream, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"hi\"}}\n\n");
        send(
            stream,
            "data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"roots/list\"}\n\n",
        );
        send(stream, LIST_CHANGED);
        until_closed(stream);
    });
    let mut g = gjc()
        .script(json!({"turns": [call("mcp__remote__fresh", json!({})), say("done")]}))
        .spawn();
    add(&mut g, "remote", json!({"url": url}));
    let ready = state_event(&mut g, "remote", "ready");
    assert_eq!(ready["tools"], 1, "{ready}");
    let get = next(&gets, "the GET stream");
    assert_eq!(get.header("accept"), Some("text/event-stream"));
    assert_eq!(get.header("mcp-session-id"), Some("s1"));
    assert_eq!(get.header("mcp-protocol-version"), Some("2025-11-25"));
    assert_eq!(get.header("last-event-id"), None);
    push.send(()).unwrap();
    let relisted = state_event(&mut g, "remote", "ready");
    assert_eq!(relisted["tools"], 2, "{relisted}");
    g.ok(json!({"type": "prompt", "message": "use the new tool"}));
    let ends = results(&g.run_events());
    assert_eq!(text_of(&ends[0]), "called fresh", "{}", ends[0]);
    // The server request was answered -32601, as over stdio.
    let answered = seen
        .lock()
        .unwrap()
        .iter()
        .find(|s| s.body["id"] == "srv-1")
        .map(|s| s.body.clone());
    let answered = answered.expect("the server request was answered");
    assert_eq!(answered["error"]["code"], -32601, "{answered}");
    assert_eq!(gets.try_iter().count(), 0, "one GET stream");
}

#[test]
fn a_server_without_a_get_stream_answers_405_and_is_not_asked_again() {
    let (url, _, gets, _) = legacy_server(&["ok"], |_, _, stream, _| {
        reply(stream, "405 Method Not Allowed", &[("allow", "POST")], "")
    });
    let mut g = gjc()
        .script(json!({"turns": [call("mcp__remote__ok", json!({})), say("done")]}))
        .spawn();
    add(&mut g, "remote", json!({"url": url}));
    state_event(&mut g, "remote", "ready");
    next(&gets, "the GET");
    await_get_threads(&g, 0);
    g.ok(json!({"type": "prompt", "message": "go"}));
    let ends = results(&g.run_events());
    assert_eq!(text_of(&ends[0]), "called ok", "{}", ends[0]);
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["mcpServers"][0]["state"], "ready", "{state}");
    assert_eq!(gets.try_iter().count(), 0, "405 is asked once");
}

#[test]
fn a_get_answered_404_is_the_session_forgotten_and_the_next_call_opens_a_new_one() {
    let (forget, forgotten) = unbounded::<()>();
    let (url, seen, gets, _) = legacy_server(&["ok"], move |n, _, stream, _| {
        if n == 0 {
            // Once the server is ready: a 404 while its tools are listed could leave it failed
            // with none.
            let _ = forgotten.recv_timeout(TIMEOUT);
            return reply(stream, "404 Not Found", &[], "session not found");
        }
        reply(stream, "405 Method Not Allowed", &[], "")
    });
    let mut g = gjc()
        .script(json!({"turns": [call("mcp__remote__ok", json!({})), say("done")]}))
        .spawn();
    add(&mut g, "remote", json!({"url": url}));
    state_event(&mut g, "remote", "ready");
    next(&gets, "the GET stream");
    forget.send(()).unwrap();
    let failed = state_event(&mut g, "remote", "failed");
    assert!(
        failed["reason"]
            .as_str()
            .unwrap()
            .contains("ended the MCP session (HTTP 404)"),
        "{failed}"
    );
    await_get_threads(&g, 0);
    // Nothing crashed: the next call opens a new session at once.
    g.ok(json!({"type": "prompt", "message": "go"}));
    let ends = results(&g.run_events());
    assert_eq!(text_of(&ends[0]), "called ok", "{}", ends[0]);
    let initializes = (seen.lock().unwrap().iter())
        .filter(|s| s.body["method"] == "initialize")
        .count();
    assert_eq!(initializes, 2);
}

#[test]
fn a_dropped_get_stream_is_resumed_with_its_last_event_id_after_its_retry() {
    let dropped_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let at = dropped_at.clone();
    let (url, _, gets, _) = legacy_server(&["first"], move |n, _, stream, tools| {
        open_stream(stream);
        if n == 0 {
            send(stream, "retry: 400\nid: g1\ndata: \n\n");
            send(stream, "id: g2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n");
            *at.lock().unwrap() = Some(Instant::now());
            return; // the connection drops
        }
        tools.lock().unwrap().push("fresh".into());
        send(stream, "id: g3\n");
        send(stream, LIST_CHANGED);
        until_closed(stream);
    });
    let mut g = gjc().script(json!({"turns": []})).spawn();
    add(&mut g, "remote", json!({"url": url}));
    state_event(&mut g, "remote", "ready");
    let first = next(&gets, "the GET stream");
    assert_eq!(first.header("last-event-id"), None);
    let again = next(&gets, "the GET stream's resumption");
    let waited = dropped_at.lock().unwrap().unwrap().elapsed();
    assert_eq!(again.header("last-event-id"), Some("g2"));
    assert!(
        waited >= Duration::from_millis(350),
        "the server's retry (400 ms) was not waited: {waited:?}"
    );
    let relisted = state_event(&mut g, "remote", "ready");
    assert_eq!(relisted["tools"], 2, "{relisted}");
    await_get_threads(&g, 1);
}

#[test]
fn an_endless_get_event_is_cut_at_the_cap_and_the_stream_opened_again() {
    let written = Arc::new(Mutex::new(0usize));
    let w = written.clone();
    let (url, _, gets, _) = legacy_server(&["first"], move |n, _, stream, tools| {
        open_stream(stream);
        if n == 0 {
            send(stream, "data: ");
            let chunk = [b'x'; 64 * 1024];
            while stream.write_all(&chunk).is_ok() {
                *w.lock().unwrap() += chunk.len();
            }
            return;
        }
        tools.lock().unwrap().push("fresh".into());
        send(stream, LIST_CHANGED);
        until_closed(stream);
    });
    let mut g = gjc()
        .script(json!({"turns": [call("mcp__remote__first", json!({})), say("done")]}))
        .spawn();
    add(&mut g, "remote", json!({"url": url}));
    state_event(&mut g, "remote", "ready");
    next(&gets, "the GET stream");
    next(&gets, "the GET stream opened again");
    let relisted = state_event(&mut g, "remote", "ready");
    assert_eq!(relisted["tools"], 2, "{relisted}");
    let written = *written.lock().unwrap();
    // 16 MB, and what the sockets' buffers held when gjc let go.
    assert!(
        (16 << 20..40 << 20).contains(&written),
        "{written} bytes were taken"
    );
    g.ok(json!({"type": "prompt", "message": "go"}));
    let ends = results(&g.run_events());
    assert_eq!(text_of(&ends[0]), "called first", "{}", ends[0]);
}

#[test]
fn stopping_or_restarting_a_server_ends_its_get_stream_and_thread() {
    let (closed_tx, closed) = unbounded::<bool>();
    let (url, seen, gets, _) = legacy_server(&["ok"], move |_, _, stream, _| {
        open_stream(stream);
        send(stream, ": waiting\n\n");
        let _ = closed_tx.send(until_closed(stream));
    });
    let mut g = gjc().script(json!({"turns": []})).spawn();
    add(&mut g, "remote", json!({"url": url}));
    state_event(&mut g, "remote", "ready");
    next(&gets, "the GET stream");
    await_get_threads(&g, 1);
    g.ok(json!({"type": "restart_mcp_server", "name": "remote"}));
    assert!(next(&closed, "the old stream's close"), "closed by gjc");
    state_event(&mut g, "remote", "ready");
    next(&gets, "the new session's GET stream");
    await_get_threads(&g, 1);
    g.ok(json!({"type": "remove_mcp_server", "name": "remote"}));
    assert!(next(&closed, "the stream's close"), "closed by gjc");
    await_get_threads(&g, 0);
    // Each session ends with a DELETE, sent once its GET stream is shut.
    let deadline = Instant::now() + TIMEOUT;
    let deletes = || {
        let seen = seen.lock().unwrap();
        seen.iter().filter(|s| s.method == "DELETE").count()
    };
    while deletes() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(deletes(), 2, "each session ended with a DELETE");
}

/// A legacy server whose `tools/call` of `name` answers as `on_call` writes it; GETs with a
/// `Last-Event-ID` go to `on_resume`, the GET stream is refused 405.
fn resuming_server(
    on_call: impl Fn(&str, &Value, &mut TcpStream) + Send + Sync + 'static,
    on_resume: impl Fn(&str, &mut TcpStream) + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let tools: Tools = Arc::new(Mutex::new(
        ["resumable", "fragile", "unresumable"]
            .iter()
            .map(|t| t.to_string())
            .collect(),
    ));
    serve(move |seen, stream| {
        let m = &seen.body;
        match (seen.method.as_str(), seen.header("last-event-id")) {
            ("GET", Some(last)) => on_resume(last, stream),
            ("GET", None) => reply(stream, "405 Method Not Allowed", &[], ""),
            _ if m["method"] == "tools/call" => {
                on_call(m["params"]["name"].as_str().unwrap_or(""), m, stream)
            }
            _ => return legacy_post(seen, stream, &tools),
        }
        let _ = stream.shutdown(std::net::Shutdown::Both);
    })
}

#[test]
fn a_post_answer_that_drops_before_its_reply_is_resumed_with_a_get() {
    let dropped_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let resumed_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let (d, r) = (dropped_at.clone(), resumed_at.clone());
    // The id of the call whose reply waits for its resumption.
    let pending: Arc<Mutex<Option<String>>> = Arc::default();
    let p = pending.clone();
    let (url, seen) = resuming_server(
        move |name, m, stream| {
            open_stream(stream);
            match name {
                "resumable" => {
                    send(stream, "retry: 300\nid: r1\ndata: \n\n");
                    send(stream, "id: r2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"half\"}}\n\n");
                    // The reply comes on the resumption, under the call's id.
                    *d.lock().unwrap() = Some(Instant::now());
                    p.lock().unwrap().replace(m["id"].to_string());
                }
                "unresumable" => send(stream, "id: u1\ndata: \n\n"),
                _ => send(stream, "data: \n\n"),
            }
        },
        move |last, stream| {
            if last != "r2" {
                return reply(stream, "405 Method Not Allowed", &[], "");
            }
            *r.lock().unwrap() = Some(Instant::now());
            let id = pending.lock().unwrap().take().unwrap_or_default();
            open_stream(stream);
            let result = r#"{"content":[{"type":"text","text":"resumed"}]}"#;
            send(
                stream,
                &format!(
                    "id: r3\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}\n\n"
                ),
            );
        },
    );
    let mut g = gjc()
        .script(json!({"turns": [
            call("mcp__remote__resumable", json!({})),
            call("mcp__remote__fragile", json!({})),
            call("mcp__remote__unresumable", json!({})),
            say("done"),
        ]}))
        .spawn();
    add(&mut g, "remote", json!({"url": url}));
    state_event(&mut g, "remote", "ready");
    g.ok(json!({"type": "prompt", "message": "go"}));
    let ends = results(&g.run_events());
    assert_eq!(text_of(&ends[0]), "resumed", "{}", ends[0]);
    let waited = resumed_at
        .lock()
        .unwrap()
        .unwrap()
        .duration_since(dropped_at.lock().unwrap().unwrap());
    assert!(
        waited >= Duration::from_millis(250),
        "the answer's retry (300 ms) was not waited: {waited:?}"
    );
    // Without event ids there is nothing to resume: the call fails as it did.
    assert_eq!(ends[1]["isError"], true);
    assert!(
        text_of(&ends[1]).contains("ended the answer's event stream without a reply"),
        "{}",
        ends[1]
    );
    // A server that does not resume says so with its 405.
    assert_eq!(ends[2]["isError"], true);
    assert!(
        text_of(&ends[2]).contains("does not resume event streams (its GET answered 405)"),
        "{}",
        ends[2]
    );
    let resumes: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|s| s.header("last-event-id").map(str::to_string))
        .collect();
    assert_eq!(resumes, ["r2", "u1"], "one GET per broken answer with ids");
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["mcpServers"][0]["state"], "ready", "{state}");
}
