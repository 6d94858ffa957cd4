//! FNV-1a (64 bit): a hash whose output is fixed by its definition, not by a Rust
//! version or a platform.
//!
//! Two components keep its values: the operator writes it into pod-template
//! annotations (a different value would roll every operand pod on upgrade), and the
//! scheduler breaks ties between equally good nodes with it (a different value would
//! move pods to other nodes). `std`'s `DefaultHasher` promises neither, hence this.

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over bytes fed in any number of pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv1a64(u64);

impl Default for Fnv1a64 {
    fn default() -> Self {
        Self::new()
    }
}

impl Fnv1a64 {
    /// The hash of nothing yet.
    pub const fn new() -> Self {
        Self(OFFSET_BASIS)
    }

    /// Feeds `bytes`.
    #[must_use]
    pub fn write(self, bytes: &[u8]) -> Self {
        Self(
            bytes
                .iter()
                .fold(self.0, |hash, b| (hash ^ u64::from(*b)).wrapping_mul(PRIME)),
        )
    }

    /// The hash of everything fed so far.
    pub const fn finish(self) -> u64 {
        self.0
    }
}

/// FNV-1a (64 bit) of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    Fnv1a64::new().write(bytes).finish()
}

/// [`fnv1a64`] as 16 lowercase hex digits.
pub fn fnv1a64_hex(bytes: &[u8]) -> String {
    format!("{:016x}", fnv1a64(bytes))
}

/// FNV-1a (64 bit) of `a`, a zero byte, then `b`: the separator keeps `("ab", "c")` and
/// `("a", "bc")` apart.
pub fn fnv1a64_pair(a: &[u8], b: &[u8]) -> u64 {
    Fnv1a64::new().write(a).write(&[0]).write(b).finish()
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
        assert_eq!(fnv1a64_hex(b"a"), "af63dc4c8601ec8c");
        assert_eq!(fnv1a64_hex(b"a").len(), 16);
    }

    /// The scheduler's tie-break values: a change here moves pods between nodes.
    #[test]
    fn pairs_are_separated_by_a_zero_byte() {
        assert_eq!(fnv1a64_pair(b"uid-1", b"node-a"), 0xcce7_af86_b6af_25ff);
        assert_eq!(fnv1a64_pair(b"uid-1", b"node-a"), fnv1a64(b"uid-1\0node-a"));
        assert_eq!(fnv1a64_pair(b"ab", b"c"), 0xfd61_c083_ef20_0867);
        assert_eq!(fnv1a64_pair(b"a", b"bc"), 0xab40_f682_0d40_b523);
    }

    #[test]
    fn pieces_hash_like_the_whole() {
        let pieces = Fnv1a64::default().write(b"foo").write(b"").write(b"bar");
        assert_eq!(pieces.finish(), fnv1a64(b"foobar"));
    }
}
