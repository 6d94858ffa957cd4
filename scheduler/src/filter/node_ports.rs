//! `NodePorts`: are the pod's host ports free on the node?
//!
//! A host port is a `(protocol, port)` pair bound on one host IP; an empty IP means
//! `0.0.0.0` and an empty protocol means `TCP`, as the kubelet applies them. A wanted
//! port on `0.0.0.0` conflicts with the same pair on any IP; a wanted port on a
//! specific IP conflicts with the same pair on that IP or on `0.0.0.0`. Only app
//! containers and sidecars (init containers with `restartPolicy: Always`) hold ports
//! while the pod runs, so regular init containers' ports are ignored on both sides.
//!
//! [`HostPortSet`] indexes the node's used ports by `(protocol, port)` so a check is
//! one hash lookup per wanted port. Unlike kube-scheduler's set it counts holders, so
//! removing one of two pods that (wrongly) share a port keeps the port marked used.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::node::NodeInfo;
use super::pod::PodFilterInput;
use super::reason::FilterReason;

/// The IP meaning "every address of the host".
const BIND_ALL: &str = "0.0.0.0";

/// A protocol and port number.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProtocolPort {
    /// `TCP`, `UDP` or `SCTP` (defaulted to `TCP`).
    pub protocol: Box<str>,
    /// The host port, always positive.
    pub port: i32,
}

/// A host port a container binds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// The host IP (defaulted to `0.0.0.0`).
    pub ip: Box<str>,
    /// Protocol and port.
    pub protocol_port: ProtocolPort,
}

/// The host ports `pod` holds while it runs: every positive `hostPort` of its app
/// containers and sidecars.
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    sidecars
        .chain(&spec.containers)
        .flat_map(container_host_ports)
        .collect()
}

fn container_host_ports(c: &Container) -> impl Iterator<Item = HostPort> + '_ {
    c.ports.iter().flatten().filter_map(|p| {
        let port = p.host_port.filter(|&port| port > 0)?;
        let ip = p
            .host_ip
            .as_deref()
            .filter(|ip| !ip.is_empty())
            .unwrap_or(BIND_ALL);
        let protocol = p
            .protocol
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("TCP");
        Some(HostPort {
            ip: ip.into(),
            protocol_port: ProtocolPort {
                protocol: protocol.into(),
                port,
            },
        })
    })
}

/// Host ports in use on a node: `(protocol, port)` → IP → number of holders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPortSet {
    used: HashMap<ProtocolPort, HashMap<Box<str>, u32>>,
}

impl HostPortSet {
    /// Marks `port` used by one more holder.
    pub fn add(&mut self, port: &HostPort) {
        let ips = self.used.entry(port.protocol_port.clone()).or_default();
        *ips.entry(port.ip.clone()).or_default() += 1;
    }

    /// Releases one holder of `port`.
    pub fn remove(&mut self, port: &HostPort) {
        let Some(ips) = self.used.get_mut(&port.protocol_port) else {
            return;
        };
        if let Some(holders) = ips.get_mut(&port.ip) {
            *holders -= 1;
            if *holders == 0 {
                ips.remove(&port.ip);
            }
        }
        if ips.is_empty() {
            self.used.remove(&port.protocol_port);
        }
    }

    /// Whether binding `port` would clash with a port in use.
    pub fn conflicts(&self, port: &HostPort) -> bool {
        let Some(ips) = self.used.get(&port.protocol_port) else {
            return false;
        };
        if &*port.ip == BIND_ALL {
            !ips.is_empty()
        } else {
            ips.contains_key(BIND_ALL) || ips.contains_key(&port.ip)
        }
    }

    /// Whether no port is in use.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }
}

/// Fails when one of the pod's host ports is taken on the node.
pub fn filter(pod: &PodFilterInput, node: &NodeInfo) -> Result<(), FilterReason> {
    let used = node.used_ports();
    if pod.host_ports().iter().any(|p| used.conflicts(p)) {
        Err(FilterReason::PortsInUse)
    } else {
        Ok(())
    }
}
