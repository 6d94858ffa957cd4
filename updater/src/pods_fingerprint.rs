//! Which pods the published fingerprint covers: every pod the kubelet reports, or only
//! those holding exclusive resources; minus pods excluded by `namespace/name` globs.

use crate::podresources::v1::PodResources;
use globset::{Glob, GlobSet, GlobSetBuilder};
use tas_api::fingerprint::{Fingerprint, Method};

/// A bad `--exclude-pods` entry.
#[derive(Debug, thiserror::Error)]
pub enum ExcludeError {
    /// Not of the form `namespace/name`.
    #[error(
        "pod exclude {0:?} must look like 'namespace/name' (globs allowed), e.g. 'kube-system/*'"
    )]
    Shape(String),
    /// Not a valid glob.
    #[error("pod exclude {pattern:?} is not a valid glob: {source}")]
    Glob {
        pattern: String,
        #[source]
        source: globset::Error,
    },
}

/// The fingerprint settings of the agent.
#[derive(Debug, Clone)]
pub struct FingerprintPolicy {
    method: Option<Method>,
    exclude: GlobSet,
    patterns: Vec<String>,
}

impl FingerprintPolicy {
    /// `method: None` publishes no fingerprint.
    pub fn new(method: Option<Method>, exclude_list: &[String]) -> Result<Self, ExcludeError> {
        let mut set = GlobSetBuilder::new();
        for pattern in exclude_list {
            let mut parts = pattern.split('/');
            let (Some(ns), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(ExcludeError::Shape(pattern.clone()));
            };
            if ns.is_empty() || name.is_empty() || pattern.contains(char::is_whitespace) {
                return Err(ExcludeError::Shape(pattern.clone()));
            }
            let glob = Glob::new(pattern).map_err(|source| ExcludeError::Glob {
                pattern: pattern.clone(),
                source,
            })?;
            set.add(glob);
        }
        let exclude = set.build().map_err(|source| ExcludeError::Glob {
            pattern: exclude_list.join(","),
            source,
        })?;
        Ok(Self {
            method,
            exclude,
            patterns: exclude_list.to_vec(),
        })
    }

    /// The value of the `nodeTopologyPodsFingerprintExclude` attribute: the exclude
    /// globs separated by spaces, `None` without a fingerprint or without excludes. The
    /// scheduler leaves the same pods out of the fingerprint it computes.
    pub fn exclude_attribute(&self) -> Option<String> {
        (self.method.is_some() && !self.patterns.is_empty()).then(|| self.patterns.join(" "))
    }

    /// The method published alongside the fingerprint, if any.
    pub fn method(&self) -> Option<Method> {
        self.method
    }

    /// Whether a pod counts in the fingerprint.
    pub fn covers(&self, pod: &PodResources) -> bool {
        let Some(method) = self.method else {
            return false;
        };
        if !self.exclude.is_empty()
            && self
                .exclude
                .is_match(format!("{}/{}", pod.namespace, pod.name))
        {
            return false;
        }
        match method {
            Method::All => true,
            Method::WithExclusiveResources => crate::accounting::holds_exclusive_resources(pod),
        }
    }

    /// The fingerprint of the covered pods, or `None` when disabled.
    pub fn compute(&self, pods: &[PodResources]) -> Option<String> {
        self.method?;
        let mut fp = Fingerprint::with_capacity(pods.len());
        for pod in pods.iter().filter(|p| self.covers(p)) {
            fp.add(&pod.namespace, &pod.name);
        }
        Some(fp.sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podresources::v1::ContainerResources;

    fn pod(ns: &str, name: &str, cpus: &[i64]) -> PodResources {
        PodResources {
            name: name.into(),
            namespace: ns.into(),
            containers: vec![ContainerResources {
                name: "c".into(),
                cpu_ids: cpus.to_vec(),
                ..Default::default()
            }],
        }
    }

    #[test]
    fn all_covers_every_pod_but_the_excluded() {
        let p = FingerprintPolicy::new(Some(Method::All), &["kube-system/*".into()]).unwrap();
        let pods = [pod("default", "a", &[]), pod("kube-system", "dns", &[])];
        assert_eq!(
            p.compute(&pods),
            Some(tas_api::fingerprint::compute([("default", "a")]))
        );
    }

    #[test]
    fn excludes_are_published_for_the_scheduler() {
        let ex = [
            "kube-system/*".to_owned(),
            "monitoring/node-{a,b}".to_owned(),
        ];
        let p = FingerprintPolicy::new(Some(Method::All), &ex).unwrap();
        assert_eq!(
            p.exclude_attribute().as_deref(),
            Some("kube-system/* monitoring/node-{a,b}")
        );
        assert_eq!(
            FingerprintPolicy::new(Some(Method::All), &[])
                .unwrap()
                .exclude_attribute(),
            None
        );
        assert_eq!(
            FingerprintPolicy::new(None, &ex)
                .unwrap()
                .exclude_attribute(),
            None
        );
    }

    #[test]
    fn exclusive_method_covers_only_pinned_pods() {
        let p = FingerprintPolicy::new(Some(Method::WithExclusiveResources), &[]).unwrap();
        let pods = [
            pod("default", "shared", &[]),
            pod("default", "pinned", &[2, 3]),
        ];
        assert_eq!(
            p.compute(&pods),
            Some(tas_api::fingerprint::compute([("default", "pinned")]))
        );
    }

    #[test]
    fn disabled_publishes_nothing() {
        let p = FingerprintPolicy::new(None, &[]).unwrap();
        assert_eq!(p.compute(&[pod("a", "b", &[1])]), None);
    }

    #[test]
    fn malformed_excludes_are_refused() {
        for bad in ["no-slash", "a/b/c", "/x", "x/", "ns/[unclosed", "ns/a b"] {
            let err = FingerprintPolicy::new(Some(Method::All), &[bad.into()]).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }
}
