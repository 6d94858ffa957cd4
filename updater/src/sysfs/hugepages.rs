//! Per-NUMA-node hugepage pools, and the Kubernetes resource name of each page size.
//!
//! The kernel keeps one directory per supported page size under
//! `node<N>/hugepages/hugepages-<size>kB/`, with the number of pages reserved on that
//! node in `nr_hugepages`. Every size present is reported, even with zero pages, so a
//! zone's resource list does not change shape when an admin reserves pages later.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use super::{SysfsError, read_file};

/// Binary suffixes from the largest down, with their power of two in KiB.
const KIB_SUFFIXES: [(&str, u32); 6] = [
    ("Ei", 50),
    ("Pi", 40),
    ("Ti", 30),
    ("Gi", 20),
    ("Mi", 10),
    ("Ki", 0),
];

/// The Kubernetes resource name for hugepages of `size_kib` KiB: `hugepages-` followed by
/// the size as a canonical binary quantity (2048 → `hugepages-2Mi`, 1048576 →
/// `hugepages-1Gi`, 64 → `hugepages-64Ki`). `None` for a size of zero.
pub fn hugepage_resource_name(size_kib: u64) -> Option<String> {
    if size_kib == 0 {
        return None;
    }
    // The canonical form uses the largest suffix that leaves a whole number; every size
    // is a whole number of KiB, so `Ki` always fits.
    KIB_SUFFIXES
        .iter()
        .find(|&&(_, shift)| size_kib.trailing_zeros() >= shift)
        .map(|&(suffix, shift)| format!("hugepages-{}{suffix}", size_kib >> shift))
}

/// The page size in KiB and the resource name of a pool directory, from the part of its
/// name after `hugepages-` (`2048kB` → `(2048, "hugepages-2Mi")`); `None` when it is not
/// a size in kB.
pub fn parse_pool_dir(size_text: &str) -> Option<(u64, String)> {
    let size = size_text
        .strip_suffix("kB")
        .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|digits| digits.parse::<u64>().ok())?;
    Some((size, hugepage_resource_name(size)?))
}

/// The bytes of a pool of `size_kib` KiB pages whose `nr_hugepages` file (at `nr_path`,
/// named in errors) holds `nr_text`.
pub fn parse_pool_bytes(nr_path: &Path, nr_text: &str, size_kib: u64) -> Result<u64, SysfsError> {
    let malformed = |reason: String| SysfsError::Malformed {
        path: nr_path.to_owned(),
        reason,
    };
    let pages: u64 = nr_text
        .trim()
        .parse()
        .map_err(|_| malformed(format!("expected a page count, found {:?}", nr_text.trim())))?;
    pages
        .checked_mul(size_kib)
        .and_then(|kib| kib.checked_mul(1024))
        .ok_or_else(|| {
            malformed(format!(
                "{pages} pages of {size_kib} kB overflow a byte count"
            ))
        })
}

/// Reads the hugepage pools of one node directory: resource name → total bytes.
/// A node without a `hugepages` directory (no hugepage support) has none.
pub(super) fn read_hugepages(node_dir: &Path) -> Result<BTreeMap<String, u64>, SysfsError> {
    let dir = node_dir.join("hugepages");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => return Err(SysfsError::Read { path: dir, source }),
    };
    let mut pools = BTreeMap::new();
    for entry in entries {
        let entry = entry.map_err(|source| SysfsError::Read {
            path: dir.clone(),
            source,
        })?;
        let file_name = entry.file_name();
        let Some(size_text) = file_name
            .to_str()
            .and_then(|name| name.strip_prefix("hugepages-"))
        else {
            continue; // not a page-size directory
        };
        let path = entry.path();
        let malformed = |reason: String| SysfsError::Malformed {
            path: path.clone(),
            reason,
        };
        let (size_kib, name) = parse_pool_dir(size_text)
            .ok_or_else(|| malformed("expected a directory named hugepages-<size>kB".into()))?;
        let nr_path = path.join("nr_hugepages");
        let nr_text = read_file(&nr_path)?;
        let bytes = parse_pool_bytes(&nr_path, &nr_text, size_kib)?;
        pools.insert(name, bytes);
    }
    Ok(pools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names_are_canonical_binary_quantities() {
        let cases = [
            (64, "hugepages-64Ki"),
            (1536, "hugepages-1536Ki"),
            (2048, "hugepages-2Mi"),
            (32 * 1024, "hugepages-32Mi"),
            (512 * 1024, "hugepages-512Mi"),
            (1024 * 1024, "hugepages-1Gi"),
            (16 * 1024 * 1024, "hugepages-16Gi"),
            (1 << 30, "hugepages-1Ti"),
        ];
        for (size_kib, want) in cases {
            assert_eq!(
                hugepage_resource_name(size_kib).as_deref(),
                Some(want),
                "{size_kib}"
            );
        }
        assert_eq!(hugepage_resource_name(0), None);
    }
}
