//! A stand-in OpenTelemetry collector: a real OTLP/gRPC server (the generated trace and
//! metrics services) on a loopback port, keeping every request it receives.

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point;
use opentelemetry_proto::tonic::trace::v1::Span;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// What the collector received so far.
#[derive(Clone, Default)]
struct Received {
    traces: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    metrics: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
}

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        self.traces.lock().unwrap().push(request.into_inner());
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Received {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        self.metrics.lock().unwrap().push(request.into_inner());
        Ok(Response::new(ExportMetricsServiceResponse::default()))
    }
}

/// A span as received, with its resource's `service.name`.
#[derive(Debug)]
pub struct ReceivedSpan {
    pub service: Option<String>,
    pub span: Span,
}

impl ReceivedSpan {
    /// A string attribute of the span.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        string_attribute(&self.span.attributes, key)
    }
}

/// The collector, serving until [`Collector::stop`].
pub struct Collector {
    endpoint: String,
    received: Received,
    stop: oneshot::Sender<()>,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Collector {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let received = Received::default();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(
            Server::builder()
                .add_service(TraceServiceServer::new(received.clone()))
                .add_service(MetricsServiceServer::new(received.clone()))
                .serve_with_incoming_shutdown(TcpIncoming::from(listener), async {
                    let _ = stopped.await;
                }),
        );
        Self {
            endpoint,
            received,
            stop,
            server,
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Every span received so far named `name`.
    pub fn spans(&self, name: &str) -> Vec<ReceivedSpan> {
        let traces = self.received.traces.lock().unwrap();
        traces
            .iter()
            .flat_map(|request| &request.resource_spans)
            .flat_map(|rs| {
                let service = rs
                    .resource
                    .as_ref()
                    .and_then(|r| string_attribute(&r.attributes, "service.name"))
                    .map(str::to_owned);
                rs.scope_spans
                    .iter()
                    .flat_map(|ss| &ss.spans)
                    .filter(|span| span.name == name)
                    .map(move |span| ReceivedSpan {
                        service: service.clone(),
                        span: span.clone(),
                    })
            })
            .collect()
    }

    /// The data of every received metric called `name`, oldest first.
    fn data_of(&self, name: &str) -> Vec<Data> {
        let metrics = self.received.metrics.lock().unwrap();
        metrics
            .iter()
            .flat_map(|request| &request.resource_metrics)
            .flat_map(|rm| &rm.scope_metrics)
            .flat_map(|sm| &sm.metrics)
            .filter(|m| m.name == name)
            .filter_map(|m| m.data.clone())
            .collect()
    }

    /// The latest value of the cumulative integer sum `name` for the data point whose
    /// `key` attribute is `value`.
    pub fn sum(&self, name: &str, key: &str, value: &str) -> Option<i64> {
        self.data_of(name)
            .iter()
            .filter_map(|data| match data {
                Data::Sum(sum) => Some(&sum.data_points),
                _ => None,
            })
            .flatten()
            .filter(|point| string_attribute(&point.attributes, key) == Some(value))
            .filter_map(|point| match point.value {
                Some(number_data_point::Value::AsInt(v)) => Some(v),
                _ => None,
            })
            .next_back()
    }

    /// The latest count of the histogram `name` over all its data points.
    pub fn histogram_count(&self, name: &str) -> Option<u64> {
        self.data_of(name)
            .iter()
            .filter_map(|data| match data {
                Data::Histogram(h) => Some(h.data_points.iter().map(|p| p.count).sum()),
                _ => None,
            })
            .next_back()
    }

    /// Stops serving: exports to it fail from now on.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.server.await.unwrap().unwrap();
    }
}

fn string_attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            Value::StringValue(s) => Some(s.as_str()),
            _ => None,
        }
    })
}
