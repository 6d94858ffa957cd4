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
    std::fs::write(&cert, &first.0).unwrap();
    std::fs::write(&key, &first.1).unwrap();

    let mut registry = Registry::default();
    let metrics = ReloadMetrics::register(&mut registry);
    let provider = Arc::new(ring::default_provider());
    let (resolver, watcher) =
        watch(&cert, &key, provider, metrics, Duration::from_millis(20)).unwrap();
    let watching = tokio::spawn(watcher);
    let served = || resolver.current().cert[0].to_vec();
    assert_eq!(served(), leaf(&first.0));

    let second = generate("second.tas.test");
    std::fs::write(&cert, &second.0).unwrap();
    std::fs::write(&key, &second.1).unwrap();
    eventually("the second certificate", || served() == leaf(&second.0)).await;

    // A certificate file that holds no certificate: named, counted, not served.
    std::fs::write(&cert, "not a certificate\n").unwrap();
    let cert_errors = format!(
        "tas_serving_certificate_reload_errors_total{{file=\"{}\"}} 1",
        cert.display()
    );
    eventually("the broken certificate file counted", || {
        encode(&registry).unwrap().contains(&cert_errors)
    })
    .await;
    assert_eq!(served(), leaf(&second.0), "the previous one stays");

    // Half a rotation: a new certificate with the old key is refused as the key's
    // fault; the new key completes it.
    let third = generate("third.tas.test");
    std::fs::write(&cert, &third.0).unwrap();
    let key_errors = format!(
        "tas_serving_certificate_reload_errors_total{{file=\"{}\"}} 1",
        key.display()
    );
    eventually("the mismatched key counted", || {
        encode(&registry).unwrap().contains(&key_errors)
    })
    .await;
    assert_eq!(served(), leaf(&second.0));
    std::fs::write(&key, &third.1).unwrap();
    eventually("the third certificate", || served() == leaf(&third.0)).await;
    assert!(
        encode(&registry)
            .unwrap()
            .contains("tas_serving_certificate_reloads_total 2"),
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
