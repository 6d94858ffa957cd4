//! Where the node agent finds the kubelet's settings, and what it may override: the
//! per node group counterparts of `spec.updater.kubelet` and the Topology Manager
//! settings of kubelets configured by command-line flags (which no file shows).

use super::host_paths::HostPathRule;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Topology Manager settings to publish instead of the kubelet configuration's: for
/// kubelets configured by `--topology-manager-policy`/`-scope`/`-policy-options` flags,
/// which neither the config file nor its drop-ins show. Unset fields keep what the
/// kubelet's configuration says.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct TopologyManagerOverride {
    /// `none`, `best-effort`, `restricted` or `single-numa-node`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("self in ['none', 'best-effort', 'restricted', 'single-numa-node']").message("topologyManager.policy must be none, best-effort, restricted or single-numa-node"))]
    pub policy: Option<String>,
    /// `container` or `pod`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("self in ['container', 'pod']").message("topologyManager.scope must be container or pod"))]
    pub scope: Option<String>,
    /// Topology Manager policy options (e.g. `prefer-closest-numa-nodes: "true"`,
    /// `max-allowable-numa-nodes: "16"`); replaces the configuration's options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub options: Option<BTreeMap<String, String>>,
}

impl TopologyManagerOverride {
    /// `over` where set, else `self`.
    pub fn merged(&self, over: &Self) -> Self {
        Self {
            policy: over.policy.clone().or_else(|| self.policy.clone()),
            scope: over.scope.clone().or_else(|| self.scope.clone()),
            options: over.options.clone().or_else(|| self.options.clone()),
        }
    }

    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        self.policy.is_none() && self.scope.is_none() && self.options.is_none()
    }
}

/// The field path of [`KubeletOverride`], named in refusals.
const KUBELET: &str = "spec.nodeGroups[].updater.kubelet";

/// Per node group overrides of `spec.updater.kubelet`: nodes whose kubelet keeps its
/// files elsewhere (another distribution, another root directory). The same allow-list
/// as `spec.updater.kubelet` ([`super::host_paths`]): a group cannot name a host path
/// the shared settings could not.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct KubeletOverride {
    /// Directory of the kubelet's pod-resources socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    #[x_kube(validation = HostPathRule::PodResourcesDir.cel(KUBELET))]
    pub pod_resources_dir: Option<String>,
    /// The kubelet's configuration file (its `--config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    #[x_kube(validation = HostPathRule::ConfigFile.cel(KUBELET))]
    pub config_file: Option<String>,
    /// The kubelet's drop-in directory (its `--config-dir`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    #[x_kube(validation = HostPathRule::ConfigDir.cel(KUBELET))]
    pub config_dir: Option<String>,
    /// Read the running kubelet's configuration from its `/configz` endpoint instead of
    /// files (through the API server's node proxy: needs `nodes/proxy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configz: Option<bool>,
}
