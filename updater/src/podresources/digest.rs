//! A digest of the kubelet's `List` answer: which pods run on the node and what each of
//! their containers holds (CPUs, devices, memory, DRA claims). The agent polls `List`
//! and publishes only when the digest changes.
//!
//! Equal answers have equal digests whatever order the kubelet lists things in (it
//! builds pods, devices and claims from maps, in no stable order); a pod added, removed
//! or given other resources changes the digest, but for a 64-bit hash collision, which
//! only delays that publish to the next periodic tick or heartbeat. Each repeated field
//! is hashed as a multiset, the wrapping sum of its elements' own hashes with its length,
//! so nothing is sorted or copied.

use std::hash::{DefaultHasher, Hash, Hasher};

use super::v1;

/// The order-independent digest of one `List` answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListDigest(u64);

impl ListDigest {
    /// The digest of `answer`.
    pub fn of(answer: &v1::ListPodResourcesResponse) -> Self {
        let mut h = DefaultHasher::new();
        multiset(&answer.pod_resources, pod, &mut h);
        Self(h.finish())
    }
}

/// Writes the multiset of `items`, each hashed by `each`, into `h`.
fn multiset<T>(items: &[T], each: impl Fn(&T, &mut DefaultHasher), h: &mut DefaultHasher) {
    let sum = items.iter().fold(0_u64, |sum, item| {
        let mut own = DefaultHasher::new();
        each(item, &mut own);
        sum.wrapping_add(own.finish())
    });
    items.len().hash(h);
    sum.hash(h);
}

fn pod(p: &v1::PodResources, h: &mut DefaultHasher) {
    p.namespace.hash(h);
    p.name.hash(h);
    multiset(&p.containers, container, h);
}

fn container(c: &v1::ContainerResources, h: &mut DefaultHasher) {
    c.name.hash(h);
    multiset(&c.cpu_ids, Hash::hash, h);
    multiset(&c.devices, device, h);
    multiset(&c.memory, memory, h);
    multiset(&c.dynamic_resources, claim, h);
}

fn device(d: &v1::ContainerDevices, h: &mut DefaultHasher) {
    d.resource_name.hash(h);
    multiset(&d.device_ids, Hash::hash, h);
    topology(d.topology.as_ref(), h);
}

fn memory(m: &v1::ContainerMemory, h: &mut DefaultHasher) {
    m.memory_type.hash(h);
    m.size.hash(h);
    topology(m.topology.as_ref(), h);
}

fn topology(t: Option<&v1::TopologyInfo>, h: &mut DefaultHasher) {
    t.is_some().hash(h);
    if let Some(t) = t {
        multiset(&t.nodes, |n, h| n.id.hash(h), h);
    }
}

fn claim(c: &v1::DynamicResource, h: &mut DefaultHasher) {
    c.claim_namespace.hash(h);
    c.claim_name.hash(h);
    multiset(&c.claim_resources, claim_resource, h);
}

fn claim_resource(r: &v1::ClaimResource, h: &mut DefaultHasher) {
    r.driver_name.hash(h);
    r.pool_name.hash(h);
    r.device_name.hash(h);
    multiset(&r.cdi_devices, |d, h| d.name.hash(h), h);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng as _;
    use rand::rngs::StdRng;
    use rand::seq::SliceRandom as _;

    fn numa(ids: &[i64]) -> Option<v1::TopologyInfo> {
        Some(v1::TopologyInfo {
            nodes: ids.iter().map(|&id| v1::NumaNode { id }).collect(),
        })
    }

    /// A pod with exclusive CPUs, two NICs, pinned memory and a DRA claim.
    fn rich_pod(name: &str, cpus: &[i64]) -> v1::PodResources {
        v1::PodResources {
            name: name.into(),
            namespace: "apps".into(),
            containers: vec![
                v1::ContainerResources {
                    name: "app".into(),
                    cpu_ids: cpus.to_vec(),
                    devices: vec![
                        v1::ContainerDevices {
                            resource_name: "example.com/nic".into(),
                            device_ids: vec!["nic0".into(), "nic1".into()],
                            topology: numa(&[0, 1]),
                        },
                        v1::ContainerDevices {
                            resource_name: "example.com/gpu".into(),
                            device_ids: vec!["gpu0".into()],
                            topology: numa(&[0]),
                        },
                    ],
                    memory: vec![
                        v1::ContainerMemory {
                            memory_type: "memory".into(),
                            size: 1 << 30,
                            topology: numa(&[0, 1]),
                        },
                        v1::ContainerMemory {
                            memory_type: "hugepages-2Mi".into(),
                            size: 1 << 21,
                            topology: numa(&[0]),
                        },
                    ],
                    dynamic_resources: vec![v1::DynamicResource {
                        claim_name: "gpu".into(),
                        claim_namespace: "apps".into(),
                        claim_resources: vec![v1::ClaimResource {
                            cdi_devices: vec![
                                v1::CdiDevice { name: "a".into() },
                                v1::CdiDevice { name: "b".into() },
                            ],
                            driver_name: "gpu.example.com".into(),
                            pool_name: "node-a".into(),
                            device_name: "gpu-1".into(),
                        }],
                    }],
                },
                v1::ContainerResources {
                    name: "sidecar".into(),
                    ..Default::default()
                },
            ],
        }
    }

    fn node() -> v1::ListPodResourcesResponse {
        v1::ListPodResourcesResponse {
            pod_resources: vec![
                rich_pod("db", &[2, 3, 10, 11]),
                rich_pod("web", &[4, 5]),
                v1::PodResources {
                    name: "shared".into(),
                    namespace: "default".into(),
                    containers: vec![v1::ContainerResources {
                        name: "c".into(),
                        ..Default::default()
                    }],
                },
            ],
        }
    }

    fn digest(answer: &v1::ListPodResourcesResponse) -> ListDigest {
        ListDigest::of(answer)
    }

    /// `answer` with every repeated field in another order, as the kubelet may list it.
    fn shuffled(
        mut answer: v1::ListPodResourcesResponse,
        seed: u64,
    ) -> v1::ListPodResourcesResponse {
        let rng = &mut StdRng::seed_from_u64(seed);
        let shuffle_topology = |t: &mut Option<v1::TopologyInfo>, rng: &mut StdRng| {
            if let Some(t) = t {
                t.nodes.shuffle(rng);
            }
        };
        answer.pod_resources.shuffle(rng);
        for pod in &mut answer.pod_resources {
            pod.containers.shuffle(rng);
            for c in &mut pod.containers {
                c.cpu_ids.shuffle(rng);
                c.devices.shuffle(rng);
                for d in &mut c.devices {
                    d.device_ids.shuffle(rng);
                    shuffle_topology(&mut d.topology, rng);
                }
                c.memory.shuffle(rng);
                for m in &mut c.memory {
                    shuffle_topology(&mut m.topology, rng);
                }
                c.dynamic_resources.shuffle(rng);
                for claim in &mut c.dynamic_resources {
                    claim.claim_resources.shuffle(rng);
                    for r in &mut claim.claim_resources {
                        r.cdi_devices.shuffle(rng);
                    }
                }
            }
        }
        answer
    }

    #[test]
    fn identical_answers_have_one_digest() {
        assert_eq!(digest(&node()), digest(&node()));
        assert_eq!(
            digest(&v1::ListPodResourcesResponse::default()),
            digest(&v1::ListPodResourcesResponse::default())
        );
    }

    proptest! {
        #[test]
        fn the_kubelet_s_order_does_not_matter(seed in any::<u64>()) {
            prop_assert_eq!(digest(&shuffled(node(), seed)), digest(&node()));
        }
    }

    /// Every change the scheduler needs to see, each from the same starting node.
    #[test]
    fn every_change_of_pods_or_assignments_changes_the_digest() {
        type Change = fn(&mut v1::ListPodResourcesResponse);
        let cases: [(&str, Change); 15] = [
            ("pod added", |a| a.pod_resources.push(rich_pod("new", &[6]))),
            ("pod removed", |a| {
                a.pod_resources.pop();
            }),
            ("all pods gone", |a| a.pod_resources.clear()),
            ("pod renamed", |a| a.pod_resources[2].name = "other".into()),
            ("pod moved to another namespace", |a| {
                a.pod_resources[2].namespace = "other".into();
            }),
            ("a same pod twice", |a| {
                let again = a.pod_resources[2].clone();
                a.pod_resources.push(again);
            }),
            ("container added", |a| {
                a.pod_resources[2].containers.push(v1::ContainerResources {
                    name: "init".into(),
                    ..Default::default()
                });
            }),
            ("CPUs reassigned", |a| {
                a.pod_resources[1].containers[0].cpu_ids = vec![4, 6]
            }),
            ("CPUs moved between containers", |a| {
                let cpus = std::mem::take(&mut a.pod_resources[0].containers[0].cpu_ids);
                a.pod_resources[0].containers[1].cpu_ids = cpus;
            }),
            ("device reassigned", |a| {
                a.pod_resources[0].containers[0].devices[0].device_ids[1] = "nic2".into();
            }),
            ("device topology changed", |a| {
                a.pod_resources[0].containers[0].devices[1].topology = numa(&[1]);
            }),
            ("device topology dropped", |a| {
                a.pod_resources[0].containers[0].devices[1].topology = None;
            }),
            ("memory resized", |a| {
                a.pod_resources[0].containers[0].memory[0].size += 1 << 20;
            }),
            ("memory moved to one zone", |a| {
                a.pod_resources[0].containers[0].memory[0].topology = numa(&[1]);
            }),
            ("claim allocated another device", |a| {
                a.pod_resources[0].containers[0].dynamic_resources[0].claim_resources[0]
                    .device_name = "gpu-2".into();
            }),
        ];
        let before = digest(&node());
        for (what, change) in cases {
            let mut after = node();
            change(&mut after);
            assert_ne!(digest(&after), before, "{what}");
        }
    }
}
