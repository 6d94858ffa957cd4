//! A pod's volumes, materialised in its sandbox as the kubelet would.
//!
//! ConfigMap, Secret, downward API and projected volumes (the ServiceAccount token by
//! TokenRequest, bound to the pod, plus `kube-root-ca.crt` and the namespace) are written
//! with the kubelet's atomic-writer layout: the files live in a timestamped directory,
//! `..data` is a symlink to it, and each visible name is a symlink through `..data`, so
//! a refresh swaps one symlink and a reader never sees half an update. [`PodVolumes`]
//! keeps what it wrote and rewrites a volume only when its content changed; the pod
//! worker calls [`PodVolumes::sync`] periodically (ConfigMap edits reach the files, the
//! token is renewed at 80% of its lifetime). `emptyDir` is a directory; `hostPath` maps
//! into the node's own files (see [`super::sandbox::HostPaths`]). Anything else is an
//! error naming the volume and its type.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, Secret, ServiceAccount,
    ServiceAccountTokenProjection, Volume,
};
use kube::api::PostParams;
use kube::{Api, Client};

use super::PodConfigError;
use super::env::field_value;
use super::sandbox::HostPaths;

/// Files of one volume: relative path → (content, mode).
type Files = BTreeMap<String, (Vec<u8>, u32)>;

/// The materialised volumes of one pod.
#[derive(Debug, Default)]
pub struct PodVolumes {
    /// Volume name → its directory or file on the host.
    pub paths: BTreeMap<String, PathBuf>,
    written: BTreeMap<String, Files>,
    token: Option<(String, Instant, Duration)>,
}

impl PodVolumes {
    /// Writes every volume of `pod` under `dir` (first call) or refreshes the ones that
    /// changed.
    pub async fn sync(
        &mut self,
        client: &Client,
        pod: &Pod,
        dir: &Path,
        host: &HostPaths,
    ) -> Result<(), PodConfigError> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let volumes = pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .unwrap_or_default();
        for volume in &volumes {
            let target = dir.join(&volume.name);
            if let Some(h) = &volume.host_path {
                let path = host
                    .resolve(&h.path, h.type_.as_deref().unwrap_or(""))
                    .map_err(|m| PodConfigError::mount(&volume.name, m))?;
                self.paths.insert(volume.name.clone(), path);
                continue;
            }
            if volume.empty_dir.is_some() {
                std::fs::create_dir_all(&target)
                    .map_err(|e| PodConfigError::mount(&volume.name, e.to_string()))?;
                self.paths.insert(volume.name.clone(), target);
                continue;
            }
            let files = self.files(client, pod, &ns, volume).await?;
            if self.written.get(&volume.name) != Some(&files) {
                atomic_write(&target, &files)
                    .map_err(|e| PodConfigError::mount(&volume.name, e.to_string()))?;
                self.written.insert(volume.name.clone(), files);
            }
            self.paths.insert(volume.name.clone(), target);
        }
        Ok(())
    }

    async fn files(
        &mut self,
        client: &Client,
        pod: &Pod,
        ns: &str,
        volume: &Volume,
    ) -> Result<Files, PodConfigError> {
        let name = &volume.name;
        let (sources, mode) = sources(volume)?;
        let mut files = Files::new();
        for source in sources {
            let written = match source {
                Source::Token(t) => self
                    .token(client, pod, ns, t.audience.clone(), t.expiration_seconds)
                    .await
                    .map(|token| {
                        files.insert(t.path.clone(), (token.into_bytes(), mode));
                    }),
                Source::Object {
                    name: object,
                    secret,
                    items,
                    optional,
                } => {
                    object_files(
                        client, ns, object, secret, items, mode, optional, &mut files,
                    )
                    .await
                }
                Source::Downward(items) => downward_files(pod, items, mode, &mut files),
            };
            written.map_err(|m| PodConfigError::mount(name, m))?;
        }
        Ok(files)
    }

    /// The pod's ServiceAccount token, requested again at 80% of its lifetime.
    async fn token(
        &mut self,
        client: &Client,
        pod: &Pod,
        ns: &str,
        audience: Option<String>,
        expiration: Option<i64>,
    ) -> Result<String, String> {
        if let Some((token, at, ttl)) = &self.token
            && at.elapsed() < ttl.mul_f64(0.8)
        {
            return Ok(token.clone());
        }
        let sa = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into());
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: audience.into_iter().collect(),
                expiration_seconds: Some(expiration.unwrap_or(3607)),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: pod.metadata.name.clone(),
                    uid: pod.metadata.uid.clone(),
                }),
            },
            ..TokenRequest::default()
        };
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
        let issued = api
            .create_token_request(&sa, &PostParams::default(), &request)
            .await
            .map_err(|e| format!("requesting a token for ServiceAccount {ns}/{sa}: {e}"))?;
        let status = issued
            .status
            .ok_or("the TokenRequest came back without a token")?;
        let ttl = Duration::from_secs(expiration.unwrap_or(3607).max(600) as u64);
        self.token = Some((status.token.clone(), Instant::now(), ttl));
        Ok(status.token)
    }
}

fn select(
    data: BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    mode: u32,
    what: &str,
    files: &mut Files,
) -> Result<(), String> {
    match items {
        None => files.extend(data.into_iter().map(|(k, v)| (k, (v, mode)))),
        Some(items) => {
            for item in items {
                let value = data
                    .get(&item.key)
                    .ok_or_else(|| format!("{what} has no key {}", item.key))?;
                let mode = item.mode.map_or(mode, |m| m as u32);
                files.insert(item.path.clone(), (value.clone(), mode));
            }
        }
    }
    Ok(())
}

/// One source of a volume's files.
enum Source<'a> {
    Token(&'a ServiceAccountTokenProjection),
    Object {
        name: &'a str,
        secret: bool,
        items: Option<&'a [KeyToPath]>,
        optional: bool,
    },
    Downward(&'a [DownwardAPIVolumeFile]),
}

/// The file sources of a ConfigMap, Secret, downward API or projected volume and its
/// default mode; any other type is unsupported.
fn sources(volume: &Volume) -> Result<(Vec<Source<'_>>, u32), PodConfigError> {
    let mode = |m: Option<i32>| m.map_or(0o644, |m| m as u32);
    if let Some(cm) = &volume.config_map {
        return Ok((
            vec![object(&cm.name, false, &cm.items, cm.optional)],
            mode(cm.default_mode),
        ));
    }
    if let Some(s) = &volume.secret {
        let name = s.secret_name.as_deref().unwrap_or_default();
        return Ok((
            vec![object(name, true, &s.items, s.optional)],
            mode(s.default_mode),
        ));
    }
    if let Some(d) = &volume.downward_api {
        let items = d.items.as_deref().unwrap_or_default();
        return Ok((vec![Source::Downward(items)], mode(d.default_mode)));
    }
    let Some(p) = &volume.projected else {
        let kind = serde_json::to_value(volume)
            .ok()
            .and_then(|v| {
                v.as_object()
                    .and_then(|o| o.keys().find(|k| *k != "name").cloned())
            })
            .unwrap_or_else(|| "unknown".into());
        return Err(PodConfigError::unsupported(&volume.name, &kind));
    };
    let mut out = Vec::new();
    for source in p.sources.iter().flatten() {
        out.push(if let Some(t) = &source.service_account_token {
            Source::Token(t)
        } else if let Some(cm) = &source.config_map {
            object(&cm.name, false, &cm.items, cm.optional)
        } else if let Some(s) = &source.secret {
            object(&s.name, true, &s.items, s.optional)
        } else if let Some(d) = &source.downward_api {
            Source::Downward(d.items.as_deref().unwrap_or_default())
        } else {
            return Err(PodConfigError::unsupported(
                &volume.name,
                "a projected source other than serviceAccountToken, configMap, secret or downwardAPI",
            ));
        });
    }
    Ok((out, mode(p.default_mode)))
}

fn object<'a>(
    name: &'a str,
    secret: bool,
    items: &'a Option<Vec<KeyToPath>>,
    optional: Option<bool>,
) -> Source<'a> {
    Source::Object {
        name,
        secret,
        items: items.as_deref(),
        optional: optional.unwrap_or(false),
    }
}

/// A ConfigMap's or Secret's keys and contents; `None` if it does not exist.
async fn object_data(
    client: &Client,
    ns: &str,
    name: &str,
    secret: bool,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, String> {
    let read = |e: kube::Error| format!("reading {} {ns}/{name}: {e}", kind(secret));
    if secret {
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let found = api.get_opt(name).await.map_err(read)?;
        Ok(found.map(|s| {
            let data = s.data.unwrap_or_default();
            data.into_iter().map(|(k, v)| (k, v.0)).collect()
        }))
    } else {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let found = api.get_opt(name).await.map_err(read)?;
        Ok(found.map(|cm| {
            let text = cm.data.unwrap_or_default().into_iter();
            let binary = cm.binary_data.unwrap_or_default().into_iter();
            text.map(|(k, v)| (k, v.into_bytes()))
                .chain(binary.map(|(k, v)| (k, v.0)))
                .collect()
        }))
    }
}

fn kind(secret: bool) -> &'static str {
    if secret { "secret" } else { "configmap" }
}

/// The files of a ConfigMap (`secret: false`) or Secret volume source.
#[allow(clippy::too_many_arguments)]
async fn object_files(
    client: &Client,
    ns: &str,
    name: &str,
    secret: bool,
    items: Option<&[KeyToPath]>,
    mode: u32,
    optional: bool,
    files: &mut Files,
) -> Result<(), String> {
    let what = format!("{} {ns}/{name}", kind(secret));
    match object_data(client, ns, name, secret).await? {
        Some(data) => select(data, items, mode, &what, files),
        None if optional => Ok(()),
        None => Err(format!("{what} not found")),
    }
}

fn downward_files(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    mode: u32,
    files: &mut Files,
) -> Result<(), String> {
    for item in items {
        let value = match (&item.field_ref, &item.resource_field_ref) {
            (Some(f), _) => field_value(pod, &f.field_path)?,
            (None, Some(r)) => super::env::resource_value(pod, r)?,
            (None, None) => return Err(format!("downward API item {} names no field", item.path)),
        };
        files.insert(
            item.path.clone(),
            (value.into_bytes(), item.mode.map_or(mode, |m| m as u32)),
        );
    }
    Ok(())
}

/// The kubelet's atomic writer: `<dir>/..<stamp>/` holds the files, `<dir>/..data`
/// points at it, `<dir>/<name>` points through `..data`.
fn atomic_write(dir: &Path, files: &Files) -> std::io::Result<()> {
    use std::os::unix::fs::{PermissionsExt, symlink};
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    let stamp = format!(
        "..{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    );
    let data_dir = dir.join(&stamp);
    std::fs::create_dir(&data_dir)?;
    std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(0o755))?;
    for (path, (content, mode)) in files {
        let file = data_dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&file, content)?;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(*mode))?;
    }
    let old = std::fs::read_link(dir.join("..data")).ok();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(&stamp, &tmp)?;
    std::fs::rename(&tmp, dir.join("..data"))?;
    let tops: std::collections::BTreeSet<&str> =
        files.keys().filter_map(|p| p.split('/').next()).collect();
    for top in &tops {
        let link = dir.join(top);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(Path::new("..data").join(top), &link)?;
        }
    }
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !tops.contains(name.as_str()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    if let Some(old) = old
        && old != Path::new(&stamp)
    {
        let _ = std::fs::remove_dir_all(dir.join(old));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_atomic_writer_swaps_content_behind_stable_names() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("v");
        let mut files = Files::new();
        files.insert("a.yaml".into(), (b"one".to_vec(), 0o644));
        files.insert("gone".into(), (b"x".to_vec(), 0o644));
        atomic_write(&target, &files).unwrap();
        assert_eq!(std::fs::read(target.join("a.yaml")).unwrap(), b"one");
        files.insert("a.yaml".into(), (b"two".to_vec(), 0o644));
        files.remove("gone");
        atomic_write(&target, &files).unwrap();
        assert_eq!(std::fs::read(target.join("a.yaml")).unwrap(), b"two");
        assert!(!target.join("gone").exists());
        let stamps = std::fs::read_dir(&target)
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().unwrap().is_dir())
            .count();
        assert_eq!(stamps, 1, "the previous generation is removed");
    }
}
