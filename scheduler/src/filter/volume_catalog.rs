//! What the volume filters read of PersistentVolumeClaims, PersistentVolumes and
//! StorageClasses, kept small: the watches (`crate::watch`) store one compact record
//! per object, parsed once per update, never the objects themselves.
//!
//! - a claim: the volume it is bound to (and whether the binding is complete), its
//!   storage class, whether it is `ReadWriteOncePod`, whether it is being deleted and
//!   the uid of its controlling owner (a generic ephemeral volume's pod);
//! - a volume: its required node affinity, parsed, and its zone/region labels
//!   ([`super::volume_zone`]);
//! - a storage class: its `volumeBindingMode`.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use super::node_selector::Term;
use super::volume_zone::ZoneLabel;

/// Set by the PersistentVolume controller once a claim's binding is complete.
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The storage class annotation that predates `spec.storageClassName` (still honoured
/// first, as Kubernetes does).
const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// A PersistentVolumeClaim, as the volume filters need it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimInfo {
    /// `spec.volumeName`, when set.
    pub volume_name: Option<String>,
    /// The binding is complete (`pv.kubernetes.io/bind-completed`).
    pub bind_completed: bool,
    /// The storage class (annotation, else `spec.storageClassName`); `None` when unset.
    pub storage_class: Option<String>,
    /// `spec.accessModes` contains `ReadWriteOncePod`.
    pub read_write_once_pod: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The uid of the controlling owner reference, if any.
    pub controller_uid: Option<String>,
}

impl ClaimInfo {
    /// Reads `pvc`.
    pub fn new(pvc: &PersistentVolumeClaim) -> Self {
        let meta = &pvc.metadata;
        let annotations = meta.annotations.as_ref();
        let spec = pvc.spec.as_ref();
        Self {
            volume_name: spec
                .and_then(|s| s.volume_name.clone())
                .filter(|v| !v.is_empty()),
            bind_completed: annotations.is_some_and(|a| a.contains_key(BIND_COMPLETED)),
            storage_class: annotations
                .and_then(|a| a.get(BETA_STORAGE_CLASS).cloned())
                .or_else(|| spec.and_then(|s| s.storage_class_name.clone())),
            read_write_once_pod: spec
                .and_then(|s| s.access_modes.as_ref())
                .is_some_and(|m| m.iter().any(|m| m == "ReadWriteOncePod")),
            deleting: meta.deletion_timestamp.is_some(),
            controller_uid: meta
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone()),
        }
    }

    /// Bound the way kube-scheduler counts it: a volume named and the binding complete.
    pub fn is_bound(&self) -> bool {
        self.volume_name.is_some() && self.bind_completed
    }
}

/// A PersistentVolume's placement constraints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeInfo {
    /// `spec.nodeAffinity.required`, parsed: the node must match one term (terms
    /// Kubernetes' parser rejects, and empty terms, never match). `None` when unset.
    pub node_affinity: Option<Vec<Term>>,
    /// The zone and region labels, each with its allowed values.
    pub zones: Vec<ZoneLabel>,
}

impl VolumeInfo {
    /// Reads `pv`.
    pub fn new(pv: &PersistentVolume) -> Self {
        let node_affinity = pv
            .spec
            .as_ref()
            .and_then(|s| s.node_affinity.as_ref())
            .and_then(|a| a.required.as_ref())
            .map(|selector| {
                selector
                    .node_selector_terms
                    .iter()
                    .enumerate()
                    .filter_map(|(i, t)| Term::parse(i, t).ok().flatten())
                    .collect()
            });
        Self {
            node_affinity,
            zones: ZoneLabel::from_labels(pv.metadata.labels.as_ref()),
        }
    }

    /// Whether the volume constrains where its pods go at all.
    pub fn is_constrained(&self) -> bool {
        self.node_affinity.is_some() || !self.zones.is_empty()
    }
}

/// A StorageClass's `volumeBindingMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingMode {
    /// Claims are bound (or provisioned) as soon as they are created.
    Immediate,
    /// Binding waits for a pod using the claim to be scheduled.
    WaitForFirstConsumer,
}

impl BindingMode {
    /// Reads `class` (unset means `Immediate`).
    pub fn new(class: &StorageClass) -> Self {
        match class.volume_binding_mode.as_deref() {
            Some("WaitForFirstConsumer") => Self::WaitForFirstConsumer,
            _ => Self::Immediate,
        }
    }
}

/// Claims by namespace and name, volumes and storage classes by name.
#[derive(Debug, Default)]
pub struct VolumeCatalog {
    claims: HashMap<(String, String), ClaimInfo>,
    volumes: HashMap<String, Arc<VolumeInfo>>,
    classes: HashMap<String, BindingMode>,
}

impl VolumeCatalog {
    /// The claim `namespace/name`, if known.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&ClaimInfo> {
        self.claims.get(&(namespace.to_owned(), name.to_owned()))
    }

    /// The volume `name`, if known.
    pub fn volume(&self, name: &str) -> Option<&Arc<VolumeInfo>> {
        self.volumes.get(name)
    }

    /// The binding mode of storage class `name`, if known.
    pub fn class(&self, name: &str) -> Option<BindingMode> {
        self.classes.get(name).copied()
    }

    /// Adds or replaces a claim; returns whether anything changed.
    pub fn upsert_claim(&mut self, namespace: &str, name: &str, claim: ClaimInfo) -> bool {
        let key = (namespace.to_owned(), name.to_owned());
        self.claims.insert(key, claim.clone()) != Some(claim)
    }

    /// Forgets a claim.
    pub fn remove_claim(&mut self, namespace: &str, name: &str) {
        self.claims.remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// Keeps the claims for which `keep(namespace, name)` holds.
    pub fn retain_claims(&mut self, keep: impl Fn(&str, &str) -> bool) {
        self.claims.retain(|(ns, name), _| keep(ns, name));
    }

    /// Adds or replaces a volume; returns whether anything changed.
    pub fn upsert_volume(&mut self, name: &str, volume: VolumeInfo) -> bool {
        match self.volumes.get(name) {
            Some(old) if **old == volume => false,
            _ => {
                self.volumes.insert(name.to_owned(), Arc::new(volume));
                true
            }
        }
    }

    /// Forgets a volume.
    pub fn remove_volume(&mut self, name: &str) {
        self.volumes.remove(name);
    }

    /// Keeps the volumes for which `keep(name)` holds.
    pub fn retain_volumes(&mut self, keep: impl Fn(&str) -> bool) {
        self.volumes.retain(|name, _| keep(name));
    }

    /// Adds or replaces a storage class; returns whether anything changed.
    pub fn upsert_class(&mut self, name: &str, mode: BindingMode) -> bool {
        self.classes.insert(name.to_owned(), mode) != Some(mode)
    }

    /// Forgets a storage class.
    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
    }

    /// Keeps the storage classes for which `keep(name)` holds.
    pub fn retain_classes(&mut self, keep: impl Fn(&str) -> bool) {
        self.classes.retain(|name, _| keep(name));
    }
}
