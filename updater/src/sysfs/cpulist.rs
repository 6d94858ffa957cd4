//! The kernel's list format for sets of CPU or NUMA node ids (`0-3,8-11`).
//!
//! sysfs writes CPU and node sets this way (`cpulist`, `online`), and the kubelet's
//! `reservedSystemCPUs` uses the same syntax. Items are separated by commas; an item
//! is an id or an inclusive range `first-last`. Whitespace around items is tolerated
//! (files end with a newline, humans write `0, 1`); anything else is an error, so a
//! typo never silently shrinks or grows a set.

use std::collections::BTreeSet;

/// Largest id accepted. Linux supports at most 8192 CPUs and 1024 NUMA nodes; the cap
/// keeps a corrupt `0-4294967295` from building a set of four billion entries.
pub const MAX_ID: u32 = 65_535;

/// Longest slice of a bad list repeated in an error message.
const MAX_SHOWN_CHARS: usize = 64;

/// A string that is not a valid CPU (or node) list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cpu list {input:?}: {reason}")]
pub struct CpuListError {
    /// The offending list (cut short when very long).
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

impl CpuListError {
    fn new(input: &str, reason: String) -> Self {
        let input = match input.char_indices().nth(MAX_SHOWN_CHARS) {
            Some((end, _)) => format!("{}...", &input[..end]),
            None => input.to_owned(),
        };
        Self { input, reason }
    }
}

/// Parses a list such as `0-3,8-11` into its ids. An empty (or all-whitespace) list is
/// the empty set: a CPU-less NUMA node has an empty `cpulist`.
pub fn parse_cpulist(input: &str) -> Result<BTreeSet<u32>, CpuListError> {
    let trimmed = input.trim();
    let mut ranges = Vec::new();
    if trimmed.is_empty() {
        return Ok(BTreeSet::new());
    }
    for item in trimmed.split(',').map(str::trim) {
        let (first, last) = match item.split_once('-') {
            Some((first, last)) => (parse_id(input, first)?, parse_id(input, last)?),
            None => {
                let id = parse_id(input, item)?;
                (id, id)
            }
        };
        if first > last {
            return Err(CpuListError::new(
                input,
                format!("range {item:?} ends before it starts"),
            ));
        }
        ranges.push((first, last));
    }
    // Each id is inserted once however the ranges overlap: inserting every range as
    // written made a few kilobytes repeating `0-65535` cost hundreds of millions of
    // insertions (found with the `sysfs` fuzz target).
    ranges.sort_unstable();
    let mut ids = BTreeSet::new();
    let mut next = 0; // every id below `next` a range covers is in `ids`
    for (first, last) in ranges {
        let start = first.max(next);
        if start <= last {
            ids.extend(start..=last);
            next = last + 1; // last <= MAX_ID, far below u32::MAX
        }
    }
    Ok(ids)
}

/// Formats ids back into the shortest list, e.g. `{0,1,2,3,8}` → `0-3,8`.
pub fn format_cpulist(ids: &BTreeSet<u32>) -> String {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for &id in ids {
        match ranges.last_mut() {
            Some((_, last)) if last.checked_add(1) == Some(id) => *last = id,
            _ => ranges.push((id, id)),
        }
    }
    ranges
        .iter()
        .map(|&(first, last)| {
            if first == last {
                first.to_string()
            } else {
                format!("{first}-{last}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// One id of a list: decimal digits only (`u32::from_str` would also take `+1`).
fn parse_id(input: &str, text: &str) -> Result<u32, CpuListError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(CpuListError::new(input, "empty item or range end".into()));
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CpuListError::new(
            input,
            format!("{text:?} is not a decimal id"),
        ));
    }
    match text.parse::<u32>() {
        Ok(id) if id <= MAX_ID => Ok(id),
        _ => Err(CpuListError::new(
            input,
            format!("id {text} is above the supported maximum {MAX_ID}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(ids: &[u32]) -> BTreeSet<u32> {
        ids.iter().copied().collect()
    }

    #[test]
    fn parses_kernel_lists() {
        let cases: &[(&str, &[u32])] = &[
            ("", &[]),
            ("\n", &[]),
            ("0", &[0]),
            ("0\n", &[0]),
            ("0-1", &[0, 1]),
            ("0,2", &[0, 2]),
            ("0-3,8-11\n", &[0, 1, 2, 3, 8, 9, 10, 11]),
            ("5-5", &[5]),
            ("0, 2-3", &[0, 2, 3]),
            ("3,1,1", &[1, 3]),
        ];
        for &(input, want) in cases {
            assert_eq!(parse_cpulist(input), Ok(set(want)), "{input:?}");
        }
    }

    #[test]
    fn rejects_garbage_naming_input_and_reason() {
        let cases = [
            ("3-1", "ends before it starts"),
            ("a", "not a decimal id"),
            ("1-", "empty item"),
            ("-1", "empty item"),
            ("0,,1", "empty item"),
            ("0,", "empty item"),
            ("+1", "not a decimal id"),
            ("1-2-3", "not a decimal id"),
            ("0-7:2", "not a decimal id"),
            ("0-4294967295", "above the supported maximum"),
            ("99999999999999999999", "above the supported maximum"),
        ];
        for (input, reason) in cases {
            let err = parse_cpulist(input).unwrap_err();
            assert_eq!(err.input, input);
            assert!(err.reason.contains(reason), "{input:?}: {err}");
            assert!(err.to_string().contains(&format!("{input:?}")), "{err}");
        }
    }

    #[test]
    fn long_bad_lists_are_cut_short_in_errors() {
        let input = format!("{}x", "0,".repeat(100));
        let err = parse_cpulist(&input).unwrap_err();
        assert!(err.input.len() < 80, "{}", err.input);
        assert!(err.input.ends_with("..."));
    }

    #[test]
    fn formats_shortest_list() {
        assert_eq!(format_cpulist(&set(&[])), "");
        assert_eq!(format_cpulist(&set(&[0, 1, 2, 3, 8])), "0-3,8");
        assert_eq!(format_cpulist(&set(&[1, 3, 5])), "1,3,5");
    }

    #[test]
    fn overlapping_ranges_cost_one_insertion_per_id() {
        // The `sysfs` fuzz target's slow input, grown: before the fix every item inserted
        // its 65,536 ids again, and this list ran for minutes.
        let input = "0-65535,".repeat(20_000) + "7";
        assert_eq!(parse_cpulist(&input), Ok((0..=MAX_ID).collect()));
        assert_eq!(
            parse_cpulist("8-11,0-3,2-9,20"),
            Ok(set(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 20]))
        );
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(ids in proptest::collection::btree_set(0..=MAX_ID, 0..64)) {
            prop_assert_eq!(parse_cpulist(&format_cpulist(&ids)), Ok(ids));
        }
    }
}
