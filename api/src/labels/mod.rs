//! Label selectors (`metav1.LabelSelector`) parsed once and matched against label maps.
//!
//! The operator matches node-group selectors against node labels (membership, overlap
//! check) and turns them into DaemonSet node affinity; the scheduler matches the pod
//! selectors of affinity terms, topology spread constraints and PodDisruptionBudgets,
//! and the namespace selectors of affinity terms. Semantics are the API's:
//!
//! - every `matchLabels` entry and every `matchExpressions` requirement must hold (AND);
//! - `In`: the label exists and its value is one of the values;
//! - `NotIn`: the label is missing, or its value is none of the values;
//! - `Exists` / `DoesNotExist`: only the key matters, and they take no values;
//! - an empty selector (`{}`) selects everything.
//!
//! [`Selector::parse`] refuses what the API server's parser refuses (unknown operators,
//! `In` without values, `Exists` with values) with a [`SelectorError`] saying why.
//! [`Selector::parse_or_nothing`] is for selectors on someone else's objects: an absent
//! or unusable one selects nothing, which is what kube-scheduler ends up doing with it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use std::collections::BTreeMap;

/// Why a label selector is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// `In` / `NotIn` with an empty value list.
    #[error("matchExpressions key '{key}': operator {operator} needs at least one value")]
    MissingValues {
        /// The requirement's key.
        key: String,
        /// `In` or `NotIn`.
        operator: String,
    },
    /// `Exists` / `DoesNotExist` with values.
    #[error("matchExpressions key '{key}': operator {operator} takes no values")]
    UnexpectedValues {
        /// The requirement's key.
        key: String,
        /// `Exists` or `DoesNotExist`.
        operator: String,
    },
    /// Anything but the four label-selector operators.
    #[error(
        "matchExpressions key '{key}': unknown operator '{operator}' (a label selector accepts In, NotIn, Exists, DoesNotExist)"
    )]
    UnknownOperator {
        /// The requirement's key.
        key: String,
        /// The operator as written.
        operator: String,
    },
}

/// A requirement's operator, with its values where it has some (in the order written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    /// The label exists and has one of the values.
    In(Vec<String>),
    /// The label is missing or has none of the values.
    NotIn(Vec<String>),
    /// The label exists.
    Exists,
    /// The label is missing.
    DoesNotExist,
}

impl Operator {
    /// The operator's name in the API (`In`, `NotIn`, `Exists`, `DoesNotExist`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::In(_) => "In",
            Self::NotIn(_) => "NotIn",
            Self::Exists => "Exists",
            Self::DoesNotExist => "DoesNotExist",
        }
    }

    /// The values (empty for `Exists` / `DoesNotExist`).
    pub fn values(&self) -> &[String] {
        match self {
            Self::In(values) | Self::NotIn(values) => values,
            Self::Exists | Self::DoesNotExist => &[],
        }
    }
}

/// One requirement of a selector: a key and an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// What the label's value must be.
    pub operator: Operator,
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match &self.operator {
            Operator::In(values) => value.is_some_and(|v| values.contains(v)),
            Operator::NotIn(values) => value.is_none_or(|v| !values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }

    fn parse(e: &LabelSelectorRequirement) -> Result<Self, SelectorError> {
        let values = e.values.clone().unwrap_or_default();
        let operator = match (e.operator.as_str(), values.is_empty()) {
            ("In", false) => Operator::In(values),
            ("NotIn", false) => Operator::NotIn(values),
            ("Exists", true) => Operator::Exists,
            ("DoesNotExist", true) => Operator::DoesNotExist,
            ("In" | "NotIn", true) => {
                return Err(SelectorError::MissingValues {
                    key: e.key.clone(),
                    operator: e.operator.clone(),
                });
            }
            ("Exists" | "DoesNotExist", false) => {
                return Err(SelectorError::UnexpectedValues {
                    key: e.key.clone(),
                    operator: e.operator.clone(),
                });
            }
            _ => {
                return Err(SelectorError::UnknownOperator {
                    key: e.key.clone(),
                    operator: e.operator.clone(),
                });
            }
        };
        Ok(Self {
            key: e.key.clone(),
            operator,
        })
    }
}

/// A parsed label selector; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// Every requirement must hold (an empty list selects everything); `None` selects
    /// nothing.
    requirements: Option<Vec<Requirement>>,
}

impl Default for Selector {
    /// The empty selector, which selects everything.
    fn default() -> Self {
        Self::everything()
    }
}

impl Selector {
    /// Selects every label set.
    pub fn everything() -> Self {
        Self {
            requirements: Some(Vec::new()),
        }
    }

    /// Selects no label set.
    pub fn nothing() -> Self {
        Self { requirements: None }
    }

    /// Parses `selector`, checking each expression's operator and values. The
    /// requirements keep the API's order: `matchLabels` (by key), then
    /// `matchExpressions` as written.
    pub fn parse(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let labels = selector.match_labels.iter().flatten().map(|(key, value)| {
            Ok(Requirement {
                key: key.clone(),
                operator: Operator::In(vec![value.clone()]),
            })
        });
        let expressions = selector
            .match_expressions
            .iter()
            .flatten()
            .map(Requirement::parse);
        Ok(Self {
            requirements: Some(labels.chain(expressions).collect::<Result<_, _>>()?),
        })
    }

    /// Parses a selector found on another object: an absent (`None`) or invalid one
    /// selects nothing.
    pub fn parse_or_nothing(selector: Option<&LabelSelector>) -> Self {
        selector
            .and_then(|s| Self::parse(s).ok())
            .unwrap_or_else(Self::nothing)
    }

    /// Whether `labels` satisfy every requirement (always true for an empty selector,
    /// never for [`Selector::nothing`]).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements
            .as_ref()
            .is_some_and(|reqs| reqs.iter().all(|r| r.matches(labels)))
    }

    /// Whether the selector has no requirement (selects everything).
    pub fn is_everything(&self) -> bool {
        self.requirements.as_ref().is_some_and(Vec::is_empty)
    }

    /// The requirements, in the order of [`Selector::parse`]; none for a selector that
    /// selects nothing.
    pub fn requirements(&self) -> &[Requirement] {
        self.requirements.as_deref().unwrap_or_default()
    }

    /// Adds `key In (value)` for every key of `keys` the pod carries (`matchLabelKeys`):
    /// the API server does the same merge when it admits the pod, so adding it again
    /// changes nothing; keys the pod lacks are ignored.
    pub fn require_equal(&mut self, keys: &[String], pod_labels: &BTreeMap<String, String>) {
        self.merge(keys, pod_labels, |v| Operator::In(vec![v]));
    }

    /// Adds `key NotIn (value)` for every key of `keys` the pod carries
    /// (`mismatchLabelKeys`).
    pub fn require_different(&mut self, keys: &[String], pod_labels: &BTreeMap<String, String>) {
        self.merge(keys, pod_labels, |v| Operator::NotIn(vec![v]));
    }

    fn merge(
        &mut self,
        keys: &[String],
        pod_labels: &BTreeMap<String, String>,
        operator: impl Fn(String) -> Operator,
    ) {
        let Some(reqs) = self.requirements.as_mut() else {
            return;
        };
        for key in keys {
            if let Some(value) = pod_labels.get(key) {
                let r = Requirement {
                    key: key.clone(),
                    operator: operator(value.clone()),
                };
                if !reqs.contains(&r) {
                    reqs.push(r);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
