//! `tas-operator render`: every object the operator would apply for a
//! TopologyAwareScheduling manifest, as a YAML stream, without a cluster.
//!
//! For GitOps review: diff the rendered stream between two versions of the CR or of the
//! operator. The manifest is read into the typed CR first, which fills in the same
//! defaults the CRD schema gives on `kubectl apply`, then validated as the operator
//! validates it, offline ([`crate::validate`]: without the nodes, so overlapping node
//! groups are not seen; field formats are left to the API server's schema). Without a uid there are no owner
//! references, and the namespace carries no creation mark; everything else is what the
//! operator applies.

use crate::desired::{self, BuildContext, BuildError};
use crate::validate::{ValidationError, validate};
use tas_api::tas::TopologyAwareScheduling;

/// Why a manifest could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The manifest is not a TopologyAwareScheduling object.
    #[error("reading the TopologyAwareScheduling manifest: {0}")]
    Parse(#[source] serde_norway::Error),
    /// The operator would refuse the object (or the API server its name).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The builders failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// An object could not be written as YAML.
    #[error("writing {kind} {name} as YAML: {source}")]
    Yaml {
        /// Kind of the object.
        kind: String,
        /// Its name.
        name: String,
        /// The serialiser's error.
        #[source]
        source: serde_norway::Error,
    },
}

/// The desired objects of the CR in `manifest`, in apply order, as `---`-separated YAML.
pub fn render(manifest: &str, ctx: &BuildContext) -> Result<String, RenderError> {
    let cr: TopologyAwareScheduling =
        serde_norway::from_str(manifest).map_err(RenderError::Parse)?;
    let mut out = String::new();
    // Offline: no nodes, so no overlap check.
    let valid = validate(&cr, ctx, None)?;
    for obj in desired::build(&valid)?.into_api_objects()? {
        let yaml = serde_norway::to_string(&obj.value).map_err(|source| RenderError::Yaml {
            kind: obj.resource.kind.clone(),
            name: obj.name.clone(),
            source,
        })?;
        out.push_str("---\n");
        out.push_str(&yaml);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    fn sample() -> String {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../config/samples/tas_v1alpha1_topologyawarescheduling.yaml"
        );
        std::fs::read_to_string(path).expect("the sample CR is readable")
    }

    fn images() -> BuildContext {
        BuildContext {
            updater_image_default: Some("registry.example/updater:1".into()),
            scheduler_image_default: Some("registry.example/scheduler:1".into()),
            ..BuildContext::default()
        }
    }

    #[test]
    fn the_sample_renders_every_object_in_apply_order() {
        let yaml = render(&sample(), &images()).unwrap();
        let kinds: Vec<String> = serde_norway::Deserializer::from_str(&yaml)
            .map(|doc| {
                let v = serde_json::Value::deserialize(doc).unwrap();
                format!(
                    "{}/{}",
                    v["kind"].as_str().unwrap(),
                    v["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            kinds.first().map(String::as_str),
            Some("Namespace/tas-system")
        );
        assert_eq!(
            kinds[1],
            "CustomResourceDefinition/noderesourcetopologies.topology.node.k8s.io"
        );
        assert!(
            kinds.contains(&"DaemonSet/tas-updater-numa-workers".to_owned()),
            "{kinds:?}"
        );
        assert_eq!(
            kinds.last().map(String::as_str),
            Some("Deployment/tas-scheduler")
        );
        assert!(!yaml.contains("ownerReferences"), "no uid offline");
    }

    #[test]
    fn errors_say_what_to_fix() {
        let err = render(&sample(), &BuildContext::default()).unwrap_err();
        assert!(err.to_string().contains("--updater-image"), "{err}");
        let err = render("kind: [", &images()).unwrap_err();
        assert!(matches!(err, RenderError::Parse(_)));
    }

    /// The API server refuses any other name (a CEL rule), so render does too.
    #[test]
    fn a_name_other_than_default_is_refused() {
        let manifest = sample().replace("name: default", "name: production");
        assert_ne!(manifest, sample(), "the sample names its object 'default'");
        let err = render(&manifest, &images()).unwrap_err();
        assert!(
            matches!(err, RenderError::Invalid(ValidationError::WrongName { .. })),
            "{err:?}"
        );
        assert!(err.to_string().contains("must be 'default'"), "{err}");
    }

    /// Offline, nothing checks the CRD's rules: render re-checks the host paths, so a
    /// manifest naming `/` for a group's pod-resources directory renders nothing.
    #[test]
    fn a_hostile_host_path_is_refused_offline() {
        let manifest = sample().replace(
            "tas.dev/numa: \"true\"",
            "tas.dev/numa: \"true\"\n    updater:\n      kubelet:\n        podResourcesDir: /",
        );
        assert_ne!(manifest, sample(), "the sample has a numa-workers group");
        let err = render(&manifest, &images()).unwrap_err();
        assert!(
            matches!(
                err,
                RenderError::Invalid(ValidationError::HostPathNotAllowed { .. })
            ),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("spec.nodeGroups[0].updater.kubelet.podResourcesDir: \"/\""),
            "{err}"
        );
    }
}
