//! Property: with reservations narrowed to the zones the kubelet could give each pod,
//! a kubelet admitting the scheduler's pods in decision order never rejects one.
//!
//! Each case is a random node (2–8 zones, `restricted` or `single-numa-node`, `pod` or
//! `container` scope) and a random history: pods the node already runs (another
//! scheduler's, reserved on observation or not), some deleted while the NRT still
//! counts them, then a random interleaving of decisions (the scheduler's own fit on the
//! cache's view, then a reservation), admissions in decision order, deletions, NRT
//! objects published from the true state (with a pod fingerprint) and resyncs. The
//! kubelet is the scheduler's kubelet-faithful replay ([`numa::fit`]) run on the true
//! free amounts, one container at a time in `container` scope; a multi-zone
//! allocation is split over its zones in a random order.
//!
//! The same cases are run with the unsafe rule (zones computed against the view
//! instead of an upper bound of what is free) to show the property can fail, and with
//! every-zone reservations to show the harness itself admits everything.

use std::collections::{HashMap, VecDeque};

use k8s_openapi::api::core::v1::Pod;
use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};

use super::super::node::test_rule::{self, Rule};
use super::*;
use crate::numa::{self, NodeTopology, NumaSet};

/// Cases per rule; `TAS_LANDING_CASES` overrides.
const CASES: u64 = 3_000;

struct Node {
    policy: &'static str,
    scope: &'static str,
    /// CPUs (and Gi of memory) per zone.
    cap: Vec<i64>,
}

/// The true free CPUs and Gi of memory per zone.
#[derive(Clone, Debug)]
struct Truth {
    cpu: Vec<i64>,
    mem: Vec<i64>,
}

/// Per zone, the CPUs and Gi a pod took.
type Allocation = Vec<(usize, i64, i64)>;

fn nrt(node: &Node, truth: &Truth, fingerprint: Option<&[String]>) -> NodeResourceTopology {
    let amounts: Vec<[(String, String); 2]> = node
        .cap
        .iter()
        .map(|c| {
            [
                ("cpu".to_owned(), c.to_string()),
                ("memory".to_owned(), format!("{c}Gi")),
            ]
        })
        .collect();
    let pairs: Vec<Vec<(&str, &str)>> = amounts
        .iter()
        .map(|a| a.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect())
        .collect();
    let zones: Vec<(u32, &[(&str, &str)])> = pairs
        .iter()
        .enumerate()
        .map(|(i, p)| (i as u32, p.as_slice()))
        .collect();
    let mut nrt = nrt_of(NODE, &zones, &[]);
    for a in &mut nrt.attributes {
        match a.name.as_str() {
            "topologyManagerPolicy" => a.value = node.policy.to_owned(),
            "topologyManagerScope" => a.value = node.scope.to_owned(),
            _ => {}
        }
    }
    for (z, zone) in nrt.zones.iter_mut().enumerate() {
        for r in &mut zone.resources {
            r.available = match r.name.as_str() {
                "cpu" => format!("{}m", truth.cpu[z]),
                _ => format!("{}Gi", truth.mem[z]),
            }
            .as_str()
            .into();
        }
    }
    match fingerprint {
        Some(pods) => {
            let pods: Vec<(&str, &str)> = pods.iter().map(|p| ("ns", p.as_str())).collect();
            with_fingerprint(nrt, &pods, None)
        }
        None => nrt,
    }
}

/// A Guaranteed pod: one container per entry of `cpus`, each with that many CPUs and
/// as many Gi of memory.
fn pod_of(name: &str, cpus: &[i64], scheduler: &str, running: bool) -> Pod {
    let mut builder = pod(name, &[]).by(scheduler).on(NODE);
    if running {
        builder = builder.running();
    }
    let mut p = builder.build();
    let spec = p.spec.as_mut().expect("spec");
    let template = spec.containers[0].clone();
    spec.containers = cpus
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let mut container = template.clone();
            container.name = format!("c{i}");
            container.resources = Some(k8s_openapi::api::core::v1::ResourceRequirements {
                limits: quantities(&owned(&[
                    ("cpu", &c.to_string()),
                    ("memory", &format!("{c}Gi")),
                ])),
                ..Default::default()
            });
            container
        })
        .collect();
    p
}

fn request_of(cpus: &[i64]) -> PodRequest {
    PodRequest::from_pod(&pod_of("r", cpus, SCHEDULER, false)).expect("valid")
}

/// Takes `need` of `free` from the zones of `mask`, in a random order.
fn take(free: &mut [i64], mask: NumaSet, mut need: i64, rng: &mut StdRng) -> Vec<(usize, i64)> {
    let mut zones: Vec<usize> = mask.iter().map(|z| z as usize).collect();
    zones.shuffle(rng);
    let mut taken = Vec::new();
    for z in zones {
        let t = need.min(free[z].max(0));
        free[z] -= t;
        need -= t;
        taken.push((z, t));
    }
    assert_eq!(need, 0, "the fit admitted more than the zones hold");
    taken
}

/// The kubelet: admits the pod on `truth` and returns where it went, or `None`.
fn admit(node: &Node, truth: &mut Truth, cpus: &[i64], rng: &mut StdRng) -> Option<Allocation> {
    let units: Vec<Vec<i64>> = if node.scope == "pod" {
        vec![cpus.to_vec()]
    } else {
        cpus.iter().map(|&c| vec![c]).collect()
    };
    let mut next = truth.clone();
    let mut allocation = Vec::new();
    for unit in units {
        let topology = NodeTopology::from_nrt(&nrt(node, &next, None)).expect("valid");
        let placement = numa::fit(&topology, &request_of(&unit), &|_| false).ok()?;
        let mask = placement.zones.expect("aligned");
        let need: i64 = unit.iter().sum();
        let cpu = take(&mut next.cpu, mask, need * 1000, rng);
        let mem = take(&mut next.mem, mask, need, rng);
        allocation.extend(cpu.into_iter().map(|(z, c)| (z, c, 0)));
        allocation.extend(mem.into_iter().map(|(z, m)| (z, 0, m)));
    }
    *truth = next;
    Some(allocation)
}

fn sizes(rng: &mut StdRng, largest: i64) -> Vec<i64> {
    let containers = rng.random_range(1..=2);
    (0..containers)
        .map(|_| rng.random_range(1..=largest.max(1)))
        .collect()
}

/// Reservations made, and of those held on fewer than every zone.
#[derive(Default, Clone, Copy)]
struct Counts {
    reserved: u64,
    narrowed: u64,
}

/// One case; `Err` describes the first kubelet rejection.
fn run_case(seed: u64, counts: &mut Counts) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let zones = rng.random_range(2..=8);
    let node = Node {
        policy: ["restricted", "single-numa-node"][rng.random_range(0..2)],
        scope: ["pod", "container"][rng.random_range(0..2)],
        cap: (0..zones)
            .map(|_| [4, 6, 8][rng.random_range(0..3)])
            .collect(),
    };
    let largest = *node.cap.iter().max().expect("zones");
    let mut config = config();
    config.foreign_pods = if rng.random_bool(0.5) {
        ForeignPodsDetection::All
    } else {
        ForeignPodsDetection::None
    };
    let cache = cache_with(config.clone());
    let mut truth = Truth {
        cpu: node.cap.iter().map(|c| c * 1000).collect(),
        mem: node.cap.clone(),
    };
    let mut now = Instant::now();
    // Pods on the node: name → (containers, scheduler, allocation).
    let mut running: HashMap<String, (Vec<i64>, &str, Allocation)> = HashMap::new();
    let mut order: Vec<String> = Vec::new();

    // What the node runs before this scheduler places anything.
    for i in 0..rng.random_range(0..=3 * zones) {
        let cpus = sizes(&mut rng, largest);
        if let Some(allocation) = admit(&node, &mut truth, &cpus, &mut rng) {
            let name = format!("old{i}");
            order.push(name.clone());
            running.insert(name, (cpus, "other", allocation));
        }
    }
    let names = |order: &[String], running: &HashMap<_, _>| -> Vec<String> {
        order
            .iter()
            .filter(|n| running.contains_key(*n))
            .cloned()
            .collect()
    };
    cache.update_nrt(nrt(&node, &truth, Some(&names(&order, &running))));
    for name in &order {
        let (cpus, by, _) = &running[name];
        cache.pod_bound(&pod_of(name, cpus, by, true), now);
    }

    let mut pending: VecDeque<(String, Vec<i64>)> = VecDeque::new();
    let mut decided = 0;
    let free_pod = |truth: &mut Truth, allocation: &Allocation| {
        for &(z, c, m) in allocation {
            truth.cpu[z] += c;
            truth.mem[z] += m;
        }
    };
    let steps = rng.random_range(8..=40);
    for step in 0..steps + 64 {
        let finishing = step >= steps;
        if finishing && pending.is_empty() {
            break;
        }
        let action = if finishing {
            8
        } else {
            rng.random_range(0..22)
        };
        now += secs(1);
        match action {
            // The scheduler decides a pod on its view and reserves it.
            0..=7 => {
                let cpus = sizes(&mut rng, largest);
                let request = request_of(&cpus);
                let view = cache.snapshot(NODE).expect("view").expect("usable");
                if numa::fit(&view, &request, &|_| false).is_ok() {
                    let name = format!("new{decided}");
                    decided += 1;
                    let uid = format!("uid-{name}");
                    cache.reserve(NODE, &PodRef::new(&uid, "ns", &name), &request, now);
                    counts.reserved += 1;
                    let held = cache.reserved_zones(NODE, &uid);
                    if held.is_some_and(|z| (z.len() as usize) < zones) {
                        counts.narrowed += 1;
                    }
                    pending.push_back((name, cpus));
                }
            }
            // The kubelet admits the next pod, in decision order.
            8..=12 => {
                let Some((name, cpus)) = pending.pop_front() else {
                    continue;
                };
                let before = truth.clone();
                let Some(allocation) = admit(&node, &mut truth, &cpus, &mut rng) else {
                    return Err(format!(
                        "seed {seed}: {} {} {:?}: kubelet rejected {name} {cpus:?} on {before:?}; view {:?}",
                        node.policy,
                        node.scope,
                        node.cap,
                        cache.snapshot(NODE),
                    ));
                };
                cache.pod_bound(&pod_of(&name, &cpus, SCHEDULER, true), now);
                order.push(name.clone());
                running.insert(name, (cpus, SCHEDULER, allocation));
            }
            // A pod is deleted: the cache hears of it, the kubelet frees it.
            13..=17 => {
                let alive = names(&order, &running);
                let Some(name) = alive.get(rng.random_range(0..alive.len().max(1))) else {
                    continue;
                };
                let (cpus, by, allocation) = running.remove(name).expect("running");
                cache.pod_deleted(&pod_of(name, &cpus, by, true), now);
                free_pod(&mut truth, &allocation);
            }
            // The node agent publishes the true state.
            18 => {
                cache.update_nrt(nrt(&node, &truth, Some(&names(&order, &running))));
            }
            // Another scheduler's pod lands on the node while none of ours is on its
            // way (otherwise it could take the room ours was decided on, whatever the
            // rule); the cache reserves it on every zone when it sees it bound (with
            // foreign-pod detection off it would not, and every rule would count on
            // room that pod took).
            20..=21 if config.foreign_pods == ForeignPodsDetection::All && pending.is_empty() => {
                let cpus = sizes(&mut rng, largest);
                if let Some(allocation) = admit(&node, &mut truth, &cpus, &mut rng) {
                    let name = format!("foreign{step}");
                    cache.pod_bound(&pod_of(&name, &cpus, "other", true), now);
                    order.push(name.clone());
                    running.insert(name, (cpus, "other", allocation));
                }
            }
            // The resync timer.
            _ => {
                now += config.resync_period;
                cache.resync(now);
            }
        }
    }
    Ok(())
}

/// Runs every case under `rule`; returns the failures.
fn failures(rule: Rule) -> (Vec<String>, Counts) {
    let cases = std::env::var("TAS_LANDING_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES);
    test_rule::set(rule);
    let mut counts = Counts::default();
    let failed: Vec<String> = (0..cases)
        .filter_map(|seed| run_case(seed, &mut counts).err())
        .collect();
    test_rule::set(Rule::Narrow);
    eprintln!(
        "{rule:?}: {cases} cases, {} failed; {} of {} reservations narrowed",
        failed.len(),
        counts.narrowed,
        counts.reserved
    );
    (failed, counts)
}

#[test]
fn narrowed_reservations_never_let_the_kubelet_reject_a_pod() {
    let (failed, counts) = failures(Rule::Narrow);
    assert!(
        failed.is_empty(),
        "{} cases failed, first: {}",
        failed.len(),
        failed[0]
    );
    assert!(
        counts.narrowed * 10 > counts.reserved,
        "the rule narrows often enough to matter"
    );
}

#[test]
fn every_zone_reservations_never_let_the_kubelet_reject_a_pod() {
    let (failed, _) = failures(Rule::EveryZone);
    assert!(
        failed.is_empty(),
        "{} cases failed, first: {}",
        failed.len(),
        failed[0]
    );
}

#[test]
fn zones_from_the_view_let_the_kubelet_reject_pods() {
    let (failed, _) = failures(Rule::FromView);
    assert!(!failed.is_empty(), "the unsafe rule should fail somewhere");
}
