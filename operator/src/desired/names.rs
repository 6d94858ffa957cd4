//! Stable names of the objects a stack is made of, and the label keys the operator
//! selects them by.
//!
//! Names are part of the operator's contract with admins (`kubectl -n tas-system logs
//! deploy/tas-scheduler`) and with itself across upgrades (it finds and prunes objects by
//! name and labels), so they live here as constants rather than inline strings.

/// ServiceAccount (and ClusterRole, ClusterRoleBinding) of the node agents.
pub const UPDATER_SERVICE_ACCOUNT: &str = "tas-updater";
/// ClusterRole of the node agents.
pub const UPDATER_CLUSTER_ROLE: &str = "tas-updater";
/// Prefix of the per-node-group DaemonSets; see [`updater_daemonset_name`].
pub const UPDATER_DAEMONSET_PREFIX: &str = "tas-updater-";
/// Service in front of every node agent's `/metrics`.
pub const UPDATER_METRICS_SERVICE: &str = "tas-updater-metrics";
/// Name of the node agent container in its pods.
pub const UPDATER_CONTAINER: &str = "updater";

/// ServiceAccount (and ClusterRole, ClusterRoleBinding) of the scheduler.
pub const SCHEDULER_SERVICE_ACCOUNT: &str = "tas-scheduler";
/// ClusterRole of the scheduler.
pub const SCHEDULER_CLUSTER_ROLE: &str = "tas-scheduler";
/// Role (and RoleBinding) for the scheduler's leader-election Lease; only with replicas > 1.
pub const SCHEDULER_LEADER_ELECTION_ROLE: &str = "tas-scheduler-leader-election";
/// ConfigMap holding the scheduler's configuration file.
pub const SCHEDULER_CONFIG_MAP: &str = "tas-scheduler-config";
/// The scheduler Deployment.
pub const SCHEDULER_DEPLOYMENT: &str = "tas-scheduler";
/// Service in front of the scheduler replicas' `/metrics`.
pub const SCHEDULER_METRICS_SERVICE: &str = "tas-scheduler-metrics";
/// Name of the scheduler container in its pods.
pub const SCHEDULER_CONTAINER: &str = "scheduler";
/// Directory the scheduler's ConfigMap is mounted at.
pub const SCHEDULER_CONFIG_DIR: &str = "/etc/tas-scheduler";

/// Name of the container port serving `/healthz`, `/readyz` and `/metrics`.
pub const HTTP_PORT_NAME: &str = "https";

/// Pod-template annotation holding a hash of the settings the pods run with: when the
/// settings change, the template changes and the pods roll.
pub const CONFIG_HASH_ANNOTATION: &str = "tas.dev/config-hash";

/// `app.kubernetes.io/managed-by`: always [`MANAGED_BY`].
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "tas-operator";
/// `app.kubernetes.io/part-of`: always [`PART_OF`].
pub const PART_OF_LABEL: &str = "app.kubernetes.io/part-of";
/// Value of [`PART_OF_LABEL`].
pub const PART_OF: &str = "tas";
/// `app.kubernetes.io/component`: see [`Component`](super::Component).
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// `app.kubernetes.io/name`: on pods only, the workload's name; part of pod selectors.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// `tas.dev/stack`: name of the TopologyAwareScheduling object the object belongs to.
pub const STACK_LABEL: &str = "tas.dev/stack";
/// `tas.dev/node-group`: on a node agent DaemonSet and its pods, the group's name.
pub const NODE_GROUP_LABEL: &str = "tas.dev/node-group";

/// Name of the node agent DaemonSet of a node group: `tas-updater-<group>`.
pub fn updater_daemonset_name(group: &str) -> String {
    format!("{UPDATER_DAEMONSET_PREFIX}{group}")
}

/// NetworkPolicy of the node agent pods (`spec.networkPolicy`).
pub const UPDATER_NETWORK_POLICY: &str = "tas-updater";
/// NetworkPolicy of the scheduler pods (`spec.networkPolicy`).
pub const SCHEDULER_NETWORK_POLICY: &str = "tas-scheduler";
