//! `get_available_models`: the configured models whose keys resolve, plus those the discoverable
//! servers list. Asking a server can take up to `discovery::TIMEOUT`, so it never happens on the
//! session thread: a `gjc-discover` thread asks, and the command is answered when it reports,
//! while the commands after it (an `abort` too) are handled as usual. Once every server has
//! answered (or recently failed) the kept lists answer at once. One discovery runs at a time;
//! requests that arrive while it runs get its answer.

use serde_json::Value;

use super::reply::Reply;
use super::SessionLoop;
use crate::protocol::{reply, Response};
use crate::provider::discovery::{self, Target};

/// What a `gjc-discover` thread found.
pub struct Discovered {
    targets: Vec<(String, Target)>,
    listed: Vec<Vec<String>>,
}

impl SessionLoop {
    /// Answered at once from the kept lists, else when the discovery reports.
    pub(super) fn get_available_models(&mut self, id: Option<Value>) -> Reply {
        let targets = self.state.catalog.discovery_targets();
        if let Some(listed) = discovery::kept(targets.iter().map(|(_, t)| t)) {
            return Reply::now(self.models_response(id, &targets, listed));
        }
        if !self.side.wait_for_models(id) {
            return Reply::later();
        }
        let done = self.side.discovery_reporter();
        let spawned = std::thread::Builder::new()
            .name("gjc-discover".into())
            .spawn(move || {
                let listed = discovery::model_ids(targets.iter().map(|(_, t)| t));
                let _ = done.send(Discovered { targets, listed });
            });
        if let Err(e) = spawned {
            log::error!("cannot start model discovery: {e}");
            self.answer_models_waiting(&[], Vec::new());
        }
        Reply::later()
    }

    /// The discovery finished: every request waiting for it gets the same list.
    pub(super) fn on_discovered(&mut self, found: Discovered) {
        self.answer_models_waiting(&found.targets, found.listed);
    }

    /// Answers the requests still waiting (at shutdown, with what needs no server).
    pub(super) fn answer_models_waiting(
        &mut self,
        targets: &[(String, Target)],
        listed: Vec<Vec<String>>,
    ) {
        for id in self.side.take_models_waiting() {
            let response = self.models_response(id, targets, listed.clone());
            self.respond(response);
        }
    }

    fn models_response(
        &self,
        id: Option<Value>,
        targets: &[(String, Target)],
        listed: Vec<Vec<String>>,
    ) -> Response {
        let catalog = &self.state.catalog;
        let models = reply::Models {
            models: catalog
                .available_with(targets, listed)
                .iter()
                .map(|m| m.info())
                .collect(),
            models_error: catalog.models_error().map(str::to_string),
        };
        Response::ok(id, "get_available_models", Some(&models))
    }
}
