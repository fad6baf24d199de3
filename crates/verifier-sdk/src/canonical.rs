//! Canonical JSON and the hash primitives of PROTOCOL §1.
//!
//! The writer is hand-rolled rather than `serde_json::to_vec` on a sorted copy: it cannot
//! fail, so hashing never returns a `Result`, and the key order is decided here explicitly
//! instead of depending on whether `serde_json`'s `preserve_order` feature happens to be on.
//! Strings are escaped exactly like `serde_json` (a property test pins that).

use serde_json::Value;
use sha2::{Digest, Sha256};
use sha3::Keccak256;

use crate::types::{Bytes32, Sha256Digest};

/// How object keys are ordered when writing compact JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyOrder {
    /// Sorted by UTF-8 bytes, recursively (canonical JSON).
    Sorted,
    /// As stored in the map; with `preserve_order` this is insertion order, which the
    /// declared-field-order preimages (manifest, receipt) rely on.
    AsInserted,
}

/// The canonical JSON text of `v`: keys sorted by UTF-8 bytes at every level, compact,
/// raw UTF-8, `serde_json` escaping.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, v, KeyOrder::Sorted);
    out
}

/// Compact JSON keeping map order as stored; used for preimages in declared field order.
/// A value's derived serialization as JSON in declared field order (serde_json keeps
/// insertion order in this workspace). Serializing these plain structs cannot fail; if it
/// ever did, `null` hashes to a value no contract or job agrees with, so nothing is signed.
pub(crate) fn ordered_value(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

pub(crate) fn compact_json_in_order(v: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, v, KeyOrder::AsInserted);
    out
}

fn write_json(out: &mut String, v: &Value, order: KeyOrder) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item, order);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if order == KeyOrder::Sorted {
                entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            }
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_json(out, value, order);
            }
            out.push('}');
        }
    }
}

/// Writes a JSON string literal escaping only `"`, `\` and control characters, with the
/// same short forms and lowercase `\u00xx` that `serde_json` uses.
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `keccak_json(v)`: Ethereum Keccak-256 of the canonical JSON of `v`.
pub fn keccak_json(v: &Value) -> Bytes32 {
    Bytes32::from_bytes(Keccak256::digest(canonical_json(v).as_bytes()).into())
}

/// `sha256_json(v)`: SHA-256 of the canonical JSON of `v`.
pub fn sha256_json(v: &Value) -> Bytes32 {
    Bytes32::from_bytes(Sha256::digest(canonical_json(v).as_bytes()).into())
}

/// `sha256_utf8(s)`: SHA-256 of the UTF-8 bytes of `s`.
pub fn sha256_utf8(s: &str) -> Bytes32 {
    Bytes32::from_bytes(Sha256::digest(s.as_bytes()).into())
}

/// `sha256:`-prefixed SHA-256 of raw bytes (manifest and command hashes, stream digests).
pub fn sha256_digest(bytes: &[u8]) -> Sha256Digest {
    Sha256Digest::from_bytes(Sha256::digest(bytes).into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_by_utf8_bytes_recursively_and_keeps_array_order() {
        let v: Value = serde_json::from_str(
            r#"{"b":1,"a":{"z":[3,{"y":1,"x":2}],"B":null},"é":"ü","Z":true}"#,
        )
        .unwrap();
        assert_eq!(
            canonical_json(&v),
            r#"{"Z":true,"a":{"B":null,"z":[3,{"x":2,"y":1}]},"b":1,"é":"ü"}"#
        );
    }

    #[test]
    fn byte_order_differs_from_utf16_order() {
        // U+FF61 sorts after U+1F600 in UTF-16 code units but before it in UTF-8 bytes.
        let v = json!({"\u{1F600}": 1, "\u{FF61}": 2});
        assert_eq!(canonical_json(&v), "{\"\u{FF61}\":2,\"\u{1F600}\":1}");
    }

    #[test]
    fn escapes_like_serde_json() {
        let s = "q\"b\\n\nt\tc\u{1}\u{1f}\u{7f}é\u{2028}/";
        assert_eq!(canonical_json(&json!(s)), serde_json::to_string(s).unwrap());
        assert_eq!(
            canonical_json(&json!(s)),
            "\"q\\\"b\\\\n\\nt\\tc\\u0001\\u001f\u{7f}é\u{2028}/\""
        );
    }

    #[test]
    fn hash_primitives_match_known_digests() {
        // SHA-256("") and Keccak-256("{}") are fixed points any implementation must hit.
        assert_eq!(
            sha256_utf8("").to_string(),
            "0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            keccak_json(&json!({})).to_string(),
            format!("0x{}", hex::encode(<Keccak256 as Digest>::digest(b"{}")))
        );
        assert_eq!(
            sha256_json(&json!({"b": 1, "a": 2})),
            sha256_utf8("{\"a\":2,\"b\":1}")
        );
        // Keccak-256 of the empty string differs from NIST SHA3-256's.
        assert_eq!(
            Bytes32::from_bytes(Keccak256::digest(b"").into()).to_string(),
            "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
        );
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            "\\PC{0,8}".prop_map(Value::String),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("\\PC{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Re-serializes `v` with every object's keys in reverse-sorted order and with extra
    /// whitespace, so the text differs from the canonical one in both respects.
    fn scrambled_text(v: &Value) -> String {
        match v {
            Value::Array(items) => {
                format!(
                    "[ {} ]",
                    items
                        .iter()
                        .map(scrambled_text)
                        .collect::<Vec<_>>()
                        .join(" ,\n ")
                )
            }
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| b.0.as_bytes().cmp(a.0.as_bytes()));
                let parts: Vec<String> = entries
                    .into_iter()
                    .map(|(k, v)| {
                        format!(
                            "{} :\t{}",
                            serde_json::to_string(k).unwrap(),
                            scrambled_text(v)
                        )
                    })
                    .collect();
                format!("{{\n {} }}", parts.join(" , "))
            }
            other => format!(" {} ", serde_json::to_string(other).unwrap()),
        }
    }

    proptest! {
        #[test]
        fn canonical_is_independent_of_key_order_and_whitespace(v in arb_json()) {
            let text = scrambled_text(&v);
            let reparsed: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(canonical_json(&reparsed), canonical_json(&v));
            prop_assert_eq!(keccak_json(&reparsed), keccak_json(&v));
            // The canonical text parses back to the same value and is a fixed point.
            let canon: Value = serde_json::from_str(&canonical_json(&v)).unwrap();
            prop_assert_eq!(&canon, &v);
            prop_assert_eq!(canonical_json(&canon), canonical_json(&v));
        }

        #[test]
        fn string_escaping_matches_serde_json(s in any::<String>()) {
            prop_assert_eq!(canonical_json(&Value::String(s.clone())), serde_json::to_string(&s).unwrap());
        }

        #[test]
        fn different_values_hash_differently(a in arb_json(), b in arb_json()) {
            prop_assume!(a != b);
            prop_assert_ne!(canonical_json(&a), canonical_json(&b));
        }
    }
}
