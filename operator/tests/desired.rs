//! The desired-state builders, from YAML fixtures of the CR: what a user would see in the
//! cluster after applying them.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use std::collections::BTreeMap;
use tas_api::config::kubelet_mounts::KUBELET_CONFIG_DIR_MOUNT;
use tas_api::config::updater::{POD_RESOURCES_MOUNT, SOCKET_NAME, SYSFS_MOUNT, UpdaterArgs};
use tas_api::tas::{ScoringStrategy, TopologyAwareScheduling, UpdaterSpec};
use tas_operator::desired::{self, BuildContext, CONFIG_HASH_ANNOTATION, Desired};
use tas_operator::validate::validate;

fn fixture(name: &str) -> TopologyAwareScheduling {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("fixture is readable");
    serde_norway::from_str(&text).expect("fixture is a valid TopologyAwareScheduling")
}

fn ctx() -> BuildContext {
    BuildContext {
        updater_image_default: Some("registry.example/tas/updater:release".to_owned()),
        scheduler_image_default: Some("registry.example/tas/scheduler:release".to_owned()),
        allowed_images: vec![
            "registry.example/tas/updater:v0.3.0".to_owned(),
            "registry.example/tas/updater:v0.3.1-rc.1".to_owned(),
            // config_hash_changes_with_the_settings_and_only_with_them moves to it.
            "registry.example/tas/updater:v0.3.2".to_owned(),
            "registry.example/tas/scheduler:v0.3.0".to_owned(),
        ],
        allowed_toleration_keys: vec!["dedicated".to_owned()],
        updater_namespace: None,
    }
}

fn build(cr: &TopologyAwareScheduling) -> Desired {
    let valid = validate(cr, &ctx(), None).expect("fixture is valid");
    desired::build(&valid).expect("fixture builds")
}

fn daemon_set<'a>(d: &'a Desired, group: &str) -> &'a DaemonSet {
    let name = desired::updater_daemonset_name(group);
    d.daemon_sets
        .iter()
        .find(|ds| ds.metadata.name.as_deref() == Some(name.as_str()))
        .unwrap_or_else(|| panic!("no DaemonSet {name}"))
}

fn pod(ds: &DaemonSet) -> &PodSpec {
    ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

fn container(p: &PodSpec) -> &Container {
    &p.containers[0]
}

fn args(ds: &DaemonSet) -> Vec<String> {
    container(pod(ds)).args.clone().unwrap()
}

fn hash_of(ds: &DaemonSet) -> String {
    ds.spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref()
        .unwrap()[CONFIG_HASH_ANNOTATION]
        .clone()
}

fn scheduler_hash(d: &Desired) -> String {
    let t = &d.deployment.spec.as_ref().unwrap().template;
    t.metadata.as_ref().unwrap().annotations.as_ref().unwrap()[CONFIG_HASH_ANNOTATION].clone()
}

#[test]
fn minimal_cr_runs_one_agent_on_every_node_and_one_scheduler() {
    let d = build(&fixture("minimal.yaml"));
    assert_eq!(d.namespace.metadata.name.as_deref(), Some("tas-system"));
    assert_eq!(d.daemon_sets.len(), 1);
    let ds = daemon_set(&d, "all");
    assert_eq!(ds.metadata.namespace.as_deref(), Some("tas-system"));
    assert!(
        pod(ds).affinity.is_none(),
        "an empty selector selects every node"
    );
    assert_eq!(
        args(ds),
        UpdaterArgs::for_daemonset(&UpdaterSpec::default(), "info").to_args()
    );
    let c = container(pod(ds));
    assert_eq!(
        c.image.as_deref(),
        Some("registry.example/tas/updater:release")
    );
    // No tolerations by default: untainted nodes only, never the control plane (the
    // DaemonSet controller adds the node-condition tolerations itself).
    assert_eq!(pod(ds).tolerations.as_deref(), Some(&[][..]));

    let dep = d.deployment.spec.as_ref().unwrap();
    assert_eq!(dep.replicas, Some(1));
    // One replica elects a leader too, so a rolling update may run the old and the
    // new pod side by side: the Lease lets only one of them bind.
    assert_eq!(
        dep.strategy.as_ref().unwrap().type_.as_deref(),
        Some("RollingUpdate")
    );
    assert_eq!(
        d.roles.len(),
        1,
        "the Lease Role exists for one replica too"
    );
    assert!(d.nrt_crd.is_some(), "the NRT CRD is managed by default");
}

#[test]
fn full_cr_runs_one_daemonset_per_group_with_its_merged_settings() {
    let d = build(&fixture("full.yaml"));
    let names: Vec<_> = d
        .daemon_sets
        .iter()
        .map(|ds| ds.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["tas-updater-numa-workers", "tas-updater-gpu"]);

    let numa = daemon_set(&d, "numa-workers");
    let gpu = daemon_set(&d, "gpu");
    for ds in [numa, gpu] {
        assert_eq!(ds.metadata.namespace.as_deref(), Some("numa-system"));
        let a = args(ds);
        for flag in [
            "--debounce=300ms",
            "--exclude-pods=kube-system/*",
            "--log-level=debug",
        ] {
            assert!(a.iter().any(|x| x == flag), "{flag} missing from {a:?}");
        }
    }
    assert!(args(numa).contains(&"--refresh-period=5s".to_owned()));
    assert!(args(numa).contains(&"--pods-fingerprint=all".to_owned()));
    assert!(args(gpu).contains(&"--refresh-period=10s".to_owned()));
    assert!(args(gpu).contains(&"--pods-fingerprint=disabled".to_owned()));

    // The CR's image wins over the operator's default; a group's override wins over both.
    let image = |ds| container(pod(ds)).image.clone().unwrap();
    assert_eq!(image(numa), "registry.example/tas/updater:v0.3.0");
    assert_eq!(image(gpu), "registry.example/tas/updater:v0.3.1-rc.1");

    let tolerations = pod(numa).tolerations.as_ref().unwrap();
    assert_eq!(tolerations.len(), 1);
    assert_eq!(tolerations[0].key.as_deref(), Some("dedicated"));
    let gpu_res = container(pod(gpu)).resources.as_ref().unwrap();
    assert_eq!(gpu_res.limits.as_ref().unwrap()["memory"].0, "128Mi");
    let numa_res = container(pod(numa)).resources.as_ref().unwrap();
    assert_eq!(numa_res.limits.as_ref().unwrap()["memory"].0, "96Mi");

    let env = container(pod(numa)).env.as_ref().unwrap();
    let node_name = env.iter().find(|e| e.name == "NODE_NAME").unwrap();
    let field = node_name
        .value_from
        .as_ref()
        .unwrap()
        .field_ref
        .as_ref()
        .unwrap();
    assert_eq!(field.field_path, "spec.nodeName");
}

#[test]
fn node_affinity_is_the_group_selector() {
    let d = build(&fixture("full.yaml"));
    let reqs = |group| -> Vec<(String, String, Vec<String>)> {
        let aff = pod(daemon_set(&d, group)).affinity.clone().unwrap();
        let sel = aff
            .node_affinity
            .unwrap()
            .required_during_scheduling_ignored_during_execution;
        let terms = sel.unwrap().node_selector_terms;
        assert_eq!(
            terms.len(),
            1,
            "one term: requirements are ANDed like the selector's"
        );
        let exprs = terms[0].match_expressions.clone().unwrap();
        exprs
            .into_iter()
            .map(|r| (r.key, r.operator, r.values.unwrap_or_default()))
            .collect()
    };
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        reqs("numa-workers"),
        [
            ("tas.dev/numa".into(), "In".into(), s(&["true"])),
            (
                "topology.example/rack".into(),
                "In".into(),
                s(&["r1", "r2"])
            ),
            (
                "node.example/retiring".into(),
                "DoesNotExist".into(),
                vec![]
            ),
        ]
    );
    assert_eq!(
        reqs("gpu"),
        [
            ("nvidia.com/gpu.present".into(), "Exists".into(), vec![]),
            (
                "node-role.kubernetes.io/control-plane".into(),
                "NotIn".into(),
                s(&["true"])
            ),
        ]
    );
}

#[test]
fn host_paths_are_mounted_read_only_and_the_socket_directory_not_the_socket() {
    let d = build(&fixture("full.yaml"));
    for ds in &d.daemon_sets {
        let p = pod(ds);
        let host: BTreeMap<_, _> = p
            .volumes
            .as_ref()
            .unwrap()
            .iter()
            .map(|v| {
                let h = v.host_path.as_ref().expect("only hostPath volumes");
                (v.name.clone(), (h.path.clone(), h.type_.clone().unwrap()))
            })
            .collect();
        let mounts: BTreeMap<_, _> = container(p)
            .volume_mounts
            .as_ref()
            .unwrap()
            .iter()
            .map(|m| {
                assert_eq!(m.read_only, Some(true), "{} must be read-only", m.name);
                (m.name.clone(), m.mount_path.clone())
            })
            .collect();
        let at = |mount: &str| {
            let (name, _) = mounts.iter().find(|(_, p)| *p == mount).expect("mounted");
            host[name].clone()
        };
        // Only the NUMA nodes of sysfs, where the agent's --sysfs-root expects them.
        assert_eq!(
            at(&format!("{SYSFS_MOUNT}/devices/system/node")),
            ("/sys/devices/system/node".into(), "Directory".into())
        );
        assert!(host.values().all(|(path, _)| path != "/sys" && path != "/"));
        assert!(args(ds).contains(&format!("--sysfs-root={SYSFS_MOUNT}")));
        // /etc/kubernetes holds the cluster's keys: the config file alone, never the
        // directory (elsewhere the file's directory, so a rename is seen).
        assert_eq!(
            at(&format!("{KUBELET_CONFIG_DIR_MOUNT}/kubelet-config.yaml")),
            ("/etc/kubernetes/kubelet-config.yaml".into(), "File".into())
        );
        assert!(host.values().all(|(path, _)| path != "/etc/kubernetes"));
        assert!(
            args(ds).contains(&"--kubelet-config=/host-kubelet/kubelet-config.yaml".to_owned())
        );
        assert_eq!(
            at(POD_RESOURCES_MOUNT),
            (
                "/var/lib/k0s/kubelet/pod-resources".into(),
                "Directory".into()
            )
        );
        assert_eq!(host.len(), 3, "nothing else from the host");
        assert!(host.values().all(|(path, _)| !path.ends_with(SOCKET_NAME)));
        let socket = format!("--podresources-socket={POD_RESOURCES_MOUNT}/{SOCKET_NAME}");
        assert!(
            args(ds).contains(&socket),
            "the agent dials the socket inside the mount"
        );
    }
}

#[test]
fn node_agent_runs_as_root_owner_of_the_socket_and_nothing_more() {
    let d = build(&fixture("full.yaml"));
    let ds = daemon_set(&d, "gpu");
    let p = pod(ds);
    let sc = container(p).security_context.clone().unwrap();
    assert_eq!((sc.run_as_user, sc.run_as_non_root), (Some(0), Some(false)));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.privileged, Some(false));
    assert_eq!(
        sc.capabilities.as_ref().unwrap().drop,
        Some(vec!["ALL".to_owned()])
    );
    assert_eq!(sc.seccomp_profile.unwrap().type_, "RuntimeDefault");
    assert!(sc.capabilities.as_ref().unwrap().add.is_none());
    let pod_sc = p.security_context.clone().unwrap();
    assert_eq!(pod_sc.seccomp_profile.unwrap().type_, "RuntimeDefault");
    // Nothing shared with the host but the read-only mounts.
    assert_eq!(p.host_network, None);
    assert_eq!(p.host_pid, None);
    assert_eq!(p.host_ipc, None);
    for m in container(p).volume_mounts.as_ref().unwrap() {
        assert_eq!(m.read_only, Some(true), "{}", m.name);
        assert_eq!(
            m.recursive_read_only.as_deref(),
            Some("IfPossible"),
            "{}",
            m.name
        );
        assert_eq!(m.mount_propagation, None, "{}", m.name);
    }
    assert_eq!(
        p.priority_class_name.as_deref(),
        Some("system-node-critical")
    );
    assert_eq!(
        p.service_account_name.as_deref(),
        Some(desired::UPDATER_SERVICE_ACCOUNT)
    );
    assert_eq!(p.automount_service_account_token, Some(true));

    let c = container(p);
    let port = &c.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.container_port),
        (Some("https"), 8080)
    );
    let probe_path = |probe: &Option<k8s_openapi::api::core::v1::Probe>| {
        let get = probe.clone().unwrap().http_get.unwrap();
        assert_eq!(
            get.port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("https".into())
        );
        // TLS, which the kubelet's HTTPS probes do not verify.
        assert_eq!(get.scheme.as_deref(), Some("HTTPS"));
        get.path.unwrap()
    };
    assert_eq!(probe_path(&c.liveness_probe), "/healthz");
    assert_eq!(probe_path(&c.readiness_probe), "/readyz");

    let rolling = ds
        .spec
        .as_ref()
        .unwrap()
        .update_strategy
        .clone()
        .unwrap()
        .rolling_update
        .unwrap();
    assert_eq!(
        rolling.max_unavailable,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("10%".into()))
    );
}

#[test]
fn config_hash_changes_with_the_settings_and_only_with_them() {
    let base_cr = fixture("full.yaml");
    let base = build(&base_cr);
    let hashes = |d: &Desired| {
        (
            hash_of(daemon_set(d, "numa-workers")),
            hash_of(daemon_set(d, "gpu")),
            scheduler_hash(d),
        )
    };
    let (numa, gpu, sched) = hashes(&base);
    assert_eq!(
        hashes(&build(&base_cr)),
        (numa.clone(), gpu.clone(), sched.clone()),
        "deterministic"
    );
    assert_eq!(numa.len(), 16);

    // A group's refresh period: only that group's agents roll.
    let mut cr = base_cr.clone();
    let o = cr.spec.node_groups[0].updater.as_mut().unwrap();
    o.refresh.as_mut().unwrap().period = Some("7s".to_owned());
    let h = hashes(&build(&cr));
    assert!(h.0 != numa && h.1 == gpu && h.2 == sched, "{h:?}");

    // The shared image: the group with its own image keeps its pods.
    let mut cr = base_cr.clone();
    cr.spec.updater.image = Some("registry.example/tas/updater:v0.3.2".to_owned());
    let h = hashes(&build(&cr));
    assert!(h.0 != numa && h.1 == gpu && h.2 == sched, "{h:?}");

    // Scheduler scoring: only the scheduler rolls.
    let mut cr = base_cr.clone();
    cr.spec.scheduler.scoring.strategy = ScoringStrategy::LeastNUMANodes;
    let h = hashes(&build(&cr));
    assert!(h.0 == numa && h.1 == gpu && h.2 != sched, "{h:?}");

    // More replicas, still leader-elected: the config file is the same, nothing rolls.
    let mut cr = base_cr.clone();
    cr.spec.scheduler.replicas = 3;
    assert_eq!(hashes(&build(&cr)), (numa, gpu, sched));
}
