//! The Lease record: judging whether a candidate may take it, and the specs written
//! to acquire, renew and release it. Pure functions, no I/O.
//!
//! Expiry is judged the way client-go does: a candidate notes *when it first saw* the
//! current record (on its own monotonic clock) and treats it as expired once that
//! record has stayed unchanged for `leaseDurationSeconds`. `renewTime` is written (as
//! a `MicroTime`) for people and other tools, but not compared with this machine's
//! wall clock: a clock running ahead would let a candidate take over while the holder
//! still acts as leader.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

/// The holder a record names, if any (an empty identity means nobody).
pub(crate) fn holder(spec: Option<&LeaseSpec>) -> Option<&str> {
    spec.and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// A record as a candidate last saw it, and since when it has looked like this.
#[derive(Debug, Clone)]
pub(crate) struct Observation {
    spec: LeaseSpec,
    since: Instant,
}

impl Observation {
    /// Folds a freshly read record into what was seen before: the clock restarts
    /// whenever the record changed (a renewal, a new holder, a release).
    pub(crate) fn update(previous: Option<Self>, spec: &LeaseSpec, now: Instant) -> Self {
        match previous {
            Some(seen) if seen.spec == *spec => seen,
            _ => Self {
                spec: spec.clone(),
                since: now,
            },
        }
    }

    /// The holder the observed record names.
    pub(crate) fn holder(&self) -> Option<&str> {
        holder(Some(&self.spec))
    }

    /// Whether a candidate may write itself into this record now.
    ///
    /// A record naming the candidate's own identity is waited out like anyone else's:
    /// a candidate judges records only while it does not lead, so such a record was
    /// written by an earlier process of the same identity (a container restarted in
    /// the same pod keeps the pod name), whose last writes may still reach the API
    /// server until its lease expires.
    pub(crate) fn judge(&self, fallback: Duration, now: Instant) -> Verdict {
        let Some(holder) = self.holder() else {
            return Verdict::Free;
        };
        let duration = self
            .spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .filter(|s| *s > 0)
            .map_or(fallback, Duration::from_secs);
        let until = self.since + duration;
        if now >= until {
            Verdict::Expired {
                holder: holder.to_owned(),
            }
        } else {
            Verdict::Held {
                holder: holder.to_owned(),
                until,
            }
        }
    }
}

/// What a candidate concluded about a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nobody holds it: never held, or released.
    Free,
    /// Its holder has not renewed for the whole lease duration.
    Expired { holder: String },
    /// Its holder may still be leader until `until`, at the earliest.
    Held { holder: String, until: Instant },
}

/// The record that makes `identity` the holder, replacing `old` (`None`: a new Lease).
///
/// Taking the lease from anyone else (including from nobody, after a release) counts
/// as a transition; taking back a record that already names us does not.
pub(crate) fn acquired(
    old: Option<&LeaseSpec>,
    identity: &str,
    lease_duration_seconds: i32,
    now: Timestamp,
) -> LeaseSpec {
    let now = MicroTime(now);
    let mut spec = old.cloned().unwrap_or_default();
    let transitions = spec.lease_transitions.unwrap_or(0);
    if old.is_none() {
        spec.lease_transitions = Some(0);
        spec.acquire_time = Some(now.clone());
    } else if holder(old) != Some(identity) {
        spec.lease_transitions = Some(transitions.saturating_add(1));
        spec.acquire_time = Some(now.clone());
    } else if spec.acquire_time.is_none() {
        spec.acquire_time = Some(now.clone());
    }
    spec.holder_identity = Some(identity.to_owned());
    spec.lease_duration_seconds = Some(lease_duration_seconds);
    spec.renew_time = Some(now);
    spec
}

/// The holder's record with a fresh `renewTime`.
pub(crate) fn renewed(spec: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        renew_time: Some(MicroTime(now)),
        ..spec.clone()
    }
}

/// The record with no holder, so the next candidate takes over without waiting.
pub(crate) fn released(spec: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        acquire_time: None,
        renew_time: Some(MicroTime(now)),
        ..spec.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn may_acquire(verdict: &Verdict) -> bool {
        !matches!(verdict, Verdict::Held { .. })
    }

    fn held_by(holder: &str, renewed_at_micros: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(2),
            lease_transitions: Some(3),
            renew_time: Some(MicroTime(
                Timestamp::from_microsecond(renewed_at_micros).unwrap(),
            )),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_record_expires_only_after_staying_unchanged_for_its_duration() {
        let t0 = Instant::now();
        let spec = held_by("a", 1);
        let seen = Observation::update(None, &spec, t0);
        let verdict = seen.judge(15 * SECOND, t0 + SECOND);
        assert_eq!(
            verdict,
            Verdict::Held {
                holder: "a".into(),
                until: t0 + 2 * SECOND
            }
        );
        assert!(!may_acquire(&verdict));

        // Seeing the same record again keeps the clock running...
        let seen = Observation::update(Some(seen), &spec, t0 + SECOND);
        assert!(may_acquire(&seen.judge(15 * SECOND, t0 + 2 * SECOND)));

        // ...a renewal restarts it.
        let seen = Observation::update(Some(seen), &held_by("a", 2), t0 + 2 * SECOND);
        assert!(!may_acquire(&seen.judge(15 * SECOND, t0 + 3 * SECOND)));
        assert_eq!(
            seen.judge(15 * SECOND, t0 + 4 * SECOND),
            Verdict::Expired { holder: "a".into() }
        );
    }

    #[test]
    fn free_records_may_be_taken_at_once() {
        let t0 = Instant::now();
        for spec in [
            LeaseSpec::default(),
            LeaseSpec {
                holder_identity: Some(String::new()),
                ..held_by("a", 1)
            },
        ] {
            let seen = Observation::update(None, &spec, t0);
            assert_eq!(seen.judge(SECOND, t0), Verdict::Free);
        }
    }

    #[test]
    fn without_a_duration_the_candidates_own_applies() {
        let t0 = Instant::now();
        let spec = LeaseSpec {
            lease_duration_seconds: None,
            ..held_by("a", 1)
        };
        let seen = Observation::update(None, &spec, t0);
        assert!(!may_acquire(&seen.judge(5 * SECOND, t0 + 4 * SECOND)));
        assert!(may_acquire(&seen.judge(5 * SECOND, t0 + 5 * SECOND)));
    }

    #[test]
    fn transitions_count_changes_of_holder() {
        let now = Timestamp::from_second(1_000).unwrap();
        let created = acquired(None, "a", 15, now);
        assert_eq!(created.lease_transitions, Some(0));
        assert_eq!(created.holder_identity.as_deref(), Some("a"));
        assert_eq!(created.acquire_time, Some(MicroTime(now)));
        assert_eq!(created.renew_time, Some(MicroTime(now)));
        assert_eq!(created.lease_duration_seconds, Some(15));

        let later = Timestamp::from_second(1_010).unwrap();
        let taken = acquired(Some(&held_by("a", 1)), "b", 15, later);
        assert_eq!(taken.lease_transitions, Some(4));
        assert_eq!(taken.acquire_time, Some(MicroTime(later)));

        let released = released(&held_by("a", 1), later);
        assert_eq!(holder(Some(&released)), None);
        let after_release = acquired(Some(&released), "a", 15, later);
        assert_eq!(after_release.lease_transitions, Some(4));

        let first = MicroTime(now);
        let ours = LeaseSpec {
            acquire_time: Some(first.clone()),
            ..held_by("a", 1)
        };
        let retaken = acquired(Some(&ours), "a", 15, later);
        assert_eq!(retaken.lease_transitions, Some(3));
        assert_eq!(retaken.acquire_time, Some(first));
        assert_eq!(retaken.renew_time, Some(MicroTime(later)));
    }

    #[test]
    fn renewing_moves_only_the_renew_time() {
        let spec = held_by("a", 1);
        let now = Timestamp::from_second(7).unwrap();
        let renewed = renewed(&spec, now);
        assert_eq!(renewed.renew_time, Some(MicroTime(now)));
        assert_eq!(
            LeaseSpec {
                renew_time: spec.renew_time.clone(),
                ..renewed
            },
            spec
        );
    }
}
