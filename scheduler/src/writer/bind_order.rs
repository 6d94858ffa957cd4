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
//! The writer takes a [`Turn`] as it dequeues a bind (binds are queued by the
//! scheduling loop, so in decision order) and waits on it before the fence check and
//! the request; dropping it (bind done, failed or refused) lets the next pod of that
//! node go. Binds to different nodes stay concurrent. Nodes whose last bind is over
//! are forgotten now and then, so the map holds about the nodes with binds in flight,
//! not every node that ever had one.

use std::collections::HashMap;

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// Entries kept before the first sweep of finished turns.
const SWEEP_AT_LEAST: usize = 64;

/// The latest turn of every node with a bind in flight; see the module documentation.
#[derive(Debug, Default)]
pub struct BindOrder {
    state: Mutex<Latest>,
}

#[derive(Debug, Default)]
struct Latest {
    last: HashMap<String, oneshot::Receiver<()>>,
    /// Sweep finished turns when `last` grows past this (amortised: twice what the
    /// previous sweep left, at least [`SWEEP_AT_LEAST`]).
    sweep_at: usize,
}

/// One pod's place in its node's bind order.
#[derive(Debug)]
pub struct Turn {
    previous: Option<oneshot::Receiver<()>>,
    /// Dropped when this bind is over, which releases the next one.
    _done: oneshot::Sender<()>,
}

impl BindOrder {
    /// The next turn on `node`: after every turn taken on it before.
    pub fn take(&self, node: &str) -> Turn {
        let (done, next) = oneshot::channel();
        let mut state = self.state.lock();
        if state.last.len() >= state.sweep_at.max(SWEEP_AT_LEAST) {
            // A turn whose sender is gone is over: nobody needs to wait for it.
            state.last.retain(|_, turn| {
                matches!(turn.try_recv(), Err(oneshot::error::TryRecvError::Empty))
            });
            state.sweep_at = 2 * state.last.len();
        }
        let previous = state.last.insert(node.to_owned(), next);
        Turn {
            previous,
            _done: done,
        }
    }
}

impl Turn {
    /// Waits until the previous bind on the node is over.
    pub async fn wait(&mut self) {
        if let Some(previous) = self.previous.take() {
            // Sent or dropped: either way the previous bind is over.
            let _ = previous.await;
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
        let turns: Vec<Turn> = (0..4).map(|_| order.take("n")).collect();
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
        let mut other = order.take("m");
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
            drop(order.take(&format!("done-{i}")));
        }
        let held: Vec<Turn> = (0..10).map(|i| order.take(&format!("busy-{i}"))).collect();
        for i in 0..200 {
            drop(order.take(&format!("later-{i}")));
        }
        let len = order.state.lock().last.len();
        assert!(len < 2 * SWEEP_AT_LEAST + 10, "{len} entries kept");
        // The in-flight ones are still ordered.
        let mut next = order.take("busy-0");
        assert!(next.previous.as_mut().unwrap().try_recv().is_err());
        drop(held);
    }

    #[tokio::test]
    async fn an_abandoned_turn_releases_the_next() {
        let order = BindOrder::default();
        let first = order.take("n");
        let mut second = order.take("n");
        drop(first);
        tokio::time::timeout(Duration::from_millis(100), second.wait())
            .await
            .expect("released by the drop");
    }
}
