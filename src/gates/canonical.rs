//! Canonical JSON and its SHA-256: the text JavaScript's `JSON.stringify` would print for a
//! value whose object keys were sorted by UTF-16 code units, with no whitespace. Gate hashes
//! (`schema_hash`, `answer_hash`, the idempotency hash) are computed from it, so they must match
//! a JavaScript host byte for byte: numbers are printed like ECMAScript `Number#toString`
//! (`1`, not `1.0`; `1e+21`; `-0` as `0`), strings escaped like `JSON.stringify`.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The canonical text of `value`.
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// Lower-case hex SHA-256 of the canonical text's UTF-8 bytes.
pub fn hash(value: &Value) -> String {
    hex(&Sha256::digest(canonical(value).as_bytes()))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // JavaScript holds every number as an f64: large integers lose precision there too.
        Value::Number(n) => out.push_str(&js_number(n.as_f64().unwrap_or(f64::NAN))),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            // The default JavaScript sort compares UTF-16 code units, which differs from
            // Rust's order for characters above U+FFFF against U+E000..U+FFFF.
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, &map[key]);
            }
            out.push('}');
        }
    }
}

/// `JSON.stringify` of a string. Rust strings hold no lone surrogates (the JSON parser refuses
/// them), so the `\udXXX` case of JavaScript cannot arise.
fn write_string(out: &mut String, s: &str) {
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

/// ECMAScript `Number::toString(x)` for a finite `x` (`JSON.stringify` prints `null` for the
/// others, which parsed JSON cannot hold).
pub fn js_number(x: f64) -> String {
    if !x.is_finite() {
        return "null".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    let sign = if x < 0.0 { "-" } else { "" };
    // Rust's `{:e}` prints the shortest digits that round-trip, as ECMAScript requires:
    // "d.ddde±x". From it come the digits `s` (k of them) and `n`, with x = 0.s × 10^n.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let k = digits.len() as i64;
    let n = exp.parse::<i64>().unwrap_or(0) + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e_sign = if e < 0 { '-' } else { '+' };
        match digits.len() {
            1 => format!("{digits}e{e_sign}{}", e.abs()),
            _ => format!("{}.{}e{e_sign}{}", &digits[..1], &digits[1..], e.abs()),
        }
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_print_like_javascript() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1"),
            (-0.0, "0"),
            (1.5, "1.5"),
            (100.0, "100"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (123456789.125, "123456789.125"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-2.5e30, "-2.5e+30"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
        ];
        for (x, want) in cases {
            assert_eq!(js_number(*x), *want, "{x}");
        }
    }

    #[test]
    fn keys_sorted_by_utf16_and_strings_escaped() {
        let v = json!({"b": 1, "a": [true, null, "x\n\u{1}\"\\/"], "\u{ff61}": 0, "\u{1f600}": 0});
        assert_eq!(
            canonical(&v),
            "{\"a\":[true,null,\"x\\n\\u0001\\\"\\\\/\"],\"b\":1,\"\u{1f600}\":0,\"\u{ff61}\":0}"
        );
        assert_eq!(hash(&json!({})).len(), 64);
    }
}
