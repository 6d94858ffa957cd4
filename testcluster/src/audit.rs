//! Which pod bindings the API server accepted: kube-apiserver's audit log, when the
//! cluster was started with [`ClusterOptions::audit_bindings`](crate::ClusterOptions).
//!
//! [`POLICY`] logs every create of `pods/binding` (and of the legacy `bindings`
//! resource) at `Metadata` level once the response is sent, so each event carries the
//! pod, the answer's status code, when the request arrived and who sent it (for a
//! bound ServiceAccount token, the pod the token was issued to). It also logs the
//! writes of Leases outside `kube-system` and `kube-node-lease` (leader elections, not
//! node heartbeats), so a test can tell when each candidate last acquired or renewed.
//! Nothing else is logged. [`bindings`] parses the bindings; [`accepted_per_pod`]
//! counts the accepted ones; [`lease_writes`] parses the Lease writes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use serde::Deserialize;

use crate::Error;

/// The audit policy: binding creates and Lease writes (but node heartbeats and the
/// control plane's own) at `Metadata` level, at `ResponseComplete` only.
pub const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Metadata
  verbs: [create]
  resources:
  - group: \"\"
    resources: [pods/binding, bindings]
- level: None
  namespaces: [kube-system, kube-node-lease]
- level: Metadata
  verbs: [create, update, patch]
  resources:
  - group: coordination.k8s.io
    resources: [leases]
- level: None
";

/// The user-info extra key naming the pod a bound ServiceAccount token was issued to.
const POD_NAME_EXTRA: &str = "authentication.kubernetes.io/pod-name";

/// One binding create the API server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// Namespace of the pod bound.
    pub namespace: String,
    /// Name of the pod bound.
    pub pod: String,
    /// The answer's HTTP status (201 accepted, 409 already bound, ...).
    pub code: u16,
    /// When the request reached the API server.
    pub received: SystemTime,
    /// Who sent it.
    pub user: String,
    /// The pod whose ServiceAccount token sent it, for a bound token.
    pub sender_pod: Option<String>,
}

impl Binding {
    /// Whether the API server accepted the binding (a 2xx answer).
    pub fn accepted(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// Whether the answer leaves open if the binding was written: a 5xx, typically
    /// 504 when the sender went away mid-request (a killed scheduler) and the API
    /// server still finished the write after giving up on the answer.
    pub fn undecided(&self) -> bool {
        self.code >= 500
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    #[serde(default)]
    stage: String,
    #[serde(default)]
    verb: String,
    #[serde(default)]
    object_ref: Option<ObjectRef>,
    #[serde(default)]
    response_status: Option<Status>,
    #[serde(default)]
    request_received_timestamp: Option<String>,
    #[serde(default)]
    user: User,
}

#[derive(Deserialize)]
struct ObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct Status {
    #[serde(default)]
    code: u16,
}

#[derive(Deserialize, Default)]
struct User {
    #[serde(default)]
    username: String,
    #[serde(default)]
    extra: BTreeMap<String, Vec<String>>,
}

/// Every binding create in the audit log at `path`, in log order. Lines that are not
/// a completed binding create (or not JSON, like a line cut short by a crash) are
/// skipped.
pub fn bindings(path: &Path) -> Result<Vec<Binding>, Error> {
    Ok(records(path)?
        .into_iter()
        .filter(|r| {
            r.verb == "create"
                && ((r.resource == "pods" && r.subresource == "binding")
                    || r.resource == "bindings")
        })
        .map(|r| Binding {
            namespace: r.namespace,
            pod: r.name,
            code: r.code,
            received: r.received,
            user: r.user,
            sender_pod: r.sender_pod,
        })
        .collect())
}

/// One write of a Lease (create, update or patch) the API server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseWrite {
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// `create`, `update` or `patch`.
    pub verb: String,
    /// The answer's HTTP status (200 or 201 accepted, 409 conflict, ...).
    pub code: u16,
    /// When the request reached the API server.
    pub received: SystemTime,
    /// Who sent it.
    pub user: String,
    /// The pod whose ServiceAccount token sent it, for a bound token.
    pub sender_pod: Option<String>,
}

impl LeaseWrite {
    /// Whether the API server accepted the write (a 2xx answer).
    pub fn accepted(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// Whether the answer leaves open if the binding was written: a 5xx, typically
    /// 504 when the sender went away mid-request (a killed scheduler) and the API
    /// server still finished the write after giving up on the answer.
    pub fn undecided(&self) -> bool {
        self.code >= 500
    }
}

/// Every write of Lease `namespace/name` in the audit log at `path`, in log order.
pub fn lease_writes(path: &Path, namespace: &str, name: &str) -> Result<Vec<LeaseWrite>, Error> {
    Ok(records(path)?
        .into_iter()
        .filter(|r| r.resource == "leases" && r.namespace == namespace && r.name == name)
        .map(|r| LeaseWrite {
            namespace: r.namespace,
            name: r.name,
            verb: r.verb,
            code: r.code,
            received: r.received,
            user: r.user,
            sender_pod: r.sender_pod,
        })
        .collect())
}

/// One completed request of the log.
struct Record {
    verb: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
    code: u16,
    received: SystemTime,
    user: String,
    sender_pod: Option<String>,
}

/// Every completed request in the log at `path`; lines that are not JSON (like one cut
/// short by a crash) are skipped.
fn records(path: &Path) -> Result<Vec<Record>, Error> {
    let text = std::fs::read_to_string(path).map_err(Error::io(format!(
        "reading the audit log {}",
        path.display()
    )))?;
    Ok(text.lines().filter_map(parse_line).collect())
}

fn parse_line(line: &str) -> Option<Record> {
    let event: Event = serde_json::from_str(line).ok()?;
    let object = event.object_ref?;
    if event.stage != "ResponseComplete" {
        return None;
    }
    let received = event
        .request_received_timestamp
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map_or(SystemTime::UNIX_EPOCH, SystemTime::from);
    Some(Record {
        verb: event.verb,
        resource: object.resource,
        subresource: object.subresource,
        namespace: object.namespace,
        name: object.name,
        code: event.response_status.map_or(0, |s| s.code),
        received,
        sender_pod: event
            .user
            .extra
            .get(POD_NAME_EXTRA)
            .and_then(|v| v.first().cloned()),
        user: event.user.username,
    })
}

/// Accepted bindings per pod (`namespace/name`) in `namespace`.
pub fn accepted_per_pod(bindings: &[Binding], namespace: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for b in bindings
        .iter()
        .filter(|b| b.namespace == namespace && b.accepted())
    {
        *out.entry(b.pod.clone()).or_default() += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACCEPTED: &str = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/w/pods/p-0/binding","verb":"create","user":{"username":"system:serviceaccount:tas-system:tas-scheduler","extra":{"authentication.kubernetes.io/pod-name":["tas-scheduler-abc"]}},"objectRef":{"resource":"pods","namespace":"w","name":"p-0","apiVersion":"v1","subresource":"binding"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-01-02T03:04:05.123456Z","stageTimestamp":"2026-01-02T03:04:05.200000Z"}"#;

    #[test]
    fn parses_binding_events_and_counts_the_accepted_ones() {
        let conflict = ACCEPTED
            .replace("\"code\":201", "\"code\":409")
            .replace("tas-scheduler-abc", "tas-scheduler-def");
        let other_ns = ACCEPTED.replace("\"namespace\":\"w\"", "\"namespace\":\"x\"");
        let started = ACCEPTED.replace("ResponseComplete", "ResponseStarted");
        let text = [ACCEPTED, &conflict, &other_ns, &started, "{cut short"].join("\n");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, text).unwrap();
        let all = bindings(&path).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].pod, "p-0");
        assert_eq!(all[0].sender_pod.as_deref(), Some("tas-scheduler-abc"));
        assert!(all[0].accepted() && !all[1].accepted());
        let at: SystemTime = "2026-01-02T03:04:05.123456Z"
            .parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap()
            .into();
        assert_eq!(all[0].received, at);
        assert_eq!(
            accepted_per_pod(&all, "w"),
            BTreeMap::from([("p-0".to_owned(), 1)])
        );
    }

    #[test]
    fn parses_lease_writes_of_one_lease() {
        let renewal = ACCEPTED
            .replace("\"verb\":\"create\"", "\"verb\":\"update\"")
            .replace(
                "\"resource\":\"pods\",\"namespace\":\"w\",\"name\":\"p-0\",\"apiVersion\":\"v1\",\"subresource\":\"binding\"",
                "\"resource\":\"leases\",\"namespace\":\"w\",\"name\":\"tas-scheduler\",\"apiGroup\":\"coordination.k8s.io\",\"apiVersion\":\"v1\"",
            )
            .replace("\"code\":201", "\"code\":200");
        let other = renewal.replace("tas-scheduler\",\"apiGroup", "tas-operator\",\"apiGroup");
        let text = [ACCEPTED, &renewal, &other].join("\n");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, text).unwrap();
        let writes = lease_writes(&path, "w", "tas-scheduler").unwrap();
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].verb, "update");
        assert!(writes[0].accepted());
        assert_eq!(writes[0].sender_pod.as_deref(), Some("tas-scheduler-abc"));
        assert_eq!(bindings(&path).unwrap().len(), 1);
    }

    #[test]
    fn the_policy_is_yaml() {
        let doc: serde_json::Value = serde_norway::from_str(POLICY).unwrap();
        assert_eq!(
            doc["rules"][0]["resources"][0]["resources"][0],
            "pods/binding"
        );
    }
}
