//! What one caller can make the API server do: every request with a bearer token may
//! cost a TokenReview and a SubjectAccessReview, so decisions are cached (positive and
//! negative alike, keyed by a digest of the token, never the token itself), concurrent
//! requests with the same token share one review, and reviews of tokens not in the
//! cache are limited in number at a time and per interval. A request over the limit
//! is refused at once ([`super::AuthError::Busy`], HTTP 429) without asking anybody,
//! so a flood of random tokens costs the API server a bounded rate of reviews.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ring::digest::{SHA256, digest};
use tokio::sync::{OnceCell, OwnedSemaphorePermit, Semaphore};

use super::Decision;

/// The bounds of the cache and of the reviews.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a decision is reused for the same token and path.
    pub ttl: Duration,
    /// Decisions kept at most (a scraper fleet is small: this bounds what random
    /// tokens can make the cache hold).
    pub max_entries: usize,
    /// Reviews in flight at most.
    pub concurrent_reviews: usize,
    /// Reviews started at most per `interval`.
    pub reviews_per_interval: u32,
    /// The interval of `reviews_per_interval`.
    pub interval: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(10),
            max_entries: 1024,
            concurrent_reviews: 8,
            reviews_per_interval: 20,
            interval: Duration::from_secs(1),
        }
    }
}

/// A cache key: the SHA-256 of the token and the path it asks for. A digest, so that
/// the process's memory does not keep every token it was sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    token: [u8; 32],
    path: String,
}

impl Key {
    pub(super) fn new(token: &str, path: &str) -> Self {
        let mut hashed = [0u8; 32];
        hashed.copy_from_slice(digest(&SHA256, token.as_bytes()).as_ref());
        Self {
            token: hashed,
            path: path.to_owned(),
        }
    }
}

/// One decision, made once by whichever request gets there first.
pub(super) type Slot = Arc<OnceCell<Decision>>;

struct Entry {
    slot: Slot,
    created: Instant,
}

/// Decisions by [`Key`], each reused for [`Limits::ttl`].
pub(super) struct Cache {
    limits: Limits,
    entries: Mutex<HashMap<Key, Entry>>,
}

impl Cache {
    pub(super) fn new(limits: Limits) -> Self {
        Self {
            limits,
            entries: Mutex::default(),
        }
    }

    /// The slot of `key`: the cached one while fresh (decided, or being decided by a
    /// request in flight), else a new one. When the cache is full of fresh entries the
    /// new slot is not kept: the decision is made (within the review limits) but not
    /// remembered, rather than evicting what the regular callers use.
    pub(super) fn slot(&self, key: Key) -> Slot {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let ttl = self.limits.ttl;
        if let Some(entry) = entries.get(&key).filter(|e| e.created.elapsed() < ttl) {
            return entry.slot.clone();
        }
        if entries.len() >= self.limits.max_entries {
            entries.retain(|_, e| e.created.elapsed() < ttl);
        }
        let slot = Slot::default();
        if entries.len() < self.limits.max_entries {
            let created = Instant::now();
            let kept = Entry {
                slot: slot.clone(),
                created,
            };
            entries.insert(key, kept);
        }
        slot
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// How many reviews may run now.
pub(super) struct ReviewBudget {
    limits: Limits,
    in_flight: Arc<Semaphore>,
    /// The current interval's start and the reviews started in it.
    window: Mutex<(Instant, u32)>,
}

impl ReviewBudget {
    pub(super) fn new(limits: Limits) -> Self {
        Self {
            limits,
            in_flight: Arc::new(Semaphore::new(limits.concurrent_reviews)),
            window: Mutex::new((Instant::now(), 0)),
        }
    }

    /// A permit for one review, held while it runs; `None` when too many run or the
    /// interval's budget is spent.
    pub(super) fn admit(&self) -> Option<OwnedSemaphorePermit> {
        let permit = self.in_flight.clone().try_acquire_owned().ok()?;
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        if window.0.elapsed() >= self.limits.interval {
            *window = (Instant::now(), 0);
        }
        if window.1 >= self.limits.reviews_per_interval {
            return None;
        }
        window.1 += 1;
        Some(permit)
    }
}
