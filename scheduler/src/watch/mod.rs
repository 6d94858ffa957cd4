//! State from watches, never GETs: nodes (`nodes.rs`), bound pods and our pending pods
//! (`pods.rs`), NodeResourceTopology objects (`topologies.rs`), namespace labels
//! (`namespaces.rs`), PodDisruptionBudgets (`budgets.rs`, for preemption), and
//! PersistentVolumeClaims, PersistentVolumes and StorageClasses (`volumes.rs`, for the
//! volume filters), and ResourceSlices, DeviceClasses and ResourceClaims (`dra.rs`, for
//! the allocation of pods' resource claims).
//!
//! Each watch task only forwards its stream, trimmed of what no decision reads
//! (`trim.rs`), to the index task (`index.rs`), which owns
//! every kind's `relist::Index` and applies the events to [`Shared`] in the order they
//! arrive, signalling the scheduling loop when an event could help a waiting pod. A
//! relist (`Init` … `InitDone`) replaces what the watch had delivered, so
//! objects deleted while disconnected are forgotten — bound pods by the cluster state and
//! the reserve cache alike.

mod budgets;
mod dra;
mod index;
mod namespaces;
mod nodes;
mod pods;
mod relist;
mod topologies;
mod trim;
mod volumes;

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Config};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use crate::shared::Shared;
use index::{Indexes, Item, Update};
use tas_runtime::supervise::Supervisor;

/// Start the index task and every watch feeding it; they run until the process ends.
pub fn spawn_all(client: &Client, shared: &Arc<Shared>, tasks: &mut Supervisor) {
    let (updates, received) = mpsc::channel(index::CAPACITY);
    tasks.spawn("index", index::run(received, Indexes::new(shared)));
    let ours = format!(
        "spec.schedulerName={},spec.nodeName=",
        shared.settings.scheduler_name
    );
    let mut feed = Feed {
        client,
        updates: &updates,
        tasks,
    };
    feed.spawn("watch nodes", Config::default(), Update::Nodes);
    feed.spawn(
        "watch bound pods",
        Config::default().fields("spec.nodeName!="),
        Update::BoundPods,
    );
    feed.spawn(
        "watch pending pods",
        Config::default().fields(&ours),
        Update::PendingPods,
    );
    feed.spawn("watch topologies", Config::default(), Update::Topologies);
    feed.spawn("watch namespaces", Config::default(), Update::Namespaces);
    feed.spawn("watch budgets", Config::default(), Update::Budgets);
    feed.spawn(
        "watch persistentvolumeclaims",
        Config::default(),
        Update::Claims,
    );
    feed.spawn(
        "watch persistentvolumes",
        Config::default(),
        Update::Volumes,
    );
    feed.spawn(
        "watch storageclasses",
        Config::default(),
        Update::StorageClasses,
    );
    feed.spawn(
        "watch resourceslices",
        Config::default(),
        Update::ResourceSlices,
    );
    feed.spawn(
        "watch deviceclasses",
        Config::default(),
        Update::DeviceClasses,
    );
    feed.spawn(
        "watch resourceclaims",
        Config::default(),
        Update::ResourceClaims,
    );
}

/// Where the watch tasks are spawned and what they feed.
struct Feed<'a> {
    client: &'a Client,
    updates: &'a mpsc::Sender<Update>,
    tasks: &'a mut Supervisor,
}

impl Feed<'_> {
    /// Run one cluster-wide watch on its own supervised task, forwarding its stream to
    /// the index task as `tag`ged updates.
    fn spawn<K>(&mut self, name: &str, config: Config, tag: fn(Box<Item<K>>) -> Update)
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
        K::DynamicType: Default,
    {
        let api: Api<K> = Api::all(self.client.clone());
        let updates = self.updates.clone();
        self.tasks.spawn(name, forward(api, config, updates, tag));
    }
}

/// Forward `api`'s watch stream to the index task until it stops receiving.
async fn forward<K>(
    api: Api<K>,
    config: Config,
    updates: mpsc::Sender<Update>,
    tag: fn(Box<Item<K>>) -> Update,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let mut items = watcher::watcher(api, config)
        .default_backoff()
        .modify(trim::trim)
        .boxed();
    while let Some(item) = items.next().await {
        if updates.send(tag(Box::new(item))).await.is_err() {
            return;
        }
    }
}
