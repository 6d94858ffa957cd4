//! `tas-operator`: reconciles the TopologyAwareScheduling object.
//!
//! [`build`] turns the object (plus observed facts such as the operator's default images)
//! into the desired Kubernetes objects with pure functions.

pub mod build;
