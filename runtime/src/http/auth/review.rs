//! The two questions to the API server: who holds this token (TokenReview, for the
//! configured audiences), and may they `get` this path (SubjectAccessReview).

use k8s_openapi::api::authentication::v1::{
    TokenReview, TokenReviewSpec, TokenReviewStatus, UserInfo,
};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use super::{AuthError, Decision};

/// Reviews with a client whose ServiceAccount may create both kinds of review.
#[derive(Clone)]
pub(super) struct KubeReview {
    pub(super) client: Client,
    /// The audiences a token must be meant for; empty: the API server's own (what
    /// ServiceAccount tokens and user tokens carry by default).
    pub(super) audiences: Vec<String>,
}

impl KubeReview {
    pub(super) async fn decide(&self, token: String, path: String) -> Result<Decision, AuthError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token),
                audiences: (!self.audiences.is_empty()).then(|| self.audiences.clone()),
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let Some(user) = authenticated_user(reviewed.status, &self.audiences) else {
            return Ok(Decision::Unauthenticated);
        };
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path),
                    verb: Some("get".to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answered = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await?;
        Ok(if answered.status.is_some_and(|s| s.allowed) {
            Decision::Allowed
        } else {
            Decision::Forbidden
        })
    }
}

/// The user a TokenReview authenticated, if it did for one of `audiences`. With
/// audiences asked for, the answer must name one of them: an authenticator that ignores
/// audiences answers with none, and its "authenticated" would hold for any audience.
fn authenticated_user(status: Option<TokenReviewStatus>, audiences: &[String]) -> Option<UserInfo> {
    let status = status.filter(|s| s.authenticated == Some(true))?;
    if !audiences.is_empty() {
        let granted = status.audiences.as_deref().unwrap_or_default();
        if !granted.iter().any(|a| audiences.contains(a)) {
            return None;
        }
    }
    Some(status.user.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(authenticated: bool, audiences: Option<&[&str]>) -> Option<TokenReviewStatus> {
        Some(TokenReviewStatus {
            authenticated: Some(authenticated),
            audiences: audiences.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
            user: Some(UserInfo {
                username: Some("scraper".into()),
                ..UserInfo::default()
            }),
            error: None,
        })
    }

    #[test]
    fn a_token_counts_only_for_the_audiences_asked_for() {
        let none: &[String] = &[];
        let tas = ["tas-metrics".to_owned()];
        // No audience configured: the API server's own, whatever it reports.
        assert!(authenticated_user(status(true, None), none).is_some());
        assert!(authenticated_user(status(false, None), none).is_none());
        assert!(authenticated_user(None, none).is_none());
        // Configured: the answer must name it.
        let user = authenticated_user(status(true, Some(&["tas-metrics"])), &tas);
        assert_eq!(user.and_then(|u| u.username).as_deref(), Some("scraper"));
        assert!(
            authenticated_user(
                status(true, Some(&["https://kubernetes.default.svc"])),
                &tas
            )
            .is_none(),
            "a token for another audience"
        );
        assert!(
            authenticated_user(status(true, None), &tas).is_none(),
            "an authenticator that ignores audiences"
        );
        assert!(authenticated_user(status(false, Some(&["tas-metrics"])), &tas).is_none());
    }
}
