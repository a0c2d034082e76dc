//! The streamable HTTP transport against a small HTTP server in the test (a `TcpListener` on
//! 127.0.0.1 and a thread per connection), driven through the real client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;
use crate::mcp::client::{Client, Failure, Note};

/// One request as the test server read it.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the handler answers: a status line and headers, then a body it writes itself.
type Handler = dyn Fn(&Seen, &mut TcpStream) + Send + Sync;

struct TestServer {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Connections accepted.
    connections: Arc<AtomicUsize>,
}

fn serve(handler: impl Fn(&Seen, &mut TcpStream) + Send + Sync + 'static) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let handler: Arc<Handler> = Arc::new(handler);
    let log = seen.clone();
    let connections = Arc::new(AtomicUsize::new(0));
    let count = connections.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let (log, handler) = (log.clone(), handler.clone());
            std::thread::spawn(move || connection(stream, &log, &*handler));
        }
    });
    TestServer {
        url,
        seen,
        connections,
    }
}

/// Serves requests on one kept-alive connection until it closes.
fn connection(mut stream: TcpStream, log: &Mutex<Vec<Seen>>, handler: &Handler) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let method = line.split(' ').next().unwrap_or("").to_string();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
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
            method,
            headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        };
        log.lock().unwrap().push(seen.clone());
        handler(&seen, &mut stream);
    }
}

fn reply(stream: &mut TcpStream, status: &str, headers: &[(&str, &str)], body: &str) {
    let mut head = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
}

/// An SSE answer that ends with the body: a priming event, then `messages`.
fn sse(stream: &mut TcpStream, headers: &[(&str, &str)], messages: &[Value]) {
    let mut body = String::from("id: prime-1\ndata: \n\n");
    for m in messages {
        body.push_str(&format!("event: message\nid: e\ndata: {m}\n\n"));
    }
    let mut all = vec![("content-type", "text/event-stream")];
    all.extend_from_slice(headers);
    reply(stream, "200 OK", &all, &body);
}

fn result(request: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": request["id"], "result": result})
}

fn timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        request: Duration::from_secs(10),
        notify: Duration::from_secs(5),
    }
}

/// A client over the transport, with the notes it got.
fn http_client(
    url: &str,
    headers: &[(&str, &str)],
    limits: Limits,
) -> (Arc<Client>, Arc<Mutex<Vec<String>>>) {
    let notes: Arc<Mutex<Vec<String>>> = Arc::default();
    let n = notes.clone();
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let url = url.to_string();
    let client = Client::new(
        move |note| {
            n.lock().unwrap().push(match note {
                Note::Closed(why) => format!("closed: {why}"),
                Note::Expired(why) => format!("expired: {why}"),
                Note::ToolsChanged => "tools changed".into(),
            })
        },
        move |deliver| {
            Ok(
                Box::new(connect(&url, &headers, timeouts(), limits, deliver)?)
                    as Box<dyn Transport>,
            )
        },
    )
    .unwrap();
    (client, notes)
}

fn call(client: &Client, method: &str) -> Result<Value, Failure> {
    let never = || false;
    client.request(method, json!({}), Duration::from_secs(5), &never, None)
}

/// A legacy server: the probe refused with a JSON-RPC error body, then a session.
fn legacy(seen: &Seen, stream: &mut TcpStream) {
    let m = &seen.body;
    match m["method"].as_str() {
        Some("server/discover") => reply(
            stream,
            "400 Bad Request",
            &[("content-type", "application/json")],
            r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}"#,
        ),
        Some("initialize") => sse(
            stream,
            &[("mcp-session-id", "sess-1")],
            &[result(
                m,
                json!({"protocolVersion": "2025-06-18", "capabilities": {}}),
            )],
        ),
        Some("tools/list") => reply(
            stream,
            "200 OK",
            &[("content-type", "application/json")],
            &result(m, json!({"tools": [{"name": "echo"}]})).to_string(),
        ),
        Some("tools/call") => sse(
            stream,
            &[],
            &[
                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": "t", "progress": 1, "total": 2}}),
                result(m, json!({"content": [{"type": "text", "text": "hi"}]})),
            ],
        ),
        _ => reply(stream, "202 Accepted", &[], ""),
    }
}

#[test]
fn a_legacy_server_is_probed_initialized_and_called_with_its_session_and_headers() {
    let server = serve(legacy);
    let (client, _) = http_client(
        &server.url,
        &[("Authorization", "Bearer s3cret")],
        Limits::default(),
    );
    let era = crate::mcp::handshake::open(&client, &server.url, Duration::from_secs(5));
    assert_eq!(
        era,
        Ok(crate::mcp::handshake::Era::Legacy("2025-06-18".into()))
    );
    let tools = crate::mcp::handshake::list_tools(&client, Duration::from_secs(5)).unwrap();
    assert_eq!(tools[0].name, "echo");
    let progress = Mutex::new(Vec::new());
    let report = |p: crate::mcp::client::Progress| progress.lock().unwrap().push(p.progress);
    let never = || false;
    let answer = client.request(
        "tools/call",
        json!({"name": "echo"}),
        Duration::from_secs(5),
        &never,
        Some(("t", &report)),
    );
    assert_eq!(answer.unwrap()["content"][0]["text"], "hi");
    assert_eq!(*progress.lock().unwrap(), [1.0]);

    // The POSTs (the GET stream, answered 202 with no stream here, is left aside).
    let seen: Vec<_> = (server.seen.lock().unwrap().iter())
        .filter(|s| s.method == "POST")
        .cloned()
        .collect();
    let methods: Vec<&str> = seen
        .iter()
        .filter_map(|s| s.body["method"].as_str())
        .collect();
    assert_eq!(
        methods,
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );
    for s in &seen {
        assert_eq!(s.header("authorization"), Some("Bearer s3cret"), "{s:?}");
        assert_eq!(
            s.header("accept"),
            Some("application/json, text/event-stream")
        );
        assert_eq!(s.header("content-type"), Some("application/json"));
    }
    // The session and the negotiated version go with every request after `initialize`.
    for s in &seen[2..] {
        assert_eq!(s.header("mcp-session-id"), Some("sess-1"), "{s:?}");
        assert_eq!(
            s.header("mcp-protocol-version"),
            Some("2025-06-18"),
            "{s:?}"
        );
    }
    assert_eq!(seen[1].header("mcp-session-id"), None);
    // Answers read to their end leave their connection to the next POST: the refused probe's is
    // dropped, `notifications/initialized` may need one while the end of `initialize`'s stream
    // is still being read, and the calls go over a kept one. The GET stream has one of its own.
    let connections = server.connections.load(Ordering::SeqCst);
    assert!(
        (2..=4).contains(&connections),
        "{connections} connections for 5 POSTs and a GET"
    );

    // Closing ends the session with a DELETE carrying its id.
    client.close();
    let last = server.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last.method, "DELETE");
    assert_eq!(last.header("mcp-session-id"), Some("sess-1"));
}

#[test]
fn header_values_are_never_shown_and_bad_urls_or_headers_are_refused() {
    let noop: Deliver = Box::new(|_| {});
    let http = connect(
        "http://127.0.0.1:1/mcp",
        &[("X-Key".into(), "s3cret".into())],
        timeouts(),
        Limits::default(),
        noop,
    )
    .unwrap();
    let shown = format!("{http:?}");
    assert!(
        shown.contains("X-Key") && !shown.contains("s3cret"),
        "{shown}"
    );
    for bad in [
        "file:///etc/passwd",
        "ftp://x/mcp",
        "http://",
        "https:///x",
        "x",
        "http://a b/",
    ] {
        assert!(check_url(bad).is_err(), "{bad}");
    }
    assert!(check_url("HTTPS://example.com/mcp").is_ok());
    let noop: Deliver = Box::new(|_| {});
    let err = connect(
        "http://x/",
        &[("X-Key".into(), "a\r\nb: s3cret".into())],
        timeouts(),
        Limits::default(),
        noop,
    )
    .unwrap_err();
    assert!(err.contains("X-Key") && !err.contains("s3cret"), "{err}");
}

#[test]
fn a_refused_token_fails_the_connection_with_the_challenge() {
    let server = serve(|_, stream| {
        reply(
            stream,
            "401 Unauthorized",
            &[(
                "www-authenticate",
                r#"Bearer resource_metadata="http://a/.well-known", scope="x""#,
            )],
            "",
        )
    });
    let (client, notes) = http_client(&server.url, &[], Limits::default());
    let Err(Failure::Closed(why)) = call(&client, "tools/list") else {
        panic!()
    };
    assert!(
        why.contains("needs OAuth authorization: Bearer resource_metadata=\"http://a/.well-known\", scope=\"x\"")
            && why.contains("gjc does not run OAuth flows"),
        "{why}"
    );
    assert!(
        notes.lock().unwrap()[0].starts_with("closed: "),
        "{notes:?}"
    );
}

#[test]
fn a_forgotten_session_expires_the_connection_and_errors_without_one_reach_the_call() {
    let server = serve(|seen, stream| match seen.body["method"].as_str() {
        Some("initialize") => sse(
            stream,
            &[("mcp-session-id", "s")],
            &[result(&seen.body, json!({"protocolVersion": "2025-11-25"}))],
        ),
        Some("tools/list") => reply(
            stream,
            "400 Bad Request",
            &[("content-type", "application/json")],
            r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#,
        ),
        Some("ping") => reply(stream, "500 Internal Server Error", &[], "boom"),
        _ => reply(stream, "202 Accepted", &[], ""),
    });
    let (client, notes) = http_client(&server.url, &[], Limits::default());
    // Before a session, an HTTP error is that request's failure only.
    assert_eq!(
        call(&client, "ping"),
        Err(Failure::Http {
            status: 500,
            detail: "boom".into()
        })
    );
    assert!(client.closed().is_none());
    call(&client, "initialize").unwrap();
    let Err(Failure::Closed(why)) = call(&client, "tools/list") else {
        panic!()
    };
    assert!(why.contains("ended the MCP session (HTTP 400)"), "{why}");
    assert!(
        notes.lock().unwrap()[0].starts_with("expired: "),
        "{notes:?}"
    );
}

#[test]
fn redirects_are_not_followed() {
    let server = serve(|_, stream| {
        reply(
            stream,
            "307 Temporary Redirect",
            &[("location", "http://elsewhere/mcp")],
            "",
        )
    });
    let (client, _) = http_client(
        &server.url,
        &[("Authorization", "Bearer s3cret")],
        Limits::default(),
    );
    let Err(Failure::Closed(why)) = call(&client, "tools/list") else {
        panic!()
    };
    assert!(
        why.contains("http://elsewhere/mcp") && why.contains("not followed"),
        "{why}"
    );
    assert_eq!(server.seen.lock().unwrap().len(), 1);
}

#[test]
fn an_endless_event_stream_is_cut_at_the_cap() {
    let written = Arc::new(AtomicUsize::new(0));
    let w = written.clone();
    let server = serve(move |_, stream| {
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n");
        let event = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n";
        while stream.write_all(event).is_ok() {
            w.fetch_add(event.len(), Ordering::SeqCst);
        }
    });
    let limits = Limits {
        message: 1024,
        response: 64 * 1024,
    };
    let (client, _) = http_client(&server.url, &[], limits);
    let Err(Failure::Closed(why)) = call(&client, "tools/call") else {
        panic!()
    };
    assert!(why.contains("passed 65536 bytes without a reply"), "{why}");
    // One endless event is cut at the message cap.
    let server = serve(|_, stream| {
        let _ =
            stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: ");
        while stream.write_all(&[b'x'; 4096]).is_ok() {}
    });
    let (client, _) = http_client(&server.url, &[], limits);
    let Err(Failure::Closed(why)) = call(&client, "tools/call") else {
        panic!()
    };
    assert!(why.contains("an event over 1024 bytes"), "{why}");
    assert!(client.closed().is_none(), "the connection goes on");
}

#[test]
fn cancelling_a_call_stops_its_reader_and_tells_the_server() {
    let dropped = Arc::new(AtomicBool::new(false));
    let d = dropped.clone();
    let server = serve(move |seen, stream| {
        if seen.body["method"] == "tools/call" {
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\nid: 1\ndata: \n\n",
            );
            // Keep-alives until the client hangs up.
            let until = Instant::now() + Duration::from_secs(10);
            while Instant::now() < until && stream.write_all(b": alive\n\n").is_ok() {
                std::thread::sleep(Duration::from_millis(20));
            }
            d.store(true, Ordering::SeqCst);
        } else {
            reply(stream, "202 Accepted", &[], "");
        }
    });
    let (client, _) = http_client(&server.url, &[], Limits::default());
    let started = Instant::now();
    let cancelled = || started.elapsed() > Duration::from_millis(200);
    let answer = client.request(
        "tools/call",
        json!({}),
        Duration::from_secs(5),
        &cancelled,
        None,
    );
    assert_eq!(answer, Err(Failure::Cancelled));
    let until = Instant::now() + Duration::from_secs(5);
    while !dropped.load(Ordering::SeqCst) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(dropped.load(Ordering::SeqCst), "the stream was not dropped");
    let seen = server.seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .any(|s| s.body["method"] == "notifications/cancelled"
                && s.body["params"]["requestId"] == seen[0].body["id"]),
        "{seen:?}"
    );
}

#[test]
fn a_modern_error_in_a_400_body_makes_the_server_modern() {
    let server = serve(|seen, stream| match seen.body["method"].as_str() {
        Some("server/discover") => reply(
            stream,
            "400 Bad Request",
            &[("content-type", "application/json")],
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}}"#,
        ),
        _ => reply(
            stream,
            "200 OK",
            &[("content-type", "application/json")],
            &result(&seen.body, json!({"tools": []})).to_string(),
        ),
    });
    let (client, _) = http_client(&server.url, &[], Limits::default());
    let era = crate::mcp::handshake::open(
        &client,
        &format!("{}#modern", server.url),
        Duration::from_secs(5),
    );
    assert_eq!(era, Ok(crate::mcp::handshake::Era::Modern));
    crate::mcp::handshake::list_tools(&client, Duration::from_secs(5)).unwrap();
    let seen = server.seen.lock().unwrap().clone();
    let listed = seen.last().unwrap();
    assert_eq!(listed.header("mcp-method"), Some("tools/list"));
    assert_eq!(listed.header("mcp-protocol-version"), Some("2026-07-28"));
}

#[test]
fn a_stream_kept_open_after_its_reply_is_let_go() {
    let dropped = Arc::new(AtomicBool::new(false));
    let d = dropped.clone();
    let server = serve(move |seen, stream| {
        let reply = result(&seen.body, json!({"ok": true}));
        let head =
            format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {reply}\n\n");
        let _ = stream.write_all(head.as_bytes());
        // Comments, never an event, never the end.
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until && stream.write_all(b": still here\n\n").is_ok() {
            std::thread::sleep(Duration::from_millis(20));
        }
        d.store(true, Ordering::SeqCst);
    });
    let (client, _) = http_client(&server.url, &[], Limits::default());
    assert_eq!(call(&client, "tools/list"), Ok(json!({"ok": true})));
    let until = Instant::now() + Duration::from_secs(4);
    while !dropped.load(Ordering::SeqCst) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(dropped.load(Ordering::SeqCst), "the open stream was kept");
}
