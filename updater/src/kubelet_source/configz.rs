//! The running kubelet's configuration from its `/configz` endpoint, reached through
//! the API server's node proxy (`GET /api/v1/nodes/<node>/proxy/configz`, which needs
//! `get` on `nodes/proxy`). Unlike the files it shows what the kubelet actually runs
//! with, flags included. The answer is `{"kubeletconfig": {...}}` in JSON.

use kube::Client;
use serde_json::Value;

use super::{Loaded, Overrides, Problem, document};
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
    let text = client.request_text(request).await.map_err(|e| {
        Problem::new(
            path.clone(),
            format!("the kubelet's /configz cannot be read through the API server: {e}"),
        )
    })?;
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
}
