//! The kubeconfig every client of a test cluster uses: the tests, and the components
//! that talk to kube-apiserver (controller-manager, scheduler, kwok).

use std::path::Path;

use crate::Error;

/// Renders a kubeconfig for `server` that trusts the CA bundle at `ca_file` and
/// authenticates with a bearer `token`.
pub fn render(server: &str, ca_file: &Path, token: &str) -> Result<String, Error> {
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "tas-testcluster",
            "cluster": {
                "server": server,
                "certificate-authority": ca_file,
            },
        }],
        "users": [{ "name": "admin", "user": { "token": token } }],
        "contexts": [{
            "name": "tas-testcluster",
            "context": { "cluster": "tas-testcluster", "user": "admin" },
        }],
        "current-context": "tas-testcluster",
    });
    serde_norway::to_string(&doc).map_err(|source| Error::Yaml {
        path: "kubeconfig".into(),
        source,
    })
}

/// Loads `path` into a client configuration.
pub async fn load(path: &Path) -> Result<kube::Config, Error> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
    let options = kube::config::KubeConfigOptions::default();
    Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_kubeconfig_parses() {
        let yaml = render("https://127.0.0.1:6443", Path::new("ca.crt"), "t0k3n").unwrap();
        let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("tas-testcluster"));
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(cluster.certificate_authority.as_deref(), Some("ca.crt"));
    }
}
