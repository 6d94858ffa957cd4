//! Fingerprint evidence: which of a dirty node's unconfirmed pods its latest NRT object
//! reflects, so the object can replace the pessimistic view at once and only the
//! reservations of the other pods are kept.
//!
//! The pods the NRT must count are split in two:
//!
//! - *confirmed*: bound pods without a reservation that the fingerprint method and the
//!   informer mode count (what the plain fingerprint check has always used);
//! - *unconfirmed*: reserved pods seen bound (in bind order), pods deleted since the
//!   last accepted NRT (an NRT may still count them, oldest first), and unreserved
//!   pods whose phase the informer mode does not count yet (the node agent may already
//!   list them).
//!
//! The NRT is accepted when its fingerprint equals the confirmed pods plus some subset
//! of the unconfirmed ones. Tried in order, each with a bounded number of candidate
//! sets: the plain rule (reserved pods whose phase counts) as before; then bind-order
//! prefixes combined with "the last *j* deletions still counted"; then, when there are
//! at most [`SUBSET_MAX_PODS`] unconfirmed pods, every subset. A 64-bit hash makes a
//! false match between two different pod sets negligible.
//!
//! Accepting is safe whatever subset matched: reserved pods the NRT reflects are in its
//! free amounts already, the others keep their reservation, and deleted pods it still
//! counts only make it pessimistic.

use std::collections::HashSet;

use tas_api::fingerprint::{CheckError, Fingerprint, Method, check, pod_hash};

use super::config::CacheConfig;
use super::exclude::PodExclusions;
use super::node::NodeEntry;
use super::pod::{ObservedPod, PodPhase};

/// Most candidate sets tried as bind-order prefixes × deletion suffixes.
pub const MAX_PREFIX_TRIES: usize = 256;
/// Up to this many unconfirmed pods, every subset of them is tried (2^n sets).
pub const SUBSET_MAX_PODS: usize = 10;

/// How an NRT object was matched to the pods believed on its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Search {
    /// The plain rule: every reserved pod whose phase counts.
    Exact,
    /// A bind-order prefix of the reserved pods (with the newest deletions).
    Prefix,
    /// Some other subset of the unconfirmed pods.
    Subset,
}

impl Search {
    /// The metric label value.
    pub fn as_label(self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::Prefix => "prefix",
            Self::Subset => "subset",
        }
    }
}

/// What the fingerprint says about a node's latest NRT.
pub(crate) enum Verdict {
    /// It reflects the confirmed pods plus the ones recorded here.
    Match(Evidence),
    /// A valid fingerprint no candidate set produced.
    Mismatch,
    /// No fingerprint, or one that cannot be compared.
    Unusable,
}

/// Which unconfirmed pods an NRT reflects.
#[derive(Debug)]
pub(crate) struct Evidence {
    pub(crate) search: Search,
    /// Reserved pods (UIDs) the NRT counts: their reservations are dropped.
    reflected: HashSet<String>,
    /// Indexes into the node's departed pods that the NRT still counts.
    still_counted: Vec<usize>,
    /// Reserved pods (UIDs) the fingerprint method counts at all.
    covered: HashSet<String>,
}

impl Evidence {
    /// The reserved pods (namespace, name) the fingerprint counts but the object does
    /// not reflect: bound, and not in the free amounts yet. Whatever their age, the
    /// kubelet has still to admit them (or fail them): see [`super::resync`].
    pub(crate) fn unreflected(&self, entry: &NodeEntry) -> HashSet<(String, String)> {
        self.covered
            .iter()
            .filter(|uid| !self.reflected.contains(*uid))
            .filter_map(|uid| entry.pods.get(uid))
            .map(|p| (p.namespace.clone(), p.name.clone()))
            .collect()
    }

    /// Replaces `entry`'s view with its latest NRT, keeping the reservations the NRT
    /// cannot reflect. Returns the UIDs of the dropped reservations.
    pub(crate) fn apply(&self, entry: &mut NodeEntry) -> Vec<String> {
        entry.accept(&self.reflected, &self.still_counted, |uid, pod| {
            let pod = pod?;
            if pod.phase.is_terminal() {
                // Finished: holds nothing any more.
                return Some(false);
            }
            if !self.covered.contains(uid) {
                // The fingerprint cannot tell: a pod not yet admitted stays reserved.
                return Some(pod.phase == PodPhase::Pending);
            }
            None
        })
    }
}

/// An unconfirmed pod the NRT may or may not count.
enum Optional {
    /// A reserved pod seen bound, by UID.
    Bind(String),
    /// A departed pod, by index.
    Departed(usize),
    /// An unreserved pod whose phase does not count yet.
    Uncounted,
}

/// Judges `entry`'s latest NRT; see the module documentation.
pub(crate) fn judge(node: &str, entry: &NodeEntry, config: &CacheConfig) -> Verdict {
    let Some(nrt) = entry.latest() else {
        return Verdict::Unusable;
    };
    let Some(expected) = nrt.pods_fingerprint() else {
        return Verdict::Unusable;
    };
    let method = match nrt.pods_fingerprint_method() {
        Ok(method) => method,
        Err(error) => {
            tracing::warn!(node, %error, "pod fingerprint ignored");
            return Verdict::Unusable;
        }
    };
    let excluded = PodExclusions::of(nrt);
    let mode = config.informer_mode;
    let counted_by_method = |exclusive: bool| match method {
        Method::All => true,
        Method::WithExclusiveResources => exclusive,
    };

    let mut fixed = Vec::with_capacity(entry.pods.len());
    let mut binds: Vec<(&ObservedPod, &String)> = Vec::new();
    let mut exact = Vec::new();
    let mut uncounted = Vec::new();
    let mut covered = HashSet::new();
    for (uid, pod) in &entry.pods {
        if excluded.excludes(&pod.namespace, &pod.name) || !counted_by_method(pod.exclusive) {
            continue;
        }
        let hash = pod_hash(&pod.namespace, &pod.name);
        let counts = pod.phase.counts_in_fingerprint(mode);
        if entry.reservation(uid).is_some() {
            covered.insert(uid.clone());
            binds.push((pod, uid));
            if counts {
                exact.push(uid.clone());
            }
        } else if counts {
            fixed.push(hash);
        } else if !pod.phase.is_terminal() {
            uncounted.push(hash);
        }
    }
    binds.sort_by(|a, b| {
        (a.0.bound_at, &a.0.namespace, &a.0.name).cmp(&(b.0.bound_at, &b.0.namespace, &b.0.name))
    });

    // The plain rule first: it also validates the expected value.
    let mut plain = Fingerprint::with_capacity(fixed.len() + exact.len());
    for &hash in &fixed {
        plain.add_hash(hash);
    }
    for uid in &exact {
        let pod = &entry.pods[uid];
        plain.add(&pod.namespace, &pod.name);
    }
    match check(expected, &plain.sum()) {
        Ok(()) => {
            return Verdict::Match(Evidence {
                search: Search::Exact,
                reflected: exact.into_iter().collect(),
                still_counted: Vec::new(),
                covered,
            });
        }
        Err(CheckError::Mismatch { .. }) => {}
        Err(error) => {
            tracing::warn!(node, %error, "pod fingerprint ignored");
            return Verdict::Unusable;
        }
    }

    let departed: Vec<(usize, u64)> = entry
        .departed()
        .iter()
        .enumerate()
        .filter(|(_, d)| {
            !excluded.excludes(&d.namespace, &d.name) && counted_by_method(d.exclusive)
        })
        .map(|(i, d)| (i, pod_hash(&d.namespace, &d.name)))
        .collect();
    let mut optional: Vec<(u64, Optional)> = binds
        .iter()
        .map(|(pod, uid)| {
            (
                pod_hash(&pod.namespace, &pod.name),
                Optional::Bind((*uid).clone()),
            )
        })
        .collect();
    let first_departed = optional.len();
    optional.extend(departed.iter().map(|&(i, h)| (h, Optional::Departed(i))));
    let first_uncounted = optional.len();
    optional.extend(uncounted.iter().map(|&h| (h, Optional::Uncounted)));

    let matches = |chosen: &mut dyn Iterator<Item = usize>| {
        let mut fp = Fingerprint::with_capacity(fixed.len() + optional.len());
        for &hash in &fixed {
            fp.add_hash(hash);
        }
        for i in chosen {
            fp.add_hash(optional[i].0);
        }
        fp.sum() == expected
    };
    let evidence = |search, chosen: Vec<usize>| {
        let mut reflected = HashSet::new();
        let mut still_counted = Vec::new();
        for i in chosen {
            match &optional[i].1 {
                Optional::Bind(uid) => {
                    reflected.insert(uid.clone());
                }
                Optional::Departed(index) => still_counted.push(*index),
                Optional::Uncounted => {}
            }
        }
        Verdict::Match(Evidence {
            search,
            reflected,
            still_counted,
            covered: covered.clone(),
        })
    };

    let (n_binds, n_departed) = (binds.len(), departed.len());
    let extra_choices: &[bool] = if uncounted.is_empty() {
        &[false]
    } else {
        &[false, true]
    };
    let mut tries = 0;
    'prefixes: for prefix in 0..=n_binds {
        for still in 0..=n_departed {
            for &extra in extra_choices {
                tries += 1;
                if tries > MAX_PREFIX_TRIES {
                    break 'prefixes;
                }
                let chosen = (0..prefix)
                    .chain(first_departed + n_departed - still..first_uncounted)
                    .chain((first_uncounted..optional.len()).filter(|_| extra));
                let chosen: Vec<usize> = chosen.collect();
                if matches(&mut chosen.iter().copied()) {
                    return evidence(Search::Prefix, chosen);
                }
            }
        }
    }
    if optional.len() <= SUBSET_MAX_PODS {
        for mask in 0u32..(1 << optional.len()) {
            let chosen: Vec<usize> = (0..optional.len())
                .filter(|i| mask & (1 << i) != 0)
                .collect();
            if matches(&mut chosen.iter().copied()) {
                return evidence(Search::Subset, chosen);
            }
        }
    }
    Verdict::Mismatch
}
