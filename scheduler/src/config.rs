//! The scheduler's configuration: the file the operator renders
//! ([`tas_api::config::scheduler::SchedulerConfig`]), validated into typed settings with
//! errors that name the field.

use std::path::Path;
use std::time::Duration;
use tas_api::config::scheduler::{MAX_DECISION_HISTORY, SchedulerConfig};
use tas_api::tas::{DraAlignment, ForeignPodsDetection, InformerMode, NodesWithoutTopology};

use crate::numa::{ScoreConfig, ScoringStrategy};

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading scheduler config {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML for the config type.
    #[error("scheduler config {path}: {source}")]
    Parse {
        path: String,
        #[source]
        source: serde_norway::Error,
    },
    /// A field has a bad value.
    #[error("scheduler config field {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Pods with this `spec.schedulerName` are ours.
    pub scheduler_name: String,
    /// Node scoring.
    pub score: ScoreConfig,
    /// Reserve-cache resync period.
    pub resync_period: Duration,
    /// Longest a node may stay pessimistic.
    pub max_staleness: Duration,
    /// Which foreign pods make a node untrusted.
    pub foreign_pods: ForeignPodsDetection,
    /// Which pod phases count as present on a node.
    pub informer_mode: InformerMode,
    /// Heartbeat periods an NRT's writer may miss before it counts as stopped.
    pub missed_heartbeats: u32,
    /// Nodes without an NRT.
    pub nodes_without_topology: NodesWithoutTopology,
    /// Worker threads for filtering nodes.
    pub parallelism: usize,
    /// First retry delay of an unschedulable pod.
    pub backoff_initial: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// Leader election: always on, one replica too (see [`LeaderElectionSettings`]).
    pub leader_election: LeaderElectionSettings,
    /// Evict lower-priority pods for a pod that fits nowhere.
    pub preemption: bool,
    /// The TAS node groups' node selectors: a node they select is not trusted without
    /// an NRT.
    pub node_groups: Vec<tas_api::labels::Selector>,
    /// Percentage of nodes to find feasible per cycle (0: adaptive; see
    /// [`crate::cycle::Sampling`]).
    pub percentage_of_nodes_to_score: u32,
    /// Whether DRA devices must sit in the NUMA zones of a pod's exclusive CPUs and
    /// memory, or only score higher there (see [`crate::cycle::dra`]).
    pub dra_alignment: DraAlignment,
    /// Scheduling attempts kept for `GET /debug/decisions` (0: none).
    pub decision_history: usize,
}

/// Validated leader-election settings.
///
/// The scheduler always takes the Lease, even as the only replica: an evicted but
/// still running pod and its replacement, or the old and new pods while `replicas`
/// changes, must never bind side by side. `leaderElection.enabled` is accepted for
/// compatibility and ignored.
#[derive(Debug, Clone)]
pub struct LeaderElectionSettings {
    /// Lease name.
    pub lease_name: String,
    /// Lease namespace (None: the pod's namespace).
    pub lease_namespace: Option<String>,
    /// Lease validity.
    pub lease_duration: Duration,
    /// Renewal interval.
    pub renew_period: Duration,
}

impl LeaderElectionSettings {
    /// The longest a bind or an eviction may take: a sixth of the lease duration
    /// (2.5 s with the defaults). A write starts only while this process stays leader
    /// for longer than that (`LeaderStatus::leads_for`) and is abandoned after it, so
    /// every write ends before the renew deadline (two thirds of the lease duration
    /// after the last successful renewal started), well before another replica may
    /// take over. A sixth leaves writes open between renewals even with the longest
    /// renew period allowed (half the lease duration).
    pub fn write_timeout(&self) -> Duration {
        tas_runtime::lease::write_margin(self.lease_duration)
    }
}

impl Settings {
    /// Whether a node with these labels is in a TAS node group.
    pub fn in_node_group(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        self.node_groups.iter().any(|s| s.matches(labels))
    }

    /// Read and validate a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let raw: SchedulerConfig =
            serde_norway::from_str(&text).map_err(|source| ConfigError::Parse {
                path: path.display().to_string(),
                source,
            })?;
        Self::from_config(&raw)
    }

    /// Validate a parsed config.
    pub fn from_config(c: &SchedulerConfig) -> Result<Self, ConfigError> {
        let name = &c.scheduler_name;
        let dns_label = !name.is_empty()
            && name.len() <= 63
            && name
                .chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-')
            && !name.starts_with('-')
            && !name.ends_with('-');
        if !dns_label {
            return Err(ConfigError::Invalid {
                field: "schedulerName",
                reason: format!("{name:?} is not a DNS-1123 label"),
            });
        }
        let mut score = ScoreConfig::new(match c.scoring.strategy {
            tas_api::tas::ScoringStrategy::LeastAllocated => ScoringStrategy::LeastAllocated,
            tas_api::tas::ScoringStrategy::MostAllocated => ScoringStrategy::MostAllocated,
            tas_api::tas::ScoringStrategy::BalancedAllocation => {
                ScoringStrategy::BalancedAllocation
            }
            tas_api::tas::ScoringStrategy::LeastNUMANodes => ScoringStrategy::LeastNumaNodes,
            tas_api::tas::ScoringStrategy::FragmentationAware => {
                ScoringStrategy::FragmentationAware
            }
        });
        if c.scoring.resources.is_empty() {
            return Err(ConfigError::Invalid {
                field: "scoring.resources",
                reason: "at least one resource is needed".into(),
            });
        }
        score.weights.clear();
        for r in &c.scoring.resources {
            if !(1..=100).contains(&r.weight) {
                return Err(ConfigError::Invalid {
                    field: "scoring.resources[].weight",
                    reason: format!("{} has weight {}; weights are 1 to 100", r.name, r.weight),
                });
            }
            score.weights.push((r.name.clone(), i64::from(r.weight)));
        }
        let resync_period = duration("cache.resyncPeriod", &c.cache.resync_period)?;
        let max_staleness = duration("cache.maxStaleness", &c.cache.max_staleness)?;
        if resync_period < Duration::from_secs(1) {
            return Err(ConfigError::Invalid {
                field: "cache.resyncPeriod",
                reason: "must be at least 1s".into(),
            });
        }
        if max_staleness < resync_period {
            return Err(ConfigError::Invalid {
                field: "cache.maxStaleness",
                reason: "must be at least cache.resyncPeriod".into(),
            });
        }
        let backoff_initial = duration("backoff.initial", &c.backoff.initial)?;
        let backoff_max = duration("backoff.max", &c.backoff.max)?;
        if backoff_initial.is_zero() || backoff_max < backoff_initial {
            return Err(ConfigError::Invalid {
                field: "backoff",
                reason: "initial must be > 0 and max >= initial".into(),
            });
        }
        let leader_election = {
            let le = &c.leader_election;
            let lease_duration = duration("leaderElection.leaseDuration", &le.lease_duration)?;
            let renew_period = duration("leaderElection.renewPeriod", &le.renew_period)?;
            if lease_duration < Duration::from_secs(1) || lease_duration.subsec_nanos() != 0 {
                return Err(ConfigError::Invalid {
                    field: "leaderElection.leaseDuration",
                    reason: "must be a whole number of seconds, at least 1s".into(),
                });
            }
            if renew_period.is_zero() || renew_period * 2 > lease_duration {
                return Err(ConfigError::Invalid {
                    field: "leaderElection.renewPeriod",
                    reason: "must be > 0 and at most half of leaseDuration".into(),
                });
            }
            LeaderElectionSettings {
                lease_name: le.lease_name.clone(),
                lease_namespace: le.lease_namespace.clone(),
                lease_duration,
                renew_period,
            }
        };
        let node_groups = c
            .node_groups
            .iter()
            .map(tas_api::labels::Selector::parse)
            .collect::<Result<_, _>>()
            .map_err(|e| ConfigError::Invalid {
                field: "nodeGroups",
                reason: e.to_string(),
            })?;
        if c.percentage_of_nodes_to_score > 100 {
            return Err(ConfigError::Invalid {
                field: "percentageOfNodesToScore",
                reason: format!("{} is over 100", c.percentage_of_nodes_to_score),
            });
        }
        if c.decision_history > MAX_DECISION_HISTORY {
            return Err(ConfigError::Invalid {
                field: "decisionHistory",
                reason: format!("{} is over {MAX_DECISION_HISTORY}", c.decision_history),
            });
        }
        let parallelism = match c.parallelism {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n as usize,
        };
        Ok(Self {
            scheduler_name: name.clone(),
            score,
            resync_period,
            max_staleness,
            foreign_pods: c.cache.foreign_pods,
            informer_mode: c.cache.informer_mode,
            missed_heartbeats: c.cache.missed_heartbeats.max(1),
            nodes_without_topology: c.nodes_without_topology,
            parallelism,
            backoff_initial,
            backoff_max,
            leader_election,
            preemption: c.preemption.enabled,
            node_groups,
            percentage_of_nodes_to_score: c.percentage_of_nodes_to_score,
            dra_alignment: c.dra_alignment,
            decision_history: c.decision_history as usize,
        })
    }
}

fn duration(field: &'static str, value: &str) -> Result<Duration, ConfigError> {
    tas_api::duration::parse(value).map_err(|e| ConfigError::Invalid {
        field,
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Settings, ConfigError> {
        Settings::from_config(&serde_norway::from_str(yaml).expect("yaml"))
    }

    #[test]
    fn defaults_are_valid() {
        let s = parse("{}").unwrap();
        assert_eq!(s.scheduler_name, "topology-aware-scheduler");
        assert_eq!(s.resync_period, Duration::from_secs(5));
        assert_eq!(s.leader_election.lease_name, "tas-scheduler");
        assert_eq!(
            s.leader_election.write_timeout(),
            Duration::from_millis(2500)
        );
        assert!(s.parallelism >= 1);
        assert!(s.preemption, "preemption is on unless switched off");
        assert!(!parse("preemption: {enabled: false}").unwrap().preemption);
        assert_eq!(s.dra_alignment, DraAlignment::Required);
        let preferred = parse("draAlignment: Preferred").unwrap();
        assert_eq!(preferred.dra_alignment, DraAlignment::Preferred);
        assert_eq!(s.decision_history, 512);
        assert_eq!(parse("decisionHistory: 0").unwrap().decision_history, 0);
    }

    #[test]
    fn node_groups_select_nodes_by_label() {
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|&(k, v)| (k.to_owned(), v.to_owned()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        assert!(!parse("{}").unwrap().in_node_group(&labels(&[])));
        let s = parse("nodeGroups: [{matchLabels: {tas: numa}}]").unwrap();
        assert!(s.in_node_group(&labels(&[("tas", "numa")])));
        assert!(!s.in_node_group(&labels(&[("tas", "other")])));
        let all = parse("nodeGroups: [{}]").unwrap();
        assert!(all.in_node_group(&labels(&[])));
        let bad = "nodeGroups: [{matchExpressions: [{key: a, operator: Bogus}]}]";
        assert!(matches!(
            parse(bad),
            Err(ConfigError::Invalid {
                field: "nodeGroups",
                ..
            })
        ));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("schedulerName: Bad_Name", "schedulerName"),
            ("cache: {resyncPeriod: 100ms}", "cache.resyncPeriod"),
            (
                "cache: {resyncPeriod: 10s, maxStaleness: 5s}",
                "cache.maxStaleness",
            ),
            ("cache: {resyncPeriod: forever}", "cache.resyncPeriod"),
            (
                "scoring: {resources: [{name: cpu, weight: 0}]}",
                "scoring.resources[].weight",
            ),
            ("backoff: {initial: 10s, max: 1s}", "backoff"),
            ("decisionHistory: 100001", "decisionHistory"),
            (
                "leaderElection: {enabled: true, leaseDuration: 4s, renewPeriod: 3s}",
                "leaderElection.renewPeriod",
            ),
        ];
        for (yaml, field) in cases {
            let e = parse(yaml).expect_err(yaml);
            assert!(e.to_string().contains(field), "{yaml}: {e}");
        }
    }

    #[test]
    fn leader_election_is_always_on() {
        for yaml in [
            "leaderElection: {enabled: true, leaseNamespace: tas}",
            "leaderElection: {enabled: false, leaseNamespace: tas}",
            "leaderElection: {leaseNamespace: tas}",
        ] {
            let le = parse(yaml).unwrap().leader_election;
            assert_eq!(le.lease_namespace.as_deref(), Some("tas"), "{yaml}");
            assert_eq!(le.lease_duration, Duration::from_secs(15), "{yaml}");
        }
    }
}
