//! A DRA driver on a real node: TAS allocates a GPU claim on the NUMA zone of the pod's
//! exclusive CPU, the real kubelet prepares it through the driver, and the container
//! the runtime starts shows the device it was given.
//!
//! The node ([`tas_testcluster::real_node`]) has the fake two-NUMA layout (CPU 0 on
//! node 0, reserved; CPU 1 on node 1, the one exclusive CPU) and runs the tests' DRA
//! driver (`tas-dradriver`, registered in the kubelet's `plugins_registry` as a DaemonSet
//! driver is), which publishes `gpu-0` on NUMA node 0 and `gpu-1` on NUMA node 1 — the
//! wrong zone's GPU first, so an allocator blind to zones takes it — and prepares claims
//! with CDI specs that set `TAS_DRA_<DEVICE>` in the container; containerd 2 injects
//! them. TAS is installed as an admin does (images, `helm install`).
//!
//! Asserted: TAS's pod runs; its claim holds `gpu-1`, whose `numaNode` is the NUMA node
//! of the container's cpuset (read from its processes and its cgroup, mapped through
//! the node's sysfs); the kubelet's DRA checkpoint records that device as prepared by
//! the driver, with the CDI device the driver returned; the container's environment
//! names exactly that device; deleting
//! the pod unprepares the claim (its CDI spec goes); stopping the driver deletes its
//! ResourceSlice. The default kube-scheduler's copy of the pod is reported beside it
//! (it allocates without looking at the kubelet's CPUs; the kubelet runs it whatever
//! zone its GPU is on, as DRA devices give the Topology Manager no hints).
//!
//! Without a prerequisite of real nodes (root, containerd, the kubelet, the DRA driver,
//! the sandbox image) it says which and passes; `make test` provides them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tas_api::tas::DEFAULT_SCHEDULER_NAME;
use tas_e2e::dra;
use tas_e2e::real_node::{RealNodeTest, WORKLOADS};
use tas_testcluster::real_node::{DraOptions, RealNode, RealNodeOptions, guaranteed_pod};
use tas_testcluster::wait_for;

const DRIVER: &str = "gpu.tas.dev";
const NUMA_ATTRIBUTE: &str = "resource.kubernetes.io/numaNode";
const TIMEOUT: Duration = Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tas_aligns_a_dra_gpu_with_the_cpus_on_a_real_kubelet() {
    let options = RealNodeOptions {
        kube_proxy: true,
        dra: Some(DraOptions {
            driver: DRIVER.into(),
            gpus_per_numa_node: 1,
        }),
        ..RealNodeOptions::new("real-node-dra")
    };
    let Some(mut test) = RealNodeTest::start("real_node_dra", options).await else {
        return;
    };
    let started = Instant::now();
    let client = test.client.clone();

    // The driver's slice: one GPU per NUMA node of the node's sysfs.
    let gpus = published_gpus(&client, test.node.name()).await;
    assert_eq!(
        gpus,
        [("gpu-0".to_owned(), 0), ("gpu-1".to_owned(), 1)].into(),
        "the driver's GPUs and their numaNode"
    );
    eprintln!(
        "[{:>5.1?}] driver registered, slice published: {gpus:?}",
        started.elapsed()
    );

    test.install_tas(TIMEOUT).await;
    eprintln!("[{:>5.1?}] TAS installed and Available", started.elapsed());

    dra::create(
        &Api::<DeviceClass>::all(client.clone()),
        dra::device_class(DRIVER),
    )
    .await;
    dra::create(
        &Api::<ResourceClaimTemplate>::namespaced(client.clone(), WORKLOADS),
        dra::gpu_claim_template("one-gpu", DRIVER),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), WORKLOADS);
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), WORKLOADS);
    let numa = numa_of_cpus(&test.node.system_dir());

    // TAS: the GPU on the zone of the exclusive CPU.
    let got = run_with_gpu(&pods, &claims, "gpu-tas", Some(DEFAULT_SCHEDULER_NAME)).await;
    let gpu_zone = gpus[&got.device];
    let cpu_zones: BTreeSet<i64> = got.cpus.iter().map(|c| numa[c]).collect();
    assert_eq!(
        cpu_zones,
        [gpu_zone].into(),
        "TAS allocated {} (NUMA node {gpu_zone}); the kubelet pinned the container to CPUs {:?}",
        got.device,
        got.cpus
    );
    assert_eq!(
        got.injected,
        injected_env(&got.device, gpu_zone),
        "the container's environment names the allocated device only"
    );
    eprintln!(
        "[{:>5.1?}] TAS: {} (NUMA node {gpu_zone}), container cpuset {:?} (NUMA node {cpu_zones:?}), \
         environment {:?}",
        started.elapsed(),
        got.device,
        got.cpus,
        got.injected
    );
    let spec = test
        .node
        .cdi_dir()
        .join(format!("tas.dev-gpu-{}.json", got.claim_uid));
    assert!(spec.is_file(), "the driver's CDI spec {}", spec.display());
    let prepared = kubelet_prepared(&test.node.kubelet_root(), &got.claim_uid);
    assert_eq!(
        prepared,
        [(
            got.device.clone(),
            vec![format!("tas.dev/gpu={}-{}", got.claim_uid, got.device)]
        )],
        "the kubelet's DRA checkpoint: the device the driver prepared and its CDI device"
    );
    delete_and_wait(&pods, "gpu-tas").await;
    wait_for(
        "the claim unprepared (its CDI spec removed)",
        TIMEOUT,
        || async { Ok::<_, kube::Error>((!spec.exists()).then_some(())) },
    )
    .await
    .expect("unprepared");

    // The default scheduler on the same node, same claim, reported beside it.
    let mut default = guaranteed_pod("gpu-default", None, 1, None);
    if let Some(spec) = default.spec.as_mut() {
        spec.node_selector = Some(
            [(
                "kubernetes.io/hostname".to_owned(),
                test.node.name().to_owned(),
            )]
            .into(),
        );
    }
    let got = run_pod_with_gpu(&pods, &claims, default).await;
    let zone = gpus[&got.device];
    let cpu_zones: BTreeSet<i64> = got.cpus.iter().map(|c| numa[c]).collect();
    assert_eq!(got.injected, injected_env(&got.device, zone));
    eprintln!(
        "[{:>5.1?}] kube-scheduler: {} (NUMA node {zone}), container cpuset {:?} (NUMA node \
         {cpu_zones:?}): {}",
        started.elapsed(),
        got.device,
        got.cpus,
        if cpu_zones == [zone].into() {
            "aligned"
        } else {
            "NOT aligned, and the kubelet ran it"
        }
    );
    delete_and_wait(&pods, "gpu-default").await;

    // Stopping the driver takes its slice away.
    let status = test.node.stop_dra_driver().await.expect("the driver stops");
    assert_eq!(status, "0", "the driver's exit status; {}", log(&test.node));
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let left = slices
        .list(&ListParams::default().fields(&format!("spec.nodeName={}", test.node.name())))
        .await
        .expect("slices");
    assert!(left.items.is_empty(), "slices left: {:?}", left.items);
    eprintln!("real-node DRA test done in {:.1?}", started.elapsed());
    // The node goes first, then its cluster.
    drop(test);
}

/// What a pod with a GPU claim was given.
struct Given {
    device: String,
    claim_uid: String,
    cpus: BTreeSet<u32>,
    injected: BTreeMap<String, String>,
}

/// Creates a Guaranteed 1-CPU pod for `scheduler` with a claim from `one-gpu`, waits
/// until it runs and reads what it was given.
async fn run_with_gpu(
    pods: &Api<Pod>,
    claims: &Api<ResourceClaim>,
    name: &str,
    scheduler: Option<&str>,
) -> Given {
    run_pod_with_gpu(pods, claims, guaranteed_pod(name, scheduler, 1, None)).await
}

async fn run_pod_with_gpu(pods: &Api<Pod>, claims: &Api<ResourceClaim>, mut pod: Pod) -> Given {
    let name = pod.name_any();
    let spec = pod.spec.as_mut().expect("spec");
    spec.resource_claims = Some(vec![
        serde_json::from_value(json!({"name": "gpu", "resourceClaimTemplateName": "one-gpu"}))
            .expect("claim"),
    ]);
    let resources = spec.containers[0].resources.as_mut().expect("resources");
    resources.claims = Some(vec![
        serde_json::from_value(json!({"name": "gpu"})).expect("claim"),
    ]);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    let claim = dra::generated_claim(pods, &name).await;
    let pod = dra::wait_running(pods, &name).await;
    let device = dra::allocated_device(claims, &claim, &pod, DRIVER).await;
    let claim_uid = claims
        .get(&claim)
        .await
        .expect("claim")
        .uid()
        .unwrap_or_default();
    let container = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.container_id.clone())
        .expect("a container id");
    let (cpus, injected) = container_view(&container);
    Given {
        device,
        claim_uid,
        cpus,
        injected,
    }
}

/// The environment the driver's CDI spec sets for `device` on NUMA node `zone`.
fn injected_env(device: &str, zone: i64) -> BTreeMap<String, String> {
    let var = format!("TAS_DRA_{}", device.to_uppercase().replace('-', "_"));
    [
        (var.clone(), device.to_owned()),
        (format!("{var}_NUMA_NODE"), zone.to_string()),
    ]
    .into()
}

/// The container's cpuset and the `TAS_DRA_*` variables of its environment, read from
/// its processes (`/proc/<pid>/{cgroup,status,environ}`) and its cpuset cgroup; the two
/// cpusets must agree.
fn container_view(container_id: &str) -> (BTreeSet<u32>, BTreeMap<String, String>) {
    let id = container_id.rsplit("://").next().unwrap_or(container_id);
    let mut found = None;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let dir = entry.path();
        let Ok(cgroup) = std::fs::read_to_string(dir.join("cgroup")) else {
            continue;
        };
        if !cgroup.contains(id) {
            continue;
        }
        let (Ok(status), Ok(environ)) = (
            std::fs::read_to_string(dir.join("status")),
            std::fs::read(dir.join("environ")),
        ) else {
            continue;
        };
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(cpu_list)
            .unwrap_or_default();
        // cgroup v1's cpuset hierarchy (this machine's), or v2's unified one.
        let cpuset = cgroup.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let file = if controllers.split(',').any(|c| c == "cpuset") {
                format!("/sys/fs/cgroup/cpuset{path}/cpuset.cpus")
            } else if controllers.is_empty() {
                format!("/sys/fs/cgroup{path}/cpuset.cpus.effective")
            } else {
                return None;
            };
            std::fs::read_to_string(file).ok().map(|s| cpu_list(&s))
        });
        let cpuset = cpuset.unwrap_or_else(|| panic!("no cpuset cgroup in {cgroup}"));
        assert_eq!(cpuset, allowed, "the cgroup's cpuset and the process's");
        let env = environ
            .split(|b| *b == 0)
            .filter_map(|kv| std::str::from_utf8(kv).ok()?.split_once('='))
            .filter(|(k, _)| k.starts_with("TAS_DRA_"))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        found = Some((allowed, env));
        break;
    }
    found.unwrap_or_else(|| panic!("no process of container {id} in /proc"))
}

/// The CPUs of a kernel cpulist (`0-2,5`).
fn cpu_list(list: &str) -> BTreeSet<u32> {
    let mut cpus = BTreeSet::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
            cpus.extend(a..=b);
        }
    }
    cpus
}

/// What the kubelet's DRA checkpoint (`dra_manager_state`) records as prepared by
/// [`DRIVER`] for the claim: each device and its CDI device ids.
fn kubelet_prepared(kubelet_root: &Path, claim_uid: &str) -> Vec<(String, Vec<String>)> {
    let path = kubelet_root.join("dra_manager_state");
    let outer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("the kubelet's DRA checkpoint"))
            .expect("JSON");
    let data: serde_json::Value =
        serde_json::from_str(outer["Data"].as_str().expect("Data")).expect("JSON data");
    let claims = data["ClaimInfoStateList"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let claim = claims
        .iter()
        .find(|c| c["ClaimUID"] == claim_uid)
        .unwrap_or_else(|| panic!("claim {claim_uid} not in {}", path.display()));
    claim["DriverState"][DRIVER]["Devices"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            let cdi = d["CDIDeviceIDs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|id| id.as_str().map(str::to_owned))
                .collect();
            (d["DeviceName"].as_str().unwrap_or_default().to_owned(), cdi)
        })
        .collect()
}

/// CPU → NUMA node, from the node's sysfs (`node/node<N>/cpulist`).
fn numa_of_cpus(system: &Path) -> BTreeMap<u32, i64> {
    let mut map = BTreeMap::new();
    for entry in std::fs::read_dir(system.join("node"))
        .expect("the node's sysfs")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(n) = name
            .strip_prefix("node")
            .and_then(|n| n.parse::<i64>().ok())
        else {
            continue;
        };
        let list = std::fs::read_to_string(entry.path().join("cpulist")).expect("cpulist");
        map.extend(cpu_list(&list).into_iter().map(|c| (c, n)));
    }
    assert!(!map.is_empty(), "no NUMA node in {}", system.display());
    map
}

/// The driver's devices on `node` and their `numaNode`, once its slice is published.
async fn published_gpus(client: &Client, node: &str) -> BTreeMap<String, i64> {
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    wait_for("the driver's ResourceSlice", TIMEOUT, || async {
        let list = slices
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await?;
        let gpus: BTreeMap<String, i64> = list
            .items
            .iter()
            .filter(|s| s.spec.driver == DRIVER)
            .flat_map(|s| s.spec.devices.iter().flatten())
            .map(|d| {
                let zone = d
                    .attributes
                    .as_ref()
                    .and_then(|a| a.get(NUMA_ATTRIBUTE))
                    .and_then(|a| a.int)
                    .unwrap_or(-1);
                (d.name.clone(), zone)
            })
            .collect();
        Ok::<_, kube::Error>((!gpus.is_empty()).then_some(gpus))
    })
    .await
    .expect("published")
}

async fn delete_and_wait(pods: &Api<Pod>, name: &str) {
    let _ = pods.delete(name, &DeleteParams::default()).await;
    wait_for(format!("pod {name} to be gone"), TIMEOUT, || async {
        Ok::<_, kube::Error>(pods.get_opt(name).await?.is_none().then_some(()))
    })
    .await
    .expect("pod deleted");
}

fn log(node: &RealNode) -> String {
    tas_testcluster::tail_lines(&node.dra_driver_log(), 20)
}
