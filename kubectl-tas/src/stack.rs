//! The `TopologyAwareScheduling` object (`default`) and what the commands take from it:
//! where the scheduler's Service is, and how the scheduler treats nodes without NRT.

use kube::{Api, Client};
use tas_api::tas::{DEFAULT_NAMESPACE, NodesWithoutTopology, TopologyAwareScheduling};

use crate::connect::BearerToken;
use crate::error::Error;
use crate::proxy::{DEFAULT_PORT, DEFAULT_SCHEME, DEFAULT_SERVICE, SchedulerService};

/// The singleton's name.
pub const STACK_NAME: &str = "default";

/// Flags that locate the scheduler's Service; unset ones come from the stack object.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SchedulerFlags {
    /// Namespace of the scheduler's Service (default: the stack's `spec.namespace`).
    #[arg(long, global = true)]
    pub scheduler_namespace: Option<String>,
    /// The scheduler's Service.
    #[arg(long, global = true, default_value = DEFAULT_SERVICE)]
    pub scheduler_service: String,
    /// The Service's port, by name or number.
    #[arg(long, global = true, default_value = DEFAULT_PORT)]
    pub scheduler_port: String,
    /// Scheme the API server uses to reach the scheduler: `https` (the scheduler's
    /// default) or `http` (a scheduler run with `--insecure-http`). Empty: the API
    /// server's default (`http`).
    #[arg(long, global = true, default_value = DEFAULT_SCHEME)]
    pub scheduler_scheme: String,
    /// A file with the bearer token to show the scheduler's debug endpoint, e.g. from
    /// `kubectl create token <account> -n <namespace> --duration 10m` of a ServiceAccount
    /// bound to the ClusterRole `tas-debug-reader`. The kubeconfig's own credentials are
    /// never sent to the scheduler. Without it the commands judge on the
    /// NodeResourceTopology objects alone and say so.
    #[arg(long, global = true, env = "KUBECTL_TAS_SCHEDULER_TOKEN_FILE")]
    pub scheduler_token_file: Option<std::path::PathBuf>,
}

/// Reads the stack object; `None` when it does not exist (or its CRD is not installed).
pub async fn read(client: &Client) -> Result<Option<TopologyAwareScheduling>, Error> {
    let api: Api<TopologyAwareScheduling> = Api::all(client.clone());
    match api.get_opt(STACK_NAME).await {
        Ok(found) => Ok(found),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(Error::api("reading TopologyAwareScheduling default")(e)),
    }
}

impl SchedulerFlags {
    /// The Service, with the stack's namespace unless overridden, and the token to show
    /// it: the one of `--scheduler-token-file`, else none.
    pub fn service(
        &self,
        stack: Option<&TopologyAwareScheduling>,
    ) -> Result<SchedulerService, Error> {
        let token = self
            .scheduler_token_file
            .as_deref()
            .map(BearerToken::from_file)
            .transpose()?;
        let namespace = self.scheduler_namespace.clone().unwrap_or_else(|| {
            stack.map_or_else(
                || DEFAULT_NAMESPACE.to_owned(),
                |s| s.spec.namespace.clone(),
            )
        });
        Ok(SchedulerService {
            namespace,
            name: self.scheduler_service.clone(),
            port: self.scheduler_port.clone(),
            scheme: self.scheduler_scheme.clone(),
            token,
        })
    }
}

/// How the scheduler treats nodes without an NRT object.
pub fn nodes_without_topology(stack: Option<&TopologyAwareScheduling>) -> NodesWithoutTopology {
    stack
        .map(|s| s.spec.scheduler.nodes_without_topology)
        .unwrap_or_default()
}
