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
//! down an agent that is already back in the pool. The worker hands the message to the session
//! before it reads the end of the body (so a server that keeps a finished body open delays
//! nothing); a request to the same origin starting in that moment waits for the agent (50 ms at
//! most) instead of opening another connection.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::http;

/// Idle agents kept per origin: a session streams one request at a time, plus the odd
/// compaction or discovery overlapping it.
const IDLE_PER_ORIGIN: usize = 4;

/// How long a new request waits for a stream of its origin that is reading the end of its body
/// (that takes microseconds; the bound only matters for a server that keeps a finished body open).
const FINISHING_WAIT: Duration = Duration::from_millis(50);

#[derive(Default)]
struct Origins {
    idle: HashMap<String, Vec<ureq::Agent>>,
    /// Streams whose message is complete and whose agent is about to come back.
    finishing: HashMap<String, usize>,
}

struct Shared {
    origins: Mutex<Origins>,
    returned: Condvar,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| Shared {
        origins: Mutex::default(),
        returned: Condvar::new(),
    })
}

fn origins() -> MutexGuard<'static, Origins> {
    // The maps stay consistent even if a holder panicked: every change is one step.
    shared()
        .origins
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `scheme://host:port` of a URL (what connections are kept by).
pub fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find(['/', '?', '#']) {
        Some(end) => &url[..after_scheme + end],
        None => url,
    }
}

/// An idle agent of `origin`; when none is idle but a stream of that origin is finishing, its
/// agent (for a bounded time); else a new one.
fn checkout(origin: &str) -> ureq::Agent {
    let deadline = Instant::now() + FINISHING_WAIT;
    let mut o = origins();
    loop {
        if let Some(agent) = o.idle.get_mut(origin).and_then(Vec::pop) {
            return agent;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if o.finishing.get(origin).copied().unwrap_or(0) == 0 || left.is_zero() {
            drop(o);
            return http::agent();
        }
        o = match shared().returned.wait_timeout(o, left) {
            Ok((guard, _)) => guard,
            Err(poisoned) => poisoned.into_inner().0,
        };
    }
}

#[derive(Default)]
struct Slot {
    agent: Option<ureq::Agent>,
    aborted: bool,
    finishing: bool,
}

/// One stream's agent, taken once: by [`Lease::abort`] (shut down) or by the worker when the
/// stream ended ([`Lease::finish`]: back to the pool when it ended cleanly, else shut down).
#[derive(Clone)]
pub struct Lease {
    origin: String,
    slot: Arc<Mutex<Slot>>,
}

impl Lease {
    /// A lease for a request to `url`; the worker acquires the agent.
    pub fn new(url: &str) -> Lease {
        Lease {
            origin: origin(url).to_string(),
            slot: Arc::default(),
        }
    }

    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The agent for this stream (on the worker thread). After an abort it is a new agent
    /// already shut down, so the request fails at once as an aborted one, as it always has.
    pub fn acquire(&self) -> ureq::Agent {
        let agent = checkout(&self.origin);
        let mut slot = self.slot();
        if slot.aborted {
            drop(slot);
            checkin(&self.origin, agent);
            let dead = http::agent();
            dead.clone().shutdown();
            return dead;
        }
        slot.agent = Some(agent.clone());
        agent
    }

    /// Closes the stream's connection at once (ending a read blocked on it); the agent is not
    /// used again.
    pub fn abort(&self) {
        let mut slot = self.slot();
        slot.aborted = true;
        if let Some(agent) = slot.agent.take() {
            agent.shutdown();
        }
    }

    /// The message is complete and the worker reads the end of the body: a request to this
    /// origin starting now waits for the agent instead of opening a connection.
    pub fn finishing(&self) {
        let mut slot = self.slot();
        if slot.agent.is_some() && !slot.finishing {
            slot.finishing = true;
            *origins().finishing.entry(self.origin.clone()).or_default() += 1;
        }
    }

    /// The stream is over. `clean`: it ended well and its body was read to the end, so the
    /// connection may serve the next request to this origin; otherwise it is never reused.
    pub fn finish(&self, clean: bool) {
        let (agent, finishing) = {
            let mut slot = self.slot();
            (slot.agent.take(), std::mem::take(&mut slot.finishing))
        };
        match agent {
            Some(agent) if clean => checkin(&self.origin, agent),
            Some(agent) => agent.shutdown(),
            None => {}
        }
        if finishing {
            let mut o = origins();
            if let Some(n) = o.finishing.get_mut(&self.origin) {
                *n = n.saturating_sub(1);
            }
            drop(o);
            shared().returned.notify_all();
        }
    }
}

fn checkin(origin: &str, agent: ureq::Agent) {
    let mut o = origins();
    let list = o.idle.entry(origin.to_string()).or_default();
    if list.len() < IDLE_PER_ORIGIN {
        list.push(agent);
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

    fn idle_count(url: &str) -> usize {
        origins().idle.get(origin(url)).map_or(0, Vec::len)
    }

    #[test]
    fn a_lease_is_taken_once_and_an_aborted_agent_never_returns() {
        let url = "http://127.0.0.1:1/lease-test";
        let lease = Lease::new(url);
        lease.acquire();
        lease.abort();
        lease.finish(true);
        assert_eq!(idle_count(url), 0);

        let lease = Lease::new(url);
        lease.acquire();
        lease.finish(true);
        lease.abort(); // too late: it is back in the pool, untouched
        assert_eq!(idle_count(url), 1);
        let again = Lease::new(url);
        again.acquire();
        assert_eq!(idle_count(url), 0);
        again.finish(false);
        assert_eq!(idle_count(url), 0);
    }

    #[test]
    fn a_request_waits_for_the_agent_of_a_finishing_stream() {
        let url = "http://127.0.0.1:2/finishing-test";
        let first = Lease::new(url);
        first.acquire();
        first.finishing();
        let returning = first.clone();
        let worker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            returning.finish(true);
        });
        let second = Lease::new(url);
        second.acquire();
        worker.join().unwrap();
        // The second took the first's agent rather than a new one: none is left idle.
        assert_eq!(idle_count(url), 0);
        assert_eq!(origins().finishing.get(origin(url)), Some(&0));
    }
}
