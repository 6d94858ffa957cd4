//! `NodePorts`: host-port conflicts by protocol, port and host IP (`0.0.0.0` binds
//! every address), and which containers hold ports.

use serde_json::{Value, json};

use super::super::FilterReason;
use super::super::node_ports::{filter, host_ports};
use super::{info, input, pod, roomy};

/// A container port: `(hostIP, protocol, hostPort)`; empty strings are left unset.
fn port(ip: &str, protocol: &str, host_port: i32) -> Value {
    let mut p = json!({ "containerPort": 80, "hostPort": host_port });
    if !ip.is_empty() {
        p["hostIP"] = json!(ip);
    }
    if !protocol.is_empty() {
        p["protocol"] = json!(protocol);
    }
    p
}

fn pod_with_ports(uid: &str, ports: &[Value]) -> k8s_openapi::api::core::v1::Pod {
    pod(
        uid,
        json!({ "containers": [{ "name": "app", "ports": ports }] }),
    )
}

#[test]
fn conflicts_by_protocol_port_and_ip() {
    // (used on the node, wanted by the pod, conflict)
    let cases = [
        (vec![], vec![port("", "", 8080)], false),
        (vec![port("", "TCP", 8080)], vec![], false),
        (
            vec![port("", "TCP", 8080)],
            vec![port("", "TCP", 8080)],
            true,
        ),
        // Empty protocol is TCP, empty IP is 0.0.0.0.
        (
            vec![port("0.0.0.0", "TCP", 8080)],
            vec![port("", "", 8080)],
            true,
        ),
        (
            vec![port("", "UDP", 8080)],
            vec![port("", "TCP", 8080)],
            false,
        ),
        (
            vec![port("", "TCP", 8080)],
            vec![port("", "TCP", 8081)],
            false,
        ),
        (
            vec![port("127.0.0.1", "TCP", 8080)],
            vec![port("127.0.0.2", "TCP", 8080)],
            false,
        ),
        (
            vec![port("127.0.0.1", "TCP", 8080)],
            vec![port("127.0.0.1", "TCP", 8080)],
            true,
        ),
        // 0.0.0.0 on either side clashes with any IP.
        (
            vec![port("127.0.0.1", "TCP", 8080)],
            vec![port("0.0.0.0", "TCP", 8080)],
            true,
        ),
        (
            vec![port("0.0.0.0", "TCP", 8080)],
            vec![port("127.0.0.1", "TCP", 8080)],
            true,
        ),
        (
            vec![port("127.0.0.1", "UDP", 8080)],
            vec![port("", "TCP", 8080)],
            false,
        ),
        (
            vec![port("", "SCTP", 9000)],
            vec![port("10.0.0.1", "SCTP", 9000)],
            true,
        ),
        // Only one of several wanted ports needs to clash.
        (
            vec![port("", "UDP", 53)],
            vec![port("", "TCP", 53), port("", "UDP", 53)],
            true,
        ),
    ];
    for (used, wanted, conflict) in cases {
        let mut node = info(&roomy("n1"));
        node.add_pod(&pod_with_ports("existing", &used)).unwrap();
        let got = filter(&input(&pod_with_ports("p", &wanted)), &node);
        let want = if conflict {
            Err(FilterReason::PortsInUse)
        } else {
            Ok(())
        };
        assert_eq!(got, want, "used {used:?}, wanted {wanted:?}");
    }
}

#[test]
fn only_running_containers_hold_host_ports() {
    let spec = json!({
        "initContainers": [
            { "name": "setup", "ports": [port("", "TCP", 1000)] },
            { "name": "proxy", "restartPolicy": "Always", "ports": [port("", "TCP", 2000)] }
        ],
        "containers": [{ "name": "app", "ports": [
            port("", "TCP", 3000),
            { "containerPort": 4000 },
            { "containerPort": 5000, "hostPort": 0 }
        ] }]
    });
    let ports: Vec<i32> = host_ports(&pod("p", spec.clone()))
        .iter()
        .map(|p| p.protocol_port.port)
        .collect();
    assert_eq!(ports, [2000, 3000]);

    let mut node = info(&roomy("n1"));
    node.add_pod(&pod("existing", spec)).unwrap();
    let wants = |port_number| {
        filter(
            &input(&pod_with_ports("p", &[port("", "", port_number)])),
            &node,
        )
    };
    assert_eq!(wants(1000), Ok(()));
    assert_eq!(wants(2000), Err(FilterReason::PortsInUse));
    assert_eq!(wants(3000), Err(FilterReason::PortsInUse));
    assert_eq!(wants(4000), Ok(()));
}

#[test]
fn ports_reason_is_resolvable_and_worded_like_kube_scheduler() {
    let reason = FilterReason::PortsInUse;
    assert_eq!(
        reason.to_string(),
        "node(s) didn't have free ports for the requested pod ports"
    );
    assert_eq!(reason.plugin().name(), "NodePorts");
    assert!(!reason.is_unresolvable());
}
