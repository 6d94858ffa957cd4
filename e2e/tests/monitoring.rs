//! The monitoring bundle `config/prometheus/`: its alerting rules pass `promtool check
//! rules`, `promtool test rules` fires each alert from `tests/rules.test.yaml` (and
//! every alert has such a test), and every `tas_*` series the rules and the Grafana
//! dashboard query is one the components export. (The components' live `/metrics`
//! output is linted with `promtool check metrics` in tests/chart.rs, where they run.)

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use tas_testcluster::Tools;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn yaml(path: &str) -> Value {
    serde_norway::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The PrometheusRule's spec: a Prometheus rule file.
fn rule_file() -> Value {
    yaml("config/prometheus/prometheusrule.yaml")["spec"].clone()
}

fn alerts() -> BTreeSet<String> {
    rule_file()["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .filter_map(|r| r["alert"].as_str().map(str::to_owned))
        .collect()
}

/// Runs promtool (built by testcluster/tools/build.sh) in `dir`; its output, or a
/// panic with it.
fn promtool(dir: &std::path::Path, args: &[&str]) -> String {
    let promtool = Tools::locate()
        .expect("the cluster tools (testcluster/tools/build.sh)")
        .binary("promtool");
    let out = Command::new(&promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (testcluster/tools/build.sh builds it)",
                promtool.display()
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool {} failed:\n{text}",
        args.join(" ")
    );
    text
}

#[test]
fn promtool_checks_the_rules_and_fires_each_alert() {
    let dir = tempfile::tempdir().unwrap();
    let rules = serde_norway::to_string(&rule_file()).unwrap();
    std::fs::write(dir.path().join("rules.yaml"), rules).unwrap();
    std::fs::write(
        dir.path().join("rules.test.yaml"),
        read("config/prometheus/tests/rules.test.yaml"),
    )
    .unwrap();
    let checked = promtool(dir.path(), &["check", "rules", "rules.yaml"]);
    assert!(
        checked.contains(&format!("{} rules found", alerts().len())),
        "{checked}"
    );
    let tested = promtool(dir.path(), &["test", "rules", "rules.test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// Each alert is expected to fire somewhere in the unit tests.
#[test]
fn every_alert_has_a_test_that_fires_it() {
    let tests = yaml("config/prometheus/tests/rules.test.yaml");
    let fired: BTreeSet<String> = tests["tests"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["alert_rule_test"].as_array().into_iter().flatten())
        .filter(|a| a["exp_alerts"].as_array().is_some_and(|e| !e.is_empty()))
        .filter_map(|a| a["alertname"].as_str().map(str::to_owned))
        .collect();
    let alerts = alerts();
    let untested: Vec<&String> = alerts.difference(&fired).collect();
    assert!(untested.is_empty(), "alerts no test fires: {untested:?}");
}

/// The series names a registry's exposition defines: counters as `<name>_total`,
/// histograms as `<name>_bucket`, `_sum`, `_count`, everything else as is; and every
/// metric's own name (descriptions mention them).
fn exported(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        names.insert(name.to_owned());
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {}
        }
    }
    names
}

/// `tas_*` identifiers in `text`.
fn queried(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("tas_") {
        let boundary = i == 0 || {
            let before = rest.as_bytes()[i - 1];
            !(before.is_ascii_alphanumeric() || before == b'_')
        };
        let end = rest[i..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(rest.len(), |e| i + e);
        if boundary {
            names.insert(rest[i..end].to_owned());
        }
        rest = &rest[end..];
    }
    names
}

#[test]
fn rules_and_dashboard_query_metrics_the_components_export() {
    // Each component's registry, built as its binary builds it, with one series in each
    // labelled family (an empty family exposes nothing, not even its name).
    let operator = tas_operator::metrics::Metrics::new().render().unwrap();
    let mut scheduler = tas_scheduler::metrics::Metrics::new();
    let cache = tas_scheduler::cache::CacheMetrics::register(&mut scheduler.registry);
    scheduler.attempt("scheduled");
    let _ = cache.resyncs(tas_scheduler::cache::ResyncOutcome::Forced);
    let scheduler = tas_runtime::metrics::encode(&scheduler.registry).unwrap();
    let updater = tas_updater::metrics::Metrics::new();
    updater.published(true);
    updater.failed("apply");
    let _ = updater
        .podresources_latency
        .get_or_create(&tas_updater::metrics::CallLabel { call: "list" });
    let updater = updater.render().unwrap();
    let known: BTreeSet<String> = [operator, scheduler, updater]
        .iter()
        .flat_map(|t| exported(t))
        .collect();
    assert!(
        known.contains("tas_scheduler_nrt_cache_resyncs_total"),
        "{known:?}"
    );

    for path in [
        "config/prometheus/prometheusrule.yaml",
        "config/prometheus/tas-dashboard.json",
    ] {
        let used = queried(&read(path));
        assert!(!used.is_empty(), "{path} queries no tas_ metric");
        let unknown: Vec<&String> = used.difference(&known).collect();
        assert!(
            unknown.is_empty(),
            "{path} queries series no component exports: {unknown:?}"
        );
    }
}

/// The workspace's `repository` (`[workspace.package]` of the root Cargo.toml), which
/// runbook URLs start with: the one line of that table that sets it.
fn repository() -> String {
    let manifest = read("Cargo.toml");
    let table = manifest
        .split("\n[")
        .find(|t| t.starts_with("workspace.package]"))
        .expect("Cargo.toml has [workspace.package]");
    table
        .lines()
        .find_map(|l| l.strip_prefix("repository = "))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .expect("[workspace.package] sets repository")
}

/// The anchors GitHub gives a Markdown file's headings: lower case, spaces to `-`,
/// everything but letters, digits, `-` and `_` dropped.
fn heading_anchors(markdown: &str) -> BTreeSet<String> {
    markdown
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            l.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// Every alert links its runbook: `runbook_url` is the repository's
/// `docs/runbooks.md` with an anchor that is a heading of that file, one per alert.
#[test]
fn every_alert_links_to_its_runbook() {
    let base = format!("{}/blob/main/docs/runbooks.md#", repository());
    let anchors = heading_anchors(&read("docs/runbooks.md"));
    let mut problems = Vec::new();
    let mut linked = BTreeSet::new();
    for rule in rule_file()["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
    {
        let Some(alert) = rule["alert"].as_str() else {
            continue;
        };
        let Some(url) = rule["annotations"]["runbook_url"].as_str() else {
            problems.push(format!("{alert}: no annotations.runbook_url"));
            continue;
        };
        let Some(anchor) = url.strip_prefix(&base) else {
            problems.push(format!(
                "{alert}: runbook_url {url} does not start with {base}"
            ));
            continue;
        };
        if !anchors.contains(anchor) {
            problems.push(format!(
                "{alert}: runbook_url {url}: docs/runbooks.md has no heading with anchor #{anchor}"
            ));
        }
        if anchor != alert.to_lowercase() {
            problems.push(format!(
                "{alert}: runbook_url {url} should link the alert's own section #{}",
                alert.to_lowercase()
            ));
        }
        linked.insert(alert.to_owned());
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(linked, alerts(), "every alert is linked");
}
