//! The whole TAS stack on a local control plane: the operator installed from
//! `config/default`, the operands it renders, and simulated NUMA nodes ([`stack`]);
//! `tas-demo` runs it for a person, the tests under `tests/` for CI; [`in_process`] is a
//! lighter stack (nodes, agents and a scheduler in the test's process, no operator).
//! [`chart`] generates
//! the Helm chart from the kustomize tree (`make chart`); [`otelcol`] runs a real
//! OpenTelemetry Collector for the tests that check what the stack exports, and
//! [`prometheus`] a real Prometheus server for those that query what it scrapes, over
//! TLS verified with certificates from [`serving_certs`]; [`real_node`] installs TAS on
//! real nodes.

pub mod chart;
pub mod dra;
pub mod in_process;
pub mod otelcol;
pub mod prometheus;
pub mod real_node;
pub mod serving_certs;
pub mod stack;
