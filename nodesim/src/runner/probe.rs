//! HTTP probes, as the kubelet runs them: a GET with a timeout, success for a status
//! code in 200..400. `scheme: HTTPS` probes speak TLS without verifying the server's
//! certificate and without credentials, as the kubelet's do.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A probe resolved against its container: where to GET and how often.
#[derive(Debug, Clone)]
pub struct HttpProbe {
    /// Port.
    pub port: u16,
    /// Path.
    pub path: String,
    /// Delay before the first probe.
    pub initial_delay: Duration,
    /// Between probes.
    pub period: Duration,
    /// Per probe.
    pub timeout: Duration,
    /// Consecutive failures that flip the result.
    pub failure_threshold: u32,
    /// Consecutive successes that flip it back.
    pub success_threshold: u32,
    /// `scheme: HTTPS`.
    pub https: bool,
}

impl HttpProbe {
    /// The container's `probe`, or why it cannot be run (only `httpGet` is supported).
    pub fn resolve(container: &Container, probe: &Probe) -> Result<Self, String> {
        let get = probe.http_get.as_ref().ok_or_else(|| {
            format!(
                "container {}: only httpGet probes are supported",
                container.name
            )
        })?;
        let port = match &get.port {
            IntOrString::Int(p) => u16::try_from(*p).map_err(|_| format!("probe port {p}"))?,
            IntOrString::String(name) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .ok_or_else(|| {
                    format!(
                        "container {}: probe port {name} is not declared",
                        container.name
                    )
                })?,
        };
        let secs = |v: Option<i32>, d: i32| Duration::from_secs(v.unwrap_or(d).max(0) as u64);
        Ok(Self {
            port,
            path: get.path.clone().unwrap_or_else(|| "/".into()),
            initial_delay: secs(probe.initial_delay_seconds, 0),
            period: secs(probe.period_seconds, 10).max(Duration::from_secs(1)),
            timeout: secs(probe.timeout_seconds, 1).max(Duration::from_secs(1)),
            failure_threshold: probe.failure_threshold.unwrap_or(3).max(1) as u32,
            success_threshold: probe.success_threshold.unwrap_or(1).max(1) as u32,
            https: get
                .scheme
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("HTTPS")),
        })
    }

    /// One probe against `ip`.
    pub async fn check(&self, ip: IpAddr) -> bool {
        let answer = if self.https {
            get_tls(ip, self.port, &self.path, None, self.timeout).await
        } else {
            get(ip, self.port, &self.path, self.timeout).await
        };
        matches!(answer, Ok((code, _)) if (200..400).contains(&code))
    }
}

/// `GET http://ip:port/path`: status code and body.
pub async fn get(
    ip: IpAddr,
    port: u16,
    path: &str,
    timeout: Duration,
) -> Result<(u16, String), String> {
    let work = async {
        let mut stream = TcpStream::connect((ip, port))
            .await
            .map_err(|e| e.to_string())?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {ip}:{port}\r\nUser-Agent: kube-probe/tas-nodesim\r\nConnection: close\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .await
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let code = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("not an HTTP answer: {head}"))?;
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(body)
        } else {
            body.to_owned()
        };
        Ok((code, body))
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| format!("timed out after {timeout:?}"))?
}

/// `GET https://ip:port/path` without verifying the certificate, with a bearer
/// `token` when given: status code and body.
pub async fn get_tls(
    ip: IpAddr,
    port: u16,
    path: &str,
    token: Option<&str>,
    timeout: Duration,
) -> Result<(u16, String), String> {
    let work = async {
        let tcp = TcpStream::connect((ip, port))
            .await
            .map_err(|e| e.to_string())?;
        let tls = tas_testcluster::tls_connect_insecure(tcp, ip)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        tas_testcluster::get_over(tls, &format!("{ip}:{port}"), path, token)
            .await
            .map_err(|e| e.to_string())
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| format!("timed out after {timeout:?}"))?
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerPort, HTTPGetAction};
    use tokio::net::TcpListener;

    use super::*;

    fn container(port: u16) -> Container {
        Container {
            name: "c".into(),
            ports: Some(vec![ContainerPort {
                name: Some("https".into()),
                container_port: i32::from(port),
                ..ContainerPort::default()
            }]),
            ..Container::default()
        }
    }

    fn probe(scheme: Option<&str>) -> Probe {
        Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/healthz".into()),
                port: IntOrString::String("https".into()),
                scheme: scheme.map(str::to_owned),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        }
    }

    /// A server answering `200 ok` in plain HTTP to every connection.
    async fn plain_server() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 512];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\nok").await;
            }
        });
        port
    }

    #[tokio::test]
    async fn the_scheme_decides_between_plain_http_and_tls() {
        let port = plain_server().await;
        let ip = IpAddr::from([127, 0, 0, 1]);
        let http = HttpProbe::resolve(&container(port), &probe(None)).unwrap();
        assert!(!http.https);
        assert!(http.check(ip).await, "plain HTTP probe of a plain server");
        let https = HttpProbe::resolve(&container(port), &probe(Some("HTTPS"))).unwrap();
        assert!(https.https);
        assert!(
            !https.check(ip).await,
            "an HTTPS probe does not accept a plain HTTP answer"
        );
    }
}
