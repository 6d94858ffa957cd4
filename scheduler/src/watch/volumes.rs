//! PersistentVolumeClaims, PersistentVolumes and StorageClasses, into
//! [`Shared::volumes`] as the compact records of
//! [`crate::filter::volume_catalog`]. A change that matters to scheduling (a claim bound
//! or deleted, a volume's constraints, a class's binding mode) retries the pods that
//! wait.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;

use super::relist::Index;
use crate::filter::volume_catalog::{BindingMode, ClaimInfo, VolumeInfo};
use crate::shared::Shared;

/// Claims by namespace and name.
pub(super) struct ClaimWatch(pub(super) Arc<Shared>);

impl Index for ClaimWatch {
    type Object = PersistentVolumeClaim;
    type Key = (String, String);
    const WHAT: &'static str = "PersistentVolumeClaims";

    fn key(pvc: &PersistentVolumeClaim) -> (String, String) {
        (pvc.namespace().unwrap_or_default(), pvc.name_any())
    }

    fn apply(&mut self, (ns, name): (String, String), pvc: PersistentVolumeClaim) {
        let info = ClaimInfo::new(&pvc);
        let changed = self
            .0
            .volumes
            .write()
            .is_ok_and(|mut v| v.upsert_claim(&ns, &name, info));
        if changed {
            self.0.cluster_event();
        }
    }

    fn delete(&mut self, (ns, name): (String, String), _: PersistentVolumeClaim) {
        if let Ok(mut v) = self.0.volumes.write() {
            v.remove_claim(&ns, &name);
        }
    }

    fn retain(&mut self, seen: HashSet<(String, String)>) {
        if let Ok(mut v) = self.0.volumes.write() {
            v.retain_claims(|ns, name| seen.contains(&(ns.to_owned(), name.to_owned())));
        }
    }

    fn synced(&mut self) {
        self.0.synced.claims.store(true, Ordering::Release);
        self.0.cluster_event();
        self.0.wake.notify_one();
    }
}

/// PersistentVolumes by name.
pub(super) struct VolumeWatch(pub(super) Arc<Shared>);

impl Index for VolumeWatch {
    type Object = PersistentVolume;
    type Key = String;
    const WHAT: &'static str = "PersistentVolumes";

    fn key(pv: &PersistentVolume) -> String {
        pv.name_any()
    }

    fn apply(&mut self, name: String, pv: PersistentVolume) {
        let info = VolumeInfo::new(&pv);
        let changed = self
            .0
            .volumes
            .write()
            .is_ok_and(|mut v| v.upsert_volume(&name, info));
        if changed {
            self.0.cluster_event();
        }
    }

    fn delete(&mut self, name: String, _: PersistentVolume) {
        if let Ok(mut v) = self.0.volumes.write() {
            v.remove_volume(&name);
        }
    }

    fn retain(&mut self, seen: HashSet<String>) {
        if let Ok(mut v) = self.0.volumes.write() {
            v.retain_volumes(|name| seen.contains(name));
        }
    }

    fn synced(&mut self) {
        self.0.synced.volumes.store(true, Ordering::Release);
        self.0.cluster_event();
        self.0.wake.notify_one();
    }
}

/// StorageClasses' binding modes by name.
pub(super) struct StorageClassWatch(pub(super) Arc<Shared>);

impl Index for StorageClassWatch {
    type Object = StorageClass;
    type Key = String;
    const WHAT: &'static str = "StorageClasses";

    fn key(class: &StorageClass) -> String {
        class.name_any()
    }

    fn apply(&mut self, name: String, class: StorageClass) {
        let mode = BindingMode::new(&class);
        let changed = self
            .0
            .volumes
            .write()
            .is_ok_and(|mut v| v.upsert_class(&name, mode));
        if changed {
            self.0.cluster_event();
        }
    }

    fn delete(&mut self, name: String, _: StorageClass) {
        if let Ok(mut v) = self.0.volumes.write() {
            v.remove_class(&name);
        }
    }

    fn retain(&mut self, seen: HashSet<String>) {
        if let Ok(mut v) = self.0.volumes.write() {
            v.retain_classes(|name| seen.contains(name));
        }
    }

    fn synced(&mut self) {
        self.0.synced.storage_classes.store(true, Ordering::Release);
        self.0.cluster_event();
        self.0.wake.notify_one();
    }
}
