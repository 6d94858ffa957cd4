//! Whether a container takes over the CPUs of a regular init container, as the CPU
//! manager `static` picks CPUs (`takeByTopologyNUMAPacked`, unchanged from kubelet
//! 1.34 to 1.37), when the object publishes the node's CPU layout
//! ([`tas_api::nrt::cpu_layout`]).
//!
//! The CPU manager takes a container's CPUs from its free CPUs and the reusable ones
//! (`cpusToReuse`) of the merged hint's zones. Within one zone whose CPUs sit in one
//! socket it goes: the whole zone when the request covers it; else whole free cores,
//! ascending core id (a core's id is its lowest CPU id); then single threads, those of
//! cores with fewest free threads first (lone threads before whole cores), ascending
//! core id. Two facts follow, on a zone the reusable CPUs all sit on and the container
//! is aligned on alone:
//!
//! - **One thread per core** ([`CpuOrder::OneThread`]): every allocation, on any zones,
//!   takes the lowest free CPU ids of each zone it touches, so the reusable CPUs stay
//!   the lowest of their zone ([`Shape::Lowest`]) and a container aligned on that zone
//!   takes them first: as many as it asks for.
//! - **Two threads per core** ([`CpuOrder::TwoThreads`]): init containers of the same
//!   request on the same zone get the same CPUs, what the CPU manager takes for that
//!   many from the zone ([`Shape::Greedy`]), and the first later container takes from
//!   the very same CPUs. Asking for `n` of them at least as many as the `k` reusable
//!   ones, it takes them all, except when `k` is odd and `n` even: its whole cores then
//!   cover the init container's whole cores but not its single thread when that was a
//!   lone thread (whose sibling was taken before), the lowest lone thread of the zone
//!   ([`Shape::LoneLowest`]). A container asking for an odd count takes that thread (its
//!   single threads start at the lone ones); an even count may leave it again.
//!
//! Anything else (more zones, several init requests, fewer CPUs asked than reusable,
//! an unknown layout, CPU manager options that change the order) is followed both
//! ways, as without the layout (see [`super::containers`]).

use tas_api::nrt::cpu_layout::{threads_per_core, zone_socket};
use tas_api::nrt::resource_managers::ResourceManagersConfig;
use tas_api::nrt::v1alpha2::NodeResourceTopology;

/// CPU manager options that leave the order in which the CPU manager takes CPUs as
/// described: `full-pcpus-only` refuses odd requests on SMT machines but allocates
/// alike; `strict-cpu-reservation` only keeps reserved CPUs out of the shared pool.
const ORDER_NEUTRAL_OPTIONS: [&str; 2] = ["full-pcpus-only", "strict-cpu-reservation"];

/// What the published layout says of the CPU manager's order within one zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum CpuOrder {
    /// Not published, malformed, a zone spread over sockets, another thread count, or
    /// CPU manager options that change the order.
    #[default]
    Unknown,
    /// One thread per core, every zone in one socket.
    OneThread,
    /// Two threads per core, every zone in one socket.
    TwoThreads,
}

impl CpuOrder {
    /// Reads the layout of `nrt` under the CPU manager settings `managers`; anything
    /// missing or malformed gives [`CpuOrder::Unknown`].
    pub(crate) fn from_nrt(nrt: &NodeResourceTopology, managers: &ResourceManagersConfig) -> Self {
        let neutral = managers
            .cpu_manager_options
            .keys()
            .all(|name| ORDER_NEUTRAL_OPTIONS.contains(&name.as_str()));
        let one_socket_each = !nrt.zones.is_empty()
            && nrt
                .zones
                .iter()
                .all(|z| matches!(zone_socket(z), Ok(Some(_))));
        if !neutral || !one_socket_each {
            return Self::Unknown;
        }
        match threads_per_core(nrt) {
            Ok(Some(1)) => Self::OneThread,
            Ok(Some(2)) => Self::TwoThreads,
            _ => Self::Unknown,
        }
    }
}

/// What is known of which CPUs the reusable ones are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Shape {
    /// Nothing.
    #[default]
    Unknown,
    /// One thread per core: the lowest free CPU ids of their zone.
    Lowest,
    /// Two threads per core: what the CPU manager takes for as many CPUs from the
    /// zone's free ones, which no container has changed since.
    Greedy,
    /// Two threads per core: one lone thread, the lowest of the zone's lone threads.
    LoneLowest,
}

/// How a container aligned on a zone set treats the reusable CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// It takes them first, as many as it asks for; what is left has this shape.
    Taken(Shape),
    /// It takes them first (the remainder has shape `taken`) or leaves `keep` of them
    /// (with shape `left`).
    Either {
        taken: Shape,
        keep: i64,
        left: Shape,
    },
}

/// Counts here are whole CPUs.
///
/// The shape of the reusable CPUs after a regular init container asking for `need`
/// CPUs on zone mask `mask`, where `free` CPUs are free or reusable, while `before` of
/// `shape` were left to reuse on `zones` (0 when none).
pub(super) fn after_init(
    order: CpuOrder,
    (shape, before, zones): (Shape, i64, u64),
    need: i64,
    mask: u64,
    free: i64,
) -> Shape {
    // Every container's CPUs inside the zone's free ones: nothing spills elsewhere.
    let inside = mask.count_ones() == 1 && need <= free;
    match order {
        CpuOrder::OneThread if inside && (before == 0 || shape == Shape::Lowest) => Shape::Lowest,
        CpuOrder::TwoThreads
            if inside
                && (before == 0 || (shape == Shape::Greedy && before == need && zones == mask)) =>
        {
            Shape::Greedy
        }
        _ => Shape::Unknown,
    }
}

/// What a sidecar or app container asking for `need` CPUs, aligned on zone mask
/// `mask`, does with `left` reusable CPUs of shape `shape` on `zones`. Only called when
/// it asks for fewer CPUs than `mask` has free (else it takes every one there).
pub(super) fn outcome(shape: Shape, left: i64, zones: u64, need: i64, mask: u64) -> Outcome {
    let both_ways = Outcome::Either {
        taken: Shape::Unknown,
        keep: left,
        left: Shape::Unknown,
    };
    if zones != mask || mask.count_ones() != 1 {
        return both_ways;
    }
    match shape {
        Shape::Lowest => Outcome::Taken(Shape::Lowest),
        Shape::Greedy if need >= left => {
            if left % 2 == 1 && need % 2 == 0 {
                Outcome::Either {
                    taken: Shape::Unknown,
                    keep: 1,
                    left: Shape::LoneLowest,
                }
            } else {
                Outcome::Taken(Shape::Unknown)
            }
        }
        Shape::LoneLowest if need % 2 == 1 => Outcome::Taken(Shape::Unknown),
        Shape::LoneLowest => Outcome::Either {
            taken: Shape::Unknown,
            keep: 1,
            left: Shape::LoneLowest,
        },
        Shape::Greedy | Shape::Unknown => both_ways,
    }
}
