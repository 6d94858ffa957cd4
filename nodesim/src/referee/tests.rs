//! Against the built referee binary (skipped with a note when [`BIN_ENV`] is unset, as
//! outside `make test`).

use super::*;

fn machine() -> Machine {
    let zone = |id: u32, cpus: [u32; 4]| Zone {
        id,
        memory: 8 << 30,
        hugepages: [("1Gi".to_owned(), 2)].into(),
        cores: vec![
            Core {
                socket: 0,
                cpus: vec![cpus[0], cpus[2]],
            },
            Core {
                socket: 0,
                cpus: vec![cpus[1], cpus[3]],
            },
        ],
        distances: if id == 0 { vec![10, 20] } else { vec![20, 10] },
    };
    Machine {
        zones: vec![zone(0, [0, 1, 4, 5]), zone(1, [2, 3, 6, 7])],
        devices: [(
            "example.com/gpu".to_owned(),
            vec![
                Device {
                    id: "gpu-0".into(),
                    numa: Some(0),
                },
                Device {
                    id: "gpu-1".into(),
                    numa: Some(1),
                },
            ],
        )]
        .into(),
    }
}

fn pod(uid: &str, cpu: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "main", "resources": {"limits":
            {"cpu": cpu, "memory": "1Gi", "example.com/gpu": "1"}}}]}
    }))
    .unwrap()
}

fn start() -> Option<Referee> {
    match Referee::start() {
        Ok(r) => Some(r),
        Err(RefereeError::NotConfigured) => {
            eprintln!("skipped: {}", RefereeError::NotConfigured);
            None
        }
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn admits_refuses_removes_and_reports_state() {
    let Some(referee) = start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let status = referee
        .add_node(&AddNode {
            node: "n1".into(),
            pod_resources_dir: Some(dir.path().to_owned()),
            machine: machine(),
            kubelet: json!({
                "topologyManagerPolicy": "single-numa-node",
                "cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
                "memoryManagerPolicy": "Static", "reservedMemory":
                    [{"numaNode": 0, "limits": {"memory": "1124Mi"}}],
                "kubeReserved": {"memory": "1Gi"}}),
            ..AddNode::default()
        })
        .await
        .unwrap();
    assert_eq!(status.allocatable.get("cpu").map(String::as_str), Some("7"));
    assert!(status.pod_resources_socket.unwrap().starts_with(dir.path()));

    let ok = referee.admit("n1", &pod("a", "2")).await.unwrap();
    assert!(ok.admit, "{ok:?}");
    assert_eq!(ok.containers[0].cpus.len(), 2);
    // Three exclusive CPUs fit on no single zone any more... but on zone 1 (4 free).
    let big = referee.admit("n1", &pod("b", "5")).await.unwrap();
    assert!(!big.admit);
    assert_eq!(big.reason, "TopologyAffinityError");

    let state = referee.state("n1").await.unwrap();
    assert_eq!(state.pods, vec!["a".to_owned()]);
    assert!(referee.remove("n1", "a").await.unwrap());
    assert!(!referee.remove("n1", "a").await.unwrap());
    assert_eq!(referee.ping().await.unwrap(), 1);

    let err = referee.state("nope").await.unwrap_err();
    assert!(matches!(err, RefereeError::Request { .. }), "{err}");
    referee.shutdown().await.unwrap();
}

#[tokio::test]
async fn answers_concurrent_requests_for_many_nodes() {
    let Some(referee) = start() else { return };
    let referee = Arc::new(referee);
    let mut tasks = Vec::new();
    for i in 0..8 {
        let referee = referee.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("n{i}");
            referee
                .add_node(&AddNode {
                    node: node.clone(),
                    machine: machine(),
                    kubelet: json!({"topologyManagerPolicy": "best-effort"}),
                    ..AddNode::default()
                })
                .await
                .unwrap();
            // One GPU each: the machine has two.
            for j in 0..2 {
                let uid = format!("{node}-{j}");
                assert!(
                    referee
                        .admit(&node, &pod(&uid, "500m"))
                        .await
                        .unwrap()
                        .admit
                );
            }
            referee.state(&node).await.unwrap().pods.len()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 2);
    }
}

#[test]
fn a_missing_binary_says_how_to_build_it() {
    let err = RefereeError::Missing("/nonexistent/referee".into());
    assert!(err.to_string().contains("nodesim/referee/build.sh"));
    assert!(RefereeError::NotConfigured.to_string().contains(BIN_ENV));
}

/// Dropping the client ends the process (`kill_on_drop`); so does closing its stdin,
/// which is what happens when the test process dies without dropping anything.
#[tokio::test]
async fn the_referee_does_not_outlive_its_client() {
    let Some(referee) = start() else { return };
    assert_eq!(referee.ping().await.unwrap(), 0);
    let pid = referee.pid().expect("running");
    drop(referee);
    let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // Gone, or a zombie until the runtime reaps it: either way no longer running.
    while proc_dir.exists()
        && !std::fs::read_to_string(proc_dir.join("stat")).is_ok_and(|s| s.contains(") Z "))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "referee {pid} still runs"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let Some(referee) = start() else { return };
    referee
        .shutdown()
        .await
        .expect("exits 0 when its stdin closes");
}
