//! Events (`events.k8s.io/v1`) about an object, as tests wait for them.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client};

use crate::{Error, wait_for};

/// The Events in `namespace` with `reason` about the object named `name`.
pub async fn events_about(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> Result<Vec<Event>, Error> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect())
}

/// The first Event in `namespace` with `reason` about the object named `name`,
/// once there is one.
pub async fn wait_event(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> Result<Event, Error> {
    wait_for(
        format!("a {reason} Event about {name}"),
        timeout,
        || async {
            Ok::<_, Error>(
                events_about(client, namespace, name, reason)
                    .await?
                    .into_iter()
                    .next(),
            )
        },
    )
    .await
}

/// The note of the first Event in `namespace` with `reason` about the object named
/// `name` that has one, once there is one.
pub async fn wait_event_note(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> Result<String, Error> {
    wait_for(format!("{reason} of {name}"), timeout, || async {
        Ok::<_, Error>(
            events_about(client, namespace, name, reason)
                .await?
                .into_iter()
                .find_map(|e| e.note),
        )
    })
    .await
}
