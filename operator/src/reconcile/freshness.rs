//! Whether a node's NodeResourceTopology is fresh: judged by time, not by the agent pod.
//!
//! The TAS node agent writes its object when the content changes and, on an idle node,
//! at least once per heartbeat period, stamping `tas.dev/heartbeat` and
//! `tas.dev/heartbeat-period` ([`tas_api::nrt::heartbeat`]). An object is *stale* when
//! its last write is older than `missed` of those periods
//! (`spec.scheduler.cache.missedHeartbeats`, the same rule the scheduler applies). An
//! object without the stamp (another writer, or an agent from before heartbeats) is
//! judged by the newest `managedFields` time against the node group's configured
//! heartbeat period. A node without an object, or with one without zones, is *missing*.
//!
//! ```text
//! NRT object ─► last write (heartbeat, else managedFields) + period × missed
//!                  ├─ in the future ─► Fresh { stale_at }  (the reconcile requeues then)
//!                  └─ past          ─► Stale { age }       (Degraded=StaleTopology)
//! ```

use std::time::{Duration, SystemTime};

use tas_api::nrt::heartbeat::Heartbeat;
use tas_api::nrt::v1alpha2::NodeResourceTopology;

/// How a node's topology looks at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// No object, or one without zones.
    Missing,
    /// Written recently enough; turns stale at `stale_at` without another write (`None`
    /// when the object carries no time at all).
    Fresh {
        /// When it turns stale.
        stale_at: Option<SystemTime>,
    },
    /// Not written for longer than allowed: its writer stopped.
    Stale {
        /// Since the last write.
        age: Duration,
    },
}

impl Freshness {
    /// Whether the node's topology is present and fresh.
    pub fn is_fresh(self) -> bool {
        matches!(self, Self::Fresh { .. })
    }
}

/// The freshness of `nrt` at `now`; `group_period` is the heartbeat period the node's
/// group configures, used when the object states none.
pub fn freshness(
    nrt: Option<&NodeResourceTopology>,
    now: SystemTime,
    group_period: Duration,
    missed: u32,
) -> Freshness {
    let Some(nrt) = nrt.filter(|n| !n.zones.is_empty()) else {
        return Freshness::Missing;
    };
    let (at, period) = match Heartbeat::of(nrt) {
        Some(h) => (Some(h.at), h.period),
        None => (last_write(nrt), group_period),
    };
    let Some(at) = at else {
        return Freshness::Fresh { stale_at: None };
    };
    let allowed = period.saturating_mul(missed.max(1));
    let age = now.duration_since(at).unwrap_or_default();
    if age > allowed {
        Freshness::Stale { age }
    } else {
        Freshness::Fresh {
            stale_at: at.checked_add(allowed),
        }
    }
}

/// The newest `managedFields` time of the object, else its creation time.
fn last_write(nrt: &NodeResourceTopology) -> Option<SystemTime> {
    let meta = &nrt.metadata;
    meta.managed_fields
        .iter()
        .flatten()
        .filter_map(|f| f.time.as_ref())
        .map(|t| SystemTime::from(t.0))
        .max()
        .or_else(|| {
            meta.creation_timestamp
                .as_ref()
                .map(|t| SystemTime::from(t.0))
        })
}

/// "12m", "2h5m": an age for a human.
pub fn human_age(age: Duration) -> String {
    let minutes = age.as_secs() / 60;
    match (minutes / 60, minutes % 60) {
        (0, 0) => format!("{}s", age.as_secs()),
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
    use k8s_openapi::jiff::Timestamp;
    use tas_api::nrt::heartbeat;
    use tas_api::nrt::v1alpha2::Zone;

    const PERIOD: Duration = Duration::from_secs(600);

    fn at(second: i64) -> SystemTime {
        SystemTime::from(Timestamp::from_second(second).unwrap())
    }

    fn with_zones() -> NodeResourceTopology {
        let mut nrt = NodeResourceTopology::new("n1");
        nrt.zones.push(Zone {
            name: "node-0".into(),
            ..Zone::default()
        });
        nrt
    }

    fn beating(last: SystemTime, period: Duration) -> NodeResourceTopology {
        heartbeat::stamp(with_zones(), &Heartbeat { at: last, period })
    }

    #[test]
    fn the_heartbeat_decides() {
        let t = 1_800_000_000;
        let nrt = beating(at(t), PERIOD);
        assert_eq!(
            freshness(Some(&nrt), at(t + 1800), Duration::from_secs(5), 3),
            Freshness::Fresh {
                stale_at: Some(at(t + 1800))
            },
            "three periods of the object's own, not the group's"
        );
        assert_eq!(
            freshness(Some(&nrt), at(t + 1801), Duration::from_secs(5), 3),
            Freshness::Stale {
                age: Duration::from_secs(1801)
            }
        );
        assert!(freshness(Some(&nrt), at(t + 1801), PERIOD, 4).is_fresh());
    }

    #[test]
    fn without_a_heartbeat_the_last_managed_fields_time_and_the_group_period() {
        let t = 1_800_000_000;
        let mut nrt = with_zones();
        assert_eq!(
            freshness(Some(&nrt), at(t), PERIOD, 3),
            Freshness::Fresh { stale_at: None },
            "no time at all: nothing to judge"
        );
        let entry = |second| ManagedFieldsEntry {
            manager: Some("nfd-topology-updater".into()),
            time: Some(Time(Timestamp::from_second(second).unwrap())),
            ..ManagedFieldsEntry::default()
        };
        nrt.metadata.managed_fields = Some(vec![entry(t - 100), entry(t)]);
        assert!(freshness(Some(&nrt), at(t + 1800), PERIOD, 3).is_fresh());
        assert!(!freshness(Some(&nrt), at(t + 1801), PERIOD, 3).is_fresh());
    }

    #[test]
    fn no_object_or_no_zones_is_missing() {
        let now = at(1_800_000_000);
        assert_eq!(freshness(None, now, PERIOD, 3), Freshness::Missing);
        let empty = NodeResourceTopology::new("n1");
        assert_eq!(freshness(Some(&empty), now, PERIOD, 3), Freshness::Missing);
    }

    #[test]
    fn ages_read_well() {
        assert_eq!(human_age(Duration::from_secs(59)), "59s");
        assert_eq!(human_age(Duration::from_secs(1860)), "31m");
        assert_eq!(human_age(Duration::from_secs(7200)), "2h");
        assert_eq!(human_age(Duration::from_secs(7500)), "2h5m");
    }
}
