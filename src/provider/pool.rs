//! Connections kept alive between model requests, per provider origin (scheme, host, port).
//!
//! A run makes one request per turn to the same host; opening a connection (and a TLS handshake)
//! for each cost every turn tens to hundreds of milliseconds against a real provider. Each request
//! still has a `ureq::Agent` of its own, because aborting a stream shuts its agent down, which
//! closes exactly that request's socket and ends a read blocked on it. What is kept is the agent
//! of a stream that ended cleanly, with its one pooled connection: the next request to that
//! origin takes it instead of a new one. An aborted stream's agent is shut down and never comes
//! back; a failed one is dropped with its connection.
//!
//! A stream's agent is held in a [`Lease`] shared by the worker and the session's handle: whichever
//! takes it first decides its fate, so an abort that races the end of a stream can never shut
//! down an agent that is already back in the pool.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::http;

/// Idle agents kept per origin: a session streams one request at a time, plus the odd
/// compaction or discovery overlapping it.
const IDLE_PER_ORIGIN: usize = 4;

type Idle = HashMap<String, Vec<ureq::Agent>>;

fn idle() -> MutexGuard<'static, Idle> {
    static IDLE: OnceLock<Mutex<Idle>> = OnceLock::new();
    let lock = IDLE.get_or_init(Mutex::default).lock();
    // The map stays consistent even if a holder panicked: every change is one push or pop.
    lock.unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `scheme://host:port` of a URL (what connections are kept by).
pub fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find(['/', '?', '#']) {
        Some(end) => &url[..after_scheme + end],
        None => url,
    }
}

/// One stream's agent, taken once: by [`Lease::abort`] (shut down) or by the worker when the
/// stream ended ([`Lease::release`] back to the pool, or [`Lease::discard`]).
#[derive(Clone)]
pub struct Lease {
    origin: String,
    agent: Arc<Mutex<Option<ureq::Agent>>>,
}

impl Lease {
    /// An idle agent for `url`'s origin, else a new one; and the worker's handle on it.
    pub fn take(url: &str) -> (Lease, ureq::Agent) {
        let origin = origin(url).to_string();
        let agent = idle()
            .get_mut(&origin)
            .and_then(Vec::pop)
            .unwrap_or_else(http::agent);
        let lease = Lease {
            origin,
            agent: Arc::new(Mutex::new(Some(agent.clone()))),
        };
        (lease, agent)
    }

    fn claim(&self) -> Option<ureq::Agent> {
        let mut slot = self.agent.lock().unwrap_or_else(|p| p.into_inner());
        slot.take()
    }

    /// Closes the stream's connection at once (ending a read blocked on it); the agent is not
    /// used again.
    pub fn abort(&self) {
        if let Some(agent) = self.claim() {
            agent.shutdown();
        }
    }

    /// The stream ended cleanly and its body was read to the end: the connection may serve the
    /// next request to this origin.
    pub fn release(&self) {
        if let Some(agent) = self.claim() {
            let mut idle = idle();
            let list = idle.entry(self.origin.clone()).or_default();
            if list.len() < IDLE_PER_ORIGIN {
                list.push(agent);
            }
        }
    }

    /// The stream failed: its connection is never reused.
    pub fn discard(&self) {
        if let Some(agent) = self.claim() {
            agent.shutdown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port() {
        assert_eq!(
            origin("https://api.example.com/v1/messages"),
            "https://api.example.com"
        );
        assert_eq!(
            origin("http://127.0.0.1:8080/v1/chat?x=1"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(origin("http://h:1"), "http://h:1");
    }

    #[test]
    fn a_lease_is_taken_once_and_an_aborted_agent_never_returns() {
        let url = "http://127.0.0.1:1/lease-test";
        let (lease, _agent) = Lease::take(url);
        lease.abort();
        lease.release();
        assert!(idle().get(origin(url)).is_none_or(Vec::is_empty));

        let (lease, _agent) = Lease::take(url);
        lease.release();
        lease.abort(); // too late: it is back in the pool, untouched
        assert_eq!(idle().get(origin(url)).map(Vec::len), Some(1));
        let (again, _) = Lease::take(url);
        assert!(idle().get(origin(url)).is_some_and(Vec::is_empty));
        again.discard();
        assert!(idle().get(origin(url)).is_some_and(Vec::is_empty));
    }
}
