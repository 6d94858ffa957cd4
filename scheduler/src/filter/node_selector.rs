//! Node selector terms, parsed once per pod and matched against a node's labels and
//! name.
//!
//! Within a [`Term`] every label requirement (`matchExpressions`) and every field
//! requirement (`matchFields`) must hold; terms are ORed by the caller. Label
//! operators: `In` / `NotIn` (a missing label satisfies `NotIn`), `Exists` /
//! `DoesNotExist`, and `Gt` / `Lt`, which compare the label value and the single
//! requirement value as base-10 `i64` (a missing or non-integer label fails). Field
//! requirements support `In` / `NotIn` with exactly one value; the only node field is
//! `metadata.name`, and, as in Kubernetes, they are not checked against a node whose
//! name is empty. A term with neither list is "empty" and matches nothing.
//!
//! A requirement Kubernetes' label/field selector parser would reject (an unknown
//! operator, `In` without values, `Exists` with values, `Gt` with a non-integer, ...)
//! makes its whole term a [`SelectorError`]; callers decide what that means (a
//! required term never matches, a preferred one fails scoring).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};

/// The node field `matchFields` can select on.
const NODE_NAME_FIELD: &str = "metadata.name";

/// Why a requirement cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorProblem {
    /// The operator is not one of the supported ones for this list.
    #[error("operator {0:?} is not supported")]
    UnsupportedOperator(String),
    /// `In` / `NotIn` on a label without values.
    #[error("values must not be empty for In and NotIn")]
    NoValues,
    /// `Exists` / `DoesNotExist` with values.
    #[error("values must be empty for Exists and DoesNotExist")]
    UnexpectedValues,
    /// `Gt` / `Lt`, or a field requirement, without exactly one value.
    #[error("exactly one value is required")]
    NotOneValue,
    /// `Gt` / `Lt` with a value that is not an integer.
    #[error("value {0:?} is not an integer")]
    NotAnInteger(String),
}

/// A requirement of a node selector term that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("term {term}: requirement on {key:?}: {problem}")]
pub struct SelectorError {
    /// Index of the term in its list.
    pub term: usize,
    /// The requirement's key.
    pub key: String,
    /// What is wrong with it.
    pub problem: SelectorProblem,
}

/// One parsed label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    Gt(String, i64),
    Lt(String, i64),
}

impl LabelRequirement {
    fn parse(r: &NodeSelectorRequirement) -> Result<Self, SelectorProblem> {
        let key = r.key.clone();
        let values = r.values.as_deref().unwrap_or_default();
        let non_empty = || {
            if values.is_empty() {
                Err(SelectorProblem::NoValues)
            } else {
                Ok(values.to_vec())
            }
        };
        let no_values = || {
            if values.is_empty() {
                Ok(())
            } else {
                Err(SelectorProblem::UnexpectedValues)
            }
        };
        let integer = || match values {
            [value] => value
                .parse::<i64>()
                .map_err(|_| SelectorProblem::NotAnInteger(value.clone())),
            _ => Err(SelectorProblem::NotOneValue),
        };
        Ok(match r.operator.as_str() {
            "In" => Self::In(key, non_empty()?),
            "NotIn" => Self::NotIn(key, non_empty()?),
            "Exists" => no_values().map(|()| Self::Exists(key))?,
            "DoesNotExist" => no_values().map(|()| Self::DoesNotExist(key))?,
            "Gt" => Self::Gt(key, integer()?),
            "Lt" => Self::Lt(key, integer()?),
            other => return Err(SelectorProblem::UnsupportedOperator(other.to_owned())),
        })
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let as_integer = |key: &str| labels.get(key).and_then(|v| v.parse::<i64>().ok());
        match self {
            Self::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Self::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Self::Exists(key) => labels.contains_key(key),
            Self::DoesNotExist(key) => !labels.contains_key(key),
            Self::Gt(key, bound) => as_integer(key).is_some_and(|v| v > *bound),
            Self::Lt(key, bound) => as_integer(key).is_some_and(|v| v < *bound),
        }
    }
}

/// One parsed field requirement: the field equals (`In`) or differs from (`NotIn`)
/// the value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    key: String,
    value: String,
    equal: bool,
}

impl FieldRequirement {
    fn parse(r: &NodeSelectorRequirement) -> Result<Self, SelectorProblem> {
        let equal = match r.operator.as_str() {
            "In" => true,
            "NotIn" => false,
            other => return Err(SelectorProblem::UnsupportedOperator(other.to_owned())),
        };
        match r.values.as_deref() {
            Some([value]) => Ok(Self {
                key: r.key.clone(),
                value: value.clone(),
                equal,
            }),
            _ => Err(SelectorProblem::NotOneValue),
        }
    }

    fn matches(&self, node_name: &str) -> bool {
        // Unknown fields read as empty, like a missing key in a field set.
        let field = if self.key == NODE_NAME_FIELD {
            node_name
        } else {
            ""
        };
        (field == self.value) == self.equal
    }
}

/// A parsed, non-empty node selector term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    labels: Vec<LabelRequirement>,
    fields: Vec<FieldRequirement>,
}

impl Term {
    /// Parses term number `index`; `Ok(None)` for an empty term (which matches
    /// nothing).
    pub fn parse(index: usize, term: &NodeSelectorTerm) -> Result<Option<Self>, SelectorError> {
        let expressions = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        if expressions.is_empty() && fields.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self {
            labels: parse_all(index, expressions, LabelRequirement::parse)?,
            fields: parse_all(index, fields, FieldRequirement::parse)?,
        }))
    }

    /// Whether a node with these labels and this name satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
        self.labels.iter().all(|r| r.matches(labels))
            && (node_name.is_empty() || self.fields.iter().all(|r| r.matches(node_name)))
    }
}

fn parse_all<T>(
    term: usize,
    requirements: &[NodeSelectorRequirement],
    parse: fn(&NodeSelectorRequirement) -> Result<T, SelectorProblem>,
) -> Result<Vec<T>, SelectorError> {
    requirements
        .iter()
        .map(|r| {
            parse(r).map_err(|problem| SelectorError {
                term,
                key: r.key.clone(),
                problem,
            })
        })
        .collect()
}
