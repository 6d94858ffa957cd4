//! The status subresource: computed from what the caches observe after apply, written
//! only when it changed, with an Event per condition change and the operand gauges.
//!
//! ```text
//! caches (DaemonSets, Deployment, updater pods, NRT objects, NRT CRD)
//!   + node-group membership + the reconcile's problem + the wall clock (freshness)
//!   └─ compute() ─► TopologyAwareSchedulingStatus ─(changed?)─► server-side apply on /status
//!                └─► when to look again (the next node to turn stale)
//! ```
//!
//! Written by server-side apply with the operator's field manager, so a field the
//! operator stops reporting (e.g. a removed node group) disappears from the status.

use super::FIELD_MANAGER;
use super::agent_problems;
use super::coexistence;
use super::conditions::{self, Facts, Problem};
use super::events;
use super::freshness::{Freshness, freshness};
use super::observed::{
    self, count, daemon_set_workload, deployment_workload, group_status, nrt_crd_status,
};
use crate::context::Context;
use crate::desired::{NODE_GROUP_LABEL, SCHEDULER_DEPLOYMENT, updater_daemonset_name};
use crate::node_groups::Membership;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};
use tas_api::nrt::agent_report::AGENT_PROBLEM;
use tas_api::nrt::heartbeat;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::{
    RelatedObject, SchedulerStatus, ServingCertificate, TopologyAwareScheduling,
    TopologyAwareSchedulingStatus,
};

/// Writing the status failed (transient: retried with backoff).
#[derive(Debug, thiserror::Error)]
#[error("writing the status of TopologyAwareScheduling {name}: {source}")]
pub struct StatusError {
    name: String,
    #[source]
    source: kube::Error,
}

/// What the reconcile knows besides the caches.
pub struct Input<'a> {
    /// Node-group membership.
    pub membership: &'a Membership,
    /// Every desired object; `None` when they could not be built (the previous list stays).
    pub related: Option<Vec<RelatedObject>>,
    /// What went wrong, for `Degraded`.
    pub problem: Option<Problem>,
}

/// What the status says, beyond the status itself, for metrics and the requeue.
struct Summary {
    status: TopologyAwareSchedulingStatus,
    agents_ready: i32,
    scheduler_ready: i32,
    stale: usize,
    recheck_in: Option<Duration>,
}

/// While some node's topology is stale, freshness is checked again this often: a fresh
/// write clears `StaleTopology` within it, without waiting for another event (the NRT
/// watch does not wake the operator on every heartbeat).
pub const STALE_RECHECK: Duration = Duration::from_secs(10);

/// Computes the status and writes it if it differs from the object's current one.
/// Returns when freshness must be checked again without another event (the next
/// moment a fresh node turns stale, or [`STALE_RECHECK`] while some node is stale).
pub async fn update(
    ctx: &Context,
    cr: &TopologyAwareScheduling,
    input: Input<'_>,
) -> Result<Option<Duration>, StatusError> {
    let name = cr.name_any();
    let api = Api::<TopologyAwareScheduling>::all(ctx.client.clone());
    // The status as stored now, not as cached: a reconcile right after another may run
    // before the cache has seen the previous status write, and comparing against that
    // older status would move lastTransitionTime and repeat the Events.
    let current = api
        .get_status(&name)
        .await
        .map_err(|source| StatusError {
            name: name.clone(),
            source,
        })?
        .status
        .unwrap_or_default();
    let summary = compute(ctx, cr, &current, input);
    ctx.metrics
        .set_operands_ready(summary.agents_ready.into(), summary.scheduler_ready.into());
    ctx.metrics
        .set_stale_nrt_nodes(i64::try_from(summary.stale).unwrap_or(i64::MAX));
    ctx.metrics.set_conditions(&summary.status.conditions);

    let recheck_in = summary.recheck_in;
    let status = summary.status;
    if status == current {
        return Ok(recheck_in);
    }
    // Not applied: the records of created objects are written only by `super::created`,
    // under a field manager of their own, so this apply never owns or removes them.
    let applied = TopologyAwareSchedulingStatus {
        created_objects: Vec::new(),
        ..status.clone()
    };
    let patch = serde_json::json!({
        "apiVersion": TopologyAwareScheduling::api_version(&()),
        "kind": TopologyAwareScheduling::kind(&()),
        "status": applied,
    });
    api.patch_status(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|source| StatusError {
        name: name.clone(),
        source,
    })?;
    tracing::debug!("status updated");
    let changes = conditions::changes(&current.conditions, &status.conditions);
    events::condition_changes(ctx, cr, &changes).await;
    events::new_kubelet_config_issues(ctx, cr, &current, &status).await;
    Ok(recheck_in)
}

fn compute(
    ctx: &Context,
    cr: &TopologyAwareScheduling,
    current: &TopologyAwareSchedulingStatus,
    input: Input<'_>,
) -> Summary {
    let namespace = cr.spec.namespace.as_str();
    let agents_namespace = crate::validate::updater_namespace(cr, &ctx.config.build);
    let stores = &ctx.stores;

    // Nodes whose agent pod is Ready, per node group; why the others are not.
    let mut agent_ready: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut unready_agents = BTreeMap::new();
    for pod in stores.updater_pods.state() {
        if pod.metadata.namespace.as_deref() != Some(agents_namespace) {
            continue;
        }
        let group = pod.labels().get(NODE_GROUP_LABEL).cloned();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        if !observed::pod_ready(&pod) {
            if let Some(node) = node {
                unready_agents.insert(node, pod);
            }
            continue;
        }
        if let (Some(group), Some(node)) = (group, node) {
            agent_ready.entry(group).or_default().insert(node);
        }
    }
    let nrts = stores.nrts.state();
    let by_node: BTreeMap<&str, &NodeResourceTopology> = nrts
        .iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, n.as_ref())))
        .collect();
    // Per selected node: why its agent is not ready, from its pod and from what the agent
    // itself reports on the node's object. The report counts even while the pod looks
    // ready: with the kubelet down, nobody updates the pod's readiness.
    let reported = |node: &str| {
        by_node
            .get(node)
            .and_then(|n| n.metadata.annotations.as_ref())
            .and_then(|a| a.get(AGENT_PROBLEM))
            .map(String::as_str)
    };
    // Only the few candidates (unready pods, objects carrying a report) are looked up in
    // the groups, not every selected node, on every reconcile.
    let selected = |node: &str| {
        input
            .membership
            .groups
            .iter()
            .any(|g| g.nodes.contains(node))
    };
    let reporting = by_node
        .iter()
        .filter(|(_, n)| {
            n.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(AGENT_PROBLEM))
        })
        .map(|(node, _)| *node);
    let candidates: BTreeSet<&str> = unready_agents
        .keys()
        .map(String::as_str)
        .chain(reporting)
        .collect();
    let agent_problems: Vec<(String, String)> = candidates
        .into_iter()
        .filter(|node| selected(node))
        .filter_map(|node| {
            let why = match (unready_agents.get(node), reported(node)) {
                (Some(pod), reported) => agent_problems::agent_problem(pod, reported),
                (None, Some(r)) => agent_problems::reported_problem(r),
                (None, None) => return None,
            };
            Some((node.to_owned(), why))
        })
        .take(agent_problems::MAX_AGENT_PROBLEMS)
        .collect();
    let now_wall = SystemTime::now();
    let missed = cr.spec.scheduler.cache.missed_heartbeats;
    let periods: BTreeMap<String, Duration> = cr
        .effective_node_groups()
        .iter()
        .map(|g| {
            let period = g.merged_updater(&cr.spec.updater).refresh.heartbeat_period;
            let period = tas_api::duration::parse(&period).unwrap_or(heartbeat::DEFAULT_PERIOD);
            (g.name.clone(), period)
        })
        .collect();

    let reports = coexistence::node_reports(nrts.iter().map(AsRef::as_ref));
    let empty = BTreeSet::new();
    let mut stale = BTreeSet::new();
    let mut fresh = BTreeSet::new();
    let mut stale_topology = BTreeMap::new();
    let mut next_stale: Option<SystemTime> = None;
    let mut node_groups = Vec::new();
    let mut daemon_sets = Vec::new();
    for group in &input.membership.groups {
        let ready = agent_ready.get(&group.name).unwrap_or(&empty);
        let period = periods
            .get(&group.name)
            .copied()
            .unwrap_or(heartbeat::DEFAULT_PERIOD);
        let topology: BTreeMap<String, Freshness> = group
            .nodes
            .iter()
            .map(|n| {
                let nrt = by_node.get(n.as_str()).copied();
                (n.clone(), freshness(nrt, now_wall, period, missed))
            })
            .collect();
        for (node, f) in &topology {
            match *f {
                Freshness::Stale { age } => {
                    stale_topology.insert(node.clone(), age);
                }
                Freshness::Fresh { stale_at: Some(at) } => {
                    next_stale = Some(next_stale.map_or(at, |n| n.min(at)))
                }
                _ => {}
            }
        }
        let mut status = group_status(&group.name, &group.nodes, ready, &topology);
        (status.kubelet_config_issues, status.foreign_nrt_writers) =
            coexistence::for_group(&group.nodes, &reports);
        node_groups.push(status);
        let group_stale: BTreeSet<&String> =
            observed::stale_nodes(&group.nodes, &topology).collect();
        fresh.extend(group.nodes.iter().filter(|n| !group_stale.contains(n)));
        stale.extend(group_stale.into_iter().cloned());

        let ds_name = updater_daemonset_name(&group.name);
        let ds = stores.daemon_sets.find(|d| {
            d.metadata.namespace.as_deref() == Some(agents_namespace) && d.name_any() == ds_name
        });
        daemon_sets.push(daemon_set_workload(&ds_name, ds.as_deref()));
    }
    let deployment = stores.deployments.find(|d| {
        d.metadata.namespace.as_deref() == Some(namespace) && d.name_any() == SCHEDULER_DEPLOYMENT
    });
    let scheduler = deployment_workload(SCHEDULER_DEPLOYMENT, deployment.as_deref());

    let facts = Facts {
        paused: cr.spec.paused,
        daemon_sets,
        scheduler,
        problem: input.problem,
        stale_nodes: stale.iter().cloned().collect(),
        desired_nodes: input.membership.total_nodes(),
        stale_topology: stale_topology.into_iter().collect(),
        missed_heartbeats: missed,
        agent_problems,
        scheduler_serving_secret: (cr.spec.observability.serving_certificate
            == ServingCertificate::Secret)
            .then(|| {
                let service = crate::desired::names::SCHEDULER_METRICS_SERVICE;
                (
                    namespace.to_owned(),
                    crate::desired::serving_cert::secret_name(service),
                )
            }),
    };
    let recheck_in = if facts.stale_topology.is_empty() {
        // One second late, so the node is past the limit when the reconcile runs.
        next_stale
            .map(|at| at.duration_since(now_wall).unwrap_or_default() + Duration::from_secs(1))
    } else {
        Some(STALE_RECHECK)
    };
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let nrt_crd = nrt_crd_status(stores.nrt_crd().as_deref(), cr.spec.nrt_crd.manage);
    let writers: Vec<_> = node_groups
        .iter()
        .flat_map(|g| g.foreign_nrt_writers.iter().cloned())
        .collect();
    let mut decided = conditions::decide(&facts);
    decided.push(coexistence::ownership(
        &cr.spec.nrt_crd,
        &nrt_crd.foreign_managers,
        &writers,
    ));
    let conditions = conditions::merge(&current.conditions, decided, cr.metadata.generation, &now);

    let related_objects = input
        .related
        .unwrap_or_else(|| current.related_objects.clone());
    let status = TopologyAwareSchedulingStatus {
        observed_generation: cr.metadata.generation,
        conditions,
        nrt_crd: Some(nrt_crd),
        node_groups,
        desired_nodes: Some(count(facts.desired_nodes)),
        nodes_with_fresh_nrt: Some(count(fresh.len())),
        scheduler: Some(SchedulerStatus {
            scheduler_name: cr.spec.scheduler.scheduler_name.clone(),
            replicas: facts.scheduler.current,
            ready_replicas: facts.scheduler.ready,
        }),
        related_objects,
        // Written apart, by `created` (see `update`): carried over for the comparison.
        created_objects: current.created_objects.clone(),
    };
    Summary {
        agents_ready: facts.daemon_sets.iter().map(|d| d.ready).sum(),
        scheduler_ready: facts.scheduler.ready,
        stale: stale.len(),
        status,
        recheck_in,
    }
}
