//! The NodeResourceTopology CustomResourceDefinition, written out by hand.
//!
//! It must match the CRD other tools install: a cluster may already have it, and
//! whichever copy is applied last wins. Deriving it from the Rust types would nest the
//! fields under `spec` and change formats, so the schema is spelled out here field by
//! field. Both versions are served from their own schema; there is no conversion
//! webhook and no subresource.
//!
//! The lists and strings carry `maxItems`/`maxLength` bounds the published CRD lacks
//! (figures and reasons in [`super::limits`]): they only narrow the schema, so every
//! object a real node agent writes is still accepted, with the same field names.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps,
    JSONSchemaPropsOrArray,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::limits::{
    MAX_ATTRIBUTES, MAX_COSTS_PER_ZONE, MAX_QUALIFIED_NAME_LENGTH, MAX_QUANTITY_LENGTH,
    MAX_RESOURCES_PER_ZONE, MAX_TOPOLOGY_POLICIES, MAX_VALUE_LENGTH, MAX_ZONE_ATTRIBUTES,
    MAX_ZONE_NAME_LENGTH, MAX_ZONES,
};
use super::{CRD_NAME, GROUP, KIND, LIST_KIND, PLURAL, SHORT_NAME, SINGULAR, v1alpha1, v1alpha2};

/// Annotation that marks an API under `*.k8s.io` as approved through a KEP.
const API_APPROVED_ANNOTATION: &str = "api-approved.kubernetes.io";
/// The approval the published CRD carries.
const API_APPROVED_VALUE: &str = "https://github.com/kubernetes/enhancements/pull/1870";

/// The Kubernetes quantity syntax, as validated by the API server.
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// The CRD serving NodeResourceTopology `v1alpha1` and `v1alpha2` (the storage
/// version), cluster-scoped.
pub fn crd() -> CustomResourceDefinition {
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(CRD_NAME.to_owned()),
            annotations: Some(BTreeMap::from([(
                API_APPROVED_ANNOTATION.to_owned(),
                API_APPROVED_VALUE.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: GROUP.to_owned(),
            names: CustomResourceDefinitionNames {
                kind: KIND.to_owned(),
                list_kind: Some(LIST_KIND.to_owned()),
                plural: PLURAL.to_owned(),
                singular: Some(SINGULAR.to_owned()),
                short_names: Some(vec![SHORT_NAME.to_owned()]),
                categories: None,
            },
            scope: "Cluster".to_owned(),
            versions: vec![
                version(v1alpha1::VERSION, false, root_schema(false)),
                version(v1alpha2::VERSION, true, root_schema(true)),
            ],
            conversion: None,
            preserve_unknown_fields: None,
        },
        status: None,
    }
}

fn version(name: &str, storage: bool, schema: JSONSchemaProps) -> CustomResourceDefinitionVersion {
    CustomResourceDefinitionVersion {
        name: name.to_owned(),
        served: true,
        storage,
        schema: Some(CustomResourceValidation {
            open_api_v3_schema: Some(schema),
        }),
        ..CustomResourceDefinitionVersion::default()
    }
}

/// The whole object. `v1alpha2` adds top-level `attributes` and only requires `zones`.
fn root_schema(v1alpha2: bool) -> JSONSchemaProps {
    let mut properties = vec![
        (
            "apiVersion",
            described(typed("string"), "Versioned schema of this object."),
        ),
        (
            "kind",
            described(typed("string"), "REST resource this object represents."),
        ),
        ("metadata", typed("object")),
        (
            "topologyPolicies",
            described(
                array(string(MAX_VALUE_LENGTH), MAX_TOPOLOGY_POLICIES),
                "Topology Manager policy names, e.g. SingleNUMANodeContainerLevel.",
            ),
        ),
        (
            "zones",
            described(
                array(zone(), MAX_ZONES),
                "Topology zones of the node, one per NUMA node.",
            ),
        ),
    ];
    let required: &[&str] = if v1alpha2 {
        properties.push((
            "attributes",
            described(
                array(attribute(), MAX_ATTRIBUTES),
                "Node-wide attributes, e.g. the Topology Manager policy and scope.",
            ),
        ));
        &["zones"]
    } else {
        &["topologyPolicies", "zones"]
    };
    described(
        object(properties, required),
        "Resources available in each NUMA zone of a node; named after the node.",
    )
}

fn zone() -> JSONSchemaProps {
    let cost = object(
        vec![
            ("name", string(MAX_ZONE_NAME_LENGTH)),
            (
                "value",
                JSONSchemaProps {
                    format: Some("int64".to_owned()),
                    ..typed("integer")
                },
            ),
        ],
        &["name", "value"],
    );
    let resource = object(
        vec![
            (
                "name",
                described(string(MAX_QUALIFIED_NAME_LENGTH), "Resource name."),
            ),
            (
                "capacity",
                described(quantity(), "Total amount in the zone."),
            ),
            ("allocatable", described(quantity(), "Amount pods may use.")),
            ("available", described(quantity(), "Amount still free.")),
        ],
        &["name", "capacity", "allocatable", "available"],
    );
    described(
        object(
            vec![
                ("name", string(MAX_ZONE_NAME_LENGTH)),
                ("type", string(MAX_ZONE_NAME_LENGTH)),
                ("parent", string(MAX_ZONE_NAME_LENGTH)),
                (
                    "costs",
                    described(array(cost, MAX_COSTS_PER_ZONE), "Distance to each zone."),
                ),
                ("attributes", array(attribute(), MAX_ZONE_ATTRIBUTES)),
                ("resources", array(resource, MAX_RESOURCES_PER_ZONE)),
            ],
            &["name", "type"],
        ),
        "A topology zone, usually a NUMA node named node-<id>.",
    )
}

fn attribute() -> JSONSchemaProps {
    object(
        vec![
            ("name", string(MAX_QUALIFIED_NAME_LENGTH)),
            ("value", string(MAX_VALUE_LENGTH)),
        ],
        &["name", "value"],
    )
}

/// An int-or-string Kubernetes quantity.
fn quantity() -> JSONSchemaProps {
    JSONSchemaProps {
        any_of: Some(vec![typed("integer"), typed("string")]),
        pattern: Some(QUANTITY_PATTERN.to_owned()),
        max_length: Some(MAX_QUANTITY_LENGTH),
        x_kubernetes_int_or_string: Some(true),
        ..JSONSchemaProps::default()
    }
}

fn typed(type_: &str) -> JSONSchemaProps {
    JSONSchemaProps {
        type_: Some(type_.to_owned()),
        ..JSONSchemaProps::default()
    }
}

/// A string of at most `max_length` characters.
fn string(max_length: i64) -> JSONSchemaProps {
    JSONSchemaProps {
        max_length: Some(max_length),
        ..typed("string")
    }
}

fn described(schema: JSONSchemaProps, description: &str) -> JSONSchemaProps {
    JSONSchemaProps {
        description: Some(description.to_owned()),
        ..schema
    }
}

fn array(items: JSONSchemaProps, max_items: i64) -> JSONSchemaProps {
    JSONSchemaProps {
        items: Some(JSONSchemaPropsOrArray::Schema(Box::new(items))),
        max_items: Some(max_items),
        ..typed("array")
    }
}

fn object(properties: Vec<(&str, JSONSchemaProps)>, required: &[&str]) -> JSONSchemaProps {
    JSONSchemaProps {
        properties: Some(
            properties
                .into_iter()
                .map(|(name, schema)| (name.to_owned(), schema))
                .collect(),
        ),
        required: Some(required.iter().map(|&r| r.to_owned()).collect()),
        ..typed("object")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// Kept separate from [`QUANTITY_PATTERN`] so that an accidental edit shows up.
    const PUBLISHED_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

    fn schema_of(version: &str) -> Value {
        let crd = serde_json::to_value(crd()).unwrap();
        let versions = crd["spec"]["versions"].as_array().unwrap();
        let found = versions.iter().find(|v| v["name"] == version).unwrap();
        found["schema"]["openAPIV3Schema"].clone()
    }

    #[test]
    fn identity_matches_the_published_crd() {
        let crd = serde_json::to_value(crd()).unwrap();
        assert_eq!(
            crd["metadata"]["name"],
            "noderesourcetopologies.topology.node.k8s.io"
        );
        assert_eq!(
            crd["metadata"]["annotations"]["api-approved.kubernetes.io"],
            "https://github.com/kubernetes/enhancements/pull/1870"
        );
        assert_eq!(crd["spec"]["group"], "topology.node.k8s.io");
        assert_eq!(crd["spec"]["scope"], "Cluster");
        assert_eq!(
            crd["spec"]["names"],
            json!({
                "kind": "NodeResourceTopology",
                "listKind": "NodeResourceTopologyList",
                "plural": "noderesourcetopologies",
                "singular": "noderesourcetopology",
                "shortNames": ["node-res-topo"],
            })
        );
        let versions: Vec<(&str, bool, bool)> = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                assert!(v.get("subresources").is_none());
                (
                    v["name"].as_str().unwrap(),
                    v["served"].as_bool().unwrap(),
                    v["storage"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            versions,
            [("v1alpha1", true, false), ("v1alpha2", true, true)]
        );
        assert!(crd["spec"].get("conversion").is_none());
    }

    #[test]
    fn required_fields_match_the_published_crd() {
        let v2 = schema_of("v1alpha2");
        assert_eq!(v2["required"], json!(["zones"]));
        assert_eq!(v2["properties"]["metadata"]["type"], "object");
        assert_eq!(
            v2["properties"]["attributes"]["items"]["required"],
            json!(["name", "value"])
        );

        let v1 = schema_of("v1alpha1");
        assert_eq!(v1["required"], json!(["topologyPolicies", "zones"]));
        assert!(v1["properties"].get("attributes").is_none());

        for root in [v1, v2] {
            let zone = &root["properties"]["zones"]["items"];
            assert_eq!(zone["required"], json!(["name", "type"]));
            let costs = &zone["properties"]["costs"]["items"];
            assert_eq!(costs["required"], json!(["name", "value"]));
            assert_eq!(
                costs["properties"]["value"],
                json!({"type": "integer", "format": "int64"})
            );
            assert_eq!(costs["properties"]["name"]["type"], "string");
            assert_eq!(
                zone["properties"]["attributes"]["items"]["required"],
                json!(["name", "value"])
            );
            let resource = &zone["properties"]["resources"]["items"];
            assert_eq!(
                resource["required"],
                json!(["name", "capacity", "allocatable", "available"])
            );
            for amount in ["capacity", "allocatable", "available"] {
                let q = &resource["properties"][amount];
                assert_eq!(q["anyOf"], json!([{"type": "integer"}, {"type": "string"}]));
                assert_eq!(q["x-kubernetes-int-or-string"], true);
                assert_eq!(q["pattern"], PUBLISHED_PATTERN);
            }
        }
    }

    /// The bounds narrow the published schema without changing any field's type: the
    /// figures of `limits`, and a 64-zone machine fits.
    #[test]
    fn lists_and_strings_are_bounded() {
        for root in [schema_of("v1alpha1"), schema_of("v1alpha2")] {
            let zones = &root["properties"]["zones"];
            assert_eq!(zones["maxItems"], 128);
            assert_eq!(root["properties"]["topologyPolicies"]["maxItems"], 16);
            let zone = &zones["items"]["properties"];
            assert_eq!(zone["name"], json!({"type": "string", "maxLength": 64}));
            assert_eq!(zone["costs"]["maxItems"], 128);
            assert_eq!(zone["resources"]["maxItems"], 64);
            assert_eq!(zone["attributes"]["maxItems"], 32);
            let resource = &zone["resources"]["items"]["properties"];
            assert_eq!(resource["name"]["maxLength"], 317);
            assert_eq!(resource["available"]["maxLength"], 64);
        }
        assert_eq!(
            schema_of("v1alpha2")["properties"]["attributes"]["maxItems"],
            64
        );
    }
}
