//! The node's CPU layout: threads per core and the socket of each NUMA zone.
//!
//! The kubelet's CPU manager (`static`) takes a container's exclusive CPUs by topology:
//! whole NUMA nodes or sockets, then whole cores, then single threads, each step in an
//! order that depends on how many threads a core has and on which socket a NUMA node
//! sits. Which CPUs an init container got, and so whether the next container takes
//! them over, follows from that layout; the zones' counts alone do not show it.
//! Writers that read the CPU topology (TAS's agent, from sysfs) publish it as:
//!
//! | where | attribute | value |
//! |---|---|---|
//! | object | `cpuThreadsPerCore` | the logical CPUs of every physical core, e.g. `2`; written only when every core of the node's NUMA zones has the same number |
//! | zone | `cpuSocket` | the socket (physical package id) holding every CPU of the zone, e.g. `0`; written only when they all sit in one socket |
//!
//! A reader missing either (an older writer, a node whose layout the writer could not
//! read, a zone spread over sockets) knows nothing of the layout. Bad values are
//! errors a reader may ignore: they say nothing either.

use std::collections::BTreeMap;

use super::attributes::AttributeError;
use super::v1alpha2::{AttributeInfo, NodeResourceTopology, Zone};

/// The object attribute: logical CPUs per physical core.
pub const CPU_THREADS_PER_CORE: &str = "cpuThreadsPerCore";

/// The zone attribute: the socket of the zone's CPUs.
pub const CPU_SOCKET: &str = "cpuSocket";

/// What a writer knows of the node's CPU layout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuLayout {
    /// Logical CPUs per physical core, when every core has as many.
    pub threads_per_core: Option<u32>,
    /// NUMA id → the socket holding all of the zone's CPUs (zones spread over
    /// sockets, and zones without CPUs, are absent).
    pub zone_sockets: BTreeMap<u32, u32>,
}

/// The object attribute for `threads` per core.
pub fn object_attribute(threads: u32) -> AttributeInfo {
    AttributeInfo::new(CPU_THREADS_PER_CORE, threads.to_string())
}

/// The zone attribute for a zone whose CPUs sit in `socket`.
pub fn zone_attribute(socket: u32) -> AttributeInfo {
    AttributeInfo::new(CPU_SOCKET, socket.to_string())
}

/// The threads per core `nrt` publishes: `None` when absent, an error when not a
/// positive integer.
pub fn threads_per_core(nrt: &NodeResourceTopology) -> Result<Option<u32>, AttributeError> {
    let Some(value) = nrt.attribute(CPU_THREADS_PER_CORE) else {
        return Ok(None);
    };
    value
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .map(Some)
        .ok_or_else(|| AttributeError::NotPositiveInteger {
            attribute: CPU_THREADS_PER_CORE,
            value: value.to_owned(),
        })
}

/// The socket `zone` publishes for its CPUs: `None` when absent, an error when not a
/// non-negative integer.
pub fn zone_socket(zone: &Zone) -> Result<Option<u32>, AttributeError> {
    let Some(a) = zone.attributes.iter().find(|a| a.name == CPU_SOCKET) else {
        return Ok(None);
    };
    a.value
        .trim()
        .parse::<u32>()
        .map(Some)
        .map_err(|_| AttributeError::UnknownValue {
            attribute: CPU_SOCKET,
            value: a.value.clone(),
            expected: "a socket id (a non-negative integer)",
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nrt_with(value: Option<&str>) -> NodeResourceTopology {
        let mut nrt = NodeResourceTopology::default();
        if let Some(v) = value {
            nrt.attributes
                .push(AttributeInfo::new(CPU_THREADS_PER_CORE, v));
        }
        nrt
    }

    #[test]
    fn threads_per_core_reads_positive_integers_only() {
        assert_eq!(threads_per_core(&nrt_with(None)), Ok(None));
        assert_eq!(threads_per_core(&nrt_with(Some("2"))), Ok(Some(2)));
        assert_eq!(threads_per_core(&nrt_with(Some(" 1 "))), Ok(Some(1)));
        for bad in ["0", "-1", "two", ""] {
            let err = threads_per_core(&nrt_with(Some(bad))).unwrap_err();
            assert!(err.to_string().contains(CPU_THREADS_PER_CORE), "{err}");
        }
        assert_eq!(
            threads_per_core(&nrt_with(Some(&object_attribute(4).value))),
            Ok(Some(4))
        );
    }

    #[test]
    fn zone_socket_reads_what_the_writer_wrote() {
        let mut zone = Zone::default();
        assert_eq!(zone_socket(&zone), Ok(None));
        zone.attributes.push(zone_attribute(1));
        assert_eq!(zone_socket(&zone), Ok(Some(1)));
        zone.attributes[0].value = "socket-1".into();
        let err = zone_socket(&zone).unwrap_err();
        assert!(err.to_string().contains("socket-1"), "{err}");
    }
}
