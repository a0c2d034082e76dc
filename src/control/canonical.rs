//! Canonical JSON as the JavaScript reference writes it (sorted keys by UTF-16 code units, no
//! whitespace, ECMAScript number printing) and its SHA-256, for the audit trail's `answer_hash`
//! and dedupe keys. A minimal form of the gate broker's canonicalization, kept private here.

use serde_json::Value;
use sha2::{Digest, Sha256};

pub fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write(v, &mut out);
    out
}

/// Lower-case hex SHA-256 of the canonical text.
pub fn hash(v: &Value) -> String {
    let digest = Sha256::digest(canonical(v).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn write(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&js_number(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(k, out);
                out.push(':');
                write(&map[k], out);
            }
            out.push('}');
        }
    }
}

fn string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `Number.prototype.toString()`: shortest round-trip digits, plain notation for exponents in
/// [-7, 21), otherwise `d.ddde±x`.
fn js_number(f: f64) -> String {
    if !f.is_finite() {
        return "null".into();
    }
    if f == 0.0 {
        return "0".into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "-1.2345e-7".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exp + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let sign = if n > 0 { "+" } else { "-" };
        let rest = if k > 1 {
            format!(".{}", &digits[1..])
        } else {
            String::new()
        };
        format!("{}{rest}e{sign}{}", &digits[..1], (n - 1).abs())
    };
    if f < 0.0 {
        format!("-{body}")
    } else {
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_print_like_javascript() {
        let cases = [
            (1.0, "1"),
            (-0.0, "0"),
            (0.5, "0.5"),
            (1.5e-7, "1.5e-7"),
            (1e-6, "0.000001"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (123.456, "123.456"),
            (-2.5e30, "-2.5e+30"),
            (0.1 + 0.2, "0.30000000000000004"),
        ];
        for (f, want) in cases {
            assert_eq!(js_number(f), want, "{f}");
        }
    }

    #[test]
    fn objects_sort_and_strings_escape() {
        let v = json!({"b": [1, 2.0, "x\u{1}\n/é"], "a": null, "é": true, "Z": {}});
        assert_eq!(
            canonical(&v),
            r#"{"Z":{},"a":null,"b":[1,2,"x\u0001\n/é"],"é":true}"#
        );
        // Keys above U+FFFF sort by their surrogates, before U+E000..U+FFFF.
        let v = json!({"\u{ffff}": 1, "\u{1f600}": 2});
        assert_eq!(canonical(&v), "{\"\u{1f600}\":2,\"\u{ffff}\":1}");
        // Vectors printed by Node's JSON.stringify and crypto's sha256.
        assert_eq!(
            hash(&json!("approve")),
            "6ef4cbc4f3f0a1af3187e96c208a6b7737cfa1cdfe40d84822a94d8d5eea0ac3"
        );
        let v = json!({"gate_id": "wg_1", "answer": {"n": [1, 2.5, 1e21], "decision": "approve"}});
        assert_eq!(
            hash(&v),
            "3fc8b13954d62fe643f599c548ddaa8736fef0ea38af2e5b35d8bdd1463648b5"
        );
    }
}
