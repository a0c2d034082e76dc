//! Steering and follow-up queues and the three queue modes (seed: "Prompt/Queue Concurrency and
//! Ordering"). Owned by the session thread; nothing here blocks.

use std::collections::VecDeque;

use crate::protocol::message::UserMessage;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueMode {
    All,
    OneAtATime,
}

impl QueueMode {
    pub fn parse(s: &str) -> Option<QueueMode> {
        match s {
            "all" => Some(QueueMode::All),
            "one-at-a-time" => Some(QueueMode::OneAtATime),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QueueMode::All => "all",
            QueueMode::OneAtATime => "one-at-a-time",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptMode {
    /// Steering is checked after each tool call; a pending steer skips the turn's remaining calls.
    Immediate,
    /// Steering waits for the turn to end.
    Wait,
}

impl InterruptMode {
    pub fn parse(s: &str) -> Option<InterruptMode> {
        match s {
            "immediate" => Some(InterruptMode::Immediate),
            "wait" => Some(InterruptMode::Wait),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            InterruptMode::Immediate => "immediate",
            InterruptMode::Wait => "wait",
        }
    }
}

#[derive(Debug)]
pub struct Queues {
    pub steering: VecDeque<UserMessage>,
    pub follow_up: VecDeque<UserMessage>,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    pub interrupt_mode: InterruptMode,
}

impl Default for Queues {
    fn default() -> Queues {
        Queues {
            steering: VecDeque::new(),
            follow_up: VecDeque::new(),
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            interrupt_mode: InterruptMode::Immediate,
        }
    }
}

impl Queues {
    pub fn len(&self) -> usize {
        self.steering.len() + self.follow_up.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn poll_steering(&mut self) -> Vec<UserMessage> {
        take(&mut self.steering, self.steering_mode)
    }

    pub fn poll_follow_up(&mut self) -> Vec<UserMessage> {
        take(&mut self.follow_up, self.follow_up_mode)
    }

    pub fn clear(&mut self) {
        self.steering.clear();
        self.follow_up.clear();
    }
}

fn take(queue: &mut VecDeque<UserMessage>, mode: QueueMode) -> Vec<UserMessage> {
    match mode {
        QueueMode::All => queue.drain(..).collect(),
        QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(t: &str) -> UserMessage {
        UserMessage::new(t, &[])
    }

    #[test]
    fn one_at_a_time_and_all() {
        let mut q = Queues::default();
        q.steering.extend([msg("a"), msg("b"), msg("c")]);
        assert_eq!(q.poll_steering().len(), 1);
        assert_eq!(q.len(), 2);
        q.steering_mode = QueueMode::All;
        assert_eq!(q.poll_steering().len(), 2);
        assert!(q.is_empty());
    }

    #[test]
    fn modes_parse_exact_strings() {
        assert_eq!(QueueMode::parse("all"), Some(QueueMode::All));
        assert_eq!(QueueMode::parse("ALL"), None);
        assert_eq!(InterruptMode::parse("wait"), Some(InterruptMode::Wait));
    }
}
