//! A real OpenTelemetry Collector for the tests: the binary `testcluster/tools/build-otelcol.sh`
//! builds from Go modules (the core OTLP receiver and the contrib file exporter), found
//! through `TAS_OTELCOL_BIN` (`make test` sets it). It listens for OTLP/gRPC and
//! OTLP/HTTP on two loopback ports and writes every batch it receives as one line of
//! OTLP JSON to a file, which [`Collector::received`] reads back.

use serde_json::Value;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

use crate::stack::StackError;

/// The environment variable naming the collector binary.
pub const BIN_ENV: &str = "TAS_OTELCOL_BIN";

/// A running collector; dropping it kills the process.
pub struct Collector {
    child: Child,
    address: SocketAddr,
    http_address: SocketAddr,
    output: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// One span as the collector wrote it.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// Its resource's `service.name`.
    pub service: String,
    /// The span name.
    pub name: String,
    /// The span's attributes, values as JSON (OTLP's `AnyValue`).
    pub attributes: Vec<(String, Value)>,
    /// Its trace id (hex).
    pub trace_id: String,
    /// Its span id (hex).
    pub span_id: String,
    /// Its parent's span id (hex; empty for a root span).
    pub parent_span_id: String,
}

impl ReceivedSpan {
    /// A string attribute.
    pub fn string(&self, key: &str) -> Option<&str> {
        self.value(key)?.get("stringValue")?.as_str()
    }

    /// An attribute's `AnyValue`.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
}

/// One metric as the collector wrote it (the last data point set of each export).
#[derive(Debug, Clone)]
pub struct ReceivedMetric {
    /// Its resource's `service.name`.
    pub service: String,
    /// The metric name.
    pub name: String,
    /// The metric as OTLP JSON (`sum`, `gauge` or `histogram` with its data points).
    pub data: Value,
}

/// Everything received so far.
#[derive(Debug, Default, Clone)]
pub struct Received {
    /// Every span.
    pub spans: Vec<ReceivedSpan>,
    /// Every metric of every export.
    pub metrics: Vec<ReceivedMetric>,
}

impl Received {
    /// The spans of `service` named `name`.
    pub fn spans_of<'a>(
        &'a self,
        service: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = &'a ReceivedSpan> + 'a {
        self.spans
            .iter()
            .filter(move |s| s.service == service && s.name == name)
    }

    /// Whether `service` exported a metric named `name`.
    pub fn has_metric(&self, service: &str, name: &str) -> bool {
        self.metrics
            .iter()
            .any(|m| m.service == service && m.name == name)
    }
}

impl Collector {
    /// Starts the collector from `TAS_OTELCOL_BIN` and waits until it accepts
    /// connections. `pids_file` (the test cluster's watchdog file) gets its pid.
    pub async fn start(pids_file: Option<&Path>) -> Result<Self, StackError> {
        let bin = std::env::var_os(BIN_ENV).map(PathBuf::from).ok_or_else(|| {
            StackError(format!(
                "{BIN_ENV} is not set: build the collector with testcluster/tools/build-otelcol.sh \
                 and set {BIN_ENV} to the path it prints (make test does both)"
            ))
        })?;
        let dir = tempfile::tempdir().map_err(StackError::ctx("a directory for the collector"))?;
        let address = free_port()?;
        let http_address = free_port()?;
        let output = dir.path().join("received.jsonl");
        let log = dir.path().join("otelcol.log");
        let config = dir.path().join("config.yaml");
        std::fs::write(&config, config_yaml(address, http_address, &output))
            .map_err(StackError::ctx("writing the collector's config"))?;
        let log_file =
            std::fs::File::create(&log).map_err(StackError::ctx("creating the collector's log"))?;
        let child = Command::new(&bin)
            .arg(format!("--config={}", config.display()))
            .stdin(Stdio::null())
            .stdout(
                log_file
                    .try_clone()
                    .map_err(StackError::ctx("the collector's log"))?,
            )
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .map_err(StackError::ctx(&format!("starting {}", bin.display())))?;
        if let (Some(file), Some(pid)) = (pids_file, child.id()) {
            tas_nodesim::runner::track_pid(file, pid)
                .map_err(StackError::ctx("recording the collector's pid"))?;
        }
        let collector = Self {
            child,
            address,
            http_address,
            output,
            log,
            _dir: dir,
        };
        let started = tas_testcluster::wait_for(
            "the collector to accept OTLP connections (gRPC and HTTP)",
            Duration::from_secs(30),
            || async {
                let grpc = tokio::net::TcpStream::connect(address).await.is_ok();
                let http = tokio::net::TcpStream::connect(http_address).await.is_ok();
                Ok::<_, std::io::Error>((grpc && http).then_some(()))
            },
        )
        .await;
        if let Err(e) = started {
            return Err(StackError(format!("{e}; its log:\n{}", collector.log())));
        }
        Ok(collector)
    }

    /// Where it listens for OTLP/gRPC.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Where it listens for OTLP/HTTP (`/v1/traces`, `/v1/metrics`).
    pub fn http_address(&self) -> SocketAddr {
        self.http_address
    }

    /// The collector's own log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Everything in the output file so far (a line still being written is skipped).
    pub fn received(&self) -> Received {
        let text = std::fs::read_to_string(&self.output).unwrap_or_default();
        let mut received = Received::default();
        for line in text.lines() {
            if let Ok(batch) = serde_json::from_str::<Value>(line) {
                parse_batch(&batch, &mut received);
            }
        }
        received
    }

    /// Stops the collector.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The receiver on `address` (gRPC) and `http_address` (HTTP), the file exporter to
/// `output`, nothing else: no telemetry port of its own, so collectors of parallel
/// tests do not collide.
fn config_yaml(address: SocketAddr, http_address: SocketAddr, output: &Path) -> String {
    let path = serde_json::to_string(&output.display().to_string()).unwrap_or_default();
    format!(
        r#"receivers:
  otlp:
    protocols:
      grpc:
        endpoint: {address}
      http:
        endpoint: {http_address}
exporters:
  file:
    path: {path}
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces: {{receivers: [otlp], exporters: [file]}}
    metrics: {{receivers: [otlp], exporters: [file]}}
"#
    )
}

fn free_port() -> Result<SocketAddr, StackError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(StackError::ctx("finding a free port for the collector"))?;
    listener
        .local_addr()
        .map_err(StackError::ctx("finding a free port for the collector"))
}

/// `service.name` of an OTLP JSON resource.
fn service_name(resource: &Value) -> String {
    attributes(resource.get("resource").and_then(|r| r.get("attributes")))
        .into_iter()
        .find(|(k, _)| k == "service.name")
        .and_then(|(_, v)| v.get("stringValue")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn attributes(list: Option<&Value>) -> Vec<(String, Value)> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|kv| {
            Some((
                kv.get("key")?.as_str()?.to_owned(),
                kv.get("value").cloned().unwrap_or(Value::Null),
            ))
        })
        .collect()
}

fn array<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> + 'a {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn parse_batch(batch: &Value, into: &mut Received) {
    for resource in array(batch, "resourceSpans") {
        let service = service_name(resource);
        for scope in array(resource, "scopeSpans") {
            for span in array(scope, "spans") {
                into.spans.push(ReceivedSpan {
                    service: service.clone(),
                    name: text(span, "name"),
                    attributes: attributes(span.get("attributes")),
                    trace_id: text(span, "traceId"),
                    span_id: text(span, "spanId"),
                    parent_span_id: text(span, "parentSpanId"),
                });
            }
        }
    }
    for resource in array(batch, "resourceMetrics") {
        let service = service_name(resource);
        for scope in array(resource, "scopeMetrics") {
            for metric in array(scope, "metrics") {
                into.metrics.push(ReceivedMetric {
                    service: service.clone(),
                    name: text(metric, "name"),
                    data: metric.clone(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_of_the_file_exporter_parses() {
        let line = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"tas-scheduler"}}]},"scopeSpans":[{"scope":{},"spans":[{"traceId":"01","spanId":"02","parentSpanId":"03","name":"bind","attributes":[{"key":"k8s.node.name","value":{"stringValue":"n1"}}]}]}]}]}"#;
        let mut r = Received::default();
        parse_batch(&serde_json::from_str(line).unwrap(), &mut r);
        let span = r.spans_of("tas-scheduler", "bind").next().unwrap();
        assert_eq!(span.string("k8s.node.name"), Some("n1"));
        assert_eq!(span.parent_span_id, "03");
        let line = r#"{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"tas-updater"}}]},"scopeMetrics":[{"metrics":[{"name":"tas_updater.publishes","sum":{}}]}]}]}"#;
        parse_batch(&serde_json::from_str(line).unwrap(), &mut r);
        assert!(r.has_metric("tas-updater", "tas_updater.publishes"));
        assert!(!r.has_metric("tas-scheduler", "tas_updater.publishes"));
    }

    #[test]
    fn the_config_names_the_ports_and_the_file() {
        let yaml = config_yaml(
            "127.0.0.1:4317".parse().unwrap(),
            "127.0.0.1:4318".parse().unwrap(),
            Path::new("/x/out.jsonl"),
        );
        let parsed: serde_norway::Value = serde_norway::from_str(&yaml).unwrap();
        assert_eq!(
            parsed["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].as_str(),
            Some("127.0.0.1:4317")
        );
        assert_eq!(
            parsed["receivers"]["otlp"]["protocols"]["http"]["endpoint"].as_str(),
            Some("127.0.0.1:4318")
        );
        assert_eq!(
            parsed["exporters"]["file"]["path"].as_str(),
            Some("/x/out.jsonl")
        );
        for signal in ["traces", "metrics"] {
            let pipeline = &parsed["service"]["pipelines"][signal];
            assert_eq!(pipeline["receivers"][0].as_str(), Some("otlp"), "{yaml}");
            assert_eq!(pipeline["exporters"][0].as_str(), Some("file"), "{yaml}");
        }
    }
}
