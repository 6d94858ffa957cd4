//! Why a node agent pod is not ready, in words a cluster admin can act on: the
//! container's waiting reason (`ErrImageNeverPull`, `ImagePullBackOff`,
//! `CrashLoopBackOff`, ...) with the kubelet's message, its last exit, or the pod's own
//! conditions. The `Available` condition names a few of them, so `kubectl get tas -o
//! yaml` says what is wrong without a `kubectl describe` of every agent.

use k8s_openapi::api::core::v1::{ContainerState, Pod};

/// At most this many nodes are named with their agent's problem.
pub const MAX_AGENT_PROBLEMS: usize = 5;

/// At most this many characters of one message of the kubelet's.
const MAX_MESSAGE: usize = 200;

fn clip(message: &str) -> String {
    let message = message.trim();
    match message.char_indices().nth(MAX_MESSAGE) {
        Some((at, _)) => format!("{}…", &message[..at]),
        None => message.to_owned(),
    }
}

fn with_message(reason: &str, message: Option<&str>) -> String {
    match message.map(clip).filter(|m| !m.is_empty()) {
        Some(m) => format!("{reason}: {m}"),
        None => reason.to_owned(),
    }
}

fn state_words(state: &ContainerState) -> Option<String> {
    if let Some(w) = &state.waiting {
        let reason = w.reason.as_deref().unwrap_or("Waiting");
        return Some(format!(
            "waiting, {}",
            with_message(reason, w.message.as_deref())
        ));
    }
    if let Some(t) = &state.terminated {
        let reason = t.reason.as_deref().unwrap_or("Terminated");
        return Some(format!(
            "exited {} ({})",
            t.exit_code,
            with_message(reason, t.message.as_deref())
        ));
    }
    None
}

/// What keeps `pod` (a node agent pod, not Ready) from being ready; `reported` is what
/// the agent itself said on its node's NodeResourceTopology
/// ([`tas_api::nrt::agent_report::AGENT_PROBLEM`]), if anything.
pub fn agent_problem(pod: &Pod, reported: Option<&str>) -> String {
    let words = pod_words(pod);
    match reported.map(clip).filter(|r| !r.is_empty()) {
        Some(r) => match words.strip_suffix(RUNNING_UNREADY_HINT) {
            Some(running) => format!("{running}: {r}"),
            None => format!("{words}; the agent reports: {r}"),
        },
        None => words,
    }
}

/// What the agent reports (on its node's object) while its pod still looks ready.
pub fn reported_problem(reported: &str) -> String {
    format!("the agent reports: {}", clip(reported))
}

/// Said of a running, unready container when the agent reported nothing.
const RUNNING_UNREADY_HINT: &str = " (its log says why)";

fn pod_words(pod: &Pod) -> String {
    if pod.metadata.deletion_timestamp.is_some() {
        return "being deleted".to_owned();
    }
    let status = pod.status.clone().unwrap_or_default();
    let mut words = Vec::new();
    for c in status
        .container_statuses
        .iter()
        .flatten()
        .filter(|c| !c.ready)
    {
        let now = c.state.as_ref().and_then(state_words);
        let last = c
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| {
                format!(
                    "last exit {} ({})",
                    t.exit_code,
                    with_message(t.reason.as_deref().unwrap_or("Error"), t.message.as_deref())
                )
            });
        let text = match (now, last) {
            (Some(now), Some(last)) if now.starts_with("waiting") => format!("{now}; {last}"),
            (Some(now), _) => now,
            (None, Some(last)) => format!("running, not ready; {last}"),
            (None, None) => format!("running, not ready{RUNNING_UNREADY_HINT}"),
        };
        words.push(format!("container {} {text}", c.name));
    }
    if words.is_empty() {
        // No container to blame: the pod's own conditions (unschedulable, node lost).
        for c in status.conditions.iter().flatten() {
            if c.status != "True" && (c.reason.is_some() || c.message.is_some()) {
                let reason = c.reason.as_deref().unwrap_or(&c.type_);
                words.push(format!(
                    "{} {}",
                    c.type_,
                    with_message(reason, c.message.as_deref())
                ));
            }
        }
    }
    if words.is_empty() {
        let phase = status.phase.as_deref().unwrap_or("Pending");
        words.push(format!("{phase}, not ready"));
    }
    if let Some(hint) = serving_secret_hint(pod) {
        words.push(hint);
    }
    words.join("; ")
}

/// For a pod whose containers have not started and that mounts the serving certificate
/// Secret: what to check (a missing Secret, or one without `tls.key`, keeps it there).
fn serving_secret_hint(pod: &Pod) -> Option<String> {
    use crate::desired::serving_cert::{VOLUME, missing_secret_hint};
    let status = pod.status.as_ref();
    let started = status
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                let waiting = c.state.as_ref().and_then(|s| s.waiting.as_ref());
                waiting.is_none_or(|w| w.reason.as_deref() != Some("ContainerCreating"))
            })
        });
    if started || status.is_some_and(|s| s.phase.as_deref() == Some("Running")) {
        return None;
    }
    let secret = pod
        .spec
        .as_ref()?
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == VOLUME)?
        .secret
        .as_ref()?
        .secret_name
        .clone()?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    Some(missing_secret_hint(namespace, &secret))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "a"}, "status": status})).unwrap()
    }

    #[test]
    fn an_image_the_node_lacks_is_named_with_the_kubelet_s_message() {
        let p = pod(json!({"phase": "Pending", "containerStatuses": [{
            "name": "updater", "ready": false, "restartCount": 0, "image": "x", "imageID": "",
            "state": {"waiting": {"reason": "ErrImageNeverPull",
                "message": "Container image \"ghcr.io/tas-dev/tas-updater:v0.1.0\" is not present with pull policy of Never"}}
        }]}));
        let words = agent_problem(&p, None);
        assert!(
            words.starts_with("container updater waiting, ErrImageNeverPull: Container image \"ghcr.io/tas-dev/tas-updater:v0.1.0\""),
            "{words}"
        );
    }

    #[test]
    fn a_crash_loop_says_how_it_last_exited() {
        let p = pod(json!({"phase": "Running", "containerStatuses": [{
            "name": "updater", "ready": false, "restartCount": 3, "image": "x", "imageID": "",
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": "socket missing"}}
        }]}));
        assert_eq!(
            agent_problem(&p, None),
            "container updater waiting, CrashLoopBackOff: back-off 40s; last exit 1 (Error: socket missing)"
        );
    }

    #[test]
    fn running_but_unready_points_at_the_log_and_long_messages_are_clipped() {
        let p = pod(json!({"phase": "Running", "containerStatuses": [{
            "name": "updater", "ready": false, "restartCount": 0, "image": "x", "imageID": "",
            "state": {"running": {}}
        }]}));
        assert_eq!(
            agent_problem(&p, None),
            "container updater running, not ready (its log says why)"
        );
        assert_eq!(
            agent_problem(
                &p,
                Some("podresources: /var/lib/kubelet/pod-resources/kubelet.sock: not found")
            ),
            "container updater running, not ready: podresources: /var/lib/kubelet/pod-resources/kubelet.sock: not found"
        );
        let long = "x".repeat(500);
        let p = pod(json!({"containerStatuses": [{
            "name": "u", "ready": false, "restartCount": 0, "image": "x", "imageID": "",
            "state": {"waiting": {"reason": "R", "message": long}}
        }]}));
        assert!(agent_problem(&p, None).chars().count() < 260);
    }

    #[test]
    fn without_containers_the_pod_conditions_speak() {
        let p = pod(json!({"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available"
        }]}));
        assert_eq!(
            agent_problem(&p, None),
            "PodScheduled Unschedulable: 0/3 nodes are available"
        );
        assert_eq!(agent_problem(&pod(json!({})), None), "Pending, not ready");
    }

    #[test]
    fn a_pod_waiting_for_its_serving_certificate_says_which_secret_to_check() {
        let spec = json!({"containers": [{"name": "updater"}], "volumes": [
            {"name": "serving-cert", "secret": {"secretName": "tas-updater-metrics-tls"}}]});
        let waiting = json!({"phase": "Pending", "containerStatuses": [{
            "name": "updater", "ready": false, "restartCount": 0, "image": "x", "imageID": "",
            "state": {"waiting": {"reason": "ContainerCreating"}}
        }]});
        let p = |status: serde_json::Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "a", "namespace": "tas-node"},
                "spec": spec, "status": status}))
            .unwrap()
        };
        let words = agent_problem(&p(waiting), None);
        assert_eq!(
            words,
            "container updater waiting, ContainerCreating; it mounts the serving certificate Secret tas-node/tas-updater-metrics-tls (spec.observability.servingCertificate: Secret): check that it exists and holds tls.crt and tls.key; the pod's FailedMount Event says which is wrong"
        );
        // No container status yet: the same hint.
        let pending = agent_problem(&p(json!({"phase": "Pending"})), None);
        assert!(
            pending.contains("tas-node/tas-updater-metrics-tls"),
            "{pending}"
        );
        // Started (the Secret was mounted): no hint.
        let crashing = p(json!({"phase": "Running", "containerStatuses": [{
            "name": "updater", "ready": false, "restartCount": 1, "image": "x", "imageID": "",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}}
        }]}));
        assert!(!agent_problem(&crashing, None).contains("Secret"));
        // A pod without the volume: no hint.
        let plain = pod(json!({"phase": "Pending"}));
        assert_eq!(agent_problem(&plain, None), "Pending, not ready");
    }
}
