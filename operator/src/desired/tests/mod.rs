//! Properties of the whole object set (labels, owners, namespaces, apply order), plus
//! RBAC and the scheduler in submodules. The node agent DaemonSets, config hashes and
//! errors are tested from the fixtures in `tests/desired.rs`.

use super::*;
use kube::core::discovery::Scope;
use serde_json::Value;
use tas_api::tas::TopologyAwareScheduling;

mod kubelet;
mod network_policy;
mod pods;
mod rbac;
mod scheduler;

const MINIMAL: &str = include_str!("../../../tests/fixtures/minimal.yaml");
const FULL: &str = include_str!("../../../tests/fixtures/full.yaml");

fn cr(yaml: &str) -> TopologyAwareScheduling {
    serde_norway::from_str(yaml).unwrap()
}

fn ctx() -> BuildContext {
    BuildContext {
        updater_image_default: Some("u:1".to_owned()),
        scheduler_image_default: Some("s:1".to_owned()),
        // Builders only: what the installer allows has tests of its own (validate).
        allowed_images: vec![
            "registry.example/tas/updater:v0.3.0".to_owned(),
            "registry.example/tas/updater:v0.3.1-rc.1".to_owned(),
            "registry.example/tas/scheduler:v0.3.0".to_owned(),
        ],
        allowed_toleration_keys: vec!["*".to_owned()],
        updater_namespace: None,
    }
}

/// Validates and builds `cr` (the objects here are valid: validation has its own tests).
fn desired(cr: &TopologyAwareScheduling, ctx: &BuildContext) -> Result<Desired, BuildError> {
    build(&crate::validate::validate(cr, ctx, None).expect("a valid object"))
}

fn objects(yaml: &str) -> Vec<ApiObject> {
    desired(&cr(yaml), &ctx())
        .unwrap()
        .into_api_objects()
        .unwrap()
}

fn label<'a>(o: &'a ApiObject, key: &str) -> Option<&'a str> {
    o.value["metadata"]["labels"][key].as_str()
}

#[test]
fn every_object_is_labelled_for_pruning_and_namespaced_in_spec_namespace() {
    let objs = objects(FULL);
    for o in &objs {
        let what = format!("{} {}", o.resource.kind, o.name);
        assert_eq!(label(o, MANAGED_BY_LABEL), Some("tas-operator"), "{what}");
        assert_eq!(label(o, PART_OF_LABEL), Some("tas"), "{what}");
        assert_eq!(label(o, STACK_LABEL), Some("default"), "{what}");
        let component = label(o, COMPONENT_LABEL).unwrap_or_default();
        assert!(
            ["namespace", "nrt-crd", "updater", "scheduler"].contains(&component),
            "{what}: {component}"
        );
        match o.scope {
            Scope::Namespaced => assert_eq!(o.namespace.as_deref(), Some("numa-system"), "{what}"),
            Scope::Cluster => assert_eq!(o.namespace, None, "{what}"),
        }
        assert_eq!(o.value["metadata"]["name"].as_str(), Some(o.name.as_str()));
    }
    assert_eq!(
        managed_selector("default"),
        "app.kubernetes.io/managed-by=tas-operator,tas.dev/stack=default"
    );
}

/// With a namespace of their own (`--updater-namespace`), every node agent object goes
/// there and nothing else does; the agents' binding names their ServiceAccount there;
/// the namespace the operator would create for `spec.namespace` is `restricted` (only
/// the scheduler runs in it), `privileged` only when the agents share it.
#[test]
fn node_agents_go_to_their_own_namespace() {
    let split = BuildContext {
        updater_namespace: Some("tas-node".to_owned()),
        ..ctx()
    };
    let objs = desired(&cr(FULL), &split)
        .unwrap()
        .into_api_objects()
        .unwrap();
    let mut agents = Vec::new();
    for o in objs.iter().filter(|o| o.scope == Scope::Namespaced) {
        let what = format!("{} {}", o.resource.kind, o.name);
        let expected = if label(o, COMPONENT_LABEL) == Some("updater") {
            agents.push(o.resource.kind.clone());
            "tas-node"
        } else {
            "numa-system"
        };
        assert_eq!(o.namespace.as_deref(), Some(expected), "{what}");
    }
    agents.sort();
    agents.dedup();
    assert_eq!(
        agents,
        ["DaemonSet", "NetworkPolicy", "Service", "ServiceAccount"]
    );
    let binding = |name: &str| {
        objs.iter()
            .find(|o| o.resource.kind == "ClusterRoleBinding" && o.name == name)
            .unwrap()
            .value["subjects"]
            .clone()
    };
    assert_eq!(binding(UPDATER_SERVICE_ACCOUNT)[0]["namespace"], "tas-node");
    assert_eq!(
        binding(SCHEDULER_SERVICE_ACCOUNT)[0]["namespace"],
        "numa-system"
    );
    let level = |objs: &[ApiObject]| {
        objs.iter()
            .find(|o| o.resource.kind == "Namespace")
            .unwrap()
            .value["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
            .clone()
    };
    assert_eq!(level(&objs), "restricted");
    assert_eq!(level(&objects(FULL)), "privileged");
    // Naming spec.namespace itself is the shared layout.
    let same = BuildContext {
        updater_namespace: Some("numa-system".to_owned()),
        ..ctx()
    };
    let shared = desired(&cr(FULL), &same)
        .unwrap()
        .into_api_objects()
        .unwrap();
    assert_eq!(level(&shared), "privileged");
}

#[test]
fn owned_objects_point_at_the_cr_except_namespace_and_kept_crd() {
    let objs = objects(FULL);
    for o in &objs {
        let refs = &o.value["metadata"]["ownerReferences"];
        match o.resource.kind.as_str() {
            "Namespace" | "CustomResourceDefinition" => {
                assert_eq!(
                    refs,
                    &Value::Null,
                    "{} must outlive the CR",
                    o.resource.kind
                );
            }
            _ => {
                let r = &refs[0];
                assert_eq!(r["apiVersion"], "tas.dev/v1alpha1");
                assert_eq!(r["kind"], "TopologyAwareScheduling");
                assert_eq!(r["name"], "default");
                assert_eq!(r["uid"], "3f0b6c1e-8a52-4d7e-9b1a-2c4d6e8f0a12");
                assert_eq!(
                    (&r["controller"], &r["blockOwnerDeletion"]),
                    (&Value::Bool(true), &Value::Bool(true))
                );
            }
        }
    }
}

#[test]
fn without_a_uid_nothing_has_owner_references() {
    for o in objects(MINIMAL) {
        assert_eq!(
            o.value["metadata"]["ownerReferences"],
            Value::Null,
            "{}",
            o.name
        );
    }
}

#[test]
fn nrt_crd_follows_spec_nrt_crd() {
    let mut c = cr(FULL);
    c.spec.nrt_crd.delete_on_uninstall = true;
    let crd = desired(&c, &ctx()).unwrap().nrt_crd.unwrap();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("noderesourcetopologies.topology.node.k8s.io")
    );
    assert!(
        crd.metadata.owner_references.is_none(),
        "never owned, even with deleteOnUninstall: the garbage collector would delete it \
         with the CR whatever deleteOnUninstall says by then; uninstall deletes it itself"
    );

    c.spec.nrt_crd = tas_api::tas::NrtCrdSpec {
        manage: false,
        delete_on_uninstall: false,
        take_over: false,
    };
    let d = desired(&c, &ctx()).unwrap();
    assert!(d.nrt_crd.is_none());
    assert!(
        d.into_objects()
            .unwrap()
            .iter()
            .all(|o| o["kind"] != "CustomResourceDefinition")
    );
}

#[test]
fn objects_come_in_apply_order_with_api_version_and_kind() {
    let objs = objects(FULL);
    let kinds: Vec<_> = objs
        .iter()
        .map(|o| o.value["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "CustomResourceDefinition",
            "ServiceAccount",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "Service",
            "Service",
            "NetworkPolicy",
            "NetworkPolicy",
            "DaemonSet",
            "DaemonSet",
            "Deployment",
        ]
    );
    for o in &objs {
        assert_eq!(
            o.value["apiVersion"].as_str(),
            Some(o.resource.api_version.as_str())
        );
    }
    // The prune list knows every kind that is applied, in the same order.
    let managed: Vec<_> = managed_resources()
        .into_iter()
        .map(|(r, _)| r.kind)
        .collect();
    let mut applied: Vec<_> = kinds.iter().map(|k| (*k).to_owned()).collect();
    applied.dedup();
    assert_eq!(managed, applied);
}

#[test]
fn namespace_admits_the_node_agents_hostpath_pods() {
    let d = desired(&cr(MINIMAL), &ctx()).unwrap();
    let labels = d.namespace.metadata.labels.unwrap();
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "privileged");
}
