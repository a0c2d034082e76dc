//! The blocking HTTP side of a stream: one ureq `Agent` per request at a time (so that
//! `Agent::shutdown` interrupts exactly this stream; `pool.rs` hands a cleanly finished one to the
//! next request), status and body mapped to a `ProviderFailure`, SSE events fed to the API's
//! decoder, deltas forwarded to the session as they come (those decoded from one read of the
//! socket together, before the next read).

use std::io::BufReader;
use std::time::{Duration, Instant, SystemTime};

use super::builder::MessageBuilder;
use super::catalog::price;
use super::failure::{classify_http, classify_message, requested_wait};
use super::logging::request_line;
use super::sse::{SseError, SseReader};
use super::wire::{self, Decoder, StreamError, WireApi};
use super::{CancelFlag, EventSink, ProviderEvent, ProviderFailure, ProviderRequest};
use crate::protocol::message::{AssistantMessage, StopReason};

pub fn agent() -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(30)))
        .user_agent(concat!("gjc/", env!("CARGO_PKG_VERSION")))
        .build();
    ureq::Agent::new_with_config(config)
}

/// Runs one streamed request. `true` when the stream ended cleanly with its body read to the
/// end, so that its connection may be used again.
pub fn run_stream(
    wire: &dyn WireApi,
    request: &ProviderRequest,
    agent: &ureq::Agent,
    lease: &super::pool::Lease,
    cancel: &CancelFlag,
    sink: &EventSink,
) -> bool {
    let model = &request.model;
    let builder = MessageBuilder::new(AssistantMessage::empty(
        model.api.as_str(),
        &model.provider,
        &model.id,
    ));
    let (call, decoder) = (wire.request(request), wire.decoder());
    let started = Instant::now();
    log::debug!(
        "{}",
        request_line("POST", &call.url, &call.headers, &model.headers)
    );
    // The body is written from its pieces; its length is known, so it is not chunked.
    let mut req = agent
        .post(&call.url)
        .header("content-type", "application/json")
        .header("content-length", call.body.len().to_string());
    for (k, v) in &call.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let body = ureq::SendBody::from_owned_reader(call.body.into_reader());
    let response = match req.send(body) {
        Ok(r) => r,
        Err(e) => {
            fail(
                builder,
                sink,
                cancel,
                format!("request failed: {e}"),
                None,
                true,
                None,
            );
            return false;
        }
    };
    let status = response.status().as_u16();
    log::debug!(
        "{}/{} answered HTTP {status} after {} ms",
        model.provider,
        model.id,
        started.elapsed().as_millis()
    );
    if status != 200 {
        http_error(
            builder,
            sink,
            cancel,
            response,
            request.limits.retry_after_max,
        );
        return false;
    }
    let body = FlushFirst {
        inner: response.into_body().into_reader(),
        sink,
    };
    let mut reader = SseReader::with_limits(
        BufReader::with_capacity(16 * 1024, body),
        request.limits.sse,
    );
    let Some(message) = stream(
        builder,
        decoder,
        &mut reader,
        request,
        started,
        cancel,
        sink,
    ) else {
        return false;
    };
    // The next turn's request may start as soon as the session has the message: it waits the
    // moment it takes to read the end of this body, and gets this connection.
    lease.finishing();
    sink.send(ProviderEvent::Done(Box::new(message))) && at_end(&mut reader)
}

/// The response body, which sends the events held in `sink` before each read from the socket:
/// the events decoded from what arrived together reach the session together, and none waits
/// while the stream waits for more.
struct FlushFirst<'a, R> {
    inner: R,
    sink: &'a EventSink,
}

impl<R: std::io::Read> std::io::Read for FlushFirst<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.sink.flush() {
            return Err(std::io::Error::other("the session no longer listens"));
        }
        self.inner.read(buf)
    }
}

/// Streams the response up to its terminal event: the finished message, or `None` when the
/// stream failed (reported) or was abandoned.
fn stream(
    mut builder: MessageBuilder,
    mut decoder: Box<dyn Decoder>,
    reader: &mut SseReader<impl std::io::BufRead>,
    request: &ProviderRequest,
    started: Instant,
    cancel: &CancelFlag,
    sink: &EventSink,
) -> Option<AssistantMessage> {
    let mut reported = 0;
    let outcome = drive(&mut builder, decoder.as_mut(), reader, |b| {
        forward(b, sink, started);
        report_usage(b, &mut reported, request, sink);
        true
    });
    let stop = match outcome {
        Ok(Some(stop)) => stop,
        Ok(None) => return None,
        Err(StreamError {
            message,
            transient,
            status,
        }) => {
            // Usage the provider reported before (or beside) its error is kept, totalled and
            // priced like a finished message's.
            builder.message.usage.finish_totals();
            price(&mut builder.message.usage, &request.model.cost);
            fail(builder, sink, cancel, message, status, transient, None);
            return None;
        }
    };
    log::debug!(
        "{}/{} stream ended ({stop:?}) after {} ms",
        request.model.provider,
        request.model.id,
        started.elapsed().as_millis()
    );
    // Blocks the provider never closed (a Chat tool call, Gemini's last block, a call cut off by
    // the output limit) end here, each with its `*_end` delta before the message ends.
    builder.close_all(stop == StopReason::Length);
    forward(&mut builder, sink, started);
    let mut message = builder.finish(stop);
    message.duration = Some(started.elapsed().as_millis() as u64);
    message.usage.finish_totals();
    price(&mut message.usage, &request.model.cost);
    Some(message)
}

/// Reads what follows the terminal event, up to a few events, and tells whether the body ended
/// there: only then is the connection in a state to carry another request. This runs after the
/// message went to the session, so a server that keeps the body open delays nothing; the thread
/// then waits until the server closes the connection, and the connection is not kept.
fn at_end(reader: &mut SseReader<impl std::io::BufRead>) -> bool {
    for _ in 0..4 {
        match reader.next_event() {
            Ok(None) => return true,
            Ok(Some(_)) => {}
            Err(_) => return false,
        }
    }
    false
}

/// Feeds SSE events to the decoder until its terminal event or EOF. `progress` runs after each
/// event (to forward deltas); when it returns `false` the stream is abandoned (`Ok(None)`).
pub fn drive(
    builder: &mut MessageBuilder,
    decoder: &mut dyn Decoder,
    reader: &mut SseReader<impl std::io::BufRead>,
    mut progress: impl FnMut(&mut MessageBuilder) -> bool,
) -> Result<Option<StopReason>, StreamError> {
    loop {
        let event = match reader.next_event() {
            Ok(Some(e)) => e,
            Ok(None) => return decoder.on_eof(builder).map(Some),
            Err(SseError::Io(e)) => {
                return Err(StreamError::transient(format!("stream interrupted: {e}")))
            }
            // The same request would get the same answer: not worth a retry.
            Err(e @ SseError::TooLarge { .. }) => return Err(StreamError::fatal(e.to_string())),
        };
        let outcome = decoder.on_event(&event, builder);
        if !progress(builder) {
            return Ok(None);
        }
        if let Some(stop) = outcome? {
            return Ok(Some(stop));
        }
    }
}

/// Decodes a whole response body of `api` into the final message (tests and benchmarks).
pub fn decode_body(
    request: &ProviderRequest,
    body: impl std::io::BufRead,
) -> Result<AssistantMessage, StreamError> {
    let model = &request.model;
    let mut builder = MessageBuilder::new(AssistantMessage::empty(
        model.api.as_str(),
        &model.provider,
        &model.id,
    ));
    let Some(wire) = model.api.wire() else {
        return Err(StreamError::fatal(
            "the scripted provider has no response body to decode",
        ));
    };
    let mut decoder = wire.decoder();
    let mut reader = SseReader::new(body);
    let stop = drive(&mut builder, decoder.as_mut(), &mut reader, |b| {
        b.take_pending();
        true
    })?
    .unwrap_or(StopReason::Stop);
    let mut message = builder.finish(stop);
    message.usage.finish_totals();
    Ok(message)
}

/// Holds `Start` before the first delta, then the pending deltas; they go to the session before
/// the body is read again (`FlushFirst`).
fn forward(builder: &mut MessageBuilder, sink: &EventSink, started: Instant) {
    if builder.pending.is_empty() {
        return;
    }
    if !builder.started {
        builder.started = true;
        builder.message.ttft = Some(started.elapsed().as_millis() as u64);
        sink.hold(ProviderEvent::Start);
    }
    for ev in builder.take_pending() {
        sink.hold(ProviderEvent::Delta(ev));
    }
}

/// Holds the usage reported so far when it grew since the last report, so budgets see input
/// tokens at the start of a reply rather than at its end.
fn report_usage(
    builder: &MessageBuilder,
    reported: &mut u64,
    request: &ProviderRequest,
    sink: &EventSink,
) {
    let mut usage = builder.message.usage.clone();
    usage.finish_totals();
    if usage.total_tokens <= *reported {
        return;
    }
    *reported = usage.total_tokens;
    price(&mut usage, &request.model.cost);
    sink.hold(ProviderEvent::Usage(usage));
}

fn http_error(
    builder: MessageBuilder,
    sink: &EventSink,
    cancel: &CancelFlag,
    response: ureq::http::Response<ureq::Body>,
    retry_after_max: Duration,
) {
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let wait = requested_wait(
        header("retry-after-ms").as_deref(),
        header("retry-after").as_deref(),
        SystemTime::now(),
    );
    let should_retry = header("x-should-retry");
    let text = response
        .into_body()
        .with_config()
        .limit(256 * 1024)
        .read_to_string()
        .unwrap_or_default();
    let detail = error_detail(&text);
    let verdict = classify_http(
        status,
        should_retry.as_deref(),
        &detail,
        wait,
        retry_after_max,
    );
    let message = match verdict.refusal {
        Some(why) => format!("HTTP {status}: {detail} ({why})"),
        None => format!("HTTP {status}: {detail}"),
    };
    fail(
        builder,
        sink,
        cancel,
        message,
        Some(status),
        verdict.transient,
        verdict.retry_after,
    );
}

/// The provider's own message from an error body (`error.message`, Gemini's array form), else the
/// body itself, clipped.
pub fn error_detail(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let first = parsed.as_ref().map(|v| {
        if let Some(a) = v.as_array() {
            a.first().cloned().unwrap_or_default()
        } else {
            v.clone()
        }
    });
    let from_json = first.as_ref().and_then(|v| {
        let err = v.get("error")?;
        let msg = err
            .get("message")
            .and_then(|m| m.as_str())
            .or_else(|| err.as_str())?;
        let kind = err
            .get("type")
            .or_else(|| err.get("status"))
            .and_then(|t| t.as_str());
        Some(match kind {
            Some(k) => format!("{k}: {msg}"),
            None => msg.to_string(),
        })
    });
    from_json.unwrap_or_else(|| wire::clip(body.trim(), 500).to_string())
}

pub fn fail(
    builder: MessageBuilder,
    sink: &EventSink,
    cancel: &CancelFlag,
    message: String,
    status: Option<u16>,
    transient: bool,
    retry_after: Option<Duration>,
) {
    if cancel.is_set() {
        let message = builder.fail(StopReason::Aborted, "Request was aborted".into(), None);
        sink.send(ProviderEvent::Failed(Box::new(ProviderFailure {
            message,
            transient: false,
            retry_after: None,
            overflow: false,
        })));
        return;
    }
    let (transient, overflow) = classify_message(&message, status, transient);
    log::debug!(
        "provider request failed (status {status:?}, retryable {transient}, retry-after {retry_after:?}, context overflow {overflow})"
    );
    let message = builder.fail(StopReason::Error, message, status);
    sink.send(ProviderEvent::Failed(Box::new(ProviderFailure {
        message,
        transient,
        retry_after,
        overflow,
    })));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_detail_reads_provider_shapes() {
        assert_eq!(
            error_detail(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "overloaded_error: Overloaded"
        );
        assert_eq!(
            error_detail(
                r#"[{"error":{"code":429,"message":"Quota","status":"RESOURCE_EXHAUSTED"}}]"#
            ),
            "RESOURCE_EXHAUSTED: Quota"
        );
        assert_eq!(error_detail("plain text"), "plain text");
    }
}
