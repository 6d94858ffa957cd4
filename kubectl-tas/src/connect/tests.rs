use super::*;

fn kubeconfig() -> Kubeconfig {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "current-context": "one",
        "clusters": [
            {"name": "c1", "cluster": {"server": "https://one:6443", "certificate-authority-data": "AAAA"}},
            {"name": "c2", "cluster": {"server": "https://two:6443"}}
        ],
        "users": [
            {"name": "u1", "user": {"client-certificate-data": "AAAA", "client-key-data": "AAAA"}},
            {"name": "u2", "user": {"token": "two"}}
        ],
        "contexts": [
            {"name": "one", "context": {"cluster": "c1", "user": "u1", "namespace": "ns1"}},
            {"name": "two", "context": {"cluster": "c2", "user": "u2"}}
        ]
    }))
    .unwrap()
}

fn cluster<'a>(k: &'a Kubeconfig, name: &str) -> &'a Cluster {
    k.clusters
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.cluster.as_ref())
        .unwrap()
}

fn user<'a>(k: &'a Kubeconfig, name: &str) -> &'a AuthInfo {
    k.auth_infos
        .iter()
        .find(|u| u.name == name)
        .and_then(|u| u.auth_info.as_ref())
        .unwrap()
}

#[test]
fn flags_change_only_the_entries_the_context_selects() {
    let options = KubeOptions {
        context: Some("two".into()),
        server: Some("https://elsewhere:443".into()),
        insecure_skip_tls_verify: true,
        as_user: Some("alice".into()),
        as_groups: vec!["g1".into(), "g2".into()],
        as_uid: Some("42".into()),
        ..KubeOptions::default()
    };
    let (k, load) = with_overrides(kubeconfig(), &options).unwrap();
    assert_eq!(load.context.as_deref(), Some("two"));
    assert_eq!(load.cluster.as_deref(), Some("c2"));
    assert_eq!(load.user.as_deref(), Some("u2"));
    let c2 = cluster(&k, "c2");
    assert_eq!(c2.server.as_deref(), Some("https://elsewhere:443"));
    assert_eq!(c2.insecure_skip_tls_verify, Some(true));
    assert_eq!(
        cluster(&k, "c1").server.as_deref(),
        Some("https://one:6443")
    );
    let u2 = user(&k, "u2");
    assert_eq!(u2.impersonate.as_deref(), Some("alice"));
    assert_eq!(u2.impersonate_groups, Some(vec!["g1".into(), "g2".into()]));
    assert_eq!(u2.impersonate_uid.as_deref(), Some("42"));
    assert_eq!(user(&k, "u1").impersonate, None);
}

#[test]
fn a_token_replaces_the_users_credentials_and_cluster_user_flags_pick_entries() {
    let options = KubeOptions {
        cluster: Some("c2".into()),
        user: Some("u1".into()),
        token: Some("secret".into()),
        certificate_authority: Some("/ca.pem".into()),
        ..KubeOptions::default()
    };
    let (k, load) = with_overrides(kubeconfig(), &options).unwrap();
    assert_eq!(load.context.as_deref(), Some("one"));
    assert_eq!(load.cluster.as_deref(), Some("c2"));
    assert_eq!(load.user.as_deref(), Some("u1"));
    let u1 = user(&k, "u1");
    assert!(u1.token.is_some());
    assert_eq!(u1.client_certificate_data, None);
    assert_eq!(
        cluster(&k, "c2").certificate_authority.as_deref(),
        Some("/ca.pem")
    );
}

#[test]
fn unknown_entries_are_refused_naming_the_flag() {
    for (options, want) in [
        (
            KubeOptions {
                context: Some("three".into()),
                ..KubeOptions::default()
            },
            "--context: no context \"three\" in the kubeconfig",
        ),
        (
            KubeOptions {
                cluster: Some("c9".into()),
                ..KubeOptions::default()
            },
            "--cluster: no cluster \"c9\" in the kubeconfig",
        ),
        (
            KubeOptions {
                user: Some("u9".into()),
                ..KubeOptions::default()
            },
            "--user: no user \"u9\" in the kubeconfig",
        ),
    ] {
        let Err(err) = with_overrides(kubeconfig(), &options) else {
            panic!("{options:?} accepted");
        };
        assert_eq!(err.to_string(), want);
    }
}

#[test]
fn flags_alone_make_a_context_of_their_own() {
    let options = KubeOptions {
        server: Some("https://api:6443".into()),
        token: Some("t".into()),
        ..KubeOptions::default()
    };
    let (k, load) = with_overrides(Kubeconfig::default(), &options).unwrap();
    assert_eq!(load.context.as_deref(), Some(FLAGS_ENTRY));
    assert_eq!(
        cluster(&k, FLAGS_ENTRY).server.as_deref(),
        Some("https://api:6443")
    );
    assert!(user(&k, FLAGS_ENTRY).token.is_some());
}

#[test]
fn request_timeouts_parse_like_kubectls() {
    for (text, want) in [
        ("0", Duration::ZERO),
        ("5", Duration::from_secs(5)),
        ("30s", Duration::from_secs(30)),
        ("2m", Duration::from_secs(120)),
        ("1h", Duration::from_secs(3600)),
        ("250ms", Duration::from_millis(250)),
        ("1.5s", Duration::from_millis(1500)),
    ] {
        assert_eq!(parse_timeout(text), Ok(want), "{text}");
    }
    assert!(
        parse_timeout("soon")
            .unwrap_err()
            .contains("not a duration")
    );
    assert!(
        parse_timeout("3d")
            .unwrap_err()
            .contains("unknown unit \"d\"")
    );
}
