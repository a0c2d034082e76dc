//! Turns one inbound line into an `Inbound` value, in two stages: first `{id?, type}` so the `id`
//! can always be echoed, then the typed fields. Every failure becomes a ready-made response.

use serde_json::{Map, Value};

use super::command::Command;
use super::host_reply::HostReply;
use super::outbound::Response;

/// The longest line accepted (64 MiB). Longer lines are answered with a parse error and skipped
/// without being buffered whole (see `transport/stdin.rs`).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug)]
pub enum Inbound {
    Command {
        id: Option<Value>,
        command: Command,
    },
    HostReply(HostReply),
    /// A line that cannot be served; the response says why.
    Invalid(Response),
}

/// Decodes one line (without its LF). `None` for a line that is empty after trimming.
pub fn decode_line(bytes: &[u8]) -> Option<Inbound> {
    let text = String::from_utf8_lossy(bytes);
    let line = trim_js(&text);
    if line.is_empty() {
        return None;
    }
    let value: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return Some(parse_error(None, format!("Failed to parse command: {e}"))),
    };
    let Value::Object(object) = value else {
        return Some(parse_error(
            None,
            "Failed to parse command: a command must be a JSON object".into(),
        ));
    };
    Some(decode_object(object))
}

fn decode_object(object: Map<String, Value>) -> Inbound {
    let id = object.get("id").filter(|v| !v.is_null()).cloned();
    let name = match object.get("type") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return parse_error(
                id,
                "Failed to parse command: \"type\" must be a string".into(),
            )
        }
        None => return parse_error(id, "Failed to parse command: missing \"type\"".into()),
    };
    let value = Value::Object(object);
    if let Some(reply) = HostReply::decode(&name, value.clone()) {
        return match reply {
            Ok(reply) => Inbound::HostReply(reply),
            Err(e) => Inbound::Invalid(Response::err(
                id,
                &name,
                format!("Invalid {name} frame: {e}"),
            )),
        };
    }
    match Command::decode(&name, value) {
        Some(Ok(command)) => Inbound::Command { id, command },
        Some(Err(e)) => Inbound::Invalid(Response::err(
            id,
            &name,
            format!("Invalid {name} command: {e}"),
        )),
        None => Inbound::Invalid(Response::err(id, &name, format!("Unknown command: {name}"))),
    }
}

fn parse_error(id: Option<Value>, message: String) -> Inbound {
    Inbound::Invalid(Response::err(id, "parse", message))
}

/// JavaScript `String.prototype.trim`: Unicode white space, line terminators and the BOM.
fn trim_js(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn invalid(line: &str) -> Response {
        match decode_line(line.as_bytes()) {
            Some(Inbound::Invalid(r)) => r,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn empty_and_blank_lines_are_skipped() {
        assert!(decode_line(b"").is_none());
        assert!(decode_line(b"  \r").is_none());
        assert!(decode_line("\u{feff}".as_bytes()).is_none());
    }

    #[test]
    fn malformed_json_is_a_parse_error_without_id() {
        let r = invalid("{not json");
        assert_eq!(r.command, "parse");
        assert!(r.id.is_none());
        assert!(r.error.unwrap().starts_with("Failed to parse command: "));
    }

    #[test]
    fn non_objects_are_parse_errors() {
        for line in ["[1,2]", "42", "\"x\"", "null"] {
            assert_eq!(invalid(line).command, "parse", "{line}");
        }
    }

    #[test]
    fn unknown_command_echoes_id() {
        let r = invalid(r#"{"id":"a1","type":"frobnicate"}"#);
        assert_eq!(r.id, Some(json!("a1")));
        assert_eq!(r.command, "frobnicate");
        assert_eq!(r.error.as_deref(), Some("Unknown command: frobnicate"));
    }

    #[test]
    fn wrong_field_type_names_field_and_echoes_id() {
        let r = invalid(r#"{"id":"a2","type":"set_session_name","name":3}"#);
        assert_eq!(r.id, Some(json!("a2")));
        let msg = r.error.unwrap();
        assert!(msg.contains("name: invalid type"), "{msg}");
    }

    #[test]
    fn crlf_and_unknown_fields_are_fine() {
        match decode_line(b"{\"id\":\"x\",\"type\":\"get_state\",\"zzz\":true}\r") {
            Some(Inbound::Command { id, command }) => {
                assert_eq!(id, Some(json!("x")));
                assert_eq!(command.name(), "get_state");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let mut line = br#"{"type":"prompt","message":"a"#.to_vec();
        line.extend_from_slice(&[0xff, 0xfe]);
        line.extend_from_slice(br#""}"#);
        match decode_line(&line) {
            Some(Inbound::Command {
                command: Command::Prompt(p),
                ..
            }) => assert!(p.message.contains('\u{fffd}')),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn host_replies_route_separately() {
        match decode_line(br#"{"type":"extension_ui_response","id":"u1","confirmed":true}"#) {
            Some(Inbound::HostReply(HostReply::UiResponse(r))) => {
                assert_eq!(r.confirmed, Some(true))
            }
            other => panic!("{other:?}"),
        }
        let r = invalid(r#"{"type":"host_tool_result","id":"h1"}"#);
        assert!(r.error.unwrap().contains("missing field `result`"));
    }
}
