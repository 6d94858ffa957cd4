//! What a pod asks for, read once per pod so the per-node fit only does arithmetic.
//!
//! [`PodRequest::from_pod`] parses every container's requests to integers (see
//! [`super::resources`]), computes the QoS class exactly like Kubernetes, marks which
//! containers get exclusive CPUs, and derives two pod-level sums:
//!
//! - [`PodRequest::effective`]: what the scheduler accounts for the pod,
//!   `max(max init, sum app + sum sidecars) + overhead`, sidecar-aware as in KEP-753;
//! - [`PodRequest::numa_request`]: what the kubelet's hint providers align in `pod`
//!   scope. Same sums, but without the overhead (no hint provider sees it and node
//!   agents do not subtract it from any zone) and with CPU counted only for containers
//!   that get exclusive CPUs (the CPU manager's pod-level request).
//!
//! Pod-level resources (`spec.resources`, KEP-2837, on by default since Kubernetes
//! 1.34) are read as the kubelets of 1.34 to 1.37 read them with their default feature
//! gates: the QoS class comes from them (cpu and memory), they replace the containers'
//! cpu and memory in [`PodRequest::effective`], and the CPU and memory managers skip such
//! a pod ("not supported by the static policy"): no exclusive CPUs, no pinned memory,
//! only its devices are aligned ([`PodRequest::is_guaranteed`] is false for it).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tas_api::quantity::{QuantityError, parse_milli, parse_value};

use super::resources::{ResourceKind, Resources};

/// The pod's QoS class, computed as Kubernetes does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    /// Every container limits cpu and memory and the summed requests equal the limits.
    Guaranteed,
    /// Anything between.
    Burstable,
    /// No container requests or limits cpu or memory.
    BestEffort,
}

/// Where a container sits in the pod's lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerKind {
    /// A regular init container: runs to completion before the next one starts.
    Init,
    /// An init container with `restartPolicy: Always`: keeps running beside the app.
    Sidecar,
    /// An app container.
    App,
}

/// One container's parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRequest {
    /// The container name.
    pub name: Arc<str>,
    /// Init, sidecar or app.
    pub kind: ContainerKind,
    /// Requests (defaulted from limits where unset), zero amounts dropped.
    pub resources: Resources,
    /// Whether the CPU manager would give this container exclusive CPUs: the pod is
    /// Guaranteed and the CPU request is a whole, non-zero number of CPUs.
    pub exclusive_cpu: bool,
}

/// A pod's parsed request; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRequest {
    qos: QosClass,
    /// `spec.resources` is set.
    pod_level: bool,
    containers: Vec<ContainerRequest>,
    overhead: Resources,
    effective: Resources,
    numa: Resources,
}

/// A request, limit or overhead quantity that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{owner}: {field} of {resource:?}: {problem}")]
pub struct RequestError {
    /// `container "name"`, `init container "name"` or `pod overhead`.
    pub owner: String,
    /// `requests`, `limits` or `overhead`.
    pub field: &'static str,
    /// The resource name.
    pub resource: String,
    /// What is wrong with the quantity.
    pub problem: QuantityProblem,
}

/// Why a quantity was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityProblem {
    /// Not a quantity, or too large.
    #[error(transparent)]
    Invalid(#[from] QuantityError),
    /// Negative amounts cannot be requested.
    #[error("negative quantity {0:?}")]
    Negative(String),
}

type QuantityMap = BTreeMap<String, Quantity>;

impl PodRequest {
    /// Parses `pod`. Quantities that do not parse (or are negative) are errors naming
    /// the container and the resource.
    pub fn from_pod(pod: &Pod) -> Result<Self, RequestError> {
        let empty = Vec::new();
        let spec = pod.spec.as_ref();
        let inits = spec
            .and_then(|s| s.init_containers.as_ref())
            .unwrap_or(&empty);
        let apps = spec.map_or(&empty, |s| &s.containers);

        let mut qos = QosTally::default();
        let mut containers = Vec::with_capacity(inits.len() + apps.len());
        for (c, is_init) in inits
            .iter()
            .map(|c| (c, true))
            .chain(apps.iter().map(|c| (c, false)))
        {
            let kind = match (is_init, c.restart_policy.as_deref()) {
                (true, Some("Always")) => ContainerKind::Sidecar,
                (true, _) => ContainerKind::Init,
                (false, _) => ContainerKind::App,
            };
            let (requests, limits) = parse_container(c, kind)?;
            qos.add_container(&requests, &limits);
            containers.push(ContainerRequest {
                name: Arc::from(c.name.as_str()),
                kind,
                resources: requests,
                exclusive_cpu: false,
            });
        }
        let pod_resources = spec.and_then(|s| s.resources.as_ref());
        let pod_level_requests = match pod_resources {
            Some(r) => Some(parse_pod_level(r)?),
            None => None,
        };
        let qos = match pod_resources {
            Some(r) => pod_level_qos(r)?,
            None => qos.class(),
        };
        if qos == QosClass::Guaranteed && pod_level_requests.is_none() {
            for c in &mut containers {
                let cpu = c.resources.get("cpu");
                c.exclusive_cpu = cpu > 0 && cpu % 1000 == 0;
            }
        }

        let overhead = match spec.and_then(|s| s.overhead.as_ref()) {
            Some(list) => parse_list(list, "overhead", || "pod overhead".to_owned())?,
            None => Resources::default(),
        };
        let mut effective = pod_level(&containers, |_, r| r.clone());
        if let Some(pod) = &pod_level_requests {
            for (name, amount) in pod.iter() {
                let current = effective.get(name);
                effective.add(name, amount - current);
            }
        }
        effective.add_all(&overhead);
        let numa = pod_level(&containers, |c, r| {
            let mut r = r.clone();
            if !c.exclusive_cpu {
                let cpu = r.get("cpu");
                r.add("cpu", -cpu);
            }
            r
        });
        Ok(Self {
            qos,
            pod_level: pod_level_requests.is_some(),
            containers,
            overhead,
            effective,
            numa,
        })
    }

    /// Whether the pod sets pod-level resources (`spec.resources`).
    pub fn has_pod_level_resources(&self) -> bool {
        self.pod_level
    }

    /// The QoS class.
    pub fn qos(&self) -> QosClass {
        self.qos
    }

    /// Whether the resource managers treat the pod as Guaranteed (the only class with
    /// NUMA-aligned CPU and memory): Guaranteed without pod-level resources, which the
    /// CPU and memory managers skip.
    pub fn is_guaranteed(&self) -> bool {
        self.qos == QosClass::Guaranteed && !self.pod_level
    }

    /// Init containers (regular and sidecar) in spec order, then app containers in spec
    /// order: the order in which the kubelet admits them.
    pub fn containers(&self) -> &[ContainerRequest] {
        &self.containers
    }

    /// `spec.overhead`, parsed.
    pub fn overhead(&self) -> &Resources {
        &self.overhead
    }

    /// `max(max init, sum app + sum sidecars) + overhead`, per resource.
    pub fn effective(&self) -> &Resources {
        &self.effective
    }

    /// What the kubelet aligns in `pod` scope: like [`Self::effective`] without the
    /// overhead, counting CPU only of containers with exclusive CPUs.
    pub fn numa_request(&self) -> &Resources {
        &self.numa
    }
}

/// Pod-level sum per KEP-753: sidecars run beside everything declared after them, so
/// an init container needs its own request plus the sidecars started before it, and
/// the steady state needs every app container plus every sidecar.
fn pod_level(
    containers: &[ContainerRequest],
    amounts: impl Fn(&ContainerRequest, &Resources) -> Resources,
) -> Resources {
    let mut long_running = Resources::default();
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in containers {
        let r = amounts(c, &c.resources);
        match c.kind {
            ContainerKind::Sidecar => {
                sidecars.add_all(&r);
                long_running.add_all(&r);
                init_peak.raise_all(&sidecars);
            }
            ContainerKind::Init => {
                let mut running = r;
                running.add_all(&sidecars);
                init_peak.raise_all(&running);
            }
            ContainerKind::App => long_running.add_all(&r),
        }
    }
    long_running.raise_all(&init_peak);
    long_running
}

fn owner(c: &Container, kind: ContainerKind) -> String {
    match kind {
        ContainerKind::App => format!("container {:?}", c.name),
        ContainerKind::Init | ContainerKind::Sidecar => format!("init container {:?}", c.name),
    }
}

/// Parses a container's requests (defaulted from limits, as the API server does) and
/// limits.
fn parse_container(
    c: &Container,
    kind: ContainerKind,
) -> Result<(Resources, Resources), RequestError> {
    let resources = c.resources.as_ref();
    let no_list = QuantityMap::new();
    let requests = resources
        .and_then(|r| r.requests.as_ref())
        .unwrap_or(&no_list);
    let limits = resources
        .and_then(|r| r.limits.as_ref())
        .unwrap_or(&no_list);
    let mut parsed_requests = parse_list(requests, "requests", || owner(c, kind))?;
    let parsed_limits = parse_list(limits, "limits", || owner(c, kind))?;
    for e in parsed_limits.entries() {
        if !requests.contains_key(&*e.name) {
            parsed_requests.add(&e.name, e.amount);
        }
    }
    Ok((parsed_requests, parsed_limits))
}

fn parse_list(
    list: &QuantityMap,
    field: &'static str,
    owner: impl Fn() -> String,
) -> Result<Resources, RequestError> {
    let mut parsed = Resources::default();
    for (name, quantity) in list {
        let fail = |problem| RequestError {
            owner: owner(),
            field,
            resource: name.clone(),
            problem,
        };
        let amount = if ResourceKind::of(name).is_milli() {
            parse_milli(&quantity.0)
        } else {
            parse_value(&quantity.0)
        }
        .map_err(|e| fail(e.into()))?;
        if amount < 0 {
            return Err(fail(QuantityProblem::Negative(quantity.0.clone())));
        }
        parsed.add(name, amount);
    }
    Ok(parsed)
}

/// Kubernetes' QoS computation over cpu and memory: sums of positive requests and
/// limits over all (init and app) containers; Guaranteed needs every container to limit
/// both and the summed requests to equal the summed limits.
#[derive(Default)]
struct QosTally {
    requests: [Option<i64>; 2],
    limits: [Option<i64>; 2],
    every_container_limits_both: bool,
    containers: usize,
}

const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

impl QosTally {
    fn add_container(&mut self, requests: &Resources, limits: &Resources) {
        if self.containers == 0 {
            self.every_container_limits_both = true;
        }
        self.containers += 1;
        let mut limited = 0;
        for (i, name) in QOS_RESOURCES.iter().enumerate() {
            let request = requests.get(name);
            if request > 0 {
                let sum = self.requests[i].get_or_insert(0);
                *sum = sum.saturating_add(request);
            }
            let limit = limits.get(name);
            if limit > 0 {
                let sum = self.limits[i].get_or_insert(0);
                *sum = sum.saturating_add(limit);
                limited += 1;
            }
        }
        if limited < QOS_RESOURCES.len() {
            self.every_container_limits_both = false;
        }
    }

    fn class(&self) -> QosClass {
        let any = |sums: &[Option<i64>; 2]| sums.iter().any(Option::is_some);
        if !any(&self.requests) && !any(&self.limits) {
            return QosClass::BestEffort;
        }
        let matched = self
            .requests
            .iter()
            .zip(&self.limits)
            .all(|(request, limit)| request.is_none() || request == limit);
        let count = |sums: &[Option<i64>; 2]| sums.iter().flatten().count();
        if self.every_container_limits_both
            && matched
            && count(&self.requests) == count(&self.limits)
        {
            QosClass::Guaranteed
        } else {
            QosClass::Burstable
        }
    }
}

/// The pod-level resources the scheduler and the kubelet honour: cpu and memory.
const POD_LEVEL_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// Pod-level requests of cpu and memory (defaulted from the limits, as the API server
/// does), in the scheduler's units.
fn parse_pod_level(
    r: &k8s_openapi::api::core::v1::ResourceRequirements,
) -> Result<Resources, RequestError> {
    let owner = || "pod-level resources".to_owned();
    let requests = match &r.requests {
        Some(list) => parse_list(list, "requests", owner)?,
        None => Resources::default(),
    };
    let limits = match &r.limits {
        Some(list) => parse_list(list, "limits", owner)?,
        None => Resources::default(),
    };
    Ok(Resources::from_amounts(POD_LEVEL_RESOURCES.iter().map(
        |&name| {
            let request = requests.get(name);
            (
                name,
                if request > 0 {
                    request
                } else {
                    limits.get(name)
                },
            )
        },
    )))
}

/// The QoS class from pod-level resources (ComputePodQOS with PodLevelResources): both
/// cpu and memory limited and every request equal to its limit is Guaranteed; nothing
/// set is BestEffort; anything else Burstable.
fn pod_level_qos(
    r: &k8s_openapi::api::core::v1::ResourceRequirements,
) -> Result<QosClass, RequestError> {
    let owner = || "pod-level resources".to_owned();
    let pick = |list: &Option<QuantityMap>, field| -> Result<Resources, RequestError> {
        let parsed = match list {
            Some(list) => parse_list(list, field, owner)?,
            None => Resources::default(),
        };
        Ok(Resources::from_amounts(
            POD_LEVEL_RESOURCES.iter().map(|&n| (n, parsed.get(n))),
        ))
    };
    // As the API server defaults them: a limit without a request sets the request.
    let limits = pick(&r.limits, "limits")?;
    let mut requests = pick(&r.requests, "requests")?;
    for (name, limit) in limits.iter() {
        if requests.get(name) == 0 {
            requests.add(name, limit);
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return Ok(QosClass::BestEffort);
    }
    let limited = POD_LEVEL_RESOURCES.iter().all(|&n| limits.get(n) > 0);
    let equal = requests.iter().all(|(n, a)| limits.get(n) == a);
    Ok(if limited && equal && requests.len() == limits.len() {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    })
}
