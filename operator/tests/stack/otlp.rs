//! OpenTelemetry over OTLP/gRPC: once the object names a collector in
//! `spec.observability.otlpEndpoint`, the reconcile spans (carrying the object's name)
//! and the reconcile metrics arrive there; a collector that goes away holds up no
//! reconcile; deleting the object turns export back to the operator's own endpoint
//! (here none).

use crate::collector::Collector;
use crate::harness::*;
use kube::Client;
use tas_operator::telemetry::Otlp;
use tas_operator::telemetry::SERVICE_NAME;
use tas_testcluster::{unique_name, wait_for};

pub async fn scenario(client: &Client, otlp: &Otlp) {
    assert_eq!(
        otlp.endpoint(),
        None,
        "no endpoint before the object names one"
    );
    let collector = Collector::start().await;
    let ns = unique_name("tas-otlp");
    let mut cr = sample(&ns);
    cr.spec.observability.otlp_endpoint = Some(collector.endpoint().to_owned());
    create(client, &cr).await;

    let span = wait_for("a reconcile span at the collector", TIMEOUT, || async {
        Ok::<_, std::convert::Infallible>(
            collector
                .spans("reconcile")
                .into_iter()
                .find(|s| s.attribute("object") == Some(STACK)),
        )
    })
    .await
    .unwrap();
    assert_eq!(span.service.as_deref(), Some(SERVICE_NAME));
    assert!(
        span.span.end_time_unix_nano >= span.span.start_time_unix_nano,
        "{span:?}"
    );

    let successes = wait_for(
        "the reconciles metric at the collector",
        TIMEOUT,
        || async {
            Ok::<_, std::convert::Infallible>(
                collector
                    .sum("tas_operator.reconciles", "result", "success")
                    .filter(|n| *n >= 1),
            )
        },
    )
    .await
    .unwrap();
    assert!(successes >= 1);
    wait_for(
        "the reconcile duration histogram at the collector",
        TIMEOUT,
        || async {
            Ok::<_, std::convert::Infallible>(
                collector
                    .histogram_count("tas_operator.reconcile_duration")
                    .filter(|n| *n >= 1),
            )
        },
    )
    .await
    .unwrap();

    // With the collector gone, exports fail in the background; the uninstall's
    // reconciles go on as before.
    collector.stop().await;
    uninstall(client, &ns).await;
    assert_eq!(otlp.endpoint(), None, "back to no endpoint once deleted");
}
