//! ServiceAccounts and least-privilege RBAC of the operands.
//!
//! Each rule says why the operand needs it; anything not listed is denied. Cluster-wide
//! rules are ClusterRoles (NodeResourceTopology objects, nodes and pods live everywhere);
//! the scheduler's leader-election Lease lives in the operands' namespace only, so it is
//! a Role, and only exists when leader election is on.

use super::meta::{Component, Stack};
use super::names::{
    SCHEDULER_CLUSTER_ROLE, SCHEDULER_LEADER_ELECTION_ROLE, SCHEDULER_SERVICE_ACCOUNT,
    UPDATER_CLUSTER_ROLE, UPDATER_SERVICE_ACCOUNT,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use tas_api::config::scheduler::LeaderElection;

const CORE: &str = "";
const NRT_GROUP: &str = "topology.node.k8s.io";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const DRA_GROUP: &str = "resource.k8s.io";

/// The RBAC objects of the stack.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rbac {
    pub service_accounts: Vec<ServiceAccount>,
    pub cluster_roles: Vec<ClusterRole>,
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    pub roles: Vec<Role>,
    pub role_bindings: Vec<RoleBinding>,
}

/// RBAC for both operands. `leader_election` is the scheduler's rendered setting: the
/// Lease Role exists only when it is enabled, and is limited to its Lease.
pub(crate) fn rbac(stack: &Stack, leader_election: &LeaderElection) -> Rbac {
    let mut out = Rbac {
        service_accounts: vec![
            service_account(stack, UPDATER_SERVICE_ACCOUNT, Component::Updater),
            service_account(stack, SCHEDULER_SERVICE_ACCOUNT, Component::Scheduler),
        ],
        cluster_roles: vec![
            cluster_role(
                stack,
                UPDATER_CLUSTER_ROLE,
                Component::Updater,
                updater_rules(),
            ),
            cluster_role(
                stack,
                SCHEDULER_CLUSTER_ROLE,
                Component::Scheduler,
                scheduler_rules(),
            ),
        ],
        cluster_role_bindings: vec![
            cluster_role_binding(
                stack,
                UPDATER_CLUSTER_ROLE,
                UPDATER_SERVICE_ACCOUNT,
                Component::Updater,
            ),
            cluster_role_binding(
                stack,
                SCHEDULER_CLUSTER_ROLE,
                SCHEDULER_SERVICE_ACCOUNT,
                Component::Scheduler,
            ),
        ],
        roles: Vec::new(),
        role_bindings: Vec::new(),
    };
    if leader_election.enabled {
        out.roles.push(Role {
            metadata: stack.namespaced_meta(SCHEDULER_LEADER_ELECTION_ROLE, Component::Scheduler),
            rules: Some(leader_election_rules(&leader_election.lease_name)),
        });
        out.role_bindings.push(RoleBinding {
            metadata: stack.namespaced_meta(SCHEDULER_LEADER_ELECTION_ROLE, Component::Scheduler),
            role_ref: role_ref("Role", SCHEDULER_LEADER_ELECTION_ROLE),
            subjects: Some(vec![subject(
                stack,
                SCHEDULER_SERVICE_ACCOUNT,
                Component::Scheduler,
            )]),
        });
    }
    out
}

/// The node agent: publishes its node's NodeResourceTopology. It reads no pods from the
/// API server: it learns of the pods on its node from the kubelet's podresources API.
fn updater_rules() -> Vec<PolicyRule> {
    vec![
        // Publish the node's NRT object with server-side apply (create on first publish,
        // patch on change) and read it back to skip unchanged writes.
        rule(
            NRT_GROUP,
            &["noderesourcetopologies"],
            &["get", "list", "watch", "create", "update", "patch"],
        ),
        // Read its own Node for the uid of the NRT object's owner reference, so the NRT
        // object is garbage-collected with the node.
        rule(CORE, &["nodes"], &["get"]),
    ]
    .into_iter()
    .chain(metrics_auth_rules())
    .collect()
}

/// Both operands authorise the scrapers of their HTTPS `/metrics` with the API server:
/// who is the bearer token's user (TokenReview), may it `get` `/metrics`
/// (SubjectAccessReview). Neither verb reads or changes anything stored.
pub(crate) fn metrics_auth_rules() -> Vec<PolicyRule> {
    vec![
        rule("authentication.k8s.io", &["tokenreviews"], &["create"]),
        rule(
            "authorization.k8s.io",
            &["subjectaccessreviews"],
            &["create"],
        ),
    ]
}

/// The scheduler: everything a kube-scheduler-like binder needs, and nothing else.
fn scheduler_rules() -> Vec<PolicyRule> {
    vec![
        // The scheduling queue and the node-usage view are built from all pods.
        rule(CORE, &["pods"], &["get", "list", "watch"]),
        // Binding a pod to its node is the scheduler's one write to pods.
        rule(CORE, &["pods/binding"], &["create"]),
        // Set the PodScheduled=False condition that explains why a pod is pending.
        rule(CORE, &["pods/status"], &["patch", "update"]),
        // Preemption evicts victims through the eviction API (honours PDBs).
        rule(CORE, &["pods/eviction"], &["create"]),
        // Node-level fit: allocatable, taints, labels, unschedulable.
        rule(CORE, &["nodes"], &["get", "list", "watch"]),
        // Per-NUMA-zone availability, read from a watch cache, never written.
        rule(
            NRT_GROUP,
            &["noderesourcetopologies"],
            &["get", "list", "watch"],
        ),
        // An Event per unschedulable pod naming each node's reason; both the events.k8s.io
        // and the core API, since event recorders use either.
        rule("events.k8s.io", &["events"], &["create", "patch"]),
        rule(CORE, &["events"], &["create", "patch"]),
        // Preemption prefers victims whose PodDisruptionBudget allows the disruption.
        rule(
            "policy",
            &["poddisruptionbudgets"],
            &["get", "list", "watch"],
        ),
        // Inter-pod (anti-)affinity terms may select namespaces by label.
        rule(CORE, &["namespaces"], &["list", "watch"]),
        // Volume filters: a bound claim's PersistentVolume node affinity and zone labels,
        // ReadWriteOncePod claims, and whether an unbound claim's class waits for its
        // first consumer. Read only: the scheduler never binds or provisions volumes.
        rule(
            CORE,
            &["persistentvolumeclaims", "persistentvolumes"],
            &["get", "list", "watch"],
        ),
        rule(
            "storage.k8s.io",
            &["storageclasses"],
            &["get", "list", "watch"],
        ),
        // Dynamic Resource Allocation: the devices of every node and their classes, from
        // watch caches, to allocate pods' resource claims. Read only.
        rule(
            DRA_GROUP,
            &["resourceslices", "deviceclasses"],
            &["get", "list", "watch"],
        ),
        // The claims themselves, from a watch cache (`get` only to undo a reservation on
        // the claim as it is then); `patch` adds the delete-protection finalizer to a
        // claim TAS allocates, as kube-scheduler does.
        rule(
            DRA_GROUP,
            &["resourceclaims"],
            &["get", "list", "watch", "patch"],
        ),
        // Write a claim's allocation and the pod in reservedFor before binding the pod,
        // and undo both when the bind does not happen: merge patches carrying the
        // claim's resourceVersion, so no `update`.
        rule(DRA_GROUP, &["resourceclaims/status"], &["patch"]),
        // Kubernetes 1.36+ (DRAResourceClaimGranularStatusAuthorization) also checks
        // `patch` on this virtual subresource, at cluster scope, before a status patch
        // may change `allocation` or `reservedFor`; nothing is served under it.
        rule(DRA_GROUP, &["resourceclaims/binding"], &["patch"]),
    ]
    .into_iter()
    .chain(metrics_auth_rules())
    .collect()
}

/// The scheduler's leader-election Lease, in the operands' namespace only.
fn leader_election_rules(lease_name: &str) -> Vec<PolicyRule> {
    vec![
        // Create the Lease the first time. `create` cannot be limited to a name (the
        // object does not exist when it is authorised).
        rule("coordination.k8s.io", &["leases"], &["create"]),
        // Read and renew (or take over) that one Lease.
        PolicyRule {
            resource_names: Some(vec![lease_name.to_owned()]),
            ..rule("coordination.k8s.io", &["leases"], &["get", "update"])
        },
    ]
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(owned(resources)),
        verbs: owned(verbs),
        ..PolicyRule::default()
    }
}

fn service_account(stack: &Stack, name: &str, component: Component) -> ServiceAccount {
    ServiceAccount {
        metadata: stack.namespaced_meta(name, component),
        ..ServiceAccount::default()
    }
}

fn cluster_role(
    stack: &Stack,
    name: &str,
    component: Component,
    rules: Vec<PolicyRule>,
) -> ClusterRole {
    ClusterRole {
        metadata: stack.cluster_meta(name, component),
        rules: Some(rules),
        ..ClusterRole::default()
    }
}

fn cluster_role_binding(
    stack: &Stack,
    role: &str,
    service_account: &str,
    component: Component,
) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: stack.cluster_meta(role, component),
        role_ref: role_ref("ClusterRole", role),
        subjects: Some(vec![subject(stack, service_account, component)]),
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: RBAC_GROUP.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}

/// The ServiceAccount `service_account` of `component`, in that component's namespace.
fn subject(stack: &Stack, service_account: &str, component: Component) -> Subject {
    Subject {
        kind: "ServiceAccount".to_owned(),
        name: service_account.to_owned(),
        namespace: Some(stack.namespace_of(component).to_owned()),
        ..Subject::default()
    }
}

/// Adds to the node agents' ClusterRole what `/configz` needs (when a node group reads
/// the kubelet's configuration from it): `get` on `nodes/proxy`.
pub(crate) fn allow_configz(cluster_roles: &mut [ClusterRole]) {
    let updater = cluster_roles
        .iter_mut()
        .filter(|r| r.metadata.name.as_deref() == Some(UPDATER_CLUSTER_ROLE));
    for role in updater {
        // Read the running kubelet's configuration from its /configz endpoint through
        // the API server's node proxy. nodes/proxy reaches every kubelet endpoint of
        // every node (see docs/rbac.md), so it is granted only when a group asks.
        role.rules
            .get_or_insert_with(Vec::new)
            .push(rule(CORE, &["nodes/proxy"], &["get"]));
    }
}
