//! A node agent that stopped: its NRT's `tas.dev/heartbeat` is older than
//! `missed_heartbeats` periods. The cache never forces such a node clean; the pods bound
//! after the object's last write keep counting against its zones until a fresh object
//! arrives.

use std::time::SystemTime;

use tas_api::nrt::heartbeat::{self, Heartbeat};

use super::super::{PodBound, ResyncOutcome, ResyncReport};
use super::*;

const HEARTBEAT_PERIOD: Duration = Duration::from_secs(600);

/// `nrt` as the agent wrote it at `at`.
fn stamped(nrt: NodeResourceTopology, at: SystemTime) -> NodeResourceTopology {
    heartbeat::stamp(
        nrt,
        &Heartbeat {
            at,
            period: HEARTBEAT_PERIOD,
        },
    )
}

/// Both clocks at one moment, and the node's NRT written 200 s later by an agent whose
/// fingerprint will never match: `q` (2 CPUs) bound more than `max_staleness` (120 s)
/// before that write, `r` (1 CPU) 30 s before it, `p` (8 CPUs) 40 s after it.
struct Setup {
    cache: TopologyCache,
    t0: Instant,
    w0: SystemTime,
}

impl Setup {
    fn new() -> Self {
        let t0 = Instant::now();
        let w0 = SystemTime::now();
        let cache = cache();
        let written = with_fingerprint(nrt("30", "60Gi"), &[("ns", "other")], None);
        cache.update_nrt_at(stamped(written, w0 + secs(200)), t0 + secs(200));
        let q = pod("q", &[("cpu", "2"), ("memory", "2Gi")]);
        reserve(&cache, NODE, &q, t0);
        assert_eq!(
            cache.pod_bound(&q.on(NODE).running().build(), t0),
            PodBound::Confirmed
        );
        let r = pod("r", &[("cpu", "1"), ("memory", "1Gi")]);
        reserve(&cache, NODE, &r, t0 + secs(170));
        assert_eq!(
            cache.pod_bound(&r.on(NODE).running().build(), t0 + secs(170)),
            PodBound::Confirmed
        );
        let p = pod("p", &[("cpu", "8"), ("memory", "16Gi")]);
        reserve(&cache, NODE, &p, t0 + secs(240));
        assert_eq!(
            cache.pod_bound(&p.on(NODE).running().build(), t0 + secs(240)),
            PodBound::Confirmed
        );
        assert_eq!(zones_free(&cache), [(19_000, 41), (19_000, 41)]);
        Self { cache, t0, w0 }
    }

    /// A resync `after` the start, on both clocks.
    fn resync(&self, after: Duration) -> ResyncReport {
        self.cache.resync_at(self.t0 + after, self.w0 + after)
    }
}

#[test]
fn a_stopped_writer_keeps_the_pods_bound_after_its_last_write_past_max_staleness() {
    let s = Setup::new();
    // Ten minutes after the write: the writer is alive, the fingerprint mismatches.
    // Trusted past max_staleness, but `p`, bound after the object arrived, cannot be
    // in it and stays reserved.
    let report = s.resync(secs(200 + 600));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Forced));
    assert_eq!(report.nodes[0].carried_over, 1);
    assert_eq!(zones_free(&s.cache), [(22_000, 44), (22_000, 44)]);

    let s = Setup::new();
    // Three periods and a second after the write: stopped. `p` was bound after the
    // write, so the object cannot show it, and `r` too close before it to be sure;
    // `q` was bound well before it.
    let report = s.resync(secs(200 + 1801));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::WriterStopped));
    assert_eq!(report.nodes[0].carried_over, 2);
    assert_eq!(zones_free(&s.cache), [(21_000, 43), (21_000, 43)]);
    assert_eq!(s.cache.dirty_nodes(), [NODE], "not forced clean");
    assert_eq!(s.cache.metrics().resyncs(ResyncOutcome::WriterStopped), 1);
    assert_eq!(s.cache.metrics().resyncs(ResyncOutcome::Forced), 0);
    assert!(
        crate::cache::stopped_writers_note(&[], 3).is_none(),
        "no note without a stopped writer"
    );

    // Hours later, nothing changed: `p` still counts.
    for hours in [1, 2, 5] {
        let report = s.resync(secs(hours * 3600));
        assert_eq!(report.outcome(NODE), Some(ResyncOutcome::WriterStopped));
        assert_eq!(zones_free(&s.cache), [(21_000, 43), (21_000, 43)]);
    }

    // The agent comes back and reports `p` on zone 0: a fresh object, trusted on match.
    let reported = nrt_of(
        NODE,
        &[
            (0, &[("cpu", "20"), ("memory", "42Gi")]),
            (1, &[("cpu", "30"), ("memory", "60Gi")]),
        ],
        &[],
    );
    let reported = with_fingerprint(reported, &[("ns", "p"), ("ns", "q"), ("ns", "r")], None);
    s.cache.update_nrt(stamped(reported, s.w0 + secs(6 * 3600)));
    // Accepted on arrival (its fingerprint shows every pod), so no resync is left to do.
    let report = s.resync(secs(6 * 3600 + 1));
    assert_eq!(report.outcome(NODE), None, "clean since the object arrived");
    assert!(s.cache.dirty_nodes().is_empty());
    assert_eq!(zones_free(&s.cache), [(20_000, 42), (30_000, 60)]);
}

#[test]
fn a_stopped_writer_without_a_fingerprint_is_not_trusted_after_a_resync_period() {
    let t0 = Instant::now();
    let w0 = SystemTime::now();
    let cache = cache();
    cache.update_nrt(stamped(nrt("30", "60Gi"), w0 - secs(3600)));
    let p = pod("p", &[("cpu", "8"), ("memory", "16Gi")]);
    reserve(&cache, NODE, &p, t0);
    cache.pod_bound(&p.on(NODE).running().build(), t0);
    // A live writer's object without a fingerprint would be trusted now and `p`, bound
    // more than a resync period ago, dropped.
    let report = cache.resync_at(t0 + secs(10), w0 + secs(10));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::WriterStopped));
    assert_eq!(zones_free(&cache), [(22_000, 44), (22_000, 44)]);

    // Shown to users: in the debug report and in unschedulable pods' messages.
    let stopped = cache.stopped_writers(t0 + secs(10), w0 + secs(10));
    assert_eq!(stopped.len(), 1);
    assert_eq!(
        (stopped[0].node.as_str(), stopped[0].reservations),
        (NODE, 1)
    );
    let note = crate::cache::stopped_writers_note(&stopped, 3).expect("a note");
    assert!(
        note.contains(&format!("{NODE} (60 min, 1 pod(s) held)")),
        "{note}"
    );
    let inspected = cache.inspect(t0 + secs(10));
    let age = inspected[0].writer_stopped_seconds.expect("stopped");
    assert!(age >= 3600.0, "{age}");

    // Deleting the pod releases it at once, as for any reservation.
    cache.pod_deleted(&p.on(NODE).running().build(), t0 + secs(20));
    assert!(cache.dirty_nodes().is_empty());
    assert_eq!(zones_free(&cache), [(30_000, 60), (30_000, 60)]);
}

#[test]
fn the_missed_periods_are_configurable() {
    let t0 = Instant::now();
    let w0 = SystemTime::now();
    let cache = cache_with(CacheConfig {
        missed_heartbeats: 10,
        ..config()
    });
    let written = with_fingerprint(nrt("30", "60Gi"), &[("ns", "other")], None);
    cache.update_nrt(stamped(written, w0));
    let p = pod("p", &[("cpu", "8"), ("memory", "16Gi")]);
    reserve(&cache, NODE, &p, t0 + secs(1));
    cache.pod_bound(&p.on(NODE).running().build(), t0 + secs(1));
    // 50 minutes without a write: stopped under 3 periods, alive under 10.
    let report = cache.resync_at(t0 + secs(3000), w0 + secs(3000));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Forced));
    assert!(
        cache
            .stopped_writers(t0 + secs(3000), w0 + secs(3000))
            .is_empty()
    );
}
