//! Every pod the kubelet referee rejected, with what it takes to diagnose it from the
//! report alone: the node, the kubelet's reason and message, what the node had admitted
//! before it (and on which zones the CPU manager put those pods), the NUMA zones the TAS
//! scheduler chose for it, and the node's NRT as the scheduler could last have seen it.
//!
//! Data flows in from three places during a run:
//!
//! - the node's kubelet task ([`crate::kubelet`]) records the [`Rejection`] with the
//!   verdict and the node's admitted pods, and hands it to the run's lookup task;
//! - the lookup task ([`lookup_decision`]) asks the TAS scheduler's
//!   `GET /debug/decisions?namespace=&pod=` at once, while the attempt is still in its
//!   ring of recent attempts (512 by default), and parses the chosen zones
//!   ([`zones_in_decisions`]);
//! - the node agent ([`crate::agent`]) keeps every NRT it wrote, compact
//!   ([`PublishedNrt`]); after the run each rejection takes the last one written before
//!   the scheduler's decision (or, without a decision time, before the bind was seen):
//!   the newest the scheduler's watch could have delivered when it decided.
//!
//! [`render`] writes them as a markdown list, under the scenario's table.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;
use std::net::SocketAddr;
use std::time::SystemTime;

use tas_api::nrt::v1alpha2::NodeResourceTopology;

use crate::schedulers::SchedulerKind;

/// What the scheduler said of a rejected pod's placement.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SchedulerZones {
    /// Not asked: the scheduler keeps no decision log (kube-scheduler, the ceiling).
    #[default]
    NotAsked,
    /// The attempt that bound the pod to the node, with the zones it expected the
    /// kubelet to give it (empty: the record names none) and when it was decided.
    Chosen {
        /// The NUMA zones.
        zones: Vec<u32>,
        /// The attempt's start (RFC 3339), as the scheduler recorded it.
        time: Option<String>,
    },
    /// The attempt had left the scheduler's ring of recent attempts.
    NotInRing,
    /// The endpoint could not be read.
    Unreachable(String),
}

/// One NRT the node agent wrote: each zone's available amounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedNrt {
    /// When it was written (the write's answer).
    pub at: SystemTime,
    /// Per zone (by name): `(resource, available)` as the object states them.
    pub zones: Vec<(String, Vec<(String, String)>)>,
}

impl PublishedNrt {
    /// The compact form of `object`, written at `at`.
    pub fn of(object: &NodeResourceTopology, at: SystemTime) -> Self {
        Self {
            at,
            zones: object
                .zones
                .iter()
                .map(|z| {
                    let resources = z
                        .resources
                        .iter()
                        .map(|r| (r.name.clone(), r.available.as_str().to_owned()))
                        .collect();
                    (z.name.clone(), resources)
                })
                .collect(),
        }
    }

    /// `node-0: cpu 3, memory 12 GiB; node-1: …`.
    pub fn render(&self) -> String {
        let zones: Vec<String> = self
            .zones
            .iter()
            .map(|(zone, resources)| {
                let amounts: Vec<String> = resources
                    .iter()
                    .map(|(name, value)| format!("{name} {}", human(name, value)))
                    .collect();
                format!("{zone}: {}", amounts.join(", "))
            })
            .collect();
        zones.join("; ")
    }
}

/// Byte amounts (memory, hugepages) in GiB; the rest as stated.
fn human(name: &str, value: &str) -> String {
    let bytes = name == "memory" || name.starts_with("hugepages-");
    match value.parse::<u64>() {
        Ok(v) if bytes => format!("{:.1} GiB", v as f64 / f64::from(1 << 30)),
        _ => value.to_owned(),
    }
}

/// The NRTs the node agent wrote during a run, per node, oldest first.
pub type Published = HashMap<String, Vec<PublishedNrt>>;

/// One pod the kubelet referee rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// The node it was bound to.
    pub node: String,
    /// `TopologyAffinityError`, `OutOfcpu`, ...
    pub reason: String,
    /// The kubelet's message.
    pub message: String,
    /// When the runner's watch saw the bind (wall clock).
    pub bound_at: SystemTime,
    /// The pods the node had admitted before it, in admission order, each with the
    /// zones of its exclusive CPUs (empty: none exclusive).
    pub admitted_before: Vec<(String, BTreeSet<u32>)>,
    /// What the scheduler chose.
    pub scheduler: SchedulerZones,
    /// The last NRT the node agent wrote for the node before the decision (see the
    /// module documentation); `None`: none during the run (the node's object was the
    /// reset one, every zone free).
    pub last_nrt: Option<PublishedNrt>,
}

impl Rejection {
    /// Picks from `published` the node's last NRT written before the decision (its
    /// time from the scheduler's record, when known and readable) or else before the
    /// bind.
    pub fn attach_nrt(&mut self, published: &Published) {
        let decided = match &self.scheduler {
            SchedulerZones::Chosen {
                time: Some(time), ..
            } => parse_rfc3339(time),
            _ => None,
        };
        let before = decided.unwrap_or(self.bound_at);
        self.last_nrt = published
            .get(&self.node)
            .and_then(|all| all.iter().rev().find(|p| p.at <= before))
            .cloned();
    }
}

fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let at: k8s_openapi::jiff::Timestamp = text.parse().ok()?;
    Some(SystemTime::from(at))
}

/// The zones and decision time of the newest attempt in a `/debug/decisions` answer
/// (`body`) that chose `node` for the pod; [`SchedulerZones::NotInRing`] when there is
/// none, [`SchedulerZones::Unreachable`] when `body` is not such an answer.
pub fn zones_in_decisions(body: &str, node: &str) -> SchedulerZones {
    let value: serde_json::Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) => return SchedulerZones::Unreachable(format!("not JSON: {e}")),
    };
    let Some(decisions) = value.get("decisions").and_then(|d| d.as_array()) else {
        return SchedulerZones::Unreachable("no `decisions` in the answer".into());
    };
    // Newest first, as the endpoint returns them.
    let chosen = decisions.iter().find(|d| {
        d.get("node").and_then(|n| n.as_str()) == Some(node)
            && matches!(
                d.get("outcome").and_then(|o| o.as_str()),
                Some("bound" | "binding")
            )
    });
    match chosen {
        Some(d) => SchedulerZones::Chosen {
            zones: d
                .get("zones")
                .and_then(|z| z.as_array())
                .map(|z| {
                    z.iter()
                        .filter_map(|v| v.as_u64().and_then(|v| u32::try_from(v).ok()))
                        .collect()
                })
                .unwrap_or_default(),
            time: d.get("time").and_then(|t| t.as_str()).map(str::to_owned),
        },
        None => SchedulerZones::NotInRing,
    }
}

/// Asks the TAS scheduler on `127.0.0.1:port` (TLS, `token`) which zones it chose for
/// `rejection`'s pod.
pub async fn lookup_decision(port: u16, token: &str, rejection: &Rejection) -> SchedulerZones {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let path = format!(
        "/debug/decisions?namespace={}&pod={}",
        rejection.namespace, rejection.pod
    );
    match tas_testcluster::https_get(addr, &path, Some(token)).await {
        Ok((200, body)) => zones_in_decisions(&body, &rejection.node),
        Ok((code, body)) => SchedulerZones::Unreachable(format!(
            "{path} answered {code}: {}",
            body.chars().take(200).collect::<String>()
        )),
        Err(e) => SchedulerZones::Unreachable(format!("{path}: {e}")),
    }
}

fn zones(set: &BTreeSet<u32>) -> String {
    if set.is_empty() {
        return "no exclusive CPUs".into();
    }
    let ids: Vec<String> = set.iter().map(u32::to_string).collect();
    format!("zone {}", ids.join("+"))
}

/// One markdown list item per rejection of `kind`'s run `round`.
pub fn render_one(kind: SchedulerKind, round: u32, r: &Rejection) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "- {} run {round}: `{}/{}` on `{}`: **{}**",
        kind.id(),
        r.namespace,
        r.pod,
        r.node,
        r.reason
    );
    if !r.message.is_empty() {
        let _ = write!(out, " ({})", r.message.trim());
    }
    let _ = write!(out, ". TAS chose: ");
    match &r.scheduler {
        SchedulerZones::NotAsked => {
            let _ = write!(out, "– (no decision log)");
        }
        SchedulerZones::Chosen { zones, time } => {
            let ids: Vec<String> = zones.iter().map(u32::to_string).collect();
            let _ = write!(
                out,
                "{}{}",
                if ids.is_empty() {
                    "no zone named".to_owned()
                } else {
                    format!("zone(s) {}", ids.join("+"))
                },
                time.as_deref()
                    .map(|t| format!(" (decided {t})"))
                    .unwrap_or_default()
            );
        }
        SchedulerZones::NotInRing => {
            let _ = write!(out, "unknown (no longer in its ring of recent decisions)");
        }
        SchedulerZones::Unreachable(why) => {
            let _ = write!(out, "unknown ({why})");
        }
    }
    let _ = write!(out, ". Admitted on the node before it: ");
    if r.admitted_before.is_empty() {
        let _ = write!(out, "nothing");
    } else {
        let before: Vec<String> = r
            .admitted_before
            .iter()
            .map(|(pod, set)| format!("`{pod}` ({})", zones(set)))
            .collect();
        let _ = write!(out, "{}", before.join(", "));
    }
    let _ = write!(out, ". NRT before the decision: ");
    match &r.last_nrt {
        Some(nrt) => {
            let age = r
                .bound_at
                .duration_since(nrt.at)
                .map(|d| format!("written {:.0} ms before the bind", d.as_secs_f64() * 1e3))
                .unwrap_or_else(|_| "written after the bind".into());
            let _ = write!(out, "{} ({age})", nrt.render());
        }
        None => {
            let _ = write!(
                out,
                "the reset one (every zone free; none written this run)"
            );
        }
    }
    out.push('.');
    out
}

/// The list of every rejection in `runs` (scheduler, round, its rejections), the
/// bind-only ceiling's left out (it binds without looking: its rejections say nothing
/// of a scheduler); empty when there is none.
pub fn render<'a>(runs: impl IntoIterator<Item = (SchedulerKind, u32, &'a [Rejection])>) -> String {
    let mut lines = Vec::new();
    let mut ceiling = 0;
    for (kind, round, rejections) in runs {
        if kind == SchedulerKind::BindOnly {
            ceiling += rejections.len();
            continue;
        }
        lines.extend(rejections.iter().map(|r| render_one(kind, round, r)));
    }
    if lines.is_empty() {
        return String::new();
    }
    let mut out =
        String::from("Kubelet-rejected pods (every one, from the referee's verdicts):\n\n");
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    if ceiling > 0 {
        let _ = writeln!(
            out,
            "\n({ceiling} rejections of the bind-only ceiling not listed: it binds without looking.)"
        );
    }
    out
}

#[cfg(test)]
mod tests;
