//! The merge by distinct partial merges (`merge_closest_fast`, used for `best-effort`
//! requests that cannot be aligned) picks what the literal cross product picks.

use proptest::prelude::*;
use tas_api::nrt::TopologyManagerPolicy;

use super::super::hint::{Hint, ResourceHints, merge_closest, merge_closest_fast};

const ZONES: u32 = 4;

fn hint() -> impl Strategy<Value = Hint> {
    (
        prop::option::weighted(0.9, 1u64..(1 << ZONES)),
        any::<bool>(),
    )
        .prop_map(|(mask, preferred)| Hint { mask, preferred })
}

fn resource_hints() -> impl Strategy<Value = ResourceHints> {
    prop_oneof![
        1 => Just(ResourceHints::DontCare),
        8 => prop::collection::vec(hint(), 0..8).prop_map(ResourceHints::Hints),
    ]
}

fn distance(a: u32, b: u32) -> u32 {
    if a == b {
        10
    } else {
        11 + (a * 7 + b * 3) % 13
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn distinct_partial_merges_pick_what_the_cross_product_picks(
        lists in prop::collection::vec(resource_hints(), 1..5),
        closest in any::<bool>(),
        policy in prop_oneof![
            Just(TopologyManagerPolicy::BestEffort),
            Just(TopologyManagerPolicy::Restricted),
        ],
    ) {
        let all = (1 << ZONES) - 1;
        let d: &dyn Fn(u32, u32) -> u32 = &distance;
        let closest = closest.then_some(d);
        prop_assert_eq!(
            merge_closest_fast(policy, all, &lists, closest),
            merge_closest(policy, all, &lists, closest)
        );
    }
}
