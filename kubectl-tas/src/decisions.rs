//! `kubectl tas decisions`: the scheduler's recent scheduling attempts, newest first —
//! per attempt the pod, how it ended (bound, binding, bind failed, unschedulable,
//! preempting, error), the node and its NUMA zones, the DRA devices, the nodes evaluated
//! and feasible, how long it took, the trace id of its span, and why no node fit. Read
//! live from the scheduler's `GET /debug/decisions` ([`crate::proxy`]), or from the
//! `scheduler/decisions.json` of a support bundle, filtered the same way
//! ([`DecisionQuery`]).

use std::fmt::Write as _;

use tas_scheduler::decisions::{DecisionQuery, DecisionRecord, DecisionsReport};

use crate::error::Error;
use crate::render::Table;

/// Where `gather` writes the scheduler's decisions (its JSON, as served).
pub const BUNDLE_PATH: &str = "scheduler/decisions.json";

/// The flags of `decisions`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DecisionsArgs {
    /// Only this pod: `NAMESPACE/NAME`, or `NAME` in the namespace of `-n` (else the
    /// context's, or `default` in a bundle).
    #[arg(long)]
    pub pod: Option<String>,
    /// At most this many attempts, the newest.
    #[arg(long)]
    pub limit: Option<usize>,
}

impl DecisionsArgs {
    /// The query: `--pod`, else the namespace of an explicit `-n` (else every
    /// namespace), and `--limit`.
    pub fn query(
        &self,
        namespace_flag: Option<&str>,
        default_namespace: &str,
    ) -> Result<DecisionQuery, Error> {
        let bad = |message: String| Error::Flag {
            flag: "--pod",
            message,
        };
        let (namespace, pod) = match self.pod.as_deref() {
            None => (namespace_flag.map(str::to_owned), None),
            Some(p) => match p.split_once('/') {
                Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                    (Some(ns.to_owned()), Some(name.to_owned()))
                }
                Some(_) => return Err(bad(format!("{p:?} is not NAMESPACE/NAME or NAME"))),
                None if p.is_empty() => return Err(bad("is empty".into())),
                None => (
                    Some(namespace_flag.unwrap_or(default_namespace).to_owned()),
                    Some(p.to_owned()),
                ),
            },
        };
        let query = DecisionQuery {
            namespace,
            pod,
            limit: self.limit,
        };
        query.validate().map_err(|e| Error::Flag {
            flag: if self.limit == Some(0) {
                "--limit"
            } else {
                "--pod"
            },
            message: e.to_string(),
        })?;
        Ok(query)
    }
}

/// The report with only what `query` selects (a bundle holds every attempt kept).
pub fn select(mut report: DecisionsReport, query: &DecisionQuery) -> DecisionsReport {
    report.decisions = query.select(report.decisions.iter());
    report
}

/// Milliseconds of the attempt's phases, bind included.
fn took(r: &DecisionRecord) -> String {
    let ms: f64 = r.phases.iter().map(|p| p.seconds).sum::<f64>() * 1000.0;
    format!("{ms:.1}ms")
}

/// The text: a summary line, a row per attempt, then what each attempt's message,
/// reasons and devices say.
pub fn render(report: &DecisionsReport, source: &str) -> String {
    let mut out = format!(
        "scheduler {} ({}), {source}: {} attempt(s) shown, {} kept at most, {} recorded since it started\n",
        report.scheduler_name,
        if report.leader {
            "leader"
        } else {
            "not leading"
        },
        report.decisions.len(),
        report.capacity,
        report.recorded,
    );
    if !report.leader {
        out.push_str("  note: this replica does not lead, so it schedules nothing; with several replicas the Service picks one, so ask again for the leader's attempts\n");
    }
    if report.decisions.is_empty() {
        return out;
    }
    let mut table = Table::new(&[
        "ID", "TIME", "POD", "OUTCOME", "NODE", "ZONES", "FEASIBLE", "TOOK", "TRACE",
    ]);
    for r in &report.decisions {
        let zones = r.zones.as_ref().map_or_else(
            || "-".to_owned(),
            |z| z.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
        );
        table.row(vec![
            r.id.to_string(),
            r.time.clone(),
            r.key(),
            r.outcome.as_str().to_owned(),
            r.node.clone().unwrap_or_else(|| "-".into()),
            zones,
            format!("{}/{}", r.feasible_nodes, r.nodes_evaluated),
            took(r),
            r.trace_id.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    out.push_str(&table.render(0));
    for r in &report.decisions {
        if let Some(dra) = &r.dra {
            let _ = writeln!(
                out,
                "{} {}: DRA devices {} ({})",
                r.id,
                r.key(),
                dra.devices.join(", "),
                dra.outcome
            );
        }
        if let Some(message) = &r.message {
            let _ = writeln!(out, "{} {}: {message}", r.id, r.key());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(pod: Option<&str>, limit: Option<usize>) -> DecisionsArgs {
        DecisionsArgs {
            pod: pod.map(Into::into),
            limit,
        }
    }

    #[test]
    fn the_pod_flag_takes_a_namespace_or_the_default() {
        let q = args(Some("team/web-0"), Some(3))
            .query(None, "ctx")
            .unwrap();
        assert_eq!(
            (q.namespace.as_deref(), q.pod.as_deref(), q.limit),
            (Some("team"), Some("web-0"), Some(3))
        );
        let q = args(Some("web-0"), None).query(Some("n"), "ctx").unwrap();
        assert_eq!(q.namespace.as_deref(), Some("n"));
        let q = args(Some("web-0"), None).query(None, "ctx").unwrap();
        assert_eq!(q.namespace.as_deref(), Some("ctx"));
        let every = args(None, None).query(None, "ctx").unwrap();
        assert_eq!(every, DecisionQuery::default(), "every namespace");
        let one = args(None, None).query(Some("n"), "ctx").unwrap();
        assert_eq!(one.namespace.as_deref(), Some("n"));
        for bad in ["a/b/c", "/x", "x/", ""] {
            let e = args(Some(bad), None).query(None, "ctx").unwrap_err();
            assert!(e.to_string().starts_with("--pod: "), "{bad:?}: {e}");
        }
        let e = args(None, Some(0)).query(None, "ctx").unwrap_err();
        assert_eq!(e.to_string(), "--limit: limit must be at least 1");
    }
}
