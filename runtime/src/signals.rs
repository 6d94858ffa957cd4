//! The shutdown signal: SIGINT (Ctrl-C) or SIGTERM (the kubelet stopping a pod).
//! Await [`shutdown`] next to the main work, then step down and drain.

use tokio::signal::unix::{SignalKind, signal};
use tracing::{info, warn};

/// Resolves when the process receives SIGINT or SIGTERM.
///
/// If the SIGTERM handler cannot be installed (never expected on Linux), only SIGINT
/// ends the wait, with a warning.
pub async fn shutdown() {
    let interrupt = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            warn!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match signal(SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(e) => {
                warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = interrupt => info!("received SIGINT; shutting down"),
        () = terminate => info!("received SIGTERM; shutting down"),
    }
}
