//! The `tas-operator run` binary: loads a kubeconfig, serves `/healthz`, `/readyz` and
//! `/metrics`, becomes ready once its caches sync, takes and releases the leader Lease
//! with `--leader-elect`, and exits cleanly on SIGTERM.

use crate::harness::TIMEOUT;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tas_testcluster::wait_for;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// Status code and body of `GET https://addr/path` (the operator's self-signed
/// certificate), with the bearer `token` when given.
async fn get_as(addr: &str, path: &str, token: Option<&str>) -> std::io::Result<(u16, String)> {
    let addr = addr
        .parse()
        .map_err(|e| std::io::Error::other(format!("{addr}: {e}")))?;
    tas_testcluster::https_get(addr, path, token).await
}

/// As [`get_as`], anonymously.
async fn get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    get_as(addr, path, None).await
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

pub async fn scenario(client: &Client, kubeconfig: &Path) {
    // A single replica.
    let (child, addr) = start(kubeconfig, &[]);
    wait_ready(&addr).await;
    assert_eq!(get(&addr, "/healthz").await.unwrap().0, 200);
    // /metrics only for an authorised token (the admin's); 401 anonymously.
    assert_eq!(get(&addr, "/metrics").await.unwrap().0, 401);
    let token = tas_testcluster::TestCluster::shared()
        .expect("cluster")
        .admin_token()
        .expect("admin token");
    let (code, metrics) = get_as(&addr, "/metrics", Some(&token)).await.unwrap();
    assert_eq!(code, 200, "{metrics}");
    for series in [
        "tas_operator_reconciles_total{result=\"success\"} 0",
        "# TYPE tas_operator_reconcile_duration_seconds histogram",
        "tas_operator_operands_ready{component=\"updater\"} 0",
        "tas_operator_stale_nrt_nodes 0",
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }
    // A scraper's keep-alive connection, open across the SIGTERM: the server closes it
    // and the binary still stops in time.
    let mut kept = keep_alive(&addr, &token).await;
    terminate(child).await;
    let mut rest = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(5), kept.read(&mut rest))
        .await
        .expect("the kept-open connection ended with the process");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");

    // With leader election: it takes the Lease, and hands it back on SIGTERM.
    let identity = "e2e-operator-1";
    let (child, addr) = start(
        kubeconfig,
        &[
            "--leader-elect",
            "--leader-elect-namespace",
            "default",
            "--identity",
            identity,
        ],
    );
    wait_ready(&addr).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let holder = || async {
        let lease = leases.get_opt("tas-operator").await?;
        Ok::<_, kube::Error>(
            lease
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
                .filter(|h| !h.is_empty()),
        )
    };
    let leader = wait_for("the operator to hold the Lease", TIMEOUT, || async {
        holder().await.map(|h| h.filter(|h| h == identity))
    })
    .await
    .unwrap();
    assert_eq!(leader, identity);
    terminate(child).await;
    assert_eq!(
        holder().await.unwrap(),
        None,
        "the Lease is released on SIGTERM"
    );
}

fn start(kubeconfig: &Path, extra: &[&str]) -> (Child, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_tas-operator"))
        .args(["run", "--log-level", "warn", "--http-address", &addr])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(extra)
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the operator binary starts");
    (child, addr)
}

async fn wait_ready(addr: &str) {
    wait_for("the binary to report ready", TIMEOUT, || async {
        let (code, _) = get(addr, "/readyz").await?;
        Ok::<_, std::io::Error>((code == 200).then_some(()))
    })
    .await
    .unwrap();
}

/// A TLS connection that has been answered one `GET /metrics` (HTTP/1.1, kept alive)
/// and stays open, idle.
async fn keep_alive(
    addr: &str,
    token: &str,
) -> impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin {
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = tas_testcluster::tls_connect_insecure(tcp, addr.ip())
        .await
        .unwrap();
    let request =
        format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n");
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    // The OpenMetrics text ends with `# EOF`.
    while !answer.ends_with(b"# EOF\n") {
        let n = tokio::time::timeout(TIMEOUT, tls.read(&mut buf))
            .await
            .expect("an answer on the kept-alive connection")
            .unwrap();
        assert!(n > 0, "closed before the whole answer");
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"));
    tls
}

/// SIGTERM, then a clean exit within 30 s (the kubelet's default grace period): every
/// shutdown step of the binary has its own deadline, well inside it.
async fn terminate(mut child: Child) {
    let pid = child.id().expect("still running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let started = std::time::Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the binary stops within 30 s of SIGTERM")
        .unwrap();
    println!(
        "MEASURED: SIGTERM → exit in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    assert!(status.success(), "clean exit on SIGTERM: {status}");
}
