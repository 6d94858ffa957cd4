//! Writes the node's NodeResourceTopology with server-side apply — only when its content
//! changed, plus a slow safety-net re-apply.
//!
//! The publisher remembers the content it last applied. On the first publish it reads
//! the object once (a restart of the agent with an unchanged node costs one GET and no
//! write); afterwards it never reads. A write happens when the desired content differs
//! from the remembered one, or when the safety interval has passed since the last write
//! (this repairs an object someone else edited, without a watch).
//!
//! Another NRT writer (node-feature-discovery's topology-updater,
//! resource-topology-exporter, ...) may already publish the node's object: the agent
//! then does not force over it unless told to ([`Publisher::take_over`]); it reports
//! [`Outcome::Yielded`] with the other writers' field managers, read from the object's
//! `managedFields` ([`tas_api::nrt::ownership`]).

use kube::Api;
use kube::api::{Patch, PatchParams};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tas_api::nrt::ownership::foreign_nrt_writers;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tracing::Instrument as _;

/// Field manager of every write the agent makes.
pub const FIELD_MANAGER: &str = "tas-updater";

/// What a publish did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The object was written.
    Applied,
    /// The content was unchanged; nothing was written.
    Unchanged,
    /// Another writer publishes this object and the agent does not take over: nothing
    /// was written. The other writers' field managers.
    Yielded(Vec<String>),
}

/// Errors of a publish (always transient from the agent's point of view: retried on the
/// next trigger).
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The API server refused or could not be reached.
    #[error("applying NodeResourceTopology {name}: {source}")]
    Apply {
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The first read of the existing object failed.
    #[error("reading NodeResourceTopology {name}: {source}")]
    Read {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Prefix of the annotations the agent writes.
const AGENT_ANNOTATION_PREFIX: &str = "tas.dev/kubelet-config";

/// The part of the object the agent owns; two objects with equal content need no write.
#[derive(Debug, Clone, PartialEq)]
struct Content {
    topology_policies: Vec<String>,
    attributes: Vec<tas_api::nrt::v1alpha2::AttributeInfo>,
    zones: Vec<tas_api::nrt::v1alpha2::Zone>,
    owners: Vec<String>,
    /// The agent's own annotations (its report on the kubelet configuration).
    annotations: BTreeMap<String, String>,
}

impl Content {
    fn of(obj: &NodeResourceTopology) -> Self {
        let owners = obj
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| format!("{}/{}/{}", o.kind, o.name, o.uid))
            .collect();
        Self {
            topology_policies: obj.topology_policies.clone(),
            attributes: obj.attributes.clone(),
            zones: obj.zones.clone(),
            owners,
            annotations: obj
                .metadata
                .annotations
                .iter()
                .flatten()
                .filter(|(k, _)| k.starts_with(AGENT_ANNOTATION_PREFIX))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// Keeps one NodeResourceTopology object up to date.
pub struct Publisher {
    api: Api<NodeResourceTopology>,
    safety_interval: Duration,
    last: Option<(Content, Instant)>,
    initialised: bool,
    take_over: bool,
    foreign: Vec<String>,
    last_write: Option<Duration>,
}

impl Publisher {
    /// A publisher that re-applies unchanged content every `safety_interval`.
    pub fn new(api: Api<NodeResourceTopology>, safety_interval: Duration) -> Self {
        Self {
            api,
            safety_interval,
            last: None,
            initialised: false,
            take_over: false,
            foreign: Vec::new(),
            last_write: None,
        }
    }

    /// Whether to write the object even when another field manager writes it.
    #[must_use]
    pub fn take_over(mut self, take_over: bool) -> Self {
        self.take_over = take_over;
        self
    }

    /// Notes who else writes the object, from a copy of it seen by a watch.
    pub fn observe(&mut self, observed: Option<&NodeResourceTopology>) {
        self.foreign = observed.map_or_else(Vec::new, |o| {
            foreign_nrt_writers(&o.metadata, FIELD_MANAGER)
        });
    }

    /// How long the write of the last publish took, once; `None` when it wrote nothing
    /// (or it was taken already).
    pub fn take_last_write(&mut self) -> Option<Duration> {
        self.last_write.take()
    }

    /// Make the object equal `desired`, writing only when needed.
    pub async fn publish(
        &mut self,
        desired: &NodeResourceTopology,
    ) -> Result<Outcome, PublishError> {
        let name = desired.metadata.name.clone().unwrap_or_default();
        let content = Content::of(desired);
        self.last_write = None;
        if !self.initialised {
            // One read after start: if the object already says what we would write, the
            // restart costs no write.
            let existing = self
                .api
                .get_opt(&name)
                .await
                .map_err(|source| PublishError::Read {
                    name: name.clone(),
                    source,
                })?;
            self.observe(existing.as_ref());
            self.last = existing.map(|o| (Content::of(&o), Instant::now()));
            self.initialised = true;
        }
        if !self.foreign.is_empty() && !self.take_over {
            // Not ours to write: forget the content, so a later take-over writes.
            self.last = None;
            return Ok(Outcome::Yielded(self.foreign.clone()));
        }
        if let Some((last, at)) = &self.last
            && *last == content
            && at.elapsed() < self.safety_interval
        {
            return Ok(Outcome::Unchanged);
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let started = Instant::now();
        let written = self
            .api
            .patch(&name, &params, &Patch::Apply(desired))
            .instrument(tracing::info_span!("apply", object = %name))
            .await;
        self.last_write = Some(started.elapsed());
        written.map_err(|source| PublishError::Apply {
            name: name.clone(),
            source,
        })?;
        self.last = Some((content, Instant::now()));
        Ok(Outcome::Applied)
    }

    /// Forget what was written, so the next publish reads and compares again (used after
    /// a write error or when the object may have been deleted).
    pub fn reset(&mut self) {
        self.last = None;
        self.initialised = false;
    }
}

impl Publisher {
    /// Whether `observed` (e.g. from a watch of the object) still holds what was last
    /// written. `None` (the object was deleted) is never current.
    pub fn is_current(&self, observed: Option<&NodeResourceTopology>) -> bool {
        match (observed, &self.last) {
            (Some(o), Some((last, _))) => Content::of(o) == *last,
            _ => false,
        }
    }
}
