//! Every write the scheduler sends to the API server leaves from one task, the writer:
//! binds (with the ResourceClaim writes that go before them, in the bind's turn, see
//! [`claims`]), evictions, `status.nominatedNodeName`, the `PodScheduled=False`
//! condition and Events. Callers queue typed requests through a [`Writer`] handle and await the
//! reply where they need the outcome (a bind, an eviction); Events and conditions are
//! queued without waiting.
//!
//! The lease fence is checked here and nowhere else ([`Fence`]): a write that could
//! change where a pod runs or what it says about scheduling (everything but an Event)
//! starts only while this process stays leader for longer than the write timeout
//! ([`LeaderElectionSettings::write_timeout`](crate::config::LeaderElectionSettings::write_timeout),
//! a sixth of the lease duration), and every write, Events included, is abandoned after
//! that timeout. So no fenced write is answered after the renew deadline (two thirds of
//! the lease duration after the last successful renewal started), before which the
//! lease is never taken over. Events are not fenced: a standby reports an unusable
//! NodeResourceTopology object as the leader does, as soon as its watch lists it.
//!
//! Fenced writes run concurrently, at most [`MAX_IN_FLIGHT`] at once (a bind burst
//! keeps the API server busy), binds to one node in decision order unless their
//! admission by the kubelet commutes ([`bind_order`]); the queue in front of them is as long, so the
//! scheduling loop waits when both are full. Events and conditions run one after
//! another, in the order they were queued (a series patch follows its create).

mod bind_order;
pub mod claims;
mod requests;
mod task;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kube::Client;
use tokio::sync::{mpsc, oneshot};

use crate::events::{EventPublisher, EventSender};
use requests::Envelope;
pub(crate) use requests::LaneWrite;
pub use requests::{Admission, Request};
pub use task::WriterTask;

/// Fenced writes in flight at once, and queued in front of them.
pub const MAX_IN_FLIGHT: usize = 64;
/// Events and conditions queued at most; more are dropped (and logged).
const LANE_QUEUE: usize = 4096;

/// Answers "may I send a fenced write now?": true while this process stays leader for
/// longer than the write timeout.
pub type LeaderCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// Why a write was not done.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// This process does not lead for longer than the write timeout: nothing was sent.
    #[error("not the leader for longer than the write timeout: not sent")]
    NotLeader,
    /// Sent, and no answer within the write timeout (it may or may not have applied).
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    /// The API server answered with an error, or the request failed.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// The writer task has ended (the process is stopping).
    #[error("the writer has stopped")]
    Stopped,
    /// A ResourceClaim write before a bind failed: the bind was not sent.
    #[error("writing ResourceClaim {claim}: {source}")]
    Claim {
        /// `namespace/name` of the claim.
        claim: String,
        /// Why.
        source: Box<WriteError>,
    },
}

impl WriteError {
    /// The HTTP status the API server answered with, if it did.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Api(kube::Error::Api(s)) => Some(s.code),
            _ => None,
        }
    }

    /// The claim (`namespace/name`) whose write was refused with 409 Conflict: it
    /// changed since the version the write was made against.
    pub fn stale_claim(&self) -> Option<&str> {
        match self {
            Self::Claim { claim, source } if source.code() == Some(409) => Some(claim),
            _ => None,
        }
    }
}

/// The one leadership check of every write, and the timeout that bounds it.
pub struct Fence {
    /// Set once leader election has started; unset means "not leader".
    leads: OnceLock<LeaderCheck>,
    timeout: Duration,
}

impl Fence {
    fn new(timeout: Duration) -> Self {
        Self {
            leads: OnceLock::new(),
            timeout,
        }
    }

    /// Whether this process leads for longer than the write timeout.
    pub fn leads(&self) -> bool {
        self.leads.get().is_some_and(|check| check())
    }

    /// Runs `write` if it may go now (a fenced one only while leading), bounded by the
    /// write timeout. `write` is built lazily: nothing is sent when refused.
    pub(crate) async fn send<T, F>(&self, fenced: bool, write: F) -> Result<T, WriteError>
    where
        F: Future<Output = Result<T, kube::Error>>,
    {
        if fenced && !self.leads() {
            return Err(WriteError::NotLeader);
        }
        match tokio::time::timeout(self.timeout, write).await {
            Ok(result) => result.map_err(WriteError::Api),
            Err(_elapsed) => Err(WriteError::TimedOut(self.timeout)),
        }
    }
}

/// Cheap handle that queues writes on the writer task.
#[derive(Clone)]
pub struct Writer {
    fence: Arc<Fence>,
    writes: mpsc::Sender<Envelope>,
    events: EventSender,
    /// For the reads that settle a write whose outcome is unknown (a bind that timed
    /// out); never for writes.
    reads: Client,
}

impl Writer {
    /// A writer whose fenced writes wait for [`Writer::fence_with`], and its task
    /// (run it with [`WriterTask::run`]). Events are published as `reporter`.
    pub fn new(
        client: Client,
        reporter: &str,
        instance: Option<String>,
        timeout: Duration,
    ) -> (Self, WriterTask) {
        let fence = Arc::new(Fence::new(timeout));
        let (writes_tx, writes_rx) = mpsc::channel(MAX_IN_FLIGHT);
        let (lane_tx, lane_rx) = mpsc::channel(LANE_QUEUE);
        let publisher = EventPublisher::new(client.clone(), reporter, instance);
        let task = WriterTask::new(
            client.clone(),
            fence.clone(),
            writes_rx,
            lane_rx,
            publisher,
            reporter.to_owned(),
        );
        let writer = Self {
            fence,
            writes: writes_tx,
            events: EventSender::new(lane_tx),
            reads: client,
        };
        (writer, task)
    }

    /// A client for reads (see the `reads` field).
    pub(crate) fn reads(&self) -> Client {
        self.reads.clone()
    }

    /// Fences every write with `leads` from now on (set once; later calls are ignored).
    pub fn fence_with(&self, leads: LeaderCheck) {
        if self.fence.leads.set(leads).is_err() {
            tracing::warn!("the write fence was already set");
        }
    }

    /// Whether fenced writes may go now (the scheduling loop decides only then).
    pub fn leads(&self) -> bool {
        self.fence.leads()
    }

    /// The handle that queues Events and pod conditions on this writer.
    pub fn events(&self) -> EventSender {
        self.events.clone()
    }

    /// Queues a fenced write (waiting while the queue is full) and returns its reply,
    /// to await where the outcome matters.
    pub async fn submit(&self, request: Request) -> Reply {
        let (tx, rx) = oneshot::channel();
        if let Err(refused) = self.writes.send(Envelope { request, reply: tx }).await {
            let _ = refused.0.reply.send(Err(WriteError::Stopped));
        }
        Reply(rx)
    }

    /// Queues a fenced write and waits for its outcome.
    pub async fn write(&self, request: Request) -> Result<(), WriteError> {
        self.submit(request).await.outcome().await
    }
}

/// The outcome of a queued write, when it has one.
pub struct Reply(oneshot::Receiver<Result<(), WriteError>>);

impl Reply {
    /// Waits for the write to be answered, refused or timed out.
    pub async fn outcome(self) -> Result<(), WriteError> {
        self.0.await.unwrap_or(Err(WriteError::Stopped))
    }
}

/// The Event channel of a writer whose task never runs (unit tests, benchmarks).
pub(crate) fn disabled_lane() -> mpsc::Sender<LaneWrite> {
    let (tx, _rx) = mpsc::channel(1);
    tx
}

#[cfg(test)]
mod tests;
