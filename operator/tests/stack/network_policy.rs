//! The operands' NetworkPolicies, rendered by the operator: with an OTLP endpoint on a
//! port of its own and operands in a namespace of their own, both policies appear there
//! with egress to that port (and to the API server and DNS); a new endpoint moves the
//! port; switching `spec.networkPolicy.enabled` off deletes them, on brings them back,
//! and deleting the object removes them.

use crate::harness::*;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::ListParams;
use kube::{Api, Client};
use serde_json::json;
use tas_operator::desired::{
    MANAGED_BY_LABEL, SCHEDULER_NETWORK_POLICY, STACK_LABEL, UPDATER_NETWORK_POLICY,
    managed_selector,
};
use tas_testcluster::{unique_name, wait_for};

const POLICIES: [&str; 2] = [SCHEDULER_NETWORK_POLICY, UPDATER_NETWORK_POLICY];

/// The TCP ports a policy's egress rules allow, sorted.
fn tcp_egress(policy: &NetworkPolicy) -> Vec<i32> {
    let mut ports: Vec<i32> = policy
        .spec
        .iter()
        .flat_map(|s| s.egress.iter().flatten())
        .flat_map(|rule| rule.ports.iter().flatten())
        .filter(|p| p.protocol.as_deref() == Some("TCP"))
        .filter_map(|p| match p.port {
            Some(IntOrString::Int(n)) => Some(n),
            _ => None,
        })
        .collect();
    ports.sort();
    ports
}

/// Waits until both operand policies in `ns` allow exactly `ports` out over TCP.
async fn wait_for_ports(policies: &Api<NetworkPolicy>, what: &str, ports: &[i32]) {
    wait_for(what, TIMEOUT, || async {
        let mut matching = 0;
        for name in POLICIES {
            if let Some(p) = policies.get_opt(name).await?
                && tcp_egress(&p) == ports
            {
                matching += 1;
            }
        }
        Ok::<_, kube::Error>((matching == POLICIES.len()).then_some(()))
    })
    .await
    .unwrap();
}

async fn wait_for_none(policies: &Api<NetworkPolicy>, what: &str) {
    wait_for(what, TIMEOUT, || async {
        let left = policies
            .list(&ListParams::default().labels(&managed_selector(STACK)))
            .await?;
        Ok::<_, kube::Error>(left.items.is_empty().then_some(()))
    })
    .await
    .unwrap();
}

pub async fn scenario(client: &Client) {
    let ns = unique_name("tas-netpol");
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), &ns);
    let mut cr = sample(&ns);
    cr.spec.observability.otlp_endpoint = Some("http://collector.example:14317".to_owned());
    create(client, &cr).await;

    // API server 443 and 6443, DNS 53 (TCP; UDP too), the collector.
    wait_for_ports(
        &policies,
        "both operand policies with the collector's port 14317",
        &[53, 443, 6443, 14317],
    )
    .await;
    let updater = policies.get(UPDATER_NETWORK_POLICY).await.unwrap();
    assert_eq!(label(&updater, MANAGED_BY_LABEL), Some("tas-operator"));
    assert_eq!(label(&updater, STACK_LABEL), Some(STACK));
    let spec = updater.spec.unwrap();
    assert_eq!(
        spec.policy_types.as_deref(),
        Some(&["Ingress".to_owned(), "Egress".to_owned()][..])
    );
    let udp_dns = spec
        .egress
        .iter()
        .flatten()
        .flat_map(|r| r.ports.iter().flatten())
        .any(|p| p.protocol.as_deref() == Some("UDP") && p.port == Some(IntOrString::Int(53)));
    assert!(udp_dns, "DNS over UDP allowed");

    patch_spec(
        client,
        json!({"observability": {"otlpEndpoint": "http://[fd00::7]:24317"}}),
    )
    .await;
    wait_for_ports(
        &policies,
        "the OTLP rule to follow the new endpoint's port",
        &[53, 443, 6443, 24317],
    )
    .await;

    patch_spec(client, json!({"networkPolicy": {"enabled": false}})).await;
    wait_for_none(&policies, "the policies to be deleted when switched off").await;

    patch_spec(
        client,
        json!({"networkPolicy": {"enabled": true}, "observability": {"otlpEndpoint": null}}),
    )
    .await;
    wait_for_ports(
        &policies,
        "the policies back, without an OTLP rule once no endpoint is set",
        &[53, 443, 6443],
    )
    .await;

    uninstall(client, &ns).await;
    let everywhere: Api<NetworkPolicy> = Api::all(client.clone());
    wait_for_none(&everywhere, "no policy of the stack left after uninstall").await;
}
