//! Kubernetes Events and pod conditions, queued on the [`crate::writer`]'s ordered lane
//! so the scheduling loop never waits on them: `Scheduled` / `FailedScheduling` on pods
//! (and `PodScheduled=False` with reason `Unschedulable`), `Preempting` on a preemptor
//! and `Preempted` on its victims, `InvalidNodeResourceTopology` on unreadable NRT
//! objects. Repeated `FailedScheduling` Events aggregate into one series (see
//! [`crate::event_series`]).

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use tokio::sync::mpsc;

use crate::event_series::SeriesCache;
use crate::pod_meta::PodMeta;
use crate::writer::LaneWrite;

/// Longest note an Event may carry.
const MAX_NOTE: usize = 1000;

/// An Event to publish.
pub(crate) enum Message {
    Scheduled {
        pod: ObjectReference,
        node: String,
        /// What the Event adds after the node: the DRA devices allocated, if any.
        detail: Option<String>,
    },
    Failed {
        pod: ObjectReference,
        message: String,
    },
    InvalidTopology {
        node: String,
        reason: String,
    },
    Preempting {
        pod: ObjectReference,
        node: String,
        victims: Vec<String>,
    },
    Preempted {
        victim: ObjectReference,
        preemptor: String,
        node: String,
    },
}

/// Cheap handle to queue Events and conditions on the writer (see
/// [`crate::writer::Writer::events`]); dropped messages (a full queue) are logged, not
/// fatal.
#[derive(Clone)]
pub struct EventSender {
    tx: mpsc::Sender<LaneWrite>,
}

impl EventSender {
    pub(crate) fn new(tx: mpsc::Sender<LaneWrite>) -> Self {
        Self { tx }
    }

    /// A sender whose messages go nowhere (unit tests, benchmarks).
    pub fn disabled() -> Self {
        Self::new(crate::writer::disabled_lane())
    }

    /// The pod was bound to `node`; `detail` (the DRA devices allocated for it, and
    /// whether they line up with its NUMA zones) follows in the note.
    pub fn scheduled(&self, pod: &Pod, node: &str, detail: Option<String>) {
        self.send(Message::Scheduled {
            pod: pod.object_ref(&()),
            node: node.to_owned(),
            detail,
        });
    }

    /// The pod fits no node; `set_condition` also writes `PodScheduled=False`.
    pub fn failed(&self, pod: &Pod, message: String, set_condition: bool) {
        let pod = pod.object_ref(&());
        let message = truncate(message);
        if set_condition {
            self.queue(LaneWrite::Unschedulable {
                pod: pod.clone(),
                message: message.clone(),
            });
        }
        self.send(Message::Failed { pod, message });
    }

    /// The pod's victims on `node` (as `namespace/name`) were evicted for it.
    pub fn preempting(&self, pod: &Pod, node: &str, victims: &[String]) {
        self.send(Message::Preempting {
            pod: pod.object_ref(&()),
            node: node.to_owned(),
            victims: victims.to_vec(),
        });
    }

    /// `victim` was evicted from `node` for `preemptor` (`namespace/name`).
    pub fn preempted(&self, victim: &PodMeta, preemptor: &str, node: &str) {
        self.send(Message::Preempted {
            victim: ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Pod".to_owned()),
                namespace: Some(victim.namespace.clone()),
                name: Some(victim.name.clone()),
                uid: Some(victim.uid.clone()),
                ..ObjectReference::default()
            },
            preemptor: preemptor.to_owned(),
            node: node.to_owned(),
        });
    }

    /// A node's NRT object cannot be used.
    pub fn invalid_topology(&self, node: &str, reason: &str) {
        self.send(Message::InvalidTopology {
            node: node.to_owned(),
            reason: reason.to_owned(),
        });
    }

    fn send(&self, m: Message) {
        self.queue(LaneWrite::Event(m));
    }

    fn queue(&self, w: LaneWrite) {
        if self.tx.try_send(w).is_err() {
            tracing::debug!("event queue full or closed: event dropped");
        }
    }
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_NOTE {
        let mut cut = MAX_NOTE - 3;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// Publishes Events as one reporter; the writer's ordered lane owns it.
pub(crate) struct EventPublisher {
    client: Client,
    recorder: Recorder,
    series: SeriesCache,
}

impl EventPublisher {
    pub(crate) fn new(client: Client, reporter: &str, instance: Option<String>) -> Self {
        let series = SeriesCache::new(reporter, instance.clone());
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: reporter.to_owned(),
                instance,
            },
        );
        Self {
            client,
            recorder,
            series,
        }
    }

    /// Creates the Event (or extends its series).
    pub(crate) async fn publish(&mut self, m: Message) -> Result<(), kube::Error> {
        let recorder = &self.recorder;
        match m {
            Message::Scheduled { pod, node, detail } => {
                let mut note = format!(
                    "Successfully assigned {}/{} to {node}",
                    pod.namespace.as_deref().unwrap_or_default(),
                    pod.name.as_deref().unwrap_or_default()
                );
                if let Some(detail) = detail {
                    note = truncate(format!("{note}; {detail}"));
                }
                publish(
                    recorder,
                    &pod,
                    EventType::Normal,
                    "Scheduled",
                    "Binding",
                    note,
                )
                .await
            }
            Message::Failed { pod, message } => {
                self.series
                    .publish(
                        &self.client,
                        &pod,
                        "FailedScheduling",
                        "Scheduling",
                        message,
                    )
                    .await
            }
            Message::Preempting { pod, node, victims } => {
                let note = format!(
                    "Preempted {} lower-priority pod(s) on node {node} to make room: {}",
                    victims.len(),
                    victims.join(", ")
                );
                publish(
                    recorder,
                    &pod,
                    EventType::Normal,
                    "Preempting",
                    "Preempting",
                    note,
                )
                .await
            }
            Message::Preempted {
                victim,
                preemptor,
                node,
            } => {
                let note = format!("Preempted by {preemptor} on node {node} to make room");
                publish(
                    recorder,
                    &victim,
                    EventType::Normal,
                    "Preempted",
                    "Preempting",
                    note,
                )
                .await
            }
            Message::InvalidTopology { node, reason } => {
                let nrt = ObjectReference {
                    api_version: Some(tas_api::nrt::v1alpha2::API_VERSION.to_owned()),
                    kind: Some(tas_api::nrt::KIND.to_owned()),
                    name: Some(node.clone()),
                    ..ObjectReference::default()
                };
                let note = format!(
                    "node {node} is skipped until its NodeResourceTopology is fixed: {reason}"
                );
                publish(
                    recorder,
                    &nrt,
                    EventType::Warning,
                    "InvalidNodeResourceTopology",
                    "Reading",
                    note,
                )
                .await
            }
        }
    }
}

async fn publish(
    recorder: &Recorder,
    regarding: &ObjectReference,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) -> Result<(), kube::Error> {
    let ev = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(truncate(note)),
        action: action.to_owned(),
        secondary: None,
    };
    recorder.publish(&ev, regarding).await
}
