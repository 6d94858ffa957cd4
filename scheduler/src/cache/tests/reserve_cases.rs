//! Reserve, unreserve and NRT updates: what the filter reads in between resyncs.

use std::sync::Arc;

use super::super::{NrtUpdate, numa_footprint};
use super::*;

#[test]
fn reference_case_7_reserve_subtracts_from_every_zone() {
    let cache = cache();
    let t0 = Instant::now();
    assert_eq!(cache.update_nrt(nrt("30", "60Gi")), NrtUpdate::Added);
    assert_eq!(zones_free(&cache), [(30_000, 60), (30_000, 60)]);

    reserve(
        &cache,
        NODE,
        &pod("p", &[("cpu", "8"), ("memory", "16Gi")]),
        t0,
    );
    assert_eq!(zones_free(&cache), [(22_000, 44), (22_000, 44)]);
    let status = cache.status(NODE).expect("known node");
    assert_eq!(status.dirty_since, Some(t0));
    assert_eq!(cache.metrics().dirty_nodes(), 1);
}

#[test]
fn unreserve_restores_exactly() {
    let cache = cache();
    let t0 = Instant::now();
    cache.update_nrt(nrt("30", "60Gi"));
    let before = cache.snapshot(NODE);
    let a = pod("a", &[("cpu", "8"), ("memory", "16Gi")]);
    let b = pod("b", &[("cpu", "3"), ("memory", "1Gi")]);
    reserve(&cache, NODE, &a, t0);
    reserve(&cache, NODE, &b, t0);
    assert_eq!(zones_free(&cache), [(19_000, 43), (19_000, 43)]);

    assert!(cache.unreserve(NODE, "uid-a"));
    assert_eq!(zones_free(&cache), [(27_000, 59), (27_000, 59)]);
    assert!(!cache.unreserve(NODE, "uid-a"), "already released");
    assert!(cache.unreserve(NODE, "uid-b"));
    assert_eq!(cache.snapshot(NODE), before);
    assert_eq!(cache.status(NODE).and_then(|s| s.dirty_since), None);
    assert_eq!(cache.metrics().dirty_nodes(), 0);
}

#[test]
fn reserving_again_replaces_the_reservation() {
    let cache = cache();
    let t0 = Instant::now();
    cache.update_nrt(nrt("30", "60Gi"));
    reserve(
        &cache,
        NODE,
        &pod("p", &[("cpu", "8"), ("memory", "16Gi")]),
        t0,
    );
    reserve(
        &cache,
        NODE,
        &pod("p", &[("cpu", "2"), ("memory", "2Gi")]),
        t0,
    );
    assert_eq!(zones_free(&cache), [(28_000, 58), (28_000, 58)]);

    // Reserving on another node moves it.
    cache.update_nrt(nrt_of("worker-2", &[(0, &[("cpu", "4")])], &[]));
    reserve(
        &cache,
        "worker-2",
        &pod("p", &[("cpu", "2"), ("memory", "2Gi")]),
        t0,
    );
    assert_eq!(zones_free(&cache), [(30_000, 60), (30_000, 60)]);
    assert_eq!(free(&cache, "worker-2", 0, "cpu"), 2_000);
    assert_eq!(cache.dirty_nodes(), ["worker-2"]);
}

#[test]
fn dirty_node_holds_nrt_updates_clean_node_follows_them() {
    let cache = cache();
    let t0 = Instant::now();
    cache.update_nrt(nrt("30", "60Gi"));
    assert_eq!(cache.update_nrt(nrt("20", "50Gi")), NrtUpdate::Replaced);
    assert_eq!(zones_free(&cache), [(20_000, 50), (20_000, 50)]);

    reserve(
        &cache,
        NODE,
        &pod("p", &[("cpu", "8"), ("memory", "16Gi")]),
        t0,
    );
    assert_eq!(zones_free(&cache), [(12_000, 34), (12_000, 34)]);
    assert_eq!(cache.update_nrt(nrt("5", "5Gi")), NrtUpdate::Held);
    assert_eq!(zones_free(&cache), [(12_000, 34), (12_000, 34)]);
    assert_eq!(cache.status(NODE).and_then(|s| s.dirty_since), Some(t0));

    // Releasing the last reservation makes the node clean and accepts the held NRT.
    cache.unreserve(NODE, "uid-p");
    assert_eq!(zones_free(&cache), [(5_000, 5), (5_000, 5)]);
    assert_eq!(cache.update_nrt(nrt("7", "7Gi")), NrtUpdate::Replaced);
    assert_eq!(zones_free(&cache), [(7_000, 7), (7_000, 7)]);
}

#[test]
fn snapshots_are_not_changed_by_later_reserves() {
    let cache = cache();
    cache.update_nrt(nrt("30", "60Gi"));
    let before = cache.snapshot(NODE).expect("view").expect("usable");
    reserve(
        &cache,
        NODE,
        &pod("p", &[("cpu", "8"), ("memory", "16Gi")]),
        Instant::now(),
    );
    assert_eq!(before.available(0, "cpu"), Some(30_000));
    let after = cache.snapshot(NODE).expect("view").expect("usable");
    assert!(!Arc::ptr_eq(&before, &after));
    assert_eq!(after.available(0, "cpu"), Some(22_000));
}

#[test]
fn burstable_pods_reserve_only_their_devices() {
    let cache = cache();
    let zone: &[(&str, &str)] = &[("cpu", "30"), ("memory", "60Gi"), ("example.com/nic", "4")];
    cache.update_nrt(nrt_of(NODE, &[(0, zone), (1, zone)], &[]));
    let p = pod(
        "p",
        &[("cpu", "2"), ("memory", "1Gi"), ("example.com/nic", "1")],
    )
    .burstable();
    assert_eq!(
        numa_footprint(&p.request()).iter().collect::<Vec<_>>(),
        [("example.com/nic", 1)]
    );
    reserve(&cache, NODE, &p, Instant::now());
    assert_eq!(zones_free(&cache), [(30_000, 60), (30_000, 60)]);
    assert_eq!(free(&cache, NODE, 1, "example.com/nic"), 3);
    // Still dirty: the NRT has not confirmed the pod yet.
    assert_eq!(cache.dirty_nodes(), [NODE]);
}

#[test]
fn guaranteed_fractional_cpu_is_not_pinned() {
    let p = pod("p", &[("cpu", "1500m"), ("memory", "1Gi")]);
    assert_eq!(
        numa_footprint(&p.request()).iter().collect::<Vec<_>>(),
        [("memory", GI)]
    );
}

#[test]
fn corrupt_nrt_is_an_error_view_for_that_node_only() {
    let cache = cache();
    let mut bad = nrt("30", "60Gi");
    bad.zones[1].name = "socket-1".to_owned();
    cache.update_nrt(bad);
    cache.update_nrt(nrt_of("worker-2", &[(0, &[("cpu", "4")])], &[]));
    let error = cache.snapshot(NODE).expect("has NRT").expect_err("corrupt");
    assert!(error.to_string().contains(NODE), "{error}");
    assert_eq!(free(&cache, "worker-2", 0, "cpu"), 4_000);

    // Reserving on it records the reservation; a good NRT is accepted at once and
    // carries it.
    let t0 = Instant::now();
    reserve(
        &cache,
        NODE,
        &pod("p", &[("cpu", "8"), ("memory", "16Gi")]),
        t0,
    );
    assert_eq!(cache.update_nrt(nrt("30", "60Gi")), NrtUpdate::Replaced);
    assert_eq!(zones_free(&cache), [(22_000, 44), (22_000, 44)]);
}

#[test]
fn unnamed_nrt_is_ignored() {
    let cache = cache();
    let mut unnamed = nrt("30", "60Gi");
    unnamed.metadata.name = None;
    assert_eq!(cache.update_nrt(unnamed), NrtUpdate::Ignored);
    assert_eq!(cache.snapshot(NODE), None);
}

#[test]
fn deleting_the_nrt_removes_the_view_and_keeps_reservations_for_the_next_one() {
    let cache = cache();
    let t0 = Instant::now();
    cache.update_nrt(nrt("30", "60Gi"));
    reserve(
        &cache,
        NODE,
        &pod("p", &[("cpu", "8"), ("memory", "16Gi")]),
        t0,
    );
    assert!(cache.delete_nrt(NODE));
    assert!(!cache.delete_nrt(NODE));
    assert_eq!(cache.snapshot(NODE), None);
    assert_eq!(
        cache.metrics().dirty_nodes(),
        0,
        "no view, nothing held back"
    );
    assert!(cache.dirty_nodes().is_empty());

    assert_eq!(cache.update_nrt(nrt("30", "60Gi")), NrtUpdate::Added);
    assert_eq!(zones_free(&cache), [(22_000, 44), (22_000, 44)]);
    assert_eq!(cache.metrics().dirty_nodes(), 1);

    cache.unreserve(NODE, "uid-p");
    assert!(cache.delete_nrt(NODE));
    assert_eq!(cache.status(NODE), None, "nothing left to remember");
}

#[test]
fn reservation_made_before_the_first_nrt_applies_to_it() {
    let cache = cache();
    reserve(
        &cache,
        NODE,
        &pod("p", &[("cpu", "8"), ("memory", "16Gi")]),
        Instant::now(),
    );
    assert_eq!(cache.snapshot(NODE), None);
    assert_eq!(cache.update_nrt(nrt("30", "60Gi")), NrtUpdate::Added);
    assert_eq!(zones_free(&cache), [(22_000, 44), (22_000, 44)]);
}

#[test]
fn parallel_readers_always_see_whole_reservations() {
    let cache = cache();
    cache.update_nrt(nrt("30", "60Gi"));
    let p = pod("p", &[("cpu", "8"), ("memory", "16Gi")]);
    let now = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| {
                for _ in 0..2_000 {
                    let view = cache.snapshot(NODE).expect("view").expect("usable");
                    let zones: Vec<_> = (0..2)
                        .map(|z| (view.available(z, "cpu"), view.available(z, "memory")))
                        .collect();
                    let reserved = [(Some(22_000), Some(44 * GI)); 2];
                    let free = [(Some(30_000), Some(60 * GI)); 2];
                    assert!(zones == reserved || zones == free, "{zones:?}");
                }
            });
        }
        for _ in 0..500 {
            reserve(&cache, NODE, &p, now);
            cache.unreserve(NODE, "uid-p");
        }
    });
    assert_eq!(zones_free(&cache), [(30_000, 60), (30_000, 60)]);
}

#[test]
fn reserved_amounts_name_what_a_deletion_gives_back() {
    let cache = cache();
    let t0 = Instant::now();
    cache.update_nrt(nrt("30", "60Gi"));
    let a = pod("a", &[("cpu", "8"), ("memory", "16Gi")]);
    reserve(&cache, NODE, &a, t0);
    let amounts = cache.reserved_amounts(NODE, "uid-a").expect("reserved");
    assert_eq!(
        amounts,
        numa_footprint(&PodRequest::from_pod(&a.build()).unwrap())
    );
    assert_eq!(cache.reserved_amounts(NODE, "uid-b"), None);
    assert_eq!(cache.reserved_amounts("other", "uid-a"), None);
    cache.unreserve(NODE, "uid-a");
    assert_eq!(cache.reserved_amounts(NODE, "uid-a"), None);
}
