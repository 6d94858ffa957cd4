//! Builds the node's NodeResourceTopology `v1alpha2` object from what the agent observed.
//! Pure: same inputs, same object (zones by id, resources by name, attributes by name),
//! so an unchanged node produces an identical object and no write.

use std::collections::{BTreeMap, BTreeSet};

use crate::accounting::NodeResources;
use crate::sysfs::Topology;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use tas_api::fingerprint::Method;
use tas_api::nrt::attributes as attr;
use tas_api::nrt::cpu_layout::{self, CpuLayout};
use tas_api::nrt::pcie_roots;
use tas_api::nrt::resource_managers::{self as managers, format_options};
use tas_api::nrt::v1alpha2::{AttributeInfo, CostInfo, NodeResourceTopology, ResourceInfo, Zone};
use tas_api::nrt::{NrtQuantity, ResourceManagersConfig, TopologyManagerConfig, zone_name};

/// Label on every object the agent writes.
pub const MANAGED_BY_LABEL: (&str, &str) = ("app.kubernetes.io/managed-by", "tas-updater");

/// The node the object describes (it owns the object, so deleting the node deletes it).
#[derive(Debug, Clone)]
pub struct NodeRef {
    /// Node name (= object name).
    pub name: String,
    /// Node uid, for the owner reference. Empty: no owner reference.
    pub uid: String,
}

/// Everything the object says.
#[derive(Debug, Clone)]
pub struct Observed<'a> {
    /// The node.
    pub node: &'a NodeRef,
    /// Zones and distances from sysfs.
    pub topology: &'a Topology,
    /// Per-zone amounts.
    pub resources: &'a NodeResources,
    /// The kubelet's Topology Manager settings.
    pub topology_manager: TopologyManagerConfig,
    /// The kubelet's CPU and memory manager settings and policy options.
    pub resource_managers: &'a ResourceManagersConfig,
    /// Fingerprint and its method, unless fingerprinting is disabled.
    pub fingerprint: Option<(String, Method)>,
}

/// `nrt` with the `nodeTopologyPodsFingerprintExclude` attribute set to `exclude`
/// (when some), attributes kept sorted by name.
pub fn with_fingerprint_exclude(
    mut nrt: NodeResourceTopology,
    exclude: Option<String>,
) -> NodeResourceTopology {
    if let Some(value) = exclude {
        nrt.attributes.push(AttributeInfo::new(
            attr::NODE_TOPOLOGY_PODS_FINGERPRINT_EXCLUDE,
            value,
        ));
        nrt.attributes.sort_by(|a, b| a.name.cmp(&b.name));
    }
    nrt
}

/// `nrt` with the `kubeletVersion` attribute (the Node's `status.nodeInfo.kubeletVersion`)
/// when known, attributes kept sorted by name.
pub fn with_kubelet_version(
    mut nrt: NodeResourceTopology,
    version: Option<&str>,
) -> NodeResourceTopology {
    if let Some(version) = version.filter(|v| !v.is_empty()) {
        nrt.attributes
            .push(AttributeInfo::new(attr::KUBELET_VERSION, version));
        nrt.attributes.sort_by(|a, b| a.name.cmp(&b.name));
    }
    nrt
}

/// `nrt` with the `pcieRoots` zone attribute on each zone holding PCIe roots
/// (`roots`: NUMA id → root names), zone attributes kept sorted by name.
pub fn with_pcie_roots(
    mut nrt: NodeResourceTopology,
    roots: &BTreeMap<u32, BTreeSet<String>>,
) -> NodeResourceTopology {
    for zone in &mut nrt.zones {
        let Some(attribute) = zone
            .numa_id()
            .ok()
            .and_then(|id| roots.get(&id))
            .and_then(pcie_roots::zone_attribute)
        else {
            continue;
        };
        zone.attributes.push(attribute);
        zone.attributes.sort_by(|a, b| a.name.cmp(&b.name));
    }
    nrt
}

/// `nrt` with the CPU layout attributes ([`tas_api::nrt::cpu_layout`]): the object's
/// `cpuThreadsPerCore` and each zone's `cpuSocket`, for what `layout` knows;
/// attributes kept sorted by name.
pub fn with_cpu_layout(mut nrt: NodeResourceTopology, layout: &CpuLayout) -> NodeResourceTopology {
    if let Some(threads) = layout.threads_per_core {
        nrt.attributes.push(cpu_layout::object_attribute(threads));
        nrt.attributes.sort_by(|a, b| a.name.cmp(&b.name));
    }
    for zone in &mut nrt.zones {
        let Some(&socket) = zone
            .numa_id()
            .ok()
            .and_then(|id| layout.zone_sockets.get(&id))
        else {
            continue;
        };
        zone.attributes.push(cpu_layout::zone_attribute(socket));
        zone.attributes.sort_by(|a, b| a.name.cmp(&b.name));
    }
    nrt
}

/// The object's metadata alone, without zones or attributes: what the agent publishes
/// when it has no kubelet settings to tell (a configuration that never could be read).
pub fn skeleton(node: &NodeRef) -> NodeResourceTopology {
    let mut nrt = NodeResourceTopology::new(node.name.clone());
    nrt.metadata.labels =
        Some([(MANAGED_BY_LABEL.0.to_owned(), MANAGED_BY_LABEL.1.to_owned())].into());
    if !node.uid.is_empty() {
        nrt.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".to_owned(),
            kind: "Node".to_owned(),
            name: node.name.clone(),
            uid: node.uid.clone(),
            ..OwnerReference::default()
        }]);
    }
    nrt
}

/// The object to apply.
pub fn build(o: &Observed<'_>) -> NodeResourceTopology {
    let mut nrt = skeleton(o.node);
    let tm = &o.topology_manager;
    let mut attributes = vec![
        AttributeInfo::new(attr::TOPOLOGY_MANAGER_POLICY, tm.policy.as_str()),
        AttributeInfo::new(attr::TOPOLOGY_MANAGER_SCOPE, tm.scope.as_str()),
    ];
    if tm.max_numa_nodes != attr::DEFAULT_MAX_NUMA_NODES {
        attributes.push(AttributeInfo::new(
            attr::TOPOLOGY_MANAGER_MAX_NUMA_NODES,
            tm.max_numa_nodes.to_string(),
        ));
    }
    let rm = o.resource_managers;
    attributes.push(AttributeInfo::new(
        managers::CPU_MANAGER_POLICY,
        rm.cpu_manager_policy.as_str(),
    ));
    attributes.push(AttributeInfo::new(
        managers::MEMORY_MANAGER_POLICY,
        rm.memory_manager_policy.as_str(),
    ));
    for (name, options) in [
        (
            managers::CPU_MANAGER_POLICY_OPTIONS,
            &rm.cpu_manager_options,
        ),
        (
            managers::TOPOLOGY_MANAGER_POLICY_OPTIONS,
            &rm.topology_manager_options,
        ),
    ] {
        if !options.is_empty() {
            attributes.push(AttributeInfo::new(name, format_options(options)));
        }
    }
    if let Some((fp, method)) = &o.fingerprint {
        attributes.push(AttributeInfo::new(attr::NODE_TOPOLOGY_PODS_FINGERPRINT, fp));
        attributes.push(AttributeInfo::new(
            attr::NODE_TOPOLOGY_PODS_FINGERPRINT_METHOD,
            method.as_attribute(),
        ));
    }
    let init_cpus = o
        .resources
        .init_container_cpus
        .as_ref()
        .filter(|_| rm.cpu_manager_policy == tas_api::nrt::CpuManagerPolicy::Static);
    if init_cpus.is_some() {
        attributes.push(tas_api::nrt::init_cpus::counted_attribute());
    }
    attributes.sort_by(|a, b| a.name.cmp(&b.name));
    nrt.attributes = attributes;
    nrt.zones = o
        .topology
        .zones
        .iter()
        .map(|z| Zone {
            name: zone_name(z.id),
            type_: tas_api::nrt::zone::ZONE_TYPE_NODE.to_owned(),
            parent: None,
            costs: z
                .distances
                .iter()
                .map(|(dst, d)| CostInfo {
                    name: zone_name(*dst),
                    value: i64::from(*d),
                })
                .collect(),
            // Without the memory manager `Static` nothing is pinned.
            attributes: o
                .resources
                .memory_groups
                .attribute(z.id)
                .filter(|_| rm.static_memory())
                .into_iter()
                .chain(
                    init_cpus
                        .and_then(|cpus| cpus.get(&z.id))
                        .and_then(|&cpus| tas_api::nrt::init_cpus::zone_attribute(cpus)),
                )
                .collect(),
            resources: o
                .resources
                .zone(z.id)
                .map(|zr| {
                    zr.resources
                        .iter()
                        .map(|r| ResourceInfo {
                            name: r.name.clone(),
                            capacity: quantity(r.capacity),
                            allocatable: quantity(r.allocatable),
                            available: quantity(r.available),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect();
    nrt
}

fn quantity(v: u64) -> NrtQuantity {
    NrtQuantity::new(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::{ResourceAmounts, ZoneResources};
    use crate::sysfs::Zone as SysZone;
    use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};

    fn two_zones() -> (Topology, NodeResources) {
        let zone = |id: u32| SysZone {
            id,
            cpus: (id * 4..id * 4 + 4).collect(),
            memory_bytes: 1 << 30,
            distances: [
                (0, if id == 0 { 10 } else { 20 }),
                (1, if id == 1 { 10 } else { 20 }),
            ]
            .into(),
            ..SysZone::default()
        };
        let res = |id: u32, avail: u64| ZoneResources {
            id,
            resources: vec![ResourceAmounts {
                name: "cpu".into(),
                capacity: 4,
                allocatable: 4,
                available: avail,
            }],
        };
        (
            Topology {
                zones: vec![zone(0), zone(1)],
            },
            NodeResources {
                zones: vec![res(0, 2), res(1, 4)],
                ..NodeResources::default()
            },
        )
    }

    fn observed<'a>(node: &'a NodeRef, t: &'a Topology, r: &'a NodeResources) -> Observed<'a> {
        static MANAGERS: std::sync::LazyLock<ResourceManagersConfig> =
            std::sync::LazyLock::new(|| ResourceManagersConfig {
                cpu_manager_policy: tas_api::nrt::CpuManagerPolicy::Static,
                cpu_manager_options: [("full-pcpus-only".to_owned(), "true".to_owned())].into(),
                memory_manager_policy: tas_api::nrt::MemoryManagerPolicy::None,
                topology_manager_options: [
                    ("prefer-closest-numa-nodes".to_owned(), "true".to_owned()),
                    ("max-allowable-numa-nodes".to_owned(), "8".to_owned()),
                ]
                .into(),
            });
        Observed {
            node,
            topology: t,
            resources: r,
            resource_managers: &MANAGERS,
            topology_manager: TopologyManagerConfig {
                policy: TopologyManagerPolicy::SingleNumaNode,
                scope: TopologyManagerScope::Pod,
                max_numa_nodes: 8,
            },
            fingerprint: Some((
                "pfp0v001fe53c4dbd2c5f4a0".into(),
                Method::WithExclusiveResources,
            )),
        }
    }

    #[test]
    fn publishes_zones_costs_attributes_and_owner() {
        let (t, r) = two_zones();
        let node = NodeRef {
            name: "n1".into(),
            uid: "u-1".into(),
        };
        let nrt = build(&observed(&node, &t, &r));
        assert_eq!(nrt.metadata.name.as_deref(), Some("n1"));
        let owner = &nrt.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Node", "u-1"));
        assert_eq!(nrt.zones.len(), 2);
        assert_eq!(nrt.zones[1].name, "node-1");
        assert_eq!(nrt.zones[1].type_, "Node");
        assert_eq!(nrt.zones[0].costs[1].name, "node-1");
        assert_eq!(nrt.zones[0].costs[1].value, 20);
        assert_eq!(nrt.zones[0].resources[0].available.as_str(), "2");
        assert_eq!(
            nrt.attribute(attr::TOPOLOGY_MANAGER_POLICY),
            Some("single-numa-node")
        );
        assert_eq!(nrt.attribute(attr::TOPOLOGY_MANAGER_SCOPE), Some("pod"));
        assert_eq!(
            nrt.attribute(attr::NODE_TOPOLOGY_PODS_FINGERPRINT_METHOD),
            Some("with-exclusive-resources")
        );
        assert!(
            nrt.attribute(attr::TOPOLOGY_MANAGER_MAX_NUMA_NODES)
                .is_none()
        );
        let config = tas_api::nrt::TopologyManagerConfig::from_nrt(&nrt).unwrap();
        assert_eq!(config.policy, TopologyManagerPolicy::SingleNumaNode);
        assert_eq!(nrt.attribute(managers::CPU_MANAGER_POLICY), Some("static"));
        assert_eq!(nrt.attribute(managers::MEMORY_MANAGER_POLICY), Some("None"));
        assert_eq!(
            nrt.attribute(managers::CPU_MANAGER_POLICY_OPTIONS),
            Some("full-pcpus-only=true")
        );
        assert_eq!(
            nrt.attribute(managers::TOPOLOGY_MANAGER_POLICY_OPTIONS),
            Some("max-allowable-numa-nodes=8,prefer-closest-numa-nodes=true")
        );
        // What a scheduler reads back is what the kubelet config said.
        assert_eq!(
            ResourceManagersConfig::from_nrt(&nrt).as_ref(),
            Ok(observed(&node, &t, &r).resource_managers)
        );
    }

    #[test]
    fn memory_groups_are_zone_attributes_under_the_static_memory_manager() {
        let (t, mut r) = two_zones();
        r.memory_groups = tas_api::nrt::ZoneMemoryGroups([(1, vec![1])].into());
        let node = NodeRef {
            name: "n1".into(),
            uid: String::new(),
        };
        let mut managers = observed(&node, &t, &r).resource_managers.clone();
        let mut o = observed(&node, &t, &r);
        // Memory manager `None` pins nothing: no group is published.
        assert!(build(&o).zones.iter().all(|z| z.attributes.is_empty()));
        managers.memory_manager_policy = tas_api::nrt::MemoryManagerPolicy::Static;
        o.resource_managers = &managers;
        let nrt = build(&o);
        assert_eq!(nrt.zones[0].memory_manager_group(), Ok(None));
        assert_eq!(nrt.zones[1].memory_manager_group(), Ok(Some(vec![1])));
        assert_eq!(
            nrt.zones[1].attributes,
            [AttributeInfo::new("memoryManagerGroup", "node-1")]
        );
    }

    #[test]
    fn init_container_cpus_are_published_only_when_counted() {
        let (t, mut r) = two_zones();
        let node = NodeRef {
            name: "n1".into(),
            uid: String::new(),
        };
        let nrt = build(&observed(&node, &t, &r));
        assert!(!tas_api::nrt::init_cpus::counted(&nrt));
        r.init_container_cpus = Some([(0, 0), (1, 2)].into());
        let nrt = build(&observed(&node, &t, &r));
        assert!(tas_api::nrt::init_cpus::counted(&nrt));
        let kept: Vec<u64> = nrt
            .zones
            .iter()
            .map(|z| tas_api::nrt::init_cpus::zone_cpus(z).unwrap())
            .collect();
        assert_eq!(kept, [0, 2]);
        // Zone 0 keeps none: no attribute written.
        assert!(nrt.zones[0].attributes.is_empty());
    }

    #[test]
    fn the_kubelet_version_is_an_attribute_when_known() {
        let nrt = built_two_zones();
        assert_eq!(
            with_kubelet_version(nrt.clone(), None).attributes,
            nrt.attributes
        );
        assert_eq!(
            with_kubelet_version(nrt.clone(), Some("")).attributes,
            nrt.attributes
        );
        let named = with_kubelet_version(nrt, Some("v1.36.3"));
        assert_eq!(named.kubelet_minor(), Some(36));
        assert!(named.attributes.windows(2).all(|w| w[0].name <= w[1].name));
    }

    /// The object of [`two_zones`] for node `n1`.
    fn built_two_zones() -> NodeResourceTopology {
        let (t, r) = two_zones();
        let node = NodeRef {
            name: "n1".into(),
            uid: String::new(),
        };
        build(&observed(&node, &t, &r))
    }

    #[test]
    fn the_cpu_layout_is_an_object_and_a_zone_attribute() {
        let nrt = built_two_zones();
        assert_eq!(with_cpu_layout(nrt.clone(), &CpuLayout::default()), nrt);
        let layout = CpuLayout {
            threads_per_core: Some(2),
            zone_sockets: BTreeMap::from([(1, 0)]),
        };
        let nrt = with_cpu_layout(nrt, &layout);
        assert_eq!(cpu_layout::threads_per_core(&nrt), Ok(Some(2)));
        assert!(nrt.attributes.windows(2).all(|w| w[0].name <= w[1].name));
        let sockets: Vec<Option<u32>> = nrt
            .zones
            .iter()
            .map(|z| cpu_layout::zone_socket(z).unwrap())
            .collect();
        assert_eq!(sockets, [None, Some(0)]);
    }

    #[test]
    fn pcie_roots_are_zone_attributes_the_scheduler_reads_back() {
        let (t, r) = two_zones();
        let node = NodeRef {
            name: "n1".into(),
            uid: String::new(),
        };
        let mut nrt = build(&observed(&node, &t, &r));
        let group = AttributeInfo::new(tas_api::nrt::memory_groups::MEMORY_MANAGER_GROUP, "node-1");
        nrt.zones[1].attributes.push(group);
        let roots = BTreeMap::from([
            (
                1,
                BTreeSet::from(["pci0000:80".to_owned(), "pci0000:17".to_owned()]),
            ),
            (7, BTreeSet::from(["pci0000:ff".to_owned()])),
        ]);
        let nrt = with_pcie_roots(nrt, &roots);
        assert!(nrt.zones[0].attributes.is_empty());
        let names: Vec<&str> = nrt.zones[1]
            .attributes
            .iter()
            .map(|a| a.name.as_str())
            .collect();
        assert_eq!(names, ["memoryManagerGroup", "pcieRoots"]);
        let (read, errors) = pcie_roots::pcie_root_zones(&nrt);
        assert!(errors.is_empty());
        assert_eq!(
            read,
            BTreeMap::from([
                ("pci0000:17".to_owned(), BTreeSet::from([1])),
                ("pci0000:80".to_owned(), BTreeSet::from([1])),
            ])
        );
    }

    #[test]
    fn same_inputs_same_object() {
        let (t, r) = two_zones();
        let node = NodeRef {
            name: "n1".into(),
            uid: String::new(),
        };
        let a = build(&observed(&node, &t, &r));
        let b = build(&observed(&node, &t, &r));
        assert_eq!(a, b);
        assert!(a.metadata.owner_references.is_none());
    }
}
