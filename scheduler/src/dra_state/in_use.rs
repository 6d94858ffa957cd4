//! The devices nobody else may be given: those of every claim's `status.allocation`
//! (as the claim watch delivers them) and those of allocations in flight (a pod
//! reserved with new devices whose claims the watch does not show allocated yet).
//!
//! A device is in use while either source holds it, so there is no window between a
//! claim write and the watch's copy of it: the in-flight entry is dropped device by
//! device only once the watch shows the device allocated, when its claim is deleted,
//! or when the pod is unreserved (its writes failed and were undone, or it is gone).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::ClaimKey;
use crate::dra::DeviceId;

/// See the module documentation.
#[derive(Debug, Default)]
pub(super) struct InUse {
    /// Device → how many allocated claims list it (more than one only if two claims
    /// were given the same device, which the API server does not prevent).
    allocated: HashMap<DeviceId, u32>,
    /// Pod uid → its devices in flight, with the claim each is for.
    in_flight: HashMap<String, Vec<(ClaimKey, DeviceId)>>,
    /// Device in flight → the pod holding it.
    holder: HashMap<DeviceId, String>,
    /// Every device held by either source; copied on write for snapshots.
    set: Arc<HashSet<DeviceId>>,
}

impl InUse {
    /// Every device in use now.
    pub(super) fn set(&self) -> Arc<HashSet<DeviceId>> {
        Arc::clone(&self.set)
    }

    /// A claim's allocated devices went from `old` to `new`. Returns whether a device
    /// was freed.
    pub(super) fn claim_changed(&mut self, old: &[DeviceId], new: &[DeviceId]) -> bool {
        for device in new {
            *self.allocated.entry(device.clone()).or_default() += 1;
            self.land(device);
            if !self.set.contains(device) {
                Arc::make_mut(&mut self.set).insert(device.clone());
            }
        }
        let mut freed = false;
        for device in old {
            if let Some(count) = self.allocated.get_mut(device) {
                *count -= 1;
                if *count == 0 {
                    self.allocated.remove(device);
                    freed |= self.drop_if_unheld(device);
                }
            }
        }
        freed
    }

    /// Holds `devices` for pod `uid` until they are seen allocated or released.
    pub(super) fn hold(&mut self, uid: &str, devices: Vec<(ClaimKey, DeviceId)>) {
        self.release(uid);
        let pending: Vec<(ClaimKey, DeviceId)> = devices
            .into_iter()
            .filter(|(_, d)| !self.allocated.contains_key(d))
            .collect();
        if pending.is_empty() {
            return;
        }
        let set = Arc::make_mut(&mut self.set);
        for (_, device) in &pending {
            set.insert(device.clone());
            self.holder.insert(device.clone(), uid.to_owned());
        }
        self.in_flight.insert(uid.to_owned(), pending);
    }

    /// Claim `key` is gone: no allocation of it will ever land; returns whether
    /// devices were freed.
    pub(super) fn claim_removed(&mut self, key: &ClaimKey) -> bool {
        let mut dropped = Vec::new();
        self.in_flight.retain(|_, devices| {
            devices.retain(|(claim, device)| {
                let gone = claim == key;
                if gone {
                    dropped.push(device.clone());
                }
                !gone
            });
            !devices.is_empty()
        });
        let mut freed = false;
        for device in &dropped {
            self.holder.remove(device);
            freed |= self.drop_if_unheld(device);
        }
        freed
    }

    /// Drops pod `uid`'s devices in flight; returns whether it had any.
    pub(super) fn release(&mut self, uid: &str) -> bool {
        let Some(devices) = self.in_flight.remove(uid) else {
            return false;
        };
        for (_, device) in &devices {
            self.holder.remove(device);
            self.drop_if_unheld(device);
        }
        true
    }

    /// The pods with devices in flight, and how many each holds.
    pub(super) fn in_flight(&self) -> impl Iterator<Item = (&str, usize)> {
        self.in_flight
            .iter()
            .map(|(uid, d)| (uid.as_str(), d.len()))
    }

    /// `device` is now allocated: it no longer needs to be held in flight.
    fn land(&mut self, device: &DeviceId) {
        let Some(uid) = self.holder.remove(device) else {
            return;
        };
        if let Some(devices) = self.in_flight.get_mut(&uid) {
            devices.retain(|(_, d)| d != device);
            if devices.is_empty() {
                self.in_flight.remove(&uid);
            }
        }
    }

    /// Takes `device` out of the set unless a source still holds it; returns whether it
    /// was taken out.
    fn drop_if_unheld(&mut self, device: &DeviceId) -> bool {
        if self.allocated.contains_key(device) || self.holder.contains_key(device) {
            return false;
        }
        if self.set.contains(device) {
            Arc::make_mut(&mut self.set).remove(device);
            return true;
        }
        false
    }
}
