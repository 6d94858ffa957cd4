//! The pod-set fingerprint over one busy node's 300 pods.
//!
//! Both sides pay for it: the node agent on every publish, the scheduler whenever it
//! checks a report against its cache. `compute` is the whole job (hash every pod, sort,
//! digest); `sum` is the part left when the per-pod hashes are kept between calls.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tas_api::fingerprint::{self, Fingerprint};

const PODS: usize = 300;

/// The characters Kubernetes uses for generated name suffixes.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Deterministic pseudo-random numbers (SplitMix64), so every run hashes the same pods.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn suffix(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from(SUFFIX_ALPHABET[self.below(SUFFIX_ALPHABET.len())]))
            .collect()
    }
}

/// What one node runs: a DaemonSet pod per system agent, then Deployment and
/// StatefulSet pods of application teams.
fn node_pods() -> Vec<(String, String)> {
    let mut rng = Rng(0x7a5_f1e6);
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
        .map(|&(ns, ds)| (ns.to_owned(), format!("{ds}-{}", rng.suffix(5))))
        .collect();
    let mut ordinal = 0;
    while pods.len() < PODS {
        if rng.below(8) == 0 {
            let (ns, sts) = statefulsets[rng.below(statefulsets.len())];
            pods.push((ns.to_owned(), format!("{sts}-{ordinal}")));
            ordinal += 1;
        } else {
            let (ns, deploy) = deployments[rng.below(deployments.len())];
            let replica_set = rng.suffix(10);
            pods.push((
                ns.to_owned(),
                format!("{deploy}-{replica_set}-{}", rng.suffix(5)),
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

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_fingerprint
}
criterion_main!(benches);
