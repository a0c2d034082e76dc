//! The session's outbox: the one owner of the output lane's sending end. Frames of the event being
//! handled wait here and are handed to the writer together (`flush`); streamed deltas are merged
//! into one held `message_update` while the writer is backed up, so the loop never blocks on
//! stdout and the host still receives every byte, in fewer frames.

use crossbeam_channel::Receiver;

use crate::output::OutTx;
use crate::protocol::message::StreamEvent;
use crate::protocol::{AgentEvent, Outbound};

pub(super) struct Outbox {
    out: OutTx,
    /// Woken when the output lane, backed up before, has drained.
    drained: Receiver<()>,
    /// Compact `message_update` frames (`set_capabilities` / `--compact-updates`).
    compact: bool,
    /// Deltas merged while the output lane is backed up, not yet queued.
    held: Option<StreamEvent>,
    /// About how large the streamed message's snapshot is, to count update frames by the bytes
    /// the writer will write for them.
    snapshot_bytes: usize,
    /// Frames of the event being handled, with their costs, queued together when it is done:
    /// queued one by one, each woke the writer for one frame and one write.
    frames: Vec<(Outbound, usize)>,
    /// A send failed: the writer is gone (stdout closed) and the session shuts down.
    closed: bool,
}

impl Outbox {
    pub(super) fn new(out: OutTx, drained: Receiver<()>, compact: bool) -> Outbox {
        Outbox {
            out,
            drained,
            compact,
            held: None,
            snapshot_bytes: 0,
            frames: Vec::new(),
            closed: false,
        }
    }

    /// The writer is gone: nothing sent from now on reaches the host.
    pub(super) fn is_closed(&self) -> bool {
        self.closed
    }

    pub(super) fn set_compact(&mut self, compact: bool) {
        self.compact = compact;
    }

    /// The lane a worker that writes frames of its own (hooks) is given.
    pub(super) fn lane(&self) -> OutTx {
        self.out.clone()
    }

    /// Fires once the backed-up lane has drained (`wake_when_drained`).
    pub(super) fn drained(&self) -> &Receiver<()> {
        &self.drained
    }

    /// The host is not reading: the loop takes no new command until it does, and is woken then.
    pub(super) fn pause_if_backed_up(&self) -> bool {
        let backed_up = self.out.is_backed_up();
        if backed_up {
            self.out.wake_when_drained();
        }
        backed_up
    }

    /// The frames waiting are few and small enough to wait for the next ones of a fast stream.
    pub(super) fn can_wait(&self, frames: usize, bytes: usize) -> bool {
        self.frames.len() < frames
            && self.frames.iter().map(|(_, cost)| cost).sum::<usize>() < bytes
    }

    /// Queues a frame (never blocking) with the others of the event being handled.
    pub(super) fn send(&mut self, frame: Outbound) {
        self.flush_held();
        let cost = crate::output::estimate(&frame);
        self.frames.push((frame, cost));
    }

    pub(super) fn emit(&mut self, event: AgentEvent) {
        if matches!(
            event,
            AgentEvent::MessageStart { .. } | AgentEvent::MessageEnd { .. }
        ) {
            self.snapshot_bytes = 256;
        }
        self.send(Outbound::Event(Box::new(event)));
    }

    /// A streamed delta as `message_update`: queued at once, or merged into the held one while
    /// the output lane is backed up.
    pub(super) fn update(&mut self, event: StreamEvent) {
        let event = match self.held.take() {
            Some(mut held) => {
                if held.merge(&event) {
                    held
                } else {
                    self.queue_update(held);
                    event
                }
            }
            None => event,
        };
        if self.out.is_backed_up() {
            self.held = Some(event);
            self.out.wake_when_drained();
        } else {
            self.queue_update(event);
        }
    }

    /// The held update joins the queued frames (the lane drained, or another frame follows it).
    pub(super) fn flush_held(&mut self) {
        if let Some(held) = self.held.take() {
            self.queue_update(held);
        }
    }

    fn queue_update(&mut self, event: StreamEvent) {
        self.snapshot_bytes += event.delta_len();
        let compact = self.compact;
        // Reference-shape frames carry the snapshot twice.
        let cost = event.delta_len()
            + if compact {
                256
            } else {
                2 * self.snapshot_bytes
            };
        let frame = Outbound::Event(Box::new(AgentEvent::MessageUpdate {
            assistant_message_event: event,
            compact,
        }));
        self.frames.push((frame, cost));
    }

    /// Hands the queued frames to the writer, together.
    pub(super) fn flush(&mut self) {
        for (frame, cost) in self.frames.drain(..) {
            if self.out.send_costed(frame, cost).is_err() {
                self.closed = true;
            }
        }
    }

    /// `frame` ahead of what the writer has not written yet (the caller flushes first).
    pub(super) fn send_first(&mut self, frame: Outbound) {
        if self.out.send_first(frame).is_err() {
            self.closed = true;
        }
    }
}
