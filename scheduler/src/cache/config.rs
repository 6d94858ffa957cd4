//! [`CacheConfig`]: the reserve cache's settings, read from the scheduler's
//! `cache` section ([`CacheSpec`]) with the durations parsed once.

use std::time::Duration;

use tas_api::duration::{self, DurationError};
use tas_api::tas::{CacheSpec, ForeignPodsDetection, InformerMode};

/// A `cache` section that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("scheduler cache: {field}: {source}")]
pub struct ConfigError {
    /// `resyncPeriod` or `maxStaleness`.
    pub field: &'static str,
    /// The parse problem.
    pub source: DurationError,
}

/// How the reserve cache behaves; see the module documentation of [`super`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    /// Pods whose `spec.schedulerName` is this are placed by us; every other pod is
    /// foreign.
    pub scheduler_name: String,
    /// How often dirty nodes are re-checked. Also the trust delay for NRT objects
    /// without a usable fingerprint, and how long a freshly bound pod is assumed to be
    /// missing from the node agent's reports.
    pub resync_period: Duration,
    /// Longest time a node stays dirty before it is forced clean; never shorter than
    /// `resync_period`.
    pub max_staleness: Duration,
    /// Which foreign pods make a node dirty.
    pub foreign_pods: ForeignPodsDetection,
    /// Which pod phases count as "on the node" for the fingerprint.
    pub informer_mode: InformerMode,
    /// Heartbeat periods an NRT's writer may miss before it counts as stopped.
    pub missed_heartbeats: u32,
}

impl CacheConfig {
    /// The cache settings of a scheduler configuration.
    pub fn from_settings(settings: &crate::config::Settings) -> Self {
        Self {
            scheduler_name: settings.scheduler_name.clone(),
            resync_period: settings.resync_period,
            max_staleness: settings.max_staleness,
            foreign_pods: settings.foreign_pods,
            informer_mode: settings.informer_mode,
            missed_heartbeats: settings.missed_heartbeats,
        }
    }

    /// Reads `spec`. A `maxStaleness` shorter than `resyncPeriod` (the CRD rejects it,
    /// a hand-written config file might not) is raised to `resyncPeriod`.
    pub fn from_spec(
        spec: &CacheSpec,
        scheduler_name: impl Into<String>,
    ) -> Result<Self, ConfigError> {
        let parse = |field, value: &str| {
            duration::parse(value).map_err(|source| ConfigError { field, source })
        };
        let resync_period = parse("resyncPeriod", &spec.resync_period)?;
        let max_staleness = parse("maxStaleness", &spec.max_staleness)?.max(resync_period);
        Ok(Self {
            scheduler_name: scheduler_name.into(),
            resync_period,
            max_staleness,
            foreign_pods: spec.foreign_pods,
            informer_mode: spec.informer_mode,
            missed_heartbeats: spec.missed_heartbeats.max(1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse_and_staleness_is_never_below_the_period() {
        let spec = CacheSpec::default();
        let config = CacheConfig::from_spec(&spec, "tas").expect("defaults parse");
        assert_eq!(config.resync_period, Duration::from_secs(5));
        assert_eq!(config.max_staleness, Duration::from_secs(120));

        let short = CacheSpec {
            max_staleness: "1s".to_owned(),
            ..CacheSpec::default()
        };
        let config = CacheConfig::from_spec(&short, "tas").expect("parses");
        assert_eq!(config.max_staleness, Duration::from_secs(5));

        let bad = CacheSpec {
            resync_period: "soon".to_owned(),
            ..CacheSpec::default()
        };
        let err = CacheConfig::from_spec(&bad, "tas").unwrap_err();
        assert_eq!(err.field, "resyncPeriod");
    }
}
