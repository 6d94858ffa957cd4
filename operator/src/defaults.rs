//! The operand images the operator runs when neither the TopologyAwareScheduling
//! object nor the installer's `--updater-image` / `--scheduler-image` names one: those
//! of the release the operator was built from, `v` + the crate version, so a new
//! release never runs the operands of an older one.

/// Where the release images live.
pub const IMAGE_REPOSITORY: &str = "ghcr.io/tas-dev";
/// The release images' tag: `v` + the workspace version.
pub const IMAGE_TAG: &str = concat!("v", env!("CARGO_PKG_VERSION"));
/// The node agent image of this release.
pub const UPDATER_IMAGE: &str = concat!("ghcr.io/tas-dev/tas-updater:v", env!("CARGO_PKG_VERSION"));
/// The scheduler image of this release.
pub const SCHEDULER_IMAGE: &str =
    concat!("ghcr.io/tas-dev/tas-scheduler:v", env!("CARGO_PKG_VERSION"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_images_follow_the_crate_version() {
        let tag = format!("v{}", env!("CARGO_PKG_VERSION"));
        assert_eq!(IMAGE_TAG, tag);
        assert_eq!(
            UPDATER_IMAGE,
            format!("{IMAGE_REPOSITORY}/tas-updater:{tag}")
        );
        assert_eq!(
            SCHEDULER_IMAGE,
            format!("{IMAGE_REPOSITORY}/tas-scheduler:{tag}")
        );
        // What config/manager installs carries the same tag (e2e/tests/install.rs checks
        // the rendered Deployment too).
        let kustomization = include_str!("../../config/manager/kustomization.yaml");
        let tags: Vec<&str> = kustomization
            .lines()
            .filter_map(|l| l.trim().strip_prefix("newTag:"))
            .map(str::trim)
            .collect();
        assert_eq!(tags, [tag.as_str(); 3], "{kustomization}");
    }
}
