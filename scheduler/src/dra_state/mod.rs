//! The cluster's Dynamic Resource Allocation objects as the scheduler keeps them
//! ([`DraStore`], in [`crate::shared::Shared::dra`]): what the pure allocator
//! ([`crate::dra`]) reads, kept up to date by the watches and never by a GET.
//!
//! - ResourceSlices by name, and each node's [`NodeDevices`] gathered from them again
//!   only when a slice the node sees (or its labels) changed (`slices.rs`);
//! - DeviceClasses by name;
//! - ResourceClaims by namespace and name;
//! - the devices in use (`in_use.rs`): every device of any claim's `status.allocation`,
//!   and the new devices of pods reserved but whose claim writes the watch does not
//!   show yet.
//!
//! The index task (`crate::watch`) is the one writer of the objects; the scheduling
//! loop adds a pod's devices in flight when it reserves the pod, and the bind phase
//! releases them when the pod's writes fail or the pod goes away. A decision reads a
//! [`DraSnapshot`]: shared copies taken under the lock, read without it.
//! [`pod_claims`] resolves a pod's claims from the store.

mod in_use;
pub mod pod_claims;
mod slices;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::ResourceExt;

use crate::dra::{Allocation, DeviceClasses, DeviceId, NodeDevices};
use in_use::InUse;
use slices::Slices;

/// A claim's key: namespace and name.
pub type ClaimKey = (String, String);

/// DeviceClasses by name.
pub type ClassMap = BTreeMap<String, DeviceClass>;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct DraStore {
    slices: Slices,
    classes: Arc<ClassMap>,
    claims: HashMap<ClaimKey, Arc<ResourceClaim>>,
    in_use: InUse,
}

/// What one decision reads of the store: shared, unchanging copies.
#[derive(Debug, Clone, Default)]
pub struct DraSnapshot {
    /// Every DeviceClass.
    pub classes: Arc<ClassMap>,
    /// Node → the devices it can use (no entry: none).
    pub devices: Arc<HashMap<String, Arc<NodeDevices>>>,
    /// Every device allocated or in flight.
    pub in_use: Arc<HashSet<DeviceId>>,
}

impl DeviceClasses for DraSnapshot {
    fn class(&self, name: &str) -> Option<&DeviceClass> {
        self.classes.get(name)
    }
}

/// The devices a claim's `status.allocation` lists.
pub fn allocated_devices(claim: &ResourceClaim) -> Vec<DeviceId> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .map(|r| DeviceId::new(&r.driver, &r.pool, &r.device))
        .collect()
}

fn reserved_count(claim: &ResourceClaim) -> usize {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .map_or(0, Vec::len)
}

impl DraStore {
    /// The copies one decision reads.
    pub fn snapshot(&self) -> DraSnapshot {
        DraSnapshot {
            classes: Arc::clone(&self.classes),
            devices: self.slices.devices(),
            in_use: self.in_use.set(),
        }
    }

    /// The claim `namespace/name`, if known.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Arc<ResourceClaim>> {
        self.claims.get(&(namespace.to_owned(), name.to_owned()))
    }

    /// The devices `node` can use, if any slice reaches it.
    pub fn node_devices(&self, node: &str) -> Option<Arc<NodeDevices>> {
        self.slices.devices().get(node).cloned()
    }

    /// Whether the cluster has any DRA object at all (the debug report says nothing of
    /// DRA otherwise).
    pub fn is_empty(&self) -> bool {
        self.slices.is_empty() && self.classes.is_empty() && self.claims.is_empty()
    }

    /// Adds or replaces a slice; returns whether it could help a waiting pod.
    pub fn upsert_slice(&mut self, slice: ResourceSlice) -> bool {
        self.slices.upsert(slice)
    }

    /// Forgets a slice.
    pub fn remove_slice(&mut self, name: &str) {
        self.slices.remove(name);
    }

    /// Keeps the slices for which `keep(name)` holds.
    pub fn retain_slices(&mut self, keep: impl Fn(&str) -> bool) {
        self.slices.retain(keep);
    }

    /// A node's labels were seen.
    pub fn upsert_node(&mut self, name: &str, labels: BTreeMap<String, String>) {
        self.slices.upsert_node(name, labels);
    }

    /// A node is gone.
    pub fn remove_node(&mut self, name: &str) {
        self.slices.remove_node(name);
    }

    /// Keeps the nodes for which `keep(name)` holds.
    pub fn retain_nodes(&mut self, keep: impl Fn(&str) -> bool) {
        self.slices.retain_nodes(keep);
    }

    /// Adds or replaces a class; returns whether anything changed.
    pub fn upsert_class(&mut self, class: DeviceClass) -> bool {
        let name = class.name_any();
        if self.classes.get(&name).map(|c| &c.spec) == Some(&class.spec) {
            return false;
        }
        Arc::make_mut(&mut self.classes).insert(name, class);
        true
    }

    /// Forgets a class.
    pub fn remove_class(&mut self, name: &str) {
        if self.classes.contains_key(name) {
            Arc::make_mut(&mut self.classes).remove(name);
        }
    }

    /// Keeps the classes for which `keep(name)` holds.
    pub fn retain_classes(&mut self, keep: impl Fn(&str) -> bool) {
        if self.classes.keys().any(|n| !keep(n)) {
            Arc::make_mut(&mut self.classes).retain(|n, _| keep(n));
        }
    }

    /// Adds or replaces a claim; returns whether it could help a waiting pod: the
    /// claim is new, freed devices, lost consumers or stopped being deleted.
    pub fn upsert_claim(&mut self, claim: ResourceClaim) -> bool {
        let key = (claim.namespace().unwrap_or_default(), claim.name_any());
        let new = allocated_devices(&claim);
        let claim = Arc::new(claim);
        match self.claims.insert(key, Arc::clone(&claim)) {
            None => {
                self.in_use.claim_changed(&[], &new);
                true
            }
            Some(old) => {
                let freed = self.in_use.claim_changed(&allocated_devices(&old), &new);
                freed
                    || reserved_count(&claim) < reserved_count(&old)
                    || (old.metadata.deletion_timestamp.is_some()
                        && claim.metadata.deletion_timestamp.is_none())
            }
        }
    }

    /// Forgets a claim; returns whether it freed devices.
    pub fn remove_claim(&mut self, namespace: &str, name: &str) -> bool {
        let key = (namespace.to_owned(), name.to_owned());
        let freed = match self.claims.remove(&key) {
            Some(old) => self.in_use.claim_changed(&allocated_devices(&old), &[]),
            None => false,
        };
        self.in_use.claim_removed(&key) || freed
    }

    /// Keeps the claims for which `keep(namespace, name)` holds; returns whether
    /// devices were freed.
    pub fn retain_claims(&mut self, keep: impl Fn(&str, &str) -> bool) -> bool {
        let gone: Vec<ClaimKey> = self
            .claims
            .keys()
            .filter(|(ns, name)| !keep(ns, name))
            .cloned()
            .collect();
        let mut freed = false;
        for (ns, name) in gone {
            freed |= self.remove_claim(&ns, &name);
        }
        freed
    }

    /// Every allocated claim reserved for some consumer: the consumers' uids and the
    /// claim's devices (what evicting all of them would free, for preemption).
    pub fn reserved_allocations(&self) -> Vec<(Vec<String>, Vec<DeviceId>)> {
        self.claims
            .values()
            .filter_map(|claim| {
                let consumers: Vec<String> = claim
                    .status
                    .as_ref()?
                    .reserved_for
                    .as_ref()?
                    .iter()
                    .map(|r| r.uid.clone())
                    .collect();
                let devices = allocated_devices(claim);
                (!consumers.is_empty() && !devices.is_empty()).then_some((consumers, devices))
            })
            .collect()
    }

    /// Holds pod `uid`'s new devices of `allocation` until the claim watch shows them
    /// allocated, their claim is deleted, or [`Self::release`] drops them.
    pub fn hold(&mut self, uid: &str, allocation: &Allocation) {
        let devices = allocation
            .claims
            .iter()
            .filter(|c| c.result.is_some())
            .flat_map(|c| {
                let (ns, name) = c.claim.split_once('/').unwrap_or(("", &c.claim));
                let key: ClaimKey = (ns.to_owned(), name.to_owned());
                c.devices.iter().map(move |d| (key.clone(), d.id.clone()))
            })
            .collect();
        self.in_use.hold(uid, devices);
    }

    /// Drops pod `uid`'s devices in flight; returns whether it had any.
    pub fn release(&mut self, uid: &str) -> bool {
        self.in_use.release(uid)
    }

    /// The pods with devices in flight and how many each holds (debugging, tests).
    pub fn in_flight(&self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = self
            .in_use
            .in_flight()
            .map(|(uid, n)| (uid.to_owned(), n))
            .collect();
        out.sort();
        out
    }
}
