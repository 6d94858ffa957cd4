//! What the node agent computes on every publish, for a large busy node
//! ([`busy_node`]: 256 CPUs in 8 zones, 200 pods).
//!
//! Benchmarked: the per-zone accounting, the fingerprint pod selection for both
//! methods, the NRT object build, and the three in sequence (a publish pass without
//! its I/O).

mod busy_node;

use std::hint::black_box;

use busy_node::{allocatable, pods, reserved_cpus, topology};
use criterion::{Criterion, criterion_group, criterion_main};
use tas_api::fingerprint::Method;
use tas_api::nrt::{TopologyManagerConfig, TopologyManagerPolicy, TopologyManagerScope};
use tas_updater::accounting::{self, AccountingOptions};
use tas_updater::nrt_object::{self, NodeRef, Observed};
use tas_updater::pods_fingerprint::FingerprintPolicy;

fn bench_publish_pass(c: &mut Criterion) {
    let topology = topology();
    let allocatable = allocatable(&topology);
    let pods = pods(&topology);
    let opts = AccountingOptions {
        reserved_cpus: reserved_cpus(),
        ..AccountingOptions::default()
    };
    let all = FingerprintPolicy::new(Some(Method::All), &["kube-system/*".to_owned()]);
    let exclusive = FingerprintPolicy::new(Some(Method::WithExclusiveResources), &[]);
    let node = NodeRef {
        name: "worker-256c-0042".to_owned(),
        uid: "6f1c2a9e-3b4d-4e8f-9a7b-1c2d3e4f5a6b".to_owned(),
    };
    let resource_managers = tas_api::nrt::ResourceManagersConfig::default();
    let topology_manager = TopologyManagerConfig {
        policy: TopologyManagerPolicy::SingleNumaNode,
        scope: TopologyManagerScope::Container,
        ..TopologyManagerConfig::default()
    };

    let resources = accounting::compute(&topology, &allocatable, &pods, &opts);
    let pinned = pods
        .iter()
        .filter(|p| accounting::holds_exclusive_resources(p))
        .count();
    let cpus: Vec<_> = resources
        .zones
        .iter()
        .filter_map(|z| z.resource(accounting::CPU))
        .collect();
    eprintln!(
        "{} CPUs in {} zones, {} pods ({pinned} pinned, {} of {} CPUs exclusive): {} warnings",
        cpus.iter().map(|r| r.capacity).sum::<u64>(),
        topology.zones.len(),
        pods.len(),
        cpus.iter()
            .map(|r| r.allocatable - r.available)
            .sum::<u64>(),
        cpus.iter().map(|r| r.allocatable).sum::<u64>(),
        resources.warnings.len()
    );
    let fingerprint = all.compute(&pods).zip(all.method());

    let mut group = c.benchmark_group("updater");
    group.bench_function("accounting/256cpus-200pods", |b| {
        b.iter(|| accounting::compute(&topology, &allocatable, black_box(&pods), &opts));
    });
    group.bench_function("fingerprint-all/200pods", |b| {
        b.iter(|| all.compute(black_box(&pods)));
    });
    group.bench_function("fingerprint-exclusive/200pods", |b| {
        b.iter(|| exclusive.compute(black_box(&pods)));
    });
    group.bench_function("nrt-object/8zones", |b| {
        b.iter(|| {
            nrt_object::build(&Observed {
                node: &node,
                topology: &topology,
                resources: black_box(&resources),
                topology_manager,
                resource_managers: &resource_managers,
                fingerprint: fingerprint.clone(),
            })
        });
    });
    group.bench_function("publish-pass/256cpus-200pods", |b| {
        b.iter(|| {
            let pods = black_box(&pods);
            let resources = accounting::compute(&topology, &allocatable, pods, &opts);
            nrt_object::build(&Observed {
                node: &node,
                topology: &topology,
                resources: &resources,
                topology_manager,
                resource_managers: &resource_managers,
                fingerprint: all.compute(pods).zip(all.method()),
            })
        });
    });
    group.finish();
}

// Sample size and timings come from the command line (`make bench` sets them).
criterion_group!(benches, bench_publish_pass);
criterion_main!(benches);
