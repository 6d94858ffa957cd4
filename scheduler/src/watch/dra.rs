//! ResourceSlices, DeviceClasses and ResourceClaims (`resource.k8s.io/v1`), into
//! [`Shared::dra`]. A change that could help a waiting pod (a slice, a class, a claim
//! created, freeing devices or consumers) retries the pods that wait.
//!
//! A cluster that does not serve `resource.k8s.io/v1` answers the lists with 404: the
//! watch then counts as listed and empty (pods with claims wait, every other pod is
//! scheduled), says so once in the log, and keeps retrying quietly with the watcher's
//! back-off, so the API being enabled later is picked up.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::ResourceExt;
use kube::runtime::watcher;

use super::relist::Index;
use crate::shared::Shared;

/// Whether a watch error says the API server does not serve the kind.
fn not_served(error: &watcher::Error) -> bool {
    let api = match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        watcher::Error::WatchError(status) => return status.code == 404,
        watcher::Error::NoResourceVersion => return false,
    };
    matches!(api, kube::Error::Api(status) if status.code == 404)
}

/// What the three DRA watches share: the state, and whether the API was found
/// missing (so that it is said once, not at every retry).
pub(super) struct DraWatch {
    shared: Arc<Shared>,
    unserved: bool,
}

impl DraWatch {
    fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            unserved: false,
        }
    }

    /// Handles a watch error of `what`; on 404 reports the kind as listed and empty
    /// through `empty` (once), and returns whether it did.
    fn failed(&mut self, what: &str, error: &watcher::Error, flag: &AtomicBool) -> bool {
        if !not_served(error) {
            tracing::warn!(error = %error, "watching {what}");
            return false;
        }
        if self.unserved {
            return false;
        }
        self.unserved = true;
        tracing::info!(
            "{what} are not served by the API server (resource.k8s.io/v1 missing): \
             pods with resource claims wait until it is"
        );
        flag.store(true, Ordering::Release);
        self.shared.wake.notify_one();
        true
    }

    fn listed(&mut self, flag: &AtomicBool) {
        self.unserved = false;
        flag.store(true, Ordering::Release);
        self.shared.cluster_event();
        self.shared.wake.notify_one();
    }
}

/// ResourceSlices by name.
pub(super) struct SliceWatch(DraWatch);

impl SliceWatch {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self(DraWatch::new(shared))
    }
}

impl Index for SliceWatch {
    type Object = ResourceSlice;
    type Key = String;
    const WHAT: &'static str = "ResourceSlices";

    fn key(slice: &ResourceSlice) -> String {
        slice.name_any()
    }

    fn apply(&mut self, _: String, slice: ResourceSlice) {
        let shared = &self.0.shared;
        if shared.dra.write().upsert_slice(slice) {
            shared.cluster_event();
        }
    }

    fn delete(&mut self, name: String, _: ResourceSlice) {
        self.0.shared.dra.write().remove_slice(&name);
    }

    fn retain(&mut self, seen: HashSet<String>) {
        self.0
            .shared
            .dra
            .write()
            .retain_slices(|name| seen.contains(name));
    }

    fn synced(&mut self) {
        let shared = self.0.shared.clone();
        self.0.listed(&shared.synced.resource_slices);
    }

    fn failed(&mut self, error: &watcher::Error) {
        let shared = self.0.shared.clone();
        if self.0.failed(Self::WHAT, error, &shared.synced.resource_slices) {
            shared.dra.write().retain_slices(|_| false);
        }
    }
}

/// DeviceClasses by name.
pub(super) struct DeviceClassWatch(DraWatch);

impl DeviceClassWatch {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self(DraWatch::new(shared))
    }
}

impl Index for DeviceClassWatch {
    type Object = DeviceClass;
    type Key = String;
    const WHAT: &'static str = "DeviceClasses";

    fn key(class: &DeviceClass) -> String {
        class.name_any()
    }

    fn apply(&mut self, _: String, class: DeviceClass) {
        let shared = &self.0.shared;
        if shared.dra.write().upsert_class(class) {
            shared.cluster_event();
        }
    }

    fn delete(&mut self, name: String, _: DeviceClass) {
        self.0.shared.dra.write().remove_class(&name);
    }

    fn retain(&mut self, seen: HashSet<String>) {
        self.0
            .shared
            .dra
            .write()
            .retain_classes(|name| seen.contains(name));
    }

    fn synced(&mut self) {
        let shared = self.0.shared.clone();
        self.0.listed(&shared.synced.device_classes);
    }

    fn failed(&mut self, error: &watcher::Error) {
        let shared = self.0.shared.clone();
        if self.0.failed(Self::WHAT, error, &shared.synced.device_classes) {
            shared.dra.write().retain_classes(|_| false);
        }
    }
}

/// ResourceClaims by namespace and name.
pub(super) struct ResourceClaimWatch(DraWatch);

impl ResourceClaimWatch {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self(DraWatch::new(shared))
    }
}

impl Index for ResourceClaimWatch {
    type Object = ResourceClaim;
    type Key = (String, String);
    const WHAT: &'static str = "ResourceClaims";

    fn key(claim: &ResourceClaim) -> (String, String) {
        (claim.namespace().unwrap_or_default(), claim.name_any())
    }

    fn apply(&mut self, _: (String, String), claim: ResourceClaim) {
        let shared = &self.0.shared;
        if shared.dra.write().upsert_claim(claim) {
            shared.cluster_event();
        }
    }

    fn delete(&mut self, (ns, name): (String, String), _: ResourceClaim) {
        let shared = &self.0.shared;
        if shared.dra.write().remove_claim(&ns, &name) {
            shared.cluster_event();
        }
    }

    fn retain(&mut self, seen: HashSet<(String, String)>) {
        let shared = &self.0.shared;
        let freed = shared
            .dra
            .write()
            .retain_claims(|ns, name| seen.contains(&(ns.to_owned(), name.to_owned())));
        if freed {
            shared.cluster_event();
        }
    }

    fn synced(&mut self) {
        let shared = self.0.shared.clone();
        self.0.listed(&shared.synced.resource_claims);
    }

    fn failed(&mut self, error: &watcher::Error) {
        let shared = self.0.shared.clone();
        if self.0.failed(Self::WHAT, error, &shared.synced.resource_claims) {
            shared.dra.write().retain_claims(|_, _| false);
        }
    }
}

#[cfg(test)]
mod tests;
