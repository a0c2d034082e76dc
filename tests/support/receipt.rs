//! The `checkpoint_for_handoff` receipt as the published client checks it (CLIENT_CONTRACT §5.5),
//! with its own canonical JSON and hashing, written apart from gjc's.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

const FIELDS: [&str; 13] = [
    "protocolVersion",
    "authority",
    "lane",
    "cleanQuiesced",
    "transcriptFsynced",
    "completedMarkerDigest",
    "transcriptDigest",
    "sessionId",
    "sessionFile",
    "provider",
    "model",
    "thinking",
    "modelProfile",
];

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Keys sorted at every level, no white space, raw UTF-8 (what `json.dumps(sort_keys=True,
/// separators=(",", ":"), ensure_ascii=False)` prints).
pub fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", items.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// The completed marker digest the receipt's own fields call for.
pub fn marker_digest(d: &Map<String, Value>) -> String {
    let file = d["sessionFile"].as_str().unwrap_or_default();
    let marker = json!({
        "domain": "gjc.checkpoint-for-handoff.completed-marker.v1",
        "authority": d["authority"],
        "lane": d["lane"],
        "sessionId": d["sessionId"],
        "sessionFileDigest": sha256_hex(file.as_bytes()),
        "provider": d["provider"],
        "model": d["model"],
        "thinking": d["thinking"],
        "modelProfile": d["modelProfile"],
        "transcriptDigest": d["transcriptDigest"],
    });
    sha256_hex(canonical(&marker).as_bytes())
}

fn hex64(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

fn positive_int(v: &Value) -> bool {
    v.as_u64().is_some_and(|n| n > 0)
}

/// Every rule of §5.5 the client applies to `data` alone.
pub fn check(d: &Map<String, Value>) -> Result<(), String> {
    let mut keys: Vec<&str> = d.keys().map(String::as_str).collect();
    keys.sort();
    let mut want = FIELDS.to_vec();
    want.sort();
    if keys != want {
        return Err(format!(
            "checkpoint receipt keys {keys:?}, want exactly {want:?}"
        ));
    }
    let a = d["authority"]
        .as_object()
        .ok_or("authority must be an object")?;
    let mut akeys: Vec<&str> = a.keys().map(String::as_str).collect();
    akeys.sort();
    if akeys
        != [
            "deploymentGeneration",
            "epochRevision",
            "incarnationDigest",
            "leaseId",
        ]
    {
        return Err(format!("authority keys {akeys:?}"));
    }
    if !hex64(&a["incarnationDigest"]) {
        return Err("authority.incarnationDigest must be 64 lower-case hex digits".into());
    }
    for k in ["epochRevision", "leaseId", "deploymentGeneration"] {
        if !positive_int(&a[k]) {
            return Err(format!("authority.{k} must be a positive integer"));
        }
    }
    if !matches!(d["lane"].as_str(), Some("main" | "self")) {
        return Err("lane must be main or self".into());
    }
    for k in ["cleanQuiesced", "transcriptFsynced"] {
        if d[k] != true {
            return Err(format!("{k} must be true"));
        }
    }
    for k in ["completedMarkerDigest", "transcriptDigest"] {
        if !hex64(&d[k]) {
            return Err(format!("{k} must be 64 lower-case hex digits"));
        }
    }
    for k in [
        "sessionId",
        "sessionFile",
        "provider",
        "model",
        "thinking",
        "modelProfile",
    ] {
        if d[k].as_str().is_none_or(str::is_empty) {
            return Err(format!("{k} must be a non-empty string"));
        }
    }
    if !d["sessionFile"]
        .as_str()
        .unwrap_or_default()
        .starts_with('/')
    {
        return Err("sessionFile must be an absolute path".into());
    }
    if d["completedMarkerDigest"] != marker_digest(d).as_str() {
        return Err("completedMarkerDigest is not the digest of the canonical marker".into());
    }
    if !(d["protocolVersion"].is_u64() && d["protocolVersion"] == 1) {
        return Err("protocolVersion must be the integer 1".into());
    }
    Ok(())
}
