//! `TaintToleration`: taints repel pods that do not tolerate them.
//!
//! A toleration tolerates a taint when its effect is empty or equal to the taint's,
//! its key is empty or equal to the taint's, and its operator is `Exists`, or `Equal`
//! (the default) with an equal value. So `{operator: Exists}` with no key tolerates
//! every taint. The filter rejects a node with a `NoSchedule` or `NoExecute` taint the
//! pod does not tolerate, naming the first one in the node's order; `PreferNoSchedule`
//! only lowers the score: [`score`] counts such taints the pod does not tolerate, and
//! [`super::score::normalize`] with `reverse` turns the counts into 0..=100, fewer
//! being better.

use k8s_openapi::api::core::v1::{Taint, Toleration};

use super::node::NodeInfo;
use super::pod::PodFilterInput;
use super::reason::FilterReason;

/// What a taint does to pods that do not tolerate it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaintEffect {
    /// New pods are not scheduled.
    NoSchedule,
    /// The scheduler avoids the node when it can.
    PreferNoSchedule,
    /// New pods are not scheduled and running ones are evicted.
    NoExecute,
    /// An effect this scheduler does not know; only an equal effect (or an empty
    /// toleration effect) matches it.
    Other(Box<str>),
}

impl TaintEffect {
    /// Parses an effect name.
    pub fn parse(effect: &str) -> Self {
        match effect {
            "NoSchedule" => Self::NoSchedule,
            "PreferNoSchedule" => Self::PreferNoSchedule,
            "NoExecute" => Self::NoExecute,
            other => Self::Other(other.into()),
        }
    }

    /// Whether the filter enforces this effect.
    fn blocks_scheduling(&self) -> bool {
        matches!(self, Self::NoSchedule | Self::NoExecute)
    }
}

/// A node taint, parsed once per node update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTaint {
    /// The taint key.
    pub key: String,
    /// The taint value (empty when unset).
    pub value: String,
    /// The effect.
    pub effect: TaintEffect,
}

impl NodeTaint {
    /// Parses a `spec.taints` entry.
    pub fn new(taint: &Taint) -> Self {
        Self {
            key: taint.key.clone(),
            value: taint.value.clone().unwrap_or_default(),
            effect: TaintEffect::parse(&taint.effect),
        }
    }
}

/// How a toleration compares values.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Operator {
    /// `Equal` or empty: the values must be equal.
    Equal,
    /// `Exists`: any value.
    Exists,
    /// Anything else tolerates nothing.
    Unsupported,
}

/// A pod toleration, parsed once per pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodToleration {
    key: String,
    operator: Operator,
    value: String,
    /// `None` matches every effect.
    effect: Option<TaintEffect>,
}

impl PodToleration {
    /// Parses a `spec.tolerations` entry.
    pub fn new(toleration: &Toleration) -> Self {
        let operator = match toleration.operator.as_deref() {
            None | Some("" | "Equal") => Operator::Equal,
            Some("Exists") => Operator::Exists,
            Some(_) => Operator::Unsupported,
        };
        Self {
            key: toleration.key.clone().unwrap_or_default(),
            operator,
            value: toleration.value.clone().unwrap_or_default(),
            effect: toleration
                .effect
                .as_deref()
                .filter(|e| !e.is_empty())
                .map(TaintEffect::parse),
        }
    }

    /// Whether this toleration tolerates `taint`.
    pub fn tolerates(&self, taint: &NodeTaint) -> bool {
        if self.effect.as_ref().is_some_and(|e| *e != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator {
            Operator::Equal => self.value == taint.value,
            Operator::Exists => true,
            Operator::Unsupported => false,
        }
    }
}

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerated(tolerations: &[PodToleration], taint: &NodeTaint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// Fails on the first `NoSchedule`/`NoExecute` taint of the node the pod does not
/// tolerate.
pub fn filter(pod: &PodFilterInput, node: &NodeInfo) -> Result<(), FilterReason> {
    let untolerated = node
        .taints()
        .iter()
        .find(|t| t.effect.blocks_scheduling() && !tolerated(pod.tolerations(), t));
    match untolerated {
        None => Ok(()),
        Some(taint) => Err(FilterReason::UntoleratedTaint {
            key: taint.key.clone(),
            value: taint.value.clone(),
        }),
    }
}

/// The number of `PreferNoSchedule` taints of the node the pod does not tolerate:
/// kube-scheduler's raw `TaintToleration` score, to normalize in reverse.
pub fn score(pod: &PodFilterInput, node: &NodeInfo) -> i64 {
    let count = node
        .taints()
        .iter()
        .filter(|t| t.effect == TaintEffect::PreferNoSchedule && !tolerated(pod.tolerations(), t))
        .count();
    i64::try_from(count).unwrap_or(i64::MAX)
}
