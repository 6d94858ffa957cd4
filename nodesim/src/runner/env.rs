//! A container's environment as the kubelet builds it: `envFrom` (ConfigMaps, Secrets,
//! with prefixes), then `env` in order with `$(VAR)` references to earlier variables
//! expanded, downward-API `fieldRef`s (names, namespace, uid, labels, annotations, node
//! name, ServiceAccount, host and pod IPs) and `resourceFieldRef`s, plus the
//! `KUBERNETES_SERVICE_*` variables of the API server's Service. A missing ConfigMap,
//! Secret or key is a [`PodConfigError`] with reason `CreateContainerConfigError`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, ResourceFieldSelector, Secret};
use kube::{Api, Client};

use super::PodConfigError;

/// A downward-API field of `pod`.
pub fn field_value(pod: &Pod, path: &str) -> Result<String, String> {
    let meta = &pod.metadata;
    let status = pod.status.as_ref();
    let spec = pod.spec.as_ref();
    let map_entry = |map: &Option<BTreeMap<String, String>>, rest: &str| {
        let key = rest.trim_start_matches("['").trim_end_matches("']");
        map.as_ref()
            .and_then(|m| m.get(key).cloned())
            .unwrap_or_default()
    };
    let joined = |m: &Option<BTreeMap<String, String>>| {
        m.iter()
            .flatten()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => joined(&meta.labels),
        "metadata.annotations" => joined(&meta.annotations),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => {
            status.and_then(|s| s.host_ip.clone()).unwrap_or_default()
        }
        "status.podIP" | "status.podIPs" => {
            status.and_then(|s| s.pod_ip.clone()).unwrap_or_default()
        }
        p if p.starts_with("metadata.labels[") => map_entry(&meta.labels, &p[15..]),
        p if p.starts_with("metadata.annotations[") => map_entry(&meta.annotations, &p[20..]),
        other => return Err(format!("unsupported fieldRef {other}")),
    })
}

/// A `resourceFieldRef` (cpu in whole units rounded up, memory in bytes, by divisor).
pub fn resource_value(pod: &Pod, selector: &ResourceFieldSelector) -> Result<String, String> {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let container = match &selector.container_name {
        Some(name) => containers.iter().find(|c| &c.name == name),
        None => containers.first(),
    }
    .ok_or_else(|| format!("resourceFieldRef {}: no such container", selector.resource))?;
    let (bucket, resource) = selector
        .resource
        .split_once('.')
        .ok_or_else(|| format!("unsupported resourceFieldRef {}", selector.resource))?;
    let resources = container.resources.clone().unwrap_or_default();
    let list = if bucket == "limits" {
        resources.limits
    } else {
        resources.requests
    };
    let Some(q) = list.and_then(|l| l.get(resource).cloned()) else {
        return Ok("0".into());
    };
    let milli = tas_api::quantity::parse_milli(&q.0).map_err(|e| e.to_string())?;
    let divisor = match &selector.divisor {
        Some(d) => tas_api::quantity::parse_milli(&d.0).map_err(|e| e.to_string())?,
        None => 1000,
    }
    .max(1);
    Ok(((milli + divisor - 1) / divisor).to_string())
}

/// Expands `$(NAME)` with earlier variables (`$$(` escapes), as the kubelet does;
/// unknown references stay as written.
pub fn expand(input: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(t) = tail.strip_prefix("$$") {
            out.push('$');
            rest = t;
        } else if let Some(t) = tail.strip_prefix("$(")
            && let Some(end) = t.find(')')
        {
            match vars.get(&t[..end]) {
                Some(v) => out.push_str(v),
                None => out.push_str(&tail[..end + 3]),
            }
            rest = &t[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

fn config_error(message: String) -> PodConfigError {
    PodConfigError::new("CreateContainerConfigError", message)
}

async fn config_map(
    client: &Client,
    ns: &str,
    name: &str,
) -> Result<Option<ConfigMap>, PodConfigError> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| config_error(format!("reading configmap {ns}/{name}: {e}")))
}

async fn secret(client: &Client, ns: &str, name: &str) -> Result<Option<Secret>, PodConfigError> {
    Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| config_error(format!("reading secret {ns}/{name}: {e}")))
}

/// The environment of `container` in `pod`, in the kubelet's order.
pub async fn resolve(
    client: &Client,
    pod: &Pod,
    container: &Container,
    service_host: &str,
    service_port: u16,
) -> Result<Vec<(String, String)>, PodConfigError> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut set = |vars: &mut BTreeMap<String, String>, k: String, v: String| {
        if !vars.contains_key(&k) {
            order.push(k.clone());
        }
        vars.insert(k, v);
    };
    let service = [
        ("KUBERNETES_SERVICE_HOST", service_host.to_owned()),
        ("KUBERNETES_SERVICE_PORT", service_port.to_string()),
        ("KUBERNETES_SERVICE_PORT_HTTPS", service_port.to_string()),
        (
            "KUBERNETES_PORT",
            format!("tcp://{service_host}:{service_port}"),
        ),
    ];
    for (k, v) in service {
        set(&mut vars, k.to_owned(), v);
    }
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        if let Some(r) = &from.config_map_ref {
            match config_map(client, &ns, &r.name).await? {
                Some(cm) => {
                    for (k, v) in cm.data.unwrap_or_default() {
                        set(&mut vars, format!("{prefix}{k}"), v);
                    }
                }
                None if r.optional.unwrap_or(false) => {}
                None => return Err(config_error(format!("configmap \"{}\" not found", r.name))),
            }
        }
        if let Some(r) = &from.secret_ref {
            match secret(client, &ns, &r.name).await? {
                Some(s) => {
                    for (k, v) in s.data.unwrap_or_default() {
                        set(
                            &mut vars,
                            format!("{prefix}{k}"),
                            String::from_utf8_lossy(&v.0).into_owned(),
                        );
                    }
                }
                None if r.optional.unwrap_or(false) => {}
                None => return Err(config_error(format!("secret \"{}\" not found", r.name))),
            }
        }
    }
    for var in container.env.iter().flatten() {
        let value = match &var.value_from {
            None => expand(var.value.as_deref().unwrap_or(""), &vars),
            Some(from) => {
                if let Some(f) = &from.field_ref {
                    field_value(pod, &f.field_path).map_err(config_error)?
                } else if let Some(r) = &from.resource_field_ref {
                    resource_value(pod, r).map_err(config_error)?
                } else if let Some(k) = &from.config_map_key_ref {
                    let cm = config_map(client, &ns, &k.name).await?;
                    match cm.and_then(|c| c.data).and_then(|d| d.get(&k.key).cloned()) {
                        Some(v) => v,
                        None if k.optional.unwrap_or(false) => continue,
                        None => {
                            return Err(config_error(format!(
                                "couldn't find key {} in ConfigMap {ns}/{}",
                                k.key, k.name
                            )));
                        }
                    }
                } else if let Some(k) = &from.secret_key_ref {
                    let s = secret(client, &ns, &k.name).await?;
                    match s.and_then(|c| c.data).and_then(|d| d.get(&k.key).cloned()) {
                        Some(v) => String::from_utf8_lossy(&v.0).into_owned(),
                        None if k.optional.unwrap_or(false) => continue,
                        None => {
                            return Err(config_error(format!(
                                "couldn't find key {} in Secret {ns}/{}",
                                k.key, k.name
                            )));
                        }
                    }
                } else {
                    return Err(config_error(format!(
                        "env {}: unsupported valueFrom",
                        var.name
                    )));
                }
            }
        };
        set(&mut vars, var.name.clone(), value);
    }
    Ok(order
        .into_iter()
        .filter_map(|k| vars.get(&k).map(|v| (k, v.clone())))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_expand_like_the_kubelet() {
        let vars = BTreeMap::from([("A".to_owned(), "x".to_owned())]);
        assert_eq!(expand("--a=$(A)", &vars), "--a=x");
        assert_eq!(expand("$(B)/$$(A)$", &vars), "$(B)/$(A)$");
    }

    #[test]
    fn downward_fields_of_a_pod() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "n", "labels": {"app": "a"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c",
                "resources": {"limits": {"memory": "1Mi", "cpu": "1500m"}}}]},
            "status": {"podIP": "10.1.2.3"}
        }))
        .unwrap();
        assert_eq!(field_value(&pod, "spec.nodeName").unwrap(), "node-1");
        assert_eq!(field_value(&pod, "metadata.labels['app']").unwrap(), "a");
        assert_eq!(field_value(&pod, "status.podIP").unwrap(), "10.1.2.3");
        assert!(field_value(&pod, "spec.bogus").is_err());
        let mem = ResourceFieldSelector {
            resource: "limits.memory".into(),
            ..Default::default()
        };
        assert_eq!(resource_value(&pod, &mem).unwrap(), "1048576");
        let cpu = ResourceFieldSelector {
            resource: "limits.cpu".into(),
            ..Default::default()
        };
        assert_eq!(resource_value(&pod, &cpu).unwrap(), "2");
    }
}
