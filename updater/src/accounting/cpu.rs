//! `cpu` per zone: logical CPUs counted from sysfs and the kubelet's CPU ids.
//!
//! An id the kubelet reports twice (a CPU listed for two containers, as the kubelet does
//! when an init container's CPUs are reused) counts once: a CPU is either taken or not.

use std::collections::{BTreeMap, BTreeSet};

use super::{AccountingWarning, CPU, Ledger, Owner, containers};
use crate::podresources::v1;
use crate::sysfs::Topology;

/// Fills the `cpu` entry of every zone; returns the CPUs init containers keep per
/// zone when `pool` (the shared pool) tells them.
pub(super) fn account(
    topology: &Topology,
    allocatable_cpus: &[i64],
    pods: &[v1::PodResources],
    reserved: &BTreeSet<u32>,
    pool: Option<&BTreeSet<u32>>,
    ledger: &mut Ledger,
    warnings: &mut Vec<AccountingWarning>,
) -> Option<BTreeMap<u32, u64>> {
    for zone in &topology.zones {
        let entry = ledger.entry(zone.id, CPU);
        entry.capacity = zone.cpus.len() as u64;
        if allocatable_cpus.is_empty() {
            // CPU manager `none`: the kubelet lists no CPUs, but it still keeps the
            // reserved ones away from pods.
            entry.allocatable = zone.cpus.difference(reserved).count() as u64;
        }
    }

    let allocatable: BTreeSet<i64> = allocatable_cpus.iter().copied().collect();
    for &cpu in &allocatable {
        match zone_of(topology, cpu) {
            Some(zone) => ledger.entry(zone, CPU).allocatable += 1,
            None => warnings.push(AccountingWarning::CpuOutsideZones {
                cpu,
                owner: Owner::Allocatable,
            }),
        }
    }

    let mut exclusive: BTreeMap<i64, Owner> = BTreeMap::new();
    for (owner, container) in containers(pods) {
        for &cpu in &container.cpu_ids {
            exclusive.entry(cpu).or_insert_with(|| owner.clone());
        }
    }
    let init = pool
        .and_then(|pool| init_container_cpus(topology, &allocatable, &exclusive, pool, warnings));
    for (cpu, owner) in exclusive {
        match zone_of(topology, cpu) {
            Some(zone) => ledger.entry(zone, CPU).used += 1,
            None => warnings.push(AccountingWarning::CpuOutsideZones { cpu, owner }),
        }
    }
    if let Some(init) = &init {
        for (&zone, &cpus) in init {
            ledger.entry(zone, CPU).used += cpus;
        }
    }
    init
}

/// Per zone, the allocatable CPUs that are neither `exclusive` to a listed container
/// nor in the shared `pool`: kept by regular init containers. `None` (and a warning)
/// when the pool holds an exclusive CPU, and under the CPU manager `none` (no
/// allocatable CPU ids), where nothing is exclusive.
fn init_container_cpus(
    topology: &Topology,
    allocatable: &BTreeSet<i64>,
    exclusive: &BTreeMap<i64, Owner>,
    pool: &BTreeSet<u32>,
    warnings: &mut Vec<AccountingWarning>,
) -> Option<BTreeMap<u32, u64>> {
    if allocatable.is_empty() {
        return None;
    }
    let in_pool = |cpu: i64| u32::try_from(cpu).is_ok_and(|cpu| pool.contains(&cpu));
    let stale: Vec<u32> = exclusive
        .keys()
        .filter(|&&cpu| in_pool(cpu))
        .filter_map(|&cpu| u32::try_from(cpu).ok())
        .collect();
    if !stale.is_empty() {
        warnings.push(AccountingWarning::SharedPoolStale { cpus: stale });
        return None;
    }
    let mut kept: BTreeMap<u32, u64> = topology.zones.iter().map(|z| (z.id, 0)).collect();
    for &cpu in allocatable {
        if exclusive.contains_key(&cpu) || in_pool(cpu) {
            continue;
        }
        if let Some(zone) = zone_of(topology, cpu) {
            *kept.entry(zone).or_default() += 1;
        }
    }
    Some(kept)
}

fn zone_of(topology: &Topology, cpu: i64) -> Option<u32> {
    u32::try_from(cpu)
        .ok()
        .and_then(|cpu| topology.zone_of_cpu(cpu))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{container, pod, two_zones};
    use super::super::{AccountingOptions, NodeResources, compute};
    use super::*;

    /// `(capacity, allocatable, available)` of `cpu` in each zone.
    fn cpu_amounts(
        allocatable_cpus: &[i64],
        pods: &[v1::PodResources],
        reserved: &[u32],
    ) -> (Vec<(u64, u64, u64)>, Vec<AccountingWarning>) {
        let allocatable = v1::AllocatableResourcesResponse {
            cpu_ids: allocatable_cpus.to_vec(),
            ..Default::default()
        };
        let opts = AccountingOptions {
            reserved_cpus: reserved.iter().copied().collect(),
            ..AccountingOptions::default()
        };
        let node = compute(&two_zones(), &allocatable, pods, &opts);
        let amounts = node
            .zones
            .iter()
            .map(|zone| {
                let cpu = zone.resource(CPU).unwrap();
                (cpu.capacity, cpu.allocatable, cpu.available)
            })
            .collect();
        (amounts, node.warnings)
    }

    fn cpus(pod_name: &str, ids: &[i64]) -> v1::PodResources {
        pod(
            pod_name,
            vec![v1::ContainerResources {
                cpu_ids: ids.to_vec(),
                ..container("main")
            }],
        )
    }

    /// Zone 0 holds CPUs 0-3, zone 1 holds 4-7; CPU 0 is reserved.
    fn with_pool(pods: &[v1::PodResources], pool: &[u32]) -> NodeResources {
        let allocatable = v1::AllocatableResourcesResponse {
            cpu_ids: vec![1, 2, 3, 4, 5, 6, 7],
            ..Default::default()
        };
        let opts = AccountingOptions {
            reserved_cpus: BTreeSet::from([0]),
            shared_pool: Some(pool.iter().copied().collect()),
        };
        compute(&two_zones(), &allocatable, pods, &opts)
    }

    #[test]
    fn cpus_outside_the_shared_pool_and_the_listed_containers_are_kept_by_init_containers() {
        // Pod a holds 1, 2 (listed); 3 and 6 are neither listed nor in the pool: an
        // init container keeps them. The pool holds the reserved CPU too.
        let node = with_pool(&[cpus("a", &[1, 2])], &[0, 4, 5, 7]);
        assert_eq!(node.init_container_cpus, Some([(0, 1), (1, 1)].into()));
        let available: Vec<u64> = node
            .zones
            .iter()
            .map(|z| z.resource(CPU).unwrap().available)
            .collect();
        assert_eq!(available, [0, 3]);
        assert!(node.warnings.is_empty(), "{:?}", node.warnings);
    }

    #[test]
    fn a_pool_holding_an_exclusive_cpu_is_stale_and_counts_nothing() {
        let node = with_pool(&[cpus("a", &[1, 2])], &[0, 2, 3, 4, 5, 6, 7]);
        assert_eq!(node.init_container_cpus, None);
        assert_eq!(
            node.warnings,
            [AccountingWarning::SharedPoolStale { cpus: vec![2] }]
        );
        assert_eq!(node.zones[0].resource(CPU).unwrap().available, 1);
    }

    #[test]
    fn under_the_cpu_manager_none_nothing_is_counted() {
        let opts = AccountingOptions {
            shared_pool: Some(BTreeSet::from([0])),
            ..AccountingOptions::default()
        };
        let node = compute(
            &two_zones(),
            &v1::AllocatableResourcesResponse::default(),
            &[],
            &opts,
        );
        assert_eq!(node.init_container_cpus, None);
    }

    #[test]
    fn exclusive_cpus_reduce_available_in_their_zone() {
        // Zone 0 holds CPUs 0-3, zone 1 holds 4-7; CPU 0 and 4 are reserved.
        let (amounts, warnings) = cpu_amounts(
            &[1, 2, 3, 5, 6, 7],
            &[cpus("a", &[1, 2]), cpus("b", &[5])],
            &[0, 4],
        );
        assert_eq!(amounts, [(4, 3, 1), (4, 3, 2)]);
        assert_eq!(warnings, []);
    }

    #[test]
    fn cpu_manager_none_subtracts_reserved_cpus() {
        let (amounts, _) = cpu_amounts(&[], &[], &[0, 1, 4]);
        assert_eq!(amounts, [(4, 2, 2), (4, 3, 3)]);
        // Reserved CPUs outside every zone change nothing.
        let (amounts, _) = cpu_amounts(&[], &[], &[99]);
        assert_eq!(amounts, [(4, 4, 4), (4, 4, 4)]);
    }

    #[test]
    fn unknown_cpu_ids_are_skipped_and_reported() {
        let (amounts, warnings) = cpu_amounts(&[0, 1, 42], &[cpus("a", &[-1, 1])], &[]);
        assert_eq!(amounts, [(4, 2, 1), (4, 0, 0)]);
        assert_eq!(
            warnings,
            [
                AccountingWarning::CpuOutsideZones {
                    cpu: 42,
                    owner: Owner::Allocatable
                },
                AccountingWarning::CpuOutsideZones {
                    cpu: -1,
                    owner: Owner::container(&cpus("a", &[]), &container("main")),
                },
            ]
        );
    }

    #[test]
    fn a_cpu_listed_twice_counts_once() {
        let (amounts, _) = cpu_amounts(
            &[0, 1, 1, 2, 3],
            &[cpus("a", &[1, 2]), cpus("b", &[2])],
            &[],
        );
        assert_eq!(amounts[0], (4, 4, 2));
    }

    #[test]
    fn oversubscription_saturates_at_zero_with_a_warning() {
        // Only CPU 0 is allocatable in zone 0, but pods hold 0, 1 and 2.
        let (amounts, warnings) = cpu_amounts(&[0, 4], &[cpus("a", &[0, 1, 2])], &[]);
        assert_eq!(amounts[0], (4, 1, 0));
        assert_eq!(
            warnings,
            [AccountingWarning::Oversubscribed {
                zone: Some(0),
                resource: CPU.into(),
                allocatable: 1,
                used: 3
            }]
        );
    }
}
