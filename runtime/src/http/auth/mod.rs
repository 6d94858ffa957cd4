//! Who may read `/metrics`, the components' own routes such as the scheduler's
//! `/debug/reservations` (and why `/readyz` is not ready): the API server decides, as
//! for kube-rbac-proxy and controller-runtime's secure metrics.
//!
//! A caller sends `Authorization: Bearer <token>` (or, through the API server's service
//! proxy, which drops `Authorization` once it has authenticated the caller,
//! [`PROXIED_AUTHORIZATION`]). A TokenReview asks the API server who the token belongs
//! to, for the configured audiences (401 when nobody); a SubjectAccessReview asks
//! whether that user may `get` the non-resource URL (403 when not). Scrapers are granted
//! `/metrics` by the ClusterRole `tas-metrics-reader`, people who debug scheduling
//! `/debug/reservations` by `tas-debug-reader` (`config/rbac/`). [`limits`] bounds what
//! the reviews cost the API server: decisions are cached for a few seconds per token,
//! and reviews of unknown tokens are limited in number at a time and per second.

mod limits;
mod review;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use kube::Client;

pub use limits::Limits;
use limits::{Cache, Key, ReviewBudget};
use review::KubeReview;

/// The header that carries the bearer token through the API server's service proxy.
pub const PROXIED_AUTHORIZATION: &str = "tas-authorization";

/// The answer for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The token's user may `get` the path.
    Allowed,
    /// No token, or one the API server does not recognise: HTTP 401.
    Unauthenticated,
    /// A known user without the permission: HTTP 403.
    Forbidden,
}

/// Why no decision was made.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The API server could not be asked (HTTP 503).
    #[error("reviewing the caller with the API server: {0}")]
    Api(#[from] kube::Error),
    /// Too many reviews at once or in the last interval; the API server was not asked
    /// (HTTP 429).
    #[error("too many token reviews; try again shortly")]
    Busy,
}

type ReviewFuture = Pin<Box<dyn Future<Output = Result<Decision, AuthError>> + Send>>;
/// (token, path) → the API server's decision.
type Review = dyn Fn(String, String) -> ReviewFuture + Send + Sync;

/// Asks the API server about bearer tokens; cheap to clone.
#[derive(Clone)]
pub struct Authorizer {
    review: Arc<Review>,
    cache: Arc<Cache>,
    budget: Arc<ReviewBudget>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer").finish_non_exhaustive()
    }
}

impl Authorizer {
    /// Reviews with `client`, whose ServiceAccount needs `create` on `tokenreviews` and
    /// `subjectaccessreviews`, accepting tokens meant for the API server itself.
    pub fn new(client: Client) -> Self {
        Self::with_audiences(client, Vec::new())
    }

    /// As [`Authorizer::new`], accepting only tokens meant for one of `audiences`
    /// (empty: the API server's own).
    pub fn with_audiences(client: Client, audiences: Vec<String>) -> Self {
        let review = KubeReview { client, audiences };
        Self::from_review(Limits::default(), move |token, path| {
            let review = review.clone();
            Box::pin(async move { review.decide(token, path).await })
        })
    }

    /// Decides with `review` within `limits`: for tests of the limits.
    fn from_review(
        limits: Limits,
        review: impl Fn(String, String) -> ReviewFuture + Send + Sync + 'static,
    ) -> Self {
        Self {
            review: Arc::new(review),
            cache: Arc::new(Cache::new(limits)),
            budget: Arc::new(ReviewBudget::new(limits)),
        }
    }

    /// Whether `token` (the bearer token, if any) may `get` `path`. Concurrent calls
    /// for the same token and path share one review.
    pub async fn decide(&self, token: Option<&str>, path: &str) -> Result<Decision, AuthError> {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Ok(Decision::Unauthenticated);
        };
        let slot = self.cache.slot(Key::new(token, path));
        let decided = slot
            .get_or_try_init(|| async {
                let _permit = self.budget.admit().ok_or(AuthError::Busy)?;
                (self.review)(token.to_owned(), path.to_owned()).await
            })
            .await?;
        Ok(*decided)
    }
}

/// The token of an `Authorization: Bearer <token>` header value.
pub fn bearer_token(header: Option<&str>) -> Option<&str> {
    let value = header?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::Semaphore;

    use super::*;

    /// A fake API server for the load paths a real one cannot be made to show on demand:
    /// counts the reviews it is asked for and answers `answer` once `gate` lets it.
    fn counting(
        limits: Limits,
        answer: Decision,
        gate: Arc<Semaphore>,
    ) -> (Authorizer, Arc<AtomicUsize>) {
        let reviews = Arc::new(AtomicUsize::new(0));
        let counted = reviews.clone();
        let authorizer = Authorizer::from_review(limits, move |_, _| {
            counted.fetch_add(1, Ordering::SeqCst);
            let gate = gate.clone();
            Box::pin(async move {
                let _pass = gate.acquire().await.map_err(|_| AuthError::Busy)?;
                Ok(answer)
            })
        });
        (authorizer, reviews)
    }

    fn open() -> Arc<Semaphore> {
        Arc::new(Semaphore::new(Semaphore::MAX_PERMITS))
    }

    async fn until(what: &str, mut done: impl FnMut() -> bool) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while !done() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{what} within 10s"));
    }

    /// A hundred requests with the same unknown token, half of them at once while the
    /// first review is in flight: one review.
    #[tokio::test]
    async fn the_same_bad_token_costs_one_review() {
        let gate = Arc::new(Semaphore::new(0));
        let (authorizer, reviews) =
            counting(Limits::default(), Decision::Unauthenticated, gate.clone());
        let concurrent: Vec<_> = (0..50)
            .map(|_| {
                let authorizer = authorizer.clone();
                tokio::spawn(async move { authorizer.decide(Some("bad"), "/metrics").await })
            })
            .collect();
        until("the first review", || reviews.load(Ordering::SeqCst) > 0).await;
        gate.add_permits(Semaphore::MAX_PERMITS);
        for request in concurrent {
            let decided = request.await.unwrap();
            assert_eq!(decided.unwrap(), Decision::Unauthenticated);
        }
        for _ in 0..50 {
            let decided = authorizer.decide(Some("bad"), "/metrics").await;
            assert_eq!(decided.unwrap(), Decision::Unauthenticated);
        }
        assert_eq!(reviews.load(Ordering::SeqCst), 1);
    }

    /// Twenty different tokens at once while the API server is slow: only the allowed
    /// number of reviews reach it; the others are refused at once as busy.
    #[tokio::test]
    async fn reviews_in_flight_are_bounded() {
        let limits = Limits {
            concurrent_reviews: 4,
            ..Limits::default()
        };
        let gate = Arc::new(Semaphore::new(0));
        let (authorizer, reviews) = counting(limits, Decision::Forbidden, gate.clone());
        let requests: Vec<_> = (0..20)
            .map(|i| {
                let authorizer = authorizer.clone();
                let token = format!("token-{i}");
                tokio::spawn(async move { authorizer.decide(Some(&token), "/metrics").await })
            })
            .collect();
        until("16 requests refused", || {
            requests.iter().filter(|r| r.is_finished()).count() >= 16
        })
        .await;
        assert_eq!(reviews.load(Ordering::SeqCst), 4);
        gate.add_permits(Semaphore::MAX_PERMITS);
        let mut answers = (0, 0);
        for request in requests {
            match request.await.unwrap() {
                Ok(Decision::Forbidden) => answers.0 += 1,
                Err(AuthError::Busy) => answers.1 += 1,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(answers, (4, 16), "(reviewed, refused as busy)");
        assert_eq!(reviews.load(Ordering::SeqCst), 4);
    }

    /// Past the interval's budget new tokens are refused without a review; decisions
    /// already made are still answered from the cache.
    #[tokio::test]
    async fn reviews_per_interval_are_bounded() {
        let limits = Limits {
            reviews_per_interval: 5,
            interval: Duration::from_secs(3600),
            ..Limits::default()
        };
        let (authorizer, reviews) = counting(limits, Decision::Allowed, open());
        for i in 0..5 {
            let decided = authorizer.decide(Some(&format!("t{i}")), "/metrics").await;
            assert_eq!(decided.unwrap(), Decision::Allowed);
        }
        for i in 5..10 {
            let decided = authorizer.decide(Some(&format!("t{i}")), "/metrics").await;
            assert!(matches!(decided, Err(AuthError::Busy)), "{decided:?}");
        }
        let cached = authorizer.decide(Some("t0"), "/metrics").await;
        assert_eq!(cached.unwrap(), Decision::Allowed);
        assert_eq!(reviews.load(Ordering::SeqCst), 5);
    }

    /// Random tokens cannot grow the cache past its bound, nor push out the decisions
    /// made before it filled.
    #[tokio::test]
    async fn the_cache_is_bounded() {
        let limits = Limits {
            max_entries: 3,
            ..Limits::default()
        };
        let (authorizer, reviews) = counting(limits, Decision::Unauthenticated, open());
        for i in 0..10 {
            let _ = authorizer
                .decide(Some(&format!("random-{i}")), "/metrics")
                .await;
        }
        assert_eq!(authorizer.cache.len(), 3);
        let before = reviews.load(Ordering::SeqCst);
        let _ = authorizer.decide(Some("random-0"), "/metrics").await;
        assert_eq!(reviews.load(Ordering::SeqCst), before, "kept in the cache");
    }

    #[tokio::test]
    async fn no_token_is_unauthenticated_without_a_review() {
        let (authorizer, reviews) = counting(Limits::default(), Decision::Allowed, open());
        assert_eq!(
            authorizer.decide(None, "/metrics").await.unwrap(),
            Decision::Unauthenticated
        );
        assert_eq!(
            authorizer.decide(Some(""), "/metrics").await.unwrap(),
            Decision::Unauthenticated
        );
        assert_eq!(reviews.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn bearer_tokens_are_read_from_the_header() {
        assert_eq!(bearer_token(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(Some("Basic abc")), None);
        assert_eq!(bearer_token(Some("Bearer ")), None);
        assert_eq!(bearer_token(None), None);
    }
}
