//! What keeps the agent from observing its node, said on the node's
//! NodeResourceTopology (annotation [`AGENT_PROBLEM`]) for the operator to name in the
//! TopologyAwareScheduling's `Available` condition: e.g. the kubelet's podresources
//! socket missing, or sysfs unreadable. The zones stay as last published (their
//! heartbeat ages, and the scheduler's staleness rules apply); only the annotation
//! changes.
//!
//! Written by JSON merge patch under a field manager of its own, so the agent's applies
//! neither own nor drop it; removed the same way after the next successful publish.
//! Written only when the text changes, never while the object does not exist.

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tas_api::nrt::agent_report::AGENT_PROBLEM;
use tas_api::nrt::v1alpha2::NodeResourceTopology;

/// The field manager of the annotation.
pub const FIELD_MANAGER: &str = "tas-updater-problem";

/// At most this many characters of a problem are written.
const MAX_LEN: usize = 512;

/// Reports the agent's current problem on its object.
pub struct ProblemReport {
    api: Api<NodeResourceTopology>,
    name: String,
    /// What the object says now, as far as this agent knows; `None` before the first
    /// report (a previous run's annotation may be there: the first report writes).
    said: Option<Option<String>>,
}

impl ProblemReport {
    /// For the object `name`.
    pub fn new(api: Api<NodeResourceTopology>, name: impl Into<String>) -> Self {
        Self {
            api,
            name: name.into(),
            said: None,
        }
    }

    /// Makes the object say `problem` (`None`: no problem). A failed write is logged and
    /// retried on the next report.
    pub async fn report(&mut self, problem: Option<&str>) {
        let problem = problem.map(|p| p.chars().take(MAX_LEN).collect::<String>());
        if self.said.is_none() && problem.is_none() {
            // First report, and all is well: read what a previous run left (one read per
            // start) rather than write to an object that most likely says nothing.
            match self.api.get_opt(&self.name).await {
                Ok(object) => {
                    self.said = Some(object.and_then(|o| {
                        o.metadata
                            .annotations
                            .and_then(|mut a| a.remove(AGENT_PROBLEM))
                    }));
                }
                Err(e) => {
                    tracing::debug!(error = %e, "could not read the agent-problem annotation");
                    return;
                }
            }
        }
        if self.said.as_ref() == Some(&problem) {
            return;
        }
        let patch = json!({"metadata": {"annotations": {AGENT_PROBLEM: problem}}});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        match self
            .api
            .patch(&self.name, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => self.said = Some(problem),
            Err(kube::Error::Api(e)) if e.code == 404 => {
                // No object yet: nothing says otherwise, and the first publish writes
                // one without the annotation.
                self.said = Some(None);
            }
            Err(e) => {
                tracing::debug!(error = %e, "could not write the agent-problem annotation");
                self.said = None;
            }
        }
    }
}
