//! What the operator refuses, from the YAML fixtures of the CR: each error says what to
//! change, and whether waiting for that change is all there is to do.

use super::*;
use crate::node_groups::tests::{group, node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const MINIMAL: &str = include_str!("../../tests/fixtures/minimal.yaml");
const FULL: &str = include_str!("../../tests/fixtures/full.yaml");

fn cr(yaml: &str) -> TopologyAwareScheduling {
    serde_norway::from_str(yaml).expect("fixture is a valid TopologyAwareScheduling")
}

fn ctx() -> BuildContext {
    BuildContext {
        updater_image_default: Some("registry.example/tas/updater:release".to_owned()),
        scheduler_image_default: Some("registry.example/tas/scheduler:release".to_owned()),
        // The fixture's own images and toleration.
        allowed_images: vec![
            "registry.example/tas/updater:v0.3.0".to_owned(),
            "registry.example/tas/updater:v0.3.1-rc.1".to_owned(),
            "registry.example/tas/scheduler:v0.3.0".to_owned(),
        ],
        allowed_toleration_keys: vec!["dedicated".to_owned()],
        updater_namespace: None,
    }
}

fn overlap_error(groups: &[NodeGroup], nodes: &[ObjectMeta]) -> ValidationError {
    let mut cr = cr(MINIMAL);
    cr.spec.node_groups = groups.to_vec();
    let membership = Membership::compute(groups, nodes);
    validate(&cr, &ctx(), Some(&membership)).unwrap_err()
}

#[test]
fn fixtures_are_valid_and_images_resolved() {
    let full = cr(FULL);
    let valid = validate(&full, &ctx(), None).unwrap();
    assert_eq!(valid.name, "default");
    let images: Vec<(&str, &str)> = valid
        .groups
        .iter()
        .map(|g| (g.group.name.as_str(), g.image.as_str()))
        .collect();
    // The gpu group names its own image; numa-workers takes the shared one.
    assert_eq!(
        images,
        [
            ("numa-workers", "registry.example/tas/updater:v0.3.0"),
            ("gpu", "registry.example/tas/updater:v0.3.1-rc.1"),
        ]
    );
    assert_eq!(
        valid.scheduler_image,
        "registry.example/tas/scheduler:v0.3.0"
    );

    let minimal = cr(MINIMAL);
    let valid = validate(&minimal, &ctx(), None).unwrap();
    assert_eq!(valid.groups.len(), 1, "the implicit group of every node");
    assert_eq!(
        valid.groups[0].image,
        "registry.example/tas/updater:release"
    );
    assert_eq!(
        valid.scheduler_image,
        "registry.example/tas/scheduler:release"
    );
    assert!(valid.groups[0].selector.is_everything());
}

#[test]
fn a_missing_image_is_a_permanent_error_saying_what_to_set() {
    let minimal = cr(MINIMAL);
    let err = validate(&minimal, &BuildContext::default(), None).unwrap_err();
    assert!(
        matches!(err, ValidationError::MissingUpdaterImage { .. }),
        "{err:?}"
    );
    assert!(err.is_permanent());
    assert_eq!(err.reason(), "MissingImage");
    let msg = err.to_string();
    assert!(
        msg.contains("spec.updater.image") && msg.contains("--updater-image"),
        "{msg}"
    );

    let only_updater = BuildContext {
        scheduler_image_default: None,
        ..ctx()
    };
    let err = validate(&minimal, &only_updater, None).unwrap_err();
    assert!(err.is_permanent());
    let msg = err.to_string();
    assert!(
        msg.contains("spec.scheduler.image") && msg.contains("--scheduler-image"),
        "{msg}"
    );

    // A group with its own image does not cover the others.
    let mut full = cr(FULL);
    full.spec.updater.image = None;
    let no_defaults = BuildContext {
        updater_image_default: None,
        scheduler_image_default: None,
        ..ctx()
    };
    let err = validate(&full, &no_defaults, None).unwrap_err();
    assert!(err.to_string().contains("'numa-workers'"), "{err}");

    // An empty image in the object is no image, and does not fall back to the default.
    let mut empty = cr(MINIMAL);
    empty.spec.scheduler.image = Some(String::new());
    let err = validate(&empty, &ctx(), None).unwrap_err();
    assert_eq!(err, ValidationError::MissingSchedulerImage);
}

#[test]
fn a_selector_operator_that_labels_do_not_have_is_a_permanent_error() {
    let mut full = cr(FULL);
    let exprs = full.spec.node_groups[1]
        .node_selector
        .match_expressions
        .as_mut()
        .unwrap();
    exprs[0].operator = "Gt".to_owned();
    exprs[0].values = Some(vec!["3".to_owned()]);
    let err = validate(&full, &ctx(), None).unwrap_err();
    assert!(err.is_permanent());
    assert_eq!(err.reason(), "InvalidNodeSelector");
    let msg = err.to_string();
    assert!(
        msg.starts_with("spec.nodeGroups[1].nodeSelector (group 'gpu'): "),
        "{msg}"
    );
    assert!(msg.contains("unknown operator 'Gt'"), "{msg}");
}

#[test]
fn overlap_names_the_node_and_both_groups() {
    let nodes = [
        node("n1", &[("pool", "a"), ("gpu", "yes")]),
        node("n2", &[("pool", "a")]),
    ];
    let err = overlap_error(
        &[group("numa", "pool", "a"), group("gpu", "gpu", "yes")],
        &nodes,
    );
    assert!(err.is_permanent());
    assert_eq!(err.reason(), "NodeGroupsOverlap");
    let msg = err.to_string();
    assert!(
        msg.starts_with("1 node is selected by more than one node group: n1 (groups numa, gpu)."),
        "{msg}"
    );
    assert!(!msg.contains("n2"), "{msg}");
}

#[test]
fn overlap_message_lists_five_nodes_then_counts_the_rest() {
    let nodes: Vec<ObjectMeta> = (0..8)
        .map(|i| node(&format!("n{i}"), &[("pool", "a")]))
        .collect();
    let msg = overlap_error(
        &[group("one", "pool", "a"), group("two", "pool", "a")],
        &nodes,
    )
    .to_string();
    assert!(msg.starts_with("8 nodes are selected"), "{msg}");
    for i in 0..5 {
        assert!(msg.contains(&format!("n{i} (groups one, two)")), "{msg}");
    }
    assert!(!msg.contains("n5"), "{msg}");
    assert!(msg.contains("and 3 more"), "{msg}");
}

#[test]
fn disjoint_groups_pass_with_the_nodes_observed() {
    let mut full = cr(FULL);
    full.spec.node_groups = vec![group("a", "pool", "a"), group("b", "pool", "b")];
    let nodes = [node("n1", &[("pool", "a")]), node("n2", &[("pool", "b")])];
    let membership = Membership::compute(&full.spec.node_groups, &nodes);
    assert!(validate(&full, &ctx(), Some(&membership)).is_ok());
}

/// What the CRD's CEL rules refuse at apply, refused offline too (for `render`).
#[test]
fn what_the_api_server_refuses_is_refused() {
    let mut other = cr(MINIMAL);
    other.metadata.name = Some("production".to_owned());
    let err = validate(&other, &ctx(), None).unwrap_err();
    assert_eq!(
        err,
        ValidationError::WrongName {
            name: "production".to_owned()
        }
    );
    assert!(err.to_string().contains("must be 'default'"), "{err}");

    let mut unnamed = cr(MINIMAL);
    unnamed.metadata.name = None;
    assert_eq!(
        validate(&unnamed, &ctx(), None).unwrap_err(),
        ValidationError::MissingName
    );

    let mut twice = cr(FULL);
    twice.spec.node_groups[1].name = "numa-workers".to_owned();
    let err = validate(&twice, &ctx(), None).unwrap_err();
    assert!(err.to_string().contains("'numa-workers'"), "{err}");

    let mut crd = cr(MINIMAL);
    crd.spec.nrt_crd.manage = false;
    crd.spec.nrt_crd.delete_on_uninstall = true;
    let err = validate(&crd, &ctx(), None).unwrap_err();
    assert_eq!(err, ValidationError::DeleteUnmanagedCrd);
    assert!(err.is_permanent());
}

#[test]
fn the_otlp_endpoints_port_is_resolved_and_a_portless_mess_refused() {
    let full = cr(FULL);
    assert_eq!(validate(&full, &ctx(), None).unwrap().otlp_port, Some(4317));
    assert_eq!(
        validate(&cr(MINIMAL), &ctx(), None).unwrap().otlp_port,
        None
    );

    let mut blank = cr(MINIMAL);
    blank.spec.observability.otlp_endpoint = Some("  ".to_owned());
    assert_eq!(validate(&blank, &ctx(), None).unwrap().otlp_port, None);

    let mut bad = cr(MINIMAL);
    bad.spec.observability.otlp_endpoint = Some("http://collector:70000".to_owned());
    let err = validate(&bad, &ctx(), None).unwrap_err();
    assert!(err.is_permanent());
    assert_eq!(err.reason(), "InvalidOtlpEndpoint");
    let msg = err.to_string();
    assert!(
        msg.contains("spec.observability.otlpEndpoint") && msg.contains("70000"),
        "{msg}"
    );
}
