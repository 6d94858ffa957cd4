//! The Helm chart `charts/tas/`, generated from the kustomize tree so the two cannot
//! drift: `make chart` renders `config/default` and `config/prometheus` with `kubectl
//! kustomize` and turns the objects into chart files, templatising the values an
//! installer sets (namespaces, images, the operator pod's settings, extra labels of the
//! monitoring objects), adding Helm's standard labels to every object and putting the
//! optional parts behind switches (network policies, the monitoring bundle, the CRD, a
//! TopologyAwareScheduling object); the chart's own objects (the uninstall hook, the
//! metrics reader's binding) and `values.schema.json` come from the generator too.
//!
//! ```text
//! kubectl kustomize config/default ─┐                 templatize (objects, markers)
//! kubectl kustomize config/prometheus ─┼─► Inputs ──generate()──► Files ──write()──► charts/tas/
//! config/samples (the object's spec) ─┘        (pure)  operator, values, schema, extras
//! ```
//!
//! With default values `helm template` gives back what `kubectl kustomize
//! config/default` gives, but for Helm's labels, the CRD's keep annotation, the chart's
//! uninstall hook and the Namespace (Helm's release namespace, which the user creates
//! with the Pod Security label config/default gives it: the operator never labels a
//! namespace it did not create). `tests/chart.rs` checks both that and that the
//! committed chart equals what [`generate`] produces now.

mod extras;
mod files;
mod markers;
mod operator;
mod schema;
mod templatize;
mod values;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use files::{read, write};
pub use templatize::generate;

/// The chart's files: path relative to the chart directory → content.
pub type Files = BTreeMap<String, String>;

/// Where the chart lives in the repository.
pub const CHART_DIR: &str = "charts/tas";

/// What the chart is generated from.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// `kubectl kustomize config/default`.
    pub default: String,
    /// `kubectl kustomize config/prometheus`.
    pub monitoring: String,
    /// `config/samples/tas_v1alpha1_topologyawarescheduling.yaml`.
    pub sample: String,
    /// The workspace version (`0.1.0`): the chart's version, `v` + it the images' tag.
    pub version: String,
}

/// Why the chart could not be generated or written.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// kubectl could not run or failed.
    #[error("kubectl kustomize {dir}: {message}")]
    Kustomize {
        /// The kustomization.
        dir: String,
        /// Its stderr, or why it did not run.
        message: String,
    },
    /// Reading or writing a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The kustomize output is not what the generator knows how to templatise.
    #[error("unexpected input: {0}")]
    Input(String),
}

impl Inputs {
    /// Renders the kustomizations of the repository at `repo` with `kubectl`.
    pub fn render(repo: &Path, kubectl: &Path, version: &str) -> Result<Self, ChartError> {
        let sample_path = repo.join("config/samples/tas_v1alpha1_topologyawarescheduling.yaml");
        let sample = std::fs::read_to_string(&sample_path).map_err(|source| ChartError::Io {
            path: sample_path,
            source,
        })?;
        Ok(Self {
            default: kustomize(repo, kubectl, "config/default")?,
            monitoring: kustomize(repo, kubectl, "config/prometheus")?,
            sample,
            version: version.to_owned(),
        })
    }
}

/// `kubectl kustomize <dir>` run in `repo`.
pub fn kustomize(repo: &Path, kubectl: &Path, dir: &str) -> Result<String, ChartError> {
    let failed = |message: String| ChartError::Kustomize {
        dir: dir.to_owned(),
        message,
    };
    let out = std::process::Command::new(kubectl)
        .args(["kustomize", dir])
        .current_dir(repo)
        .output()
        .map_err(|e| failed(format!("running {}: {e}", kubectl.display())))?;
    if !out.status.success() {
        return Err(failed(String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    String::from_utf8(out.stdout).map_err(|e| failed(e.to_string()))
}

/// The YAML documents of a multi-document stream, empty ones left out.
pub fn documents(yaml: &str) -> Result<Vec<serde_json::Value>, ChartError> {
    use serde::Deserialize;
    let mut out = Vec::new();
    for doc in serde_norway::Deserializer::from_str(yaml) {
        let value = serde_json::Value::deserialize(doc)
            .map_err(|e| ChartError::Input(format!("not YAML: {e}")))?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}
