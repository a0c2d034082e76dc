//! The output lane: every frame for stdout travels through it to the `gjc-stdout` writer.
//!
//! Senders never block. The lane is an unbounded channel plus a gauge of the bytes it holds that
//! are not yet written (an estimate per frame, given back by the writer once the frame is out).
//! When the gauge is over [`HIGH`] the lane counts as backed up: the session then stops taking new
//! commands and merges streamed deltas instead of queueing one frame each, so a host that stops
//! reading stdout holds back the agent's output, never its control lane (abort, signals, EOF),
//! and memory stays bounded by what the running work produces. When the writer brings the gauge
//! back under a quarter of that it wakes whoever asked to be woken.
//!
//! Responses to `get_state` take a second, first-served queue: a host polling state during a
//! fast stream should not wait behind the backlog of snapshot frames. They overtake events only,
//! never another response, so responses keep the order of their commands; the client contract
//! allows events and responses in any order, and the state a response carries is never older
//! than the events queued before it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender, TryRecvError};

use crate::protocol::{AgentEvent, Outbound};

/// Unwritten bytes above which the lane is backed up (`GJC_OUTPUT_BACKLOG_BYTES` overrides it).
/// A command's response queues behind what is waiting, so this is also about how long a
/// `get_state` during a fast default-mode stream (each frame carrying the whole message) waits:
/// at 1 MiB its median was several milliseconds; at a quarter of that, about what compact frames
/// give. Deltas merged while backed up lose no text.
pub const HIGH: usize = crate::settings::OUTPUT_BACKLOG_BYTES;

struct Gauge {
    /// Backed up above this; a waiting sender is woken at a quarter of it.
    high: usize,
    pending: AtomicUsize,
    /// Responses in the ordinary queue not yet taken: while there is one, nothing overtakes.
    responses: AtomicUsize,
    waiting: AtomicBool,
    /// Who asked to be woken, by session (several sessions share one lane).
    wakers: std::sync::Mutex<std::collections::HashMap<u64, Sender<()>>>,
}

/// A frame and what it was counted as.
pub struct Queued {
    pub frame: Outbound,
    /// The session that queued it (`OutTx::for_session`; 0 for the process's own frames).
    pub session: u64,
    cost: Cost,
}

/// What a queued frame holds of the gauge, given back by `OutRx::written`.
#[derive(Clone, Copy)]
pub struct Cost {
    bytes: usize,
    /// A response in the ordinary queue (counted in `Gauge::responses`).
    ordered_response: bool,
}

/// The sending side; cheap to clone.
#[derive(Clone)]
pub struct OutTx {
    tx: Sender<Queued>,
    urgent: Sender<Queued>,
    gauge: Arc<Gauge>,
    /// The tag of the frames sent through this handle, and where its wake-up goes.
    session: u64,
    wake: Sender<()>,
}

/// The writer's side.
pub struct OutRx {
    rx: Receiver<Queued>,
    urgent: Receiver<Queued>,
    gauge: Arc<Gauge>,
}

/// The writer has gone (stdout failed or the process is stopping).
#[derive(Debug)]
pub struct Closed;

/// A new lane backed up at [`HIGH`], and the receiver of its wake-ups (at most one pending).
pub fn lane() -> (OutTx, OutRx, Receiver<()>) {
    lane_with(HIGH)
}

/// A new lane backed up at `high` bytes (`Settings::output_backlog_bytes`: a host that wants one
/// frame per delta however slowly it reads can raise it, at the cost of memory while it does not
/// read), and the receiver of its wake-ups.
pub fn lane_with(high: usize) -> (OutTx, OutRx, Receiver<()>) {
    let (tx, rx) = unbounded();
    let (urgent_tx, urgent) = unbounded();
    let (wake, woken) = bounded(1);
    let gauge = Arc::new(Gauge {
        high,
        pending: AtomicUsize::new(0),
        responses: AtomicUsize::new(0),
        waiting: AtomicBool::new(false),
        wakers: Default::default(),
    });
    let out = OutTx {
        tx,
        urgent: urgent_tx,
        gauge: gauge.clone(),
        session: 0,
        wake,
    };
    let rx = OutRx { rx, urgent, gauge };
    (out, rx, woken)
}

impl OutTx {
    /// The same lane for session `session`: its frames carry that tag, and it has its own
    /// wake-up (returned) for when the lane drains. One stdout, so one gauge for all.
    pub fn for_session(&self, session: u64) -> (OutTx, Receiver<()>) {
        let (wake, woken) = bounded(1);
        let out = OutTx {
            tx: self.tx.clone(),
            urgent: self.urgent.clone(),
            gauge: self.gauge.clone(),
            session,
            wake,
        };
        (out, woken)
    }

    /// Queues a frame, counted by its estimated size.
    pub fn send(&self, frame: Outbound) -> Result<(), Closed> {
        let cost = estimate(&frame);
        self.send_costed(frame, cost)
    }

    /// Queues a frame whose written size the caller knows better (a `message_update` carries a
    /// snapshot that only the writer builds).
    pub fn send_costed(&self, frame: Outbound, cost: usize) -> Result<(), Closed> {
        let response = matches!(frame, Outbound::Response(_));
        self.queue(&self.tx, frame, cost, response)
    }

    /// Queues a response ahead of the events waiting, but never ahead of another response: with
    /// one still in the ordinary queue it goes there, behind it.
    pub fn send_first(&self, frame: Outbound) -> Result<(), Closed> {
        if self.gauge.responses.load(Ordering::SeqCst) > 0 {
            return self.send(frame);
        }
        let cost = estimate(&frame);
        self.queue(&self.urgent, frame, cost, false)
    }

    fn queue(
        &self,
        queue: &Sender<Queued>,
        frame: Outbound,
        bytes: usize,
        ordered_response: bool,
    ) -> Result<(), Closed> {
        let cost = Cost {
            bytes,
            ordered_response,
        };
        self.gauge.pending.fetch_add(bytes, Ordering::Relaxed);
        if ordered_response {
            self.gauge.responses.fetch_add(1, Ordering::SeqCst);
        }
        let session = self.session;
        queue
            .send(Queued {
                frame,
                session,
                cost,
            })
            .map_err(|_| {
                self.gauge.given_back(cost);
                Closed
            })
    }

    pub fn is_backed_up(&self) -> bool {
        self.gauge.pending.load(Ordering::Relaxed) > self.gauge.high
    }

    /// Asks for one wake-up when the writer has caught up. Checked again after asking, so a
    /// catch-up that happened in between is not missed.
    pub fn wake_when_drained(&self) {
        self.gauge
            .wakers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(self.session)
            .or_insert_with(|| self.wake.clone());
        self.gauge.waiting.store(true, Ordering::SeqCst);
        if self.gauge.pending.load(Ordering::SeqCst) <= self.gauge.low() {
            self.gauge.notify();
        }
    }
}

impl OutRx {
    /// The two queues, first-served then ordinary, for a reader that selects over them and
    /// another source (the ACP front end, biased in this order); call `written` for each frame
    /// taken from them.
    pub fn receivers(&self) -> (&Receiver<Queued>, &Receiver<Queued>) {
        (&self.urgent, &self.rx)
    }

    /// Nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.urgent.is_empty() && self.rx.is_empty()
    }

    /// The next frame, first-served queue first; `None` once every sender is gone and both
    /// queues are drained. (Both queues lose their senders together: one `OutTx` holds both.)
    pub fn recv(&self) -> Option<Queued> {
        // A frame already queued is taken without a select, which registers with both queues
        // (a lock each) only to find it there.
        if let Ok(q) = self.try_recv() {
            return Some(q);
        }
        crossbeam_channel::select_biased! {
            recv(self.urgent) -> q => q.ok().or_else(|| self.rx.recv().ok()),
            recv(self.rx) -> q => q.ok(),
        }
    }

    /// The next frame if one is queued; `Err(true)` once every sender is gone.
    pub fn try_recv(&self) -> Result<Queued, bool> {
        if let Ok(q) = self.urgent.try_recv() {
            return Ok(q);
        }
        self.rx
            .try_recv()
            .map_err(|e| e == TryRecvError::Disconnected)
    }

    /// A frame has been written (or dropped): its bytes leave the gauge.
    pub fn written(&self, cost: Cost) {
        let before = self.gauge.given_back(cost);
        if before.saturating_sub(cost.bytes) <= self.gauge.low() {
            self.gauge.notify();
        }
    }
}

impl Queued {
    pub fn cost(&self) -> Cost {
        self.cost
    }
}

impl Gauge {
    /// Takes a frame's share off the gauge; the bytes pending before.
    fn given_back(&self, cost: Cost) -> usize {
        if cost.ordered_response {
            self.responses.fetch_sub(1, Ordering::SeqCst);
        }
        self.pending.fetch_sub(cost.bytes, Ordering::SeqCst)
    }

    fn low(&self) -> usize {
        self.high / 4
    }

    fn notify(&self) {
        if self.waiting.swap(false, Ordering::SeqCst) {
            let wakers = std::mem::take(
                &mut *self
                    .wakers
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            for wake in wakers.values() {
                let _ = wake.try_send(());
            }
        }
    }
}

/// About how many bytes a frame takes on stdout. Only the order of magnitude matters.
pub fn estimate(frame: &Outbound) -> usize {
    const SMALL: usize = 256;
    match frame {
        Outbound::Ready | Outbound::Frame(_) | Outbound::Show(_) | Outbound::Terminal(_) => SMALL,
        Outbound::Response(r) => SMALL + r.data.as_ref().map_or(0, |d| d.get().len()),
        Outbound::Event(ev) => match ev.as_ref() {
            AgentEvent::MessageUpdate {
                assistant_message_event,
                ..
            } => SMALL + assistant_message_event.delta_len(),
            _ => 4 * SMALL,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Response;

    #[test]
    fn gauge_backs_up_and_wakes_once_drained() {
        let (tx, rx, woken) = lane();
        tx.send_costed(Outbound::Ready, HIGH + 1).unwrap();
        assert!(tx.is_backed_up());
        tx.wake_when_drained();
        assert!(woken.try_recv().is_err());
        let q = rx.try_recv().ok().unwrap();
        rx.written(q.cost());
        assert!(!tx.is_backed_up());
        assert!(woken.try_recv().is_ok());
        // One wake per request.
        tx.send(Outbound::Response(Response::done(None, "x")))
            .unwrap();
        let q = rx.try_recv().ok().unwrap();
        rx.written(q.cost());
        assert!(woken.try_recv().is_err());
    }

    #[test]
    fn first_served_frames_overtake_the_backlog_and_nothing_is_lost() {
        let (tx, rx, _woken) = lane();
        for _ in 0..3 {
            tx.send(Outbound::Ready).unwrap();
        }
        tx.send_first(Outbound::Response(Response::done(None, "get_state")))
            .unwrap();
        let first = rx.recv().unwrap();
        assert!(matches!(first.frame, Outbound::Response(_)));
        rx.written(first.cost());
        // Behind a response still queued, a first-served one waits its turn.
        tx.send(Outbound::Response(Response::done(None, "set_model")))
            .unwrap();
        tx.send_first(Outbound::Response(Response::done(None, "get_state")))
            .unwrap();
        drop(tx);
        let mut rest = Vec::new();
        while let Some(q) = rx.recv() {
            rx.written(q.cost());
            rest.push(match q.frame {
                Outbound::Ready => "ready".to_string(),
                Outbound::Response(r) => r.command,
                _ => "other".to_string(),
            });
        }
        assert_eq!(rest, ["ready", "ready", "ready", "set_model", "get_state"]);
        assert!(rx.is_empty());
    }

    #[test]
    fn a_request_made_after_the_catch_up_wakes_at_once() {
        let (tx, _rx, woken) = lane();
        tx.wake_when_drained();
        assert!(woken.try_recv().is_ok());
    }
}
