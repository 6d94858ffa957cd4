//! Acting as someone other than the admin: ServiceAccount tokens, clients that use
//! them, RBAC bindings to ServiceAccounts, and SubjectAccessReview ("can-i") checks of
//! what a ServiceAccount may do.
//!
//! The objects are built by pure functions ([`token_request`],
//! [`service_account_binding`], [`service_account_review`]); the `async` functions
//! send them with a client of the caller's choosing.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{ExpressionWarning, ValidatingAdmissionPolicy};
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use kube::api::PostParams;
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};

use crate::{Error, TestCluster, wait_for};

/// A TokenRequest for the API server's own audience, valid for `expiration`, bound to
/// `pod` when given (as the kubelet's projected tokens are: the API server then records
/// the pod's node in the token), else bound to nothing (as `kubectl create token`).
pub fn token_request(expiration: Duration, pod: Option<&Pod>) -> TokenRequest {
    let bound_object_ref = pod.map(|p| BoundObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: p.metadata.name.clone(),
        uid: p.metadata.uid.clone(),
    });
    TokenRequest {
        spec: TokenRequestSpec {
            // Empty: the API server's own audience.
            audiences: Vec::new(),
            bound_object_ref,
            expiration_seconds: Some(i64::try_from(expiration.as_secs()).unwrap_or(i64::MAX)),
        },
        ..TokenRequest::default()
    }
}

/// A token of the existing ServiceAccount `namespace`/`name`, requested by `client`
/// (which may create `serviceaccounts/token` there).
pub async fn service_account_token(
    client: &Client,
    namespace: &str,
    name: &str,
    request: &TokenRequest,
) -> Result<String, Error> {
    let answered = Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create_token_request(name, &PostParams::default(), request)
        .await?;
    answered
        .status
        .map(|s| s.token)
        .ok_or_else(|| Error::NoToken(format!("{namespace}/{name}")))
}

/// Creates the ServiceAccount `namespace`/`name`.
pub async fn create_service_account(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<ServiceAccount, Error> {
    let sa = ServiceAccount {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..ServiceAccount::default()
    };
    Ok(Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &sa)
        .await?)
}

/// A ClusterRoleBinding `name` of the ClusterRole `role` to the ServiceAccount
/// `namespace`/`account`.
pub fn service_account_binding(
    name: &str,
    role: &str,
    namespace: &str,
    account: &str,
) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.to_owned(),
            namespace: Some(namespace.to_owned()),
            ..Subject::default()
        }]),
    }
}

/// A SubjectAccessReview asking whether the ServiceAccount `namespace`/`account` (with
/// the groups the API server gives every ServiceAccount token) may do `attributes`.
pub fn service_account_review(
    namespace: &str,
    account: &str,
    attributes: ResourceAttributes,
) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{namespace}:{account}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(attributes),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

/// Whether the ServiceAccount `namespace`/`account` may do `attributes`, as the API
/// server's authorizer answers `client` (which may create SubjectAccessReviews).
pub async fn service_account_can(
    client: &Client,
    namespace: &str,
    account: &str,
    attributes: ResourceAttributes,
) -> Result<bool, Error> {
    let review = service_account_review(namespace, account, attributes);
    let answered = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answered.status.is_some_and(|s| s.allowed))
}

/// Waits until the API server has type-checked the current generation of the
/// ValidatingAdmissionPolicy `name`; the warnings of that check.
pub async fn policy_type_check_warnings(
    client: &Client,
    name: &str,
    timeout: Duration,
) -> Result<Vec<ExpressionWarning>, Error> {
    let policies = Api::<ValidatingAdmissionPolicy>::all(client.clone());
    let status = wait_for(
        format!("the type check of policy {name}"),
        timeout,
        || async {
            let policy = policies.get(name).await?;
            let generation = policy.metadata.generation;
            Ok::<_, kube::Error>(
                policy
                    .status
                    .filter(|s| s.observed_generation == generation && s.type_checking.is_some()),
            )
        },
    )
    .await?;
    Ok(status
        .type_checking
        .and_then(|t| t.expression_warnings)
        .unwrap_or_default())
}

impl TestCluster {
    /// A new client of this cluster that authenticates with the bearer `token` instead
    /// of the admin's (same server, same CA).
    pub async fn client_with_token(&self, token: &str) -> Result<Client, Error> {
        let mut kubeconfig = Kubeconfig::read_from(self.kubeconfig_path())?;
        let auth = AuthInfo {
            token: Some(token.to_owned().into()),
            ..AuthInfo::default()
        };
        for named in &mut kubeconfig.auth_infos {
            named.auth_info = Some(auth.clone());
        }
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        let url = config.cluster_url.to_string();
        if url.trim_end_matches('/') != self.server_url() {
            return Err(Error::WrongServer {
                expected: self.server_url().to_owned(),
                got: url,
            });
        }
        Ok(Client::try_from(config)?)
    }

    /// A new client of this cluster acting as the ServiceAccount `namespace`/`name`,
    /// with a fresh token (valid for `expiration`) that `admin` requests.
    pub async fn service_account_client(
        &self,
        admin: &Client,
        namespace: &str,
        name: &str,
        expiration: Duration,
    ) -> Result<Client, Error> {
        let request = token_request(expiration, None);
        let token = service_account_token(admin, namespace, name, &request).await?;
        self.client_with_token(&token).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_request_binds_the_pod_it_is_given() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "agent", "uid": "u-1"}
        }))
        .unwrap();
        let bound = token_request(Duration::from_secs(600), Some(&pod)).spec;
        assert_eq!(bound.expiration_seconds, Some(600));
        assert!(bound.audiences.is_empty());
        let r = bound.bound_object_ref.unwrap();
        assert_eq!(r.kind.as_deref(), Some("Pod"));
        assert_eq!(r.name.as_deref(), Some("agent"));
        assert_eq!(r.uid.as_deref(), Some("u-1"));
        let unbound = token_request(Duration::from_secs(60), None).spec;
        assert!(unbound.bound_object_ref.is_none());
    }

    #[test]
    fn a_binding_and_a_review_name_the_service_account() {
        let b = service_account_binding("b", "role", "ns", "sa");
        assert_eq!(b.role_ref.kind, "ClusterRole");
        assert_eq!(b.role_ref.name, "role");
        let s = &b.subjects.unwrap()[0];
        assert_eq!(
            (s.kind.as_str(), s.name.as_str(), s.namespace.as_deref()),
            ("ServiceAccount", "sa", Some("ns"))
        );
        let review = service_account_review("ns", "sa", ResourceAttributes::default());
        assert_eq!(
            review.spec.user.as_deref(),
            Some("system:serviceaccount:ns:sa")
        );
        assert!(
            review
                .spec
                .groups
                .unwrap()
                .contains(&"system:serviceaccounts:ns".to_owned())
        );
    }
}
