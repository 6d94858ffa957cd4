//! The running kubelet's configuration from its `/configz` endpoint, reached through
//! the API server's node proxy (`GET /api/v1/nodes/<node>/proxy/configz`, which needs
//! `get` on `nodes/proxy`). Unlike the files it shows what the kubelet actually runs
//! with, flags included. The answer is `{"kubeletconfig": {...}}` in JSON.

use kube::Client;
use serde_json::Value;

use super::{Loaded, Overrides, Problem, document};
use crate::bounded::{self, CONFIG_LIMIT};
use crate::kubelet_config::KubeletConfig;

/// The proxy path of `node`'s `/configz`.
pub fn path(node: &str) -> String {
    format!("/api/v1/nodes/{node}/proxy/configz")
}

/// Asks `node`'s kubelet for its configuration.
pub async fn fetch(client: &Client, node: &str, overrides: &Overrides) -> Result<Loaded, Problem> {
    let path = path(node);
    let request = http::Request::get(&path)
        .body(Vec::new())
        .map_err(|e| Problem::new(path.clone(), e.to_string()))?;
    let unreadable = |e: &dyn std::fmt::Display| {
        Problem::new(
            path.clone(),
            format!("the kubelet's /configz cannot be read through the API server: {e}"),
        )
    };
    let answer = client
        .request_stream(request)
        .await
        .map_err(|e| unreadable(&e))?;
    let text = bounded::read_stream(answer, CONFIG_LIMIT)
        .await
        .map_err(|e| unreadable(&e))?;
    parse(&path, &text, overrides)
}

/// The settings in a `/configz` answer; `path` names the endpoint in problems.
pub fn parse(path: &str, text: &str, overrides: &Overrides) -> Result<Loaded, Problem> {
    let answer: Value = serde_json::from_str(text).map_err(|e| {
        Problem::new(
            path.to_owned(),
            format!(
                "the answer is not JSON ({e}); it starts with {:?}",
                text.chars().take(60).collect::<String>()
            ),
        )
    })?;
    let Some(mut config) = answer.get("kubeletconfig").cloned() else {
        return Err(Problem::new(
            path.to_owned(),
            "the answer has no kubeletconfig object",
        ));
    };
    let mut sources = vec![path.to_owned()];
    if !overrides.is_empty() {
        document::merge_patch(&mut config, overrides.layer());
        sources.push("overrides".to_owned());
    }
    let mut parsed = KubeletConfig::from_value(config)
        .map_err(|e| Problem::new(path.to_owned(), e.to_string()))?;
    overrides.apply(&mut parsed);
    Ok(Loaded {
        config: parsed,
        sources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tas_api::nrt::TopologyManagerPolicy;

    #[test]
    fn reads_the_kubeletconfig_object() {
        let loaded = parse(
            "/configz",
            r#"{"kubeletconfig":{"topologyManagerPolicy":"restricted","staticPodPath":"/etc"}}"#,
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(
            loaded.config.topology_manager_policy,
            TopologyManagerPolicy::Restricted
        );
    }

    #[test]
    fn bad_answers_say_what_is_wrong() {
        for (text, expect) in [
            ("<html>502 Bad Gateway</html>", "not JSON"),
            (r#"{"other":{}}"#, "no kubeletconfig"),
            (
                r#"{"kubeletconfig":{"topologyManagerPolicy":"sometimes"}}"#,
                "sometimes",
            ),
        ] {
            let problem = parse(
                "/api/v1/nodes/n1/proxy/configz",
                text,
                &Overrides::default(),
            )
            .unwrap_err();
            assert_eq!(problem.path, "/api/v1/nodes/n1/proxy/configz");
            assert!(problem.message.contains(expect), "{text}: {problem}");
        }
    }

    /// An answer past [`CONFIG_LIMIT`] (a valid one, padded) is refused, naming the
    /// endpoint and the limit, instead of being read whole. The "API server" is a bare
    /// socket: a real one cannot be made to send such an answer on demand.
    #[tokio::test]
    async fn an_oversized_answer_is_refused() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let padding = "x".repeat(usize::try_from(CONFIG_LIMIT).unwrap());
        let body = format!(r#"{{"kubeletconfig":{{}},"padding":"{padding}"}}"#);
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
        });
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        let client = Client::try_from(config).unwrap();
        let problem = fetch(&client, "n1", &Overrides::default())
            .await
            .expect_err("an oversized answer is refused");
        assert_eq!(problem.path, "/api/v1/nodes/n1/proxy/configz");
        assert!(problem.message.contains("1048576-byte limit"), "{problem}");
    }
}
