//! The installer's allow-lists, re-checked on objects the CRD's rules never saw (stored
//! before a rule existed, written around the CRD, or rendered offline).

use super::super::{ValidationError, validate};
use crate::desired::BuildContext;
use serde_json::{Value, json};
use tas_api::tas::TopologyAwareScheduling;

const UPDATER: &str = "registry.example/tas/updater:release";
const SCHEDULER: &str = "registry.example/tas/scheduler:release";
const PINNED: &str = "mirror.example/tas/updater:v2@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn ctx() -> BuildContext {
    BuildContext {
        updater_image_default: Some(UPDATER.into()),
        scheduler_image_default: Some(SCHEDULER.into()),
        allowed_images: vec![PINNED.into()],
        allowed_toleration_keys: vec!["dedicated".into()],
        updater_namespace: None,
    }
}

fn cr(spec: Value) -> TopologyAwareScheduling {
    serde_json::from_value(json!({
        "apiVersion": "tas.dev/v1alpha1",
        "kind": "TopologyAwareScheduling",
        "metadata": {"name": "default"},
        "spec": spec,
    }))
    .unwrap()
}

/// Two groups, the second with `updater` as its overrides.
fn second_group(updater: Value) -> TopologyAwareScheduling {
    cr(json!({"nodeGroups": [
        {"name": "a", "nodeSelector": {"matchLabels": {"a": "1"}}},
        {"name": "b", "nodeSelector": {"matchLabels": {"b": "1"}}, "updater": updater},
    ]}))
}

fn refusal(cr: &TopologyAwareScheduling, ctx: &BuildContext) -> (String, &'static str, String) {
    let err = validate(cr, ctx, None).unwrap_err();
    assert!(err.is_permanent(), "{err:?}");
    let field = match &err {
        ValidationError::HostPathNotAllowed { field, .. }
        | ValidationError::ImageNotAllowed { field, .. }
        | ValidationError::TolerationNotAllowed { field, .. }
        | ValidationError::AnnotationNotAllowed { field, .. } => field.clone(),
        other => panic!("not a policy refusal: {other:?}"),
    };
    (field, err.reason(), err.to_string())
}

#[test]
fn a_group_s_hostile_kubelet_path_is_refused_naming_the_field() {
    for (kubelet, field, allowed) in [
        (
            json!({"podResourcesDir": "/"}),
            "spec.nodeGroups[1].updater.kubelet.podResourcesDir",
            "/var/lib/kubelet/pod-resources",
        ),
        (
            json!({"configFile": "/x.yaml"}),
            "spec.nodeGroups[1].updater.kubelet.configFile",
            "/var/lib/kubelet (kubeadm: config.yaml)",
        ),
        (
            json!({"configDir": "/etc/kubernetes/pki"}),
            "spec.nodeGroups[1].updater.kubelet.configDir",
            "a directory named *.d",
        ),
    ] {
        let (got, reason, message) = refusal(&second_group(json!({"kubelet": kubelet})), &ctx());
        assert_eq!((got.as_str(), reason), (field, "HostPathNotAllowed"));
        assert!(
            message.starts_with(field) && message.contains(allowed),
            "{message}"
        );
    }
}

#[test]
fn shared_kubelet_paths_are_rechecked_too() {
    let (field, _, message) = refusal(
        &cr(json!({"updater": {"kubelet": {"configFile": "/var/lib/kubelet/../../etc/x.yaml"}}})),
        &ctx(),
    );
    assert_eq!(field, "spec.updater.kubelet.configFile");
    assert!(message.contains("'..' segment"), "{message}");
    let ok = cr(json!({"updater": {"kubelet": {
        "podResourcesDir": "/var/lib/k0s/kubelet/pod-resources",
        "configFile": "/var/lib/k0s/kubelet-config.yaml",
        "configDir": "/etc/kubernetes/kubelet.conf.d",
    }}}));
    validate(&ok, &ctx(), None).unwrap();
}

#[test]
fn images_are_the_installer_s_choice() {
    // The defaults and the allowed list, exactly as written.
    for (spec, updater, scheduler) in [
        (json!({}), UPDATER, SCHEDULER),
        (
            json!({"updater": {"image": PINNED}, "scheduler": {"image": UPDATER}}),
            PINNED,
            UPDATER,
        ),
    ] {
        let cr = cr(spec);
        let valid = validate(&cr, &ctx(), None).unwrap();
        assert_eq!(
            (
                valid.groups[0].image.as_str(),
                valid.scheduler_image.as_str()
            ),
            (updater, scheduler)
        );
    }
    for (cr, field) in [
        (
            cr(json!({"updater": {"image": "evil.example/miner:1"}})),
            "spec.updater.image",
        ),
        (
            second_group(json!({"image": "registry.example/tas/updater:release2"})),
            "spec.nodeGroups[1].updater.image",
        ),
        (
            cr(json!({"scheduler": {"image": "registry.example/tas/updater"}})),
            "spec.scheduler.image",
        ),
        // A prefix or the same repository is not the same image.
        (
            cr(json!({"updater": {"image": "mirror.example/tas/updater:v2"}})),
            "spec.updater.image",
        ),
    ] {
        let (got, reason, message) = refusal(&cr, &ctx());
        assert_eq!((got.as_str(), reason), (field, "ImageNotAllowed"));
        assert!(
            message.contains(UPDATER)
                && message.contains(PINNED)
                && message.contains("--allowed-images"),
            "{message}"
        );
    }
    let (_, _, message) = refusal(&cr(json!({"updater": {"image": "Evil Image"}})), &ctx());
    assert!(message.contains("not an image reference"), "{message}");
    // Without --allowed-images only the defaults.
    let defaults_only = BuildContext {
        allowed_images: Vec::new(),
        ..ctx()
    };
    let (_, reason, _) = refusal(&cr(json!({"updater": {"image": PINNED}})), &defaults_only);
    assert_eq!(reason, "ImageNotAllowed");
}

#[test]
fn tolerations_are_the_installer_s_choice() {
    let exists = |key: Option<&str>| {
        let mut t = json!({"operator": "Exists"});
        if let Some(k) = key {
            t["key"] = json!(k);
        }
        json!([t])
    };
    validate(
        &cr(json!({"updater": {"tolerations": exists(Some("dedicated"))}})),
        &ctx(),
        None,
    )
    .unwrap();
    for (cr, field, says) in [
        (
            cr(json!({"updater": {"tolerations": exists(None)}})),
            "spec.updater.tolerations[0]",
            "tolerates every taint",
        ),
        (
            second_group(json!({"tolerations": exists(Some(""))})),
            "spec.nodeGroups[1].updater.tolerations[0]",
            "tolerates every taint",
        ),
        (
            cr(
                json!({"scheduler": {"tolerations": exists(Some("node-role.kubernetes.io/control-plane"))}}),
            ),
            "spec.scheduler.tolerations[0]",
            "'node-role.kubernetes.io/control-plane', which is not allowed",
        ),
    ] {
        let (got, reason, message) = refusal(&cr, &ctx());
        assert_eq!((got.as_str(), reason), (field, "TolerationNotAllowed"));
        assert!(
            message.contains(says) && message.contains("--allowed-toleration-keys"),
            "{message}"
        );
    }
    // `*`: any toleration, also the one tolerating every taint.
    let any = BuildContext {
        allowed_toleration_keys: vec!["*".into()],
        ..ctx()
    };
    validate(
        &cr(json!({"updater": {"tolerations": exists(None)}})),
        &any,
        None,
    )
    .unwrap();
    // Nothing allowed: no toleration at all.
    let none = BuildContext {
        allowed_toleration_keys: Vec::new(),
        ..ctx()
    };
    let (_, _, message) = refusal(
        &cr(json!({"updater": {"tolerations": exists(Some("dedicated"))}})),
        &none,
    );
    assert!(message.contains("allows tolerations of: none"), "{message}");
}

#[test]
fn annotations_cannot_loosen_the_operands_confinement() {
    let apparmor = "container.apparmor.security.beta.kubernetes.io/tas-updater";
    for (cr, field) in [
        (
            cr(json!({"updater": {"podAnnotations": {apparmor: "unconfined"}}})),
            "spec.updater.podAnnotations",
        ),
        (
            second_group(json!({"podAnnotations": {apparmor: "unconfined"}})),
            "spec.nodeGroups[1].updater.podAnnotations",
        ),
        (
            cr(json!({"scheduler": {"podAnnotations": {
                "seccomp.security.alpha.kubernetes.io/pod": "unconfined"
            }}})),
            "spec.scheduler.podAnnotations",
        ),
    ] {
        let (got, reason, message) = refusal(&cr, &ctx());
        assert_eq!((got.as_str(), reason), (field, "AnnotationNotAllowed"));
        assert!(message.contains("AppArmor or seccomp"), "{message}");
    }
    // Other annotations stay the user's.
    let fine = cr(json!({"updater": {"podAnnotations": {
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"
    }}}));
    validate(&fine, &ctx(), None).unwrap();
}
