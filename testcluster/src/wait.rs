//! Polling with a deadline: the one way the harness and its tests wait.
//!
//! Nothing sleeps for a fixed time hoping something got ready; every wait checks the
//! condition it needs, backing off from 50 ms to 500 ms between checks, and fails with
//! what it was waiting for (and the check's last error) when the deadline passes.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::Error;

const FIRST_INTERVAL: Duration = Duration::from_millis(50);
const MAX_INTERVAL: Duration = Duration::from_millis(500);

/// Calls `check` until it returns `Ok(Some(value))`, and returns that value.
///
/// `Ok(None)` means "not yet"; `Err` also means "not yet" (an object that does not
/// exist yet, an API server still starting) but is remembered for the timeout error.
/// A single check that hangs is cut off at the deadline too.
///
/// ```no_run
/// # async fn demo(pods: kube::Api<k8s_openapi::api::core::v1::Pod>) -> Result<(), tas_testcluster::Error> {
/// use std::time::Duration;
/// let node = tas_testcluster::wait_for("pod web-0 to be bound", Duration::from_secs(30), || async {
///     let pod = pods.get("web-0").await?;
///     Ok::<_, kube::Error>(pod.spec.and_then(|s| s.node_name))
/// })
/// .await?;
/// # Ok(()) }
/// ```
pub async fn wait_for<T, E, F, Fut>(
    what: impl Into<String>,
    timeout: Duration,
    mut check: F,
) -> Result<T, Error>
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, E>>,
{
    let deadline = Instant::now() + timeout;
    let mut interval = FIRST_INTERVAL;
    let mut last_error = None;
    loop {
        match tokio::time::timeout_at(deadline, check()).await {
            Ok(Ok(Some(value))) => return Ok(value),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => last_error = Some(e.to_string()),
            Err(_elapsed) => break,
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        tokio::time::sleep_until((now + interval).min(deadline)).await;
        interval = (interval * 2).min(MAX_INTERVAL);
    }
    Err(Error::Timeout {
        what: what.into(),
        after: timeout,
        last_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn returns_the_first_ready_value() {
        let calls = AtomicU32::new(0);
        let value = wait_for("third call", Duration::from_secs(5), || async {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            if n == 1 {
                return Err("not yet");
            }
            Ok((n == 3).then_some(n))
        })
        .await
        .unwrap();
        assert_eq!(value, 3);
    }

    #[tokio::test]
    async fn times_out_with_the_last_error() {
        let err = wait_for("never", Duration::from_millis(120), || async {
            Err::<Option<()>, _>("boom")
        })
        .await
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("never") && msg.contains("boom"), "{msg}");
    }
}
