//! The whole TAS stack on a local control plane: the operator installed from
//! `config/default`, the operands it renders, and simulated NUMA nodes ([`stack`]);
//! `tas-demo` runs it for a person, the tests under `tests/` for CI. [`chart`] generates
//! the Helm chart from the kustomize tree (`make chart`).

pub mod chart;
pub mod stack;
