//! `tas-operator`: reconciles the TopologyAwareScheduling object (`run`), prints the
//! CRDs it owns (`crd`), renders what it would apply for a manifest (`render`), or deletes
//! the objects and waits for their cleanup before an uninstall (`uninstall`).

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use tas_operator::desired::BuildContext;
use tas_operator::telemetry::{Otlp, OtlpSettings};
use tas_operator::{Config, OperatorIdentity, Options};
use tas_runtime::cli::CommonArgs;
use tas_runtime::lease::LeaseConfig;

use tas_operator::defaults::{
    SCHEDULER_IMAGE as DEFAULT_SCHEDULER_IMAGE, UPDATER_IMAGE as DEFAULT_UPDATER_IMAGE,
};
/// The node agents' namespace of the install (config/manager/namespace.yaml).
const DEFAULT_UPDATER_NAMESPACE: &str = "tas-node";
/// Name of the leader-election Lease.
const LEASE_NAME: &str = "tas-operator";

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Runs the TAS topology-aware scheduling stack from one TopologyAwareScheduling object"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the operator: reconcile the TopologyAwareScheduling object until stopped.
    Run(Box<RunArgs>),
    /// Print the CRDs (TopologyAwareScheduling and NodeResourceTopology) as YAML, or write
    /// one file per CRD into a directory.
    Crd {
        /// Write `<group>_<plural>.yaml` files into this directory instead of printing.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Print every object the operator would apply for a TopologyAwareScheduling
    /// manifest, as a YAML stream, without a cluster (for GitOps review).
    ///
    /// The manifest is validated first, as the operator validates it (images, host
    /// paths, tolerations and node selectors, with the same flags as `run`) and as the CRD's rules on the whole object do (the name `default`,
    /// unique node-group names, deleteOnUninstall only with manage); anything refused
    /// exits with an error saying what to change. Overlapping node groups need the
    /// cluster's nodes, and field formats are the API server's schema: check those
    /// with `kubectl apply --dry-run=server`.
    Render {
        /// The TopologyAwareScheduling manifest (`-` for stdin).
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        #[command(flatten)]
        install: InstallArgs,
    },
    /// Delete every TopologyAwareScheduling object and wait until the running operator
    /// has removed their operands (the Helm chart's pre-delete hook); with
    /// `--leases-in`, instead wait until the operator's and the scheduler's pods are
    /// gone from that namespace and delete their leader-election Leases (its
    /// post-delete hook). So `helm uninstall` leaves nothing behind.
    Uninstall {
        /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config, else the in-cluster
        /// service account).
        #[arg(long, env = "KUBECONFIG")]
        kubeconfig: Option<PathBuf>,
        /// How long to wait, in seconds, for the objects (or the pods) to be gone.
        #[arg(long, default_value_t = 300)]
        timeout_seconds: u64,
        /// Delete the Leases tas-operator and tas-scheduler of this namespace once no
        /// operator or scheduler pod is left there (and leave the objects alone).
        #[arg(long, value_parser = parse_namespace)]
        leases_in: Option<String>,
    },
}

/// What the installer decides and the CR only picks among: the operand images and
/// the tolerations the CR may give them.
#[derive(Args, Debug)]
struct InstallArgs {
    /// Node agent image for node groups whose CR sets none.
    #[arg(long, env = "TAS_UPDATER_IMAGE", default_value = DEFAULT_UPDATER_IMAGE)]
    updater_image: String,
    /// Scheduler image when the CR sets none.
    #[arg(long, env = "TAS_SCHEDULER_IMAGE", default_value = DEFAULT_SCHEDULER_IMAGE)]
    scheduler_image: String,
    /// Images the CR may name besides the two above, exactly as written there:
    /// `repository:tag`, `repository@sha256:<hex>` or both, separated by commas or
    /// whitespace. Empty: the CR can only name the two defaults.
    #[arg(long, env = "TAS_ALLOWED_IMAGES", default_value = "", value_parser = parse_allowed_images)]
    allowed_images: AllowedImages,
    /// Taint keys the CR's tolerations may name, separated by commas or whitespace; `*`
    /// allows any toleration, also one without a key (every taint). Empty: none.
    #[arg(long, env = "TAS_ALLOWED_TOLERATION_KEYS", default_value = "")]
    allowed_toleration_keys: String,
    /// Namespace of the node agents, which the installer creates with the Pod Security
    /// level they need (`privileged`: host paths, uid 0) and where it binds the operator
    /// the ClusterRole tas-operator-operands; spec.namespace then holds only the
    /// scheduler and can be `restricted`. Empty: the agents run in spec.namespace.
    #[arg(long, env = "TAS_UPDATER_NAMESPACE", default_value = DEFAULT_UPDATER_NAMESPACE, value_parser = parse_namespace)]
    updater_namespace: String,
}

/// `--updater-namespace`: empty or a DNS-1123 label.
fn parse_namespace(name: &str) -> Result<String, String> {
    let label = name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if label {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "{name:?} is not a namespace name: lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit"
        ))
    }
}

/// The parsed `--allowed-images` (a newtype: clap would read a `Vec` as a repeated flag).
#[derive(Debug, Clone)]
struct AllowedImages(Vec<String>);

fn parse_allowed_images(list: &str) -> Result<AllowedImages, String> {
    tas_operator::validate::images::parse_allowed_images(list)
        .map(AllowedImages)
        .map_err(|e| e.to_string())
}

impl InstallArgs {
    fn build_context(self) -> BuildContext {
        BuildContext {
            updater_image_default: Some(self.updater_image),
            scheduler_image_default: Some(self.scheduler_image),
            allowed_images: self.allowed_images.0,
            allowed_toleration_keys: tas_operator::validate::policy::parse_toleration_keys(
                &self.allowed_toleration_keys,
            ),
            updater_namespace: Some(self.updater_namespace).filter(|n| !n.is_empty()),
        }
    }
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    install: InstallArgs,
    /// Reconcile only while holding the `tas-operator` Lease, so that several replicas
    /// can run with one active.
    #[arg(long, default_value_t = false)]
    leader_elect: bool,
    /// Namespace of the leader-election Lease (the operator's own namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "tas-system")]
    leader_elect_namespace: String,
    /// The operator's ServiceAccount (in `--leader-elect-namespace`): the subject of the
    /// RoleBindings it creates for itself in a namespace it creates for the operands.
    #[arg(long, default_value = "tas-operator")]
    service_account: String,
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Crd { out } => print_crds(out),
        Command::Render { file, install } => render(&file, install),
        Command::Uninstall {
            kubeconfig,
            timeout_seconds,
            leases_in,
        } => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?
            .block_on(uninstall(
                kubeconfig,
                std::time::Duration::from_secs(timeout_seconds),
                leases_in,
            )),
        // Bounded: tasks still running once `run` returns get a second, not forever.
        Command::Run(args) => tas_runtime::shutdown::block_on_bounded(
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?,
            run(*args),
        ),
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let instance = args.common.identity();
    let otlp = Otlp::new(OtlpSettings::from_env(
        tas_operator::telemetry::SERVICE_NAME,
        Some(instance.clone()),
    )?);
    tas_operator::telemetry::init(&args.common.log_level, args.common.log_format, &otlp)?;
    // The environment's endpoint until the object names one.
    otlp.use_endpoint(None);
    let outcome = operate(args, instance, otlp.clone()).await;
    otlp.shutdown().await;
    outcome
}

/// Serves metrics and reconciles (when leading) until a shutdown signal.
async fn operate(args: RunArgs, instance: String, otlp: Otlp) -> anyhow::Result<()> {
    let client = args.common.client().await?;
    let config = Config {
        build: args.install.build_context(),
        instance: Some(instance.clone()),
        identity: Some(OperatorIdentity {
            namespace: args.leader_elect_namespace.clone(),
            service_account: args.service_account.clone(),
        }),
        ..Config::default()
    };
    let options = Options {
        http: Some(args.common.endpoint(&client)),
        leader_election: args
            .leader_elect
            .then(|| LeaseConfig::new(&args.leader_elect_namespace, LEASE_NAME, &instance)),
        ..Options::new(config, otlp)
    };
    tas_operator::operate(client, options, tas_runtime::signals::shutdown()).await?;
    Ok(())
}

async fn uninstall(
    kubeconfig: Option<PathBuf>,
    timeout: std::time::Duration,
    leases_in: Option<String>,
) -> anyhow::Result<()> {
    tas_runtime::telemetry::init_logging("info", tas_runtime::telemetry::LogFormat::Json)?;
    let client = tas_runtime::client::from_kubeconfig(kubeconfig.as_deref()).await?;
    if let Some(namespace) = leases_in {
        let deleted = tas_operator::uninstall::delete_leases(client, &namespace, timeout).await?;
        println!("namespace {namespace}: deleted the Leases {deleted:?}");
        return Ok(());
    }
    let deleted = tas_operator::uninstall::uninstall(client, timeout).await?;
    if deleted.is_empty() {
        println!("no TopologyAwareScheduling object to delete");
    } else {
        println!(
            "deleted TopologyAwareScheduling {}; the operator removed the operands",
            deleted.join(", ")
        );
    }
    Ok(())
}

fn render(file: &std::path::Path, install: InstallArgs) -> anyhow::Result<()> {
    let manifest = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading stdin")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    print!(
        "{}",
        tas_operator::render::render(&manifest, &install.build_context())?
    );
    Ok(())
}

fn print_crds(out: Option<PathBuf>) -> anyhow::Result<()> {
    let crds = tas_api::crds::all();
    match out {
        None => {
            for g in &crds {
                print!("---\n{}", tas_api::crds::to_yaml(&g.crd)?);
            }
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for g in &crds {
                let path = dir.join(&g.file_name);
                std::fs::write(&path, tas_api::crds::to_yaml(&g.crd)?)
                    .with_context(|| format!("writing {}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
        }
    }
    Ok(())
}
