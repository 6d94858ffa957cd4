//! `/metrics` as every TAS binary serves it, against the real API server: over TLS,
//! authorised with TokenReview + SubjectAccessReview for tokens bound to the
//! `tas-metrics-reader` ClusterRole of `config/rbac/`.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tas_testcluster::{TestCluster, access, unique_name, unique_namespace, wait_for};

/// How long a new RBAC binding may take to reach the authorizer.
const AUTHORISED_WITHIN: Duration = Duration::from_secs(30);

/// The ClusterRole scrapers are bound to, from `config/rbac/`.
fn metrics_reader_role() -> ClusterRole {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/rbac/metrics_reader_role.yaml");
    let text = std::fs::read_to_string(path).expect("metrics reader role readable");
    serde_norway::from_str(&text).expect("a ClusterRole")
}

/// A token of a new ServiceAccount `name` in `ns`.
async fn account_token(admin: &Client, ns: &str, name: &str) -> String {
    access::create_service_account(admin, ns, name)
        .await
        .expect("service account");
    let request = access::token_request(Duration::from_secs(600), None);
    access::service_account_token(admin, ns, name, &request)
        .await
        .expect("token")
}

/// `/metrics` as every TAS binary serves it: over TLS, to a token whose user may `get`
/// `/metrics` (bound to `tas-metrics-reader`); 401 without a token or with one the API
/// server does not know, 403 for a known user without the permission. `/readyz` tells
/// why it is not ready only to the authorised caller. The reviews run under a
/// ServiceAccount with only the operands' two review rules.
#[tokio::test]
async fn metrics_answer_only_an_authorised_token() {
    use tas_runtime::http::{self, Authorizer, CertSource, Readiness, Security};

    let cluster = TestCluster::shared().expect("the shared test cluster starts");
    let _logs = cluster.log_guard();
    let admin = cluster.client().await.unwrap();
    let ns = unique_namespace(&admin, "metrics-auth").await.unwrap();
    let post = PostParams::default();

    let reader_role = metrics_reader_role();
    Api::<ClusterRole>::all(admin.clone())
        .patch(
            reader_role.metadata.name.as_deref().unwrap(),
            &PatchParams::apply(tas_testcluster::FIELD_MANAGER).force(),
            &Patch::Apply(&reader_role),
        )
        .await
        .expect("tas-metrics-reader applied");
    let bind = |name: String, role: &str, sa: &str| -> ClusterRoleBinding {
        access::service_account_binding(&name, role, &ns, sa)
    };
    let bindings = Api::<ClusterRoleBinding>::all(admin.clone());

    // The component: may only review, as the operands' ClusterRoles allow.
    let reviewer_role = unique_name("reviewer");
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": reviewer_role },
        "rules": [
            { "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"] },
            { "apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"] },
        ],
    }))
    .unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&post, &role)
        .await
        .expect("reviewer role");
    let component_token = account_token(&admin, &ns, "component").await;
    bindings
        .create(
            &post,
            &bind(reviewer_role.clone(), &reviewer_role, "component"),
        )
        .await
        .expect("reviewer binding");
    let scraper_token = account_token(&admin, &ns, "scraper").await;
    bindings
        .create(
            &post,
            &bind(unique_name("scraper"), "tas-metrics-reader", "scraper"),
        )
        .await
        .expect("scraper binding");
    let stranger_token = account_token(&admin, &ns, "stranger").await;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let component = cluster
        .client_with_token(&component_token)
        .await
        .expect("a client with the component's token");
    let readiness = Readiness::not_ready("watch failed: internal detail");
    let server = tokio::spawn(http::serve_on(
        listener,
        Security::Secure {
            cert: CertSource::SelfSigned {
                names: vec!["localhost".into()],
            },
            authorizer: Authorizer::new(component),
        },
        http::Metrics::from_fn(|| Ok("tas_test_up 1\n# EOF\n".to_owned())),
        readiness.clone(),
        std::future::pending(),
    ));
    let get = |path: &'static str, token: Option<String>| async move {
        tas_testcluster::https_get(addr, path, token.as_deref())
            .await
            .expect("an HTTPS answer")
    };

    // RBAC bindings reach the authorizer after a moment: poll for the first success.
    let (code, body) = wait_for(
        "the scraper's token authorised",
        AUTHORISED_WITHIN,
        || async {
            let answer = get("/metrics", Some(scraper_token.clone())).await;
            Ok::<_, String>((answer.0 == 200).then_some(answer))
        },
    )
    .await
    .unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("tas_test_up 1"), "{body}");

    assert_eq!(get("/metrics", None).await.0, 401, "anonymous");
    assert_eq!(
        get("/metrics", Some("not-a-token".into())).await.0,
        401,
        "a token the API server does not know"
    );
    assert_eq!(
        get("/metrics", Some(stranger_token.clone())).await,
        (403, "Forbidden".into()),
        "a known user without the permission"
    );

    // Probes need nothing; the reason for not being ready is for the reader only.
    assert_eq!(get("/healthz", None).await, (200, "ok".into()));
    assert_eq!(get("/readyz", None).await, (503, "not ready".into()));
    assert_eq!(
        get("/readyz", Some(stranger_token)).await,
        (503, "not ready".into())
    );
    assert_eq!(
        get("/readyz", Some(scraper_token)).await,
        (503, "watch failed: internal detail".into())
    );
    server.abort();
}

/// The ClusterRole people who debug scheduling are bound to, from `config/rbac/`.
fn debug_reader_role() -> ClusterRole {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/rbac/debug_reader_role.yaml");
    let text = std::fs::read_to_string(path).expect("debug reader role readable");
    serde_norway::from_str(&text).expect("a ClusterRole")
}

/// `GET path` over TLS with the token in the header the API server's service proxy
/// passes on (it keeps no `Authorization`), as `kubectl tas` sends it.
async fn get_proxied(addr: std::net::SocketAddr, path: &str, token: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = tas_testcluster::tls_connect_insecure(tcp, addr.ip())
        .await
        .unwrap();
    let header = tas_scheduler::debug::TOKEN_HEADER;
    let request =
        format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n{header}: Bearer {token}\r\n\r\n");
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = tls.read_to_end(&mut raw).await;
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
    (code, body.to_owned())
}

/// The scheduler's debug routes `/debug/reservations` and `/debug/decisions` (a
/// component's own routes) against the real API server: 401 without a token, 403 for a
/// known user without `get` on that path (a scraper bound to `tas-metrics-reader`
/// included, and a user granted only the other debug path), 200 for a user bound to
/// `tas-debug-reader`, with the token in `Authorization` or in the proxy's header, the
/// query string of `/debug/decisions` included.
#[tokio::test]
async fn debug_routes_answer_only_a_debug_reader() {
    use tas_runtime::http::{self, Authorizer, CertSource, Readiness, Security};
    use tas_scheduler::debug::{DECISIONS_PATH, RESERVATIONS_PATH};

    let cluster = TestCluster::shared().expect("the shared test cluster starts");
    let _logs = cluster.log_guard();
    let admin = cluster.client().await.unwrap();
    let ns = unique_namespace(&admin, "debug-auth").await.unwrap();
    let apply = PatchParams::apply(tas_testcluster::FIELD_MANAGER).force();
    let roles = Api::<ClusterRole>::all(admin.clone());
    for role in [metrics_reader_role(), debug_reader_role()] {
        let name = role.metadata.name.clone().unwrap();
        roles
            .patch(&name, &apply, &Patch::Apply(&role))
            .await
            .expect("reader role applied");
    }
    // A role of the reservations alone, as `tas-debug-reader` was before decisions.
    let reservations_only = unique_name("reservations-only");
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": reservations_only },
        "rules": [{ "nonResourceURLs": [RESERVATIONS_PATH], "verbs": ["get"] }],
    }))
    .unwrap();
    let post = PostParams::default();
    roles
        .create(&post, &role)
        .await
        .expect("reservations-only role");
    let bindings = Api::<ClusterRoleBinding>::all(admin.clone());
    let mut tokens = Vec::new();
    for (account, role) in [
        ("debugger", "tas-debug-reader"),
        ("scraper", "tas-metrics-reader"),
        ("partial", reservations_only.as_str()),
    ] {
        tokens.push(account_token(&admin, &ns, account).await);
        let binding = access::service_account_binding(&unique_name(account), role, &ns, account);
        bindings
            .create(&post, &binding)
            .await
            .expect("reader binding");
    }
    let [debugger, scraper, partial] = <[String; 3]>::try_from(tokens).unwrap();
    let stranger = account_token(&admin, &ns, "stranger").await;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let extra = axum::Router::new()
        .route(
            RESERVATIONS_PATH,
            axum::routing::get(|| async { "the reservations" }),
        )
        .route(
            DECISIONS_PATH,
            axum::routing::get(|| async { "the decisions" }),
        );
    let server = tokio::spawn(http::serve_on_with(
        listener,
        Security::Secure {
            cert: CertSource::SelfSigned {
                names: vec!["localhost".into()],
            },
            authorizer: Authorizer::new(admin.clone()),
        },
        http::Metrics::none(),
        Readiness::not_ready("starting"),
        extra,
        std::future::pending(),
    ));
    let get = |path: &'static str, token: Option<String>| async move {
        tas_testcluster::https_get(addr, path, token.as_deref())
            .await
            .expect("an HTTPS answer")
    };
    let authorised = |what: &'static str, path: &'static str, token: String| {
        wait_for(what, AUTHORISED_WITHIN, move || {
            let token = token.clone();
            async move {
                let answer = get(path, Some(token)).await;
                Ok::<_, String>((answer.0 == 200).then_some(answer))
            }
        })
    };

    let allowed = authorised(
        "the debugger's token authorised",
        RESERVATIONS_PATH,
        debugger.clone(),
    )
    .await
    .unwrap();
    assert_eq!(allowed, (200, "the reservations".into()));
    assert_eq!(
        get(DECISIONS_PATH, Some(debugger.clone())).await,
        (200, "the decisions".into())
    );
    assert_eq!(
        get_proxied(addr, RESERVATIONS_PATH, &debugger).await,
        (200, "the reservations".into()),
        "the token in the service proxy's header"
    );
    assert_eq!(
        get_proxied(
            addr,
            &format!("{DECISIONS_PATH}?namespace=a&pod=b&limit=3"),
            &debugger
        )
        .await,
        (200, "the decisions".into()),
        "a query string is authorised as its path"
    );
    for path in [RESERVATIONS_PATH, DECISIONS_PATH] {
        assert_eq!(get(path, None).await.0, 401, "anonymous on {path}");
        assert_eq!(
            get(path, Some("not-a-token".into())).await.0,
            401,
            "unknown token on {path}"
        );
        assert_eq!(
            get(path, Some(stranger.clone())).await,
            (403, "Forbidden".into()),
            "a known user without the permission on {path}"
        );
        assert_eq!(
            get_proxied(addr, path, &stranger).await.0,
            403,
            "the same through the proxy's header on {path}"
        );
    }
    // Wait until the partial reader may read the reservations, so its 403 on the
    // decisions is the path's refusal and not a binding not yet seen.
    authorised(
        "the partial reader's token authorised",
        RESERVATIONS_PATH,
        partial.clone(),
    )
    .await
    .unwrap();
    assert_eq!(
        get(DECISIONS_PATH, Some(partial.clone())).await.0,
        403,
        "a grant of /debug/reservations does not cover /debug/decisions"
    );
    assert_eq!(
        get_proxied(addr, &format!("{DECISIONS_PATH}?limit=1"), &partial)
            .await
            .0,
        403,
        "nor with a query string"
    );
    // Likewise for the scraper and /metrics.
    authorised(
        "the scraper's token authorised",
        "/metrics",
        scraper.clone(),
    )
    .await
    .unwrap();
    for path in [RESERVATIONS_PATH, DECISIONS_PATH] {
        assert_eq!(
            get(path, Some(scraper.clone())).await.0,
            403,
            "/metrics grants no debug reading ({path})"
        );
    }
    server.abort();
}
