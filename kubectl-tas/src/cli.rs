//! The command line: `kubectl tas [status|nodes|explain POD|decisions|gather]` with kubectl's
//! connection flags, `-o text|json`, where the scheduler's Service is, and
//! `--from-bundle` (read a support bundle instead of the cluster); [`run`] executes it.

use clap::{Parser, Subcommand, ValueEnum};

use crate::bundle::Bundle;
use crate::cluster::ClusterRead;
use crate::connect::{KubeOptions, connect};
use crate::decisions::{self, DecisionsArgs};
use crate::error::Error;
use crate::explain::explain;
use crate::gather::{GatherArgs, gather};
use crate::nodes::NodesReport;
use crate::stack::{self, SchedulerFlags};
use crate::status::StatusReport;

/// `kubectl tas`: why a pod waits on NUMA, what every zone has free, and the TAS
/// stack's health.
#[derive(Debug, Parser)]
#[command(name = "kubectl tas", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub kube: KubeOptions,
    #[command(flatten)]
    pub scheduler: SchedulerFlags,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Read a support bundle of `kubectl tas gather` (directory or .tar.gz) instead of
    /// the cluster (`status`, `nodes` and `decisions`).
    #[arg(long, global = true)]
    pub from_bundle: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Plain aligned text.
    Text,
    /// The report as JSON.
    Json,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The TopologyAwareScheduling object's conditions, node groups and stale nodes.
    Status,
    /// Every node's NUMA zones: free and allocatable per resource, and whether the
    /// scheduler's view agrees with the node's NodeResourceTopology.
    Nodes,
    /// Per node, why POD fits or not: the scheduler's reason, and per NUMA zone what is
    /// free against what the pod needs.
    Explain {
        /// The pod's name (namespace: -n).
        pod: String,
    },
    /// The scheduler's recent scheduling attempts, newest first: outcome, node and NUMA
    /// zones, DRA devices, nodes evaluated, time taken, trace id and why no node fit
    /// (live from its /debug/decisions, or from a bundle with --from-bundle).
    Decisions(DecisionsArgs),
    /// Write a support bundle: the stack object and its Events, Nodes, the
    /// NodeResourceTopology objects, the kubelet settings the node agents read, the
    /// scheduler's reservations and decisions, the operands' objects, Events and logs.
    /// Never Secrets; credentials in other objects are masked.
    Gather(GatherArgs),
}

/// Runs `cli`: the text or JSON to print.
pub async fn run(cli: &Cli) -> Result<String, Error> {
    if let Some(path) = &cli.from_bundle {
        return from_bundle(cli, path);
    }
    let conn = connect(&cli.kube).await?;
    // `status` needs the object; the other commands only take the scheduler's namespace
    // from it (without the right to read it, the defaults and the flags say where the
    // scheduler is), and `gather` records why it could not be read.
    let (stack, mut read_error) = match stack::read(&conn.client).await {
        Ok(found) => (found, None),
        Err(e) if matches!(cli.command, Command::Status) => return Err(e),
        Err(e) => (None, Some(e)),
    };
    let service = cli.scheduler.service(stack.as_ref())?;
    let (text, json) = match &cli.command {
        Command::Status => {
            let r = StatusReport::build(stack.as_ref());
            (r.render(), serde_json::to_string_pretty(&r))
        }
        Command::Nodes => {
            let cluster = ClusterRead::read(&conn.client, &service).await?;
            let r = NodesReport::build(&cluster);
            (r.render(), serde_json::to_string_pretty(&r))
        }
        Command::Explain { pod } => {
            let cluster = ClusterRead::read(&conn.client, &service).await?;
            let r = explain(
                &conn.client,
                &conn.namespace,
                pod,
                &cluster,
                stack::nodes_without_topology(stack.as_ref()),
            )
            .await?;
            (r.render(), serde_json::to_string_pretty(&r))
        }
        Command::Decisions(args) => {
            let query = args.query(cli.kube.namespace.as_deref(), &conn.namespace)?;
            let r = service.decisions(&conn.client, &query).await?;
            (
                decisions::render(&r, "live"),
                serde_json::to_string_pretty(&r),
            )
        }
        Command::Gather(args) => {
            let read = match read_error.take() {
                Some(e) => Err(e),
                None => Ok(stack.clone()),
            };
            let (dest, manifest) = gather(&conn.client, read, &service, args).await?;
            (
                manifest.render(&dest.to_string_lossy()),
                serde_json::to_string_pretty(&manifest),
            )
        }
    };
    Ok(print(cli.output, text, json))
}

fn print(output: Output, text: String, json: serde_json::Result<String>) -> String {
    match output {
        Output::Text => text,
        // Reports are plain data: serializing cannot fail.
        Output::Json => json.unwrap_or_default() + "\n",
    }
}

/// `status`, `nodes` or `decisions` on a bundle's files instead of the cluster.
fn from_bundle(cli: &Cli, path: &std::path::Path) -> Result<String, Error> {
    let bundle = Bundle::read(path)?;
    let manifest: Option<crate::gather::manifest::Manifest> =
        bundle.yaml(crate::gather::manifest::MANIFEST)?;
    if manifest
        .as_ref()
        .is_none_or(|m| m.kind != crate::gather::manifest::KIND)
    {
        return Err(Error::Bundle {
            path: path.to_owned(),
            message:
                "not a bundle of `kubectl tas gather` (no manifest.yaml of kind TASSupportBundle)"
                    .into(),
        });
    }
    let (text, json) = match &cli.command {
        Command::Status => {
            use crate::gather::collect::STACK;
            let stack = bundle.yaml(STACK)?;
            let failed = manifest
                .as_ref()
                .and_then(|m| m.entry(STACK))
                .and_then(|e| e.reason.clone());
            if let (None, Some(why)) = (&stack, failed) {
                return Err(Error::Bundle {
                    path: path.join(STACK),
                    message: format!("the stack object was not gathered: {why}"),
                });
            }
            let r = StatusReport::build(stack.as_ref());
            (r.render(), serde_json::to_string_pretty(&r))
        }
        Command::Nodes => {
            let cluster = ClusterRead::from_bundle(&bundle)?;
            let r = NodesReport::build(&cluster);
            (r.render(), serde_json::to_string_pretty(&r))
        }
        Command::Decisions(args) => {
            use crate::gather::manifest::DEFAULT_NAMESPACE_IN_BUNDLE;
            let query = args.query(cli.kube.namespace.as_deref(), DEFAULT_NAMESPACE_IN_BUNDLE)?;
            let Some(report) = bundle.yaml(decisions::BUNDLE_PATH)? else {
                let why = manifest
                    .as_ref()
                    .and_then(|m| m.entry(decisions::BUNDLE_PATH))
                    .and_then(|e| e.reason.clone())
                    .unwrap_or_else(|| {
                        "no entry in the manifest (a bundle of an older kubectl tas)".into()
                    });
                return Err(Error::Bundle {
                    path: path.join(decisions::BUNDLE_PATH),
                    message: format!("the scheduler's decisions were not gathered: {why}"),
                });
            };
            let r = decisions::select(report, &query);
            (
                decisions::render(&r, "from the bundle"),
                serde_json::to_string_pretty(&r),
            )
        }
        Command::Explain { .. } | Command::Gather(_) => {
            return Err(Error::Flag {
                flag: "--from-bundle",
                message: "only status, nodes and decisions read a bundle (explain needs the live pods, gather writes one)".into(),
            });
        }
    };
    Ok(print(cli.output, text, json))
}
