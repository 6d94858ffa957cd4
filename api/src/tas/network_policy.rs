//! The operands' NetworkPolicies (`spec.networkPolicy`) and the one fact about the
//! OTLP endpoint they need: the TCP port the operands dial ([`otlp_port`]).
//!
//! NetworkPolicies are additive and a policy with `Egress` in its types isolates the
//! pods it selects, so the operator renders each operand's whole policy (ingress on the
//! metrics/health port; egress to the API server, DNS and the collector) or none: the
//! switch is all or nothing, never a rule to merge with policies of someone else.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// OTLP over gRPC (what the TAS components export with) has no port of its own in a
/// URL: a gRPC client dials the scheme's port when the URL names none.
const HTTP_PORT: u16 = 80;
const HTTPS_PORT: u16 = 443;

/// NetworkPolicies the operator renders for its operands.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    /// Render a NetworkPolicy per operand (`tas-updater`, `tas-scheduler`) in
    /// `spec.namespace`: in, only the metrics/health port (`https`); out, only the API
    /// server (TCP 443 and 6443), DNS (53, UDP and TCP) and, when
    /// `spec.observability.otlpEndpoint` is set, the collector's port (TCP, the URL's
    /// port, else 80 for http:// and 443 for https://). Each policy is complete, since a
    /// pod selected by any egress policy may send only what some policy allows. Set to
    /// false to write your own; the operator then deletes the ones it rendered. They take
    /// effect only with a network plugin that enforces NetworkPolicy. Default: true.
    #[serde(default = "crate::tas::default_true")]
    pub enabled: bool,
}

impl Default for NetworkPolicySpec {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// Why an OTLP endpoint names no port the operator can open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// Not `http://` or `https://`.
    #[error("'{0}' is not an http:// or https:// URL")]
    Scheme(String),
    /// No host between the scheme and the port or path.
    #[error("'{0}' names no host")]
    NoHost(String),
    /// An IPv6 address without its closing `]`, or text between `]` and the port.
    #[error("'{0}': an IPv6 address must be written in brackets, e.g. http://[fd00::1]:4317")]
    Ipv6(String),
    /// The port is not a number from 1 to 65535.
    #[error("'{endpoint}': port '{port}' is not a number from 1 to 65535")]
    Port {
        /// The endpoint as written.
        endpoint: String,
        /// The port as written.
        port: String,
    },
}

/// The TCP port an OTLP/gRPC exporter dials for `endpoint` (`http(s)://host[:port][/...]`,
/// an IPv6 host in brackets): the URL's port, else the scheme's (80 for http, 443 for
/// https), as the gRPC client does.
pub fn otlp_port(endpoint: &str) -> Result<u16, EndpointError> {
    let trimmed = endpoint.trim();
    let lower = trimmed.to_ascii_lowercase();
    let (rest, default) = if lower.starts_with("https://") {
        (&trimmed["https://".len()..], HTTPS_PORT)
    } else if lower.starts_with("http://") {
        (&trimmed["http://".len()..], HTTP_PORT)
    } else {
        return Err(EndpointError::Scheme(endpoint.to_owned()));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // userinfo@host:port: the host starts after the last '@'.
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let port = if let Some(bracketed) = host_port.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| EndpointError::Ipv6(endpoint.to_owned()))?;
        if host.is_empty() {
            return Err(EndpointError::NoHost(endpoint.to_owned()));
        }
        match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| EndpointError::Ipv6(endpoint.to_owned()))?,
            ),
        }
    } else {
        let (host, port) = match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        };
        if host.is_empty() {
            return Err(EndpointError::NoHost(endpoint.to_owned()));
        }
        if port.is_some_and(|p| p.contains(':')) {
            return Err(EndpointError::Ipv6(endpoint.to_owned()));
        }
        port
    };
    match port {
        // "host:" is the scheme's port, as in any URL.
        None | Some("") => Ok(default),
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|n| *n != 0 && p.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| EndpointError::Port {
                endpoint: endpoint.to_owned(),
                port: p.to_owned(),
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_of_every_endpoint_form() {
        for (endpoint, port) in [
            ("http://collector.example:14317", 14317),
            ("http://otel-collector.monitoring:4317", 4317),
            ("https://collector:4317/", 4317),
            ("http://collector:4317/v1/traces?x=1#f", 4317),
            ("HTTP://Collector:9", 9),
            ("  http://collector:4317  ", 4317),
            ("http://user:secret@collector:5317", 5317),
            ("http://10.0.0.7:4317", 4317),
            ("http://[fd00::1]:4317", 4317),
            ("http://[::1]:65535/", 65535),
            // No port: the scheme's, which is what the gRPC client dials.
            ("http://collector", 80),
            ("http://collector/", 80),
            ("http://collector:", 80),
            ("https://collector.example", 443),
            ("https://[fd00::1]", 443),
            ("https://[fd00::1]/path", 443),
        ] {
            assert_eq!(otlp_port(endpoint), Ok(port), "{endpoint}");
        }
    }

    #[test]
    fn endpoints_without_a_usable_port_are_refused() {
        let refused = |e: &str| otlp_port(e).expect_err(e);
        assert!(matches!(
            refused("grpc://collector:4317"),
            EndpointError::Scheme(_)
        ));
        assert!(matches!(
            refused("collector:4317"),
            EndpointError::Scheme(_)
        ));
        assert!(matches!(refused(""), EndpointError::Scheme(_)));
        assert!(matches!(refused("http://:4317"), EndpointError::NoHost(_)));
        assert!(matches!(refused("http:///v1"), EndpointError::NoHost(_)));
        assert!(matches!(
            refused("http://[]:4317"),
            EndpointError::NoHost(_)
        ));
        assert!(matches!(
            refused("http://[fd00::1:4317"),
            EndpointError::Ipv6(_)
        ));
        assert!(matches!(
            refused("http://[fd00::1]x:4317"),
            EndpointError::Ipv6(_)
        ));
        assert!(matches!(
            refused("http://fd00::1:4317"),
            EndpointError::Ipv6(_)
        ));
        for port in ["0", "65536", "99999", "-1", "+80", "43a7"] {
            assert_eq!(
                refused(&format!("http://collector:{port}")),
                EndpointError::Port {
                    endpoint: format!("http://collector:{port}"),
                    port: port.to_owned()
                }
            );
        }
    }

    #[test]
    fn policies_are_on_by_default() {
        let spec: NetworkPolicySpec = serde_json::from_str("{}").unwrap();
        assert!(spec.enabled);
        assert_eq!(spec, NetworkPolicySpec::default());
    }
}
