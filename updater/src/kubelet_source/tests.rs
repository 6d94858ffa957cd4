use super::*;
use std::fs;
use tas_api::nrt::CpuManagerPolicy;
use tempfile::TempDir;

const HEADER: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

/// A node's kubelet files: `kubelet/config.yaml` and `kubelet/config.d/`, seen by the
/// agent under `/host-kubelet` on the host path `/var/lib/kubelet`.
fn node() -> (TempDir, SourceConfig) {
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet");
    fs::create_dir_all(kubelet.join("config.d")).unwrap();
    let source = SourceConfig {
        file: kubelet.join("config.yaml"),
        config_dir: Some(kubelet.join("config.d")),
        host_paths: vec![(kubelet, "/var/lib/kubelet".to_owned())],
        ..SourceConfig::default()
    };
    (dir, source)
}

fn write(source: &SourceConfig, name: &str, text: &str) {
    let path = match name {
        "config.yaml" => source.file.clone(),
        drop_in => source.config_dir.as_ref().unwrap().join(drop_in),
    };
    fs::write(path, text).unwrap();
}

#[test]
fn drop_ins_merge_over_the_file_in_lexical_order() {
    let (_dir, source) = node();
    write(
        &source,
        "config.yaml",
        &format!(
            "{HEADER}topologyManagerPolicy: best-effort\ncpuManagerPolicy: static\ntopologyManagerPolicyOptions:\n  prefer-closest-numa-nodes: \"true\"\n"
        ),
    );
    write(
        &source,
        "20-scope.conf",
        &format!("{HEADER}topologyManagerScope: pod\ntopologyManagerPolicy: single-numa-node\n"),
    );
    write(
        &source,
        "10-policy.conf",
        &format!(
            "{HEADER}topologyManagerPolicy: restricted\ntopologyManagerPolicyOptions:\n  max-allowable-numa-nodes: \"12\"\n"
        ),
    );
    write(&source, "99-notes.txt", "not a drop-in: ignored");
    let loaded = source.read_files().unwrap();
    let c = &loaded.config;
    assert_eq!(
        c.topology_manager_policy,
        TopologyManagerPolicy::SingleNumaNode
    );
    assert_eq!(c.topology_manager_scope, TopologyManagerScope::Pod);
    assert_eq!(c.cpu_manager_policy, CpuManagerPolicy::Static);
    // Maps merge key by key.
    assert_eq!(c.topology_manager_max_numa_nodes, 12);
    assert_eq!(c.topology_manager_policy_options.len(), 2);
    assert_eq!(
        loaded.sources,
        [
            "/var/lib/kubelet/config.yaml",
            "/var/lib/kubelet/config.d/10-policy.conf",
            "/var/lib/kubelet/config.d/20-scope.conf"
        ]
    );
}

#[test]
fn overrides_win_over_every_file() {
    let (_dir, mut source) = node();
    write(
        &source,
        "config.yaml",
        "topologyManagerPolicy: best-effort\n",
    );
    source.overrides = Overrides {
        policy: Some(TopologyManagerPolicy::Restricted),
        scope: None,
        options: Some(BTreeMap::from([(
            "max-allowable-numa-nodes".into(),
            "10".into(),
        )])),
    };
    let loaded = source.read_files().unwrap();
    assert_eq!(
        loaded.config.topology_manager_policy,
        TopologyManagerPolicy::Restricted
    );
    assert_eq!(loaded.config.topology_manager_max_numa_nodes, 10);
}

#[test]
fn a_missing_file_is_a_problem_with_the_defaults_as_fallback() {
    let (_dir, mut source) = node();
    let problem = source.read_files().unwrap_err();
    assert_eq!(problem.path, "/var/lib/kubelet/config.yaml");
    assert!(problem.message.contains("not found"), "{problem}");
    assert_eq!(
        problem.fallback.as_ref().map(|l| l.config.clone()),
        Some(KubeletConfig::default())
    );
    // A kubelet configured by flags: the overrides say it all, no problem.
    source.overrides.policy = Some(TopologyManagerPolicy::SingleNumaNode);
    let loaded = source.read_files().unwrap();
    assert_eq!(loaded.sources, ["overrides"]);
}

#[test]
fn bad_input_names_the_file_and_keeps_the_last_good_settings() {
    let (_dir, source) = node();
    let mut discovery = Discovery::default();
    write(
        &source,
        "config.yaml",
        "topologyManagerPolicy: restricted\n",
    );
    let good = discovery.settle(source.read_files());
    assert!(good.problem.is_none());
    assert_eq!(
        good.report.source.as_deref(),
        Some("/var/lib/kubelet/config.yaml")
    );

    // Valid, but past the size bound: a comment pads it.
    let pad = "#".repeat(usize::try_from(crate::bounded::CONFIG_LIMIT).unwrap());
    let oversized = format!("{HEADER}topologyManagerPolicy: none\n{pad}\n");
    let cases = [
        (
            "config.yaml",
            "topologyManagerPolicy: [restricted\n",
            "config.yaml",
            "does not parse",
        ),
        (
            "10-typo.conf",
            &format!("{HEADER}topologyManagerPolcy: none\n") as &str,
            "10-typo.conf",
            "topologyManagerPolcy",
        ),
        (
            "20-kind.conf",
            "topologyManagerPolicy: none\n",
            "20-kind.conf",
            "KubeletConfiguration",
        ),
        (
            "30-value.conf",
            &format!("{HEADER}topologyManagerScope: node\n") as &str,
            "30-value.conf",
            "\"node\"",
        ),
        (
            "config.yaml",
            &oversized as &str,
            "config.yaml",
            "1048576-byte limit",
        ),
        (
            "40-big.conf",
            &oversized as &str,
            "40-big.conf",
            "1048576-byte limit",
        ),
    ];
    for (file, text, path, says) in cases {
        // Each case alone over a good file.
        for entry in fs::read_dir(source.config_dir.as_ref().unwrap()).unwrap() {
            fs::remove_file(entry.unwrap().path()).unwrap();
        }
        write(
            &source,
            "config.yaml",
            "topologyManagerPolicy: restricted\n",
        );
        write(&source, file, text);
        let reading = discovery.settle(source.read_files());
        let problem = reading.problem.expect(file);
        assert!(problem.path.ends_with(path), "{file}: {problem}");
        assert!(problem.path.starts_with("/var/lib/kubelet/"), "{problem}");
        assert!(problem.message.contains(says), "{file}: {problem}");
        let reported = reading.report.problem.unwrap();
        assert!(
            reported.contains(path) && reported.contains("last settings"),
            "{reported}"
        );
        assert_eq!(
            reading.config.map(|c| c.topology_manager_policy),
            Some(TopologyManagerPolicy::Restricted),
            "{file}: the last good settings are kept, not none"
        );
    }
}

#[test]
fn with_nothing_ever_read_a_bad_file_publishes_nothing() {
    let (_dir, source) = node();
    write(&source, "config.yaml", "cpuManagerPolicy: Static\n");
    let reading = Discovery::default().settle(source.read_files());
    assert!(reading.config.is_none());
    assert!(
        reading
            .report
            .problem
            .unwrap()
            .contains("publishing no zones")
    );
}
