//! The `gjc-stdin` thread: reads stdin line by line with a size cap, decodes each line and routes
//! it. Cancellations go to the control lane, host tool answers to the session (which answers the
//! host tool calls it made itself and passes the rest on), other host replies to `gjc-host`,
//! everything else (including ready-made error responses, so they keep their place in the order)
//! to the command lane.
//!
//! The command lane is bounded (`COMMAND_QUEUE` frames, `COMMAND_QUEUE_BYTES`). When it is full
//! the reader keeps reading into a small lookahead (`LOOKAHEAD_LINES`, `LOOKAHEAD_BYTES`), so a
//! cancellation or host reply written behind a flood of commands is still routed at once and EOF
//! is still noticed; only when the lookahead is full too does the reader stop reading, which
//! leaves the host's writes blocked (backpressure). The `gjc-stdin-queue` thread moves frames from
//! the lookahead into the lane as the session makes room; it cannot be the reader, whose read may
//! block while frames wait. It starts the first time the lane is full: until then the reader puts
//! frames in the lane itself, so an idle process has no such thread. At EOF the reader sends
//! `ControlFrame::InputClosed` and drops its senders; the lane disconnects once its last command
//! is forwarded.

use std::io::Read;

use crossbeam_channel::Sender;

use super::lookahead::Lookahead;
use crate::host::HostRequest;
use crate::lanes::{CommandFrame, ControlFrame};
use crate::lines::{read_line, LineRead};
use crate::protocol::host_reply::HostReply;
use crate::protocol::{decode_line, Inbound, Response};
use crate::room::Room;

pub use crate::lanes::{COMMAND_QUEUE, CONTROL_QUEUE};
/// Bytes (of the lines they came from) the command lane holds; one frame is let in regardless.
pub(super) const COMMAND_QUEUE_BYTES: usize = 32 * 1024 * 1024;
/// Lines read ahead while the lane is full, and their bytes; one line is let in regardless.
pub(super) const LOOKAHEAD_LINES: usize = 64;
pub(super) const LOOKAHEAD_BYTES: usize = 4 * 1024 * 1024;
/// A line buffer grown past this by one long line is given back after it.
const KEEP_LINE_CAPACITY: usize = 1024 * 1024;
/// What the line buffer shrinks back to.
const LINE_CAPACITY: usize = 64 * 1024;
/// What a frame is weighed at beyond its line: the decoded value and the queue slot.
const FRAME_OVERHEAD: usize = 128;

pub struct StdinRoutes {
    pub control: Sender<ControlFrame>,
    /// The command lane; give it `COMMAND_QUEUE` slots (`crossbeam_channel::bounded`).
    pub commands: Sender<CommandFrame>,
    /// Told when the session takes from the lane (`crate::room`).
    pub room: Room,
    pub host: Sender<HostRequest>,
    /// `host_tool_update` and `host_tool_result`, to the session.
    pub host_tools: Sender<HostReply>,
}

/// Reads until EOF (or a read error, which is treated the same), then reports `InputClosed`.
pub fn run(input: impl Read, routes: StdinRoutes, max_line: usize) {
    let StdinRoutes {
        control,
        commands,
        room,
        host,
        host_tools,
    } = routes;
    let mut lookahead = Lookahead::new(commands, room);
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::with_capacity(LINE_CAPACITY);
    loop {
        let inbound = match read_line(&mut reader, &mut line, max_line) {
            Ok(LineRead::Eof) => break,
            Ok(LineRead::Line) => decode_line(&line),
            Ok(LineRead::TooLong(len)) => Some(Inbound::Invalid(Response::err(
                None,
                "parse",
                format!(
                    "Failed to parse command: line of {len} bytes exceeds the {max_line}-byte limit"
                ),
            ))),
            Err(e) => {
                log::warn!("stdin read failed: {e}");
                break;
            }
        };
        let weight = line.len() + FRAME_OVERHEAD;
        give_back_if_grown(&mut line);
        // Send failures mean the receiving thread has gone (shutdown); nothing is left to do.
        let Some(inbound) = inbound else { continue };
        log_inbound(&inbound);
        let frame = match inbound {
            Inbound::Command { id, command } if command.is_control() => {
                let _ = control.send(ControlFrame::Command { id, command });
                continue;
            }
            Inbound::Command { id, command } => CommandFrame::command(id, command),
            Inbound::HostReply(reply @ (HostReply::ToolUpdate(_) | HostReply::ToolResult(_))) => {
                let _ = host_tools.send(reply);
                continue;
            }
            Inbound::HostReply(reply) => {
                let _ = host.send(HostRequest::Reply(reply));
                continue;
            }
            Inbound::Invalid(response) => CommandFrame::Invalid(Box::new(response)),
        };
        if !lookahead.push(frame, weight) {
            break;
        }
    }
    drop(lookahead);
    log::debug!("stdin closed");
    let _ = control.send(ControlFrame::InputClosed);
}

/// What arrived, for a person debugging a host: the command type and id, never its fields.
fn log_inbound(inbound: &Inbound) {
    match inbound {
        Inbound::Command { id, command } => match id {
            Some(id) => log::debug!("command {} id {id}", command.name()),
            None => log::debug!("command {} without id", command.name()),
        },
        Inbound::HostReply(_) => log::debug!("host reply"),
        Inbound::Invalid(_) => log::debug!("line refused with an error response"),
    }
}

/// A buffer keeps its largest size; after a long line that would leave megabytes resident for
/// good, so the buffer is replaced and the freed pages returned to the system.
fn give_back_if_grown(line: &mut Vec<u8>) {
    if line.capacity() > KEEP_LINE_CAPACITY {
        *line = Vec::with_capacity(LINE_CAPACITY);
        crate::memory::release_free_pages();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{HostReply, MAX_LINE_BYTES};
    use crossbeam_channel::{bounded, unbounded, Receiver};
    use std::time::Duration;

    const WAIT: Duration = Duration::from_secs(10);
    /// How long nothing must arrive to count as "the reader is blocked".
    const QUIET: Duration = Duration::from_millis(300);

    fn lines(input: &[u8], max: usize) -> Vec<Result<Vec<u8>, usize>> {
        let mut r = std::io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        let mut line = Vec::new();
        loop {
            match read_line(&mut r, &mut line, max).unwrap() {
                LineRead::Eof => return out,
                LineRead::Line => out.push(Ok(line.clone())),
                LineRead::TooLong(n) => out.push(Err(n)),
            }
        }
    }

    struct Lanes {
        control: Receiver<ControlFrame>,
        commands: Receiver<CommandFrame>,
        taken: crate::room::Taken,
        host: Receiver<HostRequest>,
        host_tools: Receiver<HostReply>,
    }

    impl Lanes {
        /// Takes the next command as the session does, telling the queue thread.
        fn take(&self) -> CommandFrame {
            let frame = self.commands.recv_timeout(WAIT).expect("a queued command");
            self.taken.taken();
            frame
        }
    }

    /// Runs the reader over `input` on its own thread with the lanes sized as in `app/mod.rs`; the
    /// test plays the session and takes from the lanes only when it wants to.
    fn read_all(input: Vec<u8>) -> Lanes {
        let (control_tx, control) = bounded(CONTROL_QUEUE);
        let (commands_tx, commands) = bounded(COMMAND_QUEUE);
        let (host_tx, host) = unbounded();
        let (host_tools_tx, host_tools) = unbounded();
        let (taken, room) = crate::room::room();
        let routes = StdinRoutes {
            control: control_tx,
            commands: commands_tx,
            room,
            host: host_tx,
            host_tools: host_tools_tx,
        };
        std::thread::spawn(move || run(std::io::Cursor::new(input), routes, MAX_LINE_BYTES));
        Lanes {
            control,
            commands,
            taken,
            host,
            host_tools,
        }
    }

    fn get_states(input: &mut Vec<u8>, n: usize, pad: usize) {
        let pad = "x".repeat(pad);
        for i in 0..n {
            let line = format!("{{\"id\":\"g{i}\",\"type\":\"get_state\",\"pad\":\"{pad}\"}}\n");
            input.extend_from_slice(line.as_bytes());
        }
    }

    fn id_of(frame: CommandFrame) -> String {
        match frame {
            CommandFrame::Command(queued) => queued.id.unwrap().as_str().unwrap().to_string(),
            CommandFrame::Invalid(r) => panic!("unexpected invalid frame {r:?}"),
            CommandFrame::Policy(p) => panic!("unexpected policy frame {p:?}"),
        }
    }

    fn expect_abort(control: &Receiver<ControlFrame>, timeout: Duration) {
        match control.recv_timeout(timeout) {
            Ok(ControlFrame::Command { id, command }) => {
                assert_eq!(command.name(), "abort");
                assert_eq!(id.unwrap(), "ab");
            }
            other => panic!("expected the abort, got {other:?}"),
        }
    }

    /// Drains the lane and checks it held `n` commands, in order, then disconnected.
    fn drain_in_order(lanes: &Lanes, n: usize) {
        for i in 0..n {
            assert_eq!(id_of(lanes.take()), format!("g{i}"));
        }
        assert!(
            lanes.commands.recv_timeout(WAIT).is_err(),
            "lane closes after the last command"
        );
    }

    #[test]
    fn a_full_lane_still_lets_cancellations_replies_and_eof_through() {
        let queued = COMMAND_QUEUE + 10;
        let mut input = Vec::new();
        get_states(&mut input, queued, 0);
        input.extend_from_slice(b"{\"id\":\"ab\",\"type\":\"abort\"}\n");
        input.extend_from_slice(
            b"{\"type\":\"extension_ui_response\",\"id\":\"ui_1\",\"confirmed\":true}\n",
        );
        input.extend_from_slice(
            b"{\"type\":\"host_tool_result\",\"id\":\"host_2\",\"result\":{\"content\":[]}}\n",
        );
        let lanes = read_all(input);
        // Nothing has been taken from the lane, yet the abort, the replies and EOF all arrive:
        // a dialog's answer at the broker, a host tool's at the session.
        expect_abort(&lanes.control, WAIT);
        match lanes.host.recv_timeout(WAIT) {
            Ok(HostRequest::Reply(HostReply::UiResponse(r))) => assert_eq!(r.id, "ui_1"),
            _ => panic!("expected the host reply"),
        }
        match lanes.host_tools.recv_timeout(WAIT) {
            Ok(HostReply::ToolResult(r)) => assert_eq!(r.id, "host_2"),
            _ => panic!("expected the host tool answer"),
        }
        assert!(matches!(
            lanes.control.recv_timeout(WAIT),
            Ok(ControlFrame::InputClosed)
        ));
        // The queue thread may still be moving the lookahead into the lane.
        let deadline = std::time::Instant::now() + WAIT;
        while lanes.commands.len() < COMMAND_QUEUE && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(lanes.commands.len(), COMMAND_QUEUE, "the lane is bounded");
        drain_in_order(&lanes, queued);
    }

    #[test]
    fn the_reader_stops_when_the_lookahead_is_full_too() {
        // The lane, the frame the queue thread holds and the lookahead are full; one more line
        // leaves the reader waiting, so the abort behind it is not read yet.
        let queued = COMMAND_QUEUE + 1 + LOOKAHEAD_LINES + 1;
        let mut input = Vec::new();
        get_states(&mut input, queued, 0);
        input.extend_from_slice(b"{\"id\":\"ab\",\"type\":\"abort\"}\n");
        let lanes = read_all(input);
        assert_held_at(&lanes, COMMAND_QUEUE);
        // One slot freed is enough for the reader to move on and find the abort.
        assert_eq!(id_of(lanes.take()), "g0");
        expect_abort(&lanes.control, WAIT);
        assert!(matches!(
            lanes.control.recv_timeout(WAIT),
            Ok(ControlFrame::InputClosed)
        ));
        for i in 1..queued {
            assert_eq!(id_of(lanes.take()), format!("g{i}"));
        }
    }

    #[test]
    fn long_lines_are_bounded_by_bytes_in_lane_and_lookahead() {
        let mib = 1024 * 1024;
        let weight = mib + 40 + FRAME_OVERHEAD;
        let in_lane = COMMAND_QUEUE_BYTES / weight;
        let in_lookahead = LOOKAHEAD_BYTES / weight;
        let queued = in_lane + in_lookahead + 3;
        let mut input = Vec::new();
        get_states(&mut input, queued, mib);
        input.extend_from_slice(b"{\"id\":\"ab\",\"type\":\"abort\"}\n");
        let lanes = read_all(input);
        assert_held_at(&lanes, in_lane);
        drain_in_order_then_abort(&lanes, queued);
    }

    /// Waits for the lane to fill to `n`, then checks it stays there and the reader reads no
    /// further (the abort behind the queued lines does not arrive).
    fn assert_held_at(lanes: &Lanes, n: usize) {
        let deadline = std::time::Instant::now() + WAIT;
        while lanes.commands.len() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "the lane never filled"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            lanes.control.recv_timeout(QUIET).is_err(),
            "reader must wait"
        );
        assert_eq!(lanes.commands.len(), n, "the lane is bounded");
    }

    fn drain_in_order_then_abort(lanes: &Lanes, queued: usize) {
        for i in 0..queued {
            assert_eq!(id_of(lanes.take()), format!("g{i}"));
        }
        expect_abort(&lanes.control, WAIT);
        assert!(matches!(
            lanes.control.recv_timeout(WAIT),
            Ok(ControlFrame::InputClosed)
        ));
    }

    #[test]
    fn eof_is_reported_after_the_last_command_is_handed_over() {
        let mut input = Vec::new();
        get_states(&mut input, 3, 0);
        let lanes = read_all(input);
        assert!(matches!(
            lanes.control.recv_timeout(WAIT),
            Ok(ControlFrame::InputClosed)
        ));
        drain_in_order(&lanes, 3);
    }

    #[test]
    fn a_grown_line_buffer_is_given_back() {
        let mut line = vec![0u8; 8 * KEEP_LINE_CAPACITY];
        give_back_if_grown(&mut line);
        assert!(line.is_empty());
        assert_eq!(line.capacity(), LINE_CAPACITY);
        let mut small = Vec::with_capacity(KEEP_LINE_CAPACITY);
        small.push(1u8);
        give_back_if_grown(&mut small);
        assert_eq!(small, [1], "an ordinary buffer is kept");
    }

    #[test]
    fn splits_on_lf_and_keeps_last_unterminated_line() {
        let got = lines(b"ab\ncd\r\n\nef", 100);
        assert_eq!(
            got,
            vec![
                Ok(b"ab".to_vec()),
                Ok(b"cd\r".to_vec()),
                Ok(vec![]),
                Ok(b"ef".to_vec())
            ]
        );
    }

    #[test]
    fn oversize_lines_are_reported_and_skipped() {
        let got = lines(b"0123456789\nok\n", 5);
        assert_eq!(got, vec![Err(10), Ok(b"ok".to_vec())]);
    }

    #[test]
    fn u2028_is_not_a_line_break() {
        let got = lines("a\u{2028}b\n".as_bytes(), 100);
        assert_eq!(got.len(), 1);
    }
}
