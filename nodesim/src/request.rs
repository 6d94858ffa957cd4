//! What a pod asks of a node, as the kubelet counts it.
//!
//! [`PodRequest::from_pod`] reads a Pod once: its QoS class, and per container (init
//! containers first, in order, then app containers) the requested amounts — `cpu` in
//! millicores, everything else (`memory`, `hugepages-*`, devices) in whole units. A
//! missing request falls back to the limit, as API defaulting does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tas_api::quantity::{QuantityError, parse_milli, parse_value};

/// `cpu`, counted in millicores.
pub const CPU: &str = "cpu";
/// `memory`, in bytes.
pub const MEMORY: &str = "memory";

/// Identifies a pod on a node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID (empty for pods built in unit tests).
    pub uid: String,
}

impl PodKey {
    /// The key of `pod`.
    pub fn of(pod: &Pod) -> Self {
        Self {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        }
    }
}

/// The pod's QoS class, derived from its cpu and memory requests and limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosClass {
    /// Every container has cpu and memory limits equal to its requests.
    Guaranteed,
    /// Some request or limit, but not Guaranteed.
    Burstable,
    /// No cpu or memory request or limit anywhere.
    BestEffort,
}

/// What kind of container, which decides how it counts towards the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerKind {
    /// An init container that runs to completion before the next one starts.
    Init,
    /// An init container with `restartPolicy: Always`: runs alongside the app.
    Sidecar,
    /// An app container.
    App,
}

/// One container's requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRequest {
    /// Container name.
    pub name: String,
    /// Init, sidecar or app.
    pub kind: ContainerKind,
    /// Resource name → amount (`cpu` in millicores).
    pub amounts: BTreeMap<String, u64>,
}

impl ContainerRequest {
    /// The amount of `resource` requested (0 if none).
    pub fn get(&self, resource: &str) -> u64 {
        self.amounts.get(resource).copied().unwrap_or(0)
    }
}

/// A pod's requests, containers in the order the kubelet admits them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRequest {
    /// Which pod.
    pub key: PodKey,
    /// Its QoS class.
    pub qos: QosClass,
    /// Init containers in order, then app containers.
    pub containers: Vec<ContainerRequest>,
}

impl PodRequest {
    /// Reads `pod`'s spec.
    pub fn from_pod(pod: &Pod) -> Result<Self, QuantityError> {
        let spec = pod.spec.clone().unwrap_or_default();
        let init = spec.init_containers.unwrap_or_default();
        let mut containers = Vec::new();
        for container in &init {
            let kind = if container.restart_policy.as_deref() == Some("Always") {
                ContainerKind::Sidecar
            } else {
                ContainerKind::Init
            };
            containers.push(container_request(container, kind)?);
        }
        for container in &spec.containers {
            containers.push(container_request(container, ContainerKind::App)?);
        }
        let qos = qos_class(init.iter().chain(&spec.containers));
        Ok(Self {
            key: PodKey::of(pod),
            qos,
            containers,
        })
    }

    /// The pod's effective request of `resource` given per-container amounts:
    /// the larger of what the init phase needs at its peak (each init container plus
    /// the sidecars started before it) and what runs for good (sidecars plus app
    /// containers).
    pub fn effective(&self, amount: impl Fn(&ContainerRequest) -> u64) -> u64 {
        let mut sidecars = 0;
        let mut init_peak = 0;
        let mut apps = 0;
        for container in &self.containers {
            let value = amount(container);
            match container.kind {
                ContainerKind::Init => init_peak = init_peak.max(sidecars + value),
                ContainerKind::Sidecar => sidecars += value,
                ContainerKind::App => apps += value,
            }
        }
        init_peak.max(sidecars + apps)
    }

    /// Effective requests of every resource any container asks for.
    pub fn effective_amounts(&self) -> BTreeMap<String, u64> {
        let names: std::collections::BTreeSet<&String> = self
            .containers
            .iter()
            .flat_map(|c| c.amounts.keys())
            .collect();
        names
            .into_iter()
            .map(|name| (name.clone(), self.effective(|c| c.get(name))))
            .collect()
    }
}

fn container_request(
    container: &Container,
    kind: ContainerKind,
) -> Result<ContainerRequest, QuantityError> {
    let mut amounts = BTreeMap::new();
    for (name, quantity) in requests(container.resources.as_ref()) {
        let amount = if name == CPU {
            parse_milli(&quantity.0)?
        } else {
            parse_value(&quantity.0)?
        };
        if amount > 0 {
            amounts.insert(name, amount.unsigned_abs());
        }
    }
    Ok(ContainerRequest {
        name: container.name.clone(),
        kind,
        amounts,
    })
}

/// Requests, with limits standing in for missing requests.
fn requests(resources: Option<&ResourceRequirements>) -> BTreeMap<String, Quantity> {
    let Some(resources) = resources else {
        return BTreeMap::new();
    };
    let mut merged = resources.limits.clone().unwrap_or_default();
    merged.extend(resources.requests.clone().unwrap_or_default());
    merged
}

fn qos_class<'a>(containers: impl Iterator<Item = &'a Container>) -> QosClass {
    let mut any_set = false;
    let mut guaranteed = true;
    for container in containers {
        let resources = container.resources.as_ref();
        let limits = resources.and_then(|r| r.limits.clone()).unwrap_or_default();
        let requests = requests(resources);
        for name in [CPU, MEMORY] {
            let limit = limits.get(name).map(|q| q.0.as_str());
            let request = requests.get(name).map(|q| q.0.as_str());
            any_set |= limit.is_some() || request.is_some();
            let equal = match (limit, request) {
                (Some(limit), Some(request)) => same_amount(name, limit, request),
                _ => false,
            };
            guaranteed &= equal;
        }
    }
    match (any_set, guaranteed) {
        (false, _) => QosClass::BestEffort,
        (true, true) => QosClass::Guaranteed,
        (true, false) => QosClass::Burstable,
    }
}

fn same_amount(name: &str, a: &str, b: &str) -> bool {
    let parse = if name == CPU {
        parse_milli
    } else {
        parse_value
    };
    matches!((parse(a), parse(b)), (Ok(a), Ok(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> PodRequest {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "p", "namespace": "ns" },
            "spec": spec,
        }))
        .unwrap();
        PodRequest::from_pod(&pod).unwrap()
    }

    fn container(name: &str, resources: serde_json::Value) -> serde_json::Value {
        json!({ "name": name, "image": "i", "resources": resources })
    }

    #[test]
    fn qos_classes() {
        let both = json!({ "limits": { "cpu": "2", "memory": "1Gi" } });
        let guaranteed = pod(json!({ "containers": [container("a", both.clone())] }));
        assert_eq!(guaranteed.qos, QosClass::Guaranteed);
        assert_eq!(guaranteed.containers[0].get(CPU), 2000);
        assert_eq!(guaranteed.containers[0].get(MEMORY), 1 << 30);

        let uneven =
            json!({ "requests": { "cpu": "1" }, "limits": { "cpu": "2", "memory": "1Gi" } });
        let burstable =
            pod(json!({ "containers": [container("a", both), container("b", uneven)] }));
        assert_eq!(burstable.qos, QosClass::Burstable);

        let devices = json!({ "limits": { "example.com/nic": "1" } });
        let best_effort = pod(json!({ "containers": [container("a", devices)] }));
        assert_eq!(best_effort.qos, QosClass::BestEffort);
        assert_eq!(best_effort.containers[0].get("example.com/nic"), 1);
    }

    #[test]
    fn effective_request_counts_init_peaks_and_sidecars() {
        let cpus = |n: u32| json!({ "limits": { "cpu": n.to_string(), "memory": "1Gi" } });
        let mut sidecar = container("side", cpus(1));
        sidecar["restartPolicy"] = json!("Always");
        let request = pod(json!({
            "initContainers": [container("i1", cpus(3)), sidecar, container("i2", cpus(5))],
            "containers": [container("a", cpus(2)), container("b", cpus(2))],
        }));
        let kinds: Vec<ContainerKind> = request.containers.iter().map(|c| c.kind).collect();
        use ContainerKind::*;
        assert_eq!(kinds, [Init, Sidecar, Init, App, App]);
        // Init peak: sidecar (1) + i2 (5) = 6 > sidecar + apps = 5.
        assert_eq!(request.effective(|c| c.get(CPU)), 6000);
        assert_eq!(request.effective_amounts()[MEMORY], 3 << 30);
    }
}
