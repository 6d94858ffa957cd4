//! Aggregation of repeated `FailedScheduling` Events, as client-go's event recorder
//! does for kube-scheduler: a failure that repeats with the same reasons patches one
//! Event's `series` (count, last observed time) instead of creating another.
//!
//! "The same reasons" is judged on the message with every number left out
//! ([`signature`]): node counts and free amounts move with every NRT update while the
//! reasons stay the same. The Event keeps the wording of the first failure of its
//! series; a failure with other reasons starts a new Event. The pod is referred to
//! without its `resourceVersion`, which changes with every status patch.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// How long a series stays open: a repeat after that starts a new Event.
const SERIES_TTL: Duration = Duration::from_secs(30 * 60);
/// Series remembered at most; the oldest are forgotten first.
const MAX_SERIES: usize = 50_000;

/// The message with every run of digits replaced by `#` and parenthesised details
/// dropped: equal for two failures with the same reasons, whatever the counts, amounts
/// and the nodes named for each reason.
pub fn signature(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut in_number = false;
    // Parenthesised details (the nodes named for a reason, its figures) change with
    // the cluster, not with why the pod failed.
    let mut depth = 0usize;
    for c in message.chars() {
        match c {
            '(' => {
                depth += 1;
                continue;
            }
            ')' if depth > 0 => {
                depth -= 1;
                continue;
            }
            _ if depth > 0 => continue,
            _ => {}
        }
        if c.is_ascii_digit() {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    namespace: String,
    uid: String,
    reason: String,
    signature: String,
}

struct Open {
    name: String,
    count: i32,
    last: Instant,
}

/// Open series, by pod, reason and message signature.
pub(crate) struct SeriesCache {
    controller: String,
    instance: String,
    open: HashMap<Key, Open>,
}

impl SeriesCache {
    pub(crate) fn new(controller: &str, instance: Option<String>) -> Self {
        Self {
            controller: controller.to_owned(),
            instance: instance.unwrap_or_else(|| controller.to_owned()),
            open: HashMap::new(),
        }
    }

    /// Creates the Event, or patches the series of an open one with the same key.
    pub(crate) async fn publish(
        &mut self,
        client: &Client,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) -> Result<(), kube::Error> {
        let now = Instant::now();
        self.open
            .retain(|_, o| now.saturating_duration_since(o.last) < SERIES_TTL);
        if self.open.len() >= MAX_SERIES {
            self.open.clear();
        }
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let key = Key {
            namespace: namespace.clone(),
            uid: regarding
                .uid
                .clone()
                .or_else(|| regarding.name.clone())
                .unwrap_or_default(),
            reason: reason.to_owned(),
            signature: signature(&note),
        };
        let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
        let stamp = Timestamp::now();
        if let Some(open) = self.open.get_mut(&key) {
            let count = open.count.saturating_add(1);
            let patch = json!({"series": EventSeries {
                count,
                last_observed_time: MicroTime(stamp),
            }});
            match api
                .patch(&open.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    open.count = count;
                    open.last = now;
                    return Ok(());
                }
                // Deleted meanwhile (TTL of the API server): start a new one.
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    self.open.remove(&key);
                }
                Err(e) => return Err(e),
            }
        }
        let mut stable = regarding.clone();
        stable.resource_version = None;
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or(&self.controller),
            stamp.as_nanosecond()
        );
        let event = Event {
            action: Some(action.to_owned()),
            reason: Some(reason.to_owned()),
            event_time: Some(MicroTime(stamp)),
            regarding: Some(stable),
            note: Some(note),
            metadata: ObjectMeta {
                namespace: Some(namespace),
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some("Warning".to_owned()),
            ..Event::default()
        };
        api.create(&PostParams::default(), &event).await?;
        self.open.insert(
            key,
            Open {
                name,
                count: 1,
                last: now,
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_ignore_counts_and_amounts_but_not_reasons() {
        let a = "0/5 nodes are available: 3 cannot align pod to one NUMA zone (cpu: need 8, largest free zone 6) (n1), 2 node(s) didn't match Pod's node affinity/selector (a, b).";
        let b = "0/6 nodes are available: 4 cannot align pod to one NUMA zone (cpu: need 8, largest free zone 2) (n1), 2 node(s) didn't match Pod's node affinity/selector (a, b).";
        let c = "0/6 nodes are available: 6 Insufficient cpu (a, b, n1).";
        assert_eq!(signature(a), signature(b));
        assert_ne!(signature(a), signature(c));
        assert_eq!(signature("need 12, got 3"), "need #, got #");
        assert_eq!(
            signature("0/8 nodes are available: 7 node(s) didn't match (a, b, +4 more)."),
            signature("0/12 nodes are available: 11 node(s) didn't match (c, a, +8 more)."),
            "the nodes named change with the cluster"
        );
    }
}
