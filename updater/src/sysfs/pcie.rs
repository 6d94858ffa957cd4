//! The PCIe root complexes of each NUMA zone, for the zone attribute `pcieRoots`
//! (`tas_api::nrt::pcie_roots`): DRA drivers name a device's root
//! (`resource.kubernetes.io/pcieRoot`), the scheduler needs its zone.
//!
//! Under the sysfs root the kernel keeps one directory per root complex,
//! `devices/pci<domain>:<bus>` (the name drivers publish), holding a directory per PCI
//! function on its bus (`<domain>:<bus>:<device>.<function>`), each with `numa_node`:
//! the NUMA node of the root, `-1` when the firmware does not say. A root's zones are
//! the nodes its functions report.
//!
//! Nothing here fails a publish: an odd tree gives warnings and fewer roots.
//! - No `devices/pci*` directory (the host's PCI devices not mounted into the agent's
//!   container, or a machine without PCI): no roots, no warning.
//! - `numa_node` -1 everywhere under a root: on a machine with one NUMA node the
//!   root is in it; with several, the root is left out, with a warning.
//! - A node that is not online, a `numa_node` that is not a number, a file that
//!   cannot be read (a symlink loop, a permission): that function is skipped, with a
//!   warning.
//! - Functions of one root on different nodes: the root is listed on each.
//! - Symlinks are not followed when walking directories, and at most
//!   [`MAX_ENTRIES`] entries of a directory are looked at (a warning says when more
//!   were left).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;

use tas_api::nrt::pcie_roots::is_root_name;

use crate::bounded::{self, SYSFS_LIMIT};

/// Entries of one directory looked at, at most: `devices/` holds a few dozen, a root
/// a few hundred functions at the very most.
pub const MAX_ENTRIES: usize = 4096;

/// The roots per NUMA zone, and what looked odd on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PcieRoots {
    /// NUMA id → the roots attached to it.
    pub by_zone: BTreeMap<u32, BTreeSet<String>>,
    /// For a log line each; empty when all was as the kernel writes it.
    pub warnings: Vec<String>,
}

/// What one function's `numa_node` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NumaNode {
    /// A node id.
    Node(u32),
    /// `-1`: the firmware does not say.
    Unknown,
}

/// Parses a `numa_node` file: a node id or `-1`.
pub fn parse_numa_node(text: &str) -> Result<NumaNode, String> {
    let text = text.trim();
    if text == "-1" {
        return Ok(NumaNode::Unknown);
    }
    text.parse::<u32>().map(NumaNode::Node).map_err(|_| {
        format!(
            "{:?} is not a NUMA node id",
            text.chars().take(32).collect::<String>()
        )
    })
}

/// Whether `name` is a PCI function's directory: `<domain>:<bus>:<device>.<function>`
/// in lowercase hex (`0000:3a:00.0`).
pub fn is_function_name(name: &str) -> bool {
    let hex = |s: &str, len: std::ops::RangeInclusive<usize>| {
        len.contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let mut parts = name.split(':');
    let (Some(domain), Some(bus), Some(slot), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    slot.split_once('.').is_some_and(|(device, function)| {
        hex(domain, 4..=8) && hex(bus, 2..=2) && hex(device, 2..=2) && hex(function, 1..=1)
    })
}

/// Places one root from what its functions' `numa_node` files said: on each node
/// named that is online; when none is named, on the only online node if there is
/// one. Warnings go to `out`.
pub fn place_root(root: &str, readings: &[NumaNode], online: &BTreeSet<u32>, out: &mut PcieRoots) {
    let named: BTreeSet<u32> = readings
        .iter()
        .filter_map(|r| match r {
            NumaNode::Node(id) => Some(*id),
            NumaNode::Unknown => None,
        })
        .collect();
    let mut zones: BTreeSet<u32> = named.intersection(online).copied().collect();
    for offline in named.difference(online) {
        out.warnings.push(format!(
            "PCIe root {root}: a device reports NUMA node {offline}, which is not online"
        ));
    }
    if named.is_empty() && !readings.is_empty() {
        match online.iter().collect::<Vec<_>>()[..] {
            [only] => {
                zones.insert(*only);
            }
            _ => out.warnings.push(format!(
                "PCIe root {root}: its devices report no NUMA node (numa_node -1); devices under it get no zone"
            )),
        }
    }
    if zones.len() > 1 {
        out.warnings.push(format!(
            "PCIe root {root}: its devices report several NUMA nodes {zones:?}; listed on each"
        ));
    }
    for zone in zones {
        out.by_zone.entry(zone).or_default().insert(root.to_owned());
    }
}

/// Reads the roots under `sysfs_root` and places them on the `online` NUMA nodes.
pub fn read_pcie_roots(sysfs_root: &Path, online: &BTreeSet<u32>) -> PcieRoots {
    let mut out = PcieRoots::default();
    let devices = sysfs_root.join("devices");
    for root in directories(&devices, &mut out.warnings)
        .into_iter()
        .filter(|name| is_root_name(name))
    {
        let root_dir = devices.join(&root);
        let mut readings = Vec::new();
        for function in directories(&root_dir, &mut out.warnings)
            .into_iter()
            .filter(|name| is_function_name(name))
        {
            let path = root_dir.join(&function).join("numa_node");
            let read = bounded::read_file(&path, SYSFS_LIMIT);
            match read
                .map_err(|e| e.to_string())
                .and_then(|t| parse_numa_node(&t))
            {
                Ok(reading) => readings.push(reading),
                Err(reason) => out
                    .warnings
                    .push(format!("{}: {reason}; device skipped", path.display())),
            }
        }
        place_root(&root, &readings, online, &mut out);
    }
    out
}

/// The names of the real directories (not symlinks) in `dir`, sorted; none when it
/// does not exist. A directory that cannot be read, or holds more than
/// [`MAX_ENTRIES`] entries, is a warning.
fn directories(dir: &Path, warnings: &mut Vec<String>) -> Vec<String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            warnings.push(format!("cannot list {}: {e}", dir.display()));
            return Vec::new();
        }
    };
    let mut names = Vec::new();
    for (i, entry) in entries.enumerate() {
        if i == MAX_ENTRIES {
            warnings.push(format!(
                "{}: more than {MAX_ENTRIES} entries; the rest not looked at",
                dir.display()
            ));
            break;
        }
        let Ok(entry) = entry else {
            continue;
        };
        // `file_type` does not follow symlinks: a link (or a loop of them) is skipped.
        if entry.file_type().is_ok_and(|t| t.is_dir())
            && let Some(name) = entry.file_name().to_str()
        {
            names.push(name.to_owned());
        }
    }
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::PathBuf;

    use tempfile::TempDir;

    use super::*;

    /// A fake sysfs root with `devices/`.
    struct Fake(TempDir);

    impl Fake {
        fn new() -> Self {
            let fake = Self(TempDir::new().unwrap());
            fs::create_dir_all(fake.devices().join("system/node")).unwrap();
            fake
        }

        fn devices(&self) -> PathBuf {
            self.0.path().join("devices")
        }

        /// A function under `root` whose `numa_node` holds `numa` (`None`: no file).
        fn function(&self, root: &str, function: &str, numa: Option<&str>) {
            let dir = self.devices().join(root).join(function);
            fs::create_dir_all(&dir).unwrap();
            if let Some(numa) = numa {
                fs::write(dir.join("numa_node"), format!("{numa}\n")).unwrap();
            }
        }

        fn read(&self, online: &[u32]) -> PcieRoots {
            read_pcie_roots(self.0.path(), &online.iter().copied().collect())
        }
    }

    fn zones(pairs: &[(u32, &[&str])]) -> BTreeMap<u32, BTreeSet<String>> {
        pairs
            .iter()
            .map(|(id, roots)| (*id, roots.iter().map(|r| r.to_string()).collect()))
            .collect()
    }

    /// `roots` places no root and its first warning says `text`.
    #[track_caller]
    fn nothing_placed_but_warned(roots: &PcieRoots, text: &str) {
        assert!(roots.by_zone.is_empty(), "{:?}", roots.by_zone);
        let first = roots.warnings.first();
        assert!(
            first.is_some_and(|w| w.contains(text)),
            "{:?}",
            roots.warnings
        );
    }

    #[test]
    fn roots_go_to_the_zones_their_devices_report() {
        let fake = Fake::new();
        fake.function("pci0000:00", "0000:00:00.0", Some("0"));
        fake.function("pci0000:00", "0000:00:1f.2", Some("0"));
        fake.function("pci0000:80", "0000:80:01.0", Some("1"));
        fake.function("pci0000:80", "0000:81:00.0", Some("1"));
        // Not functions, not roots, a root without devices: nothing to say.
        fs::create_dir_all(fake.devices().join("pci0000:80/pci_bus/0000:80")).unwrap();
        fs::create_dir_all(fake.devices().join("pci0000:c0")).unwrap();
        fake.function("platform", "0000:90:00.0", Some("1"));
        let roots = fake.read(&[0, 1]);
        assert_eq!(
            roots.by_zone,
            zones(&[(0, &["pci0000:00"]), (1, &["pci0000:80"])])
        );
        assert!(roots.warnings.is_empty(), "{:?}", roots.warnings);
    }

    #[test]
    fn no_pci_devices_in_view_is_no_roots_and_no_warning() {
        let empty = TempDir::new().unwrap();
        let roots = read_pcie_roots(empty.path(), &BTreeSet::from([0]));
        assert_eq!(roots, PcieRoots::default());
        assert_eq!(Fake::new().read(&[0, 1]), PcieRoots::default());
    }

    #[test]
    fn an_unknown_node_is_the_only_zone_or_a_warning() {
        let fake = Fake::new();
        fake.function("pci0000:00", "0000:00:00.0", Some("-1"));
        let one = fake.read(&[0]);
        assert_eq!(one.by_zone, zones(&[(0, &["pci0000:00"])]));
        assert!(one.warnings.is_empty());
        nothing_placed_but_warned(&fake.read(&[0, 1]), "numa_node -1");
    }

    #[test]
    fn odd_files_are_warnings_and_the_rest_still_counts() {
        let fake = Fake::new();
        fake.function("pci0000:00", "0000:00:00.0", Some("0"));
        fake.function("pci0000:00", "0000:00:01.0", Some("zero"));
        fake.function("pci0000:00", "0000:00:02.0", None);
        fake.function("pci0000:40", "0000:40:00.0", Some("7"));
        fake.function("pci0000:17", "0000:17:00.0", Some("0"));
        fake.function("pci0000:17", "0000:17:01.0", Some("1"));
        let roots = fake.read(&[0, 1]);
        assert_eq!(
            roots.by_zone,
            zones(&[(0, &["pci0000:00", "pci0000:17"]), (1, &["pci0000:17"])])
        );
        let said = roots.warnings.join("\n");
        for expected in [
            "0000:00:01.0/numa_node: \"zero\" is not a NUMA node id",
            "0000:00:02.0/numa_node",
            "pci0000:40: a device reports NUMA node 7, which is not online",
            "pci0000:17: its devices report several NUMA nodes",
        ] {
            assert!(said.contains(expected), "{expected} in {said}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_not_followed_and_loops_are_warnings() {
        use std::os::unix::fs::symlink;
        let fake = Fake::new();
        fake.function("pci0000:00", "0000:00:00.0", Some("0"));
        // A root that is a link to another root, and a function that links back up.
        symlink(
            fake.devices().join("pci0000:00"),
            fake.devices().join("pci0000:01"),
        )
        .unwrap();
        symlink(
            fake.devices().join("pci0000:00"),
            fake.devices().join("pci0000:00/0000:00:00.1"),
        )
        .unwrap();
        // A numa_node that is a symlink loop.
        let looped = fake.devices().join("pci0000:00/0000:00:03.0");
        fs::create_dir_all(&looped).unwrap();
        symlink(looped.join("numa_node"), looped.join("numa_node")).unwrap();
        let roots = fake.read(&[0, 1]);
        assert_eq!(roots.by_zone, zones(&[(0, &["pci0000:00"])]));
        assert_eq!(roots.warnings.len(), 1, "{:?}", roots.warnings);
        assert!(roots.warnings[0].contains("0000:00:03.0/numa_node"));
    }

    #[test]
    fn a_huge_directory_is_cut_short_with_a_warning() {
        let fake = Fake::new();
        for i in 0..=MAX_ENTRIES {
            fs::create_dir(fake.devices().join(format!("virtual-{i}"))).unwrap();
        }
        nothing_placed_but_warned(&fake.read(&[0]), "more than 4096 entries");
    }

    #[test]
    fn names_are_the_kernels() {
        assert!(is_function_name("0000:3a:00.0"));
        assert!(is_function_name("10000:e1:1f.7"));
        for bad in [
            "0000:3a:00",
            "0000:3a:00.00",
            "0000:3A:00.0",
            "pci0000:00",
            "0000:3a:00.0:1",
        ] {
            assert!(!is_function_name(bad), "{bad}");
        }
        assert_eq!(parse_numa_node("1\n"), Ok(NumaNode::Node(1)));
        assert_eq!(parse_numa_node("-1\n"), Ok(NumaNode::Unknown));
        assert!(parse_numa_node("-2").is_err());
        assert!(parse_numa_node("").is_err());
    }
}
