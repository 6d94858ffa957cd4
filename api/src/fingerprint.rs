//! The pod-set fingerprint: a short string naming "the set of pods on a node".
//!
//! The node agent publishes it next to the free resources it reports in a
//! NodeResourceTopology object; the scheduler computes it over the pods it believes
//! are on that node. Equal fingerprints mean the report reflects the same pods as the
//! scheduler's cache, so the reported free resources can be trusted as they are.
//!
//! The algorithm (version `v001`) is shared with other NRT writers and readers and must
//! not change: each pod hashes to `XXH64(name, seed = XXH64(namespace, seed = 0))`
//! (duplicates kept); the hashes are sorted, fed as little-endian bytes into one
//! XXH64 with seed 0, and the digest is written as 16 lowercase hex digits after
//! [`PREFIX`] and [`VERSION`]. Sorting makes the result independent of pod order.
//!
//! Pods are identified by namespace and name only: a pod recreated under the same name
//! with different requests yields the same fingerprint.

use std::fmt;
use std::str::FromStr;

use xxhash_rust::xxh64::{Xxh64, xxh64};

/// First four characters of every fingerprint.
pub const PREFIX: &str = "pfp0";
/// Algorithm version written after [`PREFIX`].
pub const VERSION: &str = "v001";

/// Shortest string [`check`] accepts as a fingerprint at all.
const MIN_LEN: usize = 16;

/// Accumulates pods and produces their fingerprint with [`Fingerprint::sum`].
///
/// ```
/// use tas_api::fingerprint::Fingerprint;
///
/// let mut fp = Fingerprint::new();
/// fp.add("default", "test-pod-0");
/// assert_eq!(fp.sum(), "pfp0v001fe53c4dbd2c5f4a0");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fingerprint {
    hashes: Vec<u64>,
}

impl Fingerprint {
    /// An empty pod set.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty pod set with room for `pods` pods.
    pub fn with_capacity(pods: usize) -> Self {
        Self {
            hashes: Vec::with_capacity(pods),
        }
    }

    /// Adds one pod. Adding the same pod twice counts it twice.
    pub fn add(&mut self, namespace: &str, name: &str) {
        self.hashes.push(pod_hash(namespace, name));
    }

    /// Adds one pod by its [`pod_hash`], computed once by a caller that tries many
    /// pod sets over the same pods.
    pub fn add_hash(&mut self, hash: u64) {
        self.hashes.push(hash);
    }

    /// Number of pods added so far.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Whether no pod was added.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The fingerprint of the pods added so far, e.g. `"pfp0v001fe53c4dbd2c5f4a0"`.
    pub fn sum(&self) -> String {
        let mut sorted = self.hashes.clone();
        sorted.sort_unstable();
        let mut hasher = Xxh64::new(0);
        for hash in sorted {
            hasher.update(&hash.to_le_bytes());
        }
        format!("{PREFIX}{VERSION}{:016x}", hasher.digest())
    }

    /// Checks a fingerprint received from elsewhere against this pod set.
    pub fn check(&self, expected: &str) -> Result<(), CheckError> {
        check(expected, &self.sum())
    }
}

impl<'a> Extend<(&'a str, &'a str)> for Fingerprint {
    fn extend<I: IntoIterator<Item = (&'a str, &'a str)>>(&mut self, pods: I) {
        for (namespace, name) in pods {
            self.add(namespace, name);
        }
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for Fingerprint {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(pods: I) -> Self {
        let mut fp = Self::new();
        fp.extend(pods);
        fp
    }
}

/// One pod's contribution to a fingerprint: `XXH64(name, seed = XXH64(namespace))`.
pub fn pod_hash(namespace: &str, name: &str) -> u64 {
    xxh64(name.as_bytes(), xxh64(namespace.as_bytes(), 0))
}

/// The fingerprint of `(namespace, name)` pairs, in any order.
pub fn compute<'a>(pods: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    pods.into_iter().collect::<Fingerprint>().sum()
}

/// Why a received fingerprint does not vouch for the locally computed pod set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// The received value is not a fingerprint at all (too short or wrong prefix).
    #[error(
        "malformed pod fingerprint {value:?}: expected {PREFIX:?}, a version and 16 hex digits"
    )]
    Malformed {
        /// The received value.
        value: String,
    },
    /// The received fingerprint was made by another algorithm version, so it cannot be
    /// compared.
    #[error("pod fingerprint {value:?} has version {version:?}, only {VERSION:?} is supported")]
    IncompatibleVersion {
        /// The received value.
        value: String,
        /// Its version field.
        version: String,
    },
    /// Both are valid fingerprints but of different pod sets.
    #[error("pod fingerprint mismatch: expected {expected:?}, computed {computed:?}")]
    Mismatch {
        /// The received value.
        expected: String,
        /// The locally computed value.
        computed: String,
    },
}

/// Checks a received fingerprint (`expected`) against one computed locally.
///
/// Values shorter than 16 characters or not starting with [`PREFIX`] are
/// [`CheckError::Malformed`]; a version other than [`VERSION`] is
/// [`CheckError::IncompatibleVersion`]; otherwise the strings must be equal.
pub fn check(expected: &str, computed: &str) -> Result<(), CheckError> {
    let bytes = expected.as_bytes();
    if bytes.len() < MIN_LEN || !expected.starts_with(PREFIX) {
        return Err(CheckError::Malformed {
            value: expected.to_owned(),
        });
    }
    let version = &bytes[PREFIX.len()..PREFIX.len() + VERSION.len()];
    if version != VERSION.as_bytes() {
        return Err(CheckError::IncompatibleVersion {
            value: expected.to_owned(),
            version: String::from_utf8_lossy(version).into_owned(),
        });
    }
    if expected != computed {
        return Err(CheckError::Mismatch {
            expected: expected.to_owned(),
            computed: computed.to_owned(),
        });
    }
    Ok(())
}

/// Which pods a node agent included in the fingerprint it published.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Method {
    /// Every pod the kubelet reports on the node.
    #[default]
    All,
    /// Only pods holding exclusive CPUs, NUMA-pinned memory or NUMA-affine devices.
    WithExclusiveResources,
}

impl Method {
    /// The value of the `nodeTopologyPodsFingerprintMethod` attribute for this method.
    pub fn as_attribute(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::WithExclusiveResources => "with-exclusive-resources",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_attribute())
    }
}

/// A fingerprint method name that is neither `all` nor `with-exclusive-resources`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown pod fingerprint method {value:?}: expected \"all\" or \"with-exclusive-resources\""
)]
pub struct ParseMethodError {
    /// The unrecognised value.
    pub value: String,
}

impl FromStr for Method {
    type Err = ParseMethodError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "all" => Ok(Self::All),
            "with-exclusive-resources" => Ok(Self::WithExclusiveResources),
            _ => Err(ParseMethodError {
                value: value.to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_vectors() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[
                    ("ns1", "n1"),
                    ("ns1", "n2"),
                    ("ns2", "n1"),
                    ("ns3", "n1"),
                    ("ns3", "n2"),
                ],
                "pfp0v001b92008c14168b3a6",
            ),
            (
                &[
                    ("production", "jaeger-dpgjk"),
                    ("production", "nginx-rt684"),
                    ("production", "envoy-g9m22"),
                ],
                "pfp0v001607b76a0e9d3aeb4",
            ),
            (&[("default", "test-pod-0")], "pfp0v001fe53c4dbd2c5f4a0"),
            (&[("namespace1", "pod1")], "pfp0v0019e0420efb37746c6"),
        ];
        for &(pods, expected) in cases {
            assert_eq!(compute(pods.iter().copied()), expected, "{pods:?}");
            let mut fp = Fingerprint::with_capacity(pods.len());
            for &(namespace, name) in pods {
                fp.add(namespace, name);
            }
            assert_eq!(fp.len(), pods.len());
            assert_eq!(fp.check(expected), Ok(()));
        }
    }

    #[test]
    fn duplicates_are_kept() {
        let once = compute([("ns", "pod")]);
        let twice = compute([("ns", "pod"), ("ns", "pod")]);
        assert_ne!(once, twice);
    }

    #[test]
    fn namespace_and_name_are_not_concatenated() {
        assert_ne!(compute([("ns", "1pod")]), compute([("ns1", "pod")]));
    }

    #[test]
    fn empty_set_has_a_fingerprint() {
        let empty = Fingerprint::new();
        assert!(empty.is_empty());
        assert_eq!(empty.sum().len(), 24);
        assert_eq!(empty.sum(), compute([]));
    }

    #[test]
    fn check_errors() {
        let computed = compute([("default", "test-pod-0")]);
        for malformed in ["", "pfp0v001", "xfp0v001fe53c4dbd2c5f4a0", "pfp0v001ü"] {
            assert_eq!(
                check(malformed, &computed),
                Err(CheckError::Malformed {
                    value: malformed.to_owned()
                })
            );
        }
        assert_eq!(
            check("pfp0v002fe53c4dbd2c5f4a0", &computed),
            Err(CheckError::IncompatibleVersion {
                value: "pfp0v002fe53c4dbd2c5f4a0".to_owned(),
                version: "v002".to_owned(),
            })
        );
        // Non-ASCII in the version field must not panic.
        assert!(matches!(
            check("pfp0vé1fe53c4dbd2c5f4a0", &computed),
            Err(CheckError::IncompatibleVersion { .. })
        ));
        assert_eq!(
            check("pfp0v0019e0420efb37746c6", &computed),
            Err(CheckError::Mismatch {
                expected: "pfp0v0019e0420efb37746c6".to_owned(),
                computed: computed.clone(),
            })
        );
        assert_eq!(check(&computed, &computed), Ok(()));
    }

    #[test]
    fn method_attribute_values() {
        for method in [Method::All, Method::WithExclusiveResources] {
            assert_eq!(method.as_attribute().parse(), Ok(method));
            assert_eq!(method.to_string(), method.as_attribute());
        }
        assert_eq!(Method::default(), Method::All);
        let err = "All".parse::<Method>().unwrap_err();
        assert!(err.to_string().contains("\"All\""), "{err}");
    }

    type Pods = Vec<(String, String)>;

    /// A list of pods and the same list shuffled.
    fn pods_and_shuffle() -> impl Strategy<Value = (Pods, Pods)> {
        prop::collection::vec(("[a-z0-9-]{1,12}", "[a-z0-9-]{1,20}"), 0..24)
            .prop_flat_map(|pods| (Just(pods.clone()), Just(pods).prop_shuffle()))
    }

    proptest! {
        #[test]
        fn order_does_not_matter((pods, shuffled) in pods_and_shuffle()) {
            let a = compute(pods.iter().map(|(ns, n)| (ns.as_str(), n.as_str())));
            let b = compute(shuffled.iter().map(|(ns, n)| (ns.as_str(), n.as_str())));
            prop_assert_eq!(a.len(), 24);
            prop_assert!(a.starts_with("pfp0v001"));
            prop_assert_eq!(a, b);
        }

        #[test]
        fn check_never_panics(expected in ".{0,32}") {
            let _ = check(&expected, "pfp0v001fe53c4dbd2c5f4a0");
        }
    }
}
