//! Pieces both operands' pods share: the HTTP port and probes, downward-API env vars,
//! the seccomp profile and the locked-down container security context, and the CR's pod
//! settings (extra labels and annotations, priority class, image pulls).

use super::names::HTTP_PORT_NAME;
use k8s_openapi::api::core::v1::{
    Capabilities, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, LocalObjectReference,
    ObjectFieldSelector, Probe, SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;
use tas_api::tas::{ImagePullPolicy, ImagePullSecret, ObservabilitySpec};

/// Env var the operands read their OTLP endpoint from (the OpenTelemetry SDK's own).
pub const OTLP_ENDPOINT_ENV: &str = tas_runtime::telemetry::OTLP_ENDPOINT_ENV;
/// Env var the operands read their OTLP protocol from (the OpenTelemetry SDK's own).
pub const OTLP_PROTOCOL_ENV: &str = tas_runtime::telemetry::protocol::PROTOCOL_ENV;

/// The `https` container port serving `/healthz`, `/readyz` and `/metrics` over TLS.
pub(crate) fn http_port(port: u16) -> ContainerPort {
    ContainerPort {
        name: Some(HTTP_PORT_NAME.to_owned()),
        container_port: i32::from(port),
        protocol: Some("TCP".to_owned()),
        ..ContainerPort::default()
    }
}

/// Liveness on `/healthz`: restart a wedged process.
pub(crate) fn liveness_probe() -> Probe {
    Probe {
        period_seconds: Some(10),
        failure_threshold: Some(3),
        ..http_probe("/healthz")
    }
}

/// Readiness on `/readyz`: ready only once caches are synced.
pub(crate) fn readiness_probe() -> Probe {
    Probe {
        period_seconds: Some(5),
        failure_threshold: Some(3),
        ..http_probe("/readyz")
    }
}

fn http_probe(path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String(HTTP_PORT_NAME.to_owned()),
            // The operands serve TLS (a self-signed certificate by default); the
            // kubelet's HTTPS probes do not verify it and need no token.
            scheme: Some("HTTPS".to_owned()),
            ..HTTPGetAction::default()
        }),
        timeout_seconds: Some(2),
        ..Probe::default()
    }
}

/// An env var filled by the downward API from a pod field (`spec.nodeName`, ...).
pub(crate) fn field_env(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: field_path.to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// The OTLP endpoint env var, when one is configured, and the protocol's, when the
/// object names one.
pub(crate) fn otlp_env(observability: &ObservabilitySpec) -> Vec<EnvVar> {
    let var = |name: &str, value: &str| EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    };
    let mut env = Vec::new();
    if let Some(endpoint) = &observability.otlp_endpoint {
        env.push(var(OTLP_ENDPOINT_ENV, endpoint));
    }
    if let Some(protocol) = observability.otlp_protocol {
        env.push(var(OTLP_PROTOCOL_ENV, protocol.as_str()));
    }
    env
}

/// The container runtime's default seccomp profile.
pub(crate) fn runtime_default_seccomp() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".to_owned(),
        ..SeccompProfile::default()
    }
}

/// A container with no capabilities, no way to gain privileges and a read-only root
/// filesystem; the caller sets the user.
pub(crate) fn locked_down_container() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        privileged: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            ..Capabilities::default()
        }),
        seccomp_profile: Some(runtime_default_seccomp()),
        ..SecurityContext::default()
    }
}

/// Both operand images are Linux binaries: keep them off Windows nodes, where they
/// would only pull-loop.
pub(crate) fn linux_node_selector() -> BTreeMap<String, String> {
    BTreeMap::from([("kubernetes.io/os".to_owned(), "linux".to_owned())])
}

/// Pod-template labels or annotations: the CR's extra entries with the operator's own
/// on top, so that no extra entry can change a selector label or the config hash (the
/// CRD refuses such keys already; this also holds for objects that skipped the API
/// server, as with `render`).
pub(crate) fn with_extra(
    own: BTreeMap<String, String>,
    extra: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut merged = extra.clone();
    merged.extend(own);
    merged
}

/// A pod's `priorityClassName`: none for `""` (the cluster's default priority).
pub(crate) fn priority_class(name: &str) -> Option<String> {
    (!name.is_empty()).then(|| name.to_owned())
}

/// A pod's `imagePullSecrets`: the CR's Secrets, none when it names none.
pub(crate) fn image_pull_secrets(secrets: &[ImagePullSecret]) -> Option<Vec<LocalObjectReference>> {
    (!secrets.is_empty()).then(|| {
        secrets
            .iter()
            .map(|s| LocalObjectReference {
                name: s.name.clone(),
            })
            .collect()
    })
}

/// A container's `imagePullPolicy`: the CR's, else unset (Kubernetes' default).
pub(crate) fn image_pull_policy(policy: Option<ImagePullPolicy>) -> Option<String> {
    policy.map(|p| p.as_str().to_owned())
}
