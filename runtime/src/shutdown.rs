//! Bounded shutdown: after SIGTERM the kubelet waits `terminationGracePeriodSeconds`
//! (30 s by default) and then kills the process, so every step of a binary's way out
//! (draining the controller, giving the Lease up, draining HTTP connections, flushing
//! OTLP data) runs under its own deadline, and one that runs over is cut short and
//! logged rather than holding up the rest.
//!
//! ```text
//! SIGTERM ─► step("controller drain", 10 s) ─► step("lease step-down", 8 s)
//!        ─► step("OTLP flush", 5 s) ─► block_on_bounded: leftover tasks get 1 s
//! ```
//!
//! [`block_on_bounded`] is the last line: tokio's runtime, when dropped, waits for every
//! blocking task (a file read, a flush cut short by its step) without limit; this gives
//! them [`RUNTIME_GRACE`] and abandons the rest.

use std::future::Future;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::time::Instant;
use tracing::{info, warn};

/// How long a binary's runtime waits, once its main future is done, for tasks still
/// running (connection drains, blocking work cut short by a step's deadline).
pub const RUNTIME_GRACE: Duration = Duration::from_secs(1);

/// Runs one shutdown step for at most `limit`: its output, or `None` (logged as a
/// warning naming the step) when the deadline cut it short. The work is dropped then,
/// which cancels it at its next `.await`.
pub async fn step<T>(name: &str, limit: Duration, work: impl Future<Output = T>) -> Option<T> {
    let started = Instant::now();
    match tokio::time::timeout(limit, work).await {
        Ok(out) => {
            info!(
                step = name,
                took_ms = started.elapsed().as_millis() as u64,
                "shutdown step done"
            );
            Some(out)
        }
        Err(_) => {
            warn!(
                step = name,
                limit_s = limit.as_secs_f64(),
                "shutdown step cut short: it ran over its deadline"
            );
            None
        }
    }
}

/// Runs `main` on `runtime`, then shuts the runtime down giving tasks still running
/// [`RUNTIME_GRACE`] (dropping it would wait for blocking tasks without limit).
pub fn block_on_bounded<F: Future>(runtime: Runtime, main: F) -> F::Output {
    let out = runtime.block_on(main);
    runtime.shutdown_timeout(RUNTIME_GRACE);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_step_within_its_deadline_gives_its_output() {
        assert_eq!(
            step("quick", Duration::from_secs(5), async { 7 }).await,
            Some(7)
        );
    }

    #[tokio::test]
    async fn a_step_over_its_deadline_is_cut_short() {
        let started = Instant::now();
        let out = step(
            "stuck",
            Duration::from_millis(100),
            std::future::pending::<()>(),
        )
        .await;
        assert_eq!(out, None);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn leftover_blocking_work_does_not_hold_the_runtime() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        block_on_bounded(runtime, async {
            // A blocking task the main future does not wait for: dropping the runtime
            // would wait the whole 30 s for it.
            drop(tokio::task::spawn_blocking(|| {
                std::thread::sleep(Duration::from_secs(30))
            }));
        });
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "took {:?}",
            started.elapsed()
        );
    }
}
