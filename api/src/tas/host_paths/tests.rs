//! The allow-list in Rust is the CRD's CEL rule: same expression, same answers, and no
//! path trick gets through either.

use super::*;
use proptest::prelude::*;

/// Paths of every documented layout (docs/user-guide.md, "Host paths").
const ALLOWED: [(HostPathRule, &str); 16] = [
    (
        HostPathRule::PodResourcesDir,
        "/var/lib/kubelet/pod-resources",
    ),
    (
        HostPathRule::PodResourcesDir,
        "/var/lib/kubelet/pod-resources/",
    ),
    (
        HostPathRule::PodResourcesDir,
        "/var/lib/k0s/kubelet/pod-resources",
    ),
    (
        HostPathRule::PodResourcesDir,
        "/var/snap/microk8s/common/var/lib/kubelet/pod-resources",
    ),
    (HostPathRule::ConfigFile, "/var/lib/kubelet/config.yaml"),
    (
        HostPathRule::ConfigFile,
        "/etc/kubernetes/kubelet/kubelet-config.json",
    ),
    (
        HostPathRule::ConfigFile,
        "/etc/kubernetes/kubelet/config.json",
    ),
    (
        HostPathRule::ConfigFile,
        "/home/kubernetes/kubelet-config.yaml",
    ),
    (HostPathRule::ConfigFile, "/etc/kubernetes/kubelet.conf"),
    (
        HostPathRule::ConfigFile,
        "/etc/kubernetes/kubelet-config.yaml",
    ),
    (
        HostPathRule::ConfigFile,
        "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf",
    ),
    (HostPathRule::ConfigFile, "/var/lib/k0s/kubelet-config.yaml"),
    (
        HostPathRule::ConfigDir,
        "/etc/kubernetes/kubelet/config.json.d",
    ),
    (HostPathRule::ConfigDir, "/etc/kubernetes/kubelet.conf.d"),
    (HostPathRule::ConfigDir, "/etc/kubelet.conf.d/"),
    (
        HostPathRule::ConfigDir,
        "/var/lib/rancher/rke2/agent/etc/kubelet.d",
    ),
];

/// Paths that would hand the agent (root) the node, and the tricks that try to reach
/// them through an allowed prefix.
const REFUSED: [(HostPathRule, &str, PathTrick); 21] = [
    (HostPathRule::PodResourcesDir, "/", PathTrick::NotListed),
    (
        HostPathRule::PodResourcesDir,
        "/var/lib/kubelet",
        PathTrick::NotListed,
    ),
    (
        HostPathRule::PodResourcesDir,
        "/run/containerd",
        PathTrick::NotListed,
    ),
    (
        HostPathRule::PodResourcesDir,
        "var/lib/kubelet/pod-resources",
        PathTrick::Relative,
    ),
    (
        HostPathRule::PodResourcesDir,
        "/var/lib/kubelet/pod-resources/..",
        PathTrick::DotSegment,
    ),
    (
        HostPathRule::PodResourcesDir,
        "/var/lib/kubelet/pod-resources/.",
        PathTrick::DotSegment,
    ),
    (
        HostPathRule::PodResourcesDir,
        "//var/lib/kubelet/pod-resources",
        PathTrick::DoubleSlash,
    ),
    (
        HostPathRule::PodResourcesDir,
        "/var/lib/kubelet/pod-resources//",
        PathTrick::DoubleSlash,
    ),
    (
        HostPathRule::PodResourcesDir,
        "/var/lib/kubelet/pod-resources\0",
        PathTrick::Nul,
    ),
    (HostPathRule::ConfigFile, "/x.yaml", PathTrick::NotListed),
    (
        HostPathRule::ConfigFile,
        "/var/lib/kubelet/kubeconfig",
        PathTrick::NotListed,
    ),
    (
        HostPathRule::ConfigFile,
        "/var/lib/kubelet/pki/x.conf",
        PathTrick::NotListed,
    ),
    (
        HostPathRule::ConfigFile,
        "/var/lib/kubelet/config.yaml/",
        PathTrick::NotListed,
    ),
    (
        HostPathRule::ConfigFile,
        "/var/lib/kubelet/../../etc/x.yaml",
        PathTrick::DotSegment,
    ),
    (
        HostPathRule::ConfigFile,
        "/etc/kubernetes/admin.conf",
        PathTrick::NotListed,
    ),
    (HostPathRule::ConfigFile, "config.yaml", PathTrick::Relative),
    (HostPathRule::ConfigDir, "/", PathTrick::NotListed),
    (HostPathRule::ConfigDir, "/etc", PathTrick::NotListed),
    (
        HostPathRule::ConfigDir,
        "/etc/kubernetes/pki",
        PathTrick::NotListed,
    ),
    (
        HostPathRule::ConfigDir,
        "/etc/sudoers.d",
        PathTrick::NotListed,
    ),
    (
        HostPathRule::ConfigDir,
        "/etc/kubernetes/kubelet/../../../etc/kubelet.d",
        PathTrick::DotSegment,
    ),
];

#[test]
fn every_documented_layout_is_allowed() {
    for (rule, path) in ALLOWED {
        assert_eq!(rule.check(path), Ok(()), "{rule:?} {path}");
    }
    assert_eq!(
        check_pod_resources_dir("/var/lib/kubelet/pod-resources"),
        Ok(())
    );
    assert_eq!(check_config_file("/var/lib/kubelet/config.yaml"), Ok(()));
    assert_eq!(check_config_dir("/etc/kubernetes/kubelet.conf.d"), Ok(()));
}

#[test]
fn hostile_paths_are_refused_saying_which_rule_and_why() {
    for (rule, path, why) in REFUSED {
        let err = rule.check(path).unwrap_err();
        assert_eq!((err.rule, err.why), (rule, why), "{path:?}");
        let msg = err.to_string();
        assert!(
            msg.contains(rule.field()) && msg.contains(rule.requirement()),
            "{msg}"
        );
    }
}

#[test]
fn the_cel_rule_is_the_pattern_and_its_message_names_the_field() {
    for rule in HostPathRule::ALL {
        let cel = serde_json::to_value(rule.cel("spec.nodeGroups[].updater.kubelet")).unwrap();
        assert_eq!(cel["rule"], format!("self.matches('{}')", rule.pattern()));
        let message = cel["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!(
                "spec.nodeGroups[].updater.kubelet.{} must be",
                rule.field()
            )),
            "{message}"
        );
        // A CEL string literal in single quotes: the pattern must not end it.
        assert!(!rule.pattern().contains('\''));
    }
}

/// A strategy for the strings a pattern accepts (proptest's generator takes no anchors).
fn accepted_by(rule: HostPathRule) -> impl Strategy<Value = String> {
    let p = rule.pattern();
    proptest::string::string_regex(&p[1..p.len() - 1]).unwrap()
}

fn any_rule() -> impl Strategy<Value = HostPathRule> {
    proptest::sample::select(HostPathRule::ALL.to_vec())
}

proptest! {
    /// Everything a pattern accepts is clean: the Rust-only checks never refuse what the
    /// CEL rule lets through, so the two allow-lists are the same.
    #[test]
    fn everything_the_pattern_accepts_is_a_clean_absolute_path(
        (rule, path) in any_rule().prop_flat_map(|r| (Just(r), accepted_by(r)))
    ) {
        prop_assert_eq!(path_trick(&path), None, "{:?}", path);
        prop_assert_eq!(rule.check(&path), Ok(()));
    }

    /// On any string, built from path-like pieces, Rust answers what the CEL pattern does.
    #[test]
    fn rust_and_cel_agree(
        rule in any_rule(),
        pieces in proptest::collection::vec(
            prop_oneof![
                Just("/"), Just("//"), Just(".."), Just("."), Just("\0"), Just("var"),
                Just("lib"), Just("kubelet"), Just("pod-resources"), Just("etc"),
                Just("kubernetes"), Just("config.yaml"), Just("kubelet.conf.d"), Just("pki"),
                Just("k0s"), Just("x.d"), Just("config.json"),
            ],
            0..10,
        )
    ) {
        let path = pieces.concat();
        let cel = Regex::new(rule.pattern()).unwrap().is_match(&path);
        prop_assert_eq!(rule.check(&path).is_ok(), cel, "{:?}", path);
    }
}
