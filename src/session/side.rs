//! The session's side workers: threads it starts for work that may take a while and that it
//! never waits on (`before_prompt` hooks, model discovery, session listings). Each reports on a
//! channel of its own; the loop selects over them in one place (`SessionLoop::next_event`) and
//! hands what came to `SessionLoop::on_side`.

use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;

use super::listing::Listed;
use super::models::Discovered;
use crate::hooks::prompt::PromptHookDone;

/// What a side worker reported.
pub(super) enum SideDone {
    PromptHook(PromptHookDone),
    Discovered(Discovered),
    Listed(Listed),
}

pub(super) struct SideWorkers {
    /// `before_prompt` hooks report here when they are done.
    prompt_hooks: (Sender<PromptHookDone>, Receiver<PromptHookDone>),
    /// Model discovery reports here (`models.rs`).
    discovered: (Sender<Discovered>, Receiver<Discovered>),
    /// The `get_available_models` requests that wait for the discovery running.
    models_waiting: Vec<Option<Value>>,
    /// `list_sessions` answers from `gjc-list` threads, and how many are still running.
    listed: (Sender<Listed>, Receiver<Listed>),
    listings: usize,
}

impl SideWorkers {
    pub(super) fn new() -> SideWorkers {
        SideWorkers {
            // One message per prompt that waits for hooks, and the session drains it at once.
            prompt_hooks: crossbeam_channel::bounded(16),
            // One discovery runs at a time.
            discovered: crossbeam_channel::bounded(1),
            models_waiting: Vec::new(),
            listed: crossbeam_channel::unbounded(),
            listings: 0,
        }
    }

    /// The lanes the workers report on, for the loop's `select!`.
    pub(super) fn receivers(
        &self,
    ) -> (
        &Receiver<PromptHookDone>,
        &Receiver<Discovered>,
        &Receiver<Listed>,
    ) {
        (&self.prompt_hooks.1, &self.discovered.1, &self.listed.1)
    }

    pub(super) fn prompt_hook_reporter(&self) -> Sender<PromptHookDone> {
        self.prompt_hooks.0.clone()
    }

    /// Adds a `get_available_models` request to those waiting; `true` when it is the first, so
    /// a discovery must start (the others get its answer).
    pub(super) fn wait_for_models(&mut self, id: Option<Value>) -> bool {
        self.models_waiting.push(id);
        self.models_waiting.len() == 1
    }

    pub(super) fn discovery_reporter(&self) -> Sender<Discovered> {
        self.discovered.0.clone()
    }

    /// The requests waiting for the discovery, which is over.
    pub(super) fn take_models_waiting(&mut self) -> Vec<Option<Value>> {
        std::mem::take(&mut self.models_waiting)
    }

    /// A listing thread started; it reports through this sender.
    pub(super) fn listing_started(&mut self) {
        self.listings += 1;
    }

    pub(super) fn listing_reporter(&self) -> Sender<Listed> {
        self.listed.0.clone()
    }

    pub(super) fn listing_done(&mut self) {
        self.listings = self.listings.saturating_sub(1);
    }

    pub(super) fn listings_running(&self) -> usize {
        self.listings
    }

    /// Waits (bounded) for the next listing, at shutdown.
    pub(super) fn next_listing(&self, timeout: Duration) -> Option<Listed> {
        self.listed.1.recv_timeout(timeout).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_models_request_starts_a_discovery() {
        let mut side = SideWorkers::new();
        assert!(side.wait_for_models(Some(Value::from(1))));
        assert!(!side.wait_for_models(Some(Value::from(2))));
        assert_eq!(side.take_models_waiting().len(), 2);
        assert!(side.wait_for_models(None));
    }

    #[test]
    fn listings_are_counted_until_they_report() {
        let mut side = SideWorkers::new();
        side.listing_started();
        side.listing_started();
        side.listing_done();
        assert_eq!(side.listings_running(), 1);
        side.listing_done();
        side.listing_done();
        assert_eq!(side.listings_running(), 0);
        assert!(side.next_listing(Duration::from_millis(1)).is_none());
    }
}
