//! Installing TAS as a cluster admin does, on the real nodes of
//! [`tas_testcluster::real_node`]: the image archives built from cargo's binaries
//! (`images/build.sh`, no container engine), helm with a home of its own, the node label
//! the sample object selects, a namespace with its Pod Security level; and the real
//! kubelet's verdicts on pods TAS and the default scheduler placed ([`verdicts`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tas_nodesim::runner::Images;
use tas_nodesim::runner::images::TAS_IMAGES;
use tas_testcluster::real_node::{RealNode, RealNodeCluster, RealNodeOptions};
use tas_testcluster::{TestCluster, Tools};

use crate::chart::CHART_DIR;
use crate::stack::{SAMPLE_NODE_LABEL, SAMPLE_NODE_LABEL_VALUE, wait_available};

mod verdicts;

pub use verdicts::{Verdict, VerdictSetup, VerdictTable, real_node_verdicts};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `images/build.sh` from the binaries cargo built for this run into `out`: the three
/// archives and the `digests` line of each (`<ref> digest=<sha256> id=...`).
pub fn build_images(out: &Path) -> (Vec<PathBuf>, String) {
    let images = Images::from_target_dir();
    let (_, operator) = images
        .binary("tas-operator")
        .expect("the debug binaries (make test builds them)");
    let bin_dir = operator.parent().expect("target dir").to_owned();
    let output = Command::new(repo().join("images/build.sh"))
        .arg("--bin-dir")
        .arg(&bin_dir)
        .arg("--out")
        .arg(out)
        .output()
        .expect("running images/build.sh");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "images/build.sh failed:\n{stderr}");
    let digests = std::fs::read_to_string(out.join("digests")).expect("digests");
    let archives = TAS_IMAGES
        .iter()
        .map(|name| out.join(format!("{name}.tar")))
        .collect();
    (archives, digests)
}

/// helm from the tools directory (built by testcluster/tools/build.sh), with its config,
/// cache and data in `home` rather than the user's; run in the repository's root.
/// Panics with its output on failure.
pub fn helm(home: &Path, args: &[&str]) -> String {
    let output = helm_output(home, args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "helm {} failed:\n{stdout}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The Helm release name the real-node tests install TAS as.
pub const RELEASE: &str = "tas";

/// The namespace the real-node tests install the release into (Pod Security
/// `restricted`).
pub const NAMESPACE: &str = "tas-system";

/// The namespace of the real-node tests' own pods (Pod Security `privileged`).
pub const WORKLOADS: &str = "workloads";

/// What a real-node test starts from: its node (declared first, so dropped before its
/// cluster), the cluster, a client, the kubeconfig's path and a work directory.
pub struct RealNodeTest {
    /// The node.
    pub node: RealNode,
    /// Its private cluster.
    pub cluster: TestCluster,
    /// An admin client of the cluster.
    pub client: Client,
    /// The cluster's kubeconfig, for helm.
    pub kubeconfig: String,
    /// Image archives and helm's home go here.
    pub work: tempfile::TempDir,
}

impl RealNodeTest {
    /// Starts the cluster and the node; `None` when the machine lacks a prerequisite
    /// (said on stderr, naming `test`), as [`RealNodeCluster::start_for_test`].
    pub async fn start(test: &str, options: RealNodeOptions) -> Option<Self> {
        let RealNodeCluster { node, cluster } =
            RealNodeCluster::start_for_test(test, options).await?;
        let client = cluster.client().await.expect("a client");
        let kubeconfig = cluster.kubeconfig_path().to_string_lossy().into_owned();
        let work = tempfile::tempdir().expect("a work dir");
        Some(Self {
            node,
            cluster,
            client,
            kubeconfig,
            work,
        })
    }

    /// Installs TAS as a cluster admin does, on this node: the image archives built and
    /// imported into its containerd, the node labelled for the sample object, the
    /// release namespace ([`NAMESPACE`], Pod Security `restricted`) and the workloads'
    /// ([`WORKLOADS`], `privileged`) created, `helm install` with helm's home in
    /// [`Self::helm_home`], then the object `Available` within `timeout`. Says on stderr
    /// what each step took and the images' digests.
    pub async fn install_tas(&self, timeout: Duration) {
        let started = Instant::now();
        let (archives, digests) = build_images(&self.work.path().join("images"));
        for archive in &archives {
            self.node.import_image(archive).expect("ctr images import");
        }
        eprintln!(
            "images built and imported in {:.1?}:\n{digests}",
            started.elapsed()
        );
        select_for_sample(&self.client, self.node.name())
            .await
            .expect("node labelled");
        for (ns, level) in [(NAMESPACE, "restricted"), (WORKLOADS, "privileged")] {
            create_namespace(&self.client, ns, level)
                .await
                .expect("namespace created");
        }
        let installed = Instant::now();
        helm_install(&self.helm_home(), &self.kubeconfig, NAMESPACE, &[]);
        let took = wait_available(&self.client, 1, timeout)
            .await
            .expect("Available on the real node");
        eprintln!(
            "helm install → Available in {:.1?} ({took:.1?} after the object)",
            installed.elapsed()
        );
    }

    /// helm's home (config, cache, data) for this test's `helm` commands.
    pub fn helm_home(&self) -> PathBuf {
        self.work.path().join("helm")
    }
}

/// `helm install` of the chart as [`RELEASE`] into `namespace`, as the real-node tests
/// install TAS: the TopologyAwareScheduling object created, one operator replica;
/// `extra` arguments (`--set ...`) follow. Panics with helm's output on failure.
pub fn helm_install(home: &Path, kubeconfig: &str, namespace: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "install",
        RELEASE,
        CHART_DIR,
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        namespace,
        "--set",
        "topologyAwareScheduling.create=true",
        "--set",
        "operator.replicas=1",
    ];
    args.extend_from_slice(extra);
    helm(home, &args)
}

/// `helm <args>` as [`helm`] runs it, whatever its outcome.
pub fn helm_output(home: &Path, args: &[&str]) -> std::process::Output {
    let helm = Tools::locate().expect("the cluster tools").binary("helm");
    Command::new(&helm)
        .args(args)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .current_dir(repo())
        .output()
        .expect("helm runs")
}

/// Labels `node` so that the sample object's node group selects it.
pub async fn select_for_sample(client: &Client, node: &str) -> Result<(), kube::Error> {
    Api::<Node>::all(client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {SAMPLE_NODE_LABEL: SAMPLE_NODE_LABEL_VALUE}}}),
            ),
        )
        .await
        .map(|_| ())
}

/// Creates namespace `name` enforcing the Pod Security `level`, as the guide says to
/// before `helm install`.
pub async fn create_namespace(client: &Client, name: &str, level: &str) -> Result<(), kube::Error> {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                [(
                    "pod-security.kubernetes.io/enforce".to_owned(),
                    level.to_owned(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .map(|_| ())
}
