//! The client, from the kubeconfig the way kubectl finds it: `--kubeconfig`, else
//! `KUBECONFIG` (several files merged), else `~/.kube/config`, else the in-cluster
//! service account. kubectl's connection flags override it as kubectl's do: `--context`,
//! `--cluster` and `--user` pick the entries; `--server`, `--certificate-authority` and
//! `--insecure-skip-tls-verify` change the chosen cluster; `--token` replaces the chosen
//! user's credentials; `--as`, `--as-group` and `--as-uid` impersonate (the API server
//! decides whether the user may); `--request-timeout` bounds every request; `-n`
//! overrides the context's namespace.
//!
//! The overrides are applied to the kubeconfig before kube builds its `Config` from it
//! ([`with_overrides`], pure), so a flag means exactly what the same kubeconfig field
//! means.

use std::path::PathBuf;
use std::time::Duration;

use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
use kube::{Client, Config};

use crate::error::Error;

/// kubectl's connection flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KubeOptions {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The kubeconfig cluster to use (default: the context's).
    #[arg(long, global = true)]
    pub cluster: Option<String>,
    /// The kubeconfig user to use (default: the context's).
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// Namespace of the pod (default: the context's namespace, then `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// The API server's address, e.g. `https://10.0.0.1:6443`.
    #[arg(short = 's', long, global = true)]
    pub server: Option<String>,
    /// A bearer token for the API server (replaces the user's credentials).
    #[arg(long, global = true)]
    pub token: Option<String>,
    /// A PEM file of the certificate authorities that sign the API server's certificate.
    #[arg(long, global = true)]
    pub certificate_authority: Option<PathBuf>,
    /// Do not check the API server's certificate (insecure).
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// User to impersonate.
    #[arg(long = "as", global = true)]
    pub as_user: Option<String>,
    /// Group to impersonate; repeat for several.
    #[arg(long = "as-group", global = true)]
    pub as_groups: Vec<String>,
    /// UID to impersonate.
    #[arg(long = "as-uid", global = true)]
    pub as_uid: Option<String>,
    /// How long to wait for each request to the API server, e.g. `30s`, `1m`, `500ms`;
    /// a bare number is seconds; `0`: no limit (the default).
    #[arg(long, global = true, value_parser = parse_timeout)]
    pub request_timeout: Option<Duration>,
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

/// `--request-timeout`: `0`, a bare number of seconds, or a number with `ms`, `s`, `m`
/// or `h` (kubectl's forms, one unit).
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: use e.g. 30s, 1m, 500ms or 0"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use ms, s, m or h"
            ));
        }
    };
    Ok(Duration::from_secs_f64(seconds))
}

impl KubeOptions {
    /// Whether any flag changes the connection beyond picking kubeconfig entries.
    fn overrides_connection(&self) -> bool {
        self.server.is_some()
            || self.token.is_some()
            || self.certificate_authority.is_some()
            || self.insecure_skip_tls_verify
            || self.as_user.is_some()
            || !self.as_groups.is_empty()
            || self.as_uid.is_some()
    }

    fn picks_entries(&self) -> bool {
        self.context.is_some() || self.cluster.is_some() || self.user.is_some()
    }
}

/// The context, cluster and user names `options` select in `kubeconfig`.
fn selection(kubeconfig: &Kubeconfig, options: &KubeOptions) -> Result<Selection, Error> {
    let context_name = options
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone());
    let context: Option<&Context> = match &context_name {
        Some(name) => Some(
            kubeconfig
                .contexts
                .iter()
                .find(|c| &c.name == name)
                .ok_or_else(|| Error::Flag {
                    flag: "--context",
                    message: format!("no context {name:?} in the kubeconfig"),
                })?
                .context
                .as_ref()
                .ok_or_else(|| Error::Flag {
                    flag: "--context",
                    message: format!("context {name:?} is empty"),
                })?,
        ),
        None => None,
    };
    let cluster = options
        .cluster
        .clone()
        .or_else(|| context.map(|c| c.cluster.clone()));
    let user = options
        .user
        .clone()
        .or_else(|| context.and_then(|c| c.user.clone()));
    for (flag, name, known) in [
        (
            "--cluster",
            &options.cluster,
            kubeconfig
                .clusters
                .iter()
                .map(|c| &c.name)
                .collect::<Vec<_>>(),
        ),
        (
            "--user",
            &options.user,
            kubeconfig.auth_infos.iter().map(|u| &u.name).collect(),
        ),
    ] {
        if let Some(name) = name
            && !known.contains(&name)
        {
            return Err(Error::Flag {
                flag,
                message: format!("no {} {name:?} in the kubeconfig", &flag[2..]),
            });
        }
    }
    Ok(Selection {
        context: context_name,
        cluster,
        user,
    })
}

/// Names of the kubeconfig entries in use.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Selection {
    context: Option<String>,
    cluster: Option<String>,
    user: Option<String>,
}

/// The name of the entries made for flags given without a kubeconfig (or without a
/// context): `--server` alone is enough to connect, as with kubectl.
const FLAGS_ENTRY: &str = "kubectl-tas-flags";

/// `kubeconfig` with the flags applied to the entries they select, and the options to
/// load it with. Pure.
pub fn with_overrides(
    mut kubeconfig: Kubeconfig,
    options: &KubeOptions,
) -> Result<(Kubeconfig, KubeConfigOptions), Error> {
    let mut selection = selection(&kubeconfig, options)?;
    // No context to speak of: a context of our own over the cluster and user the flags
    // give (created empty when missing).
    if selection.context.is_none() {
        let cluster = selection.cluster.clone().unwrap_or(FLAGS_ENTRY.into());
        let user = selection.user.clone().unwrap_or(FLAGS_ENTRY.into());
        kubeconfig.contexts.push(NamedContext {
            name: FLAGS_ENTRY.into(),
            context: Some(Context {
                cluster: cluster.clone(),
                user: Some(user.clone()),
                ..Context::default()
            }),
            ..NamedContext::default()
        });
        selection = Selection {
            context: Some(FLAGS_ENTRY.into()),
            cluster: Some(cluster),
            user: Some(user),
        };
    }
    let cluster_name = selection.cluster.clone().unwrap_or(FLAGS_ENTRY.into());
    if !kubeconfig.clusters.iter().any(|c| c.name == cluster_name) {
        kubeconfig.clusters.push(NamedCluster {
            name: cluster_name.clone(),
            cluster: Some(Cluster::default()),
            ..NamedCluster::default()
        });
    }
    let user_name = selection.user.clone().unwrap_or(FLAGS_ENTRY.into());
    if !kubeconfig.auth_infos.iter().any(|u| u.name == user_name) {
        kubeconfig.auth_infos.push(NamedAuthInfo {
            name: user_name.clone(),
            auth_info: Some(AuthInfo::default()),
            ..NamedAuthInfo::default()
        });
    }
    if let Some(entry) = kubeconfig
        .clusters
        .iter_mut()
        .find(|c| c.name == cluster_name)
    {
        let cluster = entry.cluster.get_or_insert_with(Cluster::default);
        if let Some(server) = &options.server {
            cluster.server = Some(server.clone());
        }
        if let Some(ca) = &options.certificate_authority {
            cluster.certificate_authority = Some(ca.to_string_lossy().into_owned());
            cluster.certificate_authority_data = None;
        }
        if options.insecure_skip_tls_verify {
            cluster.insecure_skip_tls_verify = Some(true);
            cluster.certificate_authority = None;
            cluster.certificate_authority_data = None;
        }
    }
    if let Some(entry) = kubeconfig
        .auth_infos
        .iter_mut()
        .find(|u| u.name == user_name)
    {
        let user = entry.auth_info.get_or_insert_with(AuthInfo::default);
        if let Some(token) = &options.token {
            // The token replaces whatever credentials the user had.
            *user = AuthInfo {
                token: Some(token.clone().into()),
                impersonate: user.impersonate.clone(),
                impersonate_groups: user.impersonate_groups.clone(),
                impersonate_uid: user.impersonate_uid.clone(),
                ..AuthInfo::default()
            };
        }
        if let Some(name) = &options.as_user {
            user.impersonate = Some(name.clone());
        }
        if !options.as_groups.is_empty() {
            user.impersonate_groups = Some(options.as_groups.clone());
        }
        if let Some(uid) = &options.as_uid {
            user.impersonate_uid = Some(uid.clone());
        }
    }
    let load = KubeConfigOptions {
        context: selection.context,
        cluster: Some(cluster_name),
        user: Some(user_name),
    };
    Ok((kubeconfig, load))
}

/// The kubeconfig as kubectl finds it: `--kubeconfig`, else `KUBECONFIG`, else
/// `~/.kube/config`; `None` when there is none (in a pod: the service account).
fn find_kubeconfig(options: &KubeOptions) -> Result<Option<Kubeconfig>, Error> {
    if let Some(path) = &options.kubeconfig {
        return Ok(Some(Kubeconfig::read_from(path)?));
    }
    if let Some(merged) = Kubeconfig::from_env()? {
        return Ok(Some(merged));
    }
    match Kubeconfig::read() {
        Ok(found) => Ok(Some(found)),
        // No ~/.kube/config: the caller falls back to the service account, or to the
        // flags alone.
        Err(_) => Ok(None),
    }
}

/// Builds the client the flags describe.
pub async fn connect(options: &KubeOptions) -> Result<Connection, Error> {
    let found = find_kubeconfig(options)?;
    let mut config = match found {
        Some(kubeconfig) => {
            let (kubeconfig, load) = with_overrides(kubeconfig, options)?;
            Config::from_custom_kubeconfig(kubeconfig, &load).await?
        }
        None if options.overrides_connection() || options.picks_entries() => {
            let (kubeconfig, load) = with_overrides(Kubeconfig::default(), options)?;
            Config::from_custom_kubeconfig(kubeconfig, &load)
                .await
                .map_err(|e| Error::Flag {
                    flag: "--server",
                    message: format!(
                        "no kubeconfig found and the flags do not say where the API server is: {e}"
                    ),
                })?
        }
        None => Config::incluster().map_err(|e| Error::Flag {
            flag: "--kubeconfig",
            message: format!("no kubeconfig ($KUBECONFIG, ~/.kube/config) and not in a pod: {e}"),
        })?,
    };
    if let Some(timeout) = options.request_timeout.filter(|t| !t.is_zero()) {
        config.connect_timeout = Some(timeout);
        config.read_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
    }
    let namespace = options
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).map_err(Error::api("building the client"))?;
    Ok(Connection { client, namespace })
}

#[cfg(test)]
mod tests;
