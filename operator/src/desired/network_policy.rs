//! The operands' NetworkPolicies (`tas-updater`, `tas-scheduler`), each in its operand's
//! namespace (the node agents' own, `spec.namespace`).
//!
//! NetworkPolicies are additive, and a policy with `Egress` among its types isolates the
//! pods it selects: they may then send only what some policy allows. So each policy is
//! the operand's complete set of connections, never a lone OTLP rule:
//!
//! - in: the metrics/health port (`https`), for scrapers and the kubelet's probes;
//! - out: the API server (TCP 443 and 6443, to any address: its address differs per
//!   cluster and the `kubernetes` Service's ClusterIP is translated before most network
//!   plugins apply policy), DNS (53, UDP and TCP), and the OTLP collector on the port
//!   of `spec.observability.otlpEndpoint` when one is set.
//!
//! The node agent talks to the kubelet over a unix socket, which policy does not see.
//! With `spec.networkPolicy.enabled: false` nothing is built, and the operator's prune
//! deletes the policies it applied before.

use super::daemonset::updater_pod_selector;
use super::deployment::scheduler_pod_selector;
use super::meta::{Component, Stack};
use super::names::{HTTP_PORT_NAME, SCHEDULER_NETWORK_POLICY, UPDATER_NETWORK_POLICY};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// Ports the API server usually listens on (443 behind the `kubernetes` Service, 6443
/// on the control-plane nodes).
const API_SERVER_PORTS: [i32; 2] = [443, 6443];
/// DNS.
const DNS_PORT: i32 = 53;

/// Both operands' policies when `enabled`, none otherwise; `otlp_port` is the port of
/// the OTLP endpoint, if one is set.
pub(crate) fn network_policies(
    stack: &Stack,
    enabled: bool,
    otlp_port: Option<u16>,
) -> Vec<NetworkPolicy> {
    if !enabled {
        return Vec::new();
    }
    vec![
        operand_policy(
            stack,
            UPDATER_NETWORK_POLICY,
            Component::Updater,
            updater_pod_selector(),
            otlp_port,
        ),
        operand_policy(
            stack,
            SCHEDULER_NETWORK_POLICY,
            Component::Scheduler,
            scheduler_pod_selector(),
            otlp_port,
        ),
    ]
}

fn operand_policy(
    stack: &Stack,
    name: &str,
    component: Component,
    pods: BTreeMap<String, String>,
    otlp_port: Option<u16>,
) -> NetworkPolicy {
    let mut egress = vec![
        egress_to(API_SERVER_PORTS.map(|p| tcp(IntOrString::Int(p))).to_vec()),
        egress_to(vec![
            port("UDP", IntOrString::Int(DNS_PORT)),
            tcp(IntOrString::Int(DNS_PORT)),
        ]),
    ];
    egress.extend(otlp_port.map(|p| egress_to(vec![tcp(IntOrString::Int(i32::from(p)))])));
    NetworkPolicy {
        metadata: stack.namespaced_meta(name, component),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(pods),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                // By name, as the Services target it: the container port may change.
                ports: Some(vec![tcp(IntOrString::String(HTTP_PORT_NAME.to_owned()))]),
                ..NetworkPolicyIngressRule::default()
            }]),
            egress: Some(egress),
        }),
    }
}

/// Egress to `ports` at any address.
fn egress_to(ports: Vec<NetworkPolicyPort>) -> NetworkPolicyEgressRule {
    NetworkPolicyEgressRule {
        ports: Some(ports),
        to: None,
    }
}

fn tcp(number: IntOrString) -> NetworkPolicyPort {
    port("TCP", number)
}

fn port(protocol: &str, number: IntOrString) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(number),
        protocol: Some(protocol.to_owned()),
        end_port: None,
    }
}
