//! Client setup: from an explicit kubeconfig file when one is given (a flag), else
//! the usual inference (`$KUBECONFIG` or `~/.kube/config`, then the in-cluster
//! service account).

use std::path::{Path, PathBuf};

use kube::config::{InferConfigError, KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Client, Config};

/// Errors of client setup; all permanent (the file or the environment must change).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The given kubeconfig could not be read or used.
    #[error("kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: KubeconfigError,
    },
    /// Neither a kubeconfig nor an in-cluster configuration was found.
    #[error("no Kubernetes configuration found: {0}")]
    Infer(#[from] InferConfigError),
    /// The configuration could not make a client (TLS, proxy settings).
    #[error("building the Kubernetes client: {0}")]
    Build(#[from] kube::Error),
}

/// The client configuration from `kubeconfig` (its current context), or inferred from
/// the environment when `None`.
pub async fn load_config(kubeconfig: Option<&Path>) -> Result<Config, ClientError> {
    let Some(path) = kubeconfig else {
        return Ok(Config::infer().await?);
    };
    let kubeconfig_error = |source| ClientError::Kubeconfig {
        path: path.to_owned(),
        source,
    };
    let file = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
    Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(kubeconfig_error)
}

/// A client from `kubeconfig`, or from the environment when `None`.
pub async fn from_kubeconfig(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    let config = load_config(kubeconfig).await?;
    Ok(Client::try_from(config)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_kubeconfig_names_the_file() {
        let path = Path::new("does/not/exist/kubeconfig");
        let Err(err) = from_kubeconfig(Some(path)).await else {
            panic!("a missing kubeconfig must fail");
        };
        assert!(matches!(err, ClientError::Kubeconfig { .. }));
        assert!(
            err.to_string().contains("does/not/exist/kubeconfig"),
            "{err}"
        );
    }
}
