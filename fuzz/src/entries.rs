//! One function per fuzz target: the fuzzer's bytes in, one parser of untrusted input
//! run the way the product runs it. None of them may panic, overflow, hang or allocate
//! without bound on any input; the few `assert!`s check properties the product relies on
//! (what a formatter writes parses back, an accepted object has consistent amounts).
//!
//! Inputs made of several texts (a kubelet config and its drop-ins, the files of a sysfs
//! node) separate them with NUL bytes, which none of those formats holds; the
//! podresources input is a little-endian `u16` length, then one protobuf message of that
//! length, then another.
//!
//! This file is compiled by the `tas-fuzz` package (nightly, libFuzzer) and by the
//! workspace's corpus replay test (`e2e/tests/fuzz_corpus.rs`, stable), so it names
//! only crates both depend on.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use prost::Message;
use serde_json::{Value, json};
use tas_api::fingerprint::Method;
use tas_api::labels::Selector;
use tas_api::nrt::pcie_roots;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::nrt::{NrtQuantity, TopologyManagerPolicy, TopologyManagerScope};
use tas_api::{duration, quantity};
use tas_scheduler::debug::{self, DECISIONS_PATH};
use tas_scheduler::decisions::{DecisionLog, DecisionOutcome, DecisionRecord};
use tas_scheduler::dra::{self, AllocationInput, NodeDevices, SelectorCache, ZoneRule};
use tas_scheduler::numa::{NodeTopology, PodRequest};
use tas_updater::accounting::{self, AccountingOptions};
use tas_updater::kubelet_config::KubeletConfig;
use tas_updater::kubelet_source::{Overrides, configz, document};
use tas_updater::nrt_object::{self, NodeRef, Observed};
use tas_updater::podresources::v1;
use tas_updater::pods_fingerprint::FingerprintPolicy;
use tas_updater::sysfs::{self, NodeFiles, Topology, Zone};

/// A target's entry point: the fuzzer's bytes in, a panic only on a bug.
pub type Entry = fn(&[u8]);

/// Every target, by name: the directory of its corpus under `fuzz/corpus/` and its entry.
pub const TARGETS: [(&str, Entry); 11] = [
    ("nrt", nrt),
    ("pod_request", pod_request),
    ("kubelet_config", kubelet_config),
    ("sysfs", sysfs),
    ("quantity", quantity),
    ("duration", duration),
    ("bearer", bearer),
    ("podresources", podresources),
    ("label_selector", label_selector),
    ("dra_selector", dra_selector),
    ("decisions_query", decisions_query),
];

/// A NodeResourceTopology object as the scheduler's watch receives it (JSON): its
/// zones' PCIe roots read, then through its sanity check and into its topology view; an accepted view then has the fixed
/// pods of [`pods`] fitted onto it.
pub fn nrt(data: &[u8]) {
    let Ok(nrt) = serde_json::from_slice::<NodeResourceTopology>(data) else {
        return;
    };
    // The PCIe roots of the zones, as the DRA allocator takes them.
    let _ = pcie_roots::pcie_root_zones(&nrt);
    let Ok(node) = NodeTopology::from_nrt(&nrt) else {
        return;
    };
    for &zone in node.numa_ids() {
        for resource in node.resource_names() {
            let amounts = (
                node.available(zone, resource),
                node.allocatable(zone, resource),
                node.capacity(zone, resource),
            );
            if let (Some(available), Some(allocatable), Some(capacity)) = amounts {
                // What the sanity check promises the filter.
                assert!(
                    available <= allocatable && allocatable <= capacity,
                    "zone {zone} {resource}: {amounts:?}"
                );
            }
        }
        for &to in node.numa_ids() {
            let _ = node.distance(zone, to);
        }
    }
    for pod in pods() {
        let _ = tas_scheduler::numa::fit(&node, pod, &|_| false);
        // init containers' holdings predicted and held back, then given back.
        let held = tas_scheduler::numa::init_holdings::predict(&node, pod);
        let mut with = node.clone();
        tas_scheduler::numa::init_holdings::hold(&mut with, &held);
        tas_scheduler::numa::init_holdings::release(&mut with, &held);
        assert_eq!(with, node, "holding and releasing is a no-op");
    }
    // The containers' NUMA placement, decoded against sets of every size up to the
    // declared one (the reader's set is the writer's only by count and hashes).
    if let Some(Ok(payload)) = node.placement() {
        let known: Vec<_> = (0..payload.containers.min(64))
            .map(|i| tas_api::nrt::numa_placement::ContainerRef::new("ns", &format!("p{i}"), "app"))
            .collect();
        if let Ok(decoded) = payload.decode(known.iter().cloned()) {
            assert!(decoded.values().all(|&zone| zone < payload.numa_nodes));
        }
    }
}

/// A pod as the scheduler's watch receives it (JSON), its requests parsed and fitted
/// onto a fixed two-zone node.
pub fn pod_request(data: &[u8]) {
    let Ok(pod) = serde_json::from_slice::<Pod>(data) else {
        return;
    };
    let Ok(request) = PodRequest::from_pod(&pod) else {
        return;
    };
    let _ = tas_scheduler::numa::fit(two_zone_node(), &request, &|_| false);
}

/// A kubelet config file and its drop-ins (NUL-separated), merged as
/// `SourceConfig::read_files` merges them; the first text is also read on its own as a
/// config file and as a `/configz` answer, with and without the CR's overrides.
pub fn kubelet_config(data: &[u8]) {
    let texts = split(data);
    let Some((file, drop_ins)) = texts.split_first() else {
        return;
    };
    let _ = KubeletConfig::from_yaml(file);
    let mut merged = match document::parse(file) {
        Ok(doc) => {
            check_document(&doc, false);
            doc
        }
        Err(_) => Value::Object(serde_json::Map::new()),
    };
    for text in drop_ins {
        if let Ok(doc) = document::parse(text) {
            check_document(&doc, true);
            document::merge_patch(&mut merged, doc);
        }
    }
    if let Ok(config) = KubeletConfig::from_value(merged) {
        let _ = config.topology_manager_config();
        let _ = config.resource_managers_config();
    }
    let overrides = Overrides {
        policy: Some(TopologyManagerPolicy::SingleNumaNode),
        scope: Some(TopologyManagerScope::Pod),
        options: Some(BTreeMap::from([(
            "prefer-closest-numa-nodes".to_owned(),
            "true".to_owned(),
        )])),
    };
    for overrides in [Overrides::default(), overrides] {
        let _ = configz::parse("/configz", file, &overrides);
    }
}

/// What the agent checks of each document before merging it.
fn check_document(doc: &Value, drop_in: bool) {
    let _ = document::check(doc, drop_in);
    let _ = KubeletConfig::from_value(doc.clone());
}

/// The files of a sysfs NUMA node, NUL-separated: `online`, then one node's `cpulist`,
/// `meminfo` and `distance`, then a hugepages directory's size (`2048kB`) and its
/// `nr_hugepages`, then a `/proc/self/status` (the agent's shared CPU pool), then a
/// PCIe root's directory name (`pci0000:00`), a PCI function's (`0000:00:1f.2`) and
/// its `numa_node`. Absent texts are absent files.
pub fn sysfs(data: &[u8]) {
    let texts = split(data);
    let text = |i: usize| texts.get(i).map(|t| t.as_ref());
    let node_dir = Path::new("/sys/devices/system/node/node0");
    let online = sysfs::parse_online(Path::new("online"), text(0).unwrap_or_default());
    pcie_root(
        online.as_ref().ok(),
        text(7).unwrap_or_default(),
        text(8).unwrap_or_default(),
        text(9),
    );
    if let Ok(online) = online {
        // One parse per online node, as `discover` does; four are enough to reach every
        // branch, and the parse does not depend on the id beyond naming it.
        for &id in online.iter().take(4) {
            let files = NodeFiles {
                cpulist: text(1).unwrap_or_default(),
                meminfo: text(2),
                distance: text(3),
            };
            if let Ok(zone) = sysfs::parse_zone(node_dir, id, &online, files) {
                assert_eq!(
                    sysfs::parse_cpulist(&sysfs::format_cpulist(&zone.cpus)).as_ref(),
                    Ok(&zone.cpus),
                    "a formatted cpu list parses back"
                );
            }
        }
    }
    if let Some(Ok(pool)) = text(6).and_then(tas_updater::shared_pool::parse_status) {
        assert_eq!(
            sysfs::parse_cpulist(&sysfs::format_cpulist(&pool)).as_ref(),
            Ok(&pool),
            "a shared pool is a cpu list"
        );
    }
    if let Some((size_kib, name)) = text(4).and_then(sysfs::parse_pool_dir) {
        assert_eq!(sysfs::hugepage_resource_name(size_kib), Some(name));
        let _ = sysfs::parse_pool_bytes(
            &node_dir.join("nr_hugepages"),
            text(5).unwrap_or_default(),
            size_kib,
        );
    }
}

/// A PCIe root with one function reading `numa_node` (and one reading `-1`) placed
/// on the `online` nodes (node 0 alone when `online` did not parse), as the agent
/// does; the zones' `pcieRoots` attribute then reads back as written.
fn pcie_root(online: Option<&BTreeSet<u32>>, root: &str, function: &str, numa_node: Option<&str>) {
    let online = online.cloned().unwrap_or_else(|| BTreeSet::from([0]));
    let _ = sysfs::pcie::is_function_name(function);
    let mut readings = vec![sysfs::pcie::NumaNode::Unknown];
    if let Some(Ok(reading)) = numa_node.map(sysfs::pcie::parse_numa_node) {
        readings.push(reading);
    }
    let root = if pcie_roots::is_root_name(root) {
        root
    } else {
        "pci0000:00"
    };
    let mut placed = sysfs::PcieRoots::default();
    sysfs::pcie::place_root(root, &readings, &online, &mut placed);
    for (id, roots) in &placed.by_zone {
        assert!(
            online.contains(id),
            "a root placed on node {id}, not online"
        );
        let zone = tas_api::nrt::v1alpha2::Zone {
            name: tas_api::nrt::zone_name(*id),
            type_: tas_api::nrt::zone::ZONE_TYPE_NODE.to_owned(),
            attributes: pcie_roots::zone_attribute(roots).into_iter().collect(),
            ..Default::default()
        };
        assert_eq!(
            zone.pcie_roots().as_ref(),
            Ok(roots),
            "pcieRoots reads back"
        );
    }
}

/// A resource quantity (`2Gi`, `1500m`, `1e3`) in both units, and as an NRT amount
/// (a JSON string or number).
pub fn quantity(data: &[u8]) {
    if let Ok(amount) = serde_json::from_slice::<NrtQuantity>(data) {
        let _ = (amount.value(), amount.milli_value());
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let value = quantity::parse_value(text);
    let milli = quantity::parse_milli(text);
    if let Ok(value) = value {
        assert_eq!(
            quantity::parse_value(&quantity::format_value(value)),
            Ok(value)
        );
    }
    if let Ok(milli) = milli {
        assert_eq!(
            quantity::parse_milli(&quantity::format_milli(milli)),
            Ok(milli)
        );
    }
    if let (Ok(value), Ok(milli)) = (value, milli) {
        // Both round the exact amount away from zero, so whole units are the
        // milli-units rounded the same way.
        let whole = milli / 1000 + (milli % 1000).signum();
        assert_eq!(value, whole, "{text:?}: {milli} milli-units");
    }
}

/// A Go-style duration (`1m30s`), as the CR, the config files and flags carry them.
pub fn duration(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(parsed) = duration::parse(text) {
        let formatted = duration::format(parsed);
        let back = duration::parse(&formatted);
        assert!(
            back.is_ok(),
            "{formatted:?} (from {text:?}) does not parse back"
        );
    }
}

/// An `Authorization` header value, as the metrics endpoint receives it.
pub fn bearer(data: &[u8]) {
    let Ok(header) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(token) = tas_runtime::http::auth::bearer_token(Some(header)) {
        assert!(!token.is_empty() && token == token.trim(), "{token:?}");
    }
}

/// The kubelet's `GetAllocatableResources` and `List` answers (protobuf), accounted on a
/// fixed two-zone sysfs topology, fingerprinted, published as the agent's NRT object,
/// and that object read by the scheduler.
pub fn podresources(data: &[u8]) {
    let Some((head, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let len = usize::from(u16::from_le_bytes(*head)).min(rest.len());
    let (allocatable, list) = rest.split_at(len);
    let Ok(allocatable) = v1::AllocatableResourcesResponse::decode(allocatable) else {
        return;
    };
    let Ok(list) = v1::ListPodResourcesResponse::decode(list) else {
        return;
    };
    let topology = two_zone_sysfs();
    let resources = accounting::compute(
        &topology,
        &allocatable,
        &list.pod_resources,
        &AccountingOptions {
            reserved_cpus: BTreeSet::from([0]),
            // The pool from the input's first byte: any subset of the 8 CPUs.
            shared_pool: data
                .first()
                .map(|bits| (0..8).filter(|cpu| bits & (1 << cpu) != 0).collect()),
        },
    );
    for amounts in resources
        .zones
        .iter()
        .flat_map(|zone| &zone.resources)
        .chain(&resources.unattached_devices)
    {
        assert!(amounts.available <= amounts.allocatable, "{amounts:?}");
    }
    for (zone, cpus) in resources.init_container_cpus.iter().flatten() {
        let zone = resources.zone(*zone).expect("a zone of the topology");
        let cpu = zone.resource(accounting::CPU).expect("cpu in every zone");
        assert!(*cpus <= cpu.allocatable, "{cpus} kept of {cpu:?}");
    }
    let policy = FingerprintPolicy::new(
        Some(Method::WithExclusiveResources),
        &["kube-system/*".to_owned()],
    );
    let fingerprint = policy.compute(&list.pod_resources).zip(policy.method());
    let nrt = publish(
        &topology,
        &resources,
        &KubeletConfig::default(),
        fingerprint,
    );
    let _ = NodeTopology::from_nrt(&nrt);
}

/// The NRT object the agent publishes.
fn publish(
    topology: &Topology,
    resources: &accounting::NodeResources,
    kubelet: &KubeletConfig,
    fingerprint: Option<(String, Method)>,
) -> NodeResourceTopology {
    nrt_object::build(&Observed {
        node: &NodeRef {
            name: "node-a".to_owned(),
            uid: String::new(),
        },
        topology,
        resources,
        topology_manager: kubelet.topology_manager_config(),
        resource_managers: &kubelet.resource_managers_config(),
        fingerprint,
    })
}

/// A label selector and a label set, as `{"selector": ..., "labels": {...}}` (pod
/// affinity and spread constraints, node groups).
pub fn label_selector(data: &[u8]) {
    let Ok(input) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let field = |name: &str| input.get(name).cloned().unwrap_or_default();
    let Ok(selector) = serde_json::from_value::<LabelSelector>(field("selector")) else {
        return;
    };
    let labels: BTreeMap<String, String> =
        serde_json::from_value(field("labels")).unwrap_or_default();
    if let Ok(selector) = Selector::parse(&selector) {
        let _ = selector.matches(&labels);
    }
}

/// A DRA device selector, then a ResourceSlice (JSON), NUL-separated: the slice's
/// devices gathered for a fixed node (NUMA zones read from their attributes, a PCIe
/// root map of one entry), the selector compiled and evaluated on every device as an
/// `All` request, with and without a zone rule; the selector text is also read as a
/// zone list.
pub fn dra_selector(data: &[u8]) {
    let texts = split(data);
    let expression = texts.first().map(|t| t.as_ref()).unwrap_or_default();
    let _ = dra::topology::parse_zone_list(expression);
    let slices: Vec<ResourceSlice> = texts
        .get(1)
        .and_then(|t| serde_json::from_str(t).ok())
        .into_iter()
        .collect();
    let Ok(node) = serde_json::from_value::<Node>(
        json!({"metadata": {"name": "node-a", "labels": {"rack": "r1"}}}),
    ) else {
        return;
    };
    let pcie_roots = BTreeMap::from([("pci0000:00".to_owned(), BTreeSet::from([0]))]);
    let devices = NodeDevices::gather(&node, &slices, &pcie_roots);
    let claim = serde_json::from_value::<ResourceClaim>(json!({
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {
            "deviceClassName": "any", "allocationMode": "All",
            "selectors": [{"cel": {"expression": expression}}],
        }}]}},
    }));
    let class =
        serde_json::from_value::<DeviceClass>(json!({"metadata": {"name": "any"}, "spec": {}}));
    let (Ok(claim), Ok(class)) = (claim, class) else {
        return;
    };
    let classes = BTreeMap::from([("any".to_owned(), class)]);
    let in_use = HashSet::new();
    let cache = SelectorCache::new();
    let within = ZoneRule::Within {
        zones: BTreeSet::from([0]),
        allow_unknown: false,
    };
    for rule in [ZoneRule::Any, within] {
        let input = AllocationInput {
            claims: std::slice::from_ref(&claim),
            classes: &classes,
            in_use: &in_use,
            zone_rule: &rule,
            max_steps: dra::DEFAULT_MAX_STEPS,
        };
        if let Ok(allocation) = dra::allocate(&devices, &input, &cache) {
            let picked: Vec<_> = allocation.new_devices().collect();
            let distinct: HashSet<_> = picked.iter().collect();
            assert_eq!(distinct.len(), picked.len(), "a device allocated twice");
            if rule != ZoneRule::Any {
                assert!(
                    allocation.aligned,
                    "Within without unknown zones is aligned"
                );
            }
        }
    }
    let _ = dra::inventory(&devices, &in_use);
}

/// The query string of `GET /debug/decisions` (what follows `?`), as the scheduler's
/// endpoint parses it: an accepted query selects, from a fixed log, only records it
/// matches, newest first and at most `limit`, and written back as `kubectl tas` writes
/// it, parses to itself; a refused one gets the endpoint's message.
pub fn decisions_query(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let query = match debug::decisions_query(Some(text)) {
        Ok(query) => query,
        Err(message) => {
            assert!(message.starts_with(DECISIONS_PATH), "{message:?}");
            return;
        }
    };
    assert_eq!(query.validate(), Ok(()), "{text:?}");
    let selected = decision_log().query(&query);
    assert!(selected.len() <= query.limit.unwrap_or(usize::MAX));
    assert!(selected.iter().all(|r| query.matches(r)), "{text:?}");
    assert!(
        selected.windows(2).all(|w| w[0].id > w[1].id),
        "newest first"
    );
    let written = query.to_query_string();
    assert_eq!(
        debug::decisions_query(Some(&written)).as_ref(),
        Ok(&query),
        "{text:?} written back as {written:?}"
    );
}

/// Records of pods in two namespaces, names the fuzzer can hit (`a`, `b`, empty-ish).
fn decision_log() -> &'static DecisionLog {
    static LOG: OnceLock<DecisionLog> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = DecisionLog::new(8);
        for (ns, pod) in [
            ("a", "p"),
            ("b", "p"),
            ("a", "q"),
            ("a b", "p+q"),
            ("a", "p"),
        ] {
            let who = (ns.to_owned(), pod.to_owned(), format!("uid-{ns}-{pod}"));
            log.record(DecisionRecord::new(
                String::new(),
                who,
                DecisionOutcome::Unschedulable,
            ));
        }
        log
    })
}

/// The NUL-separated texts of `data` (invalid UTF-8 replaced, as the parsers take text).
fn split(data: &[u8]) -> Vec<Cow<'_, str>> {
    data.split(|&b| b == 0)
        .map(String::from_utf8_lossy)
        .collect()
}

/// Two NUMA zones of four CPUs, 4 GiB and 2 MiB hugepages each, as sysfs shows them.
fn two_zone_sysfs() -> Topology {
    const GIB: u64 = 1 << 30;
    let zone = |id: u32| Zone {
        id,
        cpus: (id * 4..id * 4 + 4).collect(),
        memory_bytes: 4 * GIB,
        hugepages: BTreeMap::from([("hugepages-2Mi".to_owned(), GIB)]),
        distances: BTreeMap::from([
            (0, if id == 0 { 10 } else { 20 }),
            (1, if id == 1 { 10 } else { 20 }),
        ]),
    };
    Topology {
        zones: vec![zone(0), zone(1)],
    }
}

/// The scheduler's view of [`two_zone_sysfs`] as the agent publishes it for a kubelet
/// with static CPU and memory managers under `single-numa-node`, nothing allocated.
fn two_zone_node() -> &'static NodeTopology {
    static NODE: OnceLock<NodeTopology> = OnceLock::new();
    NODE.get_or_init(|| {
        let kubelet = KubeletConfig::from_yaml(
            "topologyManagerPolicy: single-numa-node\ncpuManagerPolicy: static\nmemoryManagerPolicy: Static\n",
        )
        .expect("the fixed kubelet config parses");
        let topology = two_zone_sysfs();
        let allocatable = v1::AllocatableResourcesResponse {
            cpu_ids: (1..8).collect(),
            ..Default::default()
        };
        let resources =
            accounting::compute(&topology, &allocatable, &[], &AccountingOptions::default());
        let nrt = publish(&topology, &resources, &kubelet, None);
        NodeTopology::from_nrt(&nrt).expect("the agent's object is sane")
    })
}

/// Guaranteed pods that fit a zone, span zones, or ask for a device.
fn pods() -> &'static [PodRequest] {
    static PODS: OnceLock<Vec<PodRequest>> = OnceLock::new();
    PODS.get_or_init(|| {
        let pod = |requests: Value| -> PodRequest {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": "p", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "resources": {
                    "requests": requests.clone(), "limits": requests,
                }}]},
            }))
            .expect("the fixed pod is well formed");
            PodRequest::from_pod(&pod).expect("the fixed pod's requests parse")
        };
        vec![
            pod(json!({"cpu": "2", "memory": "1Gi"})),
            pod(json!({"cpu": "6", "memory": "5Gi"})),
            pod(json!({"cpu": "1", "memory": "256Mi", "example.com/nic": "1"})),
            {
                let amounts = json!({"cpu": "3", "memory": "2Gi", "example.com/nic": "1"});
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": "i", "namespace": "default"},
                    "spec": {
                        "initContainers": [{"name": "init", "resources": {
                            "requests": amounts.clone(), "limits": amounts}}],
                        "containers": [{"name": "c", "resources": {
                            "requests": {"cpu": "1", "memory": "1Gi"},
                            "limits": {"cpu": "1", "memory": "1Gi"}}}],
                    },
                }))
                .expect("the fixed pod is well formed");
                PodRequest::from_pod(&pod).expect("the fixed pod's requests parse")
            },
        ]
    })
}
