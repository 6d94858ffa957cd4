//! Installing CustomResourceDefinitions from manifests, as a cluster admin would.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde::Deserialize;

use crate::{Error, wait_for};

/// Field manager of everything the harness applies.
pub const FIELD_MANAGER: &str = "tas-testcluster";

/// How long a CRD may take to become Established.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);

/// The repository's generated CRD manifests, `config/crd/`.
pub fn crd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/crd")
}

/// Reads every CRD in the `*.yaml` / `*.yml` files of `dir` (several documents per
/// file allowed), in file-name order.
pub fn read_crds(dir: &Path) -> Result<Vec<CustomResourceDefinition>, Error> {
    let entries =
        std::fs::read_dir(dir).map_err(Error::io(format!("listing {}", dir.display())))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(Error::io(format!("listing {}", dir.display())))?
            .path();
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            files.push(path);
        }
    }
    files.sort();

    let mut crds = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .map_err(Error::io(format!("reading {}", path.display())))?;
        for document in serde_norway::Deserializer::from_str(&text) {
            let value = serde_json::Value::deserialize(document).map_err(|source| Error::Yaml {
                path: path.clone(),
                source,
            })?;
            if value.is_null() {
                continue; // An empty document, e.g. after a trailing `---`.
            }
            let crd = serde_json::from_value(value).map_err(|source| Error::Manifest {
                path: path.clone(),
                source,
            })?;
            crds.push(crd);
        }
    }
    if crds.is_empty() {
        return Err(Error::NoManifests(dir.to_path_buf()));
    }
    Ok(crds)
}

/// Server-side applies every CRD in `dir` (see [`read_crds`]) and waits until each is
/// Established, i.e. served. Returns the CRD names.
pub async fn apply_crds_from_dir(client: &Client, dir: &Path) -> Result<Vec<String>, Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::new();
    for crd in read_crds(dir)? {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd)).await?;
        names.push(name);
    }
    for name in &names {
        wait_for(
            format!("CRD {name} to be Established"),
            ESTABLISH_TIMEOUT,
            || async {
                let crd = api.get(name).await?;
                Ok::<_, kube::Error>(is_established(&crd).then_some(()))
            },
        )
        .await?;
    }
    Ok(names)
}

fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object}
";

    #[test]
    fn reads_multi_document_files_and_skips_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let two = format!(
            "# generated\n{CRD}---\n{}---\n",
            CRD.replace("widgets", "gadgets")
        );
        std::fs::write(dir.path().join("a.yaml"), two).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not yaml: [").unwrap();
        let names: Vec<_> = read_crds(dir.path())
            .unwrap()
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect();
        assert_eq!(names, ["widgets.example.com", "gadgets.example.com"]);
    }

    #[test]
    fn empty_dir_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(read_crds(dir.path()), Err(Error::NoManifests(_))));
    }
}
