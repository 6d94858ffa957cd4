//! The operator can grant what it builds: Kubernetes lets it create a role or binding
//! only with every permission in it held (it has no `escalate`, and `bind` only on its
//! own two roles). So every rule of the operands' ClusterRoles must be covered by the
//! operator's cluster-wide ClusterRole (config/rbac/role.yaml), and every rule of their
//! namespaced Roles by the rules it holds in the operands' namespace
//! (config/rbac/operands_role.yaml). A rule added to operator/src/desired/rbac.rs without
//! its counterpart in config/rbac fails here rather than as `ApplyFailed` in a cluster.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use tas_api::tas::TopologyAwareScheduling;
use tas_operator::desired::{self, BuildContext};
use tas_operator::validate::validate;

fn config_role(file: &str) -> Vec<PolicyRule> {
    let path = format!("{}/../config/rbac/{file}", env!("CARGO_MANIFEST_DIR"));
    let role: ClusterRole =
        serde_norway::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    role.rules.unwrap_or_default()
}

/// Every (group, resource, verb, name) a rule grants; name `None` when unrestricted.
fn grants(rule: &PolicyRule) -> Vec<(String, String, String, Option<String>)> {
    let names: Vec<Option<String>> = match &rule.resource_names {
        Some(n) if !n.is_empty() => n.iter().cloned().map(Some).collect(),
        _ => vec![None],
    };
    let mut out = Vec::new();
    for g in rule.api_groups.iter().flatten() {
        for r in rule.resources.iter().flatten() {
            for v in &rule.verbs {
                for n in &names {
                    out.push((g.clone(), r.clone(), v.clone(), n.clone()));
                }
            }
        }
    }
    out
}

/// Whether `held` covers the grant: same group, resource and verb, and either
/// unrestricted or restricted to a list containing the grant's (non-empty) name.
fn covered(held: &[PolicyRule], grant: &(String, String, String, Option<String>)) -> bool {
    held.iter().flat_map(grants).any(|(g, r, v, n)| {
        g == grant.0 && r == grant.1 && v == grant.2 && (n.is_none() || n == grant.3)
    })
}

/// The operands' RBAC objects for the full fixture (every optional rule on).
fn desired_full() -> desired::Desired {
    let path = format!("{}/tests/fixtures/full.yaml", env!("CARGO_MANIFEST_DIR"));
    let cr: TopologyAwareScheduling =
        serde_norway::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let ctx = BuildContext {
        updater_image_default: Some("u".into()),
        scheduler_image_default: Some("s".into()),
        allowed_images: vec![
            "registry.example/tas/updater:v0.3.0".to_owned(),
            "registry.example/tas/updater:v0.3.1-rc.1".to_owned(),
            "registry.example/tas/scheduler:v0.3.0".to_owned(),
        ],
        allowed_toleration_keys: vec!["dedicated".to_owned()],
        updater_namespace: None,
    };
    desired::build(&validate(&cr, &ctx, None).unwrap()).unwrap()
}

#[test]
fn the_operator_holds_every_permission_it_grants_the_operands() {
    let d = desired_full();
    assert!(!d.roles.is_empty(), "the fixture has leader election");

    let cluster_wide = config_role("role.yaml");
    let mut in_namespace = config_role("operands_role.yaml");
    in_namespace.extend(cluster_wide.clone());
    let mut missing = Vec::new();
    for role in &d.cluster_roles {
        for rule in role.rules.iter().flatten() {
            for g in grants(rule) {
                if !covered(&cluster_wide, &g) {
                    missing.push(format!("ClusterRole {:?}: {g:?}", role.metadata.name));
                }
            }
        }
    }
    for role in &d.roles {
        for rule in role.rules.iter().flatten() {
            for g in grants(rule) {
                if !covered(&in_namespace, &g) {
                    missing.push(format!("Role {:?}: {g:?}", role.metadata.name));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not held by the operator:\n{}",
        missing.join("\n")
    );
}

/// The namespaced rights are never granted cluster-wide: no rule of the operator's
/// ClusterRole writes the namespaced operand kinds.
#[test]
fn the_operators_cluster_role_writes_no_namespaced_operand() {
    let writes = [
        "create",
        "patch",
        "update",
        "delete",
        "deletecollection",
        "*",
    ];
    let namespaced = [
        "serviceaccounts",
        "configmaps",
        "services",
        "networkpolicies",
        "daemonsets",
        "deployments",
        "roles",
        "leases",
        "secrets",
        "pods",
    ];
    let found: Vec<_> = config_role("role.yaml")
        .iter()
        .flat_map(grants)
        .filter(|(_, r, v, _)| namespaced.contains(&r.as_str()) && writes.contains(&v.as_str()))
        .collect();
    assert!(found.is_empty(), "cluster-wide writes: {found:?}");
}

/// Finding 8d: the node agents learn of their node's pods from the kubelet, so their
/// ClusterRole grants nothing on pods (nor a wildcard that would cover them), and no
/// Role binds them anything. `operator/tests/stack/least_privilege.rs` asks the API
/// server the same with the agents' own token.
#[test]
fn the_node_agents_may_read_no_pod() {
    let d = desired_full();
    let updater = d
        .cluster_roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(desired::UPDATER_CLUSTER_ROLE))
        .expect("the node agents' ClusterRole");
    let on_pods: Vec<_> = updater
        .rules
        .iter()
        .flatten()
        .flat_map(grants)
        .filter(|(g, r, _, _)| {
            (g.is_empty() || g == "*") && (r == "*" || r == "pods" || r.starts_with("pods/"))
        })
        .collect();
    assert!(on_pods.is_empty(), "the node agents may: {on_pods:?}");
    for binding in &d.role_bindings {
        for subject in binding.subjects.iter().flatten() {
            assert_ne!(
                subject.name,
                desired::UPDATER_SERVICE_ACCOUNT,
                "RoleBinding {:?}",
                binding.metadata.name
            );
        }
    }
}
