//! Turns one inbound line into an `Inbound` value, in two stages: first the line is split into its
//! top-level fields, each kept as a slice of the line (`RawValue`), so `{id?, type}` can be read
//! and the `id` always echoed; then the typed fields are decoded from those same slices. Nothing
//! is copied into an intermediate tree: a 64 MiB line costs the line plus what the command keeps.
//! Every failure becomes a ready-made response.

use std::collections::BTreeMap;

use serde::de::value::MapDeserializer;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::Value;

use super::command::Command;
use super::host_reply::HostReply;
use super::outbound::Response;

/// The longest line accepted (64 MiB). Longer lines are answered with a parse error and skipped
/// without being buffered whole (see `transport/stdin.rs`).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Error texts quote offending values; a quoted 64 MiB string would make the answer as large as
/// the line, so the text is cut here.
const MAX_ERROR_CHARS: usize = 1024;

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

/// The top-level fields of a line, each still JSON text inside the line. A key given twice keeps
/// its last value, as `JSON.parse` does.
type Fields<'a> = BTreeMap<String, &'a RawValue>;

/// Decodes one line (without its LF). `None` for a line that is empty after trimming.
pub fn decode_line(bytes: &[u8]) -> Option<Inbound> {
    let text = String::from_utf8_lossy(bytes);
    let line = trim_js(&text);
    if line.is_empty() {
        return None;
    }
    if !line.starts_with('{') {
        // Tell "not JSON" from "JSON, but not an object" without building anything: skipping a
        // value needs no recursion, so deep nesting costs nothing here either.
        let message = match serde_json::from_str::<IgnoredAny>(line) {
            Ok(_) => "Failed to parse command: a command must be a JSON object".to_string(),
            Err(e) => format!("Failed to parse command: {e}"),
        };
        return Some(parse_error(None, message));
    }
    Some(match serde_json::from_str::<Fields>(line) {
        Ok(fields) => decode_fields(&fields),
        Err(e) => parse_error(None, format!("Failed to parse command: {e}")),
    })
}

fn decode_fields(fields: &Fields) -> Inbound {
    let id = match fields
        .get("id")
        .map(|raw| serde_json::from_str::<Value>(raw.get()))
    {
        None | Some(Ok(Value::Null)) => None,
        Some(Ok(id)) => Some(id),
        Some(Err(e)) => return parse_error(None, format!("Failed to parse command: {e}")),
    };
    let name = match fields.get("type") {
        Some(raw) if raw.get().starts_with('"') => {
            match serde_json::from_str::<String>(raw.get()) {
                Ok(name) => name,
                Err(e) => return parse_error(id, format!("Failed to parse command: {e}")),
            }
        }
        Some(_) => {
            return parse_error(
                id,
                "Failed to parse command: \"type\" must be a string".into(),
            )
        }
        None => return parse_error(id, "Failed to parse command: missing \"type\"".into()),
    };
    if let Some(reply) = HostReply::decode(&name, borrowed(fields)) {
        return match reply {
            Ok(reply) => Inbound::HostReply(reply),
            Err(e) => invalid(id, &name, format!("Invalid {name} frame: {e}")),
        };
    }
    match Command::decode(&name, borrowed(fields)) {
        Some(Ok(command)) => Inbound::Command { id, command },
        Some(Err(e)) => invalid(id, &name, format!("Invalid {name} command: {e}")),
        None => invalid(id, &name, format!("Unknown command: {name}")),
    }
}

/// The fields as a map deserializer whose values are read straight from the line.
fn borrowed<'a, 'de>(
    fields: &'a Fields<'de>,
) -> MapDeserializer<'de, impl Iterator<Item = (&'a str, &'de RawValue)>, serde_json::Error> {
    MapDeserializer::new(fields.iter().map(|(k, v)| (k.as_str(), *v)))
}

/// A field's value is parsed on its own, so serde_json's "at line 1 column N" would point into
/// the field, not the line: it is dropped. Long texts are cut (see `MAX_ERROR_CHARS`).
fn clean(message: &str) -> String {
    let message = strip_position(message);
    match message.char_indices().nth(MAX_ERROR_CHARS) {
        Some((cut, _)) => format!("{}…", &message[..cut]),
        None => message.to_string(),
    }
}

fn strip_position(message: &str) -> &str {
    let Some(at) = message.rfind(" at line ") else {
        return message;
    };
    let tail = &message[at + " at line ".len()..];
    let position = tail.split_once(" column ").is_some_and(|(line, column)| {
        [line, column]
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    if position {
        &message[..at]
    } else {
        message
    }
}

fn invalid(id: Option<Value>, name: &str, message: String) -> Inbound {
    Inbound::Invalid(Response::err(id, name, clean(&message)))
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

    fn assert_command(line: &[u8], want_id: &str, want_name: &str) {
        match decode_line(line) {
            Some(Inbound::Command { id, command }) => {
                assert_eq!(id, Some(json!(want_id)));
                assert_eq!(command.name(), want_name);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn crlf_and_unknown_fields_are_fine() {
        assert_command(
            b"{\"id\":\"x\",\"type\":\"get_state\",\"zzz\":true}\r",
            "x",
            "get_state",
        );
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

    #[test]
    fn a_repeated_key_keeps_its_last_value() {
        assert_command(
            br#"{"id":"a","type":"frobnicate","id":"b","type":"get_state"}"#,
            "b",
            "get_state",
        );
    }

    #[test]
    fn deep_nesting_is_answered_without_recursion() {
        let depth = 100_000;
        let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(invalid(&arrays).error.unwrap().contains("JSON object"));
        let objects = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        let r = invalid(&objects);
        assert_eq!(
            r.error,
            Some("Failed to parse command: missing \"type\"".to_string())
        );
        let todos = format!(
            r#"{{"id":"d","type":"set_todos","phases":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let r = invalid(&todos);
        assert_eq!(r.id, Some(json!("d")));
        assert!(r.error.unwrap().contains("recursion limit"));
    }

    #[test]
    fn field_errors_carry_no_position_and_are_cut() {
        let r = invalid(r#"{"id":"p","type":"set_auto_retry","enabled":"yes"}"#);
        assert_eq!(
            r.error,
            Some(
                "Invalid set_auto_retry command: enabled: invalid type: string \"yes\", expected a boolean"
                    .to_string()
            )
        );
        let huge = "x".repeat(100_000);
        let line = format!(r#"{{"id":"q","type":"set_auto_retry","enabled":"{huge}"}}"#);
        let message = invalid(&line).error.unwrap();
        assert!(
            message.chars().count() <= MAX_ERROR_CHARS + 1,
            "{}",
            message.len()
        );
        assert!(message.ends_with('…'));
    }

    #[test]
    fn bad_ids_and_type_strings_are_parse_errors() {
        let r = invalid(r#"{"id":1e999,"type":"get_state"}"#);
        assert_eq!((r.command.as_str(), r.id), ("parse", None));
        let r = invalid(r#"{"id":"s","type":"get_\ud800state"}"#);
        assert_eq!((r.command.as_str(), r.id), ("parse", Some(json!("s"))));
        let r = invalid(r#"{"id":"t","type":7}"#);
        assert!(r.error.unwrap().contains("must be a string"));
    }
}
