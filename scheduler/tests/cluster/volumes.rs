//! The volume filters against a real API server, whose PersistentVolume controller
//! binds the claims: a bound local volume's node affinity, a volume's zone label, a
//! `ReadWriteOncePod` claim in use, and unbound claims (`WaitForFirstConsumer` and
//! immediate) that keep their pods Pending with a message naming the claim.
//!
//! Each volume's node is the one scoring likes least (4 CPUs against 64), so without
//! the filters the pod would land elsewhere.

use crate::{Env, TIMEOUT, env};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use std::time::Duration;
use tas_testcluster::{unique_name, wait_for};

/// How long a Pending pod must stay unbound to count as kept off every node.
const STAYS_PENDING: Duration = Duration::from_secs(3);

impl Env {
    /// Creates a PersistentVolume of `spec` (merged over 1Gi, `storageClassName: ""`,
    /// Retain) pre-bound to claim `claim` of this env's namespace; returns its name.
    async fn volume(&self, claim: &str, labels: Value, spec: Value) -> String {
        let name = unique_name("pv");
        let mut s = json!({
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"namespace": self.ns, "name": claim},
        });
        if let (Some(s), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
            s.extend(extra.clone());
        }
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels}, "spec": s
        }))
        .expect("pv");
        Api::<PersistentVolume>::all(self.client.clone())
            .create(&PostParams::default(), &pv)
            .await
            .expect("pv created");
        name
    }

    /// Creates claim `name` of `spec` (merged over 1Gi ReadWriteOnce).
    async fn claim(&self, name: &str, spec: Value) {
        let mut s = json!({
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        });
        if let (Some(s), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
            s.extend(extra.clone());
        }
        let pvc: PersistentVolumeClaim =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": s})).expect("pvc");
        Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &pvc)
            .await
            .expect("pvc created");
    }

    /// A claim pre-bound to a new volume of `pv_spec`, bound by the controller.
    async fn bound_claim(&self, name: &str, modes: &[&str], labels: Value, pv_spec: Value) {
        let mut pv_spec = pv_spec;
        pv_spec["accessModes"] = json!(modes);
        let pv = self.volume(name, labels, pv_spec).await;
        self.claim(
            name,
            json!({"accessModes": modes, "storageClassName": "", "volumeName": pv}),
        )
        .await;
        let api = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns);
        wait_for(format!("claim {name} bound"), TIMEOUT, || async {
            let pvc = api.get(name).await?;
            let phase = pvc.status.and_then(|s| s.phase);
            Ok::<_, kube::Error>((phase.as_deref() == Some("Bound")).then_some(()))
        })
        .await
        .expect("claim bound by the PersistentVolume controller");
    }

    /// Creates pod `name` requesting 1 CPU with one volume per claim.
    async fn pod_with_claims(&self, name: &str, claims: &[&str]) {
        let volumes: Vec<Value> = claims
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        self.create_pod(
            name,
            json!({}),
            json!({
                "containers": [{"name": "app", "image": "app",
                    "resources": {"requests": {"cpu": "1"}}}],
                "volumes": volumes,
            }),
        )
        .await;
    }

    /// Waits for a FailedScheduling Event of `pod` containing `needle`; returns it.
    async fn failed_with(&self, pod: &str, needle: &str) -> String {
        let found = wait_for(
            format!("FailedScheduling of {pod} with {needle:?}"),
            TIMEOUT,
            || async {
                let events = self.events(pod, "FailedScheduling").await;
                Ok::<_, kube::Error>(events.into_iter().find(|m| m.contains(needle)))
            },
        )
        .await;
        match found {
            Ok(message) => message,
            Err(e) => {
                let seen = self.events(pod, "FailedScheduling").await;
                panic!(
                    "{e}; node {:?}; FailedScheduling Events: {seen:?}",
                    self.node_of(pod).await
                )
            }
        }
    }

    /// Asserts `pod` is still unbound after [`STAYS_PENDING`].
    async fn assert_stays_pending(&self, pod: &str) {
        tokio::time::sleep(STAYS_PENDING).await;
        assert_eq!(self.node_of(pod).await, None, "{pod} must stay Pending");
    }
}

/// A node with little room (scoring prefers the big one) and a node with plenty.
async fn small_and_big(
    env: &Env,
    small: &[(&str, &str)],
    big: &[(&str, &str)],
) -> (String, String) {
    (
        env.node_with_labels(4, small).await,
        env.node_with_labels(64, big).await,
    )
}

/// LeastAllocated, so the big node is the one scoring prefers (the default
/// FragmentationAware prefers the tighter fit, the small node).
fn spread() -> Value {
    json!({"scoring": {"strategy": "LeastAllocated"}})
}

fn on_host(node: &str) -> Value {
    json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    ]}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_with_a_bound_local_volume_lands_only_on_the_volume_s_node() {
    let mut env = env("vol-local").await;
    let (a, b) = small_and_big(&env, &[], &[]).await;
    env.bound_claim(
        "data",
        &["ReadWriteOnce"],
        json!({}),
        json!({"local": {"path": "/mnt/disks/data"}, "nodeAffinity": on_host(&a)}),
    )
    .await;
    env.start_scheduler(spread());
    env.pod_with_claims("with-volume", &["data"]).await;
    assert_eq!(
        env.wait_bound("with-volume").await,
        a,
        "the volume is on {a}"
    );
    // The control: without the volume, scoring sends the same pod to the big node.
    env.pod_with_claims("without-volume", &[]).await;
    assert_eq!(env.wait_bound("without-volume").await, b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_goes_only_to_the_zone_of_its_volume() {
    let mut env = env("vol-zone").await;
    let zone = "topology.kubernetes.io/zone";
    let (a, b) = small_and_big(&env, &[(zone, "z1")], &[(zone, "z2")]).await;
    env.bound_claim(
        "data",
        &["ReadWriteOnce"],
        // Several zones in one label value, `__` separated; the big node's is not one.
        json!({zone: "z0__z1"}),
        json!({"hostPath": {"path": "/tmp/data"}}),
    )
    .await;
    // A second volume in z2 only: no node is in both zones.
    env.bound_claim(
        "other",
        &["ReadWriteOnce"],
        json!({zone: "z2"}),
        json!({"hostPath": {"path": "/tmp/other"}}),
    )
    .await;
    env.start_scheduler(spread());
    env.pod_with_claims("zoned", &["data"]).await;
    assert_eq!(
        env.wait_bound("zoned").await,
        a,
        "{a} is in zone z1, {b} in z2"
    );

    env.pod_with_claims("two-zones", &["data", "other"]).await;
    let msg = env
        .failed_with("two-zones", "node(s) had no available volume zone")
        .await;
    assert!(msg.starts_with("0/"), "{msg}");
    env.assert_stays_pending("two-zones").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_write_once_pod_claim_in_use_keeps_a_second_pod_pending() {
    let mut env = env("vol-rwop").await;
    let _ = small_and_big(&env, &[], &[]).await;
    env.bound_claim(
        "exclusive",
        &["ReadWriteOncePod"],
        json!({}),
        json!({"hostPath": {"path": "/tmp/exclusive"}}),
    )
    .await;
    env.start_scheduler(spread());
    env.pod_with_claims("first", &["exclusive"]).await;
    env.wait_bound("first").await;
    env.pod_with_claims("second", &["exclusive"]).await;
    let msg = env
        .failed_with(
            "second",
            &format!(
                "persistentvolumeclaim \"exclusive\" has the ReadWriteOncePod access mode and is already used by pod {}/first",
                env.ns
            ),
        )
        .await;
    println!("rwop: {msg}");
    env.assert_stays_pending("second").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbound_claims_keep_their_pods_pending_with_a_message_naming_them() {
    let mut env = env("vol-unbound").await;
    let _ = small_and_big(&env, &[], &[]).await;
    let class = unique_name("wffc");
    let sc: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": class},
        "provisioner": "example.com/nothing",
        "volumeBindingMode": "WaitForFirstConsumer",
    }))
    .expect("storage class");
    Api::<StorageClass>::all(env.client.clone())
        .create(&PostParams::default(), &sc)
        .await
        .expect("storage class created");
    env.claim("late", json!({"storageClassName": class})).await;
    // No class and no volume: the claim waits for a volume forever.
    env.claim("never", json!({"storageClassName": ""})).await;
    env.start_scheduler(spread());

    env.pod_with_claims("waits-for-consumer", &["late"]).await;
    let msg = env
        .failed_with(
            "waits-for-consumer",
            &format!(
                "persistentvolumeclaim \"late\" is unbound and uses WaitForFirstConsumer storage class \"{class}\"; TAS does not bind volumes"
            ),
        )
        .await;
    println!("wffc: {msg}");

    env.pod_with_claims("waits-for-binding", &["never"]).await;
    env.failed_with(
        "waits-for-binding",
        "persistentvolumeclaim \"never\" is not bound yet (no storage class): waiting for the claim to be bound",
    )
    .await;

    env.pod_with_claims("no-claim", &["absent"]).await;
    env.failed_with("no-claim", "persistentvolumeclaim \"absent\" not found")
        .await;

    for pod in ["waits-for-consumer", "waits-for-binding", "no-claim"] {
        env.assert_stays_pending(pod).await;
    }
}
