//! Counters of a [`PodResourcesClient`](super::PodResourcesClient), shared with whoever
//! turns them into readiness and Prometheus metrics.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::error::ErrorKind;

/// Lock-free counters updated by the client on every call. Read them from a metrics
/// collector or a readiness probe; all counters only grow.
#[derive(Debug, Default)]
pub struct ClientStats {
    connected: AtomicBool,
    calls: AtomicU64,
    connects: AtomicU64,
    reconnects: AtomicU64,
    errors: [AtomicU64; ErrorKind::ALL.len()],
}

impl ClientStats {
    /// Whether a connection to the kubelet is established and has not failed since.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Calls made, successful or not.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Connections established, the first one included.
    pub fn connects(&self) -> u64 {
        self.connects.load(Ordering::Relaxed)
    }

    /// Connections established to replace one that was dropped after a failure.
    pub fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }

    /// Failed calls of one kind.
    pub fn errors(&self, kind: ErrorKind) -> u64 {
        self.errors[kind.index()].load(Ordering::Relaxed)
    }

    /// Failed calls of every kind.
    pub fn total_errors(&self) -> u64 {
        ErrorKind::ALL.iter().map(|&kind| self.errors(kind)).sum()
    }

    pub(crate) fn record_call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_connect(&self, replaces_dropped: bool) {
        self.connects.fetch_add(1, Ordering::Relaxed);
        if replaces_dropped {
            self.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        self.connected.store(true, Ordering::Relaxed);
    }

    pub(crate) fn record_disconnect(&self) {
        self.connected.store(false, Ordering::Relaxed);
    }

    pub(crate) fn record_error(&self, kind: ErrorKind) {
        self.errors[kind.index()].fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_kind() {
        let stats = ClientStats::default();
        stats.record_error(ErrorKind::Timeout);
        stats.record_error(ErrorKind::Timeout);
        stats.record_error(ErrorKind::RateLimited);
        assert_eq!(stats.errors(ErrorKind::Timeout), 2);
        assert_eq!(stats.errors(ErrorKind::RateLimited), 1);
        assert_eq!(stats.errors(ErrorKind::Other), 0);
        assert_eq!(stats.total_errors(), 3);
    }

    #[test]
    fn connection_state_follows_connects_and_disconnects() {
        let stats = ClientStats::default();
        assert!(!stats.is_connected());
        stats.record_connect(false);
        assert!(stats.is_connected());
        stats.record_disconnect();
        stats.record_connect(true);
        assert_eq!((stats.connects(), stats.reconnects()), (2, 1));
    }
}
