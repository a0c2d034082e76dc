//! A standing fuzz corpus, the same on every run (fixed seed): mutated commands, random bytes and
//! pathological lines (64 MiB, 100 000-deep nesting, invalid UTF-8, NUL, BOM, lone CR, huge
//! numbers, repeated keys, every command type with fields of the wrong type). Every line that is
//! not a host reply gets exactly one response, echoing its string `id`; the process stays up; and
//! its resident set comes back to near idle afterwards.

use std::collections::HashMap;

use ::gjc::protocol::{Command, HostReply, MAX_LINE_BYTES};
use serde_json::{json, Value};

use crate::hardening_input::{assert_memory_back, padded_get_state, status_bytes, MIB};
use crate::support::{gjc, TIMEOUT};

/// xorshift64: enough randomness for a corpus, and no crate for it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Harmless commands to mutate: whatever a mutation turns them into, nothing is run or written
/// outside the session.
const SEEDS: &[&str] = &[
    r#"{"id":"s1","type":"get_state"}"#,
    r#"{"id":"s2","type":"set_session_name","name":"fuzz"}"#,
    r#"{"id":"s3","type":"set_steering_mode","mode":"all"}"#,
    r#"{"id":"s4","type":"set_thinking_level","level":"low"}"#,
    r#"{"id":"s5","type":"set_auto_retry","enabled":false}"#,
    r#"{"id":"s6","type":"get_session_stats"}"#,
    r#"{"id":"s7","type":"set_todos","phases":[{"name":"a","tasks":[{"content":"b","status":"pending"}]}]}"#,
    r#"{"id":"s8","type":"get_state","include":["x"]}"#,
];

/// Every field name any command reads, each with a value of a type no command accepts there.
const WRONG_FIELDS: &str = r#""message":5,"images":"x","streamingBehavior":7,"parentSession":3,
"include":"x","phases":{},"tools":1,"schemes":2,"gate_id":[],"answer":null,"idempotency_key":9,
"declaration":1,"capabilities":[],"provider":1,"modelId":[],"level":{},"mode":3,
"customInstructions":4,"enabled":"yes","command":5,"outputPath":6,"sessionPath":7,"entryId":8,
"name":9,"all":"x","providerId":10,"confirmed":"y","result":1,"partialResult":2,"content":3"#;

fn mutate(rng: &mut Rng, seed: &str) -> Vec<u8> {
    let mut line = seed.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(line.len() + 1);
        match rng.below(6) {
            0 if at < line.len() => line[at] ^= 1 << rng.below(8),
            1 if at < line.len() => {
                line.remove(at);
            }
            2 => line.insert(at, *rng.pick(b"{}[]\":,\\0e-+.ntfu \t\r\x00\xff")),
            3 => line.truncate(at),
            4 => {
                let piece = line[at..].to_vec();
                line.splice(at..at, piece.into_iter().take(16));
            }
            _ => line.insert(at, rng.next() as u8),
        }
    }
    line
}

fn random_bytes(rng: &mut Rng) -> Vec<u8> {
    (0..rng.below(200)).map(|_| rng.next() as u8).collect()
}

fn nested(open: &str, close: &str, depth: usize, middle: &str) -> Vec<u8> {
    format!("{}{middle}{}", open.repeat(depth), close.repeat(depth)).into_bytes()
}

/// Lines chosen for what they break, not at random.
fn pathological() -> Vec<Vec<u8>> {
    let deep = 100_000;
    let mut lines = vec![
        // Over the cap first: dropping that one empties the buffer, which must not be what
        // gives back the memory of the longest accepted line.
        padded_get_state("p-over", 64 * MIB as usize + 1),
        padded_get_state("p-64mib", 64 * MIB as usize - 1),
        "[".repeat(deep).into_bytes(),
        nested("[", "]", deep, ""),
        r#"{"a":"#.repeat(deep).into_bytes(),
        nested(r#"{"a":"#, "}", deep, "1"),
        [
            br#"{"id":"p-deep-field","type":"set_todos","phases":"#.as_slice(),
            &nested("[", "]", deep, ""),
            b"}",
        ]
        .concat(),
        [
            br#"{"type":"get_state","id":"#.as_slice(),
            &nested("[", "]", deep, ""),
            b"}",
        ]
        .concat(),
        b"{\"id\":\"p-utf8\",\"type\":\"set_session_name\",\"name\":\"a\xff\xfe\xc0b\"}".to_vec(),
        b"{\"id\":\"p-utf8-type\",\"type\":\"get_\xffstate\"}".to_vec(),
        b"\xff\xfe\xfd".to_vec(),
        b"{\"id\":\"p-nul\",\"type\":\"get\x00state\"}".to_vec(),
        b"\x00".to_vec(),
        b"{\"id\":\"p-nul-escaped\",\"type\":\"get_state\",\"x\":\"\\u0000\"}".to_vec(),
        "\u{feff}{\"id\":\"p-bom\",\"type\":\"get_state\"}".into(),
        "\u{feff}".into(),
        b"{\"id\":\"p-cr\",\"type\":\"get_state\"}\r".to_vec(),
        b"\r".to_vec(),
        b"{\"id\":\"p-cr-inside\",\r\"type\":\"get_state\"}".to_vec(),
        b"get\rstate".to_vec(),
        br#"{"id":"p-huge","type":"get_state","x":1e999999}"#.to_vec(),
        br#"{"id":123456789012345678901234567890,"type":"get_state"}"#.to_vec(),
        br#"{"id":1e400,"type":"get_state"}"#.to_vec(),
        br#"{"id":"p-huge-field","type":"set_auto_retry","enabled":1e999}"#.to_vec(),
        br#"{"id":"p-dup","type":"nope","type":"get_state","id":"p-dup"}"#.to_vec(),
        br#"{"id":"p-dup-field","type":"set_session_name","name":1,"name":"ok"}"#.to_vec(),
        br#"{"id":"p-surrogate","type":"set_session_name","name":"\ud800"}"#.to_vec(),
        br#"{"id":"p-type-null","type":null}"#.to_vec(),
        b"{}".to_vec(),
        b"[]".to_vec(),
        b"\"\"".to_vec(),
        br#"{"id":"p-trailing","type":"get_state"} x"#.to_vec(),
        br#"{"id":"p-two","type":"get_state"}{"id":"p-two-b","type":"get_state"}"#.to_vec(),
    ];
    for name in Command::NAMES.iter().chain(HostReply::NAMES) {
        lines.push(format!(r#"{{"id":"w-{name}","type":"{name}",{WRONG_FIELDS}}}"#).into());
        lines.push(format!(r#"{{"id":"t-{name}","type":"{name}","id":"t-{name}"}}"#).into());
    }
    lines
}

/// The corpus: pathological lines spread among mutated seeds and random bytes.
fn corpus(rng: &mut Rng) -> Vec<Vec<u8>> {
    let special = pathological();
    let mut lines = Vec::new();
    for line in special {
        for _ in 0..rng.below(40) {
            let seed = *rng.pick(SEEDS);
            lines.push(match rng.below(4) {
                0 => random_bytes(rng),
                _ => mutate(rng, seed),
            });
        }
        lines.push(line);
    }
    for _ in 0..3000 {
        let seed = *rng.pick(SEEDS);
        lines.push(mutate(rng, seed));
    }
    for line in &mut lines {
        // A line break inside would make two lines.
        line.iter_mut()
            .filter(|b| **b == b'\n')
            .for_each(|b| *b = b' ');
    }
    lines
}

/// What a line must get back: nothing (blank, or a well-formed host reply), or one response,
/// with this `id` when the line is a JSON object whose `id` is a string.
enum Expect {
    Nothing,
    Response(Option<String>),
}

fn expect(line: &[u8]) -> Expect {
    if line.len() > MAX_LINE_BYTES {
        // Discarded as it arrives: answered, but its id was never kept.
        return Expect::Response(None);
    }
    let text = String::from_utf8_lossy(line);
    let text = text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if text.is_empty() {
        return Expect::Nothing;
    }
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) else {
        return Expect::Response(None);
    };
    let kind = object.get("type").and_then(Value::as_str).unwrap_or("");
    let id = object.get("id").and_then(Value::as_str).map(String::from);
    // Of the corpus's host replies, only these two, with just an `id`, are well formed; the
    // others lack a required field and are answered with an error.
    let id_is_enough = ["extension_ui_response", "host_uri_result"].contains(&kind);
    if id_is_enough && id.as_deref().is_some_and(|i| i.starts_with("t-")) {
        return Expect::Nothing;
    }
    Expect::Response(id)
}

#[test]
fn every_fuzzed_line_is_answered_and_memory_comes_back() {
    let mut g = gjc().spawn();
    let pid = g.client.pid();
    g.ok(json!({"type": "get_state"}));
    let idle = status_bytes(pid, "VmRSS:");

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let lines = corpus(&mut rng);
    let mut answers = 0usize;
    let mut ids: HashMap<String, usize> = HashMap::new();
    for line in &lines {
        if let Expect::Response(id) = expect(line) {
            answers += 1;
            if let Some(id) = id {
                *ids.entry(id).or_default() += 1;
            }
        }
    }
    let mut batch = Vec::new();
    for line in &lines {
        batch.extend_from_slice(line);
        batch.push(b'\n');
        if batch.len() > 256 * 1024 {
            g.client.send_raw(&batch).unwrap();
            batch.clear();
        }
    }
    batch.extend_from_slice(b"{\"id\":\"fuzz-end\",\"type\":\"get_state\"}\n");
    g.client.send_raw(&batch).unwrap();
    drop(batch);

    let frames = g
        .client
        .collect_until(|f| f["id"] == "fuzz-end", TIMEOUT)
        .expect("every line answered before the last");
    let responses: Vec<&Value> = frames[..frames.len() - 1]
        .iter()
        .filter(|f| f["type"] == "response")
        .collect();
    for r in &responses {
        if let Some(id) = r["id"].as_str() {
            if let Some(n) = ids.get_mut(id) {
                *n = n.saturating_sub(1);
            }
        }
    }
    let missing: Vec<_> = ids.iter().filter(|(_, n)| **n > 0).collect();
    assert!(
        missing.is_empty(),
        "no response echoed these ids: {missing:?}"
    );
    assert_eq!(
        responses.len(),
        answers,
        "one response per line that is not a host reply"
    );
    // Nothing more is owed: the next command is answered next.
    let next = g.request(json!({"id": "fuzz-after", "type": "get_state"}));
    assert_eq!(next["success"], true, "{next}");
    assert!(g
        .client
        .take_backlog()
        .iter()
        .all(|f| f.value["type"] != "response"));

    eprintln!("{} lines, {answers} answers", lines.len());
    assert_memory_back(pid, idle);
    assert!(g.close_and_wait().is_some_and(|s| s.success()));
}
