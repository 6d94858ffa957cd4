//! Serving certificates as cert-manager issues them for `config/serving-certs`, for
//! clusters without cert-manager: a CA of the test's own and, per Certificate of the
//! component, a leaf for its `dnsNames` in the `kubernetes.io/tls` Secret it names
//! (`tls.crt`, `tls.key`, `ca.crt`).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use serde_json::Value;

/// A CA issuing serving certificates.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, as PEM.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
    /// The certificate's DER, to compare with what a server shows.
    pub der: Vec<u8>,
}

impl TestCa {
    /// A new self-signed CA.
    pub fn new() -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "tas-e2e-serving-ca");
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        Ok(Self { issuer })
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A new serving certificate for `dns_names`.
    pub fn leaf(&self, dns_names: &[String]) -> Result<Leaf, rcgen::Error> {
        let params = CertificateParams::new(dns_names.to_vec())?;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
        })
    }

    /// The Secret cert-manager would write for `leaf`.
    pub fn secret(&self, namespace: &str, name: &str, leaf: &Leaf) -> Secret {
        let data = [
            ("tls.crt", leaf.cert.clone()),
            ("tls.key", leaf.key.clone()),
            ("ca.crt", self.pem()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.into_bytes())))
        .collect::<BTreeMap<_, _>>();
        Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".to_owned()),
            data: Some(data),
            ..Secret::default()
        }
    }
}

/// A cert-manager `Certificate` of rendered manifests: (namespace, Secret name,
/// DNS names).
pub fn certificate_request(certificate: &Value) -> Option<(String, String, Vec<String>)> {
    if certificate["kind"] != "Certificate" || certificate["spec"]["isCA"] == true {
        return None;
    }
    let text = |v: &Value| v.as_str().map(str::to_owned);
    Some((
        text(&certificate["metadata"]["namespace"])?,
        text(&certificate["spec"]["secretName"])?,
        certificate["spec"]["dnsNames"]
            .as_array()?
            .iter()
            .filter_map(text)
            .collect(),
    ))
}
