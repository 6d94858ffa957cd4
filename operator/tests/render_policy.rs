//! Editing the TopologyAwareScheduling object grants nothing: over generated objects
//! (host paths of every allowed shape and hostile ones, images, tolerations, node groups
//! overriding each of them), whatever validate accepts renders workloads with no host
//! path outside the allow-list, nothing privileged, no image and no toleration the
//! installer did not allow; and whatever breaks an allow-list is refused, naming a field
//! that breaks it.

use k8s_openapi::api::core::v1::{PodSpec, Toleration};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use tas_api::tas::{
    HostPathRule, TopologyAwareScheduling, check_config_dir, check_config_file,
    check_pod_resources_dir,
};
use tas_operator::desired::{self, BuildContext};
use tas_operator::validate::{ValidationError, validate};

const UPDATER: &str = "registry.example/tas/tas-updater:v1";
const SCHEDULER: &str = "registry.example/tas/tas-scheduler:v1";
const MIRROR: &str = "mirror.example/tas-updater:v1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const TAINT_KEYS: [&str; 2] = ["dedicated", "node-role.kubernetes.io/infra"];
/// The only host path besides the kubelet's: the NUMA part of sysfs.
const SYSFS_NODES: &str = "/sys/devices/system/node";
/// Directories holding an allowed config file that are mounted whole (the others hold
/// more than kubelet configuration, so the file is mounted alone).
const CONFIG_FILE_DIRS: [&str; 3] = [
    "/etc/kubernetes/kubelet",
    "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d",
    "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d",
];

/// The node agents' namespace of the install.
const AGENTS_NS: &str = "tas-node";

fn ctx(any_toleration: bool) -> BuildContext {
    BuildContext {
        updater_image_default: Some(UPDATER.into()),
        scheduler_image_default: Some(SCHEDULER.into()),
        allowed_images: vec![MIRROR.into()],
        allowed_toleration_keys: if any_toleration {
            vec!["*".into()]
        } else {
            TAINT_KEYS.map(String::from).to_vec()
        },
        // The install's layout: the node agents in a namespace of their own.
        updater_namespace: Some(AGENTS_NS.into()),
    }
}

/// A path of `rule`: one the allow-list accepts (any shape its pattern allows) or one
/// trying to get around it.
fn path(rule: HostPathRule) -> impl Strategy<Value = String> {
    let p = rule.pattern();
    let allowed = proptest::string::string_regex(&p[1..p.len() - 1]).unwrap();
    let hostile = proptest::sample::select(vec![
        "/",
        "/x.yaml",
        "/etc",
        "/etc/kubernetes",
        "/etc/kubernetes/pki",
        "/var/lib/kubelet",
        "/var/lib/kubelet/pki/kubelet.yaml",
        "/var/lib/kubelet/pod-resources/..",
        "/var/lib/kubelet/pod-resources/../../..",
        "/var/lib/kubelet/../../etc/kubelet.d",
        "//var/lib/kubelet/pod-resources",
        "/var/lib/kubelet/config.yaml/",
        "/run/containerd",
        "var/lib/kubelet/pod-resources",
        "/var/lib/kubelet/pod-resources\0",
    ])
    .prop_map(String::from);
    prop_oneof![3 => allowed, 1 => hostile]
}

fn image() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(
        proptest::sample::select(vec![
            UPDATER,
            SCHEDULER,
            MIRROR,
            "evil.example/miner:latest",
            "registry.example/tas/tas-updater:v1-evil",
            "registry.example/tas/tas-updater",
            "NOT A REFERENCE",
        ])
        .prop_map(String::from),
    )
}

fn tolerations() -> impl Strategy<Value = Vec<Value>> {
    let key = proptest::sample::select(vec![
        Some("dedicated"),
        Some("node-role.kubernetes.io/infra"),
        Some("node-role.kubernetes.io/control-plane"),
        Some(""),
        None,
    ]);
    let op = proptest::sample::select(vec!["Exists", "Equal"]);
    proptest::collection::vec(
        (key, op).prop_map(|(key, op)| {
            let mut t = json!({"operator": op, "effect": "NoSchedule"});
            if let Some(k) = key {
                t["key"] = json!(k);
            }
            if op == "Equal" {
                t["value"] = json!("v");
            }
            t
        }),
        0..3,
    )
}

/// `spec.updater.kubelet` or a group's override of it (every field optional there).
fn kubelet(all_set: bool) -> impl Strategy<Value = Value> {
    let opt = move |s: BoxedStrategy<String>| {
        if all_set {
            s.prop_map(Some).boxed()
        } else {
            proptest::option::of(s).boxed()
        }
    };
    (
        opt(path(HostPathRule::PodResourcesDir).boxed()),
        opt(path(HostPathRule::ConfigFile).boxed()),
        proptest::option::of(path(HostPathRule::ConfigDir)),
    )
        .prop_map(|(dir, file, drop_in)| {
            json!({"podResourcesDir": dir, "configFile": file, "configDir": drop_in})
        })
        .prop_map(drop_nulls)
}

fn drop_nulls(mut v: Value) -> Value {
    if let Some(map) = v.as_object_mut() {
        map.retain(|_, x| !x.is_null());
        map.values_mut().for_each(|x| *x = drop_nulls(x.take()));
    }
    v
}

fn group(i: usize) -> impl Strategy<Value = Value> {
    proptest::option::of((
        proptest::option::of(kubelet(false)),
        image(),
        proptest::option::of(tolerations()),
    ))
    .prop_map(move |updater| {
        let updater = updater.map(|(kubelet, image, tolerations)| {
                json!({"kubelet": kubelet, "image": image, "tolerations": tolerations})
            });
        drop_nulls(json!({
            "name": format!("g{i}"),
            "nodeSelector": {"matchLabels": {"tas.example/group": format!("g{i}")}},
            "updater": updater,
        }))
    })
}

fn object() -> impl Strategy<Value = TopologyAwareScheduling> {
    let groups = (0usize..=3).prop_flat_map(|n| (0..n).map(group).collect::<Vec<_>>());
    (
        kubelet(true),
        image(),
        tolerations(),
        groups,
        image(),
        tolerations(),
    )
        .prop_map(
            |(kubelet, image, tolerations, groups, scheduler_image, scheduler_tolerations)| {
                let spec = drop_nulls(json!({
                    "updater": {"kubelet": kubelet, "image": image, "tolerations": tolerations},
                    "nodeGroups": groups,
                    "scheduler": {"image": scheduler_image, "tolerations": scheduler_tolerations},
                }));
                serde_json::from_value(json!({
                    "apiVersion": "tas.dev/v1alpha1",
                    "kind": "TopologyAwareScheduling",
                    "metadata": {"name": "default"},
                    "spec": spec,
                }))
                .expect("a well-formed object")
            },
        )
}

/// Every field breaking an allow-list, judged from the object as written.
fn violations(cr: &TopologyAwareScheduling, ctx: &BuildContext) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let allowed: Vec<&str> = [UPDATER, SCHEDULER, MIRROR].into();
    let mut path = |at: &str, rule: HostPathRule, v: Option<&String>| {
        if v.is_some_and(|v| rule.check(v).is_err()) {
            out.insert(format!("{at}.kubelet.{}", rule.field()));
        }
    };
    let k = &cr.spec.updater.kubelet;
    path(
        "spec.updater",
        HostPathRule::PodResourcesDir,
        Some(&k.pod_resources_dir),
    );
    path(
        "spec.updater",
        HostPathRule::ConfigFile,
        Some(&k.config_file),
    );
    path(
        "spec.updater",
        HostPathRule::ConfigDir,
        k.config_dir.as_ref(),
    );
    let mut images = vec![(
        "spec.updater.image".to_owned(),
        cr.spec.updater.image.clone(),
    )];
    images.push((
        "spec.scheduler.image".to_owned(),
        cr.spec.scheduler.image.clone(),
    ));
    let mut tols = vec![
        (
            "spec.updater.tolerations".to_owned(),
            cr.spec.updater.tolerations.clone(),
        ),
        (
            "spec.scheduler.tolerations".to_owned(),
            cr.spec.scheduler.tolerations.clone(),
        ),
    ];
    for (i, g) in cr.spec.node_groups.iter().enumerate() {
        let Some(u) = &g.updater else { continue };
        let at = format!("spec.nodeGroups[{i}].updater");
        if let Some(k) = &u.kubelet {
            path(
                &at,
                HostPathRule::PodResourcesDir,
                k.pod_resources_dir.as_ref(),
            );
            path(&at, HostPathRule::ConfigFile, k.config_file.as_ref());
            path(&at, HostPathRule::ConfigDir, k.config_dir.as_ref());
        }
        images.push((format!("{at}.image"), u.image.clone()));
        tols.push((
            format!("{at}.tolerations"),
            u.tolerations.clone().unwrap_or_default(),
        ));
    }
    for (field, image) in images {
        if image.is_some_and(|i| !allowed.contains(&i.as_str())) {
            out.insert(field);
        }
    }
    for (at, list) in tols {
        for (i, t) in list.iter().enumerate() {
            if !toleration_allowed(ctx, t) {
                out.insert(format!("{at}[{i}]"));
            }
        }
    }
    out
}

fn toleration_allowed(ctx: &BuildContext, t: &Toleration) -> bool {
    let keys = &ctx.allowed_toleration_keys;
    let key = t.key.as_deref().unwrap_or_default();
    keys.iter().any(|k| k == "*") || (!key.is_empty() && keys.iter().any(|k| k == key))
}

/// What a refusal names.
fn refused_field(err: &ValidationError) -> Option<&str> {
    match err {
        ValidationError::HostPathNotAllowed { field, .. }
        | ValidationError::ImageNotAllowed { field, .. }
        | ValidationError::TolerationNotAllowed { field, .. } => Some(field),
        _ => None,
    }
}

/// The pod of a rendered workload grants nothing beyond what the renderer itself gives.
fn assert_pod_grants_nothing(pod: &PodSpec, ctx: &BuildContext) -> Result<(), TestCaseError> {
    prop_assert!(
        pod.host_pid != Some(true) && pod.host_network != Some(true) && pod.host_ipc != Some(true)
    );
    for c in pod
        .containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
    {
        let image = c.image.as_deref().unwrap_or_default();
        prop_assert!(
            [UPDATER, SCHEDULER, MIRROR].contains(&image),
            "image {image}"
        );
        let sc = c.security_context.clone().unwrap_or_default();
        prop_assert!(sc.privileged != Some(true), "privileged {}", c.name);
        prop_assert_eq!(sc.allow_privilege_escalation, Some(false));
        let added = sc.capabilities.and_then(|c| c.add).unwrap_or_default();
        prop_assert!(added.is_empty(), "capabilities added: {added:?}");
    }
    for t in pod.tolerations.iter().flatten() {
        prop_assert!(toleration_allowed(ctx, t), "toleration {t:?}");
    }
    for v in pod.volumes.iter().flatten() {
        let Some(h) = &v.host_path else { continue };
        let p = h.path.as_str();
        let ok = match h.type_.as_deref() {
            Some("File") => check_config_file(p).is_ok(),
            Some("Directory") => {
                p == SYSFS_NODES
                    || check_pod_resources_dir(p).is_ok()
                    || check_config_dir(p).is_ok()
                    || CONFIG_FILE_DIRS.contains(&p)
            }
            _ => false,
        };
        prop_assert!(ok, "hostPath {h:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_object_picks_only_among_what_the_installer_allows(
        cr in object(),
        any_toleration in any::<bool>(),
    ) {
        let ctx = ctx(any_toleration);
        let broken = violations(&cr, &ctx);
        match validate(&cr, &ctx, None) {
            Ok(valid) => {
                prop_assert!(broken.is_empty(), "accepted although {broken:?}");
                let d = desired::build(&valid).expect("a valid object builds");
                for ds in &d.daemon_sets {
                    // Host access only in the namespace the installer made for it.
                    prop_assert_eq!(ds.metadata.namespace.as_deref(), Some(AGENTS_NS));
                    let pod = ds.spec.as_ref().and_then(|s| s.template.spec.as_ref()).unwrap();
                    assert_pod_grants_nothing(pod, &ctx)?;
                }
                let pod = d.deployment.spec.as_ref().and_then(|s| s.template.spec.as_ref()).unwrap();
                assert_pod_grants_nothing(pod, &ctx)?;
                prop_assert!(pod.volumes.iter().flatten().all(|v| v.host_path.is_none()));
            }
            Err(err) => {
                let field = refused_field(&err);
                prop_assert!(
                    field.is_some_and(|f| broken.contains(f)),
                    "refused {err} ({field:?}), breaking: {broken:?}"
                );
                prop_assert!(err.is_permanent());
            }
        }
    }
}
