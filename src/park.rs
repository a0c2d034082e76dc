//! Blocking receives that park at once when nothing is queued.
//!
//! crossbeam's `Receiver::recv` (and `recv_timeout`) first retries with a backoff that spins and
//! then calls `sched_yield` up to four times before it parks the thread. On a machine with fewer
//! cores than busy threads each of those yields hands the core to another runnable thread and
//! takes it back: in a host-tool loop that was about twelve yields, and as many needless context
//! switches, per turn. A one-arm `Select` tries the channel once, registers and parks, with no
//! backoff; the sender's `send` wakes it as it wakes any blocked receiver.
//!
//! Use these where a thread waits for the next piece of work or the next reply (kept workers, a
//! tool waiting for its host); a tight producer-consumer pair that expects its message within
//! microseconds is better served by crossbeam's own spin.

use std::time::Duration;

use crossbeam_channel::{Receiver, RecvError, RecvTimeoutError, Select};

/// The next message, parking until there is one; `Err` once every sender is gone and the
/// channel is drained.
pub fn recv<T>(rx: &Receiver<T>) -> Result<T, RecvError> {
    if let Ok(msg) = rx.try_recv() {
        return Ok(msg);
    }
    let mut sel = Select::new_biased();
    sel.recv(rx);
    sel.select().recv(rx)
}

/// The next message within `timeout`, parking until there is one.
pub fn recv_timeout<T>(rx: &Receiver<T>, timeout: Duration) -> Result<T, RecvTimeoutError> {
    if let Ok(msg) = rx.try_recv() {
        return Ok(msg);
    }
    let mut sel = Select::new_biased();
    sel.recv(rx);
    match sel.select_timeout(timeout) {
        Ok(op) => op.recv(rx).map_err(|_| RecvTimeoutError::Disconnected),
        Err(_) => Err(RecvTimeoutError::Timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::unbounded;
    use std::time::Instant;

    const WAIT: Duration = Duration::from_secs(10);

    #[test]
    fn a_parked_receiver_is_woken_by_a_send_from_another_thread() {
        let (tx, rx) = unbounded();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(7).unwrap();
        });
        assert_eq!(recv_timeout(&rx, WAIT), Ok(7));
        sender.join().unwrap();
        assert_eq!(recv(&rx), Err(RecvError), "every sender is gone");
    }

    #[test]
    fn queued_messages_come_in_order_and_then_the_disconnection() {
        let (tx, rx) = unbounded();
        for i in 0..3 {
            tx.send(i).unwrap();
        }
        drop(tx);
        assert_eq!((recv(&rx), recv(&rx), recv(&rx)), (Ok(0), Ok(1), Ok(2)));
        assert_eq!(recv_timeout(&rx, WAIT), Err(RecvTimeoutError::Disconnected));
    }

    #[test]
    fn an_empty_channel_times_out_after_its_timeout() {
        let (_tx, rx) = unbounded::<u8>();
        let start = Instant::now();
        assert_eq!(
            recv_timeout(&rx, Duration::from_millis(30)),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(start.elapsed() >= Duration::from_millis(30));
    }
}
