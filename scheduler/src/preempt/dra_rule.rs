//! Would the pod's resource claims be allocatable once the victims are gone?
//!
//! A claim reserved only for victims is deallocated once they are gone (the
//! ResourceClaim controller removes deleted pods from `reservedFor` and clears an
//! allocation nobody uses; a claim generated for a pod goes with it), so its devices
//! count as free for the preemptor. A claim also reserved for a pod that stays keeps
//! its devices. The claims are read once per preemption attempt ([`Holders`]); each
//! victim set the search tries is judged by the ordinary DRA fit
//! ([`crate::cycle::dra::DraInput::fit_with`]) on the zones the NUMA rule found for the
//! pod, with those devices out of the in-use set.
//!
//! Like the NUMA rule this only decides whom to evict: the preemptor is bound later by
//! an ordinary cycle, once the claims' watch shows the devices free.

use std::collections::HashSet;

use crate::cycle::dra::DraInput;
use crate::dra::DeviceId;
use crate::dra_state::DraStore;
use crate::filter::NodeInfo;
use crate::numa::NumaSet;
use crate::pod_meta::PodMeta;

/// The allocated claims reserved for someone: their consumers' uids and devices.
#[derive(Debug, Default)]
pub struct Holders {
    claims: Vec<(Vec<String>, Vec<DeviceId>)>,
}

impl Holders {
    /// The claims of `store`.
    pub fn from_store(store: &DraStore) -> Self {
        Self {
            claims: store.reserved_allocations(),
        }
    }

    /// The devices of the claims every consumer of which is among `victims`.
    pub fn freed_by(&self, victims: &[&PodMeta]) -> Vec<&DeviceId> {
        let gone: HashSet<&str> = victims.iter().map(|v| v.uid.as_str()).collect();
        self.claims
            .iter()
            .filter(|(consumers, _)| consumers.iter().all(|c| gone.contains(c.as_str())))
            .flat_map(|(_, devices)| devices)
            .collect()
    }
}

/// Whether `dra` (the preemptor's claims) can be allocated on `node` inside `zones`
/// once `victims` are gone.
pub fn fits_without(
    dra: &DraInput,
    holders: &Holders,
    node: &NodeInfo,
    zones: Option<NumaSet>,
    victims: &[&PodMeta],
) -> bool {
    let freed = holders.freed_by(victims);
    if freed.is_empty() {
        return dra.fit(node, zones).is_ok();
    }
    let mut in_use = HashSet::clone(&dra.cluster.in_use);
    for device in freed {
        in_use.remove(device);
    }
    dra.fit_with(node, zones, &in_use).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::dra::{DRIVER, allocated, claim};

    fn meta(uid: &str) -> PodMeta {
        PodMeta {
            uid: uid.to_owned(),
            ..PodMeta::default()
        }
    }

    #[test]
    fn only_claims_of_victims_alone_are_freed() {
        let mut store = DraStore::default();
        let only_a = allocated(
            claim("ns", "a", DRIVER, 1),
            "n",
            "n",
            &["gpu-0"],
            &[("a", "uid-a")],
        );
        let shared = allocated(
            claim("ns", "s", DRIVER, 1),
            "n",
            "n",
            &["gpu-1"],
            &[("a", "uid-a"), ("b", "uid-b")],
        );
        let unreserved = allocated(claim("ns", "u", DRIVER, 1), "n", "n", &["gpu-2"], &[]);
        for c in [only_a, shared, unreserved] {
            store.upsert_claim(c);
        }
        let holders = Holders::from_store(&store);
        let (a, b) = (meta("uid-a"), meta("uid-b"));
        let names = |freed: Vec<&DeviceId>| {
            let mut names: Vec<String> = freed.iter().map(|d| d.device.clone()).collect();
            names.sort();
            names
        };
        assert_eq!(names(holders.freed_by(&[&a])), ["gpu-0"]);
        assert_eq!(names(holders.freed_by(&[&a, &b])), ["gpu-0", "gpu-1"]);
        assert!(holders.freed_by(&[&b]).is_empty());
    }
}
