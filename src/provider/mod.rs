//! Model providers. The session asks for one streamed completion with `start_stream`; a
//! `gjc-provider` thread (kept for the next request, `crate::workers`) performs the request and sends `ProviderMsg`s back, tagged with the run
//! generation so that events of an abandoned stream are recognised and dropped. The returned
//! `StreamHandle` aborts the stream from the session thread: it shuts the HTTP connection down,
//! which ends a read blocked in the worker at once. A stream that ends cleanly leaves its
//! connection for the next request to the same host (`pool.rs`).

pub mod anthropic;
pub mod builder;
pub mod builtin;
pub mod catalog;
pub mod compat;
pub mod discovery;
pub mod failure;
pub mod gemini;
pub mod history;
pub mod http;
pub mod logging;
pub mod models_json;
pub mod openai_chat;
pub mod openai_responses;
pub mod pool;
pub mod scripted;
pub mod sse;
pub mod wire;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use serde_json::Value;

use crate::protocol::message::{AgentMessage, AssistantMessage, StreamEvent};
use catalog::Model;

/// Everything one model request needs; built by the session from its state.
#[derive(Debug, Clone)]
pub struct ProviderRequest {
    pub model: Model,
    pub api_key: Option<String>,
    pub system_prompt: String,
    /// The context. Left empty when `history` is given (only the scripted provider reads it then).
    pub messages: Vec<AgentMessage>,
    /// `messages` already encoded for the model's API, from the session's cache.
    pub history: Option<history::History>,
    pub tools: Arc<[ToolSpec]>,
    pub thinking: &'static str,
    pub session_id: String,
    pub scripted: Option<Arc<scripted::Script>>,
    pub limits: Limits,
}

/// What the settings bound in one stream: its SSE lines and events, and the longest wait a
/// provider may ask for before a retry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub sse: crate::settings::SseLimits,
    pub retry_after_max: std::time::Duration,
}

impl Limits {
    pub fn of(settings: &crate::settings::Settings) -> Limits {
        Limits {
            sse: settings.sse,
            retry_after_max: settings.retry_after_max,
        }
    }
}

impl Default for Limits {
    /// The defaults (no `GJC_*` variable set).
    fn default() -> Limits {
        Limits::of(&crate::settings::Settings::default())
    }
}

impl ProviderRequest {
    /// The encoded history: the one given, else `messages` encoded now.
    pub fn history(&self) -> history::History {
        match &self.history {
            Some(h) => h.clone(),
            None => history::History::fresh(&self.model, &self.messages),
        }
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

#[derive(Debug)]
pub struct ProviderMsg {
    pub generation: u64,
    /// Boxed: the session's provider lane preallocates and initialises all of its slots, and a
    /// slot the size of the largest event (~200 bytes) made it 52 KB resident from the start.
    pub event: Box<ProviderEvent>,
}

#[derive(Debug)]
pub enum ProviderEvent {
    /// The response started (HTTP 200 and first bytes); becomes the assistant `message_start`.
    Start,
    Delta(StreamEvent),
    /// The usage the provider has reported so far (cumulative, priced), sent whenever it grows
    /// during the stream; the final count is the `Done` message's.
    Usage(crate::protocol::message::Usage),
    // Boxed: a session's provider lane preallocates every slot of its bound, so a slot sized
    // for a whole message would keep ~80 KB per idle session resident for what comes once a turn.
    Done(Box<AssistantMessage>),
    Failed(Box<ProviderFailure>),
}

/// A failed request or stream: the partial message (stop reason `error` or `aborted`) and what the
/// retry policy needs to know.
#[derive(Debug)]
pub struct ProviderFailure {
    pub message: AssistantMessage,
    pub transient: bool,
    pub retry_after: Option<Duration>,
    pub overflow: bool,
}

/// Cancels one stream. Dropping it does not cancel; the session calls `abort` explicitly.
pub struct StreamHandle {
    cancelled: Arc<AtomicBool>,
    lease: Option<pool::Lease>,
}

impl StreamHandle {
    pub fn abort(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        if let Some(lease) = &self.lease {
            lease.abort();
        }
    }
}

/// Shared with the worker: whether the session gave up on this stream.
#[derive(Clone)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Sends provider events for one generation; `false` once the session is gone.
///
/// Events may also be held and sent together (`hold`, `flush`): a response read in one piece
/// decodes into several events, and sending each as it is decoded wakes the session once per
/// event, where one burst wakes it once. Whatever is sent with `send` goes after what is held.
pub struct EventSink {
    generation: u64,
    tx: Sender<ProviderMsg>,
    held: std::cell::RefCell<Vec<ProviderEvent>>,
}

impl EventSink {
    fn new(generation: u64, tx: Sender<ProviderMsg>) -> EventSink {
        EventSink {
            generation,
            tx,
            held: Default::default(),
        }
    }

    /// Sends what is held, then `event`.
    pub fn send(&self, event: ProviderEvent) -> bool {
        self.flush() && self.send_now(event)
    }

    /// Keeps `event` until the next `flush` or `send`.
    pub fn hold(&self, event: ProviderEvent) {
        self.held.borrow_mut().push(event);
    }

    /// Sends the held events, in order.
    pub fn flush(&self) -> bool {
        let held = std::mem::take(&mut *self.held.borrow_mut());
        held.into_iter().all(|event| self.send_now(event))
    }

    fn send_now(&self, event: ProviderEvent) -> bool {
        self.tx
            .send(ProviderMsg {
                generation: self.generation,
                event: Box::new(event),
            })
            .is_ok()
    }
}

/// The threads model requests run on: one request at a time per session, and another thread
/// only while an aborted request's thread is still closing.
static PROVIDER_THREADS: std::sync::LazyLock<crate::workers::Workers> =
    std::sync::LazyLock::new(|| crate::workers::Workers::new(c"gjc-provider", 2));

/// Starts one streamed completion on a `gjc-provider` thread.
pub fn start_stream(
    request: ProviderRequest,
    generation: u64,
    tx: Sender<ProviderMsg>,
) -> StreamHandle {
    let cancelled = Arc::new(AtomicBool::new(false));
    let cancel = CancelFlag(cancelled.clone());
    let sink = EventSink::new(generation, tx);
    // A model that speaks a wire API is called over HTTP on a pooled connection; the scripted
    // provider replays its script.
    let http =
        (request.model.api.wire()).map(|wire| (wire, pool::Lease::new(&request.model.base_url)));
    let lease = http.as_ref().map(|(_, lease)| lease.clone());
    log::debug!(
        "provider request {} for {}/{} (generation {generation})",
        if lease.is_some() { "starts" } else { "replays" },
        request.model.provider,
        request.model.id
    );
    let spawned = PROVIDER_THREADS.run(move || match http {
        Some((wire, lease)) => {
            let agent = lease.acquire();
            let clean = http::run_stream(wire, &request, &agent, &lease, &cancel, &sink);
            lease.finish(clean);
        }
        None => scripted::run_stream(&request, &cancel, &sink),
    });
    if let Err(e) = spawned {
        log::error!("cannot start provider thread: {e}");
    }
    StreamHandle { cancelled, lease }
}
