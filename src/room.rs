//! Room in the command lane, announced. The command lane is bounded by frames, which its
//! channel enforces, and by the bytes of the lines they came from, which it cannot: a sender
//! over the byte budget must wait until the session has taken something. The session calls
//! [`Taken::taken`] after each frame it takes; a sender that waits for room is woken by it,
//! so the wait is a blocking receive, never a poll. Taking costs one atomic load when nobody
//! waits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::{bounded, Receiver, Sender};

/// The session's end: told of every frame taken from the lane.
pub struct Taken {
    waiting: Arc<AtomicBool>,
    wake: Sender<()>,
}

/// The sender's end: waits until the session has taken a frame.
pub struct Room {
    waiting: Arc<AtomicBool>,
    woken: Receiver<()>,
}

pub fn room() -> (Taken, Room) {
    let waiting = Arc::new(AtomicBool::new(false));
    // One wake-up is enough however many frames were taken: the waiter looks at the lane again.
    let (wake, woken) = bounded(1);
    (
        Taken {
            waiting: waiting.clone(),
            wake,
        },
        Room { waiting, woken },
    )
}

impl Taken {
    /// A frame left the lane: wake the sender if it waits for room.
    pub fn taken(&self) {
        if self.waiting.load(Ordering::SeqCst) && self.waiting.swap(false, Ordering::SeqCst) {
            let _ = self.wake.try_send(());
        }
    }
}

impl Room {
    /// Blocks until `ready` says yes, re-checking it each time the session takes a frame.
    /// False when the session has gone (it will take nothing more).
    pub fn wait_until(&self, mut ready: impl FnMut() -> bool) -> bool {
        loop {
            if ready() {
                return true;
            }
            // Announce the wait, then look again: a frame taken between the first look and the
            // announcement is seen by the second look, one taken after it wakes us.
            self.waiting.store(true, Ordering::SeqCst);
            if ready() {
                self.waiting.store(false, Ordering::SeqCst);
                return true;
            }
            if self.woken.recv().is_err() {
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// How long nothing must happen to count as "still waiting".
    const QUIET: Duration = Duration::from_millis(50);
    const WAIT: Duration = Duration::from_secs(10);

    #[test]
    fn a_waiting_sender_is_woken_by_the_frame_taken() {
        let (taken, room) = room();
        let (lane_tx, lane_rx) = bounded::<u32>(4);
        for i in 0..4 {
            lane_tx.send(i).unwrap();
        }
        let (done_tx, done) = bounded(1);
        std::thread::spawn(move || {
            let _ = done_tx.send(room.wait_until(|| lane_tx.len() <= 2));
        });
        assert!(done.recv_timeout(QUIET).is_err(), "four frames queued");
        lane_rx.recv().unwrap();
        taken.taken();
        assert!(done.recv_timeout(QUIET).is_err(), "three frames queued");
        lane_rx.recv().unwrap();
        taken.taken();
        assert_eq!(
            done.recv_timeout(WAIT),
            Ok(true),
            "woken by the second take"
        );
    }

    #[test]
    fn the_wait_ends_when_the_session_has_gone() {
        let (taken, room) = room();
        let waiter = std::thread::spawn(move || room.wait_until(|| false));
        drop(taken);
        assert!(!waiter.join().unwrap());
    }

    #[test]
    fn taking_without_a_waiter_leaves_no_stale_wake_up_behind() {
        let (taken, room) = room();
        taken.taken();
        assert!(room.woken.try_recv().is_err());
    }
}
