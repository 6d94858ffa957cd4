//! The kubelet Topology Manager's own policy merge test tables, replayed through the
//! scheduler's hint merge ([`tas_scheduler::numa::hint`]).
//!
//! `dump.sh` (next to this file) compiles `zz_tas_dump_merge_cases_test.go` into the
//! package `k8s.io/kubernetes/pkg/kubelet/cm/topologymanager` with `go test -overlay`,
//! and that test writes the package's merge tables — providers' hints, the expected merged
//! hint and the policy's admit verdict — as JSON. The file comes from
//! One dump per supported kubelet minor, all replayed: `TAS_KUBELET_TABLES` lists them
//! (`v1.34.4=PATH,...` as `dump.sh --all` prints them, set by `make test`; a single path
//! works too), else the test runs the script (cached, so only the first run compiles);
//! without a Go toolchain and without the variable, the test says so and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use tas_api::nrt::TopologyManagerPolicy;
use tas_scheduler::numa::hint::{Hint, ResourceHints, merge_closest};

#[derive(Deserialize)]
struct Tables {
    tables: Vec<Table>,
}

#[derive(Deserialize)]
struct Table {
    test: String,
    policy: String,
    prefer_closest: bool,
    nodes: Vec<u32>,
    distances: Vec<Vec<u32>>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    providers: Vec<Vec<Resource>>,
    expected: JsonHint,
    admit: bool,
}

#[derive(Deserialize)]
struct Resource {
    hints: Option<Vec<JsonHint>>,
}

#[derive(Deserialize)]
struct JsonHint {
    mask: Option<Vec<u32>>,
    preferred: bool,
}

impl JsonHint {
    fn hint(&self) -> Hint {
        Hint {
            mask: self
                .mask
                .as_ref()
                .map(|ids| ids.iter().fold(0u64, |m, &id| m | 1 << id)),
            preferred: self.preferred,
        }
    }
}

/// The providers' hints as the kubelet's `filterProvidersHints` sees them: a provider
/// without any resource is one "don't care".
fn resource_hints(case: &Case) -> Vec<ResourceHints> {
    let mut out = Vec::new();
    for provider in &case.providers {
        if provider.is_empty() {
            out.push(ResourceHints::DontCare);
        }
        for resource in provider {
            out.push(match &resource.hints {
                None => ResourceHints::DontCare,
                Some(list) => ResourceHints::Hints(list.iter().map(JsonHint::hint).collect()),
            });
        }
    }
    out
}

/// The dumps to replay, each with the kubelet version it came from: `TAS_KUBELET_TABLES`
/// lists them (`v1.34.4=PATH,v1.35.4=PATH,...`, or a single path), else `dump.sh --all`
/// makes them.
fn tables_files() -> Option<Vec<(String, PathBuf)>> {
    if let Some(list) = std::env::var("TAS_KUBELET_TABLES")
        .ok()
        .filter(|l| !l.trim().is_empty())
    {
        return Some(parse_list(&list.replace(',', "\n")));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kubelet_tables/dump.sh");
    if Command::new("go").arg("version").output().is_err() {
        eprintln!(
            "kubelet_tables: skipped: TAS_KUBELET_TABLES is not set and `go` is not on PATH \
             (make test sets it; see {})",
            script.display()
        );
        return None;
    }
    let output = Command::new(&script)
        .arg("--all")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "{} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(parse_list(&String::from_utf8_lossy(&output.stdout)))
}

/// One `version=path` or bare path per line.
fn parse_list(text: &str) -> Vec<(String, PathBuf)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| match l.split_once('=') {
            Some((version, path)) => (version.to_owned(), PathBuf::from(path)),
            None => ("(unnamed)".to_owned(), PathBuf::from(l)),
        })
        .collect()
}

fn show(h: Hint) -> String {
    match h.mask {
        None => format!("{{any, preferred {}}}", h.preferred),
        Some(m) => {
            let ids: Vec<String> = (0..64)
                .filter(|b| m & 1 << b != 0)
                .map(|b: u32| b.to_string())
                .collect();
            format!("{{[{}], preferred {}}}", ids.join(","), h.preferred)
        }
    }
}

#[test]
fn kubelet_policy_merge_tables() {
    let Some(files) = tables_files() else { return };
    assert!(!files.is_empty(), "no kubelet tables to replay");
    let mut report = Vec::new();
    for (version, path) in &files {
        report.extend(replay(version, path));
    }
    assert!(report.is_empty(), "failing cases:\n{}", report.join("\n"));
}

/// Replays one dump; returns its failing cases.
fn replay(version: &str, path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let tables: Tables = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a tables dump: {e}", path.display()));
    let mut total = (0, 0);
    let mut report = Vec::new();
    for table in &tables.tables {
        let policy: TopologyManagerPolicy = table.policy.parse().expect("known policy");
        let numa_nodes = table.nodes.iter().fold(0u64, |m, &id| m | 1 << id);
        let index = |id: u32| table.nodes.iter().position(|&n| n == id);
        let distance = |from: u32, to: u32| match (index(from), index(to)) {
            (Some(f), Some(t)) => table.distances[f][t],
            _ => u32::MAX,
        };
        let closest: Option<&dyn Fn(u32, u32) -> u32> =
            table.prefer_closest.then_some(&distance as _);
        let mut failed = Vec::new();
        for case in &table.cases {
            let hints = resource_hints(case);
            let merged = merge_closest(policy, numa_nodes, &hints, closest);
            let expected = case.expected.hint();
            if merged.hint != expected || merged.admit != case.admit {
                let size: usize = hints
                    .iter()
                    .map(|h| match h {
                        ResourceHints::DontCare => 1,
                        ResourceHints::Hints(l) => l.len().max(1),
                    })
                    .sum();
                failed.push((
                    size,
                    format!(
                        "    {:?}: expected {} admit {}, got {} admit {}",
                        case.name,
                        show(expected),
                        case.admit,
                        show(merged.hint),
                        merged.admit
                    ),
                ));
            }
        }
        let cases = table.cases.len();
        println!(
            "{:<38} {:<17} closest={:<5} cases {cases:>3}  passed {:>3}  failed {:>3}",
            table.test,
            table.policy,
            table.prefer_closest,
            cases - failed.len(),
            failed.len()
        );
        failed.sort();
        for (_, line) in failed.iter().take(3) {
            println!("{line}");
        }
        total.0 += cases;
        total.1 += failed.len();
        report.extend(
            failed
                .into_iter()
                .map(|(_, l)| format!("{}: {l}", table.test)),
        );
    }
    println!(
        "kubelet {version} policy tables: {} cases, {} passed, {} failed ({})",
        total.0,
        total.0 - total.1,
        total.1,
        path.display()
    );
    assert!(total.0 > 0, "{} holds no cases", path.display());
    report
        .into_iter()
        .map(|l| format!("kubelet {version}: {l}"))
        .collect()
}
