//! One kubelet configuration document (the config file or a drop-in) as JSON, the
//! drop-in files of a directory, and the kubelet's merge of them.
//!
//! The kubelet (`mergeKubeletConfigurations`, cmd/kubelet/app/server.go, 1.34) walks
//! its `--config-dir` recursively in lexical order, takes every regular file whose
//! extension is `.conf`, requires each to declare `apiVersion:
//! kubelet.config.k8s.io/v1beta1` and `kind: KubeletConfiguration`, and applies each as
//! a JSON merge patch (RFC 7386) over the configuration so far: maps merge key by key,
//! any other value (lists included) replaces, `null` removes.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::known_fields::is_known;
use crate::bounded::{self, CONFIG_LIMIT};

/// Extension of the drop-in files the kubelet reads.
pub const DROP_IN_EXTENSION: &str = "conf";
/// The only `apiVersion` a drop-in may declare.
pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
/// The only `kind` a document may declare.
pub const KIND: &str = "KubeletConfiguration";

/// Why a document is not usable.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The file does not exist.
    #[error("not found")]
    NotFound,
    /// The file exists but cannot be read.
    #[error("cannot be read: {0}")]
    Read(io::Error),
    /// Not YAML or JSON.
    #[error("does not parse: {0}")]
    Syntax(String),
    /// A YAML document that is not a mapping of fields.
    #[error("is not a mapping of KubeletConfiguration fields")]
    NotAMapping,
    /// A drop-in without `apiVersion`/`kind`, or with others than the kubelet accepts.
    #[error(
        "declares apiVersion {api_version:?} and kind {kind:?}; the kubelet requires {API_VERSION} and {KIND}"
    )]
    TypeMeta {
        /// As declared (empty when absent).
        api_version: String,
        /// As declared (empty when absent).
        kind: String,
    },
    /// Fields `KubeletConfiguration` does not have: the kubelet ignores them, so they
    /// are most likely misspelt.
    #[error("has fields KubeletConfiguration does not have (the kubelet ignores them): {}", .0.join(", "))]
    UnknownFields(Vec<String>),
}

/// Reads the document at `path` (YAML or JSON) as a JSON object; an empty file is an
/// empty object. A file past [`CONFIG_LIMIT`] is refused.
pub fn read(path: &Path) -> Result<Value, DocumentError> {
    let text = bounded::read_file(path, CONFIG_LIMIT).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => DocumentError::NotFound,
        _ => DocumentError::Read(e),
    })?;
    parse(&text)
}

/// Parses a document (YAML or JSON) as a JSON object.
pub fn parse(text: &str) -> Result<Value, DocumentError> {
    let value: Value =
        serde_norway::from_str(text).map_err(|e| DocumentError::Syntax(e.to_string()))?;
    match value {
        Value::Null => Ok(Value::Object(serde_json::Map::new())),
        Value::Object(_) => Ok(value),
        _ => Err(DocumentError::NotAMapping),
    }
}

/// Checks what the kubelet checks of a drop-in (its `apiVersion` and `kind`) and what
/// it only warns about (unknown fields), for any document when `drop_in` is false.
pub fn check(doc: &Value, drop_in: bool) -> Result<(), DocumentError> {
    let text = |key: &str| doc.get(key).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if drop_in && (api_version != API_VERSION || kind != KIND) {
        return Err(DocumentError::TypeMeta {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        });
    }
    let unknown: Vec<String> = doc
        .as_object()
        .into_iter()
        .flat_map(|fields| fields.keys())
        .filter(|field| !is_known(field))
        .cloned()
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(DocumentError::UnknownFields(unknown))
    }
}

/// The drop-in files under `dir`, recursively, in the order the kubelet applies them
/// (lexical by path, as Go's `filepath.WalkDir` visits them).
pub fn drop_ins(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    walk(dir, &mut found)?;
    Ok(found)
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut entries: Vec<(std::ffi::OsString, PathBuf, std::fs::FileType)> =
        std::fs::read_dir(dir)?
            .map(|entry| {
                let entry = entry?;
                Ok((entry.file_name(), entry.path(), entry.file_type()?))
            })
            .collect::<io::Result<_>>()?;
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, path, file_type) in entries {
        if file_type.is_dir() {
            walk(&path, found)?;
        } else if path.extension().is_some_and(|e| e == DROP_IN_EXTENSION) {
            found.push(path);
        }
    }
    Ok(())
}

/// Applies `patch` over `target` as a JSON merge patch (RFC 7386).
pub fn merge_patch(target: &mut Value, patch: Value) {
    let Value::Object(patch) = patch else {
        *target = patch;
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(fields) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            fields.remove(&key);
        } else {
            merge_patch(fields.entry(key).or_insert(Value::Null), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut doc = json!({
            "topologyManagerPolicy": "best-effort",
            "topologyManagerPolicyOptions": {"a": "1", "b": "2"},
            "clusterDNS": ["10.0.0.10", "10.0.0.11"],
            "cpuManagerPolicy": "static",
        });
        merge_patch(
            &mut doc,
            json!({
                "topologyManagerPolicy": "single-numa-node",
                "topologyManagerPolicyOptions": {"b": null, "c": "3"},
                "clusterDNS": ["10.0.0.12"],
                "cpuManagerPolicy": null,
            }),
        );
        assert_eq!(
            doc,
            json!({
                "topologyManagerPolicy": "single-numa-node",
                "topologyManagerPolicyOptions": {"a": "1", "c": "3"},
                "clusterDNS": ["10.0.0.12"],
            })
        );
    }

    #[test]
    fn drop_ins_are_conf_files_in_lexical_order_recursively() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("15-sub")).unwrap();
        for name in [
            "20-b.conf",
            "10-a.conf",
            "15-sub/01.conf",
            "05-ignored.yaml",
            "30-c.conf.bak",
        ] {
            std::fs::write(root.join(name), "").unwrap();
        }
        let found: Vec<String> = drop_ins(root)
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        assert_eq!(found, ["10-a.conf", "15-sub/01.conf", "20-b.conf"]);
        assert!(drop_ins(&root.join("absent")).is_err());
    }

    #[test]
    fn checks_name_what_is_wrong() {
        let ok = parse("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntopologyManagerPolicy: restricted\n").unwrap();
        check(&ok, true).unwrap();
        let bare = parse("topologyManagerPolicy: restricted\n").unwrap();
        check(&bare, false).unwrap();
        let err = check(&bare, true).unwrap_err().to_string();
        assert!(err.contains("KubeletConfiguration"), "{err}");
        let typo = parse("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntopologyManagerPolcy: restricted\n").unwrap();
        let err = check(&typo, true).unwrap_err().to_string();
        assert!(err.contains("topologyManagerPolcy"), "{err}");
        assert!(matches!(parse("- a list"), Err(DocumentError::NotAMapping)));
        assert!(matches!(parse("a: [1"), Err(DocumentError::Syntax(_))));
        assert_eq!(parse("").unwrap(), json!({}));
    }
}
