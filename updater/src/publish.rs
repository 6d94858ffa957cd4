//! Writes the node's NodeResourceTopology with server-side apply — only when its content
//! changed, or when its heartbeat is due.
//!
//! The publisher remembers the content it last applied and when. On the first publish it
//! reads the object once (a restart of the agent with an unchanged node and a recent
//! heartbeat costs one GET and no write); afterwards it never reads. A write happens when
//! the desired content differs from the remembered one, or when the heartbeat period (or
//! the safety interval, if shorter) has passed since the last write ([`decide`]). Every
//! write stamps the `tas.dev/heartbeat` attributes ([`tas_api::nrt::heartbeat`]), which
//! are left out when comparing content: time passing alone never causes a write before
//! the heartbeat is due. The heartbeat tells readers the agent is alive on an idle node,
//! and the periodic write repairs an object someone else edited, without a watch.
//!
//! Another NRT writer (node-feature-discovery's topology-updater,
//! resource-topology-exporter, ...) may already publish the node's object: the agent
//! then does not force over it unless told to ([`Publisher::take_over`]); it reports
//! [`Outcome::Yielded`] with the other writers' field managers, read from the object's
//! `managedFields` ([`tas_api::nrt::ownership`]).

use kube::Api;
use kube::api::{Patch, PatchParams};
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant, SystemTime};
use tas_api::nrt::heartbeat::{self, Heartbeat};
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

/// The part of the object the agent owns, without the heartbeat; two objects with equal
/// content need no write until the heartbeat is due.
#[derive(Debug, Clone, PartialEq)]
pub struct Content {
    topology_policies: Vec<String>,
    attributes: Vec<tas_api::nrt::v1alpha2::AttributeInfo>,
    zones: Vec<tas_api::nrt::v1alpha2::Zone>,
    owners: Vec<String>,
    /// The agent's own annotations (its report on the kubelet configuration).
    annotations: BTreeMap<String, String>,
}

impl Content {
    /// The content of `obj`.
    pub fn of(obj: &NodeResourceTopology) -> Self {
        let owners = obj
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| format!("{}/{}/{}", o.kind, o.name, o.uid))
            .collect();
        Self {
            topology_policies: obj.topology_policies.clone(),
            attributes: obj
                .attributes
                .iter()
                .filter(|a| !heartbeat::is_heartbeat_attribute(&a.name))
                .cloned()
                .collect(),
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

/// Why [`decide`] wants a write, or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Same content, written less than the interval ago.
    NotNeeded,
    /// Nothing written yet, or the content differs from the last write.
    ContentChanged,
    /// Same content, but the last write is an interval old: restamp the heartbeat.
    HeartbeatDue,
}

/// Whether to write `content` at `now`, given the last write (its content, and when it
/// was made; `None` when its time is unknown) and the longest allowed time between
/// writes.
pub fn decide(
    last: Option<&(Content, Option<Instant>)>,
    content: &Content,
    now: Instant,
    interval: Duration,
) -> Write {
    match last {
        Some((last, _)) if last != content => Write::ContentChanged,
        None => Write::ContentChanged,
        Some((_, Some(at))) if now.saturating_duration_since(*at) < interval => Write::NotNeeded,
        Some(_) => Write::HeartbeatDue,
    }
}

/// When an object read back was last written, as an instant of this process: from its
/// heartbeat's age (`None` without a heartbeat: the next publish writes one).
fn written_at(obj: &NodeResourceTopology, now: Instant, wall: SystemTime) -> Option<Instant> {
    let age = Heartbeat::of(obj)?.age(wall);
    now.checked_sub(age)
}

/// Keeps one NodeResourceTopology object up to date.
pub struct Publisher {
    api: Api<NodeResourceTopology>,
    safety_interval: Duration,
    heartbeat_period: Duration,
    last: Option<(Content, Option<Instant>)>,
    initialised: bool,
    take_over: bool,
    foreign: Vec<String>,
    last_write: Option<Duration>,
    /// The resourceVersions of the agent's own latest writes, newest last.
    own_versions: VecDeque<String>,
}

/// How many of its own writes the agent recognises when its watch delivers them late.
const OWN_VERSIONS: usize = 8;

impl Publisher {
    /// A publisher that re-applies unchanged content every `safety_interval`.
    pub fn new(api: Api<NodeResourceTopology>, safety_interval: Duration) -> Self {
        Self {
            api,
            safety_interval,
            heartbeat_period: heartbeat::DEFAULT_PERIOD,
            last: None,
            initialised: false,
            take_over: false,
            foreign: Vec::new(),
            last_write: None,
            own_versions: VecDeque::new(),
        }
    }

    /// The longest time between two writes, stated in every write's
    /// `tas.dev/heartbeat-period` attribute.
    #[must_use]
    pub fn heartbeat_period(mut self, period: Duration) -> Self {
        self.heartbeat_period = period;
        self
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
            self.last = existing.map(|o| {
                let at = written_at(&o, Instant::now(), SystemTime::now());
                (Content::of(&o), at)
            });
            self.initialised = true;
        }
        if !self.foreign.is_empty() && !self.take_over {
            // Not ours to write: forget the content, so a later take-over writes.
            self.last = None;
            return Ok(Outcome::Yielded(self.foreign.clone()));
        }
        let interval = self.safety_interval.min(self.heartbeat_period);
        let write = decide(self.last.as_ref(), &content, Instant::now(), interval);
        if write == Write::NotNeeded {
            return Ok(Outcome::Unchanged);
        }
        tracing::debug!(?write, "writing NodeResourceTopology");
        let stamped = heartbeat::stamp(
            desired.clone(),
            &Heartbeat {
                at: SystemTime::now(),
                period: self.heartbeat_period,
            },
        );
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let started = Instant::now();
        let written = self
            .api
            .patch(&name, &params, &Patch::Apply(&stamped))
            .instrument(tracing::info_span!("apply", object = %name))
            .await;
        self.last_write = Some(started.elapsed());
        let written = written.map_err(|source| PublishError::Apply {
            name: name.clone(),
            source,
        })?;
        if let Some(version) = written.metadata.resource_version {
            if self.own_versions.len() == OWN_VERSIONS {
                self.own_versions.pop_front();
            }
            self.own_versions.push_back(version);
        }
        self.last = Some((content, Some(started)));
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
    /// Whether `observed` (e.g. from a watch of the object) needs no repair: it holds what
    /// was last written, or it is one of the agent's own recent writes, which a watch may
    /// deliver after a newer write already happened (the newer one's event follows). `None`
    /// (the object was deleted) is never current.
    pub fn is_current(&self, observed: Option<&NodeResourceTopology>) -> bool {
        is_current(
            self.last.as_ref().map(|(content, _)| content),
            &self.own_versions,
            observed,
        )
    }
}

/// See [`Publisher::is_current`].
fn is_current(
    last: Option<&Content>,
    own_versions: &VecDeque<String>,
    observed: Option<&NodeResourceTopology>,
) -> bool {
    let Some(observed) = observed else {
        return false;
    };
    let own = observed
        .metadata
        .resource_version
        .as_ref()
        .is_some_and(|v| own_versions.contains(v));
    own || last.is_some_and(|last| Content::of(observed) == *last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tas_api::nrt::v1alpha2::AttributeInfo;

    const PERIOD: Duration = Duration::from_secs(600);

    fn object(policy: &str) -> NodeResourceTopology {
        let mut nrt = NodeResourceTopology::new("worker");
        nrt.attributes
            .push(AttributeInfo::new("topologyManagerPolicy", policy));
        nrt
    }

    fn stamped(nrt: NodeResourceTopology, at: SystemTime) -> NodeResourceTopology {
        heartbeat::stamp(nrt, &Heartbeat { at, period: PERIOD })
    }

    /// The watch of its own object may deliver the agent's previous write after the next
    /// one: that is not someone else's edit, and must not trigger a read and a rewrite.
    /// An edit by someone else (another resourceVersion) with other content is repaired;
    /// a deletion always is.
    #[test]
    fn a_late_event_of_its_own_write_is_not_an_edit() {
        let with_version = |policy: &str, version: &str| {
            let mut nrt = object(policy);
            nrt.metadata.resource_version = Some(version.to_owned());
            nrt
        };
        let latest = Content::of(&object("restricted"));
        let own = VecDeque::from(["41".to_owned(), "42".to_owned()]);
        let previous = with_version("single-numa-node", "41");
        assert!(is_current(Some(&latest), &own, Some(&previous)));
        assert!(is_current(
            Some(&latest),
            &own,
            Some(&with_version("restricted", "42"))
        ));
        let edited = with_version("none", "43");
        assert!(!is_current(Some(&latest), &own, Some(&edited)));
        // Someone else's write of the same content needs no repair either.
        assert!(is_current(
            Some(&latest),
            &own,
            Some(&with_version("restricted", "44"))
        ));
        assert!(!is_current(Some(&latest), &own, None));
        assert!(!is_current(None, &VecDeque::new(), Some(&previous)));
    }

    #[test]
    fn time_passing_within_the_period_writes_nothing() {
        let t0 = Instant::now();
        let written = Content::of(&object("single-numa-node"));
        let last = (written.clone(), Some(t0));
        for after in [0, 1, 60, 599] {
            let now = t0 + Duration::from_secs(after);
            assert_eq!(
                decide(Some(&last), &written, now, PERIOD),
                Write::NotNeeded,
                "{after}s after the last write"
            );
        }
    }

    #[test]
    fn the_heartbeat_is_due_after_one_period() {
        let t0 = Instant::now();
        let written = Content::of(&object("single-numa-node"));
        let last = (written.clone(), Some(t0));
        assert_eq!(
            decide(Some(&last), &written, t0 + PERIOD, PERIOD),
            Write::HeartbeatDue
        );
        // A write of unknown time (read back without a heartbeat) is due at once.
        let unknown = (written.clone(), None);
        assert_eq!(
            decide(Some(&unknown), &written, t0, PERIOD),
            Write::HeartbeatDue
        );
    }

    #[test]
    fn changed_content_is_written_at_once() {
        let t0 = Instant::now();
        let last = (Content::of(&object("single-numa-node")), Some(t0));
        let changed = Content::of(&object("restricted"));
        assert_eq!(
            decide(Some(&last), &changed, t0 + Duration::from_secs(1), PERIOD),
            Write::ContentChanged
        );
        assert_eq!(decide(None, &changed, t0, PERIOD), Write::ContentChanged);
    }

    #[test]
    fn the_heartbeat_is_not_content() {
        let wall = SystemTime::now();
        let a = stamped(object("single-numa-node"), wall);
        let b = stamped(object("single-numa-node"), wall + Duration::from_secs(3600));
        assert_ne!(a, b);
        assert_eq!(Content::of(&a), Content::of(&b));
        assert_eq!(Content::of(&a), Content::of(&object("single-numa-node")));
    }

    #[test]
    fn an_object_read_back_is_as_old_as_its_heartbeat() {
        let now = Instant::now();
        let wall = SystemTime::now();
        let recent = stamped(object("x"), wall - Duration::from_secs(120));
        let at = written_at(&recent, now, wall).expect("has a heartbeat");
        // The stamp keeps whole seconds.
        let age = (now - at).as_secs_f64();
        assert!((120.0..121.0).contains(&age), "{age}");
        let content = Content::of(&recent);
        // Restarted two minutes after the last write: no write for eight more minutes.
        assert_eq!(
            decide(Some(&(content.clone(), Some(at))), &content, now, PERIOD),
            Write::NotNeeded
        );
        let old = stamped(object("x"), wall - Duration::from_secs(3600));
        let at = written_at(&old, now, wall);
        assert_eq!(
            decide(Some(&(content.clone(), at)), &content, now, PERIOD),
            Write::HeartbeatDue
        );
        assert_eq!(written_at(&object("x"), now, wall), None);
    }
}
