//! The claim writes of a bind: what they write (pure), and that a bind sends them
//! first, in order, and is not sent when one fails (against a small HTTP server that
//! records requests; the real API server's answers are covered by the e2e DRA test).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};
use parking_lot::Mutex;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use super::*;
use crate::dra::{AllocatedDevice, ClaimAllocation, DeviceId};
use crate::test_support::dra::{DRIVER, allocated, claim};
use crate::writer::{Request, WriteError, Writer};

/// The allocation of claim `c` (new, gpu-1 of pool `a`) and of claim `shared`
/// (allocated before: no result).
fn allocation() -> Allocation {
    let device = |name: &str| AllocatedDevice {
        request: "gpu".into(),
        id: DeviceId::new(DRIVER, "a", name),
        zones: None,
    };
    let result: AllocationResult = serde_json::from_value(json!({
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "a", "device": "gpu-1"}]}
    }))
    .expect("result");
    Allocation {
        claims: vec![
            ClaimAllocation {
                claim: "ns/c".into(),
                result: Some(result),
                devices: vec![device("gpu-1")],
            },
            ClaimAllocation {
                claim: "ns/shared".into(),
                result: None,
                devices: vec![device("gpu-0")],
            },
        ],
        aligned: true,
    }
}

#[test]
fn a_new_allocation_is_written_with_the_finalizer_and_the_pod_as_consumer() {
    let shared = allocated(
        claim("ns", "shared", DRIVER, 1),
        "a",
        "a",
        &["gpu-0"],
        &[("q", "uid-q")],
    );
    let claims = [claim("ns", "c", DRIVER, 1), shared];
    let (writes, releases) = reservations(&claims, &allocation(), "p", "uid-p");
    assert_eq!(writes.len(), 2);
    assert_eq!(writes[0].claim(), "ns/c");
    assert_eq!(writes[0].resource_version, "1");
    assert_eq!(
        writes[0].finalizers,
        Some(vec![DELETE_PROTECTION.to_owned()])
    );
    assert_eq!(
        writes[0].status,
        json!({
            "allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": "a", "device": "gpu-1"}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}]
        })
    );
    // Allocated before: only the pod joins the consumers, nothing else changes.
    assert_eq!(writes[1].finalizers, None);
    assert_eq!(
        writes[1].status,
        json!({"reservedFor": [
            {"resource": "pods", "name": "q", "uid": "uid-q"},
            {"resource": "pods", "name": "p", "uid": "uid-p"}]})
    );
    assert_eq!(
        releases[0].ours,
        Some(vec!["gpu.example.com/a/gpu-1".to_owned()])
    );
    assert_eq!(
        releases[1].ours, None,
        "an allocation of someone else's is never cleared"
    );
    // Already allocated and reserved for the pod: nothing to write.
    let mine = allocated(
        claim("ns", "shared", DRIVER, 1),
        "a",
        "a",
        &["gpu-0"],
        &[("p", "uid-p")],
    );
    let (writes, _) = reservations(
        &[claim("ns", "c", DRIVER, 1), mine],
        &allocation(),
        "p",
        "uid-p",
    );
    assert_eq!(writes.len(), 1);
}

/// Claim `ns/c` allocated `devices` of pool `a`, reserved for `consumers`.
fn claim_c(devices: &[&str], consumers: &[(&str, &str)]) -> ResourceClaim {
    allocated(claim("ns", "c", DRIVER, 1), "a", "a", devices, consumers)
}

#[test]
fn a_release_removes_the_pods_entry_and_clears_only_its_own_allocation() {
    let release = ClaimRelease {
        namespace: "ns".into(),
        name: "c".into(),
        claim_uid: "uid-c".into(),
        pod_uid: "uid-p".into(),
        ours: Some(vec!["gpu.example.com/a/gpu-1".into()]),
    };
    let written = claim_c(&["gpu-1"], &[("p", "uid-p")]);
    assert_eq!(
        release_patch(&written, &release),
        Some(json!({"metadata": {"resourceVersion": "1"},
            "status": {"reservedFor": null, "allocation": null}}))
    );
    // Another pod joined meanwhile: only our entry goes, the allocation stays.
    let joined = claim_c(&["gpu-1"], &[("p", "uid-p"), ("q", "uid-q")]);
    assert_eq!(
        release_patch(&joined, &release),
        Some(json!({"metadata": {"resourceVersion": "1"},
            "status": {"reservedFor": [{"resource": "pods", "name": "q", "uid": "uid-q"}]}}))
    );
    // The ResourceClaim controller was first (or our write never landed): nothing.
    let cleaned = claim_c(&["gpu-1"], &[("q", "uid-q")]);
    assert_eq!(release_patch(&cleaned, &release), None);
    assert_eq!(release_patch(&claim("ns", "c", DRIVER, 1), &release), None);
    // A claim of the same name created since is not ours.
    let mut other = written.clone();
    other.metadata.uid = Some("uid-other".into());
    assert_eq!(release_patch(&other, &release), None);
    // Our entry on an allocation we did not write: the entry goes, the allocation stays.
    let theirs = claim_c(&["gpu-0"], &[("p", "uid-p")]);
    assert_eq!(
        release_patch(&theirs, &release),
        Some(json!({"metadata": {"resourceVersion": "1"}, "status": {"reservedFor": null}}))
    );
}

/// An HTTP server that records `METHOD path` of each request and answers 409 to
/// patches of `refuse`, 200 with a claim otherwise.
async fn recording_server(refuse: &'static str) -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("listener");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut read = BufReader::new(read);
                loop {
                    let mut line = String::new();
                    if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let request: Vec<&str> = line.split_whitespace().take(2).collect();
                    let mut length = 0usize;
                    loop {
                        let mut header = String::new();
                        if read.read_line(&mut header).await.unwrap_or(0) == 0 {
                            return;
                        }
                        if header == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = header.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if read.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let entry = request.join(" ");
                    let refused = entry.contains(refuse);
                    log.lock().push(entry);
                    let (status, answer) = if refused {
                        (
                            "409 Conflict",
                            json!({"kind": "Status", "apiVersion": "v1",
                            "status": "Failure", "reason": "Conflict", "code": 409,
                            "message": "the object has been modified"}),
                        )
                    } else {
                        (
                            "200 OK",
                            json!({"apiVersion": "resource.k8s.io/v1",
                            "kind": "ResourceClaim", "spec": {},
                            "metadata": {"name": "x", "namespace": "ns", "resourceVersion": "2"}}),
                        )
                    };
                    let answer = answer.to_string();
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if write.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn bind_with_claims(writes: Vec<ClaimReservation>) -> Request {
    Request::Bind {
        namespace: "ns".into(),
        name: "p".into(),
        uid: "uid-p".into(),
        node: "a".into(),
        claims: writes,
        admission: crate::writer::Admission::InTurn,
    }
}

fn leading_writer(addr: std::net::SocketAddr) -> Writer {
    let config = kube::Config::new(format!("http://{addr}").parse().expect("url"));
    let client = kube::Client::try_from(config).expect("client");
    let (writer, task) = Writer::new(client, "tas-test", None, Duration::from_secs(5));
    tokio::spawn(task.run());
    writer.fence_with(Arc::new(|| true));
    writer
}

#[tokio::test]
async fn a_bind_writes_its_claims_first_and_is_not_sent_when_one_fails() {
    let shared = allocated(claim("ns", "shared", DRIVER, 1), "a", "a", &["gpu-0"], &[]);
    let claims = [claim("ns", "c", DRIVER, 1), shared];
    let (writes, _) = reservations(&claims, &allocation(), "p", "uid-p");

    let (addr, seen) = recording_server("never").await;
    let writer = leading_writer(addr);
    writer
        .write(bind_with_claims(writes.clone()))
        .await
        .expect("all written");
    assert_eq!(
        *seen.lock(),
        [
            "PATCH /apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c?",
            "PATCH /apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status?",
            "PATCH /apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/shared/status?",
            "POST /api/v1/namespaces/ns/pods/p/binding?",
        ]
    );

    // The second claim's write conflicts: no bind, and the error names the claim.
    let (addr, seen) = recording_server("shared/status").await;
    let writer = leading_writer(addr);
    let outcome = writer.write(bind_with_claims(writes)).await;
    let Err(WriteError::Claim { claim, source }) = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(claim, "ns/shared");
    assert_eq!(source.code(), Some(409));
    assert!(
        !seen.lock().iter().any(|r| r.contains("binding")),
        "{:?}",
        seen.lock()
    );
}
