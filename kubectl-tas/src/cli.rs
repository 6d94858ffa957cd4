//! The command line: `kubectl tas [status|nodes|explain POD]` with kubectl's kubeconfig
//! flags, `-o text|json`, and where the scheduler's Service is; [`run`] executes it.

use clap::{Parser, Subcommand, ValueEnum};

use crate::cluster::ClusterRead;
use crate::connect::{KubeOptions, connect};
use crate::error::Error;
use crate::explain::explain;
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
}

/// Runs `cli`: the text or JSON to print.
pub async fn run(cli: &Cli) -> Result<String, Error> {
    let conn = connect(&cli.kube).await?;
    let stack = match cli.command {
        Command::Status => stack::read(&conn.client).await?,
        // Only for the scheduler's namespace: without the right to read the object, the
        // defaults and the flags say where the scheduler is.
        _ => stack::read(&conn.client).await.ok().flatten(),
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
    };
    Ok(match cli.output {
        Output::Text => text,
        // Reports are plain data: serializing cannot fail.
        Output::Json => json.unwrap_or_default() + "\n",
    })
}
