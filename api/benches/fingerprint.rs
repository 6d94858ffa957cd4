//! The pod-set fingerprint over one busy node's 300 pods.
//!
//! Both sides pay for it: the node agent on every publish, the scheduler whenever it
//! checks a report against its cache. `compute` is the whole job (hash every pod, sort,
//! digest); `sum` is the part left when the per-pod hashes are kept between calls.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use tas_api::fingerprint::{self, Fingerprint};

const PODS: usize = 300;

/// The characters Kubernetes uses for generated name suffixes.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A generated name suffix of `len` characters; seeded, so every run sees the same names.
fn suffix(rng: &mut StdRng, len: usize) -> String {
    let pick = |rng: &mut StdRng| SUFFIX_ALPHABET[rng.random_range(0..SUFFIX_ALPHABET.len())];
    (0..len).map(|_| char::from(pick(rng))).collect()
}

/// What one node runs: a DaemonSet pod per system agent, then Deployment and
/// StatefulSet pods of application teams.
fn node_pods() -> Vec<(String, String)> {
    let mut rng = StdRng::seed_from_u64(0x7a5_f1e6);
    let daemons = [
        ("kube-system", "kube-proxy"),
        ("kube-system", "calico-node"),
        ("kube-system", "csi-node-driver"),
        ("monitoring", "node-exporter"),
        ("monitoring", "fluent-bit"),
        ("tas-system", "tas-updater"),
    ];
    let deployments = [
        ("payments", "checkout-api"),
        ("payments", "ledger-worker"),
        ("search", "query-frontend"),
        ("search", "indexer"),
        ("ml-serving", "recommender-inference"),
        ("ml-serving", "feature-cache"),
        ("batch", "nightly-report"),
        ("default", "web"),
        ("monitoring", "prometheus-adapter"),
        ("kube-system", "coredns"),
    ];
    let statefulsets = [
        ("data", "kafka"),
        ("data", "postgres"),
        ("search", "opensearch"),
    ];

    let mut pods: Vec<(String, String)> = daemons
        .iter()
        .map(|&(ns, ds)| (ns.to_owned(), format!("{ds}-{}", suffix(&mut rng, 5))))
        .collect();
    let mut ordinal = 0;
    while pods.len() < PODS {
        if rng.random_range(0..8) == 0 {
            let (ns, sts) = statefulsets[rng.random_range(0..statefulsets.len())];
            pods.push((ns.to_owned(), format!("{sts}-{ordinal}")));
            ordinal += 1;
        } else {
            let (ns, deploy) = deployments[rng.random_range(0..deployments.len())];
            let replica_set = suffix(&mut rng, 10);
            pods.push((
                ns.to_owned(),
                format!("{deploy}-{replica_set}-{}", suffix(&mut rng, 5)),
            ));
        }
    }
    pods
}

fn bench_fingerprint(c: &mut Criterion) {
    let pods = node_pods();
    let pairs = || pods.iter().map(|(ns, name)| (ns.as_str(), name.as_str()));
    let hashed: Fingerprint = pairs().collect();

    let mut group = c.benchmark_group("fingerprint");
    group.throughput(Throughput::Elements(PODS as u64));
    group.bench_function("compute/300pods", |b| {
        b.iter(|| fingerprint::compute(black_box(pairs())));
    });
    group.bench_function("sum/300pods", |b| b.iter(|| black_box(&hashed).sum()));
    group.finish();
}

// Sample size and timings come from the command line (`make bench` sets them).
criterion_group!(benches, bench_fingerprint);
criterion_main!(benches);
