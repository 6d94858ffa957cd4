//! The api crate's CRDs on a real API server: they install, NRT objects read back in
//! both served versions, and the TopologyAwareScheduling schema and CEL rules refuse bad
//! objects (`cel_rules`). One shared control plane for the binary.

mod cel_rules;
mod host_paths;
mod pod_rules;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use serde_json::json;
use tas_testcluster::{TestCluster, apply_crds_from_dir, crd_dir, unique_name};

fn shared() -> &'static TestCluster {
    TestCluster::shared().expect("the shared test cluster starts")
}

fn nrt_resource(version: &str) -> ApiResource {
    ApiResource {
        group: "topology.node.k8s.io".into(),
        version: version.into(),
        api_version: format!("topology.node.k8s.io/{version}"),
        kind: "NodeResourceTopology".into(),
        plural: "noderesourcetopologies".into(),
    }
}

#[tokio::test]
async fn crds_install_and_nrt_reads_back_in_both_versions() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();

    let names = apply_crds_from_dir(&client, &crd_dir()).await.unwrap();
    assert!(
        names
            .iter()
            .any(|n| n == "noderesourcetopologies.topology.node.k8s.io"),
        "config/crd holds no NRT CRD: {names:?}"
    );

    let name = unique_name("nrt");
    let zones = json!([
        { "name": "node-0", "type": "Node", "resources": [
            { "name": "cpu", "capacity": "16", "allocatable": "15", "available": "11" },
            { "name": "memory", "capacity": "64Gi", "allocatable": "62Gi", "available": "60Gi" },
        ]},
        { "name": "node-1", "type": "Node", "resources": [
            { "name": "cpu", "capacity": "16", "allocatable": "16", "available": "16" },
        ]},
    ]);
    let v1alpha2 = nrt_resource("v1alpha2");
    let nrt = DynamicObject::new(&name, &v1alpha2).data(json!({
        "topologyPolicies": ["SingleNUMANodeContainerLevel"],
        "attributes": [{ "name": "topologyManagerPolicy", "value": "single-numa-node" }],
        "zones": zones,
    }));
    Api::<DynamicObject>::all_with(client.clone(), &v1alpha2)
        .create(&PostParams::default(), &nrt)
        .await
        .unwrap();

    for version in ["v1alpha1", "v1alpha2"] {
        let resource = nrt_resource(version);
        let read = Api::<DynamicObject>::all_with(client.clone(), &resource)
            .get(&name)
            .await
            .unwrap();
        let types = read.types.expect("apiVersion and kind");
        assert_eq!(types.api_version, resource.api_version);
        assert_eq!(read.data["zones"], zones, "zones read through {version}");
    }
}
