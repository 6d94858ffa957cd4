//! The admission policy tas-operator-workloads (config/policy) holds the CRD's kubelet
//! host-path patterns verbatim, so that a change of the allow-list in
//! api/src/tas/updater.rs fails here until the policy follows. The stack test
//! (tests/stack/attacks/host_paths.rs) judges both with the real API server.

use tas_api::tas::{
    KUBELET_CONFIG_DIR_PATTERN, KUBELET_CONFIG_FILE_PATTERN, POD_RESOURCES_DIR_PATTERN,
};

#[test]
fn the_workloads_policy_holds_the_crds_host_path_patterns() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/policy/operator-workloads-policy.yaml"
    );
    let policy = std::fs::read_to_string(path).unwrap();
    for pattern in [
        POD_RESOURCES_DIR_PATTERN,
        KUBELET_CONFIG_FILE_PATTERN,
        KUBELET_CONFIG_DIR_PATTERN,
    ] {
        assert!(
            policy.contains(&format!("p.matches('{pattern}')")),
            "config/policy/operator-workloads-policy.yaml lacks {pattern}"
        );
    }
}
