//! Liveness of an NRT object's writer: the `tas.dev/heartbeat` and
//! `tas.dev/heartbeat-period` attributes.
//!
//! The TAS node agent writes its node's object only when the content changes, so an
//! idle node's object is legitimately old and its age alone cannot tell a live writer
//! from a dead one. The agent therefore also rewrites the object at least once per
//! heartbeat period, stamping the time of that write (RFC 3339, UTC) and the period it
//! promises. A reader that finds the stamp older than a few periods knows the writer
//! stopped and the content may no longer be true. Objects without the attributes
//! (other writers, e.g. node-feature-discovery's topology-updater) carry no such
//! promise; readers judge them as before.

use std::time::{Duration, SystemTime};

use k8s_openapi::jiff::Timestamp;

use super::v1alpha2::{AttributeInfo, NodeResourceTopology};

/// Attribute holding the time of the writer's last write, RFC 3339 in UTC
/// (e.g. `2026-11-24T16:20:31Z`).
pub const HEARTBEAT: &str = "tas.dev/heartbeat";
/// Attribute holding the longest time between two writes the writer promises, a Go
/// duration (e.g. `10m`).
pub const HEARTBEAT_PERIOD: &str = "tas.dev/heartbeat-period";
/// The node agent's heartbeat period unless configured: at most 6 writes an hour on an
/// idle node.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(600);
/// How many heartbeat periods may pass without a write before readers treat the writer
/// as stopped, unless configured.
pub const DEFAULT_MISSED: u32 = 3;

/// The liveness promise an object carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// When the writer last wrote the object.
    pub at: SystemTime,
    /// The longest time between two writes it promises.
    pub period: Duration,
}

impl Heartbeat {
    /// The object's heartbeat; `None` when either attribute is absent or unreadable (a
    /// writer that makes no promise).
    pub fn of(nrt: &NodeResourceTopology) -> Option<Self> {
        let at = nrt.attribute(HEARTBEAT)?.parse::<Timestamp>().ok()?;
        let period = crate::duration::parse(nrt.attribute(HEARTBEAT_PERIOD)?).ok()?;
        (!period.is_zero()).then_some(Self {
            at: SystemTime::from(at),
            period,
        })
    }

    /// How long ago the last write was at `now` (zero when the stamp is ahead of `now`:
    /// clocks differ between nodes).
    pub fn age(&self, now: SystemTime) -> Duration {
        now.duration_since(self.at).unwrap_or_default()
    }

    /// Whether `missed` whole periods passed since the last write: the writer stopped.
    pub fn stopped(&self, now: SystemTime, missed: u32) -> bool {
        self.age(now) > self.period.saturating_mul(missed.max(1))
    }

    /// The two attributes that state this heartbeat (the time truncated to seconds).
    pub fn attributes(&self) -> [AttributeInfo; 2] {
        let at = Timestamp::try_from(self.at).unwrap_or(Timestamp::UNIX_EPOCH);
        let at = Timestamp::from_second(at.as_second()).unwrap_or(at);
        [
            AttributeInfo::new(HEARTBEAT, at.to_string()),
            AttributeInfo::new(HEARTBEAT_PERIOD, format_period(self.period)),
        ]
    }
}

/// `nrt` with its heartbeat attributes replaced by `heartbeat`'s, attributes kept
/// sorted by name.
pub fn stamp(mut nrt: NodeResourceTopology, heartbeat: &Heartbeat) -> NodeResourceTopology {
    nrt.attributes.retain(|a| !is_heartbeat_attribute(&a.name));
    nrt.attributes.extend(heartbeat.attributes());
    nrt.attributes.sort_by(|a, b| a.name.cmp(&b.name));
    nrt
}

/// Whether an attribute is one of the heartbeat's: left out when comparing content.
pub fn is_heartbeat_attribute(name: &str) -> bool {
    name == HEARTBEAT || name == HEARTBEAT_PERIOD
}

/// A period as whole seconds (`600s`), which every Go-duration parser reads.
fn format_period(period: Duration) -> String {
    format!("{}s", period.as_secs().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str) -> SystemTime {
        SystemTime::from(rfc3339.parse::<Timestamp>().unwrap())
    }

    #[test]
    fn stamped_attributes_read_back() {
        let hb = Heartbeat {
            at: at("2026-11-24T16:20:31Z"),
            period: Duration::from_secs(600),
        };
        let nrt = stamp(NodeResourceTopology::new("n"), &hb);
        assert_eq!(nrt.attribute(HEARTBEAT), Some("2026-11-24T16:20:31Z"));
        assert_eq!(nrt.attribute(HEARTBEAT_PERIOD), Some("600s"));
        assert_eq!(Heartbeat::of(&nrt), Some(hb));
        // Restamping replaces, never duplicates.
        let later = Heartbeat {
            at: at("2026-11-24T16:30:31Z"),
            ..hb
        };
        let nrt = stamp(nrt, &later);
        assert_eq!(nrt.attributes.len(), 2);
        assert_eq!(Heartbeat::of(&nrt), Some(later));
    }

    #[test]
    fn stopped_after_the_missed_periods() {
        let hb = Heartbeat {
            at: at("2026-11-24T16:00:00Z"),
            period: Duration::from_secs(600),
        };
        assert!(!hb.stopped(at("2026-11-24T16:30:00Z"), 3));
        assert!(hb.stopped(at("2026-11-24T16:30:01Z"), 3));
        assert_eq!(hb.age(at("2026-11-24T15:59:00Z")), Duration::ZERO);
    }

    #[test]
    fn absent_or_unreadable_attributes_promise_nothing() {
        let mut nrt = NodeResourceTopology::new("n");
        assert_eq!(Heartbeat::of(&nrt), None);
        nrt.attributes
            .push(AttributeInfo::new(HEARTBEAT, "yesterday"));
        nrt.attributes
            .push(AttributeInfo::new(HEARTBEAT_PERIOD, "10m"));
        assert_eq!(Heartbeat::of(&nrt), None);
        nrt.attributes[0].value = "2026-11-24T16:00:00Z".into();
        assert!(Heartbeat::of(&nrt).is_some());
        nrt.attributes[1].value = "0".into();
        assert_eq!(Heartbeat::of(&nrt), None, "a zero period promises nothing");
    }
}
