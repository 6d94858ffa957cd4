//! Size bounds of a NodeResourceTopology object, shared by the CRD schema
//! (`maxItems`/`maxLength`), the node agents' admission policy
//! (`config/policy/updater-own-node-policy.yaml`) and the scheduler's sanity checks.
//!
//! The published CRD has no bounds, so one object can be as large as the API server
//! accepts (megabytes) and cost every reader seconds of CPU. These bounds only narrow
//! it: every object a real machine produces fits, with headroom.
//!
//! | bound | figure | why |
//! |---|---|---|
//! | zones | 128 | the kubelet's Topology Manager holds NUMA ids 0–63 in a 64-bit mask; the largest shipping machines (32-socket systems split per socket, CXL memory-only nodes) stay below 64. Twice that leaves room for other writers' non-NUMA zones. |
//! | costs per zone | 128 | one distance per zone, so never more than the zones. |
//! | resources per zone | 64 | `cpu`, `memory`, up to three hugepage sizes and the device-plugin resources of the zone (GPUs, SR-IOV pools, FPGAs): real nodes list fewer than 20. |
//! | attributes (node) | 64 | TAS writes 9; other writers a handful more. |
//! | attributes (zone) | 32 | no known writer sets more than a few. |
//! | topologyPolicies | 16 | a deprecated list with one entry in practice. |
//! | zone name, type, parent, cost name | 64 characters | `node-<id>` and `Node` are short; 64 is a DNS label. |
//! | resource and attribute names | 317 characters | a qualified name: a 253-character DNS prefix, `/`, a 63-character name. |
//! | attribute values, topology policy names | 1024 characters | fingerprints and policy names are under 64. |
//! | quantities (as strings) | 64 characters | the largest int64 written out, with a suffix and sign, is under 30. |

/// Most zones in one object.
pub const MAX_ZONES: i64 = 128;
/// Most cost entries of one zone: one per zone.
pub const MAX_COSTS_PER_ZONE: i64 = MAX_ZONES;
/// Most resources of one zone.
pub const MAX_RESOURCES_PER_ZONE: i64 = 64;
/// Most node-wide attributes.
pub const MAX_ATTRIBUTES: i64 = 64;
/// Most attributes of one zone.
pub const MAX_ZONE_ATTRIBUTES: i64 = 32;
/// Most entries of the deprecated `topologyPolicies`.
pub const MAX_TOPOLOGY_POLICIES: i64 = 16;
/// Longest zone name, zone type, parent name or cost destination.
pub const MAX_ZONE_NAME_LENGTH: i64 = 64;
/// Longest resource or attribute name (a Kubernetes qualified name).
pub const MAX_QUALIFIED_NAME_LENGTH: i64 = 317;
/// Longest attribute value or topology policy name.
pub const MAX_VALUE_LENGTH: i64 = 1024;
/// Longest quantity written as a string.
pub const MAX_QUANTITY_LENGTH: i64 = 64;

/// Most NUMA zones a node agent publishes: the kubelet cannot represent more (see the
/// module documentation). The admission policy holds node agents to it.
pub const MAX_AGENT_ZONES: i64 = 64;

// The CRD's bound leaves other writers room beyond what a node agent publishes.
const _: () = assert!(MAX_ZONES >= 2 * MAX_AGENT_ZONES);
