//! DRA devices beside kubelet-managed CPUs, for the [`crate::scenarios::dra`] scenario.
//!
//! Setup ([`install`]): the test DRA driver's objects ([`tas_nodesim::dra_driver`]) — a
//! DeviceClass each for GPUs and NICs, and per node one ResourceSlice of each with
//! [`GPUS_PER_ZONE`] GPUs and [`NICS_PER_ZONE`] NICs on every zone, carrying the
//! standard `numaNode` and `pcieRoot` attributes — and two ResourceClaimTemplates in
//! the run namespace: one GPU, or one GPU and one NIC behind the same PCIe root.
//!
//! Each pod of the workload ([`pod`]) is a Guaranteed pod whose container uses one claim
//! generated from a template by the control plane's ResourceClaim controller. After a
//! run, [`placements`] puts each admitted pod's CPU zones (the kubelet referee's answer)
//! next to the zones of the devices in its claims' allocations (read from the API
//! server, zones from the slices): aligned, unaligned, or unknown.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim, ResourceClaim as ContainerClaim};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::Value;
use tas_nodesim::dra_driver::{
    self, DeviceKey, PCIE_ROOT, claim_spec, claim_template, device_class, node_slice, zone_devices,
};
use tas_testcluster::wait_for;

use crate::BenchError;
use crate::workload::{ClusterShape, Workload, splitmix64};

/// The GPU driver, and the class selecting its devices.
pub const GPU_DRIVER: &str = "gpu.example.com";
/// The NIC driver, and the class selecting its devices.
pub const NIC_DRIVER: &str = "nic.example.com";
/// GPUs per NUMA zone of every node.
pub const GPUS_PER_ZONE: u32 = 4;
/// NICs per NUMA zone of every node.
pub const NICS_PER_ZONE: u32 = 2;
/// The template of one GPU.
pub const GPU_TEMPLATE: &str = "gpu";
/// The template of one GPU and one NIC on the same PCIe root.
pub const GPU_NIC_TEMPLATE: &str = "gpu-nic";
/// The pod's claim entry (and its container's claim).
pub const POD_CLAIM: &str = "devices";

/// How long the control plane may take to generate or remove a run's claims.
const CLAIMS_TIMEOUT: Duration = Duration::from_secs(300);

/// Whether pod `i` asks for a NIC besides its GPU: about 1 in 4, a fixed draw.
pub fn wants_nic(i: usize) -> bool {
    splitmix64(i as u64 ^ 0xD7A).is_multiple_of(4)
}

/// Pod `i` of `workload` with its claim: the Guaranteed pod of its CPUs and memory
/// whose container uses a claim from [`GPU_TEMPLATE`] or [`GPU_NIC_TEMPLATE`].
pub fn pod(workload: &Workload, i: usize, scheduler: &str, run: &str) -> Pod {
    let mut pod = workload.guaranteed_pod(i, scheduler, run);
    let template = if wants_nic(i) {
        GPU_NIC_TEMPLATE
    } else {
        GPU_TEMPLATE
    };
    if let Some(spec) = pod.spec.as_mut() {
        spec.resource_claims = Some(vec![PodResourceClaim {
            name: POD_CLAIM.into(),
            resource_claim_template_name: Some(template.into()),
            ..PodResourceClaim::default()
        }]);
        for container in &mut spec.containers {
            let resources = container.resources.get_or_insert_default();
            resources.claims = Some(vec![ContainerClaim {
                name: POD_CLAIM.into(),
                request: None,
            }]);
        }
    }
    pod
}

/// Creates the classes, every node's slices and the templates in `namespace`, and
/// returns the zone of every published device, read back from the API server.
pub async fn install(
    client: &Client,
    namespace: &str,
    shape: &ClusterShape,
) -> Result<BTreeMap<DeviceKey, u32>, BenchError> {
    let classes: Api<DeviceClass> = Api::all(client.clone());
    for driver in [GPU_DRIVER, NIC_DRIVER] {
        create(&classes, device_class(driver)).await?;
    }
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let gpus = zone_devices("gpu", shape.zones, GPUS_PER_ZONE);
    let nics = zone_devices("nic", shape.zones, NICS_PER_ZONE);
    for node in shape.node_names() {
        create(&slices, node_slice(GPU_DRIVER, &node, &gpus)).await?;
        create(&slices, node_slice(NIC_DRIVER, &node, &nics)).await?;
    }
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), namespace);
    let gpu = claim_spec(&[GPU_DRIVER], None);
    create(&templates, claim_template(GPU_TEMPLATE, gpu)).await?;
    let gpu_nic = claim_spec(&[GPU_DRIVER, NIC_DRIVER], Some(PCIE_ROOT));
    create(&templates, claim_template(GPU_NIC_TEMPLATE, gpu_nic)).await?;
    let published = slices.list(&ListParams::default()).await?.items;
    Ok(dra_driver::device_zones(&published))
}

async fn create<K>(api: &Api<K>, object: Value) -> Result<(), BenchError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object)
        .map_err(|e| BenchError::Setup(format!("a DRA object of the benchmark: {e}")))?;
    api.create(&PostParams::default(), &object).await?;
    Ok(())
}

/// Waits until `count` pods matching `selector` in `namespace` name their generated
/// claim in their status (the controller manager creates each claim, then writes its
/// name into the pod's `status.resourceClaimStatuses`; a scheduler finds the claim
/// only then).
pub async fn wait_claims(
    client: &Client,
    namespace: &str,
    selector: &str,
    count: usize,
) -> Result<(), BenchError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = ListParams::default().labels(selector);
    wait_for(
        format!("{count} pods {selector} to name their ResourceClaim"),
        CLAIMS_TIMEOUT,
        || async {
            let named = pods
                .list(&list)
                .await?
                .items
                .iter()
                .filter(|pod| {
                    pod.status
                        .as_ref()
                        .and_then(|s| s.resource_claim_statuses.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.resource_claim_name.is_some()))
                })
                .count();
            Ok::<_, kube::Error>((named >= count).then_some(()))
        },
    )
    .await?;
    Ok(())
}

/// Waits until `namespace` holds no claims (their pods gone, the controller manager
/// deallocated and deleted them), so the next run finds every device free.
pub async fn wait_claims_gone(client: &Client, namespace: &str) -> Result<(), BenchError> {
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    wait_for(
        format!("the ResourceClaims in {namespace} to be deleted"),
        CLAIMS_TIMEOUT,
        || async {
            let list = claims
                .list_metadata(&ListParams::default().limit(1))
                .await?;
            Ok::<_, kube::Error>(list.items.is_empty().then_some(()))
        },
    )
    .await?;
    Ok(())
}

/// Every claim in `namespace`.
pub async fn claims(client: &Client, namespace: &str) -> Result<Vec<ResourceClaim>, BenchError> {
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    Ok(api.list(&ListParams::default()).await?.items)
}

/// Where one run put its pods' devices, against their CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DraFigures {
    /// Whether the run's pods had claims (`false`: the same pods without, the
    /// baseline of what allocation costs).
    pub claims: bool,
    /// Admitted pods whose every allocated device sits on a zone of their exclusive
    /// CPUs.
    pub aligned: usize,
    /// Admitted pods with an allocated device on another zone.
    pub unaligned: usize,
    /// Admitted pods whose claim, allocation or device zone was not found.
    pub unknown: usize,
}

impl DraFigures {
    /// Admitted pods judged.
    pub fn judged(&self) -> usize {
        self.aligned + self.unaligned + self.unknown
    }

    /// Aligned pods ÷ admitted pods judged, in percent; `None` without claims or pods.
    pub fn aligned_share(&self) -> Option<f64> {
        let judged = self.judged();
        (self.claims && judged > 0).then(|| 100.0 * self.aligned as f64 / judged as f64)
    }
}

/// Where one admitted pod's devices went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Every allocated device on a zone of its CPUs.
    Aligned,
    /// Some device elsewhere: the zones of its CPUs and of its devices.
    Unaligned {
        /// The zones of its exclusive CPUs (the kubelet's answer).
        cpus: BTreeSet<u32>,
        /// The zones of its allocated devices.
        devices: BTreeSet<u32>,
    },
    /// Its claim, allocation or a device's zone was not found.
    Unknown,
}

/// Judges every admitted pod of `cpu_zones` (pod name → the zones of its exclusive
/// CPUs, the kubelet's answer): the devices of the claims it owns (`claims`, their
/// allocations) and their zones (`device_zones`, from the slices).
pub fn placements(
    claims: &[ResourceClaim],
    cpu_zones: &BTreeMap<String, BTreeSet<u32>>,
    device_zones: &BTreeMap<DeviceKey, u32>,
) -> BTreeMap<String, Placement> {
    // Pod name → the zones of its allocated devices (`None`: one is unknown).
    let mut pod_devices: BTreeMap<&str, Option<BTreeSet<u32>>> = BTreeMap::new();
    for claim in claims {
        let Some(owner) = claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.kind == "Pod")
        else {
            continue;
        };
        let results = claim
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_ref());
        let zones = results.and_then(|results| {
            results
                .iter()
                .map(|r| {
                    let key = (r.driver.clone(), r.pool.clone(), r.device.clone());
                    device_zones.get(&key).copied()
                })
                .collect::<Option<BTreeSet<u32>>>()
        });
        let entry = pod_devices
            .entry(owner.name.as_str())
            .or_insert_with(|| Some(BTreeSet::new()));
        *entry = entry.take().zip(zones).map(|(mut a, b)| {
            a.extend(b);
            a
        });
    }
    cpu_zones
        .iter()
        .map(|(pod, cpus)| {
            let placement = match pod_devices.get(pod.as_str()) {
                Some(Some(devices)) if !devices.is_empty() && devices.is_subset(cpus) => {
                    Placement::Aligned
                }
                Some(Some(devices)) if !devices.is_empty() => Placement::Unaligned {
                    cpus: cpus.clone(),
                    devices: devices.clone(),
                },
                _ => Placement::Unknown,
            };
            (pod.clone(), placement)
        })
        .collect()
}

/// The counts of [`placements`].
pub fn judge(placements: &BTreeMap<String, Placement>) -> DraFigures {
    let mut figures = DraFigures {
        claims: true,
        ..DraFigures::default()
    };
    for placement in placements.values() {
        match placement {
            Placement::Aligned => figures.aligned += 1,
            Placement::Unaligned { .. } => figures.unaligned += 1,
            Placement::Unknown => figures.unknown += 1,
        }
    }
    figures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Mix;
    use serde_json::json;
    use tas_nodesim::request::{PodRequest, QosClass};

    fn claim(pod: &str, devices: &[(&str, &str)]) -> ResourceClaim {
        let results: Vec<Value> = devices
            .iter()
            .map(|(driver, device)| {
                json!({"request": "r0", "driver": driver, "pool": "n0", "device": device})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": format!("{pod}-devices-x"), "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": "u"}]},
            "spec": {"devices": {}},
            "status": {"allocation": {"devices": {"results": results}}}
        }))
        .expect("claim")
    }

    #[test]
    fn a_pod_is_aligned_only_when_every_device_is_on_its_cpus_zones() {
        let key = |driver: &str, device: &str| (driver.into(), "n0".into(), device.into());
        let device_zones = BTreeMap::from([
            (key(GPU_DRIVER, "gpu-0-0"), 0),
            (key(GPU_DRIVER, "gpu-1-0"), 1),
            (key(NIC_DRIVER, "nic-1-0"), 1),
        ]);
        let claims = [
            claim("a", &[(GPU_DRIVER, "gpu-0-0")]),
            claim("b", &[(GPU_DRIVER, "gpu-1-0"), (NIC_DRIVER, "nic-1-0")]),
            claim("c", &[(GPU_DRIVER, "gpu-1-0")]),
            claim("d", &[(GPU_DRIVER, "gpu-9-9")]),
        ];
        let cpu_zones = BTreeMap::from([
            ("a".to_string(), BTreeSet::from([0])),
            ("b".to_string(), BTreeSet::from([1])),
            ("c".to_string(), BTreeSet::from([0])),
            ("d".to_string(), BTreeSet::from([0])),
            ("no-claim".to_string(), BTreeSet::from([0])),
        ]);
        let placements = placements(&claims, &cpu_zones, &device_zones);
        assert_eq!(
            placements["c"],
            Placement::Unaligned {
                cpus: BTreeSet::from([0]),
                devices: BTreeSet::from([1])
            }
        );
        let figures = judge(&placements);
        assert_eq!(
            (figures.aligned, figures.unaligned, figures.unknown),
            (2, 1, 2)
        );
        assert_eq!(figures.aligned_share(), Some(40.0));
        let baseline = DraFigures::default();
        assert_eq!(baseline.aligned_share(), None);
    }

    #[test]
    fn pods_use_one_claim_from_a_template_and_stay_guaranteed() {
        let workload = Workload {
            pods: 100,
            cpu_sizes: vec![1, 2, 4, 8],
            memory_per_cpu_gib: 4,
            mix: Mix::Dra,
        };
        let pod = workload.pod(3, "s", "r1");
        let request = PodRequest::from_pod(&pod).expect("request");
        assert_eq!(request.qos, QosClass::Guaranteed);
        let spec = pod.spec.expect("spec");
        let claims = spec.resource_claims.expect("claims");
        let template = claims[0].resource_claim_template_name.as_deref();
        assert_eq!(
            template,
            Some(if wants_nic(3) {
                GPU_NIC_TEMPLATE
            } else {
                GPU_TEMPLATE
            })
        );
        let used = spec.containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.claims.clone());
        assert_eq!(used.expect("container claims")[0].name, POD_CLAIM);
        let with_nic = (0..1000).filter(|&i| wants_nic(i)).count();
        assert!((200..300).contains(&with_nic), "{with_nic} of 1000");
        let plain = workload.without_claims().pod(3, "s", "r1");
        assert!(plain.spec.expect("spec").resource_claims.is_none());
    }
}
