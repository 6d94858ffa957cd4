//! Where the agent gets the kubelet's settings, and what it does when they are bad.
//!
//! ```text
//! config file ─┐
//! drop-ins (*.conf, lexical) ─┼─ merge patch ─► overrides (CR, for flag-configured kubelets)
//!              │                                   └─► KubeletConfig ──► publish
//! or /configz (API server node proxy) ─┘
//! ```
//!
//! A read either yields settings or a [`Problem`] naming the node's file (as a host
//! path) and what is wrong with it. [`Discovery`] keeps the last settings that could be
//! read and publishes those while a problem lasts: the running kubelet keeps the
//! configuration it started with until it restarts, and refuses to start with one that
//! does not parse, so the last good settings are the best guess of what it enforces.
//! With none (a problem since the agent started) there is nothing true to publish.
//! Problems are never silent: they are logged as warnings and published in the NRT
//! object's annotations ([`tas_api::nrt::agent_report`]) for the operator to report.

pub mod configz;
pub mod document;
mod known_fields;
pub mod stamp;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tas_api::nrt::agent_report::AgentReport;
use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};

use crate::kubelet_config::KubeletConfig;
use document::DocumentError;

/// Topology Manager settings that replace the configuration's (kubelets configured by
/// command-line flags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--topology-manager-policy`.
    pub policy: Option<TopologyManagerPolicy>,
    /// `--topology-manager-scope`.
    pub scope: Option<TopologyManagerScope>,
    /// `--topology-manager-policy-options`.
    pub options: Option<BTreeMap<String, String>>,
}

impl Overrides {
    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        self.policy.is_none() && self.scope.is_none() && self.options.is_none()
    }

    /// The overrides as a merge patch over a configuration document.
    fn layer(&self) -> Value {
        let mut layer = serde_json::Map::new();
        if let Some(p) = self.policy {
            layer.insert("topologyManagerPolicy".into(), json!(p.as_str()));
        }
        if let Some(s) = self.scope {
            layer.insert("topologyManagerScope".into(), json!(s.as_str()));
        }
        if let Some(options) = &self.options {
            // Replaces the configuration's options: null first removes them all.
            layer.insert("topologyManagerPolicyOptions".into(), Value::Null);
            if !options.is_empty() {
                layer.insert("topologyManagerPolicyOptions".into(), json!(options));
            }
        }
        Value::Object(layer)
    }

    fn apply(&self, config: &mut KubeletConfig) {
        if let Some(p) = self.policy {
            config.topology_manager_policy = p;
        }
        if let Some(s) = self.scope {
            config.topology_manager_scope = s;
        }
    }
}

/// Where the kubelet's settings are.
#[derive(Debug, Clone, Default)]
pub struct SourceConfig {
    /// The config file (`--config`), as the agent sees it.
    pub file: PathBuf,
    /// The drop-in directory (`--config-dir`), as the agent sees it.
    pub config_dir: Option<PathBuf>,
    /// Read `/configz` through the API server instead of the files.
    pub configz: bool,
    /// Settings published whatever the configuration says.
    pub overrides: Overrides,
    /// `(path in the agent's container, host path)` of each mount, to name host paths.
    pub host_paths: Vec<(PathBuf, String)>,
}

/// Settings read without a problem.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The merged settings, overrides applied.
    pub config: KubeletConfig,
    /// What was read, as host paths (or `/configz`).
    pub sources: Vec<String>,
}

/// Why the settings could not be read: the file (host path, or `/configz`) and what is
/// wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct Problem {
    /// The file, or `/configz`.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// What to publish when nothing was ever read (only for a missing config file: the
    /// kubelet's defaults, which is what a kubelet started without `--config` runs).
    pub fallback: Option<Box<Loaded>>,
}

impl Problem {
    fn new(path: String, message: impl Into<String>) -> Self {
        Self {
            path,
            message: message.into(),
            fallback: None,
        }
    }
}

impl SourceConfig {
    /// The host path of `path` (the container path when no mount covers it).
    pub fn host_path(&self, path: &Path) -> String {
        for (container, host) in &self.host_paths {
            if let Ok(rest) = path.strip_prefix(container) {
                let host = Path::new(host);
                return if rest.as_os_str().is_empty() {
                    host.display().to_string()
                } else {
                    host.join(rest).display().to_string()
                };
            }
        }
        path.display().to_string()
    }

    /// Reads the config file and the drop-ins, merged as the kubelet merges them, with
    /// the overrides on top. Blocks on file reads.
    pub fn read_files(&self) -> Result<Loaded, Problem> {
        let mut sources = Vec::new();
        let mut merged = match document::read(&self.file) {
            Ok(doc) => {
                self.checked(&self.file, &doc, false)?;
                sources.push(self.host_path(&self.file));
                doc
            }
            Err(DocumentError::NotFound) => Value::Object(serde_json::Map::new()),
            Err(e) => return Err(Problem::new(self.host_path(&self.file), e.to_string())),
        };
        if let Some(dir) = &self.config_dir {
            let files = document::drop_ins(dir).map_err(|e| {
                Problem::new(
                    self.host_path(dir),
                    format!("the kubelet's drop-in directory cannot be read: {e}"),
                )
            })?;
            for file in files {
                let doc = document::read(&file)
                    .map_err(|e| Problem::new(self.host_path(&file), e.to_string()))?;
                self.checked(&file, &doc, true)?;
                sources.push(self.host_path(&file));
                document::merge_patch(&mut merged, doc);
            }
        }
        if sources.is_empty() && self.overrides.is_empty() {
            // No file, no drop-in, no override: the path is wrong, or the kubelet is
            // configured by flags the agent cannot see.
            return Err(Problem {
                fallback: Some(Box::new(Loaded {
                    config: KubeletConfig::default(),
                    sources: Vec::new(),
                })),
                ..Problem::new(
                    self.host_path(&self.file),
                    "not found: the kubelet's defaults (Topology Manager policy none) are published; set the node group's kubelet.configFile to the kubelet's --config, or its topologyManager to the kubelet's flags",
                )
            });
        }
        if !self.overrides.is_empty() {
            document::merge_patch(&mut merged, self.overrides.layer());
            sources.push("overrides".to_owned());
        }
        let mut config = KubeletConfig::from_value(merged).map_err(|e| {
            Problem::new(
                sources.join(", "),
                format!("the merged configuration is not valid: {e}"),
            )
        })?;
        self.overrides.apply(&mut config);
        Ok(Loaded { config, sources })
    }

    /// `doc` unless it fails the kubelet's checks, or parses to invalid settings on
    /// its own (so that a bad value is blamed on the file that holds it).
    fn checked(&self, path: &Path, doc: &Value, drop_in: bool) -> Result<(), Problem> {
        let host = || self.host_path(path);
        document::check(doc, drop_in).map_err(|e| Problem::new(host(), e.to_string()))?;
        let mut alone = doc.clone();
        if let Some(fields) = alone.as_object_mut() {
            // A drop-in's kind is checked above; the rest is validated field by field.
            fields.remove("apiVersion");
        }
        KubeletConfig::from_value(alone)
            .map(drop)
            .map_err(|e| Problem::new(host(), e.to_string()))
    }
}

/// The settings to publish and what to report, from a sequence of reads.
#[derive(Debug, Default)]
pub struct Discovery {
    last_good: Option<Loaded>,
    last_problem: Option<String>,
}

/// The outcome of one read.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The settings to publish: this read's, or the last good ones while there is a
    /// problem; `None` when nothing was ever read.
    pub config: Option<KubeletConfig>,
    /// What to publish about it.
    pub report: AgentReport,
    /// The problem of this read.
    pub problem: Option<Problem>,
}

impl Discovery {
    /// Takes one read's result; logs a new problem as a warning.
    pub fn settle(&mut self, read: Result<Loaded, Problem>) -> Reading {
        match read {
            Ok(loaded) => {
                let reading = Reading {
                    config: Some(loaded.config.clone()),
                    report: AgentReport {
                        source: Some(loaded.sources.join(", ")),
                        problem: None,
                    },
                    problem: None,
                };
                self.last_good = Some(loaded);
                if self.last_problem.take().is_some() {
                    tracing::info!(source = ?reading.report.source, "kubelet configuration readable again");
                }
                reading
            }
            Err(problem) => {
                let kept = self
                    .last_good
                    .clone()
                    .or_else(|| problem.fallback.as_deref().cloned());
                let message = match (&self.last_good, &kept) {
                    (Some(_), _) => format!(
                        "{}: {} (publishing the last settings read)",
                        problem.path, problem.message
                    ),
                    (None, Some(_)) => format!("{}: {}", problem.path, problem.message),
                    (None, None) => format!(
                        "{}: {} (no settings were ever read: publishing no zones)",
                        problem.path, problem.message
                    ),
                };
                if self.last_problem.as_ref() != Some(&message) {
                    tracing::warn!(problem = %message, "kubelet configuration");
                    self.last_problem = Some(message.clone());
                }
                Reading {
                    config: kept.as_ref().map(|k| k.config.clone()),
                    report: AgentReport {
                        source: Some(problem.path.clone()),
                        problem: Some(message),
                    },
                    problem: Some(problem),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
