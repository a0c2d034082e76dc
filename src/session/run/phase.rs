//! A run's state: its phase and what it has produced. Phase changes happen here only
//! (`Run::enter`, `Run::leave`), checked against the table of allowed transitions.

use std::collections::VecDeque;
use std::time::Instant;

use crate::protocol::event::Outcome;
use crate::protocol::message::{
    AgentMessage, AssistantMessage, BashExecutionMessage, ToolCall, ToolResultMessage, UserMessage,
};
use crate::provider::StreamHandle;
use crate::tools::ToolHandle;

pub struct Run {
    pub generation: u64,
    /// Messages produced by this run, for `agent_end`.
    pub produced: Vec<AgentMessage>,
    /// Changed only through `enter` and `leave`, which check the transition.
    phase: Phase,
    pub retry_attempt: u32,
    /// User `bash` executions that finished during the run; appended when it ends so they never
    /// split a tool call from its result.
    pub deferred_bash: Vec<BashExecutionMessage>,
    /// A context overflow was already compacted once in this run; a second one is an error.
    pub overflow_compacted: bool,
    /// Todo reminders added in this run (`session/todos.rs`), bounded per run.
    pub todo_reminders: u32,
    /// Why the run is being stopped when it is not the host's `abort` (a budget breach).
    pub stop: Option<RunStop>,
    /// Tool calls the unattended declaration refused, for `agent_end`.
    pub denied: Vec<serde_json::Value>,
}

/// How a run is ended when it is not the host's `abort` (a budget breach).
#[derive(Debug, Clone)]
pub struct RunStop {
    pub outcome: Outcome,
    /// `code: message`, as `agent_end.errorMessage`.
    pub message: String,
    pub details: serde_json::Value,
}

pub enum Phase {
    /// The prompt waits for its `before_prompt` hooks (`session/hooks.rs`); nothing of it is in
    /// the context yet.
    BeforePrompt {
        prompt: Vec<UserMessage>,
        hooks: crate::hooks::prompt::PendingPrompt,
    },
    Streaming {
        stream: u64,
        handle: StreamHandle,
        partial: AssistantMessage,
        started: bool,
        last_event: Instant,
        /// The conditional rules that may still fire on this stream (`None`: no rule watches).
        watch: Option<crate::rules::Watch>,
    },
    Tools {
        assistant: AssistantMessage,
        pending: VecDeque<ToolCall>,
        running: Option<(ToolCall, ToolHandle)>,
        results: Vec<ToolResultMessage>,
    },
    RetryWait {
        until: Instant,
        failed: AssistantMessage,
        /// Whether the host saw the failed attempt start (and therefore end).
        told: Told,
    },
    /// Waiting for an automatic compaction (`SessionLoop::compaction`).
    Compacting,
    /// The model request waits for MCP servers still starting, until this at most
    /// (`session/mcp.rs`).
    AwaitServers { until: Instant },
    /// Between phases (never observed outside a method).
    Idle,
}

/// A phase without its data, for the table of allowed transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseKind {
    BeforePrompt,
    Streaming,
    Tools,
    RetryWait,
    Compacting,
    AwaitServers,
    Idle,
}

impl PhaseKind {
    /// Whether a run in phase `self` may go to `next`. Between phases a run is `Idle`, and from
    /// there it may go anywhere; a stream ends in its next step (another stream after a reply
    /// without tool calls, the tools, a retry or a compaction); the waits end in a new stream;
    /// a prompt waiting for its hooks and a tool batch end only through `Idle` (`Run::leave`).
    /// One compaction may give way to another (a handoff's fallback). Any model request may first
    /// wait for MCP servers still starting, and that wait ends in the request.
    pub fn may_enter(self, next: PhaseKind) -> bool {
        use PhaseKind::*;
        match (self, next) {
            (_, Idle) | (Idle, _) => true,
            (Streaming, Streaming | Tools | RetryWait | Compacting) => true,
            (RetryWait | Compacting, Streaming) => true,
            // An automatic handoff without a document falls back to a summary in place.
            (Compacting, Compacting) => true,
            (Streaming | RetryWait | Compacting, AwaitServers) => true,
            (AwaitServers, Streaming) => true,
            _ => false,
        }
    }
}

impl Phase {
    pub fn kind(&self) -> PhaseKind {
        match self {
            Phase::BeforePrompt { .. } => PhaseKind::BeforePrompt,
            Phase::Streaming { .. } => PhaseKind::Streaming,
            Phase::Tools { .. } => PhaseKind::Tools,
            Phase::RetryWait { .. } => PhaseKind::RetryWait,
            Phase::Compacting => PhaseKind::Compacting,
            Phase::AwaitServers { .. } => PhaseKind::AwaitServers,
            Phase::Idle => PhaseKind::Idle,
        }
    }
}

impl Run {
    pub fn new(generation: u64) -> Run {
        Run {
            generation,
            produced: Vec::new(),
            phase: Phase::Idle,
            retry_attempt: 0,
            deferred_bash: Vec::new(),
            overflow_compacted: false,
            todo_reminders: 0,
            stop: None,
            denied: Vec::new(),
        }
    }

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// The current phase's data, to change within the phase (a stream's partial message, the
    /// tool batch's results); a new phase goes through `enter`.
    pub fn phase_mut(&mut self) -> &mut Phase {
        &mut self.phase
    }

    /// Goes to `next`. A transition the table refuses is a bug of the session: it fails in
    /// debug builds (every test), and is logged and taken anyway in release, where ending a
    /// run midway would lose the host's `agent_end`.
    pub fn enter(&mut self, next: Phase) {
        let (from, to) = (self.phase.kind(), next.kind());
        if !from.may_enter(to) {
            debug_assert!(false, "run phase {from:?} may not go to {to:?}");
            log::error!("run phase {from:?} may not go to {to:?}");
        }
        self.phase = next;
    }

    /// When the phase times out: a retry's back-off, or a stream silent for `stall`.
    pub fn deadline(&self, stall: std::time::Duration) -> Option<Instant> {
        match &self.phase {
            Phase::RetryWait { until, .. } | Phase::AwaitServers { until } => Some(*until),
            Phase::Streaming { last_event, .. } => Some(*last_event + stall),
            Phase::Tools {
                running: Some((_, handle)),
                ..
            } => handle.deadline(),
            _ => None,
        }
    }

    /// Ends the current phase, returning its data; the run is `Idle` until it enters the next.
    pub fn leave(&mut self) -> Phase {
        std::mem::replace(&mut self.phase, Phase::Idle)
    }
}

/// What the host has been told of an assistant message: each message gets exactly one
/// `message_start` and one `message_end`, on every path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Told {
    Nothing,
    Started,
    Ended,
}

impl Told {
    pub fn started(started: bool) -> Told {
        if started {
            Told::Started
        } else {
            Told::Nothing
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::StopReason;

    fn tools() -> Phase {
        Phase::Tools {
            assistant: AssistantMessage::empty("", "", ""),
            pending: VecDeque::new(),
            running: None,
            results: Vec::new(),
        }
    }

    fn retry_wait() -> Phase {
        Phase::RetryWait {
            until: Instant::now(),
            failed: AssistantMessage::empty("", "", ""),
            told: Told::Nothing,
        }
    }

    #[test]
    fn a_run_starts_idle_and_leaving_a_phase_returns_its_data() {
        let mut run = Run::new(7);
        assert_eq!(run.phase().kind(), PhaseKind::Idle);
        run.enter(tools());
        assert_eq!(run.phase().kind(), PhaseKind::Tools);
        if let Phase::Tools { assistant, .. } = run.phase_mut() {
            assistant.stop_reason = StopReason::Length;
        }
        let Phase::Tools { assistant, .. } = run.leave() else {
            panic!("left another phase");
        };
        assert_eq!(assistant.stop_reason, StopReason::Length);
        assert_eq!(run.phase().kind(), PhaseKind::Idle);
        run.enter(retry_wait());
        run.leave();
        run.enter(Phase::Compacting);
        assert_eq!(run.leave().kind(), PhaseKind::Compacting);
    }

    #[test]
    fn the_table_allows_the_loops_steps_and_nothing_else() {
        use PhaseKind::*;
        let all = [BeforePrompt, Streaming, Tools, RetryWait, Compacting, Idle];
        for kind in all {
            assert!(Idle.may_enter(kind), "Idle -> {kind:?}");
            assert!(kind.may_enter(Idle), "{kind:?} -> Idle");
        }
        for next in [Streaming, Tools, RetryWait, Compacting] {
            assert!(Streaming.may_enter(next), "Streaming -> {next:?}");
        }
        assert!(RetryWait.may_enter(Streaming));
        assert!(Compacting.may_enter(Streaming));
        assert!(Compacting.may_enter(Compacting));
        for from in [BeforePrompt, Tools] {
            for next in [BeforePrompt, Streaming, Tools, RetryWait, Compacting] {
                assert!(!from.may_enter(next), "{from:?} -> {next:?}");
            }
        }
        for from in [RetryWait, Compacting] {
            for next in [BeforePrompt, Tools, RetryWait] {
                assert!(!from.may_enter(next), "{from:?} -> {next:?}");
            }
        }
        assert!(!RetryWait.may_enter(Compacting));
        assert!(!Streaming.may_enter(BeforePrompt));
    }

    #[test]
    fn only_a_retry_wait_or_a_stream_has_a_deadline() {
        let mut run = Run::new(1);
        let stall = std::time::Duration::from_secs(1);
        assert_eq!(run.deadline(stall), None);
        let until = Instant::now() + stall;
        run.enter(Phase::RetryWait {
            until,
            failed: AssistantMessage::empty("", "", ""),
            told: Told::Nothing,
        });
        assert_eq!(run.deadline(stall), Some(until));
        run.leave();
        run.enter(tools());
        assert_eq!(run.deadline(stall), None);
    }

    #[test]
    #[should_panic(expected = "run phase Tools may not go to RetryWait")]
    fn a_refused_transition_fails_in_debug_builds() {
        let mut run = Run::new(1);
        run.enter(tools());
        run.enter(retry_wait());
    }
}
