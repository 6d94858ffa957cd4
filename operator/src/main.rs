//! `tas-operator`: reconciles the TopologyAwareScheduling object.
//!
//! Today it only prints or writes the CRDs it owns (`tas-operator crd`); the reconcile
//! loop is not implemented yet.

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Runs the TAS topology-aware scheduling stack from one TopologyAwareScheduling object"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the CRDs (TopologyAwareScheduling and NodeResourceTopology) as YAML, or write
    /// one file per CRD into a directory.
    Crd {
        /// Write `<group>_<plural>.yaml` files into this directory instead of printing.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    match Args::parse().command {
        Command::Crd { out } => print_crds(out),
    }
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
