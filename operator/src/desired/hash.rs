//! A hash of the settings pods run with, stable across Rust versions and platforms.
//!
//! It ends up in a pod-template annotation, so it must not change when the operator is
//! rebuilt (that would roll every pod on upgrade): `std`'s `DefaultHasher` makes no such
//! promise, so this is FNV-1a (64 bit) over the settings' JSON serialisation, whose field
//! order is fixed by the types and whose maps are ordered.

use serde::Serialize;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a, 64 bit.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET_BASIS, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(FNV_PRIME)
    })
}

/// The hash of some bytes as 16 lowercase hex digits.
pub fn hash_hex(bytes: &[u8]) -> String {
    format!("{:016x}", fnv1a64(bytes))
}

/// The hash of a value's JSON serialisation.
pub fn config_hash<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    Ok(hash_hex(&serde_json::to_vec(value)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Published FNV-1a 64 test vectors.
    #[test]
    fn matches_reference_vectors() {
        for (input, want) in [
            ("", 0xcbf2_9ce4_8422_2325),
            ("a", 0xaf63_dc4c_8601_ec8c),
            ("foobar", 0x8594_4171_f739_67e8),
        ] {
            assert_eq!(fnv1a64(input.as_bytes()), want, "{input:?}");
        }
    }

    #[test]
    fn hex_is_zero_padded() {
        assert_eq!(hash_hex(b"a"), "af63dc4c8601ec8c");
        assert_eq!(hash_hex(b"a").len(), 16);
    }
}
