//! Which pods the published fingerprint covers: every pod the kubelet reports, or only
//! those holding exclusive resources; minus pods excluded by `namespace/name` globs.

use crate::podresources::v1::PodResources;
use globset::{Glob, GlobSet, GlobSetBuilder};
use tas_api::fingerprint::{Fingerprint, Method};

/// A bad `--exclude-pods` entry (left out, see [`FingerprintPolicy::ignored`]).
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
    ignored: Vec<String>,
}

impl FingerprintPolicy {
    /// `method: None` publishes no fingerprint. A malformed exclude entry is left out
    /// (see [`Self::ignored`]) rather than refused: the entries come from the stack
    /// object, shared by every agent, and refusing one would stop them all. Only the
    /// entries kept are published, so the scheduler excludes the same pods.
    pub fn new(method: Option<Method>, exclude_list: &[String]) -> Self {
        let mut set = GlobSetBuilder::new();
        let mut patterns = Vec::new();
        let mut ignored = Vec::new();
        for pattern in exclude_list {
            match exclude_glob(pattern) {
                Ok(glob) => {
                    set.add(glob);
                    patterns.push(pattern.clone());
                }
                Err(e) => ignored.push(e.to_string()),
            }
        }
        // Every glob compiled on its own; a set of them builds (an error here would be
        // a size limit of the matcher: then no exclusion at all, and said so).
        let exclude = set.build().unwrap_or_else(|e| {
            ignored.push(format!("pod excludes {patterns:?} left out: {e}"));
            patterns.clear();
            GlobSet::empty()
        });
        Self {
            method,
            exclude,
            patterns,
            ignored,
        }
    }

    /// Why each left-out exclude entry was left out.
    pub fn ignored(&self) -> &[String] {
        &self.ignored
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

/// One `namespace/name` glob.
fn exclude_glob(pattern: &str) -> Result<Glob, ExcludeError> {
    let mut parts = pattern.split('/');
    let (Some(ns), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(ExcludeError::Shape(pattern.to_owned()));
    };
    if ns.is_empty() || name.is_empty() || pattern.contains(char::is_whitespace) {
        return Err(ExcludeError::Shape(pattern.to_owned()));
    }
    Glob::new(pattern).map_err(|source| ExcludeError::Glob {
        pattern: pattern.to_owned(),
        source,
    })
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
        let p = FingerprintPolicy::new(Some(Method::All), &["kube-system/*".into()]);
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
        let p = FingerprintPolicy::new(Some(Method::All), &ex);
        assert_eq!(
            p.exclude_attribute().as_deref(),
            Some("kube-system/* monitoring/node-{a,b}")
        );
        assert_eq!(
            FingerprintPolicy::new(Some(Method::All), &[]).exclude_attribute(),
            None
        );
        assert_eq!(FingerprintPolicy::new(None, &ex).exclude_attribute(), None);
    }

    #[test]
    fn exclusive_method_covers_only_pinned_pods() {
        let p = FingerprintPolicy::new(Some(Method::WithExclusiveResources), &[]);
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
        let p = FingerprintPolicy::new(None, &[]);
        assert_eq!(p.compute(&[pod("a", "b", &[1])]), None);
    }

    /// A bad entry does not stop the agent: it is left out, said why, and not
    /// published; the good entries still apply.
    #[test]
    fn malformed_excludes_are_left_out_and_the_rest_applies() {
        for bad in [
            "no-slash",
            "a/b/c",
            "/x",
            "x/",
            "ns/[unclosed",
            "ns/a b",
            "ns/{a",
            "ns/x\\",
        ] {
            let list = [bad.to_owned(), "kube-system/*".to_owned()];
            let p = FingerprintPolicy::new(Some(Method::All), &list);
            assert_eq!(p.ignored().len(), 1, "{bad}: {:?}", p.ignored());
            assert!(p.ignored()[0].contains(bad), "{:?}", p.ignored());
            assert_eq!(p.exclude_attribute().as_deref(), Some("kube-system/*"));
            assert!(!p.covers(&pod("kube-system", "dns", &[])));
            assert!(p.covers(&pod("default", "app", &[])));
        }
    }

    /// The regular expressions of the CRD's `excludePods` rules, CEL string escapes
    /// undone, anchors dropped (the generator below matches whole strings).
    fn crd_exclude_patterns() -> Vec<String> {
        use kube::CustomResourceExt;
        fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(map) => {
                    if let (Some(rule), Some(message)) = (
                        map.get("rule").and_then(|r| r.as_str()),
                        map.get("message").and_then(|m| m.as_str()),
                    ) && message.contains("excludePods")
                        && let Some((_, rest)) = rule.split_once("p.matches('")
                        && let Some((regex, _)) = rest.rsplit_once("'))")
                    {
                        let regex = regex.replace("\\\\", "\\");
                        let regex = regex.trim_start_matches('^').trim_end_matches('$');
                        out.push(regex.to_owned());
                    }
                    map.values().for_each(|v| walk(v, out));
                }
                serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        let crd = serde_json::to_value(tas_api::tas::TopologyAwareScheduling::crd()).unwrap();
        let mut out = Vec::new();
        walk(&crd, &mut out);
        out
    }

    /// Whatever the CRD admits in `excludePods` (top level and per group), the agent
    /// compiles: entries generated from the rules' own regular expressions all become
    /// globs, so no stored object can make every agent leave an entry out.
    #[test]
    fn every_exclude_the_crd_admits_compiles() {
        use proptest::test_runner::{Config, TestRunner};
        let patterns = crd_exclude_patterns();
        assert_eq!(
            patterns.len(),
            2,
            "the top-level and the group rule: {patterns:?}"
        );
        for regex in patterns {
            let entries = proptest::string::string_regex(&regex).unwrap();
            let mut runner = TestRunner::new(Config::with_cases(3000));
            runner
                .run(&entries, |entry| {
                    proptest::prop_assert!(
                        exclude_glob(&entry).is_ok(),
                        "{entry:?}: {:?}",
                        exclude_glob(&entry).err()
                    );
                    Ok(())
                })
                .unwrap_or_else(|e| panic!("{regex}: {e}"));
        }
    }
}
