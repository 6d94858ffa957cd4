//! The client, from the kubeconfig the way kubectl finds it: `--kubeconfig`, else
//! `KUBECONFIG` (several files merged), else `~/.kube/config`, else the in-cluster
//! service account; `--context` picks a context; `-n` overrides the context's namespace.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::Error;

/// The kubeconfig flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KubeOptions {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Namespace of the pod (default: the context's namespace, then `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
}

/// A client and the namespace commands default to.
#[derive(Clone)]
pub struct Connection {
    /// The client.
    pub client: Client,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
}

/// A bearer token to show the scheduler's debug endpoint, never printed. Never the
/// kubeconfig's own credentials: the scheduler would see them, and a compromised
/// scheduler could act as whoever ran `kubectl tas` (often a cluster admin). Use a token
/// made for this (`kubectl create token` of a ServiceAccount bound to
/// `tas-debug-reader`, short-lived), given by `--scheduler-token-file`.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(pub String);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

impl BearerToken {
    /// The token in a file, e.g. one `kubectl create token` wrote.
    pub fn from_file(path: &std::path::Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::TokenFile {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self(text.trim().to_owned()))
    }
}

/// Builds the client the flags describe.
pub async fn connect(options: &KubeOptions) -> Result<Connection, Error> {
    let kube_options = KubeConfigOptions {
        context: options.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &options.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)?;
            Config::from_custom_kubeconfig(kubeconfig, &kube_options).await?
        }
        None if options.context.is_some() => Config::from_kubeconfig(&kube_options).await?,
        None => Config::infer().await?,
    };
    let namespace = options
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).map_err(Error::api("building the client"))?;
    Ok(Connection { client, namespace })
}
