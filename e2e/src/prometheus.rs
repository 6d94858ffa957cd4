//! A real Prometheus server for the tests (built from its Go module by
//! testcluster/tools/build.sh, beside promtool): started on a scrape configuration,
//! asked through its HTTP API (`/api/v1/targets`, `/api/v1/query`,
//! `/api/v1/label/<name>/values`), stopped when dropped.
//!
//! ```text
//! ScrapeJob... ──config()──► prometheus.yml ──Prometheus::start──► server ──query()──► JSON
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Why the server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PrometheusError {
    /// Starting the binary failed.
    #[error("starting {binary}: {source} (testcluster/tools/build.sh builds it)")]
    Start {
        /// The binary.
        binary: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Writing its files failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// An API call failed.
    #[error("GET {path}: {message}")]
    Api {
        /// The request path.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// One scrape target as a ServiceMonitor makes it: the job (the Service's name), the
/// address, its labels, and how to reach it (TLS verified against `ca_file` for
/// `server_name`, the bearer token in `token_file`).
#[derive(Debug, Clone)]
pub struct ScrapeTarget {
    /// `job`: the metrics Service's name.
    pub job: String,
    /// `host:port` of the pod.
    pub address: String,
    /// Target labels (`namespace`, `pod`, `cluster`, ...).
    pub labels: Vec<(String, String)>,
    /// PEM of the CA the serving certificate must chain to.
    pub ca_file: PathBuf,
    /// The name the certificate must be valid for (the Service's DNS name).
    pub server_name: String,
    /// The bearer token.
    pub token_file: PathBuf,
}

/// `prometheus.yml` scraping `targets` every `interval`, one job per target's job.
pub fn config(targets: &[ScrapeTarget], interval: Duration) -> Value {
    let mut jobs: Vec<Value> = Vec::new();
    for t in targets {
        let labels: serde_json::Map<String, Value> = t
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        // One scrape config per target: each may verify another server name.
        jobs.push(json!({
            "job_name": format!("{}-{}", t.job, jobs.len()),
            "scheme": "https",
            "metrics_path": "/metrics",
            "authorization": {"type": "Bearer", "credentials_file": t.token_file},
            "tls_config": {"ca_file": t.ca_file, "server_name": t.server_name},
            "static_configs": [{"targets": [t.address], "labels": labels}],
            // `job` as the ServiceMonitor sets it: the Service's name.
            "relabel_configs": [{"target_label": "job", "replacement": t.job}],
        }));
    }
    json!({
        "global": {"scrape_interval": format!("{}s", interval.as_secs()), "scrape_timeout": format!("{}s", interval.as_secs())},
        "scrape_configs": jobs,
    })
}

/// A running Prometheus server; killed when dropped.
pub struct Prometheus {
    child: Child,
    address: SocketAddr,
}

impl Prometheus {
    /// Starts `binary` with `config` in `dir` (its data and log there), listening on a
    /// free loopback port.
    pub fn start(binary: &Path, config: &Value, dir: &Path) -> Result<Self, PrometheusError> {
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|source| PrometheusError::Write {
                path: path.clone(),
                source,
            })?;
            Ok::<_, PrometheusError>(path)
        };
        let config_file = write("prometheus.yml", config.to_string())?;
        let address = free_port().map_err(|source| PrometheusError::Start {
            binary: binary.to_owned(),
            source,
        })?;
        let log = std::fs::File::create(dir.join("prometheus.log")).map_err(|source| {
            PrometheusError::Write {
                path: dir.join("prometheus.log"),
                source,
            }
        })?;
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={address}"))
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|source| PrometheusError::Start {
                binary: binary.to_owned(),
                source,
            })?;
        Ok(Self { child, address })
    }

    /// The server's address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `GET path?query` on the HTTP API: the `data` of a `success` answer.
    pub async fn get(&self, path: &str, params: &[(&str, &str)]) -> Result<Value, PrometheusError> {
        let query: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        let target = if query.is_empty() {
            path.to_owned()
        } else {
            format!("{path}?{}", query.join("&"))
        };
        let api = |message: String| PrometheusError::Api {
            path: target.clone(),
            message,
        };
        let body = tokio::time::timeout(Duration::from_secs(10), http_get(self.address, &target))
            .await
            .map_err(|_| api("no answer within 10s".to_owned()))?
            .map_err(|e| api(e.to_string()))?;
        let answer: Value = serde_json::from_str(&body).map_err(|e| api(format!("{e}: {body}")))?;
        if answer["status"] != "success" {
            return Err(api(format!("{answer}")));
        }
        Ok(answer["data"].clone())
    }

    /// The result of an instant query: `(labels, value)` per series.
    pub async fn query(&self, promql: &str) -> Result<Vec<(Value, String)>, PrometheusError> {
        let data = self.get("/api/v1/query", &[("query", promql)]).await?;
        Ok(data["result"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                (
                    r["metric"].clone(),
                    r["value"][1].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect())
    }

    /// Every active target: `(job, health, last error)`.
    pub async fn targets(&self) -> Result<Vec<(String, String, String)>, PrometheusError> {
        let data = self.get("/api/v1/targets", &[("state", "active")]).await?;
        Ok(data["activeTargets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                (
                    text(&t["labels"]["job"]),
                    text(&t["health"]),
                    text(&t["lastError"]),
                )
            })
            .collect())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.local_addr()
}

/// Percent-encoding of a query component: everything but RFC 3986's unreserved bytes.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `GET target` over HTTP/1.0 (one request per connection, no chunked body): the body
/// of a 200 answer.
async fn http_get(address: SocketAddr, target: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(address).await?;
    stream
        .write_all(format!("GET {target} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
        .await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no HTTP answer: {raw}")))?;
    let status = head.split(' ').nth(1).unwrap_or_default();
    if status == "200" || status == "400" || status == "422" {
        // The API explains 4xx in its JSON body.
        Ok(body.to_owned())
    } else {
        Err(std::io::Error::other(format!("HTTP {status}: {body}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_components_are_percent_encoded() {
        assert_eq!(
            encode("sum(rate(x{a=~\"b|c\"}[30s]))"),
            "sum%28rate%28x%7Ba%3D~%22b%7Cc%22%7D%5B30s%5D%29%29"
        );
    }

    #[test]
    fn each_target_is_scraped_as_its_service_with_tls_and_a_token() {
        let target = ScrapeTarget {
            job: "tas-scheduler-metrics".into(),
            address: "10.0.0.1:8080".into(),
            labels: vec![("namespace".into(), "tas-system".into())],
            ca_file: "ca.crt".into(),
            server_name: "tas-scheduler-metrics.tas-system.svc".into(),
            token_file: "token".into(),
        };
        let config = config(&[target], Duration::from_secs(2));
        let job = &config["scrape_configs"][0];
        assert_eq!(job["scheme"], "https");
        assert_eq!(
            job["tls_config"]["server_name"],
            "tas-scheduler-metrics.tas-system.svc"
        );
        assert_eq!(job["authorization"]["credentials_file"], "token");
        assert_eq!(
            job["relabel_configs"][0]["replacement"],
            "tas-scheduler-metrics"
        );
        assert_eq!(
            job["static_configs"][0]["labels"]["namespace"],
            "tas-system"
        );
    }
}
