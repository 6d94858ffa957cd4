//! The writer task: fenced writes concurrently (bounded), the ordered lane one by one,
//! both driven from this one task.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kube::Client;
use tokio::sync::mpsc;

use super::bind_order::BindOrder;
use super::requests::{Envelope, LaneWrite, Request, set_unschedulable};
use super::{Fence, MAX_IN_FLIGHT};
use crate::events::EventPublisher;

/// Runs every write; see the module documentation.
pub struct WriterTask {
    client: Client,
    fence: Arc<Fence>,
    writes: mpsc::Receiver<Envelope>,
    lane: mpsc::Receiver<LaneWrite>,
    publisher: EventPublisher,
    manager: String,
}

impl WriterTask {
    pub(super) fn new(
        client: Client,
        fence: Arc<Fence>,
        writes: mpsc::Receiver<Envelope>,
        lane: mpsc::Receiver<LaneWrite>,
        publisher: EventPublisher,
        manager: String,
    ) -> Self {
        Self {
            client,
            fence,
            writes,
            lane,
            publisher,
            manager,
        }
    }

    /// Runs until every [`super::Writer`] handle is dropped and the queued writes are
    /// done.
    pub async fn run(self) {
        let Self {
            client,
            fence,
            writes,
            lane,
            mut publisher,
            manager,
        } = self;
        tokio::join!(
            dispatch(&client, &fence, writes),
            ordered(&client, &fence, lane, &mut publisher, &manager),
        );
    }
}

/// Fenced writes, at most [`MAX_IN_FLIGHT`] at once.
/// Binds to one node go in the order they were queued, but for those whose admission
/// commutes ([`BindOrder`]).
async fn dispatch(client: &Client, fence: &Fence, mut writes: mpsc::Receiver<Envelope>) {
    let mut running = FuturesUnordered::new();
    let mut open = true;
    let order = BindOrder::default();
    loop {
        tokio::select! {
            Some(()) = running.next(), if !running.is_empty() => {}
            next = writes.recv(), if open && running.len() < MAX_IN_FLIGHT => match next {
                Some(Envelope { request, reply }) => {
                    let turn = match &request {
                        Request::Bind {
                            node, admission, ..
                        } => Some(order.take(node, *admission)),
                        _ => None,
                    };
                    running.push(async move {
                        let mut turn = turn;
                        if let Some(turn) = turn.as_mut() {
                            turn.wait().await;
                        }
                        let outcome = request.send_fenced(fence, client).await;
                        // The next bind to the node may go now.
                        drop(turn);
                        // The caller may have stopped waiting: nothing to tell then.
                        let _ = reply.send(outcome);
                    });
                }
                None => open = false,
            },
            else => break,
        }
    }
}

/// Events and conditions, one after another in queue order.
async fn ordered(
    client: &Client,
    fence: &Fence,
    mut lane: mpsc::Receiver<LaneWrite>,
    publisher: &mut EventPublisher,
    manager: &str,
) {
    while let Some(write) = lane.recv().await {
        match write {
            LaneWrite::Unschedulable { pod, message } => {
                let patch = set_unschedulable(client, &pod, &message, manager);
                if let Err(e) = fence.send(true, patch).await {
                    let pod = pod.name.as_deref().unwrap_or_default();
                    tracing::debug!(error = %e, pod, "setting PodScheduled=False");
                }
            }
            LaneWrite::Event(message) => {
                if let Err(e) = fence.send(false, publisher.publish(message)).await {
                    tracing::debug!(error = %e, "publishing an event");
                }
            }
        }
    }
}
