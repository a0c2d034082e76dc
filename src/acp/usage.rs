//! What an editor shows beside the conversation, sent after each prompt turn: how full the
//! context is and what the session has cost (`usage_update`), and its title once it has one
//! (`session_info_update`).

use std::collections::HashMap;

use agent_client_protocol_schema::v1::{Cost, SessionInfoUpdate, UsageUpdate};

use super::updates::SessionUpdate;
use crate::protocol::message::AgentMessage;

/// The counts of the session being served.
#[derive(Default)]
pub struct SessionStats {
    /// The context window of each model offered, by `provider/id`.
    windows: HashMap<String, u64>,
    /// The tokens of the last reply that reported usage (its input, cache and output): what the
    /// context holds now.
    used: Option<u64>,
    /// What the session's replies have cost, in USD.
    cost: f64,
    pub title: Option<String>,
}

impl SessionStats {
    pub fn new(windows: HashMap<String, u64>) -> SessionStats {
        SessionStats {
            windows,
            ..SessionStats::default()
        }
    }

    /// Another session is served: nothing is known of it yet but its title.
    pub fn restart(&mut self, title: Option<String>) {
        self.used = None;
        self.cost = 0.0;
        self.title = title;
    }

    /// Counts the replies among `messages` (a finished run's, or a loaded history).
    pub fn add(&mut self, messages: &[AgentMessage]) {
        for message in messages {
            let AgentMessage::Assistant(reply) = message else {
                continue;
            };
            self.cost += reply.usage.cost.total;
            if reply.usage.total_tokens > 0 {
                self.used = Some(reply.usage.total_tokens);
            }
        }
    }

    /// The updates to send at the end of a turn with `model` in use: usage once a reply has
    /// reported it and the model's window is known (cost only when the model is priced), the
    /// title when there is one.
    pub fn updates(&self, model: Option<&str>) -> Vec<SessionUpdate> {
        let mut out = Vec::new();
        let size = model.and_then(|m| self.windows.get(m)).copied();
        if let (Some(used), Some(size)) = (self.used, size) {
            let mut usage = UsageUpdate::new(used, size);
            if self.cost > 0.0 {
                usage = usage.cost(Cost::new(self.cost, "USD"));
            }
            out.push(SessionUpdate::UsageUpdate(usage));
        }
        if let Some(title) = &self.title {
            out.push(SessionUpdate::SessionInfoUpdate(
                SessionInfoUpdate::new().title(title.clone()),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::AssistantMessage;

    fn reply(total: u64, cost: f64) -> AgentMessage {
        let mut m = AssistantMessage::empty("a", "p", "m");
        m.usage.total_tokens = total;
        m.usage.cost.total = cost;
        AgentMessage::Assistant(m)
    }

    #[test]
    fn usage_follows_the_last_reply_and_cost_adds_up() {
        let mut stats = SessionStats::new(HashMap::from([("p/m".to_string(), 1000)]));
        assert!(stats.updates(Some("p/m")).is_empty(), "nothing known yet");
        stats.add(&[reply(100, 0.5), reply(300, 0.25), reply(0, 0.0)]);
        let sent = serde_json::to_value(stats.updates(Some("p/m"))).unwrap();
        assert_eq!(
            sent,
            serde_json::json!([{"sessionUpdate": "usage_update", "used": 300, "size": 1000,
                "cost": {"amount": 0.75, "currency": "USD"}}])
        );
        assert!(stats.updates(Some("other/m")).is_empty(), "window unknown");
        stats.restart(Some("Named".into()));
        let sent = serde_json::to_value(stats.updates(Some("p/m"))).unwrap();
        assert_eq!(
            sent,
            serde_json::json!([{"sessionUpdate": "session_info_update", "title": "Named"}])
        );
    }
}
