//! The operands' HTTPS serving certificate from a Secret (`spec.observability.
//! servingCertificate: Secret`): the volume, its mount and the flags pointing the
//! binary at the files, and the annotation asking OpenShift's service CA to write the
//! Secret. The binaries re-read the files when the kubelet updates the volume, so a
//! renewed certificate needs no rollout.
//!
//! The Secret is named after the metrics Service (`<service>-tls`), in the operand's
//! namespace: the name cert-manager Certificates and the service CA are told to write,
//! and the `serverName` a scraper verifies is that Service's DNS name.

use k8s_openapi::api::core::v1::{SecretVolumeSource, Volume, VolumeMount};
use std::collections::BTreeMap;
use tas_api::tas::ServingCertificate;

/// Where the Secret is mounted in the operand's container.
pub const SERVING_CERT_DIR: &str = "/etc/tas/serving-cert";
/// The volume's name in the pod.
pub const VOLUME: &str = "serving-cert";
/// The annotation OpenShift's service CA operator answers with a serving certificate
/// Secret for the Service's DNS names.
pub const OPENSHIFT_SERVING_CERT_ANNOTATION: &str =
    "service.beta.openshift.io/serving-cert-secret-name";

/// The Secret holding the serving certificate of the pods behind `service`.
pub fn secret_name(service: &str) -> String {
    format!("{service}-tls")
}

/// What a pod behind `service` needs to serve the certificate of its Secret: extra
/// args, a volume and its mount; nothing for a self-signed certificate.
pub(crate) struct ServingCertMount {
    pub args: Vec<String>,
    pub volume: Volume,
    pub mount: VolumeMount,
}

pub(crate) fn mount(source: ServingCertificate, service: &str) -> Option<ServingCertMount> {
    match source {
        ServingCertificate::SelfSigned => None,
        ServingCertificate::Secret => Some(ServingCertMount {
            args: vec![
                format!("--tls-cert-file={SERVING_CERT_DIR}/tls.crt"),
                format!("--tls-private-key-file={SERVING_CERT_DIR}/tls.key"),
            ],
            volume: Volume {
                name: VOLUME.to_owned(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret_name(service)),
                    // Only the pair: `ca.crt` is the scrapers' business.
                    items: Some(
                        ["tls.crt", "tls.key"]
                            .into_iter()
                            .map(|k| k8s_openapi::api::core::v1::KeyToPath {
                                key: k.to_owned(),
                                path: k.to_owned(),
                                mode: None,
                            })
                            .collect(),
                    ),
                    // Readable by the operand's non-root user (no fsGroup is set); the
                    // key stays in the pod's own tmpfs volume.
                    default_mode: Some(0o444),
                    optional: Some(false),
                }),
                ..Volume::default()
            },
            mount: VolumeMount {
                name: VOLUME.to_owned(),
                mount_path: SERVING_CERT_DIR.to_owned(),
                read_only: Some(true),
                ..VolumeMount::default()
            },
        }),
    }
}

/// What to check when an operand pod that mounts the Secret `namespace/secret` waits to
/// start: the kubelet cannot mount a Secret that is missing or lacks a key, and says so
/// only in the pod's `FailedMount` Event, which the operator does not read (nor the
/// Secret: it holds no right on Secrets).
pub fn missing_secret_hint(namespace: &str, secret: &str) -> String {
    format!(
        "it mounts the serving certificate Secret {namespace}/{secret} (spec.observability.servingCertificate: Secret): check that it exists and holds tls.crt and tls.key; the pod's FailedMount Event says which is wrong"
    )
}

/// Annotations of the metrics Service `service`: the service CA's, when the
/// certificate comes from a Secret (elsewhere than on OpenShift nobody reads it).
pub(crate) fn service_annotations(
    source: ServingCertificate,
    service: &str,
) -> Option<BTreeMap<String, String>> {
    match source {
        ServingCertificate::SelfSigned => None,
        ServingCertificate::Secret => Some(BTreeMap::from([(
            OPENSHIFT_SERVING_CERT_ANNOTATION.to_owned(),
            secret_name(service),
        )])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_certificate_is_mounted_and_named_in_the_flags() {
        assert!(mount(ServingCertificate::SelfSigned, "tas-scheduler-metrics").is_none());
        let m = mount(ServingCertificate::Secret, "tas-scheduler-metrics").unwrap();
        assert_eq!(
            m.args,
            [
                "--tls-cert-file=/etc/tas/serving-cert/tls.crt",
                "--tls-private-key-file=/etc/tas/serving-cert/tls.key"
            ]
        );
        let secret = m.volume.secret.unwrap();
        assert_eq!(
            secret.secret_name.as_deref(),
            Some("tas-scheduler-metrics-tls")
        );
        assert_eq!(secret.optional, Some(false));
        assert_eq!(m.mount.mount_path, SERVING_CERT_DIR);
        assert_eq!(m.mount.read_only, Some(true));
        assert_eq!(
            service_annotations(ServingCertificate::Secret, "tas-updater-metrics").unwrap()
                [OPENSHIFT_SERVING_CERT_ANNOTATION],
            "tas-updater-metrics-tls"
        );
    }
}
