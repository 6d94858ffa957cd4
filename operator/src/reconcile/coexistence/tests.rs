use super::*;
use serde_json::json;

fn nrt(value: serde_json::Value) -> NodeResourceTopology {
    serde_json::from_value(value).unwrap()
}

fn objects() -> Vec<NodeResourceTopology> {
    vec![
        nrt(json!({
            "metadata": {"name": "n1", "annotations": {
                "tas.dev/kubelet-config-source": "/var/lib/kubelet/config.d/10-tm.conf",
                "tas.dev/kubelet-config-problem": "/var/lib/kubelet/config.d/10-tm.conf: does not parse"
            }},
            "attributes": [{"name": "topologyManagerPolicy", "value": "restricted"}],
            "zones": []
        })),
        nrt(json!({
            "metadata": {"name": "n2", "annotations": {
                "tas.dev/kubelet-config-source": "/var/lib/kubelet/config.yaml"
            }},
            "attributes": [{"name": "topologyManagerPolicy", "value": "none"}],
            "zones": []
        })),
        nrt(json!({
            "metadata": {"name": "n3", "managedFields": [
                {"manager": "nfd-topology-updater", "operation": "Update", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:zones": {}, "f:attributes": {}}}
            ]},
            "attributes": [{"name": "topologyManagerPolicy", "value": "none"}],
            "zones": []
        })),
        nrt(json!({
            "metadata": {"name": "n4", "annotations": {
                "tas.dev/kubelet-config-source": "/var/lib/kubelet/config.yaml"
            }},
            "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
            "zones": []
        })),
    ]
}

#[test]
fn issues_and_foreign_writers_per_node() {
    let reports = node_reports(&objects());
    let issue = reports["n1"].issue.as_ref().unwrap();
    assert_eq!(issue.reason, CONFIG_UNREADABLE);
    assert_eq!(issue.path, "/var/lib/kubelet/config.d/10-tm.conf");
    assert!(issue.message.contains("does not parse"));
    assert_eq!(reports["n2"].issue.as_ref().unwrap().reason, POLICY_NONE);
    // Another writer's object: its policy is theirs to report, its writer is listed.
    assert!(reports["n3"].issue.is_none());
    assert_eq!(reports["n3"].foreign_writers, ["nfd-topology-updater"]);
    assert_eq!(reports["n4"], NodeReport::default());

    let group: BTreeSet<String> = ["n1", "n3", "other"].map(String::from).into();
    let (issues, foreign) = for_group(&group, &reports);
    assert_eq!(issues.len(), 1);
    assert_eq!(foreign[0].node, "n3");
}

#[test]
fn ownership_condition() {
    let manage = NrtCrdSpec::default();
    let helm = vec!["helm".to_owned()];
    let c = ownership(&manage, &helm, &[]);
    assert_eq!((c.status, c.reason.as_str()), (false, CRD_MANAGED_BY_OTHER));
    assert!(c.message.contains("helm"), "{}", c.message);
    assert!(yields_crd(&manage, &helm));

    let take_over = NrtCrdSpec {
        take_over: true,
        ..NrtCrdSpec::default()
    };
    assert!(!yields_crd(&take_over, &helm));
    assert_eq!(ownership(&take_over, &helm, &[]).reason, CRD_TAKEN_OVER);

    let writers = vec![ForeignNrtWriter {
        node: "n3".into(),
        field_managers: vec!["nfd-topology-updater".into()],
    }];
    let c = ownership(&take_over, &[], &writers);
    assert_eq!((c.status, c.reason.as_str()), (false, NRT_WRITTEN_BY_OTHER));
    assert!(c.message.contains("nfd-topology-updater") && c.message.contains("n3"));

    let c = ownership(&manage, &[], &[]);
    assert_eq!((c.status, c.reason.as_str()), (true, AS_EXPECTED));
}
