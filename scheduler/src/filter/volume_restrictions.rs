//! `VolumeRestrictions`, for `ReadWriteOncePod` claims: such a claim may be used by one
//! pod at a time in the whole cluster. The pods counted are those on the nodes the
//! caller passes — bound pods and pods assumed on a node while their binding is in
//! flight — so two pods with the same claim are never placed one after the other
//! before the first binding is observed. Terminal pods are not on any node
//! ([`super::NodeInfo::add_pod`]), so they do not count.
//!
//! Unlike kube-scheduler, no preemption is attempted to free the claim.

use super::node::NodeInfo;

/// The first of `claims` (in namespace `namespace`) that a pod other than `uid` uses,
/// with that pod's `namespace/name`.
pub fn read_write_once_pod_user<'a>(
    nodes: impl IntoIterator<Item = &'a NodeInfo>,
    namespace: &str,
    uid: &str,
    claims: &[String],
) -> Option<(String, String)> {
    nodes.into_iter().find_map(|node| {
        node.pods().find_map(|p| {
            let meta = &p.meta;
            if meta.uid == uid || meta.namespace != namespace {
                return None;
            }
            claims
                .iter()
                .find(|c| meta.claims.contains(c))
                .map(|c| (c.clone(), meta.key()))
        })
    })
}
