//! State from watches, never GETs: nodes (`nodes.rs`), bound pods and our pending pods
//! (`pods.rs`), NodeResourceTopology objects (`topologies.rs`), namespace labels
//! (`namespaces.rs`), PodDisruptionBudgets (`budgets.rs`, for preemption), and
//! PersistentVolumeClaims, PersistentVolumes and StorageClasses (`volumes.rs`, for the
//! volume filters).
//!
//! Each watch is a `relist::Index` run by `relist::relisting_watch`: it applies its
//! events to [`Shared`] and signals the scheduling loop when an event could help a
//! waiting pod. A relist (`Init` … `InitDone`) replaces what the watch had delivered, so
//! objects deleted while disconnected are forgotten — bound pods by the cluster state and
//! the reserve cache alike.

mod budgets;
mod namespaces;
mod nodes;
mod pods;
mod relist;
mod topologies;
mod volumes;

use std::sync::Arc;

use kube::runtime::watcher::Config;
use kube::{Api, Client, Resource};

use crate::shared::Shared;
use relist::{Index, relisting_watch};
use tas_runtime::supervise::Supervisor;

/// Start every watch; they run until the process ends.
pub fn spawn_all(client: &Client, shared: &Arc<Shared>, tasks: &mut Supervisor) {
    let ours = format!(
        "spec.schedulerName={},spec.nodeName=",
        shared.settings.scheduler_name
    );
    spawn(
        tasks,
        "watch nodes",
        client,
        Config::default(),
        nodes::NodeWatch::new(shared.clone()),
    );
    spawn(
        tasks,
        "watch bound pods",
        client,
        Config::default().fields("spec.nodeName!="),
        pods::BoundPodWatch(shared.clone()),
    );
    spawn(
        tasks,
        "watch pending pods",
        client,
        Config::default().fields(&ours),
        pods::PendingPodWatch(shared.clone()),
    );
    spawn(
        tasks,
        "watch topologies",
        client,
        Config::default(),
        topologies::TopologyWatch::new(shared.clone()),
    );
    spawn(
        tasks,
        "watch namespaces",
        client,
        Config::default(),
        namespaces::NamespaceWatch(shared.clone()),
    );
    spawn(
        tasks,
        "watch budgets",
        client,
        Config::default(),
        budgets::BudgetWatch(shared.clone()),
    );
    spawn_volume_watches(client, shared, tasks);
}

/// The claims, volumes and storage classes the volume filters read.
fn spawn_volume_watches(client: &Client, shared: &Arc<Shared>, tasks: &mut Supervisor) {
    spawn(
        tasks,
        "watch persistentvolumeclaims",
        client,
        Config::default(),
        volumes::ClaimWatch(shared.clone()),
    );
    spawn(
        tasks,
        "watch persistentvolumes",
        client,
        Config::default(),
        volumes::VolumeWatch(shared.clone()),
    );
    spawn(
        tasks,
        "watch storageclasses",
        client,
        Config::default(),
        volumes::StorageClassWatch(shared.clone()),
    );
}

/// Run one cluster-wide watch feeding `index` on its own supervised task.
fn spawn<I>(tasks: &mut Supervisor, name: &str, client: &Client, config: Config, index: I)
where
    I: Index + Send + 'static,
    I::Key: Send,
    <I::Object as Resource>::DynamicType: Default,
{
    tasks.spawn(
        name,
        relisting_watch(Api::all(client.clone()), config, index),
    );
}
