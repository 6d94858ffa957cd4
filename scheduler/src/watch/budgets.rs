//! PodDisruptionBudgets, for ranking preemption plans.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;

use super::relist::Index;
use crate::preempt::Budget;
use crate::shared::Shared;

/// Budgets by namespace and name, in [`Shared::budgets`].
pub(super) struct BudgetWatch(pub(super) Arc<Shared>);

impl Index for BudgetWatch {
    type Object = PodDisruptionBudget;
    type Key = (String, String);
    const WHAT: &'static str = "PodDisruptionBudgets";

    fn key(pdb: &PodDisruptionBudget) -> (String, String) {
        (pdb.namespace().unwrap_or_default(), pdb.name_any())
    }

    fn apply(&mut self, (ns, name): (String, String), pdb: PodDisruptionBudget) {
        self.0
            .budgets
            .write()
            .upsert(&ns, &name, Budget::from_pdb(&pdb));
    }

    fn delete(&mut self, (ns, name): (String, String), _: PodDisruptionBudget) {
        self.0.budgets.write().remove(&ns, &name);
    }

    fn retain(&mut self, seen: HashSet<(String, String)>) {
        self.0
            .budgets
            .write()
            .retain(|ns, name| seen.contains(&(ns.to_owned(), name.to_owned())));
    }

    fn synced(&mut self) {
        self.0.synced.budgets.store(true, Ordering::Release);
        self.0.wake.notify_one();
    }
}
