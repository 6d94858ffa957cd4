//! Binds to one node leave in the order the pods were decided.
//!
//! The reserve cache holds a pod's NUMA footprint back on every zone of its node the
//! kubelet could give it, so a later pod on that node is only placed where it fits *after* the earlier ones. That
//! holds for the kubelet only if it admits them in that order: it picks each pod's
//! zone from what it has admitted so far. Binds run concurrently, so without an order
//! a later pod's binding can land first; the kubelet then admits it with the earlier
//! pod's room still free, may give it exactly that room (the lowest NUMA zone that
//! fits), and rejects the earlier pod with `TopologyAffinityError`. Seen in the
//! full-stack test: a 4-CPU pod decided after a hugepages pod (which needs zone 0) but
//! bound before it took zone 0's last CPUs.
//!
//! Not every bind needs that order. A bind whose admission *commutes* — the kubelet
//! admits it, and every other bind in flight to the node, alike whichever it sees
//! first — leaves at once, without waiting for the earlier binds to its node; the
//! binds decided after it that do need the order still wait for it. The scheduler
//! judges that when it reserves the pod
//! ([`TopologyCache::admission_commutes`](crate::cache::TopologyCache::admission_commutes)),
//! conservatively, for two kinds of pods only:
//!
//! - pods the kubelet pins nothing of to a NUMA zone (not Guaranteed and no devices:
//!   their CPUs and memory come from the shared pools). Its admission checks only
//!   node-level sums, which the scheduler checked for all of them together;
//! - pods that can land on one zone only, the node's lowest, under `single-numa-node`:
//!   the reservation's landing zones ([`crate::numa::landing_zones_below`], computed
//!   against an upper bound of what is free whatever the kubelet admitted before, and
//!   narrowed by the kubelet's "lowest zone that holds it" below the zone the
//!   pessimistic view holds it on) are that one zone. The kubelet then gives it the
//!   lowest zone whatever it admitted before, and freeing more (a pod leaving) cannot
//!   change that. An earlier pod still lands where it would have: below that zone
//!   nothing changed; on it the pessimistic view held the earlier pod back when the
//!   later one was placed, so both fit; above it the earlier pod did not fit that zone
//!   anyway and fits it even less now.
//!
//! A pod landing on a higher zone could be given a lower one by a kubelet that has not
//! admitted the earlier pods yet, taking their room; a pod whose landing zones the
//! cache cannot narrow may go anywhere. Both keep their turn.
//!
//! The writer takes a [`Turn`] as it dequeues a bind (binds are queued by the
//! scheduling loop, so in decision order) and waits on it before the fence check and
//! the request; dropping it (bind done, failed or refused) lets the next pod of that
//! node go. A bind in turn waits for every bind to its node queued before it and not
//! over yet; a commuting bind waits for none. Binds to different nodes stay
//! concurrent. Nodes whose last bind is over are forgotten now and then, so the map
//! holds about the nodes with binds in flight, not every node that ever had one.

use std::collections::HashMap;

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// Entries kept before the first sweep of finished turns.
const SWEEP_AT_LEAST: usize = 64;

/// Per node with binds in flight, the binds a later bind in turn must wait for; see
/// the module documentation.
#[derive(Debug, Default)]
pub struct BindOrder {
    state: Mutex<Latest>,
}

#[derive(Debug, Default)]
struct Latest {
    /// The last bind in turn (which waited for everything before it) and the
    /// commuting binds queued since, each as the receiver its end closes.
    last: HashMap<String, Vec<oneshot::Receiver<()>>>,
    /// Sweep finished turns when `last` grows past this (amortised: twice what the
    /// previous sweep left, at least [`SWEEP_AT_LEAST`]).
    sweep_at: usize,
}

/// Whether a bind keeps its place in its node's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// The kubelet's verdict may depend on what it admitted before: wait for every
    /// earlier bind to the node.
    InTurn,
    /// The kubelet's verdicts are the same in any order (see the module
    /// documentation): go at once; later binds in turn still wait for it.
    Commutes,
}

/// One pod's place in its node's bind order.
#[derive(Debug)]
pub struct Turn {
    previous: Vec<oneshot::Receiver<()>>,
    /// Dropped when this bind is over, which releases the binds waiting for it.
    _done: oneshot::Sender<()>,
}

/// Whether the bind behind `turn` is still in flight.
fn in_flight(turn: &mut oneshot::Receiver<()>) -> bool {
    matches!(turn.try_recv(), Err(oneshot::error::TryRecvError::Empty))
}

impl BindOrder {
    /// The next turn on `node`: after every turn taken on it before when `admission`
    /// is [`Admission::InTurn`], after none when it commutes.
    pub fn take(&self, node: &str, admission: Admission) -> Turn {
        let (done, next) = oneshot::channel();
        let mut state = self.state.lock();
        if state.last.len() >= state.sweep_at.max(SWEEP_AT_LEAST) {
            // A turn whose sender is gone is over: nobody needs to wait for it.
            state.last.retain(|_, turns| {
                turns.retain_mut(in_flight);
                !turns.is_empty()
            });
            state.sweep_at = 2 * state.last.len();
        }
        let turns = state.last.entry(node.to_owned()).or_default();
        let previous = match admission {
            // Waiting for these covers everything before them.
            Admission::InTurn => std::mem::replace(turns, vec![next]),
            Admission::Commutes => {
                turns.retain_mut(in_flight);
                turns.push(next);
                Vec::new()
            }
        };
        Turn {
            previous,
            _done: done,
        }
    }
}

impl Turn {
    /// Waits until the binds this one must follow are over.
    pub async fn wait(&mut self) {
        // Each is let go only once over, so a wait cut short resumes where it was.
        while let Some(previous) = self.previous.last_mut() {
            // Sent or dropped: either way that bind is over.
            let _ = previous.await;
            self.previous.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    /// Tasks started in reverse order still pass their node's gate in the order the
    /// turns were taken; another node's task does not wait for them.
    #[tokio::test]
    async fn binds_to_one_node_go_in_turn_order_and_other_nodes_do_not_wait() {
        let order = BindOrder::default();
        let passed = Arc::new(Mutex::new(Vec::new()));
        let turns: Vec<Turn> = (0..4).map(|_| order.take("n", Admission::InTurn)).collect();
        let mut tasks = Vec::new();
        for (i, mut turn) in turns.into_iter().enumerate().rev() {
            let passed = passed.clone();
            tasks.push(tokio::spawn(async move {
                turn.wait().await;
                // A slow bind: the next one must still wait for it.
                tokio::time::sleep(Duration::from_millis(5 * (4 - i as u64))).await;
                passed.lock().push(i);
            }));
        }
        let mut other = order.take("m", Admission::InTurn);
        tokio::time::timeout(Duration::from_millis(100), other.wait())
            .await
            .expect("another node's first bind goes at once");
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*passed.lock(), [0, 1, 2, 3]);
    }

    /// Finished turns are forgotten: after binds to many nodes are over, the map holds
    /// only the nodes whose binds are still in flight.
    #[test]
    fn nodes_whose_binds_are_over_are_forgotten() {
        let order = BindOrder::default();
        for i in 0..1000 {
            drop(order.take(&format!("done-{i}"), Admission::InTurn));
        }
        let held: Vec<Turn> = (0..10)
            .map(|i| order.take(&format!("busy-{i}"), Admission::InTurn))
            .collect();
        for i in 0..200 {
            drop(order.take(&format!("later-{i}"), Admission::Commutes));
        }
        let len = order.state.lock().last.len();
        assert!(len < 2 * SWEEP_AT_LEAST + 10, "{len} entries kept");
        // The in-flight ones are still ordered.
        let mut next = order.take("busy-0", Admission::InTurn);
        assert!(next.previous[0].try_recv().is_err());
        drop(held);
    }

    #[tokio::test]
    async fn an_abandoned_turn_releases_the_next() {
        let order = BindOrder::default();
        let first = order.take("n", Admission::InTurn);
        let mut second = order.take("n", Admission::InTurn);
        drop(first);
        tokio::time::timeout(Duration::from_millis(100), second.wait())
            .await
            .expect("released by the drop");
    }

    /// Whether `turn` may go now.
    async fn goes_at_once(turn: &mut Turn) -> bool {
        tokio::time::timeout(Duration::from_millis(50), turn.wait())
            .await
            .is_ok()
    }

    /// A commuting bind leaves while earlier binds to its node are in flight; a later
    /// bind in turn waits for it as well as for them.
    #[tokio::test]
    async fn a_commuting_bind_goes_at_once_and_later_binds_in_turn_wait_for_it() {
        let order = BindOrder::default();
        let first = order.take("n", Admission::InTurn);
        let mut commuting = order.take("n", Admission::Commutes);
        assert!(goes_at_once(&mut commuting).await);
        let mut later = order.take("n", Admission::InTurn);
        assert!(!goes_at_once(&mut later).await, "waits for the first bind");
        drop(first);
        assert!(
            !goes_at_once(&mut later).await,
            "still waits for the commuting bind"
        );
        drop(commuting);
        assert!(goes_at_once(&mut later).await);
    }

    /// Commuting binds do not wait for one another either, and the bind in turn after
    /// them waits for each.
    #[tokio::test]
    async fn commuting_binds_go_side_by_side() {
        let order = BindOrder::default();
        let mut a = order.take("n", Admission::Commutes);
        let mut b = order.take("n", Admission::Commutes);
        assert!(goes_at_once(&mut a).await && goes_at_once(&mut b).await);
        let mut after = order.take("n", Admission::InTurn);
        drop(a);
        assert!(!goes_at_once(&mut after).await, "b is still in flight");
        drop(b);
        assert!(goes_at_once(&mut after).await);
        // A commuting bind after a bind in turn does not wait for it.
        let mut again = order.take("n", Admission::Commutes);
        assert!(goes_at_once(&mut again).await);
    }
}
