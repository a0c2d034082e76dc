//! `checkpoint_for_handoff`: the point at which an orchestrator may stop this process and let
//! another gjc continue the session from its file. Refused while anything could still change the
//! session; otherwise the file is written, synced and hashed, and the receipt binds the host's
//! lease and lane to that file, its session, model and thinking level through the completed
//! marker digest (docs/protocol.md, "Handoff checkpoint").

use serde_json::json;

use super::SessionLoop;
use crate::gates::canonical;
use crate::protocol::command::{CheckpointParams, HandoffAuthority};
use crate::protocol::outbound::TypedError;
use crate::protocol::reply::CheckpointReceipt;

/// The domain of the completed marker's preimage.
pub const MARKER_DOMAIN: &str = "gjc.checkpoint-for-handoff.completed-marker.v1";

/// Integers above this lose precision in a JavaScript host, so the marker hashed here and the one
/// a host computes could differ.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

fn error(code: &'static str, message: String) -> TypedError {
    TypedError { code, message }
}

impl SessionLoop {
    pub(super) fn checkpoint_for_handoff(
        &mut self,
        p: CheckpointParams,
    ) -> Result<CheckpointReceipt, TypedError> {
        check_authority(&p.authority).map_err(|m| error("invalid_authority", m))?;
        if let Some(what) = self.handoff_blocker() {
            return Err(error(
                "busy",
                format!("Session is not quiescent for handoff checkpoint: {what}"),
            ));
        }
        let unavailable = |why: &str| {
            error(
                "checkpoint_unavailable",
                format!("A persistent session and concrete model profile are required for handoff checkpoint: {why}"),
            )
        };
        let model = self
            .state
            .model
            .clone()
            .ok_or_else(|| unavailable("no model is selected"))?;
        if !self.state.store.is_persistent() {
            return Err(unavailable(
                "the session is kept in memory only (--no-session)",
            ));
        }
        let synced = self.state.store.checkpoint().map_err(|e| {
            error(
                "checkpoint_failed",
                format!("Cannot checkpoint the session file: {e}"),
            )
        })?;
        let session_file = synced
            .path
            .to_str()
            .ok_or_else(|| unavailable("the session file's path is not UTF-8"))?
            .to_string();
        let mut receipt = CheckpointReceipt {
            protocol_version: 1,
            authority: p.authority,
            lane: p.lane,
            clean_quiesced: true,
            transcript_fsynced: true,
            completed_marker_digest: String::new(),
            transcript_digest: synced.digest,
            session_id: self.state.id.clone(),
            session_file,
            provider: model.provider.clone(),
            model: model.id.clone(),
            // Clamped to the model: always one of gjc's own levels, never `inherit`.
            thinking: self.state.thinking,
            model_profile: model.api.as_str(),
        };
        receipt.completed_marker_digest = completed_marker_digest(&receipt);
        Ok(receipt)
    }

    /// What keeps the session from being handed over, if anything: work that would still add to
    /// the file (a run, with its retries and hooks; a compaction; a user `bash`), messages waiting
    /// in memory only (queued steering and follow-ups), or a workflow gate waiting for an answer
    /// (its answer belongs to this process's conversation).
    fn handoff_blocker(&self) -> Option<&'static str> {
        if self.is_busy() {
            Some("a run is in progress")
        } else if self.is_compacting() {
            Some("a compaction is in progress")
        } else if self.user_bash.is_some() {
            Some("a bash command is running")
        } else if !self.state.queues.is_empty() {
            Some("messages are queued")
        } else if self
            .state
            .workflow
            .broker
            .as_ref()
            .is_some_and(|b| b.session_id() == self.state.id && !b.pending_ids().is_empty())
        {
            Some("a workflow gate is waiting for an answer")
        } else {
            None
        }
    }
}

/// The checks the decoder cannot make: the digest's form and the integers' range.
fn check_authority(a: &HandoffAuthority) -> Result<(), String> {
    let hex = a.incarnation_digest.len() == 64
        && a.incarnation_digest
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !hex {
        return Err("authority.incarnationDigest must be 64 lower-case hex digits".into());
    }
    for (name, n) in [
        ("epochRevision", a.epoch_revision),
        ("leaseId", a.lease_id),
        ("deploymentGeneration", a.deployment_generation),
    ] {
        if n == 0 || n > MAX_SAFE_INTEGER {
            return Err(format!(
                "authority.{name} must be an integer from 1 to 2^53 - 1"
            ));
        }
    }
    Ok(())
}

/// SHA-256 of the canonical JSON (keys sorted, no white space, raw UTF-8) of the marker: the
/// receipt's identity fields, with the session file's path replaced by its own hash.
pub fn completed_marker_digest(r: &CheckpointReceipt) -> String {
    let marker = json!({
        "domain": MARKER_DOMAIN,
        "authority": r.authority,
        "lane": r.lane.as_str(),
        "sessionId": r.session_id,
        "sessionFileDigest": canonical::hex(&<sha2::Sha256 as sha2::Digest>::digest(r.session_file.as_bytes())),
        "provider": r.provider,
        "model": r.model,
        "thinking": r.thinking,
        "modelProfile": r.model_profile,
        "transcriptDigest": r.transcript_digest,
    });
    canonical::hash(&marker)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::command::HandoffLane;

    fn authority() -> HandoffAuthority {
        HandoffAuthority {
            incarnation_digest: "ab".repeat(32),
            epoch_revision: 3,
            lease_id: 7,
            deployment_generation: 1,
        }
    }

    /// The preimage spelled out by hand, as a host following docs/protocol.md would write it.
    #[test]
    fn marker_digest_hashes_the_documented_preimage() {
        let r = CheckpointReceipt {
            protocol_version: 1,
            authority: authority(),
            lane: HandoffLane::Own,
            clean_quiesced: true,
            transcript_fsynced: true,
            completed_marker_digest: String::new(),
            transcript_digest: "cd".repeat(32),
            session_id: "sid".into(),
            session_file: "/s/é.jsonl".into(),
            provider: "p".into(),
            model: "m".into(),
            thinking: "high",
            model_profile: "scripted",
        };
        let file_digest = canonical::hex(&<sha2::Sha256 as sha2::Digest>::digest("/s/é.jsonl"));
        let text = format!(
            "{{\"authority\":{{\"deploymentGeneration\":1,\"epochRevision\":3,\"incarnationDigest\":\"{}\",\"leaseId\":7}},\"domain\":\"{MARKER_DOMAIN}\",\"lane\":\"self\",\"model\":\"m\",\"modelProfile\":\"scripted\",\"provider\":\"p\",\"sessionFileDigest\":\"{file_digest}\",\"sessionId\":\"sid\",\"thinking\":\"high\",\"transcriptDigest\":\"{}\"}}",
            "ab".repeat(32),
            "cd".repeat(32)
        );
        let want = canonical::hex(&<sha2::Sha256 as sha2::Digest>::digest(text.as_bytes()));
        assert_eq!(completed_marker_digest(&r), want);
    }

    #[test]
    fn authority_digest_and_integers_are_checked() {
        assert!(check_authority(&authority()).is_ok());
        let mut a = authority();
        a.incarnation_digest = "AB".repeat(32);
        assert!(check_authority(&a).is_err());
        let mut a = authority();
        a.lease_id = 0;
        assert!(check_authority(&a).is_err());
        let mut a = authority();
        a.epoch_revision = MAX_SAFE_INTEGER + 1;
        assert!(check_authority(&a).unwrap_err().contains("epochRevision"));
    }
}
