//! The scheduler's debug endpoints, read through the API server's service proxy:
//! `GET /api/v1/namespaces/NS/services/[SCHEME:]NAME:PORT/proxy/debug/reservations` (or
//! `.../proxy/debug/decisions?namespace=&pod=&limit=`).
//! The API server authorises it as `get` on `services/proxy` in NS and connects to one
//! ready endpoint of the Service (kube-proxy is not involved). The scheduler then asks
//! the API server about the bearer token the request carries in [`TOKEN_HEADER`] (the
//! proxy drops `Authorization`): its user needs `get` on the non-resource URL
//! of the path (ClusterRole `tas-debug-reader` grants both).

use http::Request;
use kube::Client;
use tas_scheduler::debug::{DECISIONS_PATH, RESERVATIONS_PATH, ReservationsReport, TOKEN_HEADER};
use tas_scheduler::decisions::{DecisionQuery, DecisionsReport};

use crate::connect::BearerToken;
use crate::error::Error;

/// The Service the operator renders in front of the scheduler's HTTP port.
pub const DEFAULT_SERVICE: &str = "tas-scheduler-metrics";
/// Its port, by name.
pub const DEFAULT_PORT: &str = "https";
/// The scheme the scheduler serves (TLS unless it runs with `--insecure-http`).
pub const DEFAULT_SCHEME: &str = "https";

/// Where the scheduler's HTTP server is, as a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerService {
    /// The Service's namespace (the stack's `spec.namespace`).
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The port, by name or number.
    pub port: String,
    /// `http` or `https`; empty lets the API server pick (`http`).
    pub scheme: String,
    /// What the scheduler is shown; without one it answers 401.
    pub token: Option<BearerToken>,
}

impl SchedulerService {
    /// The API server path that proxies `path` (starting with `/`) to the Service.
    pub fn proxy_path(&self, path: &str) -> String {
        let scheme = if self.scheme.is_empty() {
            String::new()
        } else {
            format!("{}:", self.scheme)
        };
        format!(
            "/api/v1/namespaces/{}/services/{scheme}{}:{}/proxy{path}",
            self.namespace, self.name, self.port
        )
    }

    /// Reads the scheduler's reserve cache.
    pub async fn reservations(&self, client: &Client) -> Result<ReservationsReport, Error> {
        self.get_json(client, &self.proxy_path(RESERVATIONS_PATH))
            .await
    }

    /// Reads the scheduler's recent scheduling attempts that `query` selects.
    pub async fn decisions(
        &self,
        client: &Client,
        query: &DecisionQuery,
    ) -> Result<DecisionsReport, Error> {
        self.get_json(client, &self.decisions_path(query)).await
    }

    /// The proxy path of [`DECISIONS_PATH`] with `query`'s parameters.
    pub fn decisions_path(&self, query: &DecisionQuery) -> String {
        let mut params = query.to_query_string();
        if !params.is_empty() {
            params.insert(0, '?');
        }
        format!("{}{params}", self.proxy_path(DECISIONS_PATH))
    }

    /// `GET path` (a proxy path) with the token, parsed as JSON.
    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        client: &Client,
        path: &str,
    ) -> Result<T, Error> {
        let path = path.to_owned();
        let mut request = Request::get(&path);
        if let Some(token) = &self.token {
            request = request.header(TOKEN_HEADER, format!("Bearer {}", token.0));
        }
        let request = request
            .body(Vec::new())
            .map_err(|e| Error::api(path.clone())(kube::Error::HttpError(e)))?;
        let text = client
            .request_text(request)
            .await
            .map_err(Error::api(path.clone()))?;
        serde_json::from_str(&text).map_err(|source| Error::Decode { path, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_service_proxy_path_with_and_without_a_scheme() {
        let mut s = SchedulerService {
            namespace: "tas-system".into(),
            name: DEFAULT_SERVICE.into(),
            port: DEFAULT_PORT.into(),
            scheme: String::new(),
            token: None,
        };
        assert_eq!(
            s.proxy_path(RESERVATIONS_PATH),
            "/api/v1/namespaces/tas-system/services/tas-scheduler-metrics:https/proxy/debug/reservations"
        );
        s.scheme = "https".into();
        s.port = "8443".into();
        assert_eq!(
            s.proxy_path("/debug/reservations"),
            "/api/v1/namespaces/tas-system/services/https:tas-scheduler-metrics:8443/proxy/debug/reservations"
        );
    }

    #[test]
    fn the_decisions_path_carries_the_query() {
        let s = SchedulerService {
            namespace: "tas".into(),
            name: DEFAULT_SERVICE.into(),
            port: DEFAULT_PORT.into(),
            scheme: String::new(),
            token: None,
        };
        assert_eq!(
            s.decisions_path(&DecisionQuery::default()),
            "/api/v1/namespaces/tas/services/tas-scheduler-metrics:https/proxy/debug/decisions"
        );
        let q = DecisionQuery {
            namespace: Some("team a".into()),
            pod: Some("web-0".into()),
            limit: Some(5),
        };
        assert!(
            s.decisions_path(&q)
                .ends_with("/proxy/debug/decisions?namespace=team%20a&pod=web-0&limit=5")
        );
    }
}
