//! Logging setup installs a process-wide subscriber, so it is tested in a process of
//! its own.

use tas_runtime::telemetry::{LogFormat, TelemetryError, init_logging};

#[test]
fn a_bad_filter_still_installs_and_only_the_first_subscriber_wins() {
    init_logging("info,kube=[", LogFormat::Json).expect("falls back to info");
    tracing::info!("logging works after the fallback");
    assert!(matches!(
        init_logging("debug", LogFormat::Text),
        Err(TelemetryError::AlreadyInstalled(_))
    ));
}
