//! The operator Deployment of config/manager, templatised: what the installer sets on
//! the operator pod becomes a value (images, replicas, resources, placement, pull
//! settings, priority class, extra env, pod labels and annotations), and the
//! Deployment's own settings become those values' defaults ([`OperatorDefaults`]).

use serde_json::{Value, json};

use super::ChartError;
use super::markers::{AGENTS_NS, BLOCK, EXTRA_ENV, IMAGE, LIST, MERGE, OPT, VALUE, WITH};
use super::templatize::IMAGES;

/// Env vars of the operator carrying the operand images.
const IMAGE_ENV: [(&str, &str); 2] = [
    ("TAS_UPDATER_IMAGE", "tas-updater"),
    ("TAS_SCHEDULER_IMAGE", "tas-scheduler"),
];
/// Env vars of the operator holding lists the installer sets, and the value
/// (`.Values.operator.<field>`, a list) each comes from, joined by commas.
const LIST_ENV: [(&str, &str); 2] = [
    ("TAS_ALLOWED_IMAGES", "allowedImages"),
    ("TAS_ALLOWED_TOLERATION_KEYS", "allowedTolerationKeys"),
];
/// Operator pod fields set from values (`.Values.operator.<field>`) as whole blocks.
const BLOCKS: [&str; 2] = ["nodeSelector", "affinity"];
/// Env var of the operator naming the node agents' namespace.
pub const AGENTS_ENV: &str = "TAS_UPDATER_NAMESPACE";

/// The operator Deployment's defaults, which become values.
pub struct OperatorDefaults {
    /// `<registry>` of the three images.
    pub registry: String,
    /// `spec.replicas`.
    pub replicas: Value,
    /// The container's resources.
    pub resources: Value,
    /// The pod's nodeSelector and affinity.
    pub blocks: Vec<(&'static str, Value)>,
    /// allowedImages, allowedTolerationKeys.
    pub lists: Vec<(&'static str, Value)>,
    /// The env var names the Deployment sets (extra env must not repeat them).
    pub env_names: Vec<String>,
}

/// Templatises the operator Deployment `doc` in place; `version` is the images' tag
/// without its `v`.
pub fn templatize(doc: &mut Value, version: &str) -> Result<OperatorDefaults, ChartError> {
    let replicas = std::mem::replace(
        &mut doc["spec"]["replicas"],
        json!(format!("{VALUE}operator.replicas__")),
    );
    let template = &mut doc["spec"]["template"];
    template["metadata"]["labels"][MERGE] = json!("operator.podLabels");
    template["metadata"]["annotations"] = json!(format!("{WITH}operator.podAnnotations__"));
    let pod = &mut template["spec"];
    let mut blocks = Vec::new();
    for field in BLOCKS {
        let value = pod[field].take();
        pod[field] = json!(format!("{BLOCK}operator.{field}__"));
        blocks.push((field, value));
    }
    pod["tolerations"] = json!(format!("{WITH}operator.tolerations__"));
    pod["imagePullSecrets"] = json!(format!("{WITH}operator.imagePullSecrets__"));
    pod["priorityClassName"] = json!(format!("{OPT}operator.priorityClassName__"));
    let container = &mut pod["containers"][0];
    let resources = std::mem::replace(
        &mut container["resources"],
        json!(format!("{BLOCK}operator.resources__")),
    );
    container["imagePullPolicy"] = json!(format!("{OPT}image.pullPolicy__"));
    let mut images = vec![(
        IMAGES[0],
        std::mem::replace(
            &mut container["image"],
            json!(format!("{IMAGE}{}__", IMAGES[0])),
        ),
    )];
    let mut lists = Vec::new();
    let mut agents = false;
    let mut env_names = Vec::new();
    let env = container["env"]
        .as_array_mut()
        .ok_or_else(|| ChartError::Input("the operator container has no env".to_owned()))?;
    for env in env.iter_mut() {
        env_names.push(env["name"].as_str().unwrap_or_default().to_owned());
        if env["name"] == AGENTS_ENV {
            env["value"] = json!(AGENTS_NS);
            agents = true;
        }
        if let Some((_, image)) = IMAGE_ENV.iter().find(|(n, _)| env["name"] == *n) {
            let value = std::mem::replace(&mut env["value"], json!(format!("{IMAGE}{image}__")));
            images.push((image, value));
        }
        if let Some((_, field)) = LIST_ENV.iter().find(|(n, _)| env["name"] == *n) {
            let value = std::mem::replace(
                &mut env["value"],
                json!(format!("{LIST}operator.{field}__")),
            );
            let items: Vec<&str> = value
                .as_str()
                .unwrap_or_default()
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|i| !i.is_empty())
                .collect();
            lists.push((*field, json!(items)));
        }
    }
    env.push(json!({ "name": EXTRA_ENV }));
    if !agents {
        return Err(ChartError::Input(format!(
            "the operator Deployment has no {AGENTS_ENV} env var"
        )));
    }
    if let Some((name, _)) = LIST_ENV
        .iter()
        .find(|(_, field)| !lists.iter().any(|(f, _)| f == field))
    {
        return Err(ChartError::Input(format!(
            "the operator Deployment has no {name} env var"
        )));
    }
    Ok(OperatorDefaults {
        registry: registry(&images, version)?,
        replicas,
        resources,
        blocks,
        lists,
        env_names,
    })
}

/// The one registry of the three images, each `<registry>/<name>:v<version>`.
fn registry(images: &[(&str, Value)], version: &str) -> Result<String, ChartError> {
    let tag = format!("v{version}");
    let mut registry = None;
    for name in IMAGES {
        let image = images
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.as_str())
            .ok_or_else(|| {
                ChartError::Input(format!("the operator Deployment names no {name} image"))
            })?;
        let prefix = image
            .strip_suffix(&format!("/{name}:{tag}"))
            .ok_or_else(|| {
                ChartError::Input(format!("image {image} is not <registry>/{name}:{tag}"))
            })?;
        if registry.is_some_and(|r| r != prefix) {
            return Err(ChartError::Input(format!(
                "image {image}: the three images differ in registry"
            )));
        }
        registry = Some(prefix);
    }
    Ok(registry.unwrap_or_default().to_owned())
}
