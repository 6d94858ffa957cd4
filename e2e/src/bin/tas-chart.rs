//! `make chart`: regenerates `charts/tas/` from the kustomize tree (see
//! `tas_e2e::chart`). `--check` only compares and fails when the committed chart differs.

use anyhow::{Context, bail};
use clap::Parser;
use std::path::PathBuf;
use tas_e2e::chart::{self, CHART_DIR, Inputs};

/// Regenerate the Helm chart from `kubectl kustomize config/default` and
/// `config/prometheus`.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// kubectl to render the kustomizations with.
    #[arg(long, default_value = "kubectl")]
    kubectl: PathBuf,
    /// The repository root.
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// Compare only: exit non-zero if the chart on disk differs from the generated one.
    #[arg(long)]
    check: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let inputs = Inputs::render(&args.repo, &args.kubectl, env!("CARGO_PKG_VERSION"))
        .context("rendering the kustomizations")?;
    let files = chart::generate(&inputs).context("generating the chart")?;
    let dir = args.repo.join(CHART_DIR);
    if args.check {
        let on_disk = chart::read(&dir)?;
        if on_disk != files {
            bail!("{CHART_DIR} differs from what `make chart` generates: run `make chart`");
        }
        return Ok(());
    }
    chart::write(&dir, &files)?;
    println!("{CHART_DIR}: {} files", files.len());
    Ok(())
}
