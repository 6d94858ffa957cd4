//! [`ZoneTable`]: a per-node working copy of a zone-major amount table (free amounts a
//! fit counts down as it places containers), kept on the stack for the usual sizes so
//! judging a node allocates nothing.

use std::ops::{Deref, DerefMut};

/// Amounts held inline: 8 zones × 6 resources, or any other product up to this.
const INLINE: usize = 48;

/// A copy of a `[zone * resources + resource]` table; see the module documentation.
#[derive(Clone)]
// The large inline variant is the point: the usual table lives on the stack.
#[allow(clippy::large_enum_variant)]
pub(crate) enum ZoneTable {
    /// Up to [`INLINE`] amounts.
    Inline { amounts: [i64; INLINE], len: usize },
    /// Larger tables.
    Heap(Vec<i64>),
}

impl ZoneTable {
    /// A copy of `table`.
    pub(crate) fn copy_of(table: &[i64]) -> Self {
        if table.len() <= INLINE {
            let mut amounts = [0; INLINE];
            amounts[..table.len()].copy_from_slice(table);
            Self::Inline {
                amounts,
                len: table.len(),
            }
        } else {
            Self::Heap(table.to_vec())
        }
    }
}

impl Deref for ZoneTable {
    type Target = [i64];

    fn deref(&self) -> &[i64] {
        match self {
            Self::Inline { amounts, len } => &amounts[..*len],
            Self::Heap(v) => v,
        }
    }
}

impl DerefMut for ZoneTable {
    fn deref_mut(&mut self) -> &mut [i64] {
        match self {
            Self::Inline { amounts, len } => &mut amounts[..*len],
            Self::Heap(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_small_and_large_tables_alike() {
        for n in [0, 12, INLINE, INLINE + 1, 200] {
            let source: Vec<i64> = (0..n as i64).collect();
            let mut copy = ZoneTable::copy_of(&source);
            assert_eq!(&*copy, source.as_slice());
            if n > 0 {
                copy[n - 1] = -1;
                assert_eq!(copy[n - 1], -1);
                assert_eq!(source[n - 1], n as i64 - 1);
            }
        }
    }
}
