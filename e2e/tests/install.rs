//! The install manifests on the real API server: `kubectl apply --server-side -k
//! config/default` creates the operator's namespace, CRD, RBAC, Deployment, Service,
//! admission policy and its NetworkPolicy; applying again changes nothing; the operator's
//! pods meet the `restricted` Pod Security level; its RBAC allows what the operator does
//! and refuses what it must not do; the samples are valid TopologyAwareScheduling
//! objects.
//!
//! The operator pods do not run here (there is no image); that the installed operator
//! reconciles a stack is the full-stack tests' business.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::{Value, json};
use tas_testcluster::{TestCluster, access, unique_namespace, wait_for};

const NAMESPACE: &str = "tas-system";
/// The node agents' namespace (config/manager/namespace.yaml).
const AGENTS_NAMESPACE: &str = "tas-node";
const OPERATOR: &str = "tas-operator";
const TAS_CRD: &str = "topologyawareschedulings.tas.dev";
const NRT_CRD: &str = "noderesourcetopologies.topology.node.k8s.io";
const TIMEOUT: Duration = Duration::from_secs(30);

/// Installs once per test binary (tests run in parallel and share the cluster).
static INSTALLED: tokio::sync::Mutex<bool> = tokio::sync::Mutex::const_new(false);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn shared() -> &'static TestCluster {
    TestCluster::shared().expect("the shared test cluster starts")
}

/// Runs the cluster's kubectl against it; its stdout, or a panic with its stderr.
async fn kubectl(cluster: &TestCluster, args: &[&str]) -> String {
    let output = tokio::process::Command::new(cluster.binaries_dir().join("kubectl"))
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(args)
        .current_dir(repo())
        .output()
        .await
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "kubectl {} failed:\n{stdout}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// `kubectl apply --server-side -k config/default`, as the README and the user guide say,
/// once per test binary.
async fn install(cluster: &TestCluster) {
    let mut installed = INSTALLED.lock().await;
    if !*installed {
        kubectl(cluster, &["apply", "--server-side", "-k", "config/default"]).await;
        *installed = true;
    }
}

/// The objects `kubectl kustomize config/default` renders.
async fn rendered(cluster: &TestCluster) -> Vec<Value> {
    let yaml = kubectl(cluster, &["kustomize", "config/default"]).await;
    serde_norway::Deserializer::from_str(&yaml)
        .map(|doc| Value::deserialize(doc).expect("kustomize renders YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

/// Each installed object's generation (its spec's revision), or its resourceVersion
/// for kinds without one; status updates by controllers move neither.
async fn revisions(cluster: &TestCluster) -> Vec<(String, String)> {
    let json = kubectl(cluster, &["get", "-k", "config/default", "-o", "json"]).await;
    let list: Value = serde_json::from_str(&json).expect("kubectl prints JSON");
    let mut out: Vec<(String, String)> = list["items"]
        .as_array()
        .expect("a List")
        .iter()
        .map(|o| {
            let meta = &o["metadata"];
            let key = format!("{} {}/{}", o["kind"], meta["namespace"], meta["name"]);
            let revision = match meta.get("generation") {
                Some(g) => format!("generation {g}"),
                None => format!("resourceVersion {}", meta["resourceVersion"]),
            };
            (key, revision)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn config_default_installs_the_operator_and_reapplies_unchanged() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    install(cluster).await;

    // Applying again (an upgrade to the same release) changes no object.
    let before = revisions(cluster).await;
    let again = kubectl(cluster, &["apply", "--server-side", "-k", "config/default"]).await;
    assert_eq!(
        revisions(cluster).await,
        before,
        "re-apply changed objects:\n{again}"
    );

    // Each namespace at the Pod Security level its pods need: the operator and the
    // scheduler `restricted`, the node agents (hostPath, uid 0) `privileged` in a
    // namespace of their own, where the installer binds the operator its rights.
    let level =
        |ns: Namespace| ns.metadata.labels.unwrap()["pod-security.kubernetes.io/enforce"].clone();
    let namespaces = Api::<Namespace>::all(client.clone());
    assert_eq!(
        level(namespaces.get(NAMESPACE).await.unwrap()),
        "restricted"
    );
    assert_eq!(
        level(namespaces.get(AGENTS_NAMESPACE).await.unwrap()),
        "privileged"
    );
    let binding = Api::<RoleBinding>::namespaced(client.clone(), AGENTS_NAMESPACE)
        .get("tas-operator-operands")
        .await
        .expect("the operator's rights in the agents' namespace");
    assert_eq!(binding.role_ref.name, "tas-operator-operands");

    // The TopologyAwareScheduling CRD is installed; the NRT CRD is the operator's to
    // install (spec.nrtCRD.manage), so config/default leaves it out.
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.get(TAS_CRD).await.expect("TAS CRD installed");
    assert!(crds.get_opt(NRT_CRD).await.unwrap().is_none());

    Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .get(OPERATOR)
        .await
        .expect("operator ServiceAccount");
    Api::<ClusterRole>::all(client.clone())
        .get(OPERATOR)
        .await
        .expect("operator ClusterRole");
    let crb = Api::<ClusterRoleBinding>::all(client.clone())
        .get(OPERATOR)
        .await
        .expect("operator ClusterRoleBinding");
    let subject = &crb.subjects.unwrap()[0];
    assert_eq!(
        (subject.name.as_str(), subject.namespace.as_deref()),
        (OPERATOR, Some(NAMESPACE))
    );
    Api::<Role>::namespaced(client.clone(), NAMESPACE)
        .get("tas-operator-leader-election")
        .await
        .expect("leader-election Role");
    Api::<RoleBinding>::namespaced(client.clone(), NAMESPACE)
        .get("tas-operator-leader-election")
        .await
        .expect("leader-election RoleBinding");

    let deployment = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .get(OPERATOR)
        .await
        .expect("operator Deployment");
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let container = &spec.template.spec.unwrap().containers[0];
    let args = container.args.clone().unwrap_or_default();
    assert_eq!(args[..2], ["run", "--leader-elect"]);
    let port = container.ports.as_ref().unwrap()[0].container_port;
    assert_eq!(port, 8080);

    let service = Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .get("tas-operator-metrics")
        .await
        .expect("metrics Service");
    assert_eq!(service.spec.unwrap().ports.unwrap()[0].port, 8080);
    Api::<PodDisruptionBudget>::namespaced(client.clone(), NAMESPACE)
        .get(OPERATOR)
        .await
        .expect("PodDisruptionBudget");

    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .get("tas-updater-own-node")
        .await
        .expect("admission policy");
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .get("tas-updater-own-node")
        .await
        .expect("admission policy binding");

    // The operator's own; the operands' are the operator's to render (spec.networkPolicy).
    Api::<NetworkPolicy>::namespaced(client.clone(), NAMESPACE)
        .get(OPERATOR)
        .await
        .expect("the operator's NetworkPolicy");
}

/// The operator and the images it deploys by default are the release of this tree:
/// the tag in config/manager equals the workspace version.
#[tokio::test]
async fn images_are_pinned_to_the_workspace_version() {
    let cluster = shared();
    let tag = format!(":v{}", env!("CARGO_PKG_VERSION"));
    let objects = rendered(cluster).await;
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == OPERATOR)
        .expect("operator Deployment rendered");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let env = |name: &str| {
        container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let images = [
        container["image"].as_str().unwrap_or_default().to_owned(),
        env("TAS_UPDATER_IMAGE"),
        env("TAS_SCHEDULER_IMAGE"),
    ];
    for (image, name) in images
        .iter()
        .zip(["tas-operator", "tas-updater", "tas-scheduler"])
    {
        assert!(
            image.ends_with(&format!("/{name}{tag}")),
            "{image} is not {name}{tag}: keep config/manager/kustomization.yaml's newTag equal to the workspace version"
        );
    }
}

/// The operator's pod template passes the `restricted` Pod Security level: created as
/// a pod (dry run) in a namespace that enforces it.
#[tokio::test]
async fn the_operator_pod_meets_the_restricted_pod_security_level() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "restricted").await.unwrap();
    Api::<Namespace>::all(client.clone())
        .patch(
            &ns,
            &PatchParams::apply(tas_testcluster::FIELD_MANAGER),
            &Patch::Apply(json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": { "name": ns, "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                }},
            })),
        )
        .await
        .unwrap();

    let objects = rendered(cluster).await;
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == OPERATOR)
        .expect("operator Deployment rendered");
    let mut template = deployment["spec"]["template"].clone();
    // The test namespace has only its default ServiceAccount.
    template["spec"]["serviceAccountName"] = json!("default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "operator", "labels": template["metadata"]["labels"] },
        "spec": template["spec"],
    }))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    if let Err(e) = Api::<Pod>::namespaced(client, &ns)
        .create(&dry_run, &pod)
        .await
    {
        panic!("the restricted level refuses the operator's pod: {e}");
    }
}

/// One question to the authorizer about the operator's ServiceAccount.
struct Can {
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    subresource: &'static str,
    namespace: &'static str,
    name: &'static str,
}

fn can(verb: &'static str, group: &'static str, resource: &'static str) -> Can {
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    Can {
        verb,
        group,
        resource,
        subresource,
        namespace: "",
        name: "",
    }
}

impl Can {
    fn name(self, name: &'static str) -> Self {
        Self { name, ..self }
    }

    fn namespace(self, namespace: &'static str) -> Self {
        Self { namespace, ..self }
    }

    async fn allowed(&self, client: &Client) -> bool {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        let attributes = ResourceAttributes {
            verb: some(self.verb),
            group: Some(self.group.to_owned()),
            resource: some(self.resource),
            subresource: some(self.subresource),
            namespace: some(self.namespace),
            name: some(self.name),
            ..ResourceAttributes::default()
        };
        access::service_account_can(client, NAMESPACE, OPERATOR, attributes)
            .await
            .expect("SubjectAccessReview")
    }
}

/// What the operator does is allowed (docs/rbac.md); powers it has no use for are not.
#[tokio::test]
async fn the_operator_may_do_its_job_and_nothing_more() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    install(cluster).await;

    let allowed = [
        can("watch", "tas.dev", "topologyawareschedulings"),
        can("patch", "tas.dev", "topologyawareschedulings").name("default"),
        can("patch", "tas.dev", "topologyawareschedulings/status").name("default"),
        can("update", "tas.dev", "topologyawareschedulings/finalizers").name("default"),
        can(
            "create",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
        ),
        can("patch", "apiextensions.k8s.io", "customresourcedefinitions").name(NRT_CRD),
        can(
            "delete",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
        )
        .name(NRT_CRD),
        can("create", "", "namespaces"),
        // Operands are written only where a RoleBinding grants tas-operator-operands.
        can("patch", "apps", "daemonsets").namespace(NAMESPACE),
        // The node agents' namespace: the installer's RoleBinding.
        can("patch", "apps", "daemonsets").namespace(AGENTS_NAMESPACE),
        can("patch", "", "serviceaccounts").namespace(AGENTS_NAMESPACE),
        can("create", "", "configmaps").namespace(NAMESPACE),
        can("patch", "networking.k8s.io", "networkpolicies").namespace(NAMESPACE),
        can("delete", "networking.k8s.io", "networkpolicies").namespace(NAMESPACE),
        // Bootstrapping a namespace it creates: create (not limitable by name; the
        // tas-operator-scope admission policy narrows it) and bind its two roles.
        can("create", "rbac.authorization.k8s.io", "rolebindings").namespace("new-namespace"),
        can("bind", "rbac.authorization.k8s.io", "clusterroles").name("tas-operator-operands"),
        can("bind", "rbac.authorization.k8s.io", "clusterroles").name("tas-operator-namespace"),
        can("delete", "rbac.authorization.k8s.io", "clusterroles").name("tas-updater"),
        can("create", "events.k8s.io", "events").namespace("default"),
        can("update", "coordination.k8s.io", "leases")
            .namespace(NAMESPACE)
            .name(OPERATOR),
        // Held only to grant them to the operands.
        can("create", "", "pods/binding").namespace("any-namespace"),
        can("patch", "topology.node.k8s.io", "noderesourcetopologies"),
        can("update", "coordination.k8s.io", "leases")
            .namespace(NAMESPACE)
            .name("tas-scheduler"),
    ];
    let refused = [
        // It never deletes its own CRD or the object it reconciles, nor changes other CRDs.
        can(
            "delete",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
        )
        .name(TAS_CRD),
        can("patch", "apiextensions.k8s.io", "customresourcedefinitions").name(TAS_CRD),
        can("delete", "tas.dev", "topologyawareschedulings").name("default"),
        // No secrets, no pods of its own, no exec.
        can("get", "", "secrets").namespace(NAMESPACE),
        can("list", "", "secrets"),
        can("create", "", "pods").namespace(NAMESPACE),
        can("delete", "", "pods").namespace(NAMESPACE),
        can("create", "", "pods/exec").namespace(NAMESPACE),
        // No way around RBAC.
        can("escalate", "rbac.authorization.k8s.io", "clusterroles"),
        can("bind", "rbac.authorization.k8s.io", "clusterroles"),
        can("impersonate", "", "users"),
        // Nodes and NRT objects are read or written, never changed or deleted by it.
        can("patch", "", "nodes").name("any-node"),
        can("delete", "topology.node.k8s.io", "noderesourcetopologies"),
        // It cannot switch off the admission policy that guards the NRT objects.
        can(
            "delete",
            "admissionregistration.k8s.io",
            "validatingadmissionpolicies",
        ),
        // The escalation paths of a cluster-wide operator (issue 19): workloads, config,
        // namespaces and bindings outside what it owns.
        can("create", "apps", "daemonsets").namespace("kube-system"),
        can("patch", "apps", "daemonsets").namespace("any-namespace"),
        can("delete", "networking.k8s.io", "networkpolicies").namespace("kube-system"),
        can("create", "networking.k8s.io", "networkpolicies").namespace("any-namespace"),
        can("patch", "", "configmaps")
            .namespace("kube-system")
            .name("kube-proxy"),
        can("delete", "", "namespaces")
            .namespace("kube-system")
            .name("kube-system"),
        can("delete", "", "namespaces").name("kube-system"),
        can("delete", "", "namespaces")
            .namespace(NAMESPACE)
            .name(NAMESPACE),
        // Nor the agents' (it never created it).
        can("delete", "", "namespaces")
            .namespace(AGENTS_NAMESPACE)
            .name(AGENTS_NAMESPACE),
        can("patch", "", "namespaces")
            .namespace(AGENTS_NAMESPACE)
            .name(AGENTS_NAMESPACE),
        can("patch", "", "namespaces")
            .namespace("default")
            .name("default"),
        can("delete", "rbac.authorization.k8s.io", "clusterrolebindings").name("cluster-admin"),
        can("patch", "rbac.authorization.k8s.io", "clusterroles").name("cluster-admin"),
        can("delete", "rbac.authorization.k8s.io", "rolebindings").namespace("kube-system"),
        can("get", "", "secrets")
            .namespace("kube-system")
            .name("any"),
        can("bind", "rbac.authorization.k8s.io", "clusterroles").name("cluster-admin"),
        can("create", "coordination.k8s.io", "leases").namespace("kube-system"),
        // Other components' leader-election Leases are not its to take.
        can("update", "coordination.k8s.io", "leases")
            .namespace("kube-system")
            .name("kube-scheduler"),
    ];
    let mut wrong = Vec::new();
    for (checks, want) in [(&allowed[..], true), (&refused[..], false)] {
        for c in checks {
            if c.allowed(&client).await != want {
                wrong.push(format!(
                    "{} {}/{}{} ns={:?} name={:?}: want allowed={want}",
                    c.verb,
                    c.group,
                    c.resource,
                    if c.subresource.is_empty() {
                        String::new()
                    } else {
                        format!("/{}", c.subresource)
                    },
                    c.namespace,
                    c.name
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "operator RBAC:\n{}", wrong.join("\n"));
}

#[path = "install/operator_token.rs"]
mod operator_token;

#[path = "install/cr_editor_token.rs"]
mod cr_editor_token;

/// Both samples are valid TopologyAwareScheduling objects (server-side dry run).
#[tokio::test]
async fn the_samples_are_accepted() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    install(cluster).await;
    let crds = Api::<CustomResourceDefinition>::all(client);
    wait_for("the TAS CRD to be Established", TIMEOUT, || async {
        let crd = crds.get(TAS_CRD).await?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        Ok::<_, kube::Error>(established.then_some(()))
    })
    .await
    .unwrap();
    for sample in [
        "config/samples/tas_v1alpha1_topologyawarescheduling.yaml",
        "config/samples/tas_v1alpha1_topologyawarescheduling_full.yaml",
    ] {
        // Apply, not create: another test may hold an object `default` meanwhile.
        kubectl(
            cluster,
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                "--dry-run=server",
                "-f",
                sample,
            ],
        )
        .await;
    }
}

/// Every field of the TopologyAwareScheduling spec (the CRD's schema, down to the
/// Kubernetes types it embeds) is set in the full sample, so the sample documents them
/// all. A new field fails this until the sample shows it.
#[test]
fn the_full_sample_sets_every_spec_field() {
    let read = |path: &str| -> Value {
        let text = std::fs::read_to_string(repo().join(path)).expect("readable");
        serde_norway::from_str(&text).expect("YAML")
    };
    let full = "config/samples/tas_v1alpha1_topologyawarescheduling_full.yaml";
    let crd = read("config/crd/tas.dev_topologyawareschedulings.yaml");
    let sample = read(full);
    let text = std::fs::read_to_string(repo().join(full)).expect("readable");
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let mut missing = Vec::new();
    missing_fields(schema, &sample["spec"], "spec", &mut missing);
    // Shown commented out, since setting them changes behaviour (pinned images stop
    // following operator upgrades; an endpoint without a collector logs export errors).
    missing.retain(|path| {
        let commented = COMMENTED.contains(&path.as_str());
        let leaf = path.rsplit('.').next().unwrap_or_default();
        !(commented && text.contains(&format!("# {leaf}: ")))
    });
    assert!(
        missing.is_empty(),
        "the full sample does not set: {}",
        missing.join(", ")
    );
}

/// Fields the full sample shows only as a comment.
const COMMENTED: [&str; 8] = [
    "spec.updater.image",
    "spec.updater.kubelet.configDir",
    "spec.updater.topologyManager",
    "spec.nodeGroups[].updater.image",
    "spec.scheduler.image",
    "spec.observability.otlpEndpoint",
    "spec.imagePullSecrets",
    "spec.imagePullPolicy",
];

/// Kubernetes types embedded in the spec, documented by Kubernetes: the sample shows
/// them in use, not every field of theirs.
const EMBEDDED: [&str; 5] = [
    "nodeSelector",
    "tolerations",
    "resources",
    "affinity",
    "topologySpreadConstraints",
];

fn missing_fields(schema: &Value, value: &Value, path: &str, missing: &mut Vec<String>) {
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            let here = format!("{path}.{name}");
            match value.get(name) {
                None => missing.push(here),
                Some(_) if EMBEDDED.contains(&name.as_str()) => {}
                Some(v) => missing_fields(property, v, &here, missing),
            }
        }
    } else if let (Some(items), Some(first)) = (schema.get("items"), value.get(0)) {
        missing_fields(items, first, &format!("{path}[]"), missing);
    }
}
