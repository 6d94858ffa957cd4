//! The one `TopologyAwareScheduling` object (`default`, cluster-scoped) several tests
//! of this binary write: they take turns, each starting from a fresh object.

use std::time::Duration;

use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tas_api::tas::TopologyAwareScheduling;
use tas_testcluster::wait_for;

/// Held while a test owns the object.
pub static STACK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Replaces the object with one of `spec` and the given `status`.
pub async fn fresh_stack(client: &kube::Client, spec: Value, status: Value) {
    let api: Api<TopologyAwareScheduling> = Api::all(client.clone());
    let _ = api.delete("default", &DeleteParams::default()).await;
    wait_for(
        "the previous stack object gone",
        Duration::from_secs(30),
        || async { Ok::<_, kube::Error>(api.get_opt("default").await?.is_none().then_some(())) },
    )
    .await
    .expect("no stack object");
    let stack: TopologyAwareScheduling = serde_json::from_value(json!({
        "apiVersion": "tas.dev/v1alpha1", "kind": "TopologyAwareScheduling",
        "metadata": {"name": "default"}, "spec": spec
    }))
    .expect("a stack object");
    api.create(&PostParams::default(), &stack)
        .await
        .expect("stack object created");
    api.patch_status(
        "default",
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": status })),
    )
    .await
    .expect("status written");
}
