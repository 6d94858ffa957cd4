//! The scheduler: its config file, its Deployment, its leader election, and the
//! metrics Services in front of both operands.

use super::{FULL, MINIMAL, cr, ctx, desired};
use crate::desired::*;
use tas_api::config::scheduler::SchedulerConfig;
use tas_api::tas::{ForeignPodsDetection, InformerMode, NodesWithoutTopology, ScoringStrategy};

/// The config file as the scheduler will parse it.
fn parsed_config(d: &Desired) -> SchedulerConfig {
    let cm = &d.config_maps[0];
    assert_eq!(cm.metadata.name.as_deref(), Some(SCHEDULER_CONFIG_MAP));
    let text = &cm.data.as_ref().unwrap()["config.yaml"];
    serde_norway::from_str(text).expect("the scheduler can parse its config file")
}

#[test]
fn scheduler_config_map_parses_back_with_the_crs_values() {
    let d = desired(&cr(FULL), &ctx()).unwrap();
    let c = parsed_config(&d);
    assert_eq!(c.scheduler_name, "numa-aware");
    assert_eq!(c.scoring.strategy, ScoringStrategy::MostAllocated);
    let weights: Vec<_> = c
        .scoring
        .resources
        .iter()
        .map(|r| (r.name.as_str(), r.weight))
        .collect();
    assert_eq!(weights, [("cpu", 2), ("hugepages-1Gi", 5)]);
    assert_eq!(c.cache.resync_period, "3s");
    assert_eq!(c.cache.max_staleness, "1m");
    assert_eq!(c.cache.foreign_pods, ForeignPodsDetection::All);
    assert_eq!(c.cache.informer_mode, InformerMode::Dedicated);
    assert_eq!(c.nodes_without_topology, NodesWithoutTopology::Skip);
    assert!(c.leader_election.enabled);
    assert_eq!(
        c.leader_election.lease_namespace.as_deref(),
        Some("numa-system")
    );

    let minimal = parsed_config(&desired(&cr(MINIMAL), &ctx()).unwrap());
    assert!(
        minimal.leader_election.enabled,
        "one replica elects a leader too"
    );
    assert_eq!(minimal.scheduler_name, "topology-aware-scheduler");
}

#[test]
fn scheduler_deployment_mounts_its_config_and_runs_as_non_root() {
    let d = desired(&cr(FULL), &ctx()).unwrap();
    let spec = d.deployment.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(
        spec.strategy.as_ref().unwrap().type_.as_deref(),
        Some("RollingUpdate")
    );
    let p = spec.template.spec.as_ref().unwrap();
    let c = &p.containers[0];
    assert_eq!(
        c.image.as_deref(),
        Some("registry.example/tas/scheduler:v0.3.0")
    );
    assert!(
        c.args
            .as_ref()
            .unwrap()
            .contains(&format!("--config={SCHEDULER_CONFIG_DIR}/config.yaml"))
    );
    let mount = &c.volume_mounts.as_ref().unwrap()[0];
    assert_eq!(
        (mount.mount_path.as_str(), mount.read_only),
        (SCHEDULER_CONFIG_DIR, Some(true))
    );
    let vol = p
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == mount.name)
        .unwrap();
    assert_eq!(vol.config_map.as_ref().unwrap().name, SCHEDULER_CONFIG_MAP);

    let sc = c.security_context.clone().unwrap();
    assert_eq!(
        (sc.run_as_non_root, sc.run_as_user),
        (Some(true), Some(65532))
    );
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.capabilities.unwrap().drop, Some(vec!["ALL".to_owned()]));
    assert_eq!(
        p.security_context
            .clone()
            .unwrap()
            .seccomp_profile
            .unwrap()
            .type_,
        "RuntimeDefault"
    );
    let env: Vec<_> = c
        .env
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(env, ["POD_NAME", "POD_NAMESPACE", OTLP_ENDPOINT_ENV]);
    let spread = &p.topology_spread_constraints.as_ref().unwrap()[0];
    assert_eq!(spread.topology_key, "kubernetes.io/hostname");
    assert_eq!(
        c.resources.as_ref().unwrap().limits.as_ref().unwrap()["memory"].0,
        "512Mi"
    );
}

#[test]
fn leader_election_role_exists_with_any_number_of_replicas() {
    let mut spec_cr = cr(FULL);
    let d = desired(&spec_cr, &ctx()).unwrap();
    assert_eq!(d.roles.len(), 1);
    let role = &d.roles[0];
    assert_eq!(
        role.metadata.name.as_deref(),
        Some(SCHEDULER_LEADER_ELECTION_ROLE)
    );
    assert_eq!(role.metadata.namespace.as_deref(), Some("numa-system"));
    let rules = role.rules.as_ref().unwrap();
    assert!(
        rules
            .iter()
            .all(|r| r.resources.as_deref() == Some(&["leases".to_owned()][..]))
    );
    let binding = &d.role_bindings[0];
    let subject = &binding.subjects.as_ref().unwrap()[0];
    assert_eq!(subject.name, SCHEDULER_SERVICE_ACCOUNT);
    assert_eq!(subject.namespace.as_deref(), Some("numa-system"));

    spec_cr.spec.scheduler.replicas = 1;
    let d = desired(&spec_cr, &ctx()).unwrap();
    assert_eq!(d.roles.len(), 1, "the Role is rendered for one replica too");
    assert_eq!(d.role_bindings.len(), 1);
    assert!(parsed_config(&d).leader_election.enabled);
}

#[test]
fn metrics_services_select_the_operands_http_port() {
    let d = desired(&cr(FULL), &ctx()).unwrap();
    let templates: Vec<_> = d
        .daemon_sets
        .iter()
        .map(|ds| ds.spec.clone().unwrap().template)
        .chain([d.deployment.spec.clone().unwrap().template])
        .collect();
    for svc in &d.services {
        let spec = svc.spec.as_ref().unwrap();
        let selector = spec.selector.as_ref().unwrap();
        let selected: Vec<_> = templates
            .iter()
            .filter(|t| {
                let labels = t.metadata.as_ref().unwrap().labels.as_ref().unwrap();
                selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
            .collect();
        let name = svc.metadata.name.as_deref().unwrap();
        let want = if name == UPDATER_METRICS_SERVICE {
            2
        } else {
            1
        };
        assert_eq!(selected.len(), want, "{name}");
        let port = &spec.ports.as_ref().unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.port),
            (Some(HTTP_PORT_NAME), 8080)
        );
        for t in selected {
            let ports = t.spec.as_ref().unwrap().containers[0]
                .ports
                .clone()
                .unwrap();
            assert!(
                ports
                    .iter()
                    .any(|p| p.name.as_deref() == Some(HTTP_PORT_NAME))
            );
        }
    }
}
