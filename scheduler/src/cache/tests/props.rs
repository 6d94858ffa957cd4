//! Property: whatever the order of reserves and unreserves, every zone reads exactly
//! its NRT amount minus the live reservations held on it (every zone, or the zones a
//! reservation was narrowed to), snapshots taken earlier never change, and releasing
//! everything restores the original view.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Op {
    /// Reserve pod `n` with whole CPUs and Gi of memory.
    Reserve(u8, u8, u8),
    Unreserve(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..6, 1u8..=8, 1u8..=8).prop_map(|(n, c, m)| Op::Reserve(n, c, m)),
        2 => (0u8..6).prop_map(Op::Unreserve),
    ]
}

fn zone_amounts() -> impl Strategy<Value = Vec<(u32, u32)>> {
    prop::collection::vec((0u32..=64, 0u32..=128), 1..=4)
}

proptest! {
    #[test]
    fn reservations_are_exact_and_reversible(
        zones in zone_amounts(),
        ops in prop::collection::vec(op(), 0..40),
    ) {
        let cpus: Vec<String> = zones.iter().map(|(c, _)| c.to_string()).collect();
        let mems: Vec<String> = zones.iter().map(|(_, m)| format!("{m}Gi")).collect();
        let resources: Vec<[(&str, &str); 2]> = cpus
            .iter()
            .zip(&mems)
            .map(|(c, m)| [("cpu", c.as_str()), ("memory", m.as_str())])
            .collect();
        let layout: Vec<(u32, &[(&str, &str)])> = resources
            .iter()
            .enumerate()
            .map(|(id, r)| (id as u32, &r[..]))
            .collect();
        let cache = cache();
        cache.update_nrt(nrt_of(NODE, &layout, &[]));
        let original = cache.snapshot(NODE).expect("view").expect("usable");
        let now = Instant::now();

        // Live reservations: pod → (millicores, bytes).
        let mut live: BTreeMap<u8, (i64, i64)> = BTreeMap::new();
        let mut held = Vec::new();
        for op in ops {
            match op {
                Op::Reserve(n, c, m) => {
                    let p = pod(
                        &format!("p{n}"),
                        &[("cpu", &c.to_string()), ("memory", &format!("{m}Gi"))],
                    );
                    reserve(&cache, NODE, &p, now);
                    live.insert(n, (i64::from(c) * 1000, i64::from(m) * GI));
                }
                Op::Unreserve(n) => {
                    let released = cache.unreserve(NODE, &format!("uid-p{n}"));
                    prop_assert_eq!(released, live.remove(&n).is_some());
                }
            }
            // What each zone holds back: the reservations on it.
            let on_zone = |id: u32| {
                live.iter()
                    .filter(|(n, _)| {
                        cache
                            .reserved_zones(NODE, &format!("uid-p{n}"))
                            .is_none_or(|z| z.contains(id))
                    })
                    .fold((0, 0), |(c, m), (_, &(dc, dm))| (c + dc, m + dm))
            };
            let view = cache.snapshot(NODE).expect("view").expect("usable");
            for (id, &(c, m)) in zones.iter().enumerate() {
                let id = id as u32;
                let (cpu, memory) = on_zone(id);
                prop_assert_eq!(view.available(id, "cpu"), Some(i64::from(c) * 1000 - cpu));
                prop_assert_eq!(view.available(id, "memory"), Some(i64::from(m) * GI - memory));
            }
            prop_assert_eq!(cache.dirty_nodes().is_empty(), live.is_empty());
            let (cpu, memory) = on_zone(0);
            held.push((view, cpu, memory));
        }
        // Copy-on-write: every snapshot still reads what it read when taken.
        for (view, cpu, memory) in &held {
            prop_assert_eq!(view.available(0, "cpu"), Some(i64::from(zones[0].0) * 1000 - cpu));
            prop_assert_eq!(view.available(0, "memory"), Some(i64::from(zones[0].1) * GI - memory));
        }
        for n in live.keys() {
            let uid = format!("uid-p{n}");
            prop_assert!(cache.unreserve(NODE, &uid));
        }
        let restored = cache.snapshot(NODE).expect("view").expect("usable");
        prop_assert_eq!(&*restored, &*original);
        prop_assert_eq!(cache.metrics().dirty_nodes(), 0);
    }
}
