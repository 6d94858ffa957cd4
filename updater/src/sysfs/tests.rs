//! [`discover`] against fake sysfs trees built in temporary directories.

use std::fs;

use tempfile::TempDir;

use super::*;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// A fake sysfs root holding `devices/system/node/`.
struct FakeSysfs {
    root: TempDir,
}

impl FakeSysfs {
    /// A tree whose `online` file holds `online`.
    fn new(online: &str) -> Self {
        let fake = Self {
            root: TempDir::new().unwrap(),
        };
        fake.write("online", online);
        fake
    }

    /// Writes `content` at `relative` under the node directory, creating parents.
    fn write(&self, relative: &str, content: &str) {
        let path = self.node_dir().join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    /// A node with the files the kernel writes; `mem_kib: None` leaves out `meminfo`.
    fn node(&self, id: u32, cpulist: &str, mem_kib: Option<u64>, distance: &str) {
        self.write(&format!("node{id}/cpulist"), &format!("{cpulist}\n"));
        if let Some(kib) = mem_kib {
            self.write(
                &format!("node{id}/meminfo"),
                &format!("Node {id} MemTotal:       {kib} kB\nNode {id} MemFree:        1024 kB\n"),
            );
        }
        self.write(&format!("node{id}/distance"), &format!("{distance}\n"));
    }

    fn hugepages(&self, node: u32, size_kib: u64, pages: u64) {
        self.write(
            &format!("node{node}/hugepages/hugepages-{size_kib}kB/nr_hugepages"),
            &format!("{pages}\n"),
        );
    }

    fn node_dir(&self) -> PathBuf {
        self.root.path().join(NODE_DIR)
    }

    fn discover(&self) -> Result<Topology, SysfsError> {
        discover(self.root.path())
    }
}

fn cpus(list: &str) -> BTreeSet<u32> {
    parse_cpulist(list).unwrap()
}

fn distances(pairs: &[(u32, u32)]) -> BTreeMap<u32, u32> {
    pairs.iter().copied().collect()
}

#[test]
fn two_zones() {
    let fake = FakeSysfs::new("0-1\n");
    fake.node(0, "0-3,8-11", Some(32 * 1024 * 1024), "10 21");
    fake.node(1, "4-7,12-15", Some(16 * 1024 * 1024), "21 10");

    let topology = fake.discover().unwrap();
    assert_eq!(
        topology,
        Topology {
            zones: vec![
                Zone {
                    id: 0,
                    cpus: cpus("0-3,8-11"),
                    memory_bytes: 32 * GIB,
                    hugepages: BTreeMap::new(),
                    distances: distances(&[(0, 10), (1, 21)]),
                },
                Zone {
                    id: 1,
                    cpus: cpus("4-7,12-15"),
                    memory_bytes: 16 * GIB,
                    hugepages: BTreeMap::new(),
                    distances: distances(&[(0, 21), (1, 10)]),
                },
            ]
        }
    );
    assert_eq!(topology.zone_of_cpu(9), Some(0));
    assert_eq!(topology.zone_of_cpu(12), Some(1));
    assert_eq!(topology.zone_of_cpu(16), None);
    assert_eq!(topology.zone(1).map(|zone| zone.cpus.len()), Some(8));
    assert_eq!(topology.zone(2), None);
}

#[test]
fn sparse_ids_map_distance_columns_to_online_nodes() {
    // Nodes 2 and 3 are offline: their directories exist but must not become zones, and
    // each distance row has one entry per online node (0, 1, 4, 5).
    let fake = FakeSysfs::new("0-1,4-5\n");
    fake.node(0, "0-1", Some(1024), "10 11 20 21");
    fake.node(1, "2-3", Some(1024), "11 10 21 20");
    fake.node(2, "", None, "10");
    fake.node(4, "4-5", Some(1024), "20 21 10 11");
    fake.node(5, "6-7", Some(1024), "21 20 11 10");

    let topology = fake.discover().unwrap();
    let ids: Vec<u32> = topology.zones.iter().map(|zone| zone.id).collect();
    assert_eq!(ids, [0, 1, 4, 5]);
    assert_eq!(
        topology.zone(4).unwrap().distances,
        distances(&[(0, 20), (1, 21), (4, 10), (5, 11)])
    );
    assert_eq!(
        topology.zone(1).unwrap().distances,
        distances(&[(0, 11), (1, 10), (4, 21), (5, 20)])
    );
    assert_eq!(topology.zone_of_cpu(7), Some(5));
}

#[test]
fn memory_less_and_cpu_less_zones() {
    let fake = FakeSysfs::new("0-2");
    fake.node(0, "0-3", Some(8 * 1024 * 1024), "10 20 20");
    // A memory-less node: no meminfo at all.
    fake.node(1, "4-7", None, "20 10 20");
    // A CPU-less node (e.g. CXL memory): empty cpulist.
    fake.node(2, "", Some(4 * 1024 * 1024), "20 20 10");

    let topology = fake.discover().unwrap();
    let summary: Vec<(u32, usize, u64)> = topology
        .zones
        .iter()
        .map(|zone| (zone.id, zone.cpus.len(), zone.memory_bytes))
        .collect();
    assert_eq!(summary, [(0, 4, 8 * GIB), (1, 4, 0), (2, 0, 4 * GIB)]);

    // meminfo present but without MemTotal, or with 0, is memory-less too.
    fake.write("node1/meminfo", "Node 1 MemFree: 0 kB\n");
    assert_eq!(fake.discover().unwrap().zones[1].memory_bytes, 0);
    fake.write("node1/meminfo", "Node 1 MemTotal: 0 kB\n");
    assert_eq!(fake.discover().unwrap().zones[1].memory_bytes, 0);
}

#[test]
fn hugepages_of_every_size_present() {
    let fake = FakeSysfs::new("0-1");
    fake.node(0, "0-1", Some(1024 * 1024), "10 20");
    fake.node(1, "2-3", Some(1024 * 1024), "20 10");
    fake.hugepages(0, 2048, 512);
    fake.hugepages(0, 1024 * 1024, 2);
    fake.hugepages(1, 2048, 0);
    fake.hugepages(1, 1024 * 1024, 4);
    // Unrelated entries next to the size directories are not pools.
    fake.write("node1/hugepages/README", "not a pool");

    let topology = fake.discover().unwrap();
    let pools = |id: u32| topology.zone(id).unwrap().hugepages.clone();
    assert_eq!(
        pools(0),
        BTreeMap::from([
            ("hugepages-1Gi".to_owned(), 2 * GIB),
            ("hugepages-2Mi".to_owned(), 1024 * MIB),
        ])
    );
    assert_eq!(
        pools(1),
        BTreeMap::from([
            ("hugepages-1Gi".to_owned(), 4 * GIB),
            ("hugepages-2Mi".to_owned(), 0),
        ])
    );
}

#[test]
fn missing_online_file_is_a_clear_error() {
    let root = TempDir::new().unwrap();
    let err = discover(root.path()).unwrap_err();
    assert!(
        matches!(&err, SysfsError::NodeListMissing { path } if path.ends_with("devices/system/node/online")),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("devices/system/node/online"), "{message}");
    assert!(message.contains("sysfs root"), "{message}");
}

/// Builds a valid two-node tree, breaks it with `corrupt`, and checks the error names
/// the file (path suffix) and says what is wrong.
fn assert_broken(corrupt: impl FnOnce(&FakeSysfs), file: &str, reason: &str) {
    let fake = FakeSysfs::new("0-1");
    fake.node(0, "0-1", Some(1024), "10 20");
    fake.node(1, "2-3", Some(1024), "20 10");
    corrupt(&fake);
    let err = fake.discover().unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&format!("devices/system/node/{file}")),
        "{file}: {message}"
    );
    assert!(message.contains(reason), "{file}: {message}");
}

#[test]
fn malformed_files_are_errors_naming_the_file() {
    assert_broken(
        |fake| fake.write("node1/cpulist", "3-1\n"),
        "node1/cpulist",
        "ends before it starts",
    );
    assert_broken(
        |fake| fake.write("node0/cpulist", "zero\n"),
        "node0/cpulist",
        "not a decimal id",
    );
    // Valid, but past the size bound: trailing blanks pad it.
    let padded = format!("2-3{}\n", " ".repeat(70_000));
    assert_broken(
        |fake| fake.write("node1/cpulist", &padded),
        "node1/cpulist",
        "65536-byte limit",
    );
    assert_broken(|fake| fake.write("online", "0-\n"), "online", "empty item");
    assert_broken(
        |fake| fake.write("online", "\n"),
        "online",
        "no NUMA node is online",
    );
    assert_broken(
        |fake| fs::remove_file(fake.node_dir().join("node1/cpulist")).unwrap(),
        "node1/cpulist",
        "cannot read",
    );
    assert_broken(
        |fake| fake.write("node0/meminfo", "Node 0 MemTotal: lots kB\n"),
        "node0/meminfo",
        "expected an amount",
    );
    assert_broken(
        |fake| fake.write("node0/meminfo", "Node 0 MemTotal: 12 MB\n"),
        "node0/meminfo",
        "unknown unit",
    );
    assert_broken(
        |fake| {
            fake.write(
                "node0/meminfo",
                "Node 0 MemTotal: 18446744073709551615 kB\n",
            )
        },
        "node0/meminfo",
        "overflows",
    );
    assert_broken(
        |fake| fake.write("node0/distance", "10\n"),
        "node0/distance",
        "1 distances for 2 online nodes",
    );
    assert_broken(
        |fake| fake.write("node1/distance", "20 ten\n"),
        "node1/distance",
        "\"ten\" is not a distance",
    );
    assert_broken(
        |fake| fake.hugepages(0, 2048, u64::MAX),
        "node0/hugepages/hugepages-2048kB/nr_hugepages",
        "overflow",
    );
    assert_broken(
        |fake| fake.write("node0/hugepages/hugepages-2048kB/nr_hugepages", "many\n"),
        "node0/hugepages/hugepages-2048kB/nr_hugepages",
        "expected a page count",
    );
    assert_broken(
        |fake| fake.write("node0/hugepages/hugepages-2MB/nr_hugepages", "1\n"),
        "node0/hugepages/hugepages-2MB",
        "hugepages-<size>kB",
    );
    assert_broken(
        |fake| fs::create_dir_all(fake.node_dir().join("node0/hugepages/hugepages-0kB")).unwrap(),
        "node0/hugepages/hugepages-0kB",
        "hugepages-<size>kB",
    );
    assert_broken(
        |fake| {
            fs::create_dir_all(fake.node_dir().join("node1/hugepages/hugepages-2048kB")).unwrap()
        },
        "node1/hugepages/hugepages-2048kB/nr_hugepages",
        "cannot read",
    );
}

#[test]
fn missing_distance_leaves_zone_without_costs() {
    let fake = FakeSysfs::new("0");
    fake.node(0, "0-1", Some(1024), "10");
    fs::remove_file(fake.node_dir().join("node0/distance")).unwrap();
    assert_eq!(fake.discover().unwrap().zones[0].distances, BTreeMap::new());
}
