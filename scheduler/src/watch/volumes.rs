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
        let changed = self.0.volumes.write().upsert_claim(&ns, &name, info);
        if changed {
            self.0.cluster_event();
        }
    }

    fn delete(&mut self, (ns, name): (String, String), _: PersistentVolumeClaim) {
        self.0.volumes.write().remove_claim(&ns, &name);
    }

    fn retain(&mut self, seen: HashSet<(String, String)>) {
        self.0
            .volumes
            .write()
            .retain_claims(|ns, name| seen.contains(&(ns.to_owned(), name.to_owned())));
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
        let changed = self.0.volumes.write().upsert_volume(&name, info);
        if changed {
            self.0.cluster_event();
        }
    }

    fn delete(&mut self, name: String, _: PersistentVolume) {
        self.0.volumes.write().remove_volume(&name);
    }

    fn retain(&mut self, seen: HashSet<String>) {
        self.0
            .volumes
            .write()
            .retain_volumes(|name| seen.contains(name));
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
        let changed = self.0.volumes.write().upsert_class(&name, mode);
        if changed {
            self.0.cluster_event();
        }
    }

    fn delete(&mut self, name: String, _: StorageClass) {
        self.0.volumes.write().remove_class(&name);
    }

    fn retain(&mut self, seen: HashSet<String>) {
        self.0
            .volumes
            .write()
            .retain_classes(|name| seen.contains(name));
    }

    fn synced(&mut self) {
        self.0.synced.storage_classes.store(true, Ordering::Release);
        self.0.cluster_event();
        self.0.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn shared() -> Arc<Shared> {
        crate::test_support::shared()
    }

    fn pvc(name: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"volumeName": "pv"}
        }))
        .expect("pvc")
    }

    #[tokio::test]
    async fn a_relist_forgets_vanished_claims_volumes_and_classes() {
        let shared = shared();
        let mut claims = ClaimWatch(shared.clone());
        for name in ["kept", "vanished"] {
            claims.apply(("ns".into(), name.into()), pvc(name));
        }
        claims.retain(HashSet::from([("ns".to_owned(), "kept".to_owned())]));
        let mut volumes = VolumeWatch(shared.clone());
        let pv: PersistentVolume =
            serde_json::from_value(json!({"metadata": {"name": "pv"}})).expect("pv");
        volumes.apply("pv".into(), pv);
        volumes.retain(HashSet::new());
        let mut classes = StorageClassWatch(shared.clone());
        let sc: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "local"}, "provisioner": "x",
            "volumeBindingMode": "WaitForFirstConsumer"
        }))
        .expect("class");
        classes.apply("local".into(), sc);
        {
            let catalog = shared.volumes.read();
            assert!(catalog.claim("ns", "kept").is_some());
            assert!(catalog.claim("ns", "vanished").is_none());
            assert!(catalog.volume("pv").is_none());
            assert_eq!(
                catalog.class("local"),
                Some(BindingMode::WaitForFirstConsumer)
            );
        }
        classes.delete("local".into(), StorageClass::default());
        assert_eq!(shared.volumes.read().class("local"), None);
    }

    #[tokio::test]
    async fn the_scheduler_waits_for_all_three_lists() {
        let shared = shared();
        let synced = &shared.synced;
        for flag in [
            &synced.nodes,
            &synced.bound_pods,
            &synced.pending_pods,
            &synced.topologies,
            &synced.namespaces,
            &synced.budgets,
            &synced.resource_slices,
            &synced.device_classes,
            &synced.resource_claims,
        ] {
            flag.store(true, Ordering::Release);
        }
        ClaimWatch(shared.clone()).synced();
        VolumeWatch(shared.clone()).synced();
        assert!(!synced.all(), "storage classes not listed yet");
        StorageClassWatch(shared.clone()).synced();
        assert!(synced.all());
    }
}
