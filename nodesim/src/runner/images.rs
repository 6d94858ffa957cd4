//! Which pods the runner runs, and with which binary.
//!
//! An image is TAS's when its name (the last path segment, without tag or digest) starts
//! with `tas-`, whatever the registry and tag: `ghcr.io/tas-dev/tas-updater:v0.1.0` and
//! `registry.invalid/tas-updater:e2e` both run the `tas-updater` binary cargo built.
//! kwok's stages leave pods with such images alone (see the test cluster's
//! `kwok/stages.yaml`), so the runner owns them; a `tas-` image with no binary is the
//! runner's `ErrImagePull`. The binary is placed at `/usr/local/bin/<name>` inside the
//! pod's root, where the image's `ENTRYPOINT` (see the Dockerfile) expects it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

/// The operand and operator images, by name.
pub const TAS_IMAGES: [&str; 3] = ["tas-operator", "tas-scheduler", "tas-updater"];

/// The name of an image reference: `reg:5000/a/tas-x:tag@sha256:..` → `tas-x`.
pub fn image_name(image: &str) -> &str {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last.split(':').next().unwrap_or(last)
}

/// Whether the runner owns `pod` (any container runs a `tas-` image).
pub fn is_runner_pod(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(|s| {
        s.containers.iter().any(|c| {
            c.image
                .as_deref()
                .is_some_and(|i| image_name(i).starts_with("tas-"))
        })
    })
}

/// Binaries by image name.
#[derive(Debug, Clone, Default)]
pub struct Images {
    binaries: BTreeMap<String, PathBuf>,
}

impl Images {
    /// An explicit mapping, image name → binary.
    pub fn new(binaries: BTreeMap<String, PathBuf>) -> Self {
        Self { binaries }
    }

    /// TAS's binaries from cargo's target directory of the running executable: a test
    /// binary lives in `target/<profile>/deps/`, a binary in `target/<profile>/`; the
    /// operands are in `target/<profile>/`. Missing ones are left out (their pods get
    /// `ErrImagePull` naming the `cargo build` to run).
    pub fn from_target_dir() -> Self {
        let exe = std::env::current_exe().unwrap_or_default();
        let mut dirs: Vec<&Path> = exe.ancestors().skip(1).take(2).collect();
        dirs.retain(|d| !d.as_os_str().is_empty());
        let mut binaries = BTreeMap::new();
        for name in TAS_IMAGES {
            if let Some(path) = dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) {
                binaries.insert(name.to_owned(), path);
            }
        }
        Self { binaries }
    }

    /// The binary for `image`, or the `ErrImagePull` message.
    pub fn binary(&self, image: &str) -> Result<(&str, &Path), String> {
        let name = image_name(image);
        match self.binaries.get_key_value(name) {
            Some((name, path)) => Ok((name.as_str(), path.as_path())),
            None if TAS_IMAGES.contains(&name) => Err(format!(
                "image {image}: no {name} binary was built (run `cargo build -p {name}`)"
            )),
            None => Err(format!(
                "image {image} is not one the pod runner knows (it runs {})",
                TAS_IMAGES.join(", ")
            )),
        }
    }

    /// The image names it can run.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.binaries.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_ignore_registry_tag_and_digest() {
        for (image, name) in [
            ("ghcr.io/tas-dev/tas-updater:v0.1.0", "tas-updater"),
            ("registry.invalid:5000/tas-scheduler:e2e", "tas-scheduler"),
            ("tas-operator", "tas-operator"),
            ("r/tas-operator@sha256:abc", "tas-operator"),
            ("nginx:1.27", "nginx"),
        ] {
            assert_eq!(image_name(image), name, "{image}");
        }
    }

    #[test]
    fn unknown_images_say_what_the_runner_runs() {
        let images = Images::new(BTreeMap::from([(
            "tas-updater".to_owned(),
            PathBuf::from("/bin/true"),
        )]));
        assert!(images.binary("x/tas-updater:1").is_ok());
        let err = images.binary("x/tas-frobnicator:1").unwrap_err();
        assert!(err.contains("not one the pod runner knows"), "{err}");
        let err = images.binary("x/tas-scheduler:1").unwrap_err();
        assert!(err.contains("cargo build -p tas-scheduler"), "{err}");
    }
}
