//! The HTTP server on the wire: plain and TLS, the probes, `/metrics`, a component's
//! own routes, the connection bound and shutdown.

use std::sync::{Arc, Mutex};

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use super::*;

/// A response as seen on the wire: status code, headers (lowercased names), body.
struct Reply {
    status: u16,
    headers: String,
    body: String,
}

async fn get(addr: SocketAddr, path: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    Reply {
        status,
        headers: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

#[tokio::test]
async fn serves_health_readiness_and_metrics_over_tcp() {
    let registry = Arc::new(Mutex::new(Registry::default()));
    let zones: Gauge = Gauge::default();
    zones.set(2);
    registry
        .lock()
        .unwrap()
        .register("numa_zones", "NUMA zones seen", zones);
    let readiness = Readiness::not_ready("caches not synced");

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve_on(
        listener,
        Security::Insecure,
        Metrics::from(registry),
        readiness.clone(),
        async move {
            let _ = stopped.await;
        },
    ));

    let health = get(addr, "/healthz").await;
    assert_eq!((health.status, health.body.as_str()), (200, "ok"));

    let not_ready = get(addr, "/readyz").await;
    assert_eq!(not_ready.status, 503);
    assert_eq!(not_ready.body, "not ready", "no internal detail to anyone");
    readiness.set_ready();
    let ready = get(addr, "/readyz").await;
    assert_eq!((ready.status, ready.body.as_str()), (200, "ok"));

    let metrics = get(addr, "/metrics").await;
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .headers
            .contains("content-type: application/openmetrics-text"),
        "{}",
        metrics.headers
    );
    assert!(metrics.body.contains("numa_zones 2"), "{}", metrics.body);
    assert!(metrics.body.ends_with("# EOF\n"), "{}", metrics.body);

    assert_eq!(get(addr, "/nope").await.status, 404);

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// TLS with a self-signed certificate, and an authorizer whose API server never
/// answers (port 9, discard): a review fails as unavailable.
fn self_signed_security() -> Security {
    let config = kube::Config::new("https://127.0.0.1:9".parse().unwrap());
    Security::Secure {
        cert: CertSource::SelfSigned {
            names: self_signed_names("tas-test"),
        },
        authorizer: Authorizer::new(kube::Client::try_from(config).unwrap()),
    }
}

/// TLS with a self-signed certificate: the probes' paths answer anyone without
/// detail, `/metrics` refuses a caller without a token before asking anybody, and
/// plain HTTP gets no answer. (Authorised callers: `e2e/tests/admission.rs`.)
#[tokio::test]
async fn tls_serves_probes_to_anyone_and_metrics_to_no_anonymous_caller() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Never reached: no request here needs the API server.
    let security = self_signed_security();
    let readiness = Readiness::not_ready("watch failed: secret internal text");
    let server = tokio::spawn(serve_on(
        listener,
        security,
        Metrics::none(),
        readiness.clone(),
        std::future::pending(),
    ));
    let https = |path: &'static str, token: Option<&'static str>| {
        tas_testcluster::https_get(addr, path, token)
    };
    assert_eq!(https("/healthz", None).await.unwrap(), (200, "ok".into()));
    assert_eq!(
        https("/readyz", None).await.unwrap(),
        (503, "not ready".into())
    );
    readiness.set_ready();
    assert_eq!(https("/readyz", None).await.unwrap(), (200, "ok".into()));
    assert_eq!(https("/metrics", None).await.unwrap().0, 401);

    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.0\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer).await;
    assert!(
        !String::from_utf8_lossy(&answer).contains("200"),
        "plain HTTP is not served"
    );
    server.abort();
}

/// A scraper's keep-alive TLS connection, idle between requests, does not outlive
/// the server: on shutdown the server closes it and returns.
#[tokio::test]
async fn shutdown_closes_a_kept_open_tls_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let security = self_signed_security();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve_on(
        listener,
        security,
        Metrics::none(),
        Readiness::not_ready("starting"),
        async move {
            let _ = stopped.await;
        },
    ));
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tls = tas_testcluster::tls_connect_insecure(tcp, addr.ip())
        .await
        .unwrap();
    // HTTP/1.1 without `Connection: close`: the connection stays open after the answer.
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.ends_with(b"ok") {
        let n = tokio::time::timeout(Duration::from_secs(10), tls.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n > 0, "closed before answering");
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"));

    stop.send(()).unwrap();
    tokio::time::timeout(CONNECTION_DRAIN + Duration::from_secs(5), server)
        .await
        .expect("the server returns after shutdown")
        .unwrap()
        .unwrap();
    // The server closed the connection: end of stream (or a reset), not silence.
    let read = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf))
        .await
        .expect("the kept-open connection is closed by the server, not left open");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

/// A component's own route (the scheduler's `/debug/reservations`) is authorised as
/// `/metrics` is: 401 without a token, before anybody is asked; with a token the
/// API server is asked (here unreachable: 503), never answered without it.
#[tokio::test]
async fn extra_routes_answer_no_anonymous_caller() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let security = self_signed_security();
    let extra = Router::new().route(
        "/debug/reservations",
        axum::routing::get(|| async { "secret" }),
    );
    let server = tokio::spawn(serve_on_with(
        listener,
        security,
        Metrics::none(),
        Readiness::not_ready("starting"),
        extra,
        std::future::pending(),
    ));
    let https = |path: &'static str, token: Option<&'static str>| {
        tas_testcluster::https_get(addr, path, token)
    };
    assert_eq!(
        https("/debug/reservations", None).await.unwrap(),
        (401, "Unauthorized".into())
    );
    let asked = https("/debug/reservations", Some("a-token")).await.unwrap();
    assert_eq!(asked.0, 503, "{asked:?}");
    assert_eq!(https("/healthz", None).await.unwrap().0, 200);
    assert_eq!(https("/nope", None).await.unwrap().0, 404);
    server.abort();
}

/// Past the connection bound, a new connection is closed at once (here two idle
/// connections that never start TLS hold both places); when one closes, new
/// connections are served again.
#[tokio::test]
async fn connections_past_the_bound_are_closed_on_accept() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cert = CertSource::SelfSigned {
        names: self_signed_names("tas-test"),
    };
    let acceptor = TlsAcceptor::from(tls::server_config(&cert).unwrap());
    let app = router(Metrics::none(), Readiness::not_ready("starting"), None);
    let server = tokio::spawn(serve_tls(
        listener,
        acceptor,
        app,
        std::future::pending(),
        2,
    ));
    let first = TcpStream::connect(addr).await.unwrap();
    let _second = TcpStream::connect(addr).await.unwrap();
    // Accepted in order: the third is over the bound once the first two are in.
    let mut third = TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), third.read(&mut buf))
        .await
        .expect("the connection past the bound is closed, not kept waiting");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");

    drop(first);
    let served = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match tas_testcluster::https_get(addr, "/healthz", None).await {
                Ok(answer) => break answer,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    })
    .await
    .expect("a place frees when a connection closes");
    assert_eq!(served, (200, "ok".into()));
    server.abort();
}

#[tokio::test]
async fn a_failing_metrics_source_answers_500() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let metrics = Metrics::from_fn(|| Err(std::fmt::Error));
    let readiness = Readiness::not_ready("starting");
    let server = tokio::spawn(serve_on(
        listener,
        Security::Insecure,
        metrics,
        readiness,
        std::future::pending(),
    ));
    assert_eq!(get(addr, "/metrics").await.status, 500);
    server.abort();
}

/// Writes `cert` and `key` into `dir` as the kubelet fills a Secret volume: the files
/// are symlinks through `..data` to a timestamped directory, and an update swaps
/// `..data` in one rename.
fn write_secret_volume(dir: &std::path::Path, generation: u32, cert: &str, key: &str) {
    let data = dir.join(format!("..2026_{generation}"));
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("tls.crt"), cert).unwrap();
    std::fs::write(data.join("tls.key"), key).unwrap();
    let staged = dir.join("..data_tmp");
    std::os::unix::fs::symlink(data.file_name().unwrap(), &staged).unwrap();
    std::fs::rename(&staged, dir.join("..data")).unwrap();
    for file in ["tls.crt", "tls.key"] {
        let link = dir.join(file);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{file}"), &link).unwrap();
        }
    }
}

/// The leaf certificate a new TLS connection to `addr` is shown.
async fn served_certificate(addr: SocketAddr) -> Vec<u8> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = tas_testcluster::tls_connect_insecure(tcp, addr.ip())
        .await
        .unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// A rotated certificate in a Secret volume reaches new connections without a
/// restart (broken files: `cert_reload`'s tests).
#[tokio::test]
async fn a_rotated_certificate_is_served_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let generate = |name: &str| {
        let g = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
        (
            g.cert.pem(),
            g.signing_key.serialize_pem(),
            g.cert.der().to_vec(),
        )
    };
    let first = generate("first.tas.test");
    write_secret_volume(dir.path(), 1, &first.0, &first.1);

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = kube::Config::new("https://127.0.0.1:9".parse().unwrap());
    let security = Security::Secure {
        cert: CertSource::Files {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        },
        authorizer: Authorizer::new(kube::Client::try_from(config).unwrap()),
    };
    let server = tokio::spawn(serve_on(
        listener,
        security,
        Metrics::none(),
        Readiness::not_ready("starting"),
        std::future::pending(),
    ));
    assert_eq!(served_certificate(addr).await, first.2);

    let second = generate("second.tas.test");
    write_secret_volume(dir.path(), 2, &second.0, &second.1);
    let deadline = std::time::Instant::now() + 3 * RELOAD_INTERVAL;
    loop {
        if served_certificate(addr).await == second.2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the rotated certificate is not served {:?} after the swap",
            3 * RELOAD_INTERVAL
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    server.abort();
}
