//! Pod requests: QoS class, defaulting, pod-level sums, exclusive CPUs, errors.

use super::super::{ContainerKind, PodRequest, QosClass};
use super::*;

fn pairs(r: &super::super::Resources) -> Vec<(String, i64)> {
    r.iter().map(|(n, a)| (n.to_owned(), a)).collect()
}

fn own(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|&(n, a)| (n.to_owned(), a)).collect()
}

#[test]
fn qos_class_matches_kubernetes() {
    use QosClass::*;
    let cases: &[(&str, Pod, QosClass)] = &[
        ("no resources", pod(vec![burstable("a", &[])]), BestEffort),
        (
            "devices only",
            pod(vec![burstable("a", &[("example.com/nic", "1")])]),
            BestEffort,
        ),
        (
            "limits only (requests default)",
            pod(vec![guaranteed("a", &[("cpu", "1"), ("memory", "1Gi")])]),
            Guaranteed,
        ),
        (
            "requests equal limits",
            pod(vec![container(
                "a",
                &[("cpu", "500m"), ("memory", "1Gi")],
                &[("cpu", "0.5"), ("memory", "1Gi")],
            )]),
            Guaranteed,
        ),
        (
            "requests below limits",
            pod(vec![container(
                "a",
                &[("cpu", "1")],
                &[("cpu", "2"), ("memory", "1Gi")],
            )]),
            Burstable,
        ),
        (
            "memory limit missing",
            pod(vec![guaranteed("a", &[("cpu", "1")])]),
            Burstable,
        ),
        (
            "requests only",
            pod(vec![burstable("a", &[("cpu", "1"), ("memory", "1Gi")])]),
            Burstable,
        ),
        (
            "one container not limited",
            pod(vec![
                guaranteed("a", &[("cpu", "1"), ("memory", "1Gi")]),
                burstable("b", &[]),
            ]),
            Burstable,
        ),
        (
            "init container counts too",
            pod_with(
                vec![burstable("i", &[("cpu", "1")])],
                vec![guaranteed("a", &[("cpu", "1"), ("memory", "1Gi")])],
                &[],
            ),
            Burstable,
        ),
        (
            // Kubernetes compares the pod-wide sums, not each container.
            "sums equal across containers",
            pod(vec![
                container(
                    "a",
                    &[("cpu", "1"), ("memory", "1Gi")],
                    &[("cpu", "2"), ("memory", "1Gi")],
                ),
                container(
                    "b",
                    &[("cpu", "2"), ("memory", "1Gi")],
                    &[("cpu", "1"), ("memory", "1Gi")],
                ),
            ]),
            Guaranteed,
        ),
        (
            "zero limits are ignored",
            pod(vec![guaranteed("a", &[("cpu", "0"), ("memory", "0")])]),
            BestEffort,
        ),
    ];
    for (case, pod, qos) in cases {
        assert_eq!(PodRequest::from_pod(pod).unwrap().qos(), *qos, "{case}");
    }
}

#[test]
fn requests_are_integers_in_fixed_units() {
    let req = request(&pod(vec![burstable(
        "a",
        &[
            ("cpu", "1500m"),
            ("memory", "1Gi"),
            ("hugepages-2Mi", "4Mi"),
            ("example.com/nic", "2"),
            ("ephemeral-storage", "0"),
        ],
    )]));
    let c = &req.containers()[0];
    assert_eq!(&*c.name, "a");
    assert_eq!(c.kind, ContainerKind::App);
    assert_eq!(
        pairs(&c.resources),
        own(&[
            ("cpu", 1500),
            ("example.com/nic", 2),
            ("hugepages-2Mi", 4 << 20),
            ("memory", 1 << 30)
        ])
    );
    assert!(!c.exclusive_cpu);
}

#[test]
fn exclusive_cpus_need_guaranteed_and_whole_cpus() {
    let req = request(&pod(vec![
        guaranteed("whole", &[("cpu", "2"), ("memory", "1Gi")]),
        guaranteed("fraction", &[("cpu", "1500m"), ("memory", "1Gi")]),
    ]));
    let flags: Vec<bool> = req.containers().iter().map(|c| c.exclusive_cpu).collect();
    assert_eq!(flags, [true, false]);
    // Pod scope aligns only the exclusive CPUs.
    assert_eq!(
        pairs(req.numa_request()),
        own(&[("cpu", 2000), ("memory", 2 << 30)])
    );
    assert_eq!(req.effective().get("cpu"), 3500);
    let burst = request(&pod(vec![burstable("a", &[("cpu", "2")])]));
    assert!(!burst.containers()[0].exclusive_cpu);
}

#[test]
fn effective_request_handles_init_sidecars_and_overhead() {
    let g = |name: &str, cpu: &str| guaranteed(name, &[("cpu", cpu), ("memory", "1Gi")]);
    let cases: &[(&str, Pod, i64, i64)] = &[
        // (case, pod, effective cpu millis, numa cpu millis)
        (
            "apps add up",
            pod(vec![g("a", "2"), g("b", "3")]),
            5000,
            5000,
        ),
        (
            "init peak wins",
            pod_with(vec![g("i", "8")], vec![g("a", "2")], &[]),
            8000,
            8000,
        ),
        (
            "apps win over init",
            pod_with(vec![g("i", "3")], vec![g("a", "2"), g("b", "2")], &[]),
            4000,
            4000,
        ),
        (
            // The sidecar runs beside the apps and beside the init container after it.
            "sidecar counts like an app",
            pod_with(
                vec![sidecar(g("s", "1")), g("i", "4")],
                vec![g("a", "2")],
                &[],
            ),
            5000,
            5000,
        ),
        (
            "init before the sidecar runs alone",
            pod_with(
                vec![g("i", "4"), sidecar(g("s", "1"))],
                vec![g("a", "2")],
                &[],
            ),
            4000,
            4000,
        ),
        (
            "overhead only in effective",
            pod_with(
                Vec::new(),
                vec![g("a", "2")],
                &[("cpu", "250m"), ("memory", "64Mi")],
            ),
            2250,
            2000,
        ),
    ];
    for (case, pod, effective, numa) in cases {
        let req = request(pod);
        assert_eq!(req.effective().get("cpu"), *effective, "{case}");
        assert_eq!(req.numa_request().get("cpu"), *numa, "{case}");
    }
    let with_overhead = request(&cases[5].1);
    assert_eq!(
        with_overhead.effective().get("memory"),
        (1 << 30) + (64 << 20)
    );
    assert_eq!(with_overhead.overhead().get("cpu"), 250);
    let kinds: Vec<ContainerKind> = request(&cases[3].1)
        .containers()
        .iter()
        .map(|c| c.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            ContainerKind::Sidecar,
            ContainerKind::Init,
            ContainerKind::App
        ]
    );
}

#[test]
fn bad_quantities_name_container_and_resource() {
    let cases: &[(Pod, &str)] = &[
        (
            pod(vec![burstable("app", &[("cpu", "lots")])]),
            r#"container "app": requests of "cpu": invalid quantity "lots""#,
        ),
        (
            pod_with(
                vec![container("setup", &[], &[("memory", "-1Gi")])],
                vec![],
                &[],
            ),
            r#"init container "setup": limits of "memory": negative quantity "-1Gi""#,
        ),
        (
            pod_with(vec![], vec![burstable("a", &[])], &[("cpu", "x")]),
            r#"pod overhead: overhead of "cpu""#,
        ),
    ];
    for (pod, text) in cases {
        let err = PodRequest::from_pod(pod).unwrap_err().to_string();
        assert!(err.contains(text), "{err:?} lacks {text:?}");
    }
}

/// `pod` with pod-level resources (`spec.resources`): `limits` (requests defaulted
/// from them) and extra `requests`.
fn with_pod_level(mut pod: Pod, limits: &[(&str, &str)], requests: &[(&str, &str)]) -> Pod {
    let list = |pairs: &[(&str, &str)]| {
        (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .map(|&(n, v)| (n.to_owned(), Quantity(v.to_owned())))
                .collect()
        })
    };
    if let Some(spec) = pod.spec.as_mut() {
        spec.resources = Some(ResourceRequirements {
            limits: list(limits),
            requests: list(requests),
            ..ResourceRequirements::default()
        });
    }
    pod
}

/// As the kubelets of 1.34 to 1.37 (default feature gates) treat pod-level resources:
/// the QoS class from them, node-level requests from them, and the CPU and memory
/// managers skip the pod (checked against the referee: admitted with no exclusive CPU
/// and no pinned memory).
#[test]
fn pod_level_resources_set_the_class_and_the_node_request_but_pin_nothing() {
    let app = burstable("app", &[("example.com/gpu", "1")]);
    let guaranteed = with_pod_level(
        pod(vec![app.clone()]),
        &[("cpu", "2"), ("memory", "1Gi")],
        &[],
    );
    let r = request(&guaranteed);
    assert_eq!(r.qos(), QosClass::Guaranteed);
    assert!(r.has_pod_level_resources());
    assert!(!r.is_guaranteed(), "the resource managers skip it");
    assert!(r.containers().iter().all(|c| !c.exclusive_cpu));
    assert_eq!(
        pairs(r.effective()),
        own(&[("cpu", 2000), ("example.com/gpu", 1), ("memory", 1 << 30)])
    );
    // Requests below the limits: Burstable; the requests count.
    let burstable = with_pod_level(
        pod(vec![app.clone()]),
        &[("cpu", "4"), ("memory", "2Gi")],
        &[("cpu", "1"), ("memory", "2Gi")],
    );
    assert_eq!(request(&burstable).qos(), QosClass::Burstable);
    assert_eq!(request(&burstable).effective().get("cpu"), 1000);
    // Only cpu limited: not Guaranteed.
    let cpu_only = with_pod_level(pod(vec![app]), &[("cpu", "2")], &[]);
    assert_eq!(request(&cpu_only).qos(), QosClass::Burstable);

    // On a zone-tight single-numa-node node, nothing but the device is aligned.
    let node = node(
        "single-numa-node",
        "pod",
        &[
            free_zone(
                0,
                &[("cpu", "0"), ("memory", "0"), ("example.com/gpu", "1")],
            ),
            free_zone(
                1,
                &[("cpu", "1"), ("memory", "0"), ("example.com/gpu", "0")],
            ),
        ],
    );
    assert_fit("pod-level", &node, &guaranteed, Ok(&[0]));
}
