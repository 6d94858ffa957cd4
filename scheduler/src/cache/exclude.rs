//! [`PodExclusions`]: the pods a node agent leaves out of its fingerprint, as it
//! publishes them in the `nodeTopologyPodsFingerprintExclude` attribute
//! (`namespace/name` globs, `spec.updater.excludePods`). The scheduler leaves the same
//! pods out of the fingerprint it expects, or such a node would never match.

use globset::{Glob, GlobSet, GlobSetBuilder};
use tas_api::nrt::v1alpha2::NodeResourceTopology;

/// The exclusions published with one NRT object.
#[derive(Debug, Default)]
pub(crate) struct PodExclusions(Option<GlobSet>);

impl PodExclusions {
    /// The exclusions `nrt` publishes; none without the attribute. A glob that does not
    /// compile (the updater refuses those) is ignored.
    pub(crate) fn of(nrt: &NodeResourceTopology) -> Self {
        let patterns = nrt.pods_fingerprint_exclude();
        if patterns.is_empty() {
            return Self(None);
        }
        let mut set = GlobSetBuilder::new();
        for pattern in patterns {
            match Glob::new(pattern) {
                Ok(glob) => {
                    set.add(glob);
                }
                Err(error) => {
                    tracing::debug!(pattern, %error, "fingerprint exclusion ignored");
                }
            }
        }
        Self(set.build().ok())
    }

    /// Whether pod `namespace/name` is left out of the fingerprint.
    pub(crate) fn excludes(&self, namespace: &str, name: &str) -> bool {
        self.0
            .as_ref()
            .is_some_and(|set| !set.is_empty() && set.is_match(format!("{namespace}/{name}")))
    }
}
