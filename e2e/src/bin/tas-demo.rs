//! `make demo`: the whole TAS stack on a local control plane with simulated NUMA nodes.
//!
//! Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok; installs
//! TAS from `config/default`; creates the scenario's simulated nodes; applies one
//! TopologyAwareScheduling object; the node simulator's pod runner starts the operator
//! (from config/default's Deployment) and the node agents and the scheduler (from the
//! DaemonSet and Deployment the operator rendered) as processes, and the demo lists them; places the scenario's workload with TAS, then the
//! same workload with the default scheduler; prints where every pod went and how many
//! pods the (simulated) kubelets rejected; ends with `kubectl tas nodes` and `kubectl tas
//! explain` of a pod no NUMA zone can hold. The cluster stays up until Ctrl-C.
//! `--real-node` adds a real kubelet node and prints its own verdicts beside.

use anyhow::Context;
use clap::Parser;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tas_e2e::real_node::{
    VerdictSetup, VerdictTable, build_images, real_node_verdicts, select_for_sample,
};
use tas_e2e::stack::{self, Report};
use tas_nodesim::Scenario;
use tas_testcluster::real_node::{DeviceOptions, RealNode, RealNodeOptions};
use tas_testcluster::{ClusterOptions, TestCluster, unique_namespace};

/// The whole TAS stack on a private local control plane with simulated NUMA nodes, and a
/// report of where TAS and the default scheduler put the same pods.
///
/// Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok as child
/// processes (binaries from $TAS_TOOLS_BIN, else the cache `make cluster-tools` fills),
/// installs `config/default` with `kubectl apply --server-side -k`, creates the
/// scenario's simulated nodes and applies the sample TopologyAwareScheduling object. No
/// container runs: the operator, the node agents and the scheduler run inside this
/// process, the operands with the command lines and configuration the operator rendered.
/// Then it places the scenario's workload with TAS and with the default scheduler,
/// prints the placements and the pods the simulated kubelets rejected, then `kubectl tas
/// nodes` and `kubectl tas explain` of a Pending pod, and keeps the cluster up until
/// Ctrl-C (unless --no-wait).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Scenario file (nodes and workload; format in nodesim/README.md), relative to the
    /// current directory.
    #[arg(long, default_value = "nodesim/scenarios/default.yaml")]
    scenario: PathBuf,
    /// Exit after printing the report instead of keeping the cluster up.
    #[arg(long)]
    no_wait: bool,
    /// Add a real node: containerd and a real kubelet (static CPU manager,
    /// single-numa-node, two fake NUMA nodes, a device on NUMA node 0) in namespaces of
    /// their own, TAS's node agent on it as a real container from the image archives
    /// (`images/build.sh`); then show the real kubelet's verdicts on the same pods given
    /// to TAS and to the default scheduler. Needs root, the node runtime, the kubelet and
    /// the sandbox image: `make demo REAL_NODE=1` provides them.
    #[arg(long)]
    real_node: bool,
}

const NAMESPACE: &str = "tas-system";
/// The real node's name, its taint (the scenario's workload stays off it) and device.
const REAL_NODE: &str = "real-node-1";
const REAL_NODE_TAINT: &str = "tas.dev/demo-real-node";
const DEVICE: &str = "tas.dev/nic";
const TIMEOUT: Duration = Duration::from_secs(180);

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let scenario = Scenario::load(&args.scenario)
        .context("loading the scenario")?
        .with_node_label(stack::SAMPLE_NODE_LABEL, stack::SAMPLE_NODE_LABEL_VALUE);
    eprintln!(
        "starting a local control plane (etcd, kube-apiserver, controller-manager, kube-scheduler, kwok)..."
    );
    let mut options = ClusterOptions::full();
    if args.real_node {
        // The real node's pods reach the API server through the `kubernetes` Service.
        options.advertise_address = Some(RealNodeOptions::new(REAL_NODE).api_ip);
    }
    let cluster = TestCluster::start(options).context("starting the control plane")?;
    let client = cluster.client().await?;
    eprintln!("installing TAS: kubectl apply --server-side -k config/default");
    stack::install_default(&cluster)?;
    let work = tempfile::tempdir()?;
    eprintln!("creating {} simulated NUMA nodes", scenario.nodes().len());
    let sim = stack::start_simulator(&client, &scenario, work.path()).await?;
    eprintln!("starting the pod runner: TAS's pods run as processes on the simulated nodes");
    let runner = stack::start_runner(&cluster, &client, &sim).await?;
    stack::wait_operator_pods(&client, &runner, NAMESPACE, TIMEOUT).await?;
    eprintln!("applying config/samples/tas_v1alpha1_topologyawarescheduling.yaml");
    let applied = Instant::now();
    stack::apply_cr(&client, &stack::sample_cr()?).await?;
    stack::wait_available(&client, scenario.nodes().len(), TIMEOUT).await?;
    let available_after = applied.elapsed();
    eprintln!(
        "Available after {:.1}s; placing the workload with TAS",
        available_after.as_secs_f64()
    );

    let real_node = match args.real_node {
        true => Some(add_real_node(&cluster, &client, &scenario, work.path()).await?),
        false => None,
    };

    let ns = unique_namespace(&client, "demo-tas").await?;
    stack::run_workload(&client, &scenario, "topology-aware-scheduler", &ns).await?;
    let tas = stack::wait_settled(&client, &ns, &sim, TIMEOUT).await?;
    eprintln!("placing the same workload with the default scheduler");
    let ns2 = unique_namespace(&client, "demo-default").await?;
    {
        use k8s_openapi::api::core::v1::Namespace;
        let api: kube::Api<Namespace> = kube::Api::all(client.clone());
        api.delete(&ns, &Default::default()).await?;
        stack::wait_settled(&client, &ns, &sim, TIMEOUT).await?;
    }
    stack::run_workload(&client, &scenario, "default-scheduler", &ns2).await?;
    let default = stack::wait_settled(&client, &ns2, &sim, TIMEOUT).await?;
    println!(
        "{}",
        Report::new(&scenario, available_after, &tas, Some(&default))
    );
    println!("\nTAS's processes (started by the pod runner from the pod specs):");
    println!("  {:<40} {:<12} {:>8}", "POD", "NODE", "PID");
    for p in runner.processes() {
        println!(
            "  {:<40} {:<12} {:>8}",
            format!("{}/{}", p.namespace, p.pod),
            p.node,
            p.pid
        );
    }
    if let Some(node) = &real_node {
        let ns = unique_namespace(&client, "demo-real-node").await?;
        let verdicts = real_node_verdicts(
            &client,
            &VerdictSetup {
                namespace: &ns,
                node: node.name(),
                taint: REAL_NODE_TAINT,
                tas_scheduler: "topology-aware-scheduler",
                device: DEVICE,
                timeout: TIMEOUT,
            },
        )
        .await?;
        println!(
            "\nThe real kubelet's own verdicts on {} (CPU 0 on NUMA node 0 is reserved, CPU 1 on node 1 is the one exclusive CPU, one {DEVICE} is on node 0; single-numa-node):",
            node.name()
        );
        print!("{}", VerdictTable(&verdicts));
    }
    // Why a pod waits: with the default scheduler's pods gone, one pod that fits the
    // single-numa-node nodes as a whole but none of their zones, and what `kubectl tas`
    // says about it.
    {
        use k8s_openapi::api::core::v1::Namespace;
        let api: kube::Api<Namespace> = kube::Api::all(client.clone());
        api.delete(&ns2, &Default::default()).await?;
        stack::wait_settled(&client, &ns2, &sim, TIMEOUT).await?;
    }
    let ns3 = unique_namespace(&client, "demo-pending").await?;
    let pending = stack::create_oversized_pod(&client, &ns3, "topology-aware-scheduler").await?;
    stack::wait_failed_scheduling(&client, &ns3, &pending, TIMEOUT).await?;
    println!("\n$ kubectl tas nodes");
    print!("{}", stack::kubectl_tas(&cluster, &["nodes"]).await?);
    println!("\n$ kubectl tas explain {pending} -n {ns3}");
    print!(
        "{}",
        stack::kubectl_tas(&cluster, &["explain", &pending, "-n", &ns3]).await?
    );
    if args.no_wait {
        runner.shutdown().await;
        return Ok(());
    }
    // The kubectl the demo used (from the tools cache), which need not be on PATH.
    let kubectl = cluster.binaries_dir().join("kubectl");
    println!(
        "\nThe cluster keeps running. Point kubectl at it (the demo's kubectl is {kubectl}):\n  export KUBECONFIG={}\n  {kubectl} get tas,noderesourcetopologies\n  {kubectl} describe pod -n {ns3} {pending}\n  cargo run -q -p kubectl-tas -- explain {pending} -n {ns3}\nPress Ctrl-C to stop it (every process and file of the demo goes away).",
        cluster.kubeconfig_path().display(),
        kubectl = kubectl.display(),
    );
    tokio::signal::ctrl_c().await?;
    runner.shutdown().await;
    Ok(())
}

/// Starts the real node, imports TAS's images into its containerd, lets the sample
/// object select it and waits until its node agent (a real container) publishes; then
/// taints it, so that only the verdict pods (which tolerate the taint) go there.
async fn add_real_node(
    cluster: &TestCluster,
    client: &kube::Client,
    scenario: &Scenario,
    work: &std::path::Path,
) -> anyhow::Result<RealNode> {
    eprintln!("starting a real node: containerd + kubelet + kube-proxy in namespaces of their own");
    let node = RealNode::start(
        cluster,
        RealNodeOptions {
            kube_proxy: true,
            device: Some(DeviceOptions {
                resource: DEVICE.into(),
                numa_node: 0,
                count: 1,
            }),
            ..RealNodeOptions::new(REAL_NODE)
        },
    )
    .await
    .context("starting the real node (make demo REAL_NODE=1 installs and builds what it needs)")?;
    eprintln!(
        "building TAS's image archives (images/build.sh) and importing them into the node's containerd"
    );
    let (archives, _) = build_images(&work.join("images"));
    for archive in &archives {
        node.import_image(archive)?;
    }
    select_for_sample(client, node.name()).await?;
    stack::wait_available(client, scenario.nodes().len() + 1, TIMEOUT).await?;
    eprintln!(
        "the node agent runs on {} as a real container; its NRT is fresh",
        node.name()
    );
    kube::Api::<Node>::all(client.clone())
        .patch(
            node.name(),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"taints": [
                {"key": REAL_NODE_TAINT, "effect": "NoSchedule"}
            ]}})),
        )
        .await?;
    Ok(node)
}
