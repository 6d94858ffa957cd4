//! Readiness: "not ready, because ..." until the component says otherwise (caches
//! synced, leader elected, first publish done). Cloned into whatever flips it and into
//! the HTTP server that reports it on `/readyz`.

use std::sync::{Arc, Mutex, PoisonError};

/// Shared readiness flag with the reason for not being ready.
#[derive(Debug, Clone)]
pub struct Readiness {
    /// `None` when ready; otherwise why not.
    not_ready: Arc<Mutex<Option<String>>>,
}

impl Readiness {
    /// Not ready yet, for `reason` (shown on `/readyz`).
    pub fn not_ready(reason: impl Into<String>) -> Self {
        Self {
            not_ready: Arc::new(Mutex::new(Some(reason.into()))),
        }
    }

    /// Marks the component ready.
    pub fn set_ready(&self) {
        *self.lock() = None;
    }

    /// Marks the component not ready, for `reason`.
    pub fn set_not_ready(&self, reason: impl Into<String>) {
        *self.lock() = Some(reason.into());
    }

    /// `Ok` when ready, otherwise the reason.
    pub fn check(&self) -> Result<(), String> {
        match &*self.lock() {
            None => Ok(()),
            Some(reason) => Err(reason.clone()),
        }
    }

    /// Whether the component is ready.
    pub fn is_ready(&self) -> bool {
        self.check().is_ok()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        // The guarded value is replaced whole, so a panic elsewhere cannot leave it
        // half-written: a poisoned lock is still good to use.
        self.not_ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_state() {
        let readiness = Readiness::not_ready("caches not synced");
        let handle = readiness.clone();
        assert_eq!(readiness.check(), Err("caches not synced".into()));
        handle.set_ready();
        assert!(readiness.is_ready());
        handle.set_not_ready("lost the API server");
        assert_eq!(readiness.check(), Err("lost the API server".into()));
    }
}
