//! The namespace the operands run in (`spec.namespace`).

use super::meta::{Component, Stack};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Pod Security admission level label.
const POD_SECURITY_ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";

/// The operands' namespace.
///
/// It carries no owner reference, unlike every other object: `spec.namespace` may name a
/// namespace that existed before TAS (the operator's own), and an owner reference would
/// make the garbage collector delete that namespace, with everything else in it, when the
/// TopologyAwareScheduling object is deleted. TAS's own objects in it are owned one by one.
///
/// This object is written only to a namespace the operator creates (see
/// `reconcile::namespace`): a namespace that existed before keeps its labels, Pod
/// Security level included, exactly as its owner set them.
///
/// Its Pod Security level is the least its pods need: `restricted` for the scheduler
/// alone. Only when the node agents share it (the operator runs without a namespace of
/// their own, `--updater-namespace`) is it `privileged`: they need hostPath volumes and
/// uid 0 (see daemonset.rs), which `baseline` and `restricted` refuse, and without the
/// label a cluster-wide default level would keep the DaemonSets from creating any pod.
pub(crate) fn namespace(stack: &Stack) -> Namespace {
    let mut labels = stack.labels(Component::Namespace);
    let level = if stack.agents_share_namespace() {
        "privileged"
    } else {
        "restricted"
    };
    labels.insert(POD_SECURITY_ENFORCE_LABEL.to_owned(), level.to_owned());
    Namespace {
        metadata: ObjectMeta {
            name: Some(stack.namespace.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}
