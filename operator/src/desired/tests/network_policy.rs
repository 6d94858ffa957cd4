//! The operands' NetworkPolicies: complete (ingress, API server, DNS), in
//! `spec.namespace`, with the OTLP rule on the endpoint's port, and none when switched
//! off.

use super::{FULL, MINIMAL, cr, ctx, desired};
use crate::desired::*;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Every (protocol, port) a policy lets its pods send to, rule by rule.
fn egress(p: &NetworkPolicy) -> Vec<Vec<(String, IntOrString)>> {
    let spec = p.spec.as_ref().unwrap();
    spec.egress
        .iter()
        .flatten()
        .map(|rule| {
            assert!(rule.to.is_none(), "any address: {rule:?}");
            rule.ports
                .iter()
                .flatten()
                .map(|port| (port.protocol.clone().unwrap(), port.port.clone().unwrap()))
                .collect()
        })
        .collect()
}

fn tcp(n: i32) -> (String, IntOrString) {
    ("TCP".to_owned(), IntOrString::Int(n))
}

fn with_endpoint(endpoint: Option<&str>) -> Vec<NetworkPolicy> {
    let mut c = cr(FULL);
    c.spec.observability.otlp_endpoint = endpoint.map(str::to_owned);
    desired(&c, &ctx()).unwrap().network_policies
}

#[test]
fn each_operand_gets_a_complete_policy_in_its_namespace() {
    let d = desired(&cr(FULL), &ctx()).unwrap();
    let names: Vec<_> = d
        .network_policies
        .iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(names, [UPDATER_NETWORK_POLICY, SCHEDULER_NETWORK_POLICY]);
    let workloads = [
        (&d.daemon_sets[0].spec.as_ref().unwrap().template, "updater"),
        (&d.deployment.spec.as_ref().unwrap().template, "scheduler"),
    ];
    for (policy, (template, component)) in d.network_policies.iter().zip(workloads) {
        let meta = &policy.metadata;
        assert_eq!(meta.namespace.as_deref(), Some("numa-system"));
        let labels = meta.labels.as_ref().unwrap();
        assert_eq!(labels[COMPONENT_LABEL], component);
        assert_eq!(labels[MANAGED_BY_LABEL], MANAGED_BY);
        assert_eq!(labels[STACK_LABEL], "default");
        assert_eq!(
            meta.owner_references.as_ref().unwrap()[0].kind,
            "TopologyAwareScheduling"
        );

        let spec = policy.spec.as_ref().unwrap();
        // The policy selects the operand's pods (and no other operand's).
        let pod_labels = template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        let selector = spec
            .pod_selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref()
            .unwrap();
        assert!(!selector.is_empty());
        assert!(
            selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)),
            "{selector:?}"
        );
        assert_eq!(
            spec.policy_types.as_deref(),
            Some(&["Ingress".to_owned(), "Egress".to_owned()][..])
        );

        let ingress = spec.ingress.as_ref().unwrap();
        assert_eq!(ingress.len(), 1);
        assert!(ingress[0].from.is_none());
        assert_eq!(
            ingress[0].ports.as_ref().unwrap()[0].port,
            Some(IntOrString::String(HTTP_PORT_NAME.to_owned()))
        );
        assert_eq!(
            egress(policy),
            [
                vec![tcp(443), tcp(6443)],
                vec![("UDP".to_owned(), IntOrString::Int(53)), tcp(53)],
                vec![tcp(4317)],
            ]
        );
    }
}

#[test]
fn the_otlp_rule_follows_the_endpoints_port() {
    for (endpoint, port) in [
        ("http://collector.example:14317", 14317),
        ("https://[fd00::7]:5317/", 5317),
        ("http://collector.example", 80),
        ("https://collector.example", 443),
    ] {
        for policy in with_endpoint(Some(endpoint)) {
            let rules = egress(&policy);
            assert_eq!(rules.len(), 3, "{endpoint}");
            assert_eq!(rules[2], [tcp(port)], "{endpoint}");
            // The API server and DNS stay whatever the endpoint.
            assert_eq!(rules[0], [tcp(443), tcp(6443)]);
        }
    }
}

#[test]
fn no_endpoint_no_otlp_rule_but_still_the_api_server_and_dns() {
    for endpoint in [None, Some("")] {
        let policies = with_endpoint(endpoint);
        assert_eq!(policies.len(), 2);
        for policy in &policies {
            let rules = egress(policy);
            assert_eq!(
                rules,
                [
                    vec![tcp(443), tcp(6443)],
                    vec![("UDP".to_owned(), IntOrString::Int(53)), tcp(53)],
                ],
                "{endpoint:?}"
            );
        }
    }
    // The minimal object names no endpoint and keeps the default: policies on.
    let d = desired(&cr(MINIMAL), &ctx()).unwrap();
    assert_eq!(d.network_policies.len(), 2);
}

#[test]
fn switched_off_nothing_is_rendered() {
    let mut c = cr(FULL);
    c.spec.network_policy.enabled = false;
    let objects = desired(&c, &ctx()).unwrap().into_api_objects().unwrap();
    assert!(
        objects.iter().all(|o| o.resource.kind != "NetworkPolicy"),
        "no NetworkPolicy when switched off"
    );
    // ... while the prune list still names the kind, so the operator deletes the ones
    // it applied before.
    assert!(
        managed_resources()
            .iter()
            .any(|(r, _)| r.kind == "NetworkPolicy" && r.group == "networking.k8s.io")
    );
}
