//! The whole TAS stack on a local control plane: the operator installed from
//! `config/default`, the operands it renders, and simulated NUMA nodes ([`stack`]);
//! `tas-demo` runs it for a person, the tests under `tests/` for CI.

pub mod stack;
