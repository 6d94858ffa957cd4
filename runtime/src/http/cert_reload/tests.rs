//! The watcher on real files: a changed pair is served, a broken one refused and
//! counted against the file at fault while the previous certificate stays.

use std::time::Instant;

use rustls::crypto::ring;

use super::*;
use crate::metrics::encode;

/// A new self-signed certificate and its key, as PEM.
fn generate(name: &str) -> (String, String) {
    let generated = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
    (generated.cert.pem(), generated.signing_key.serialize_pem())
}

/// The DER of the leaf certificate in `pem`.
fn leaf(pem: &str) -> Vec<u8> {
    read_chain_bytes(Path::new("test"), pem.as_bytes()).unwrap()[0].to_vec()
}

/// Replaces `path` in one rename, as a writer of certificate files should (the watcher
/// may read at any moment; half a file is not what this test is about).
fn write(path: &Path, text: &str) {
    let staged = path.with_extension("new");
    std::fs::write(&staged, text).unwrap();
    std::fs::rename(&staged, path).unwrap();
}

/// The value of the counter `series` in `registry` (0 when absent).
fn counter(registry: &Registry, series: &str) -> u64 {
    encode(registry)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

/// Polls `check` every 20 ms until it holds, for at most 10 s.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn changed_files_are_served_and_broken_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    let first = generate("first.tas.test");
    write(&cert, &first.0);
    write(&key, &first.1);

    let mut registry = Registry::default();
    let metrics = ReloadMetrics::register(&mut registry);
    let provider = Arc::new(ring::default_provider());
    let (resolver, watcher) =
        watch(&cert, &key, provider, metrics, Duration::from_millis(20)).unwrap();
    let watching = tokio::spawn(watcher);
    let served = || resolver.current().cert[0].to_vec();
    assert_eq!(served(), leaf(&first.0));

    let second = generate("second.tas.test");
    // Between the two renames the watcher may see the new certificate with the old
    // key: refused, and taken once the key follows.
    write(&cert, &second.0);
    write(&key, &second.1);
    eventually("the second certificate", || served() == leaf(&second.0)).await;

    // A certificate file that holds no certificate: named, counted, not served.
    write(&cert, "not a certificate\n");
    let cert_errors = format!(
        "tas_serving_certificate_reload_errors_total{{file=\"{}\"}}",
        cert.display()
    );
    eventually("the broken certificate file counted", || {
        counter(&registry, &cert_errors) >= 1
    })
    .await;
    assert_eq!(served(), leaf(&second.0), "the previous one stays");

    // Half a rotation: a new certificate with the old key is refused as the key's
    // fault; the new key completes it.
    let key_errors = format!(
        "tas_serving_certificate_reload_errors_total{{file=\"{}\"}}",
        key.display()
    );
    let key_errors_before = counter(&registry, &key_errors);
    let third = generate("third.tas.test");
    write(&cert, &third.0);
    eventually("the mismatched key counted", || {
        counter(&registry, &key_errors) > key_errors_before
    })
    .await;
    assert_eq!(served(), leaf(&second.0));
    write(&key, &third.1);
    eventually("the third certificate", || served() == leaf(&third.0)).await;
    assert_eq!(
        counter(&registry, "tas_serving_certificate_reloads_total"),
        2,
        "{}",
        encode(&registry).unwrap()
    );
    watching.abort();
}

#[test]
fn unusable_files_at_start_are_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    let (pem, _) = generate("tas.test");
    let (_, other_key) = generate("other.tas.test");
    std::fs::write(&cert, pem).unwrap();
    std::fs::write(&key, other_key).unwrap();
    let provider = Arc::new(ring::default_provider());
    let Err(err) = watch(
        &cert,
        &key,
        provider,
        ReloadMetrics::default(),
        RELOAD_INTERVAL,
    ) else {
        panic!("a key of another certificate is refused");
    };
    let err = err.to_string();
    assert!(
        err.contains("tls.key") && err.contains("does not match"),
        "{err}"
    );
}
