//! kubectl's connection flags on a real API server: `--context`, `--cluster` and
//! `--user` pick kubeconfig entries (from `--kubeconfig` or `KUBECONFIG`);
//! `--certificate-authority`, `--server` and `--token` override them; `--as` /
//! `--as-group` impersonate, which the API server refuses to a user who may not and
//! shows in its answers as the impersonated user; `--request-timeout` ends a request the
//! server does not answer.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tas_testcluster::access::{create_service_account, service_account_token, token_request};

use crate::env::env;

fn run<S: AsRef<std::ffi::OsStr>>(args: &[S], kubeconfig_env: Option<&std::path::Path>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kubectl-tas"));
    command
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent");
    if let Some(path) = kubeconfig_env {
        command.env("KUBECONFIG", path);
    }
    command.output().expect("kubectl-tas runs")
}

/// `status -o json` worked: it printed the report.
fn reported(out: &Output) -> bool {
    out.status.success()
        && serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|v| v.get("found").is_some())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_flags_pick_entries_impersonate_and_time_out() {
    let env = env("flags").await;
    let admin: Value =
        serde_norway::from_str(&std::fs::read_to_string(env.cluster.kubeconfig_path()).unwrap())
            .unwrap();
    let server = admin["clusters"][0]["cluster"]["server"]
        .as_str()
        .unwrap()
        .to_owned();
    let ca = admin["clusters"][0]["cluster"]["certificate-authority"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = env.cluster.admin_token().unwrap();
    // The current context points nowhere; "good" is the test cluster; "no-ca" lacks the
    // CA, so only --certificate-authority makes it work.
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "broken",
        "clusters": [
            {"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}},
            {"name": "test", "cluster": {"server": server, "certificate-authority": ca}},
            {"name": "no-ca", "cluster": {"server": server}}
        ],
        "users": [{"name": "admin", "user": {"token": token}}, {"name": "nobody", "user": {}}],
        "contexts": [
            {"name": "broken", "context": {"cluster": "nowhere", "user": "nobody"}},
            {"name": "good", "context": {"cluster": "test", "user": "admin"}},
            {"name": "no-ca", "context": {"cluster": "no-ca", "user": "admin"}}
        ]
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    std::fs::write(&path, serde_norway::to_string(&kubeconfig).unwrap()).unwrap();
    let file = path.to_string_lossy().into_owned();
    let status = ["status", "-o", "json"];
    let with = |extra: &[&str]| -> Vec<String> {
        [&status[..], &["--kubeconfig", &file], extra]
            .concat()
            .into_iter()
            .map(str::to_owned)
            .collect()
    };

    // --context, --cluster/--user, and KUBECONFIG.
    let broken = run(&with(&[]), None);
    assert!(
        !broken.status.success(),
        "the current context points nowhere"
    );
    assert!(
        reported(&run(&with(&["--context", "good"]), None)),
        "{}",
        stderr(&run(&with(&["--context", "good"]), None))
    );
    assert!(reported(&run(
        &with(&["--cluster", "test", "--user", "admin"]),
        None
    )));
    assert!(reported(&run(
        &[&status[..], &["--context", "good"]].concat(),
        Some(&path)
    )));
    let unknown = stderr(&run(&with(&["--context", "missing"]), None));
    assert!(
        unknown.contains("--context: no context \"missing\""),
        "{unknown}"
    );

    // --certificate-authority: without the CA the server's certificate is refused.
    assert!(!run(&with(&["--context", "no-ca"]), None).status.success());
    assert!(reported(&run(
        &with(&["--context", "no-ca", "--certificate-authority", &ca]),
        None
    )));
    assert!(reported(&run(
        &with(&["--context", "no-ca", "--insecure-skip-tls-verify"]),
        None
    )));
    // --server and --token alone, no kubeconfig at all.
    assert!(reported(&run(
        &[
            &status[..],
            &[
                "--server",
                &server,
                "--token",
                &token,
                "--certificate-authority",
                &ca
            ]
        ]
        .concat(),
        None
    )));

    // --as: the API server answers as the impersonated user.
    let alice = stderr(&run(
        &with(&["--context", "good", "--as", "tas-flags-alice"]),
        None,
    ));
    assert!(
        alice.contains("User \"tas-flags-alice\" cannot get resource \"topologyawareschedulings\""),
        "{alice}"
    );
    assert!(reported(&run(
        &with(&[
            "--context",
            "good",
            "--as",
            "tas-flags-alice",
            "--as-group",
            "system:masters"
        ]),
        None
    )));
    // A user who may not impersonate is refused, by name.
    create_service_account(&env.client, &env.ns, "viewer")
        .await
        .unwrap();
    let viewer = service_account_token(
        &env.client,
        &env.ns,
        "viewer",
        &token_request(Duration::from_secs(600), None),
    )
    .await
    .unwrap();
    let refused = stderr(&run(
        &with(&[
            "--context",
            "good",
            "--token",
            &viewer,
            "--as",
            "tas-flags-bob",
        ]),
        None,
    ));
    let user = format!("system:serviceaccount:{}:viewer", env.ns);
    assert!(
        refused.contains(&format!("User \"{user}\" cannot impersonate")),
        "{refused}"
    );

    // --request-timeout: a server that accepts and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in silent.incoming().flatten() {
            held.push(conn);
        }
    });
    let started = Instant::now();
    let out = run(
        &[
            &status[..],
            &[
                "--server",
                &format!("http://{silent_addr}"),
                "--token",
                "t",
                "--request-timeout",
                "2s",
            ],
        ]
        .concat(),
        None,
    );
    let took = started.elapsed();
    assert!(!out.status.success());
    assert!(
        took < Duration::from_secs(30),
        "gave up after {took:?}: {}",
        stderr(&out)
    );
    let bad = stderr(&run(&with(&["--request-timeout", "soon"]), None));
    assert!(bad.contains("not a duration"), "{bad}");
}
