//! `kubectl tas gather`: a support bundle, for a bug report or a support case. It
//! holds what one needs to see why the stack placed, or refused, a pod:
//!
//! ```text
//! manifest.yaml                         what was collected, what failed and why
//! topologyawarescheduling.yaml          the stack object, spec and status
//! events/topologyawarescheduling.yaml   Events about it
//! cluster/nodes.yaml                    Nodes: labels, capacity, allocatable
//! cluster/noderesourcetopologies.yaml   every NodeResourceTopology
//! cluster/kubelet-configs.yaml          per node, the kubelet settings its agent read
//! scheduler/reservations.json           the scheduler's reserve cache (/debug/reservations)
//! scheduler/decisions.json              its recent scheduling attempts (/debug/decisions)
//! scheduler/events.yaml                 the scheduler's decisions (its Events)
//! namespaces/NS/{daemonsets,deployments,configmaps,services,pods,events}.yaml
//! namespaces/NS/logs/POD/CONTAINER[.previous].log   bounded by --log-bytes
//! ```
//!
//! NS: the operands' namespace (`spec.namespace`), the namespaces of the objects the
//! operator reports in `status.relatedObjects` (the node agents'), and any
//! `--gather-namespace`. Secrets are never read; credentials other objects carry are
//! masked ([`redact`]). A read that fails (a permission the user lacks, a scheduler that
//! does not answer) is recorded in the manifest and the rest goes on. `status`,
//! `nodes` and `decisions` read a bundle back with `--from-bundle`.

pub mod collect;
pub mod manifest;
pub mod redact;

use std::collections::BTreeSet;
use std::path::PathBuf;

use kube::Client;
use serde_json::Value;
use tas_api::tas::{DEFAULT_NAMESPACE, TopologyAwareScheduling};

use crate::error::Error;
use crate::proxy::SchedulerService;
use collect::{Gatherer, Limits};
use manifest::{KIND, MANIFEST, Manifest};

/// The flags of `gather`.
#[derive(Debug, Clone, clap::Args)]
pub struct GatherArgs {
    /// Where to write the bundle: a `.tar.gz` / `.tgz` archive, else a directory; it
    /// must not exist. Default: `tas-gather-<UTC time>.tar.gz` here.
    #[arg(long)]
    pub dest: Option<PathBuf>,
    /// Bytes of each container log to keep (the newest).
    #[arg(long, default_value_t = 1 << 20)]
    pub log_bytes: i64,
    /// Events to keep per list (the newest).
    #[arg(long, default_value_t = 1000)]
    pub max_events: usize,
    /// Another namespace to gather objects, Events and logs of (e.g. the operator's
    /// own when the operands run elsewhere); repeat for several.
    #[arg(long = "gather-namespace")]
    pub namespaces: Vec<String>,
}

/// `tas-gather-20260102T030405Z.tar.gz`.
fn default_dest(now: &k8s_openapi::jiff::Timestamp) -> PathBuf {
    PathBuf::from(format!(
        "tas-gather-{}.tar.gz",
        now.strftime("%Y%m%dT%H%M%SZ")
    ))
}

/// The namespaces to gather: the operands', those of the related objects, the flags'.
pub fn namespaces(stack: Option<&TopologyAwareScheduling>, extra: &[String]) -> Vec<String> {
    let mut out = BTreeSet::new();
    match stack {
        Some(s) => {
            out.insert(s.spec.namespace.clone());
            out.extend(
                s.status
                    .iter()
                    .flat_map(|st| &st.related_objects)
                    .filter_map(|o| o.namespace.clone()),
            );
        }
        None => {
            out.insert(DEFAULT_NAMESPACE.to_owned());
        }
    }
    out.extend(extra.iter().cloned());
    out.into_iter().collect()
}

/// Gathers the bundle and writes it; where it went and its manifest.
pub async fn gather(
    client: &Client,
    stack: Result<Option<TopologyAwareScheduling>, Error>,
    service: &SchedulerService,
    args: &GatherArgs,
) -> Result<(PathBuf, Manifest), Error> {
    if args.log_bytes < 1 {
        return Err(Error::Flag {
            flag: "--log-bytes",
            message: format!("{} is not a positive number of bytes", args.log_bytes),
        });
    }
    let now = k8s_openapi::jiff::Timestamp::now();
    let dest = args.dest.clone().unwrap_or_else(|| default_dest(&now));
    if dest.exists() {
        return Err(Error::Bundle {
            path: dest,
            message: "already exists; choose another --dest".into(),
        });
    }
    let stack_ok = stack.as_ref().ok().and_then(Option::as_ref);
    let namespaces = namespaces(stack_ok, &args.namespaces);
    let manifest = Manifest {
        kind: KIND.into(),
        created: now.to_string(),
        plugin_version: env!("CARGO_PKG_VERSION").into(),
        server_version: client.apiserver_version().await.ok().map(|v| v.git_version),
        namespaces: namespaces.clone(),
        entries: Vec::new(),
    };
    let limits = Limits {
        log_bytes: args.log_bytes,
        events: args.max_events,
    };
    let issues: Vec<Value> = stack_ok
        .and_then(|s| s.status.as_ref())
        .into_iter()
        .flat_map(|s| &s.node_groups)
        .flat_map(|g| &g.kubelet_config_issues)
        .filter_map(|i| serde_json::to_value(i).ok())
        .collect();
    let stack_json = match &stack {
        Ok(found) => Ok(found.as_ref().and_then(|s| serde_json::to_value(s).ok())),
        Err(e) => Err(e.to_string()),
    };
    let mut g = Gatherer::new(client.clone(), limits, manifest);
    g.stack(stack_json).await;
    g.nodes().await;
    g.topology(issues).await;
    g.reservations(service).await;
    g.decisions().await;
    g.decision_traces(service).await;
    for ns in &namespaces {
        g.namespace(ns).await;
    }
    let Gatherer {
        mut bundle,
        manifest,
        ..
    } = g;
    bundle.put_yaml(MANIFEST, &manifest);
    bundle.write(&dest)?;
    Ok((dest, manifest))
}
