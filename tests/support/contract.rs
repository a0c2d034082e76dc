//! The client contract: what the published Python client (`gjc_rpc`) requires of every frame,
//! rule by rule (its parser's checks; see docs/protocol.md). Every frame any integration test
//! reads from gjc passes through [`Contract::check`]; a violation fails the test that saw it,
//! when its `Gjc` is dropped.
//!
//! Besides the per-frame rules, two rules span frames: one `agent_end` per `agent_start`, and
//! every `message_start` closed by exactly one `message_end` before the next one starts.

use std::sync::Mutex;

use serde_json::{Map, Value};

const ROLES: &[&str] = &[
    "user",
    "developer",
    "assistant",
    "toolResult",
    "bashExecution",
    "pythonExecution",
    "custom",
    "hookMessage",
    "branchSummary",
    "compactionSummary",
    "fileMention",
];
const THINKING_LEVELS: &[&str] = &[
    "inherit", "off", "minimal", "low", "medium", "high", "xhigh", "max",
];
const UI_METHODS: &[&str] = &[
    "select",
    "confirm",
    "input",
    "editor",
    "cancel",
    "notify",
    "setStatus",
    "setWidget",
    "setTitle",
    "set_editor_text",
    "open_url",
];

type Check = Result<(), String>;

#[derive(Default)]
pub struct Contract {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    violations: Vec<String>,
    runs_open: i64,
    message_open: bool,
}

impl Contract {
    /// Checks one stdout line; violations are kept for [`Contract::violations`].
    pub fn check(&self, line: &str) {
        let mut state = self.state.lock().unwrap();
        if let Err(e) = state.frame(line) {
            let snippet: String = line.chars().take(300).collect();
            state
                .violations
                .push(format!("{e}\n    in frame: {snippet}"));
        }
    }

    /// Checks one line gjc wrote: the client's rules, then the published JSON Schemas
    /// (`support/schemas.rs`), which describe exactly what gjc writes and so are stricter than
    /// the client about frames gjc never sends.
    pub fn check_output(&self, line: &str) {
        self.check(line);
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            return; // already reported by `check`
        };
        let typed = typed_frame(line);
        if let Err(e) = super::schemas::schemas().check(&value).and(typed) {
            let snippet: String = line.chars().take(300).collect();
            let mut state = self.state.lock().unwrap();
            state
                .violations
                .push(format!("{e}\n    in frame: {snippet}"));
        }
    }

    pub fn violations(&self) -> Vec<String> {
        self.state.lock().unwrap().violations.clone()
    }
}

/// The frame read with the typed form a Rust host uses (`gjc::protocol::frame`), which must
/// know every frame and event type gjc writes.
fn typed_frame(line: &str) -> Result<(), String> {
    use gjc::protocol::frame::{Delta, Event, Frame};
    let frame =
        Frame::parse(line).map_err(|e| format!("gjc::protocol::Frame cannot read it: {e}"))?;
    let Frame::Event(e) = frame else {
        return Ok(());
    };
    let delta = e
        .payload
        .assistant_message_event
        .as_ref()
        .or(match &e.payload.event {
            Some(Event::MessageUpdate {
                assistant_message_event,
                ..
            }) => Some(assistant_message_event),
            _ => None,
        });
    if matches!(e.payload.event, Some(Event::Unknown)) || matches!(delta, Some(Delta::Unknown)) {
        return Err("gjc::protocol::Event does not know this event or delta type".into());
    }
    Ok(())
}

impl State {
    fn frame(&mut self, line: &str) -> Check {
        if line.contains('\r') {
            return Err("a raw CR splits the line for universal-newline readers".into());
        }
        let value: Value =
            serde_json::from_str(line).map_err(|e| format!("not one JSON document: {e}"))?;
        let frame = value.as_object().ok_or("the frame is not a JSON object")?;
        match frame.get("type").and_then(Value::as_str) {
            Some("response") => response(frame),
            Some("event") => self.event_frame(frame),
            Some("ready") => {
                int(frame, "protocol_version")?;
                string_list(frame, "capabilities")
            }
            Some("extension_ui_request") => ui_request(frame),
            Some("workflow_gate") => gate(frame),
            Some("extension_error") => {
                for k in ["extensionPath", "event", "error"] {
                    string(frame, k)?;
                }
                Ok(())
            }
            Some("host_tool_call") => {
                for k in ["id", "toolCallId", "toolName"] {
                    string(frame, k)?;
                }
                object(frame, "arguments").map(drop)
            }
            Some("host_uri_request") => {
                string(frame, "id")?;
                string(frame, "url")?;
                one_of(frame, "operation", &["read", "write"])
            }
            Some("host_tool_cancel") | Some("host_uri_cancel") => string(frame, "targetId"),
            other => Err(format!("unknown frame type {other:?}")),
        }
    }

    fn event_frame(&mut self, frame: &Map<String, Value>) -> Check {
        int(frame, "protocol_version")?;
        int(frame, "seq")?;
        string(frame, "session_id")?;
        string(frame, "frame_id")?;
        let payload = object(frame, "payload")?;
        let kind = string_of(payload, "event_type")?;
        if payload.get("compact") == Some(&Value::Bool(true)) {
            // Opt-in compact frames: no `event`, so the published client passes them by.
            object(payload, "assistantMessageEvent")?;
            return Ok(());
        }
        let event = object(payload, "event")?;
        if event.get("type").and_then(Value::as_str) != Some(kind) {
            return Err("payload.event_type differs from event.type".into());
        }
        self.sequence(kind)?;
        inner_event(kind, event)
    }

    /// Rules across frames: runs and messages open and close in pairs.
    fn sequence(&mut self, kind: &str) -> Check {
        match kind {
            "agent_start" => self.runs_open += 1,
            "agent_end" => {
                self.runs_open -= 1;
                if self.runs_open < 0 {
                    return Err("agent_end without a run".into());
                }
            }
            "message_start" if self.message_open => {
                return Err("message_start while another message is open".into())
            }
            "message_start" => self.message_open = true,
            "message_end" if !self.message_open => {
                return Err("message_end without its message_start".into())
            }
            "message_end" => self.message_open = false,
            "message_update" if !self.message_open => {
                return Err("message_update outside a message".into())
            }
            _ => {}
        }
        Ok(())
    }
}

fn inner_event(kind: &str, e: &Map<String, Value>) -> Check {
    match kind {
        "agent_start" | "turn_start" | "todo_auto_clear" => Ok(()),
        "agent_end" => {
            messages(e, "messages")?;
            optional_enum(e, "stopReason", &["completed", "paused"])?;
            optional_enum(
                e,
                "outcome",
                &["completed", "aborted", "error", "budget_exceeded", "denied"],
            )?;
            optional_object(e, "telemetry")?;
            optional_object(e, "coverage")
        }
        "turn_end" => {
            message(required(e, "message")?)?;
            match e.get("toolResults") {
                None | Some(Value::Null) => Ok(()),
                Some(Value::Array(items)) => items
                    .iter()
                    .try_for_each(|m| message_with_role(m, "toolResult")),
                Some(_) => Err("toolResults must be an array".into()),
            }
        }
        "message_start" | "message_end" | "irc_message" | "subagent_steer_message" => {
            message(required(e, "message")?)
        }
        "message_update" => {
            message(required(e, "message")?)?;
            assistant_event(object(e, "assistantMessageEvent")?)
        }
        "tool_execution_start" | "tool_execution_update" => optional_string(e, "intent"),
        "tool_execution_end" => optional_bool(e, "isError"),
        "auto_compaction_start" => {
            enum_with_default(e, "reason", &["threshold", "overflow", "idle"])?;
            enum_with_default(e, "action", &["context-full", "handoff"])
        }
        "auto_compaction_end" => {
            enum_with_default(e, "action", &["context-full", "handoff"])?;
            match e.get("result") {
                None | Some(Value::Null) => {}
                Some(Value::Object(r)) => compaction_result(r)?,
                Some(_) => return Err("result must be an object".into()),
            }
            optional_string(e, "errorMessage")?;
            optional_bool(e, "skipped")?;
            optional_string(e, "continuationSkipReason")
        }
        "auto_retry_start" => {
            for k in ["attempt", "maxAttempts", "delayMs"] {
                int_coerced(e, k)?;
            }
            optional_bool(e, "unbounded")
        }
        "auto_retry_end" => {
            int_coerced(e, "attempt")?;
            optional_string(e, "finalError")
        }
        "ttsr_triggered" => match e.get("rules") {
            None | Some(Value::Null) => Ok(()),
            Some(Value::Array(r)) if r.iter().all(Value::is_object) => Ok(()),
            Some(_) => Err("rules must be an array of objects".into()),
        },
        "todo_reminder" => {
            if let Some(Value::Array(todos)) = e.get("todos") {
                todos.iter().try_for_each(todo_item)?;
            }
            int_coerced(e, "attempt")?;
            int_coerced(e, "maxAttempts")
        }
        "notice" => {
            enum_with_default(e, "level", &["info", "warning", "error"])?;
            optional_string(e, "source")
        }
        "thinking_level_changed" => optional_enum(e, "thinkingLevel", THINKING_LEVELS),
        "goal_updated" => {
            optional_object(e, "goal")?;
            optional_object(e, "state")
        }
        "mcp_server_state" => {
            string(e, "name")?;
            one_of(e, "state", &["starting", "ready", "failed", "stopped"])?;
            optional_string(e, "reason")
        }
        other => Err(format!("unknown event type {other:?}")),
    }
}

fn assistant_event(ev: &Map<String, Value>) -> Check {
    let kind = string_of(ev, "type")?;
    let needs_partial =
        |ev: &Map<String, Value>| message_with_role(required(ev, "partial")?, "assistant");
    match kind {
        "start" => needs_partial(ev),
        "text_start" | "thinking_start" | "toolcall_start" => {
            needs_partial(ev)?;
            strict_int(ev, "contentIndex")
        }
        "text_delta" | "thinking_delta" | "toolcall_delta" => {
            needs_partial(ev)?;
            strict_int(ev, "contentIndex")?;
            string(ev, "delta")
        }
        "text_end" | "thinking_end" => {
            needs_partial(ev)?;
            strict_int(ev, "contentIndex")?;
            string(ev, "content")
        }
        "toolcall_end" => {
            needs_partial(ev)?;
            strict_int(ev, "contentIndex")?;
            object(ev, "toolCall").map(drop)
        }
        "done" => {
            one_of(ev, "reason", &["stop", "length", "toolUse"])?;
            message_with_role(required(ev, "message")?, "assistant")
        }
        "error" => {
            one_of(ev, "reason", &["aborted", "error"])?;
            message_with_role(required(ev, "error")?, "assistant")
        }
        other => Err(format!("unknown assistantMessageEvent type {other:?}")),
    }
}

fn response(r: &Map<String, Value>) -> Check {
    if !matches!(r.get("success"), Some(Value::Bool(_))) {
        return Err("success must be a JSON boolean".into());
    }
    // `id` echoes whatever the request carried; the client matches string ids and passes any
    // other response by without failing.
    let command = string_of(r, "command")?;
    if r["success"] == false {
        return string(r, "error");
    }
    let data = match r.get("data") {
        None | Some(Value::Null) => &Map::new(),
        Some(Value::Object(d)) => d,
        Some(_) => return Err("data must be an object, null or absent".into()),
    };
    response_data(command, data)
}

/// What the client reads from each command's `data`.
fn response_data(command: &str, d: &Map<String, Value>) -> Check {
    match command {
        "get_state" => state(d),
        "set_model" => model(d),
        "cycle_model" => model(object(d, "model")?),
        "get_available_models" => match d.get("models") {
            None | Some(Value::Null) => Ok(()),
            Some(Value::Array(ms)) => ms
                .iter()
                .filter(|m| !m.is_null())
                .try_for_each(|m| model(m.as_object().ok_or("a model must be an object")?)),
            Some(_) => Err("models must be an array".into()),
        },
        "compact" => compaction_result(d),
        "bash" => {
            if let Some(code) = d.get("exitCode").filter(|c| !c.is_null()) {
                if !code.is_i64() {
                    return Err("exitCode must be an integer".into());
                }
            }
            for k in ["totalLines", "totalBytes", "outputLines", "outputBytes"] {
                int_coerced(d, k)?;
            }
            optional_string(d, "artifactId")
        }
        "get_session_stats" => {
            optional_string(d, "sessionFile")?;
            for k in [
                "userMessages",
                "assistantMessages",
                "toolCalls",
                "toolResults",
                "totalMessages",
                "premiumRequests",
            ] {
                int_coerced(d, k)?;
            }
            if d.get("cost").is_some_and(|c| !c.is_number()) {
                return Err("cost must be a number".into());
            }
            match d.get("tokens") {
                None | Some(Value::Null) => Ok(()),
                Some(Value::Object(t)) => ["input", "output", "cacheRead", "cacheWrite", "total"]
                    .iter()
                    .try_for_each(|k| int_coerced(t, k)),
                Some(_) => Err("tokens must be an object".into()),
            }
        }
        "export_html" => string(d, "path"),
        "get_branch_messages" => match d.get("messages") {
            Some(Value::Array(ms)) if ms.iter().all(Value::is_object) => Ok(()),
            _ => Err("messages must be an array of objects".into()),
        },
        "get_messages" => messages(d, "messages"),
        "set_todos" => todo_phases(d.get("todoPhases")),
        "set_host_tools" => optional_string_list(d, "toolNames"),
        "set_host_uri_schemes" => optional_string_list(d, "schemes"),
        "negotiate_unattended" => string(d, "run_id"),
        "get_login_providers" => match d.get("providers") {
            Some(Value::Array(ps)) => ps.iter().try_for_each(|p| {
                string(p.as_object().ok_or("a provider must be an object")?, "id")
            }),
            _ => Ok(()),
        },
        "checkpoint_for_handoff" => super::receipt::check(d),
        // The client reads `savedPath` only when it is a string: anything else loses the path.
        "handoff" => optional_string(d, "savedPath"),
        "get_pending_workflow_gates" => match d.get("gates") {
            Some(Value::Array(gs)) => gs.iter().filter_map(Value::as_object).try_for_each(gate),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

fn state(d: &Map<String, Value>) -> Check {
    if let Some(Value::Array(tools)) = d.get("dumpTools") {
        for t in tools {
            let t = t.as_object().ok_or("dumpTools entries must be objects")?;
            string(t, "name")?;
            string(t, "description")?;
        }
    }
    if let Some(m) = d.get("model").filter(|m| !m.is_null()) {
        model(m.as_object().ok_or("model must be an object")?)?;
    }
    optional_enum(d, "thinkingLevel", THINKING_LEVELS)?;
    enum_with_default(d, "steeringMode", &["all", "one-at-a-time"])?;
    enum_with_default(d, "followUpMode", &["all", "one-at-a-time"])?;
    enum_with_default(d, "interruptMode", &["immediate", "wait"])?;
    optional_string(d, "sessionFile")?;
    optional_string(d, "sessionName")?;
    string(d, "sessionId")?;
    int_coerced(d, "messageCount")?;
    int_coerced(d, "queuedMessageCount")?;
    todo_phases(d.get("todoPhases"))?;
    match d.get("systemPrompt") {
        None | Some(Value::Null) | Some(Value::String(_)) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
        Some(_) => return Err("systemPrompt must be a string or strings".into()),
    }
    if let Some(Value::Object(u)) = d.get("contextUsage") {
        if !u.get("tokens").is_some_and(|t| t.is_null() || t.is_u64()) {
            return Err("contextUsage.tokens must be null or an integer".into());
        }
        int_coerced(u, "contextWindow")?;
        if !u
            .get("percent")
            .is_some_and(|p| p.is_null() || p.is_number())
        {
            return Err("contextUsage.percent must be null or a number".into());
        }
        enum_with_default(u, "source", &["provider_anchor", "heuristic", "unknown"])?;
    }
    Ok(())
}

fn model(m: &Map<String, Value>) -> Check {
    for k in ["id", "name", "api", "provider", "baseUrl"] {
        string(m, k)?;
    }
    if let Some(cost) = m.get("cost").filter(|c| !c.is_null()) {
        let cost = cost.as_object().ok_or("cost must be an object")?;
        for k in ["input", "output", "cacheRead", "cacheWrite"] {
            if cost.get(k).is_some_and(|v| !v.is_number()) {
                return Err(format!("cost.{k} must be a number"));
            }
        }
    }
    optional_string_list(m, "input")?;
    int_coerced(m, "contextWindow")?;
    int_coerced(m, "maxTokens")?;
    optional_object(m, "headers")?;
    for k in ["premiumMultiplier", "priority"] {
        if m.get(k).is_some_and(|v| !v.is_number()) {
            return Err(format!("{k} must be a number when present"));
        }
    }
    if let Some(Value::Object(t)) = m.get("thinking") {
        one_of(t, "minLevel", THINKING_LEVELS)?;
        one_of(t, "maxLevel", THINKING_LEVELS)?;
        string(t, "mode")?;
    }
    optional_object(m, "compat")
}

fn todo_phases(v: Option<&Value>) -> Check {
    let Some(Value::Array(phases)) = v else {
        return Ok(());
    };
    for p in phases {
        let p = p.as_object().ok_or("todo phases must be objects")?;
        string(p, "name")?;
        match p.get("tasks") {
            None | Some(Value::Null) => {}
            Some(Value::Array(tasks)) => tasks.iter().try_for_each(todo_item)?,
            Some(_) => return Err("tasks must be an array".into()),
        }
    }
    Ok(())
}

fn todo_item(t: &Value) -> Check {
    let t = t.as_object().ok_or("todo items must be objects")?;
    string(t, "content")?;
    enum_with_default(
        t,
        "status",
        &["pending", "in_progress", "completed", "abandoned"],
    )?;
    optional_string(t, "notes")?;
    optional_string(t, "details")
}

fn compaction_result(r: &Map<String, Value>) -> Check {
    optional_string(r, "shortSummary")?;
    int_coerced(r, "tokensBefore")?;
    optional_object(r, "preserveData")
}

fn ui_request(f: &Map<String, Value>) -> Check {
    string(f, "id")?;
    one_of(f, "method", UI_METHODS)?;
    for k in [
        "title",
        "message",
        "placeholder",
        "prefill",
        "targetId",
        "statusKey",
        "statusText",
        "widgetKey",
        "text",
        "url",
        "instructions",
    ] {
        optional_string(f, k)?;
    }
    optional_string_list(f, "options")?;
    optional_string_list(f, "widgetLines")?;
    if f.get("timeout")
        .is_some_and(|t| !t.is_null() && !t.is_i64())
    {
        return Err("timeout must be a whole JSON integer".into());
    }
    optional_bool(f, "promptStyle")?;
    optional_enum(f, "notifyType", &["info", "warning", "error"])?;
    optional_enum(f, "widgetPlacement", &["aboveEditor", "belowEditor"])
}

fn gate(f: &Map<String, Value>) -> Check {
    if let Some(Value::Array(options)) = f.get("options") {
        for o in options.iter().filter_map(Value::as_object) {
            string(o, "label")?;
            optional_string(o, "description")?;
        }
    }
    for k in ["gate_id", "stage", "kind", "schema_hash", "created_at"] {
        string(f, k)?;
    }
    one_of(f, "kind", &["question", "approval", "execution"])?;
    object(f, "schema")?;
    object(f, "context").map(drop)
}

fn messages(m: &Map<String, Value>, key: &str) -> Check {
    match m.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(items)) => items.iter().try_for_each(message),
        Some(_) => Err(format!("{key} must be an array")),
    }
}

fn message(m: &Value) -> Check {
    let m = m.as_object().ok_or("a message must be an object")?;
    one_of(m, "role", ROLES)
}

fn message_with_role(m: &Value, role: &str) -> Check {
    message(m)?;
    if m["role"] != role {
        return Err(format!(
            "expected a message with role {role}, got {}",
            m["role"]
        ));
    }
    Ok(())
}

fn required<'a>(m: &'a Map<String, Value>, key: &str) -> Result<&'a Value, String> {
    m.get(key)
        .filter(|v| !v.is_null())
        .ok_or(format!("{key} is required"))
}

fn object<'a>(m: &'a Map<String, Value>, key: &str) -> Result<&'a Map<String, Value>, String> {
    required(m, key)?
        .as_object()
        .ok_or(format!("{key} must be an object"))
}

fn string_of<'a>(m: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    required(m, key)?
        .as_str()
        .ok_or(format!("{key} must be a string"))
}

fn string(m: &Map<String, Value>, key: &str) -> Check {
    string_of(m, key).map(drop)
}

fn int(m: &Map<String, Value>, key: &str) -> Check {
    strict_int(m, key)
}

/// A JSON integer: not a boolean, not a float (even a whole one).
fn strict_int(m: &Map<String, Value>, key: &str) -> Check {
    if required(m, key)?.is_i64() || m[key].is_u64() {
        Ok(())
    } else {
        Err(format!("{key} must be a JSON integer"))
    }
}

/// Python `int()` of the value when present: never null, an object or an array.
fn int_coerced(m: &Map<String, Value>, key: &str) -> Check {
    match m.get(key) {
        None | Some(Value::Number(_)) | Some(Value::Bool(_)) => Ok(()),
        Some(Value::String(s)) if s.parse::<i64>().is_ok() => Ok(()),
        Some(other) => Err(format!("{key} must be a number, got {other}")),
    }
}

fn one_of(m: &Map<String, Value>, key: &str, allowed: &[&str]) -> Check {
    let v = string_of(m, key)?;
    if allowed.contains(&v) {
        Ok(())
    } else {
        Err(format!("{key} must be one of {allowed:?}, got {v:?}"))
    }
}

/// Defaults only when the key is missing: a present `null` is an error.
fn enum_with_default(m: &Map<String, Value>, key: &str, allowed: &[&str]) -> Check {
    match m.get(key) {
        None => Ok(()),
        Some(_) => one_of(m, key, allowed),
    }
}

fn optional_enum(m: &Map<String, Value>, key: &str, allowed: &[&str]) -> Check {
    match m.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(_) => one_of(m, key, allowed),
    }
}

fn optional_string(m: &Map<String, Value>, key: &str) -> Check {
    match m.get(key) {
        None | Some(Value::Null) | Some(Value::String(_)) => Ok(()),
        Some(_) => Err(format!("{key} must be a string when present")),
    }
}

fn optional_bool(m: &Map<String, Value>, key: &str) -> Check {
    match m.get(key) {
        None | Some(Value::Null) | Some(Value::Bool(_)) => Ok(()),
        Some(_) => Err(format!("{key} must be a boolean when present")),
    }
}

fn optional_object(m: &Map<String, Value>, key: &str) -> Check {
    match m.get(key) {
        None | Some(Value::Null) | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(format!("{key} must be an object when present")),
    }
}

fn string_list(m: &Map<String, Value>, key: &str) -> Check {
    match m.get(key) {
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => Ok(()),
        _ => Err(format!("{key} must be an array of strings")),
    }
}

fn optional_string_list(m: &Map<String, Value>, key: &str) -> Check {
    match m.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(_) => string_list(m, key),
    }
}
