//! Seeded random machines, kubelet settings and pods for the differential test.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use tas_nodesim::referee::{Core, Device, Machine, Zone};

pub const GPU: &str = "example.com/gpu";
const GI: u64 = 1 << 30;
const MI: u64 = 1 << 20;

/// 2–8 zones on one or two sockets, SMT on or off, memory with 1Gi/2Mi hugepages on
/// some, GPUs with NUMA affinity on some (one without topology now and then), and a
/// distance matrix with nearer and farther zones.
pub fn machine(rng: &mut StdRng) -> Machine {
    let n = rng.random_range(2..=8u32);
    let sockets = if n >= 4 && rng.random_bool(0.5) { 2 } else { 1 };
    let threads = if rng.random_bool(0.5) { 2 } else { 1 };
    let cores_per_zone: Vec<u32> = (0..n).map(|_| rng.random_range(2..=5)).collect();
    let total_cores: u32 = cores_per_zone.iter().sum();
    let huge_1g = rng.random_bool(0.35);
    let huge_2m = rng.random_bool(0.2);
    let gpus = rng.random_bool(0.5);
    let socket_of = |z: u32| z * sockets / n;
    // Symmetric distances: 10 local, nearer within a socket than across.
    let mut dist = vec![vec![10u32; n as usize]; n as usize];
    for a in 0..n {
        for b in a + 1..n {
            let d = if socket_of(a) == socket_of(b) {
                rng.random_range(11..=21)
            } else {
                rng.random_range(22..=32)
            };
            dist[a as usize][b as usize] = d;
            dist[b as usize][a as usize] = d;
        }
    }
    let mut zones = Vec::new();
    let mut next_core = 0;
    let mut devices = Vec::new();
    for z in 0..n {
        let mut cores = Vec::new();
        for _ in 0..cores_per_zone[z as usize] {
            let cpus = (0..threads).map(|t| next_core + t * total_cores).collect();
            cores.push(Core {
                socket: socket_of(z),
                cpus,
            });
            next_core += 1;
        }
        let mut hugepages = BTreeMap::new();
        let mut huge_bytes = 0;
        if huge_1g {
            let pages = rng.random_range(0..=3);
            hugepages.insert("1Gi".to_owned(), pages);
            huge_bytes += pages * GI;
        }
        if huge_2m {
            let pages = rng.random_range(0..=4) * 256;
            hugepages.insert("2Mi".to_owned(), pages);
            huge_bytes += pages * 2 * MI;
        }
        if gpus {
            for i in 0..rng.random_range(0..=2) {
                devices.push(Device {
                    id: format!("gpu-{z}-{i}"),
                    numa: Some(z),
                });
            }
        }
        zones.push(Zone {
            id: z,
            memory: rng.random_range(8..=32) * 512 * MI + huge_bytes,
            hugepages,
            cores,
            distances: dist[z as usize].clone(),
        });
    }
    if gpus && rng.random_bool(0.15) {
        devices.push(Device {
            id: "gpu-x".into(),
            numa: None,
        });
    }
    let mut m = Machine {
        zones,
        devices: BTreeMap::new(),
    };
    if !devices.is_empty() {
        m.devices.insert(GPU.to_owned(), devices);
    }
    m
}

/// Every Topology Manager policy and scope, CPU manager static or none, memory manager
/// Static or None, `prefer-closest-numa-nodes` on some, reserved CPUs and memory.
pub fn kubelet(rng: &mut StdRng, machine: &Machine) -> Value {
    const POLICIES: [&str; 4] = ["none", "best-effort", "restricted", "single-numa-node"];
    let policy = POLICIES[rng.random_range(0..4)];
    let scope = if rng.random_bool(0.5) {
        "container"
    } else {
        "pod"
    };
    let cpu_static = rng.random_bool(0.75);
    let mem_static = rng.random_bool(0.6);
    // Reserve the first core (with its siblings) or one CPU of each of the first two zones.
    let reserved: Vec<u32> = if rng.random_bool(0.6) {
        machine.zones[0].cores[0].cpus.clone()
    } else {
        vec![
            machine.zones[0].cores[0].cpus[0],
            machine.zones[1].cores[0].cpus[0],
        ]
    };
    let reserved: Vec<String> = reserved.iter().map(u32::to_string).collect();
    let mut k = json!({
        "topologyManagerPolicy": policy,
        "topologyManagerScope": scope,
        "cpuManagerPolicy": if cpu_static { "static" } else { "none" },
        "reservedSystemCPUs": reserved.join(","),
        "memoryManagerPolicy": if mem_static { "Static" } else { "None" },
        "kubeReserved": {"memory": "512Mi"},
    });
    if mem_static {
        // kube-reserved + the default 100Mi hard eviction threshold, on one or two zones.
        k["reservedMemory"] = if rng.random_bool(0.5) {
            json!([{"numaNode": 0, "limits": {"memory": "612Mi"}}])
        } else {
            json!([{"numaNode": 0, "limits": {"memory": "512Mi"}},
                   {"numaNode": 1, "limits": {"memory": "100Mi"}}])
        };
    }
    if policy != "none" && rng.random_bool(0.3) {
        k["topologyManagerPolicyOptions"] = json!({"prefer-closest-numa-nodes": "true"});
    }
    k
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Qos {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// A pod: Guaranteed (mostly), Burstable or BestEffort; integer or fractional CPU,
/// memory, hugepages and GPUs as the machine has them; init containers and restartable
/// sidecars on some.
pub fn pod(rng: &mut StdRng, machine: &Machine, uid: &str) -> Pod {
    let qos = match rng.random_range(0..100) {
        0..60 => Qos::Guaranteed,
        60..85 => Qos::Burstable,
        _ => Qos::BestEffort,
    };
    let sizes: Vec<&String> = machine
        .zones
        .first()
        .map(|z| z.hugepages.keys().collect())
        .unwrap_or_default();
    let gpus = machine.devices.contains_key(GPU);
    let container = |rng: &mut StdRng, name: String, restart: Option<&str>| {
        let mut limits = serde_json::Map::new();
        let mut requests = serde_json::Map::new();
        if qos != Qos::BestEffort {
            let cpu = if rng.random_bool(0.15) {
                format!("{}m", rng.random_range(1..=7) * 250)
            } else {
                rng.random_range(1..=4).to_string()
            };
            let mem = format!("{}Mi", rng.random_range(1..=24) * 256);
            limits.insert("cpu".into(), cpu.clone().into());
            limits.insert("memory".into(), mem.clone().into());
            if qos == Qos::Burstable {
                requests.insert("cpu".into(), "500m".into());
                if rng.random_bool(0.5) {
                    requests.insert("memory".into(), "256Mi".into());
                }
            }
        }
        if !sizes.is_empty() && qos != Qos::BestEffort && rng.random_bool(0.3) {
            let size = sizes[rng.random_range(0..sizes.len())];
            let amount = if size == "1Gi" {
                format!("{}Gi", rng.random_range(1..=2))
            } else {
                format!("{}Mi", rng.random_range(1..=4) * 128)
            };
            limits.insert(format!("hugepages-{size}"), amount.into());
        }
        if gpus && rng.random_bool(0.25) {
            limits.insert(GPU.into(), rng.random_range(1..=2).to_string().into());
        }
        let mut c = json!({"name": name, "image": "x", "resources": {}});
        if !limits.is_empty() {
            c["resources"]["limits"] = Value::Object(limits);
        }
        if !requests.is_empty() {
            c["resources"]["requests"] = Value::Object(requests);
        }
        if let Some(r) = restart {
            c["restartPolicy"] = r.into();
        }
        c
    };
    let mut inits = Vec::new();
    if rng.random_bool(0.25) {
        for i in 0..rng.random_range(1..=2) {
            let sidecar = rng.random_bool(0.4);
            let name = if sidecar {
                format!("sidecar{i}")
            } else {
                format!("init{i}")
            };
            inits.push(container(rng, name, sidecar.then_some("Always")));
        }
    }
    let apps: Vec<Value> = (0..rng.random_range(1..=3))
        .map(|i| container(rng, format!("app{i}"), None))
        .collect();
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"initContainers": inits, "containers": apps},
    });
    // Built from literals above: every field has the shape the type expects.
    serde_json::from_value(pod).expect("a well-formed pod")
}
