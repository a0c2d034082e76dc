//! The reader's way into the command lane (see `stdin.rs`): the reader puts frames in the lane
//! itself while it has room, and hands them to the `gjc-stdin-queue` thread from the first frame
//! that does not fit.

use std::collections::VecDeque;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender, TrySendError};

use super::stdin::{COMMAND_QUEUE_BYTES, LOOKAHEAD_BYTES, LOOKAHEAD_LINES};
use crate::lanes::CommandFrame;
use crate::room::Room;

/// The reader's way into the command lane. While the lane has room the reader puts frames in it
/// itself; the first frame that does not fit starts `gjc-stdin-queue`, and from then on every
/// frame goes through the lookahead to that thread, which reports each one's weight back once it
/// is in the lane, so the reader knows how many bytes are still ahead. A host that never fills
/// the lane never starts the thread, and its commands reach the session one hop sooner.
pub(super) struct Lookahead(Ahead);

enum Ahead {
    /// The reader is the lane's only sender.
    Direct {
        lane: Sender<CommandFrame>,
        room: Room,
        bytes: LaneBytes,
    },
    /// `gjc-stdin-queue` is, for good.
    Queued {
        frames: Sender<(CommandFrame, usize)>,
        forwarded: Receiver<usize>,
        bytes: usize,
    },
    /// The session has gone: nothing will be taken any more.
    Closed,
}

impl Lookahead {
    pub(super) fn new(lane: Sender<CommandFrame>, room: Room) -> Lookahead {
        Lookahead(Ahead::Direct {
            lane,
            room,
            bytes: LaneBytes::default(),
        })
    }

    /// Whether frames go through `gjc-stdin-queue`.
    #[cfg(test)]
    fn is_queued(&self) -> bool {
        matches!(self.0, Ahead::Queued { .. })
    }

    /// Queues a frame, waiting while the lookahead is full (by lines or bytes). False when the
    /// queue thread was needed and could not be started: the reader then stops as at EOF.
    pub(super) fn push(&mut self, frame: CommandFrame, weight: usize) -> bool {
        let Some(frame) = self.try_direct(frame, weight) else {
            return true;
        };
        if matches!(self.0, Ahead::Direct { .. }) && !self.start_queue() {
            return false;
        }
        self.queue(frame, weight);
        true
    }

    /// Puts the frame in the lane while the reader is its sender and it fits; gives it back
    /// otherwise.
    fn try_direct(&mut self, frame: CommandFrame, weight: usize) -> Option<CommandFrame> {
        let Ahead::Direct { lane, bytes, .. } = &mut self.0 else {
            return Some(frame);
        };
        bytes.settle(lane.len());
        if !bytes.fits(weight) {
            return Some(frame);
        }
        match lane.try_send(frame) {
            Ok(()) => {
                bytes.sent(weight);
                None
            }
            Err(TrySendError::Full(frame)) => Some(frame),
            Err(TrySendError::Disconnected(_)) => {
                self.0 = Ahead::Closed;
                None
            }
        }
    }

    /// Hands the frame to `gjc-stdin-queue`, waiting while the lookahead is full.
    fn queue(&mut self, frame: CommandFrame, weight: usize) {
        let Ahead::Queued {
            frames,
            forwarded,
            bytes,
        } = &mut self.0
        else {
            return;
        };
        *bytes -= forwarded.try_iter().sum::<usize>();
        while *bytes > 0 && *bytes + weight > LOOKAHEAD_BYTES {
            match forwarded.recv() {
                Ok(w) => *bytes -= w,
                Err(_) => return,
            }
        }
        if frames.send((frame, weight)).is_ok() {
            *bytes += weight;
        }
    }

    /// Hands the lane, and what it holds, to a new `gjc-stdin-queue` thread.
    fn start_queue(&mut self) -> bool {
        let Ahead::Direct { lane, room, bytes } = std::mem::replace(&mut self.0, Ahead::Closed)
        else {
            return true;
        };
        let (frames, ahead) = bounded(LOOKAHEAD_LINES);
        // At most one report per frame handed over, and they are collected at every push.
        let (report, forwarded) = unbounded();
        let spawned = std::thread::Builder::new()
            .name("gjc-stdin-queue".into())
            .spawn(move || forward(ahead, lane, room, bytes, report));
        if let Err(e) = spawned {
            log::error!("cannot start thread gjc-stdin-queue: {e}");
            return false;
        }
        self.0 = Ahead::Queued {
            frames,
            forwarded,
            bytes: 0,
        };
        true
    }
}

/// The `gjc-stdin-queue` loop: moves frames from the lookahead into the command lane, in order,
/// after those the reader put there itself (`lane_bytes`).
fn forward(
    ahead: Receiver<(CommandFrame, usize)>,
    lane: Sender<CommandFrame>,
    room: Room,
    mut lane_bytes: LaneBytes,
    report: Sender<usize>,
) {
    for (frame, weight) in ahead {
        if !lane_bytes.wait_for_room(&lane, &room, weight) {
            return;
        }
        if lane.send(frame).is_err() {
            return;
        }
        lane_bytes.sent(weight);
        let _ = report.send(weight);
    }
}

/// The bytes in the command lane. Its one sender (the reader, then `gjc-stdin-queue`) keeps
/// this, and the lane is FIFO, so the frames still queued are the last `lane.len()` it sent.
#[derive(Default)]
struct LaneBytes {
    weights: VecDeque<usize>,
    total: usize,
}

impl LaneBytes {
    fn sent(&mut self, weight: usize) {
        self.weights.push_back(weight);
        self.total += weight;
    }

    fn settle(&mut self, queued: usize) {
        while self.weights.len() > queued {
            self.total -= self.weights.pop_front().unwrap_or(0);
        }
    }

    /// Whether `weight` more stays within the byte budget (one frame is let in regardless).
    fn fits(&self, weight: usize) -> bool {
        self.total == 0 || self.total + weight <= COMMAND_QUEUE_BYTES
    }

    /// Waits while `weight` more would pass the byte budget, woken by the session each time it
    /// takes a frame (the count bound blocks in `send` by itself). False once the session has
    /// gone: nothing will be taken any more.
    fn wait_for_room(&mut self, lane: &Sender<CommandFrame>, room: &Room, weight: usize) -> bool {
        room.wait_until(|| {
            self.settle(lane.len());
            self.fits(weight)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lanes::COMMAND_QUEUE;
    use crate::protocol::{decode_line, Inbound};
    use std::time::Duration;

    const WAIT: Duration = Duration::from_secs(10);
    /// What a small frame weighs.
    const FRAME: usize = 128;

    fn id_of(frame: CommandFrame) -> String {
        match frame {
            CommandFrame::Command(queued) => queued.id.unwrap().as_str().unwrap().to_string(),
            other => panic!("unexpected frame {other:?}"),
        }
    }

    /// A `get_state` command frame with id `n`.
    fn frame(n: usize) -> CommandFrame {
        let line = format!(r#"{{"id":"{n}","type":"get_state"}}"#);
        match decode_line(line.as_bytes()) {
            Some(Inbound::Command { id, command }) => CommandFrame::command(id, command),
            _ => panic!("not a command: {line}"),
        }
    }

    /// Takes `n` frames as the session does and checks they come in order.
    fn take_in_order(commands: &Receiver<CommandFrame>, taken: &crate::room::Taken, n: usize) {
        for i in 0..n {
            let frame = commands.recv_timeout(WAIT).expect("a queued command");
            taken.taken();
            assert_eq!(id_of(frame), i.to_string());
        }
    }

    /// The reader puts frames in a lane with room itself; `gjc-stdin-queue` starts with the
    /// first frame that does not fit, by count or by bytes, and the order holds across.
    #[test]
    fn the_queue_thread_starts_when_the_lane_is_first_full() {
        let (lane, commands) = bounded(2);
        let (taken, room) = crate::room::room();
        let mut ahead = Lookahead::new(lane, room);
        for n in 0..2 {
            assert!(ahead.push(frame(n), FRAME));
            assert!(!ahead.is_queued(), "frame {n} fitted in the lane");
        }
        assert!(ahead.push(frame(2), FRAME));
        assert!(ahead.is_queued(), "the third frame did not fit");
        take_in_order(&commands, &taken, 3);

        let (lane, commands) = bounded(COMMAND_QUEUE);
        let (taken, room) = crate::room::room();
        let mut ahead = Lookahead::new(lane, room);
        assert!(ahead.push(frame(0), COMMAND_QUEUE_BYTES));
        assert!(
            !ahead.is_queued(),
            "one frame is let in regardless of its bytes"
        );
        assert!(ahead.push(frame(1), FRAME));
        assert!(ahead.is_queued(), "over the byte budget");
        take_in_order(&commands, &taken, 2);
    }
}
