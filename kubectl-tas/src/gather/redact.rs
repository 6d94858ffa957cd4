//! What a support bundle must never carry: credentials. Secrets are never read at all;
//! what other objects may hold is masked here, on the JSON of each object, before it
//! is written:
//!
//! - `metadata.managedFields` is dropped (noise, and it repeats field values);
//! - an annotation whose key names a credential (token, password, secret, key, auth,
//!   credential...) is masked; `kubectl.kubernetes.io/last-applied-configuration` is
//!   masked the same way inside;
//! - a container `env` entry whose name names a credential has its `value` masked;
//! - a ConfigMap `data` / `binaryData` key that names a credential is masked;
//! - a `--flag=value` argument whose flag names a credential is masked;
//! - anywhere, a string that looks like a credential itself (a JWT, a PEM private key,
//!   `Bearer ...`, `Basic ...`) is masked. Log lines go through the same check.

use serde_json::Value;

/// What a masked value reads.
pub const REDACTED: &str = "REDACTED";

/// Words that make a name a credential's.
const CREDENTIAL_WORDS: &[&str] = &[
    "token",
    "password",
    "passwd",
    "secret",
    "credential",
    "apikey",
    "api-key",
    "api_key",
    "privatekey",
    "private-key",
    "private_key",
    "auth",
    "cookie",
    "session",
    "signature",
    "headers",
];

/// Whether a name (env var, annotation key, data key, flag) names a credential.
pub fn is_credential_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    CREDENTIAL_WORDS.iter().any(|w| lower.contains(w))
        || lower.ends_with("key")
        || lower.ends_with("_key")
        || lower.ends_with(".key")
}

/// Whether a value looks like a credential whatever its name.
pub fn looks_like_credential(value: &str) -> bool {
    let v = value.trim();
    let jwt = v.starts_with("eyJ")
        && v.split('.').count() == 3
        && v.len() > 30
        && !v.contains(char::is_whitespace);
    jwt || (v.contains("-----BEGIN") && v.contains("PRIVATE KEY"))
        || v.starts_with("Bearer ")
        || v.starts_with("Basic ")
}

/// `line` with every word that looks like a credential masked (for logs).
pub fn redact_line(line: &str) -> String {
    if line.contains("PRIVATE KEY") {
        return REDACTED.to_owned();
    }
    let mut out = String::with_capacity(line.len());
    let mut after_scheme = false;
    for (i, word) in line.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let bare = word.trim_matches(|c: char| c == '"' || c == '\'' || c == ',');
        let jwt_like = looks_like_credential(bare);
        if jwt_like || after_scheme {
            out.push_str(REDACTED);
        } else {
            out.push_str(word);
        }
        after_scheme = matches!(bare, "Bearer" | "Basic");
    }
    out
}

/// Masks credentials in an object's JSON in place (see the module doc).
pub fn redact_object(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            for (key, value) in annotations.iter_mut() {
                if key == "kubectl.kubernetes.io/last-applied-configuration" {
                    *value = match value.as_str().map(serde_json::from_str::<Value>) {
                        Some(Ok(mut inner)) => {
                            redact_object(&mut inner);
                            Value::String(inner.to_string())
                        }
                        _ => Value::String(REDACTED.into()),
                    };
                } else if is_credential_name(key) {
                    *value = Value::String(REDACTED.into());
                }
            }
        }
    }
    if object.get("kind").and_then(Value::as_str) == Some("ConfigMap") {
        for field in ["data", "binaryData"] {
            if let Some(data) = object.get_mut(field).and_then(Value::as_object_mut) {
                for (key, value) in data.iter_mut() {
                    if is_credential_name(key) {
                        *value = Value::String(REDACTED.into());
                    }
                }
            }
        }
    }
    walk(object);
}

/// Env entries, credential flags and credential-looking strings, at any depth.
fn walk(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                match (key.as_str(), child) {
                    ("env", Value::Array(entries)) => entries.iter_mut().for_each(redact_env),
                    ("args" | "command", Value::Array(args)) => {
                        args.iter_mut().for_each(redact_arg);
                    }
                    (_, child) => walk(child),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(walk),
        Value::String(s) if looks_like_credential(s) => *s = REDACTED.into(),
        _ => {}
    }
}

fn redact_env(entry: &mut Value) {
    let named = entry
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(is_credential_name);
    if let Some(value) = entry.get_mut("value")
        && (named || value.as_str().is_some_and(looks_like_credential))
    {
        *value = Value::String(REDACTED.into());
    }
}

fn redact_arg(arg: &mut Value) {
    let Some(text) = arg.as_str() else { return };
    if looks_like_credential(text) {
        *arg = Value::String(REDACTED.into());
        return;
    }
    if let Some((flag, _)) = text.split_once('=')
        && flag.starts_with('-')
        && is_credential_name(flag)
        // A path to a credential is not one.
        && !flag.ends_with("-file")
        && !flag.ends_with("-dir")
    {
        *arg = Value::String(format!("{flag}={REDACTED}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const JWT: &str =
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06YWRtaW4ifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ";

    #[test]
    fn env_annotations_flags_and_configmap_keys_are_masked() {
        let mut deployment = json!({
            "kind": "Deployment",
            "metadata": {"name": "d", "managedFields": [{"manager": "x"}], "annotations": {
                "example.com/api-token": "hunter2",
                "deployment.kubernetes.io/revision": "3",
                "kubectl.kubernetes.io/last-applied-configuration":
                    json!({"kind": "Deployment", "metadata": {"annotations": {"db-password": "hunter2"}}}).to_string()
            }},
            "spec": {"template": {"spec": {"containers": [{
                "name": "c",
                "args": ["--api-token=hunter2", "--token-file=/var/run/token", "--v=2", JWT],
                "env": [
                    {"name": "API_TOKEN", "value": "hunter2"},
                    {"name": "LOG_LEVEL", "value": "info"},
                    {"name": "UPSTREAM", "value": format!("Bearer {JWT}")},
                    {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "s", "key": "p"}}}
                ]
            }]}}}
        });
        redact_object(&mut deployment);
        let text = deployment.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains(JWT), "{text}");
        assert!(deployment["metadata"].get("managedFields").is_none());
        let annotations = &deployment["metadata"]["annotations"];
        assert_eq!(annotations["deployment.kubernetes.io/revision"], "3");
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container["args"],
            json!([
                "--api-token=REDACTED",
                "--token-file=/var/run/token",
                "--v=2",
                "REDACTED"
            ])
        );
        assert_eq!(container["env"][1]["value"], "info");
        assert_eq!(
            container["env"][3]["valueFrom"]["secretKeyRef"]["name"],
            "s"
        );

        let mut cm =
            json!({"kind": "ConfigMap", "data": {"password": "hunter2", "config.yaml": "a: 1"}});
        redact_object(&mut cm);
        assert_eq!(
            cm["data"],
            json!({"password": REDACTED, "config.yaml": "a: 1"})
        );
    }

    #[test]
    fn log_lines_lose_tokens_but_keep_the_rest() {
        assert_eq!(
            redact_line(&format!("sent Authorization: Bearer abc123 to {JWT}, done")),
            "sent Authorization: Bearer REDACTED to REDACTED done"
        );
        assert_eq!(redact_line("INFO reconcile done"), "INFO reconcile done");
    }
}
