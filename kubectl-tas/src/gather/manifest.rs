//! The bundle's `manifest.yaml`: when and by what it was gathered, and one entry per
//! thing it tried to collect — collected (with the file and its size) or not (with
//! why: a missing permission, an endpoint that did not answer, nothing to collect).
//! A failure is recorded, never fatal: a partial bundle is still worth sending.

use serde::{Deserialize, Serialize};

/// The manifest's file name in the bundle.
pub const MANIFEST: &str = "manifest.yaml";
/// `kind` of the manifest, to recognise a bundle.
pub const KIND: &str = "TASSupportBundle";
/// The namespace of a pod named without one when reading a bundle (no kubeconfig
/// context to take it from).
pub const DEFAULT_NAMESPACE_IN_BUNDLE: &str = "default";

/// What was collected.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always [`KIND`].
    pub kind: String,
    /// When the gathering started (RFC 3339, UTC).
    pub created: String,
    /// The `kubectl-tas` version that wrote it.
    pub plugin_version: String,
    /// The API server's version, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// The namespaces whose objects, Events and logs were gathered.
    pub namespaces: Vec<String>,
    /// One entry per item.
    pub entries: Vec<Entry>,
}

/// One item of the bundle.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// What it is, for a human ("NodeResourceTopology objects").
    pub what: String,
    /// The file in the bundle, when one was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Collected, failed or skipped.
    pub outcome: Outcome,
    /// Objects or lines in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<usize>,
    /// Bytes written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<usize>,
    /// Why it failed or was skipped; for a collected log, that it was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// How collecting an item went.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum Outcome {
    /// In the bundle.
    Collected,
    /// Tried and failed (`reason` says why).
    Failed,
    /// Not tried, or nothing to collect (`reason` says why).
    Skipped,
}

impl Manifest {
    /// Entries that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.outcome == Outcome::Failed)
    }

    /// The entry of `path`, if any.
    pub fn entry(&self, path: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.path.as_deref() == Some(path))
    }

    /// One line per entry that did not collect, and a count.
    pub fn render(&self, written_to: &str) -> String {
        let collected = self
            .entries
            .iter()
            .filter(|e| e.outcome == Outcome::Collected)
            .count();
        let mut out = format!(
            "wrote {written_to}: {collected} item(s) collected, {} failed, {} skipped (see {MANIFEST})\n",
            self.failed().count(),
            self.entries
                .iter()
                .filter(|e| e.outcome == Outcome::Skipped)
                .count()
        );
        for e in self
            .entries
            .iter()
            .filter(|e| e.outcome != Outcome::Collected)
        {
            out.push_str(&format!(
                "  {:?}: {}: {}\n",
                e.outcome,
                e.what,
                e.reason.as_deref().unwrap_or("")
            ));
        }
        out
    }
}
