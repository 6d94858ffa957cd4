//! PodDisruptionBudgets, for ranking preemption plans.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::preempt::Budget;
use crate::shared::Shared;

pub(super) async fn watch_budgets(api: Api<PodDisruptionBudget>, shared: Arc<Shared>) {
    let mut relist: Option<HashSet<(String, String)>> = None;
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(Event::Init)) => relist = Some(HashSet::new()),
            Ok(Some(Event::Apply(pdb) | Event::InitApply(pdb))) => {
                let (ns, name) = (pdb.namespace().unwrap_or_default(), pdb.name_any());
                if let Ok(mut b) = shared.budgets.write() {
                    b.upsert(&ns, &name, Budget::from_pdb(&pdb));
                }
                if let Some(seen) = relist.as_mut() {
                    seen.insert((ns, name));
                }
            }
            Ok(Some(Event::Delete(pdb))) => {
                if let Ok(mut b) = shared.budgets.write() {
                    b.remove(&pdb.namespace().unwrap_or_default(), &pdb.name_any());
                }
            }
            Ok(Some(Event::InitDone)) => {
                if let Some(seen) = relist.take()
                    && let Ok(mut b) = shared.budgets.write()
                {
                    b.retain(|ns, name| seen.contains(&(ns.to_owned(), name.to_owned())));
                }
                shared.synced.budgets.store(true, Ordering::Release);
                shared.wake.notify_one();
            }
            Ok(None) => return,
            Err(e) => tracing::warn!(error = %e, "watching PodDisruptionBudgets"),
        }
    }
}
