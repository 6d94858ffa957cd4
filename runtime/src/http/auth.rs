//! Who may read `/metrics` (and why `/readyz` is not ready): the API server decides, as
//! for kube-rbac-proxy and controller-runtime's secure metrics.
//!
//! A caller sends `Authorization: Bearer <token>`. A TokenReview asks the API server
//! who the token belongs to (401 when nobody); a SubjectAccessReview asks whether that
//! user may `get` the non-resource URL (403 when not). Scrapers are granted it by a
//! ClusterRole such as `tas-metrics-reader` (`nonResourceURLs: ["/metrics"]`, verb
//! `get`). Decisions are cached for a few seconds per token, so a scrape every few
//! seconds costs the API server one pair of reviews per interval, not per request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

/// How long a decision is reused for the same token and path.
const CACHE_TTL: Duration = Duration::from_secs(10);
/// Cached decisions kept at most; the cache is emptied when it fills (a scraper fleet
/// is small, so this only bounds what random tokens can make it hold).
const CACHE_MAX: usize = 256;

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

/// Why the API server could not be asked.
#[derive(Debug, thiserror::Error)]
#[error("reviewing the caller with the API server: {0}")]
pub struct AuthError(#[from] kube::Error);

/// Decisions by (token, path), with when they were made.
type Cache = HashMap<(String, String), (Decision, Instant)>;

/// Asks the API server about bearer tokens; cheap to clone.
#[derive(Clone)]
pub struct Authorizer {
    client: Client,
    cache: Arc<Mutex<Cache>>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer").finish_non_exhaustive()
    }
}

impl Authorizer {
    /// Reviews with `client`, whose ServiceAccount needs `create` on `tokenreviews` and
    /// `subjectaccessreviews`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: Arc::default(),
        }
    }

    /// Whether `token` (the bearer token, if any) may `get` `path`.
    pub async fn decide(&self, token: Option<&str>, path: &str) -> Result<Decision, AuthError> {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Ok(Decision::Unauthenticated);
        };
        let key = (token.to_owned(), path.to_owned());
        if let Some(decision) = self.cached(&key) {
            return Ok(decision);
        }
        let decision = self.review(token, path).await?;
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= CACHE_MAX {
            cache.clear();
        }
        cache.insert(key, (decision, Instant::now()));
        Ok(decision)
    }

    fn cached(&self, key: &(String, String)) -> Option<Decision> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .get(key)
            .filter(|(_, at)| at.elapsed() < CACHE_TTL)
            .map(|(d, _)| *d)
    }

    async fn review(&self, token: &str, path: &str) -> Result<Decision, AuthError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                // The API server's own audience, as for any in-cluster client token.
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let Some(status) = reviewed.status.filter(|s| s.authenticated == Some(true)) else {
            return Ok(Decision::Unauthenticated);
        };
        let user = status.user.unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some("get".to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answered = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await?;
        let allowed = answered.status.is_some_and(|s| s.allowed);
        Ok(if allowed {
            Decision::Allowed
        } else {
            Decision::Forbidden
        })
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
    use super::*;

    #[test]
    fn bearer_tokens_are_read_from_the_header() {
        assert_eq!(bearer_token(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(Some("Basic abc")), None);
        assert_eq!(bearer_token(Some("Bearer ")), None);
        assert_eq!(bearer_token(None), None);
    }
}
