//! What the installer decides and the object only picks among: host paths, images and
//! tolerations; and the operands' confinement, which no pod annotation may loosen.
//!
//! The node agent runs as root with host directories mounted, and the scheduler may bind
//! and evict any pod; so editing the object must not choose what they run, what they see
//! of the host or where they run. Every host path the object names is checked against
//! the allow-list the CRD's CEL rules also use ([`tas_api::tas::host_paths`]), every
//! image against the operator's allowed set, every toleration against its allowed taint
//! keys — wherever the field appears (shared settings, each node group, the scheduler),
//! so an object stored before a rule existed, written around the CRD or rendered offline
//! is refused the same way, with the field named.

use super::ValidationError;
use super::images::ImageRef;
use crate::desired::BuildContext;
use k8s_openapi::api::core::v1::Toleration;
use std::collections::BTreeMap;
use tas_api::tas::{
    HostPathRule, KubeletOverride, KubeletPaths, TopologyAwareScheduling, is_security_annotation,
};

/// `*` in `--allowed-toleration-keys`: any toleration, also one without a key.
pub const ANY_TOLERATION: &str = "*";

/// Checks every host path, image and toleration of `cr` against the allow-lists.
pub(super) fn check(
    cr: &TopologyAwareScheduling,
    ctx: &BuildContext,
) -> Result<(), ValidationError> {
    let spec = &cr.spec;
    shared_paths(&spec.updater.kubelet)?;
    annotations("spec.updater.podAnnotations", &spec.updater.pod_annotations)?;
    image(ctx, "spec.updater.image", spec.updater.image.as_deref())?;
    tolerations(ctx, "spec.updater.tolerations", &spec.updater.tolerations)?;
    for (i, group) in spec.node_groups.iter().enumerate() {
        let Some(over) = &group.updater else {
            continue;
        };
        let at = format!("spec.nodeGroups[{i}].updater");
        if let Some(k) = &over.kubelet {
            group_paths(&format!("{at}.kubelet"), k)?;
        }
        if let Some(a) = &over.pod_annotations {
            annotations(&format!("{at}.podAnnotations"), a)?;
        }
        image(ctx, &format!("{at}.image"), over.image.as_deref())?;
        if let Some(t) = &over.tolerations {
            tolerations(ctx, &format!("{at}.tolerations"), t)?;
        }
    }
    annotations(
        "spec.scheduler.podAnnotations",
        &spec.scheduler.pod_annotations,
    )?;
    image(ctx, "spec.scheduler.image", spec.scheduler.image.as_deref())?;
    tolerations(
        ctx,
        "spec.scheduler.tolerations",
        &spec.scheduler.tolerations,
    )
}

fn shared_paths(k: &KubeletPaths) -> Result<(), ValidationError> {
    let at = "spec.updater.kubelet";
    path(
        at,
        HostPathRule::PodResourcesDir,
        Some(&k.pod_resources_dir),
    )?;
    path(at, HostPathRule::ConfigFile, Some(&k.config_file))?;
    path(at, HostPathRule::ConfigDir, k.config_dir.as_ref())
}

fn group_paths(at: &str, k: &KubeletOverride) -> Result<(), ValidationError> {
    path(
        at,
        HostPathRule::PodResourcesDir,
        k.pod_resources_dir.as_ref(),
    )?;
    path(at, HostPathRule::ConfigFile, k.config_file.as_ref())?;
    path(at, HostPathRule::ConfigDir, k.config_dir.as_ref())
}

fn path(at: &str, rule: HostPathRule, value: Option<&String>) -> Result<(), ValidationError> {
    let Some(value) = value else {
        return Ok(());
    };
    rule.check(value)
        .map_err(|error| ValidationError::HostPathNotAllowed {
            field: format!("{at}.{}", rule.field()),
            error,
        })
}

/// No annotation that loosens the pods' AppArmor or seccomp confinement.
fn annotations(at: &str, map: &BTreeMap<String, String>) -> Result<(), ValidationError> {
    match map.keys().find(|k| is_security_annotation(k)) {
        Some(key) => Err(ValidationError::AnnotationNotAllowed {
            field: at.to_owned(),
            key: key.clone(),
        }),
        None => Ok(()),
    }
}

/// The images the object may name: the operator's defaults and `--allowed-images`.
pub fn allowed_images(ctx: &BuildContext) -> Vec<String> {
    let mut all: Vec<String> = [&ctx.updater_image_default, &ctx.scheduler_image_default]
        .into_iter()
        .flatten()
        .chain(&ctx.allowed_images)
        .filter(|i| !i.is_empty())
        .cloned()
        .collect();
    all.sort();
    all.dedup();
    all
}

fn image(ctx: &BuildContext, field: &str, value: Option<&str>) -> Result<(), ValidationError> {
    // Unset or empty: the operator's default, or MissingImage (validate's own check).
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    let refused = |why: String| ValidationError::ImageNotAllowed {
        field: field.to_owned(),
        image: value.to_owned(),
        why,
        allowed: allowed_images(ctx),
    };
    ImageRef::parse(value).map_err(|e| refused(format!("it is not an image reference: {e}")))?;
    if !allowed_images(ctx).iter().any(|a| a == value) {
        return Err(refused(
            "it is not one of the images this operator's install allows".to_owned(),
        ));
    }
    Ok(())
}

fn tolerations(ctx: &BuildContext, at: &str, list: &[Toleration]) -> Result<(), ValidationError> {
    let keys = &ctx.allowed_toleration_keys;
    if keys.iter().any(|k| k == ANY_TOLERATION) {
        return Ok(());
    }
    for (i, t) in list.iter().enumerate() {
        let key = t.key.as_deref().unwrap_or_default();
        if key.is_empty() || !keys.iter().any(|k| k == key) {
            return Err(ValidationError::TolerationNotAllowed {
                field: format!("{at}[{i}]"),
                key: key.to_owned(),
                allowed: keys.clone(),
            });
        }
    }
    Ok(())
}

/// The `--allowed-toleration-keys` list (`TAS_ALLOWED_TOLERATION_KEYS`): taint keys
/// separated by commas and/or whitespace, `*` for any.
pub fn parse_toleration_keys(list: &str) -> Vec<String> {
    list.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests;
