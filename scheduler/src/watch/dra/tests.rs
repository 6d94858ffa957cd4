//! The DRA watches: a cluster without `resource.k8s.io/v1` counts as listed and empty,
//! other errors do not; claims freeing devices retry waiting pods.

use std::sync::atomic::Ordering;

use kube::core::Status;

use super::*;
use crate::test_support::dra::{DRIVER, allocated, claim, slice};

fn error(code: u16) -> watcher::Error {
    let status = Status::failure(
        "the server could not find the requested resource",
        "NotFound",
    )
    .with_code(code);
    watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)))
}

#[test]
fn a_cluster_without_the_api_counts_as_listed_and_empty() {
    let shared = crate::test_support::shared();
    let synced = &shared.synced;
    let mut slices = SliceWatch::new(shared.clone());
    let mut classes = DeviceClassWatch::new(shared.clone());
    let mut claims = ResourceClaimWatch::new(shared.clone());
    // A server error is retried, not taken for an empty list.
    slices.failed(&error(500));
    assert!(!synced.resource_slices.load(Ordering::Acquire));
    slices.failed(&error(404));
    classes.failed(&error(404));
    assert!(synced.resource_slices.load(Ordering::Acquire));
    assert!(synced.device_classes.load(Ordering::Acquire));
    assert!(!synced.resource_claims.load(Ordering::Acquire));
    assert!(slices.unserved, "said once");
    // The retries stay quiet and keep the flags.
    slices.failed(&error(404));
    assert!(synced.resource_slices.load(Ordering::Acquire));
    claims.failed(&error(404));
    assert!(synced.resource_claims.load(Ordering::Acquire));
    assert!(shared.dra.read().is_empty());
    // Served later: a list clears the flag, so a later outage is said again.
    slices.synced();
    assert!(!slices.unserved);
}

#[test]
fn the_api_disappearing_empties_what_was_listed() {
    let shared = crate::test_support::shared();
    let mut slices = SliceWatch::new(shared.clone());
    shared
        .dra
        .write()
        .upsert_node("a", std::collections::BTreeMap::new());
    slices.apply("a-gpus".into(), slice("a-gpus", "a", &[("gpu-0", 0)]));
    assert!(shared.dra.read().node_devices("a").is_some());
    slices.failed(&error(404));
    assert!(shared.dra.read().node_devices("a").is_none());
}

#[test]
fn claim_events_reach_the_store() {
    let shared = crate::test_support::shared();
    let mut claims = ResourceClaimWatch::new(shared.clone());
    let c = claim("ns", "c", DRIVER, 1);
    let key = ("ns".to_owned(), "c".to_owned());
    claims.apply(key.clone(), allocated(c.clone(), "a", "a", &["gpu-0"], &[]));
    assert_eq!(shared.dra.read().snapshot().in_use.len(), 1);
    claims.retain(std::collections::HashSet::new());
    assert!(shared.dra.read().claim("ns", "c").is_none());
    assert!(shared.dra.read().snapshot().in_use.is_empty());
    claims.apply(key.clone(), c.clone());
    claims.delete(key, c);
    assert!(shared.dra.read().claim("ns", "c").is_none());
}
