//! The monitoring bundle against a running stack and a real Prometheus server (built
//! from its Go module by testcluster/tools/build.sh, beside promtool): TAS installed
//! from `config/default` with the `config/serving-certs` component (its cert-manager
//! Certificates issued by the test's own CA into the Secrets they name, since the test
//! cluster has no cert-manager), the object asking for `servingCertificate: Secret`,
//! and the scrape identity of `config/prometheus/scraper.yaml`. Prometheus scrapes
//! every component as the ServiceMonitors say — HTTPS verified against `ca.crt` of the
//! component's Secret for the Service's DNS name, the bearer token of the
//! `tas-metrics-scraper-token` Secret — so a target is up only if all of that works.
//! Then every query of every dashboard panel, with the dashboard's variables filled in,
//! must return data, and so must the variables' own queries. Last, the scheduler's
//! certificate is rotated in its Secret and new connections get the new one from the
//! running process.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tas_api::tas::ServingCertificate;
use tas_e2e::chart::documents;
use tas_e2e::prometheus::{Prometheus, ScrapeTarget, config};
use tas_e2e::serving_certs::{TestCa, certificate_request};
use tas_e2e::stack::{
    self, AGENTS_NAMESPACE, Operands, apply_cr, start_nodes, wait_operands, wait_operator_pods,
};
use tas_testcluster::{ClusterOptions, TestCluster, Tools, unique_namespace, wait_for};

const NAMESPACE: &str = "tas-system";
const SCHEDULER: &str = "topology-aware-scheduler";
const TIMEOUT: Duration = Duration::from_secs(120);
/// The `cluster` label the scrape config gives every target, as a relabelling would.
const CLUSTER: &str = "e2e";
/// Prometheus's scrape interval here, and the `$__rate_interval` the panels get: four
/// scrapes, the least Grafana picks.
const SCRAPE_INTERVAL: Duration = Duration::from_secs(2);
const RATE_INTERVAL: &str = "8s";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn kubectl(cluster: &TestCluster, args: &[&str], stdin: Option<&str>) -> String {
    let mut child = Command::new(cluster.binaries_dir().join("kubectl"))
        .arg(format!(
            "--kubeconfig={}",
            cluster.kubeconfig_path().display()
        ))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(text) = stdin {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `config/default` with the `config/serving-certs` component, as an admin composes
/// them: the rendered objects.
fn render_with_serving_certs(cluster: &TestCluster, dir: &Path) -> Vec<Value> {
    let config = repo().join("config");
    let overlay = dir.join("overlay");
    std::fs::create_dir_all(&overlay).unwrap();
    // Kustomize takes only relative paths: from the overlay up to `/`, then down.
    let config = config.canonicalize().unwrap();
    let up = "../".repeat(overlay.canonicalize().unwrap().components().count() - 1);
    let relative = |dir: &str| {
        format!(
            "{up}{}",
            config.join(dir).strip_prefix("/").unwrap().display()
        )
    };
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "resources: [{}]\ncomponents: [{}]\n",
            relative("default"),
            relative("serving-certs")
        ),
    )
    .unwrap();
    let yaml = kubectl(
        cluster,
        &[
            "kustomize",
            "--load-restrictor=LoadRestrictionsNone",
            overlay.to_str().unwrap(),
        ],
        None,
    );
    documents(&yaml).expect("kustomize renders YAML")
}

/// Applies `objects` (server-side, as `kubectl apply --server-side` does).
fn apply(cluster: &TestCluster, objects: &[&Value]) {
    if objects.is_empty() {
        return;
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    kubectl(
        cluster,
        &["apply", "--server-side", "-f", "-"],
        Some(&list.to_string()),
    );
}

/// The dashboard's panels: (title, queries).
fn panels() -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(repo().join("config/prometheus/tas-dashboard.json"))
        .expect("the dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard JSON");
    dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] != "row")
        .map(|p| {
            let queries = p["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["expr"].as_str().map(str::to_owned))
                .collect();
            (p["title"].as_str().unwrap_or_default().to_owned(), queries)
        })
        .collect()
}

/// `expr` with the dashboard's variables as a user's default selection sets them: this
/// cluster, every namespace (the variable's *All*, `.*`), the rate interval.
fn substitute(expr: &str) -> String {
    expr.replace("$cluster", CLUSTER)
        .replace("$namespace", ".*")
        .replace("$__rate_interval", RATE_INTERVAL)
}

/// The bearer token in the Secret `tas-metrics-scraper-token` of `namespace`, once the
/// token controller has filled it.
async fn scraper_token(client: &Client, namespace: &str) -> String {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    wait_for(
        "the scraper's token Secret to be filled",
        TIMEOUT,
        || async {
            let secret = secrets.get_opt("tas-metrics-scraper-token").await?;
            let token = secret
                .and_then(|s| s.data)
                .and_then(|d| d.get("token").cloned())
                .map(|t| String::from_utf8_lossy(&t.0).into_owned());
            Ok::<_, kube::Error>(token)
        },
    )
    .await
    .expect("a token in tas-metrics-scraper-token")
}

/// The leaf certificate a new TLS connection to `ip:port` is shown.
async fn served_certificate(ip: std::net::IpAddr, port: u16) -> Option<Vec<u8>> {
    let tcp = tokio::net::TcpStream::connect((ip, port)).await.ok()?;
    let tls = tas_testcluster::tls_connect_insecure(tcp, ip).await.ok()?;
    Some(tls.get_ref().1.peer_certificates()?.first()?.to_vec())
}

fn pod_address(pod: &Pod) -> (std::net::IpAddr, u16) {
    let ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .and_then(|ip| ip.parse().ok())
        .expect("a pod IP");
    let port = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some("https"))
        .map(|p| p.container_port)
        .expect("an https port");
    (ip, u16::try_from(port).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_dashboard_panel_returns_data_from_a_real_prometheus() {
    let prometheus_bin = Tools::locate()
        .expect("the cluster tools (testcluster/tools/build.sh)")
        .binary("prometheus");
    let cluster = TestCluster::start(ClusterOptions::full()).expect("control plane");
    let client = cluster.client().await.expect("client");
    let work = tempfile::tempdir().expect("work dir");

    // config/default + config/serving-certs; the cert-manager objects become what
    // cert-manager would write: a Secret per Certificate, from the test's CA.
    let rendered = render_with_serving_certs(&cluster, work.path());
    let is_cert_manager = |o: &&Value| {
        o["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("cert-manager.io/"))
    };
    let namespaces: Vec<&Value> = rendered
        .iter()
        .filter(|o| o["kind"] == "Namespace")
        .collect();
    apply(&cluster, &namespaces);
    let ca = TestCa::new().expect("a CA");
    let mut issued = BTreeMap::new();
    for (namespace, secret, names) in rendered
        .iter()
        .filter(is_cert_manager)
        .filter_map(certificate_request)
    {
        let leaf = ca.leaf(&names).expect("a serving certificate");
        Api::<Secret>::namespaced(client.clone(), &namespace)
            .create(
                &PostParams::default(),
                &ca.secret(&namespace, &secret, &leaf),
            )
            .await
            .expect("the Certificate's Secret");
        issued.insert(secret, names);
    }
    assert_eq!(
        issued.keys().collect::<Vec<_>>(),
        [
            "tas-operator-metrics-tls",
            "tas-scheduler-metrics-tls",
            "tas-updater-metrics-tls"
        ],
        "config/serving-certs issues a certificate per metrics Service"
    );
    let rest: Vec<&Value> = rendered
        .iter()
        .filter(|o| o["kind"] != "Namespace" && !is_cert_manager(o))
        .collect();
    apply(&cluster, &rest);
    // The bundle's scrape identity (the rest of config/prometheus needs the Prometheus
    // Operator's CRDs; its monitors are what the scrape config below mirrors).
    let scraper = std::fs::read_to_string(repo().join("config/prometheus/scraper.yaml"))
        .expect("scraper.yaml");
    kubectl(
        &cluster,
        &["apply", "--server-side", "-f", "-"],
        Some(&scraper),
    );

    let scenario = stack::two_zone_nodes("dash")
        .expect("scenario")
        .with_node_label(stack::SAMPLE_NODE_LABEL, stack::SAMPLE_NODE_LABEL_VALUE);
    let (_sim, runner) = start_nodes(&cluster, &client, &scenario, work.path(), Vec::new())
        .await
        .expect("simulated nodes and the pod runner");
    let pod_logs = runner.log_guard();
    let operators = wait_operator_pods(&client, &runner, NAMESPACE, TIMEOUT)
        .await
        .expect("the operator's pods run");
    let mut cr = stack::sample_cr().expect("sample CR");
    cr.spec.observability.serving_certificate = ServingCertificate::Secret;
    apply_cr(&client, &cr).await.expect("CR applied");
    let nodes = scenario.nodes().len();
    let Operands {
        updaters,
        schedulers,
    } = wait_operands(&client, &runner, NAMESPACE, nodes, TIMEOUT)
        .await
        .expect("an updater per node, Available with fresh NRTs, the scheduler running");

    // Prometheus scrapes every pod as its ServiceMonitor would.
    let ca_file = work.path().join("ca.crt");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let mut targets = Vec::new();
    for (pods, service) in [
        (&operators, "tas-operator-metrics"),
        (&schedulers, "tas-scheduler-metrics"),
        (&updaters, "tas-updater-metrics"),
    ] {
        for pod in pods {
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let token_file = work.path().join(format!("token-{namespace}"));
            if !token_file.exists() {
                std::fs::write(&token_file, scraper_token(&client, &namespace).await).unwrap();
            }
            let (ip, port) = pod_address(pod);
            targets.push(ScrapeTarget {
                job: service.to_owned(),
                address: format!("{ip}:{port}"),
                labels: vec![
                    ("cluster".to_owned(), CLUSTER.to_owned()),
                    ("namespace".to_owned(), namespace.clone()),
                    (
                        "pod".to_owned(),
                        pod.metadata.name.clone().unwrap_or_default(),
                    ),
                ],
                ca_file: ca_file.clone(),
                server_name: format!("{service}.{namespace}.svc"),
                token_file,
            });
        }
    }
    let prom_dir = work.path().join("prometheus");
    std::fs::create_dir_all(&prom_dir).unwrap();
    let prometheus = Prometheus::start(
        &prometheus_bin,
        &config(&targets, SCRAPE_INTERVAL),
        &prom_dir,
    )
    .expect("Prometheus starts");
    let prom_log = || std::fs::read_to_string(prom_dir.join("prometheus.log")).unwrap_or_default();
    let up = wait_for(
        "every target up (TLS verified, token accepted)",
        TIMEOUT,
        || async {
            let up = prometheus.targets().await.map_err(|e| e.to_string())?;
            let all_up =
                up.len() == targets.len() && up.iter().all(|(_, health, _)| health == "up");
            Ok::<_, String>(all_up.then_some(up))
        },
    )
    .await;
    let up = match up {
        Ok(t) => t,
        Err(e) => panic!(
            "{e}; targets: {:?}\nPrometheus log:\n{}",
            prometheus.targets().await,
            prom_log()
        ),
    };
    eprintln!("{} targets up: {up:?}", up.len());

    // Activity for the scheduling panels: a pod that fits one zone, one that fits none.
    let ns = unique_namespace(&client, "dashboard").await.unwrap();
    stack::create_fits_and_no_zone(&client, &ns, SCHEDULER)
        .await
        .expect("pods created");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    wait_for("the fitting pod to be bound", TIMEOUT, || async {
        let p = pods.get("fits").await?;
        Ok::<_, kube::Error>(p.spec.and_then(|s| s.node_name))
    })
    .await
    .expect("fits is scheduled");

    // The variables' own queries: the cluster label and both namespaces.
    for (label, want) in [
        ("cluster", vec![CLUSTER]),
        ("namespace", vec![AGENTS_NAMESPACE, NAMESPACE]),
    ] {
        let data = prometheus
            .get(
                &format!("/api/v1/label/{label}/values"),
                &[(
                    "match[]",
                    &substitute("up{job=~\"tas-.*-metrics\",cluster=~\"$cluster\"}"),
                )],
            )
            .await
            .expect("label values");
        let values: Vec<&str> = data
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(values, want, "variable {label}");
    }

    // Every panel's every query, until each returns data. The scheduling panels have
    // data once the two pods above were tried; the others from the first scrapes. A
    // series at 0 counts (errors by kind, bind errors, resync outcomes that did not
    // happen: the components export every label value from the start, so the panel
    // draws a zero line rather than "no data"), as does a quantile of an interval
    // without observations (NaN: Grafana leaves a gap).
    let panels = panels();
    assert!(panels.len() >= 10, "{panels:?}");
    let mut empty = Vec::new();
    for (title, queries) in &panels {
        assert!(!queries.is_empty(), "panel {title} has no query");
        for expr in queries {
            assert!(
                expr.contains("cluster=~\"$cluster\"")
                    && expr.contains("namespace=~\"$namespace\""),
                "panel {title}: {expr} selects on both variables"
            );
            let promql = substitute(expr);
            let result = wait_for(
                format!("panel {title}: {promql}"),
                Duration::from_secs(60),
                || async {
                    let r = prometheus.query(&promql).await.map_err(|e| e.to_string())?;
                    Ok::<_, String>((!r.is_empty()).then_some(r))
                },
            )
            .await;
            match result {
                Ok(series) => eprintln!(
                    "panel {title}: {promql} → {} series: {series:?}",
                    series.len()
                ),
                Err(e) => empty.push(e.to_string()),
            }
        }
    }
    assert!(
        empty.is_empty(),
        "queries without data:\n{}",
        empty.join("\n")
    );

    // Rotation: a new certificate in the scheduler's Secret reaches new connections of
    // the running scheduler (the runner updates the volume as the kubelet does; the
    // process re-reads the files), and Prometheus keeps scraping it.
    let scheduler = &schedulers[0];
    let (ip, port) = pod_address(scheduler);
    let names = issued["tas-scheduler-metrics-tls"].clone();
    let rotated = ca.leaf(&names).expect("a new certificate");
    let before = served_certificate(ip, port).await.expect("a TLS handshake");
    assert_ne!(before, rotated.der);
    Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .patch(
            "tas-scheduler-metrics-tls",
            &PatchParams::apply("tas-e2e").force(),
            &Patch::Apply(ca.secret(NAMESPACE, "tas-scheduler-metrics-tls", &rotated)),
        )
        .await
        .expect("the Secret renewed");
    wait_for(
        "the scheduler to serve the rotated certificate",
        TIMEOUT,
        || async {
            let served = served_certificate(ip, port).await;
            Ok::<_, String>((served.as_deref() == Some(rotated.der.as_slice())).then_some(()))
        },
    )
    .await
    .expect("the rotated certificate is served without a restart");
    let log = scheduler
        .metadata
        .name
        .as_deref()
        .map(|name| runner.log(NAMESPACE, name).unwrap_or_default())
        .unwrap_or_default();
    assert!(
        log.contains("serving the new certificate to new connections"),
        "the scheduler logs the reload"
    );
    let reloaded = wait_for(
        "the scheduler's reload counted in Prometheus",
        TIMEOUT,
        || async {
            let r = prometheus
                .query("tas_serving_certificate_reloads_total{job=\"tas-scheduler-metrics\"} > 0")
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((!r.is_empty()).then_some(r))
        },
    )
    .await;
    assert!(reloaded.is_ok(), "{reloaded:?}");

    drop(pod_logs);
    drop(prometheus);
    runner.shutdown().await;
}
