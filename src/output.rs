//! The output lane: every frame for stdout travels through it to the `gjc-stdout` writer.
//!
//! Senders never block. The lane is an unbounded channel plus a gauge of the bytes it holds that
//! are not yet written (an estimate per frame, given back by the writer once the frame is out).
//! When the gauge is over [`HIGH`] the lane counts as backed up: the session then stops taking new
//! commands and merges streamed deltas instead of queueing one frame each, so a host that stops
//! reading stdout holds back the agent's output, never its control lane (abort, signals, EOF),
//! and memory stays bounded by what the running work produces. When the writer brings the gauge
//! back under a quarter of that it wakes whoever asked to be woken.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender, TryRecvError};

use crate::protocol::{AgentEvent, Outbound};

/// Unwritten bytes above which the lane is backed up (`GJC_OUTPUT_BACKLOG_BYTES` overrides it).
/// A command's response queues behind what is waiting, so this is also about how long a
/// `get_state` during a fast default-mode stream (each frame carrying the whole message) waits:
/// at 1 MiB its median was several milliseconds; at a quarter of that, about what compact frames
/// give. Deltas merged while backed up lose no text.
pub const HIGH: usize = 256 << 10;

/// The backlog limit: a host that wants one frame per delta however slowly it reads can raise it,
/// at the cost of memory while it does not read.
fn high_mark() -> usize {
    std::env::var("GJC_OUTPUT_BACKLOG_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(HIGH)
}

struct Gauge {
    /// Backed up above this; a waiting sender is woken at a quarter of it.
    high: usize,
    pending: AtomicUsize,
    waiting: AtomicBool,
    wake: Sender<()>,
}

/// A frame and the bytes it was counted as.
pub struct Queued {
    pub frame: Outbound,
    cost: usize,
}

/// The sending side; cheap to clone.
#[derive(Clone)]
pub struct OutTx {
    tx: Sender<Queued>,
    gauge: Arc<Gauge>,
}

/// The writer's side.
pub struct OutRx {
    rx: Receiver<Queued>,
    gauge: Arc<Gauge>,
}

/// The writer has gone (stdout failed or the process is stopping).
#[derive(Debug)]
pub struct Closed;

/// A new lane, and the receiver of its wake-ups (at most one pending).
pub fn lane() -> (OutTx, OutRx, Receiver<()>) {
    let (tx, rx) = unbounded();
    let (wake, woken) = bounded(1);
    let gauge = Arc::new(Gauge {
        high: high_mark(),
        pending: AtomicUsize::new(0),
        waiting: AtomicBool::new(false),
        wake,
    });
    let out = OutTx {
        tx,
        gauge: gauge.clone(),
    };
    (out, OutRx { rx, gauge }, woken)
}

impl OutTx {
    /// Queues a frame, counted by its estimated size.
    pub fn send(&self, frame: Outbound) -> Result<(), Closed> {
        let cost = estimate(&frame);
        self.send_costed(frame, cost)
    }

    /// Queues a frame whose written size the caller knows better (a `message_update` carries a
    /// snapshot that only the writer builds).
    pub fn send_costed(&self, frame: Outbound, cost: usize) -> Result<(), Closed> {
        self.gauge.pending.fetch_add(cost, Ordering::Relaxed);
        self.tx.send(Queued { frame, cost }).map_err(|_| {
            self.gauge.pending.fetch_sub(cost, Ordering::Relaxed);
            Closed
        })
    }

    pub fn is_backed_up(&self) -> bool {
        self.gauge.pending.load(Ordering::Relaxed) > self.gauge.high
    }

    /// Asks for one wake-up when the writer has caught up. Checked again after asking, so a
    /// catch-up that happened in between is not missed.
    pub fn wake_when_drained(&self) {
        self.gauge.waiting.store(true, Ordering::SeqCst);
        if self.gauge.pending.load(Ordering::SeqCst) <= self.gauge.low() {
            self.gauge.notify();
        }
    }
}

impl OutRx {
    /// The channel itself, for a reader that selects over it and another source (the ACP front
    /// end); call `written` for each frame taken from it.
    pub fn receiver(&self) -> &Receiver<Queued> {
        &self.rx
    }

    pub fn recv(&self) -> Option<Queued> {
        self.rx.recv().ok()
    }

    /// The next frame if one is queued; `Err(true)` once every sender is gone.
    pub fn try_recv(&self) -> Result<Queued, bool> {
        self.rx
            .try_recv()
            .map_err(|e| e == TryRecvError::Disconnected)
    }

    /// A frame has been written (or dropped): its bytes leave the gauge.
    pub fn written(&self, cost: usize) {
        let before = self.gauge.pending.fetch_sub(cost, Ordering::SeqCst);
        if before.saturating_sub(cost) <= self.gauge.low() {
            self.gauge.notify();
        }
    }
}

impl Queued {
    pub fn cost(&self) -> usize {
        self.cost
    }
}

impl Gauge {
    fn low(&self) -> usize {
        self.high / 4
    }

    fn notify(&self) {
        if self.waiting.swap(false, Ordering::SeqCst) {
            let _ = self.wake.try_send(());
        }
    }
}

/// About how many bytes a frame takes on stdout. Only the order of magnitude matters.
fn estimate(frame: &Outbound) -> usize {
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
    fn a_request_made_after_the_catch_up_wakes_at_once() {
        let (tx, _rx, woken) = lane();
        tx.wake_when_drained();
        assert!(woken.try_recv().is_ok());
    }
}
