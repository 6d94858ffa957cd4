//! The reserve phase: a decided pod is assumed on its node at once — marked in flight,
//! its usage counted on the node and a pessimistic reservation held on every NUMA zone
//! of the node the kubelet could give it in the [`crate::cache`] — so the next decision
//! already sees it while its bind is in flight ([`crate::bind`]). The new devices of
//! its resource claims are held in flight in the DRA store ([`hold_devices`]), so no
//! later decision is given them while the claim writes are on their way.

use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;

use crate::cycle::PodInput;
use crate::cycle::dra::DraChoice;
use crate::shared::Shared;

/// Marks the pod in flight and counts it on `node` in the state and the cache.
pub(crate) fn reserve(shared: &Shared, pod: &Pod, input: &PodInput, node: &str) {
    let uid = input.uid.clone();
    shared.in_flight.lock().insert(uid.clone());
    shared
        .state
        .write()
        .assume(&uid, node, input.filter.usage().clone());
    if let Some(r) = crate::cache::PodRef::from_pod(pod) {
        shared
            .cache
            .reserve(node, &r, &input.request, Instant::now());
    }
}

/// Undoes [`reserve`] (the bind failed or was refused).
pub(crate) fn unreserve(shared: &Shared, uid: &str, node: &str) {
    shared.state.write().forget(uid);
    shared.cache.unreserve(node, uid);
    shared.in_flight.lock().remove(uid);
}

/// Holds the pod's newly allocated devices in flight.
pub(crate) fn hold_devices(shared: &Shared, uid: &str, choice: &DraChoice) {
    shared.dra.write().hold(uid, &choice.allocation);
}

/// Drops the pod's devices in flight (its claim writes failed and were undone, or it
/// is gone); returns whether it had any.
pub(crate) fn release_devices(shared: &Shared, uid: &str) -> bool {
    shared.dra.write().release(uid)
}
