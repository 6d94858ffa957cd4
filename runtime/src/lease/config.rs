//! Which Lease to contend for, as whom, and the three periods that drive election.

use std::time::Duration;

use super::LeaseError;

/// Where and how to run leader election.
///
/// The timing rules (see the [module docs](super) for why they are safe):
/// - a holder renews every `renew_period`, and retries a failed renewal every
///   `retry_period`;
/// - a holder counts itself leader only until [`renew_deadline`](Self::renew_deadline)
///   (two thirds of `lease_duration`) has passed since the start of its last
///   successful write, whether or not the API server answers;
/// - a candidate takes the lease over once it has seen the same record unchanged for
///   the record's `leaseDurationSeconds`, or at once when the lease names no holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease; every candidate of one election uses the same.
    pub name: String,
    /// This candidate's `holderIdentity`, unique among candidates (a pod name).
    pub identity: String,
    /// How long a lease stays valid without renewal; whole seconds, at least 1.
    pub lease_duration: Duration,
    /// How often the holder renews.
    pub renew_period: Duration,
    /// How often a candidate checks the lease, and a holder retries a failed renewal.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// Default lease duration: 15 s.
    pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
    /// Default renew period: 5 s.
    pub const DEFAULT_RENEW_PERIOD: Duration = Duration::from_secs(5);
    /// Default retry period: 2 s.
    pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

    /// The Lease `namespace/name` contended for as `identity`, with the default periods.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Self::DEFAULT_LEASE_DURATION,
            renew_period: Self::DEFAULT_RENEW_PERIOD,
            retry_period: Self::DEFAULT_RETRY_PERIOD,
        }
    }

    /// How long after the start of its last successful renewal a holder still counts
    /// itself leader: two thirds of `lease_duration`.
    ///
    /// Other candidates wait the full `lease_duration` from when they *observe* that
    /// renewal, which is never earlier than the request started; the remaining third
    /// absorbs scheduling delays and clock-rate differences, so the old leader has
    /// stopped before a new one can start.
    pub fn renew_deadline(&self) -> Duration {
        self.lease_duration * 2 / 3
    }

    /// The write fence's margin ([`WriteFence`](super::WriteFence)): see
    /// [`write_margin`](super::write_margin).
    pub fn write_margin(&self) -> Duration {
        super::write_margin(self.lease_duration)
    }

    /// `lease_duration` as the Lease's `leaseDurationSeconds`.
    pub(crate) fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// Checks the invariants the timing rules rely on.
    pub fn validate(&self) -> Result<(), LeaseError> {
        let invalid = |reason: String| Err(LeaseError::InvalidConfig(reason));
        for (field, value) in [
            ("namespace", &self.namespace),
            ("name", &self.name),
            ("identity", &self.identity),
        ] {
            if value.is_empty() {
                return invalid(format!("{field} must not be empty"));
            }
        }
        if self.lease_duration < Duration::from_secs(1) || self.lease_duration.subsec_nanos() != 0 {
            return invalid(format!(
                "lease_duration must be a whole number of seconds, at least 1 (got {:?})",
                self.lease_duration
            ));
        }
        if self.lease_duration.as_secs() > i32::MAX as u64 {
            return invalid("lease_duration is too long".into());
        }
        if self.renew_period.is_zero() || self.renew_period >= self.renew_deadline() {
            return invalid(format!(
                "renew_period ({:?}) must be positive and shorter than the renew deadline \
                 ({:?}, two thirds of lease_duration)",
                self.renew_period,
                self.renew_deadline()
            ));
        }
        if self.retry_period.is_zero() {
            return invalid("retry_period must be positive".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LeaseConfig {
        LeaseConfig::new("ns", "lease", "me")
    }

    #[test]
    fn defaults_are_valid_and_leave_a_third_of_the_lease_as_margin() {
        let c = config();
        c.validate().unwrap();
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.renew_deadline(), Duration::from_secs(10));
        assert_eq!(c.lease_duration_seconds(), 15);
        assert_eq!(c.write_margin(), Duration::from_millis(2500));
    }

    #[test]
    fn rejects_configs_that_break_the_timing_rules() {
        type Change = fn(&mut LeaseConfig);
        let cases: [(&str, Change); 6] = [
            ("empty identity", |c| c.identity.clear()),
            ("sub-second lease", |c| {
                c.lease_duration = Duration::from_millis(500)
            }),
            ("fractional lease", |c| {
                c.lease_duration = Duration::from_millis(2500)
            }),
            ("renew after deadline", |c| {
                c.renew_period = Duration::from_secs(11)
            }),
            ("zero renew", |c| c.renew_period = Duration::ZERO),
            ("zero retry", |c| c.retry_period = Duration::ZERO),
        ];
        for (what, change) in cases {
            let mut c = config();
            change(&mut c);
            assert!(c.validate().is_err(), "{what} should be rejected");
        }
    }

    #[test]
    fn short_test_periods_are_valid() {
        let c = LeaseConfig {
            lease_duration: Duration::from_secs(2),
            renew_period: Duration::from_millis(500),
            retry_period: Duration::from_millis(200),
            ..config()
        };
        c.validate().unwrap();
        assert!(c.renew_deadline() > Duration::from_millis(1300));
    }
}
