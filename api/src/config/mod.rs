//! Contracts between the operator and its operands: the node agent's command line and the
//! scheduler's configuration file. The operator renders them from the
//! TopologyAwareScheduling object; the operands parse them. Keeping both sides on these
//! types means a setting cannot be rendered in a form the operand does not read.

pub mod kubelet_mounts;
pub mod scheduler;
pub mod updater;
