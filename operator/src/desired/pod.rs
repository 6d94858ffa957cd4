//! Pieces both operands' pods share: the HTTP port and probes, downward-API env vars,
//! the seccomp profile and the locked-down container security context.

use super::names::HTTP_PORT_NAME;
use k8s_openapi::api::core::v1::{
    Capabilities, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, ObjectFieldSelector, Probe,
    SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// Env var the operands read their OTLP endpoint from (the OpenTelemetry SDK's own).
pub const OTLP_ENDPOINT_ENV: &str = tas_runtime::telemetry::OTLP_ENDPOINT_ENV;

/// The `http` container port serving `/healthz`, `/readyz` and `/metrics`.
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
            scheme: Some("HTTP".to_owned()),
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

/// The OTLP endpoint env var, when one is configured.
pub(crate) fn otlp_env(endpoint: Option<&str>) -> Option<EnvVar> {
    endpoint.map(|e| EnvVar {
        name: OTLP_ENDPOINT_ENV.to_owned(),
        value: Some(e.to_owned()),
        ..EnvVar::default()
    })
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
