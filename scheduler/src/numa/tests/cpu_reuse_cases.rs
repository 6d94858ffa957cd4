//! Reusable init-container CPUs on nodes whose object publishes the CPU layout
//! (`cpuThreadsPerCore`, zone `cpuSocket`): where the CPU manager's order says which
//! CPUs a container takes, the scheduler follows that one outcome (see `cpu_reuse`);
//! anything missing or malformed leaves it following both, as before.

use tas_api::nrt::v1alpha2::AttributeInfo;

use super::super::cpu_reuse::{CpuOrder, Outcome, Shape, after_init, outcome};
use super::kubelet_cases::{node_693_pod as pod, node_693_zones};
use super::*;

/// Each zone's `cpuSocket` (`None`: the zone has none).
type Sockets = [Option<&'static str>; 2];

/// Top-level attributes: name, value.
type Attributes = Vec<(&'static str, &'static str)>;

const SOCKETS: Sockets = [Some("0"), Some("0")];

/// A `restricted`, container-scope node of node 693's zones (`kubelet_cases`) with these
/// top-level attributes and zone sockets.
fn layout_node(attributes: &[(&str, &str)], sockets: Sockets) -> NodeTopology {
    let mut nrt = nrt_with("restricted", "container", &node_693_zones(), flat_distance);
    nrt.attributes
        .extend(attributes.iter().map(|&(n, v)| AttributeInfo::new(n, v)));
    for (zone, socket) in nrt.zones.iter_mut().zip(sockets) {
        if let Some(s) = socket {
            zone.attributes.push(AttributeInfo::new("cpuSocket", s));
        }
    }
    NodeTopology::from_nrt(&nrt).expect("valid NRT")
}

#[test]
fn one_thread_per_core_takes_the_init_containers_cpus_first() {
    // The lowest free CPUs of zone 0 are init0's, and app0 takes the lowest first.
    let node = layout_node(&[("cpuThreadsPerCore", "1")], SOCKETS);
    assert_fit("no SMT", &node, &pod("4"), Ok(&[0, 1]));
    assert_fit("no SMT", &node, &pod("1"), Ok(&[0, 1]));
}

#[test]
fn two_threads_per_core_leave_a_lone_thread_only_to_an_even_request() {
    let node = layout_node(&[("cpuThreadsPerCore", "2")], SOCKETS);
    // init0's CPU is the lone thread of zone 0 (its sibling reserved) or a thread of a
    // whole core: app0's two whole cores may leave the former.
    assert_fit("SMT, even", &node, &pod("4"), Err("container app1"));
    // An odd request takes a single thread after its whole cores: the lone one first,
    // or, with none, the one its own whole cores leave of init0's core.
    assert_fit("SMT, odd", &node, &pod("5"), Ok(&[0, 1]));
    assert_fit("SMT, odd", &node, &pod("3"), Ok(&[0, 1]));
}

#[test]
fn without_a_usable_layout_both_outcomes_are_followed() {
    let cases: [(&str, Attributes, Sockets); 6] = [
        ("no layout", vec![], [None, None]),
        ("no threads", vec![], SOCKETS),
        ("bad threads", vec![("cpuThreadsPerCore", "two")], SOCKETS),
        ("four threads", vec![("cpuThreadsPerCore", "4")], SOCKETS),
        (
            "a zone over sockets",
            vec![("cpuThreadsPerCore", "1")],
            [Some("0"), None],
        ),
        (
            "an option changing the order",
            vec![
                ("cpuThreadsPerCore", "1"),
                (
                    "cpuManagerPolicyOptions",
                    "distribute-cpus-across-numa=true",
                ),
            ],
            SOCKETS,
        ),
    ];
    for (case, attributes, sockets) in cases {
        let node = layout_node(&attributes, sockets);
        assert_fit(case, &node, &pod("5"), Err("container app1"));
    }
    // Options that keep the order keep the rule.
    let node = layout_node(
        &[
            ("cpuThreadsPerCore", "1"),
            (
                "cpuManagerPolicyOptions",
                "full-pcpus-only=true,strict-cpu-reservation=true",
            ),
        ],
        SOCKETS,
    );
    assert_fit("neutral options", &node, &pod("4"), Ok(&[0, 1]));
}

#[test]
fn a_bad_socket_leaves_the_node_usable() {
    let node = layout_node(&[("cpuThreadsPerCore", "1")], [Some("0"), Some("north")]);
    assert_eq!(node.cpu_order(), CpuOrder::Unknown);
    assert_fit("bad socket", &node, &pod("5"), Err("container app1"));
}

#[test]
fn init_containers_shape_the_reusable_cpus() {
    use CpuOrder::{OneThread, TwoThreads, Unknown};
    let none = (Shape::Unknown, 0, 0);
    // One zone, room for the request: the CPU manager's own pick.
    assert_eq!(after_init(OneThread, none, 3, 0b1, 5), Shape::Lowest);
    assert_eq!(after_init(TwoThreads, none, 3, 0b1, 5), Shape::Greedy);
    assert_eq!(after_init(Unknown, none, 3, 0b1, 5), Shape::Unknown);
    // Two zones, or more than the zone has: not one zone's pick.
    assert_eq!(after_init(TwoThreads, none, 3, 0b11, 5), Shape::Unknown);
    assert_eq!(after_init(TwoThreads, none, 6, 0b1, 5), Shape::Unknown);
    // A second init container asking as many on the same zone gets the same CPUs; one
    // asking another count gets others, which the union does not describe. Without SMT
    // every allocation keeps the lowest CPUs lowest.
    let greedy = (Shape::Greedy, 3, 0b1);
    let cases = [
        ((TwoThreads, greedy, 3, 0b1), Shape::Greedy),
        ((TwoThreads, greedy, 2, 0b1), Shape::Unknown),
        ((TwoThreads, greedy, 3, 0b10), Shape::Unknown),
        ((OneThread, (Shape::Lowest, 3, 0b1), 2, 0b10), Shape::Lowest),
    ];
    for ((order, before, need, mask), want) in cases {
        assert_eq!(
            after_init(order, before, need, mask, 5),
            want,
            "{order:?} {before:?}"
        );
    }
}

#[test]
fn later_containers_take_or_may_leave_them() {
    let both = |keep| Outcome::Either {
        taken: Shape::Unknown,
        keep,
        left: Shape::Unknown,
    };
    let lone = Outcome::Either {
        taken: Shape::Unknown,
        keep: 1,
        left: Shape::LoneLowest,
    };
    // (shape, left, zones, need, mask) → outcome
    let cases = [
        (
            (Shape::Lowest, 3, 0b1, 1, 0b1),
            Outcome::Taken(Shape::Lowest),
        ),
        ((Shape::Lowest, 3, 0b1, 4, 0b11), both(3)),
        (
            (Shape::Greedy, 3, 0b1, 3, 0b1),
            Outcome::Taken(Shape::Unknown),
        ),
        (
            (Shape::Greedy, 3, 0b1, 5, 0b1),
            Outcome::Taken(Shape::Unknown),
        ),
        ((Shape::Greedy, 3, 0b1, 4, 0b1), lone),
        (
            (Shape::Greedy, 2, 0b1, 4, 0b1),
            Outcome::Taken(Shape::Unknown),
        ),
        (
            (Shape::Greedy, 2, 0b1, 3, 0b1),
            Outcome::Taken(Shape::Unknown),
        ),
        ((Shape::Greedy, 4, 0b1, 3, 0b1), both(4)),
        (
            (Shape::LoneLowest, 1, 0b1, 3, 0b1),
            Outcome::Taken(Shape::Unknown),
        ),
        ((Shape::LoneLowest, 1, 0b1, 2, 0b1), lone),
        ((Shape::Unknown, 2, 0b1, 2, 0b1), both(2)),
        ((Shape::Greedy, 2, 0b10, 2, 0b1), both(2)),
    ];
    for ((shape, left, zones, need, mask), want) in cases {
        assert_eq!(
            outcome(shape, left, zones, need, mask),
            want,
            "{shape:?} {left} on {zones:b}, {need} on {mask:b}"
        );
    }
}
