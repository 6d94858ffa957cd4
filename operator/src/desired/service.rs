//! Metrics Services: a stable address for `/metrics` of the scheduler replicas and of
//! every node agent, for whatever scrapes them (ServiceMonitor, static config).

use super::daemonset::updater_pod_selector;
use super::deployment::scheduler_pod_selector;
use super::meta::{Component, Stack};
use super::names::{HTTP_PORT_NAME, SCHEDULER_METRICS_SERVICE, UPDATER_METRICS_SERVICE};
use super::serving_cert;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;
use tas_api::tas::ServingCertificate;

/// The scheduler's and the node agents' metrics Services.
pub(crate) fn services(stack: &Stack, certificate: ServingCertificate) -> Vec<Service> {
    vec![
        metrics_service(
            stack,
            certificate,
            SCHEDULER_METRICS_SERVICE,
            Component::Scheduler,
            scheduler_pod_selector(),
            tas_api::config::scheduler::HTTP_PORT,
        ),
        metrics_service(
            stack,
            certificate,
            UPDATER_METRICS_SERVICE,
            Component::Updater,
            updater_pod_selector(),
            tas_api::config::updater::HTTP_PORT,
        ),
    ]
}

fn metrics_service(
    stack: &Stack,
    certificate: ServingCertificate,
    name: &str,
    component: Component,
    selector: BTreeMap<String, String>,
    port: u16,
) -> Service {
    let mut metadata = stack.namespaced_meta(name, component);
    metadata.annotations = serving_cert::service_annotations(certificate, name);
    Service {
        metadata,
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(selector),
            ports: Some(vec![ServicePort {
                name: Some(HTTP_PORT_NAME.to_owned()),
                port: i32::from(port),
                // By name: the pods' port number can change without touching the Service.
                target_port: Some(IntOrString::String(HTTP_PORT_NAME.to_owned())),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}
