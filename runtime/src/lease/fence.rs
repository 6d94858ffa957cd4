//! The write fence: whether an API write that only the leader may make (a bind, an
//! eviction) may be sent now.
//!
//! Leading is not enough. A write takes time, and the holder's leadership ends at its
//! renew deadline whether or not the write has. So a write is sent only while this
//! process stays leader for longer than the fence's *margin*, and is given up after the
//! margin (its request timeout): every write then ends before the renew deadline, which
//! is itself a third of the lease duration before another candidate may take over.
//!
//! The margin is [`LeaseConfig::write_margin`](super::LeaseConfig::write_margin), a
//! sixth of the lease duration; the fence and the timeout use the same value, so they
//! cannot drift apart.
//!
//! On shutdown, [`WriteFence::close`] shuts the fence for good and waits out the margin
//! if this process was leading, so that every write let through before has ended; the
//! lease can then be released and a successor start at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::LeaderStatus;

/// Guards the writes only the leader may make. Cheap to clone; clones share one state.
#[derive(Debug, Clone)]
pub struct WriteFence {
    status: LeaderStatus,
    margin: Duration,
    closed: Arc<AtomicBool>,
}

/// Why a fenced write was not made, or did not end in time.
#[derive(Debug, thiserror::Error)]
pub enum FenceError<E> {
    /// Not sent: this process does not lead for longer than the margin (or the fence
    /// was closed for shutdown).
    #[error("not sent: not leading for longer than the {0:?} write margin")]
    Closed(Duration),
    /// Sent, but given up after the margin; it may or may not have been applied.
    #[error("given up after the {0:?} write margin")]
    TimedOut(Duration),
    /// Sent and answered with an error.
    #[error(transparent)]
    Failed(E),
}

impl WriteFence {
    /// A fence on `status` letting writes through only while leading for longer than
    /// `margin`.
    pub fn new(status: LeaderStatus, margin: Duration) -> Self {
        Self {
            status,
            margin,
            closed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The margin: how long before the renew deadline writes stop, and how long one
    /// may take.
    pub fn margin(&self) -> Duration {
        self.margin
    }

    /// Whether a write may be sent now. Check it right before sending, and bound the
    /// request by [`margin`](Self::margin) (or use [`write`](Self::write)).
    pub fn is_open(&self) -> bool {
        !self.closed.load(Ordering::SeqCst) && self.status.leads_for(self.margin)
    }

    /// Sends `request` if the fence is open, giving it up after the margin.
    pub async fn write<T, E>(
        &self,
        request: impl Future<Output = Result<T, E>>,
    ) -> Result<T, FenceError<E>> {
        if !self.is_open() {
            return Err(FenceError::Closed(self.margin));
        }
        match tokio::time::timeout(self.margin, request).await {
            Ok(result) => result.map_err(FenceError::Failed),
            Err(_elapsed) => Err(FenceError::TimedOut(self.margin)),
        }
    }

    /// Shuts the fence for good, then, if this process leads, waits the margin: a write
    /// let through before the close has ended (or been given up) by then, so the lease
    /// can be released without two processes writing at once.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if self.status.is_leader() {
            tokio::time::sleep(self.margin).await;
        }
    }
}
