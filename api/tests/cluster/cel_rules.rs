//! The TopologyAwareScheduling CRD refuses bad objects at create time, on the real API
//! server, with a message that names the offending field; good objects get the schema
//! defaults. Every request is a server-side dry run, so the cluster keeps no object.

use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use tas_testcluster::{apply_crds_from_dir, crd_dir};

use super::shared;

pub(super) async fn api() -> Api<DynamicObject> {
    let client = shared().client().await.expect("client");
    apply_crds_from_dir(&client, &crd_dir())
        .await
        .expect("CRDs install");
    let ar = ApiResource {
        group: "tas.dev".into(),
        version: "v1alpha1".into(),
        api_version: "tas.dev/v1alpha1".into(),
        kind: "TopologyAwareScheduling".into(),
        plural: "topologyawareschedulings".into(),
    };
    Api::all_with(client, &ar)
}

pub(super) fn object(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "tas.dev/v1alpha1",
        "kind": "TopologyAwareScheduling",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("well-formed object")
}

pub(super) async fn dry_run_create(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
) -> Result<DynamicObject, String> {
    let pp = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&pp, obj).await.map_err(|e| match e {
        kube::Error::Api(s) => s.message,
        other => format!("not an API refusal: {other}"),
    })
}

/// Creates (dry run) each case's object `name` with `spec`; asserts that every one is
/// refused with a message containing its text, listing every case that is not.
/// A case is (what it tries, name, spec, text the refusal must contain).
pub(super) async fn assert_each_refused(
    api: &Api<DynamicObject>,
    cases: &[(&str, &str, Value, &str)],
) {
    let mut failures = Vec::new();
    for (case, name, spec, want) in cases {
        match dry_run_create(api, &object(name, spec.clone())).await {
            Ok(_) => failures.push(format!("{case}: accepted")),
            Err(msg) if !msg.contains(want) => {
                failures.push(format!("{case}: refusal does not contain {want:?}: {msg}"))
            }
            Err(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn every_schema_rule_refuses_a_bad_object_naming_the_field() {
    let api = api().await;
    // (case, name, spec, text the refusal must contain)
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "singleton name",
            "other",
            json!({}),
            "metadata.name must be 'default'",
        ),
        (
            "namespace label",
            "default",
            json!({"namespace": "Bad_NS"}),
            "spec.namespace must be a DNS-1123 label",
        ),
        (
            "namespace length",
            "default",
            json!({"namespace": "a".repeat(64)}),
            "spec.namespace",
        ),
        (
            "nrtCRD delete without manage",
            "default",
            json!({"nrtCRD": {"manage": false, "deleteOnUninstall": true}}),
            "spec.nrtCRD.deleteOnUninstall requires spec.nrtCRD.manage",
        ),
        (
            "group name label",
            "default",
            json!({"nodeGroups": [{"name": "Bad Name"}]}),
            "spec.nodeGroups[].name must be a DNS-1123 label",
        ),
        (
            "group name length",
            "default",
            json!({"nodeGroups": [{"name": "a".repeat(41)}]}),
            "spec.nodeGroups[0].name",
        ),
        (
            "group names unique",
            "default",
            json!({"nodeGroups": [{"name": "a"}, {"name": "a"}]}),
            "spec.nodeGroups",
        ),
        (
            "too many groups",
            "default",
            json!({"nodeGroups": (0..33).map(|i| json!({"name": format!("g{i}")})).collect::<Vec<_>>()}),
            "spec.nodeGroups",
        ),
        (
            "selector operator",
            "default",
            json!({"nodeGroups": [{"name": "a", "nodeSelector": {"matchExpressions": [{"key": "k"}]}}]}),
            "spec.nodeGroups[0].nodeSelector.matchExpressions[0].operator",
        ),
        (
            "refresh period too short",
            "default",
            json!({"updater": {"refresh": {"period": "500ms"}}}),
            "spec.updater.refresh.period must be a duration of at least 1s",
        ),
        (
            "refresh period garbage",
            "default",
            json!({"updater": {"refresh": {"period": "ten seconds"}}}),
            "spec.updater.refresh.period must be a duration of at least 1s",
        ),
        (
            "debounce too long",
            "default",
            json!({"updater": {"refresh": {"debounce": "11s"}}}),
            "spec.updater.refresh.debounce must be a duration between 0s and 10s",
        ),
        (
            "refresh mode enum",
            "default",
            json!({"updater": {"refresh": {"mode": "Sometimes"}}}),
            "spec.updater.refresh.mode",
        ),
        (
            "fingerprint enum",
            "default",
            json!({"updater": {"podsFingerprint": "Maybe"}}),
            "spec.updater.podsFingerprint",
        ),
        (
            "exclude shape",
            "default",
            json!({"updater": {"excludePods": ["no-slash"]}}),
            "spec.updater.excludePods entries must look like 'namespace/name'",
        ),
        (
            "exclude glob the agent cannot compile",
            "default",
            json!({"updater": {"excludePods": ["ns/[unclosed"]}}),
            "spec.updater.excludePods entries must look like 'namespace/name'",
        ),
        (
            "exclude glob whose set is never closed",
            "default",
            json!({"updater": {"excludePods": ["ns/[^]"]}}),
            "spec.updater.excludePods entries must look like 'namespace/name'",
        ),
        (
            "exclude glob with a reversed range",
            "default",
            json!({"updater": {"excludePods": ["ns/[z-a]"]}}),
            "spec.updater.excludePods entries must look like 'namespace/name'",
        ),
        (
            "podResourcesDir absolute",
            "default",
            json!({"updater": {"kubelet": {"podResourcesDir": "var/lib"}}}),
            "spec.updater.kubelet.podResourcesDir must be a kubelet pod-resources directory",
        ),
        (
            "configFile relative",
            "default",
            json!({"updater": {"kubelet": {"configFile": "config.yaml"}}}),
            "spec.updater.kubelet.configFile must be a kubelet configuration file",
        ),
        (
            "updater image spaces",
            "default",
            json!({"updater": {"image": "a b"}}),
            "spec.updater.image must not contain spaces",
        ),
        (
            "group image spaces",
            "default",
            json!({"nodeGroups": [{"name": "a", "updater": {"image": "a b"}}]}),
            "spec.nodeGroups[].updater.image must not contain spaces",
        ),
        (
            "group period",
            "default",
            json!({"nodeGroups": [{"name": "a", "updater": {"refresh": {"period": "0s"}}}]}),
            "spec.nodeGroups[].updater.refresh.period must be a duration of at least 1s",
        ),
        (
            "group debounce",
            "default",
            json!({"nodeGroups": [{"name": "a", "updater": {"refresh": {"debounce": "1h"}}}]}),
            "spec.nodeGroups[].updater.refresh.debounce must be a duration between 0s and 10s",
        ),
        (
            "group excludes",
            "default",
            json!({"nodeGroups": [{"name": "a", "updater": {"excludePods": ["x"]}}]}),
            "spec.nodeGroups[].updater.excludePods entries must look like 'namespace/name'",
        ),
        (
            "group exclude glob the agent cannot compile",
            "default",
            json!({"nodeGroups": [{"name": "a", "updater": {"excludePods": ["ns/{a,{b}}"]}}]}),
            "spec.nodeGroups[].updater.excludePods entries must look like 'namespace/name'",
        ),
        (
            "schedulerName label",
            "default",
            json!({"scheduler": {"schedulerName": "Bad_Name"}}),
            "spec.scheduler.schedulerName must be a DNS-1123 label",
        ),
        (
            "schedulerName reserved",
            "default",
            json!({"scheduler": {"schedulerName": "default-scheduler"}}),
            "spec.scheduler.schedulerName must not be 'default-scheduler'",
        ),
        (
            "replicas low",
            "default",
            json!({"scheduler": {"replicas": 0}}),
            "spec.scheduler.replicas",
        ),
        (
            "replicas high",
            "default",
            json!({"scheduler": {"replicas": 6}}),
            "spec.scheduler.replicas",
        ),
        (
            "scheduler image spaces",
            "default",
            json!({"scheduler": {"image": "a b"}}),
            "spec.scheduler.image must not contain spaces",
        ),
        (
            "strategy enum",
            "default",
            json!({"scheduler": {"scoring": {"strategy": "Random"}}}),
            "spec.scheduler.scoring.strategy",
        ),
        (
            "weight low",
            "default",
            json!({"scheduler": {"scoring": {"resources": [{"name": "cpu", "weight": 0}]}}}),
            "spec.scheduler.scoring.resources[0].weight",
        ),
        (
            "weight high",
            "default",
            json!({"scheduler": {"scoring": {"resources": [{"name": "cpu", "weight": 101}]}}}),
            "spec.scheduler.scoring.resources[0].weight",
        ),
        (
            "weights unique",
            "default",
            json!({"scheduler": {"scoring": {"resources": [{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 2}]}}}),
            "spec.scheduler.scoring.resources",
        ),
        (
            "weights non-empty",
            "default",
            json!({"scheduler": {"scoring": {"resources": []}}}),
            "spec.scheduler.scoring.resources",
        ),
        (
            "resync too short",
            "default",
            json!({"scheduler": {"cache": {"resyncPeriod": "100ms"}}}),
            "spec.scheduler.cache.resyncPeriod must be a duration of at least 1s",
        ),
        (
            "staleness below resync",
            "default",
            json!({"scheduler": {"cache": {"resyncPeriod": "10s", "maxStaleness": "5s"}}}),
            "spec.scheduler.cache.maxStaleness must be at least spec.scheduler.cache.resyncPeriod",
        ),
        (
            "staleness garbage",
            "default",
            json!({"scheduler": {"cache": {"maxStaleness": "forever"}}}),
            "spec.scheduler.cache.maxStaleness must be a duration of at least 1s",
        ),
        (
            "no missed heartbeat allowed",
            "default",
            json!({"scheduler": {"cache": {"missedHeartbeats": 0}}}),
            "spec.scheduler.cache.missedHeartbeats",
        ),
        (
            "heartbeat too frequent",
            "default",
            json!({"updater": {"refresh": {"heartbeatPeriod": "5s"}}}),
            "spec.updater.refresh.heartbeatPeriod must be a duration between 10s and 1h",
        ),
        (
            "heartbeat too rare",
            "default",
            json!({"updater": {"refresh": {"heartbeatPeriod": "2h"}}}),
            "spec.updater.refresh.heartbeatPeriod must be a duration between 10s and 1h",
        ),
        (
            "group heartbeat garbage",
            "default",
            json!({"nodeGroups": [{"name": "a", "updater": {"refresh": {"heartbeatPeriod": "often"}}}]}),
            "spec.nodeGroups[].updater.refresh.heartbeatPeriod must be a duration between 10s and 1h",
        ),
        (
            "foreign pods enum",
            "default",
            json!({"scheduler": {"cache": {"foreignPods": "Some"}}}),
            "spec.scheduler.cache.foreignPods",
        ),
        (
            "informer enum",
            "default",
            json!({"scheduler": {"cache": {"informerMode": "Both"}}}),
            "spec.scheduler.cache.informerMode",
        ),
        (
            "nodes without topology enum",
            "default",
            json!({"scheduler": {"nodesWithoutTopology": "Maybe"}}),
            "spec.scheduler.nodesWithoutTopology",
        ),
        (
            "otlp scheme",
            "default",
            json!({"observability": {"otlpEndpoint": "otel:4317"}}),
            "spec.observability.otlpEndpoint must be an http:// or https:// URL",
        ),
        (
            "otlp port out of range",
            "default",
            json!({"observability": {"otlpEndpoint": "http://collector:65536"}}),
            "spec.observability.otlpEndpoint must name a host and, if any, a port from 1 to 65535",
        ),
        (
            "otlp port not a number",
            "default",
            json!({"observability": {"otlpEndpoint": "http://collector:43x7"}}),
            "spec.observability.otlpEndpoint must name a host",
        ),
        (
            "otlp without a host",
            "default",
            json!({"observability": {"otlpEndpoint": "http://:4317"}}),
            "spec.observability.otlpEndpoint must name a host",
        ),
        (
            "log level enum",
            "default",
            json!({"observability": {"logLevel": "verbose"}}),
            "spec.observability.logLevel",
        ),
    ];
    // The CR cannot escalate: no host directory or file outside the kubelet's own, no
    // system namespace for the operands.
    let escalations: Vec<(&str, &str, Value, &str)> = REFUSED_POD_RESOURCES_DIRS
        .iter()
        .map(|dir| {
            (
                *dir,
                "default",
                json!({"updater": {"kubelet": {"podResourcesDir": dir}}}),
                "spec.updater.kubelet.podResourcesDir must be a kubelet pod-resources directory",
            )
        })
        .chain(REFUSED_CONFIG_FILES.iter().map(|file| {
            (
                *file,
                "default",
                json!({"updater": {"kubelet": {"configFile": file}}}),
                "spec.updater.kubelet.configFile must be a kubelet configuration file",
            )
        }))
        .chain(REFUSED_CONFIG_DIRS.iter().map(|dir| {
            (
                *dir,
                "default",
                json!({"updater": {"kubelet": {"configDir": dir}}}),
                "spec.updater.kubelet.configDir must be a kubelet drop-in directory",
            )
        }))
        .chain(
            [
                "default",
                "kube-system",
                "kube-public",
                "kube-node-lease",
                "openshift-monitoring",
            ]
            .map(|ns| {
                (
                    ns,
                    "default",
                    json!({"namespace": ns}),
                    "spec.namespace must not be default or a kube-* or openshift* namespace",
                )
            }),
        )
        .collect();
    let cases: Vec<_> = cases.into_iter().chain(escalations).collect();
    assert_each_refused(&api, &cases).await;
}

#[tokio::test]
async fn a_minimal_object_is_accepted_and_defaulted_by_the_api_server() {
    let api = api().await;
    let created = dry_run_create(&api, &object("default", json!({})))
        .await
        .expect("minimal object accepted");
    let spec = &created.data["spec"];
    assert_eq!(spec["namespace"], "tas-system");
    assert_eq!(spec["nrtCRD"]["manage"], true);
    assert_eq!(spec["updater"]["refresh"]["mode"], "PeriodicAndEvents");
    assert_eq!(spec["updater"]["refresh"]["period"], "10s");
    assert_eq!(spec["updater"]["refresh"]["heartbeatPeriod"], "10m");
    assert_eq!(spec["scheduler"]["cache"]["missedHeartbeats"], 3);
    assert!(
        spec["updater"]["tolerations"]
            .as_array()
            .is_none_or(|t| t.is_empty()),
        "no taint tolerated by default: {}",
        spec["updater"]
    );
    assert_eq!(
        spec["scheduler"]["schedulerName"],
        "topology-aware-scheduler"
    );
    assert_eq!(spec["scheduler"]["cache"]["resyncPeriod"], "5s");
    assert_eq!(spec["networkPolicy"]["enabled"], true);
    // What the server defaulted is exactly what the operator's types default.
    let typed: tas_api::tas::TopologyAwareSchedulingSpec =
        serde_json::from_value(spec.clone()).expect("defaulted spec parses");
    assert_eq!(typed.scheduler, tas_api::tas::SchedulerSpec::default());
    assert_eq!(typed.updater, tas_api::tas::UpdaterSpec::default());
}

#[tokio::test]
async fn a_full_object_is_accepted() {
    let api = api().await;
    let spec = json!({
        "namespace": "numa",
        "nrtCRD": {"manage": true, "deleteOnUninstall": true},
        "updater": {
            "image": "example.test/tas-updater:v1",
            "refresh": {"mode": "Events", "period": "1m30s", "debounce": "0s"},
            "podsFingerprint": "All",
            "excludePods": ["kube-system/*", "monitoring/node-exporter-*", "ns/pod-[!0]", "ns/{a,b}-?"],
        },
        "nodeGroups": [
            {"name": "workers", "nodeSelector": {"matchLabels": {"numa": "true"}}},
            {"name": "gpu", "nodeSelector": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
             "updater": {"refresh": {"period": "5s"}, "podsFingerprint": "Disabled"}},
        ],
        "scheduler": {
            "schedulerName": "numa-scheduler", "replicas": 3,
            "scoring": {"strategy": "LeastNUMANodes", "resources": [{"name": "cpu", "weight": 100}]},
            "cache": {"resyncPeriod": "2s", "maxStaleness": "2s", "foreignPods": "All", "informerMode": "Dedicated"},
            "nodesWithoutTopology": "Skip",
        },
        "observability": {"logLevel": "debug", "otlpEndpoint": "http://otel-collector.monitoring:4317"},
    });
    dry_run_create(&api, &object("default", spec))
        .await
        .expect("full object accepted");
}

/// Every endpoint form the operator can open a NetworkPolicy port for is accepted: a
/// name or an address, IPv6 in brackets, with or without a port or a path.
#[tokio::test]
async fn every_otlp_endpoint_form_the_operator_parses_is_accepted() {
    let api = api().await;
    for endpoint in [
        "http://collector.example:14317",
        "https://collector.example",
        "http://10.0.0.7:4317/",
        "http://[fd00::1]:4317",
        "https://[fd00::1]/v1",
        "http://user@collector:65535",
    ] {
        tas_api::tas::otlp_port(endpoint).expect("the operator parses it");
        let spec = json!({"observability": {"otlpEndpoint": endpoint}});
        dry_run_create(&api, &object("default", spec))
            .await
            .unwrap_or_else(|e| panic!("{endpoint} refused: {e}"));
    }
}

/// Host directories the agent must not get as `podResourcesDir`.
pub(super) const REFUSED_POD_RESOURCES_DIRS: [&str; 8] = [
    "/",
    "/etc/kubernetes",
    "/var/lib/kubelet",
    "/var/lib/kubelet/pki",
    "/var/lib/kubelet/pod-resources/../pki",
    "/var/lib/kubelet/pod-resources-x",
    "/root",
    "/var/run/containerd",
];

/// Host files the agent must not get as `configFile`: credentials, keys, anything else.
pub(super) const REFUSED_CONFIG_FILES: [&str; 8] = [
    "/",
    "/etc/kubernetes",
    "/etc/kubernetes/admin.conf",
    "/etc/kubernetes/pki/ca.key",
    "/var/lib/kubelet/kubeconfig",
    "/var/lib/kubelet/pki/kubelet-client-current.pem",
    "/var/lib/kubelet/../../../etc/shadow",
    "/etc/shadow",
];

/// Host directories the agent must not get as `configDir` (the drop-in directory).
pub(super) const REFUSED_CONFIG_DIRS: [&str; 6] = [
    "/",
    "/etc",
    "/etc/kubernetes",
    "/etc/kubernetes/pki",
    "/etc/sudoers.d",
    "/var/lib/kubelet/../../etc/kubelet.d",
];

/// Every documented kubelet layout is accepted (docs/user-guide.md, "Host paths").
#[tokio::test]
async fn the_kubelet_paths_of_every_documented_layout_are_accepted() {
    let api = api().await;
    let dirs = [
        "/var/lib/kubelet/pod-resources",
        "/var/lib/kubelet/pod-resources/",
        "/var/lib/k0s/kubelet/pod-resources",
        "/var/snap/microk8s/common/var/lib/kubelet/pod-resources",
    ];
    let files = [
        "/var/lib/kubelet/config.yaml",
        "/etc/kubernetes/kubelet/kubelet-config.json",
        "/etc/kubernetes/kubelet/config.json",
        "/home/kubernetes/kubelet-config.yaml",
        "/etc/kubernetes/kubelet.conf",
        "/etc/kubernetes/kubelet-config.yaml",
        "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf",
        "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/00-rke2-defaults.conf",
        "/var/lib/k0s/kubelet-config.yaml",
    ];
    let mut refused = Vec::new();
    for spec in dirs
        .iter()
        .map(|d| json!({"updater": {"kubelet": {"podResourcesDir": d}}}))
        .chain(
            files
                .iter()
                .map(|f| json!({"updater": {"kubelet": {"configFile": f}}})),
        )
        .chain(
            [
                "/etc/kubernetes/kubelet/config.json.d",
                "/etc/kubernetes/kubelet.conf.d",
                "/etc/kubelet.conf.d/",
            ]
            .map(|d| json!({"updater": {"kubelet": {"configDir": d}}})),
        )
        .chain([json!({"namespace": "numa-operands"})])
    {
        if let Err(msg) = dry_run_create(&api, &object("default", spec.clone())).await {
            refused.push(format!("{spec}: {msg}"));
        }
    }
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
}
