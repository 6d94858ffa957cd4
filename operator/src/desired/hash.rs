//! A hash of the settings pods run with, stable across Rust versions and platforms.
//!
//! It ends up in a pod-template annotation, so it must not change when the operator is
//! rebuilt (that would roll every pod on upgrade): it is FNV-1a ([`tas_api::hash`]) over
//! the settings' JSON serialisation, whose field order is fixed by the types and whose
//! maps are ordered.

use serde::Serialize;
use tas_api::hash::fnv1a64_hex;

/// The hash of a value's JSON serialisation, as 16 lowercase hex digits.
pub fn config_hash<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    Ok(fnv1a64_hex(&serde_json::to_vec(value)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash of the JSON text, so annotations written by earlier builds still match.
    #[test]
    fn hashes_the_json_text() {
        assert_eq!(config_hash(&"a").unwrap(), fnv1a64_hex(b"\"a\""));
        assert_eq!(config_hash(&("x", 1)).unwrap(), fnv1a64_hex(b"[\"x\",1]"));
    }
}
