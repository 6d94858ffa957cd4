//! Creating the run's pods at a fixed rate.
//!
//! A ticker paces the creations; each one is sent from a task of its own, at most
//! `concurrency` in flight, so a slow response does not hold back the next pod. When
//! the API server cannot keep up, in-flight creations pile up to the limit and the pace
//! drops; the achieved rate is reported next to the target. A creation refused with
//! "too many requests" or a server error is retried a few times.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

use crate::workload::Workload;

/// Attempts per pod.
const ATTEMPTS: u32 = 5;
/// Pause before retrying a refused creation.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// When each pod's creation was first sent, and how many creations failed.
#[derive(Debug, Clone, Default)]
pub struct CreateOutcome {
    /// Indexed by pod; `None` if never sent.
    pub sent_at: Vec<Option<Instant>>,
    /// Pods that could not be created.
    pub errors: usize,
}

/// Creates `workload`'s pods for `scheduler`, labelled `run`, `rate` per second
/// (`f64::INFINITY`: back to back).
pub async fn create_pods(
    api: Api<Pod>,
    workload: Workload,
    scheduler: String,
    run: String,
    rate: f64,
    concurrency: usize,
) -> CreateOutcome {
    let mut outcome = CreateOutcome {
        sent_at: vec![None; workload.pods],
        errors: 0,
    };
    // An infinite rate: as fast as `concurrency` creations in flight allow.
    let mut ticker = rate.is_finite().then(|| {
        let period = Duration::from_secs_f64(1.0 / rate.max(0.001));
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Burst);
        ticker
    });
    let permits = Arc::new(Semaphore::new(concurrency.max(1)));
    let mut creates = JoinSet::new();
    for i in 0..workload.pods {
        if let Some(ticker) = ticker.as_mut() {
            ticker.tick().await;
        }
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let pod = workload.pod(i, &scheduler, &run);
        outcome.sent_at[i] = Some(Instant::now());
        let api = api.clone();
        creates.spawn(async move {
            let created = create_with_retries(&api, &pod).await;
            drop(permit);
            created
        });
        while let Some(done) = creates.try_join_next() {
            outcome.errors += usize::from(!matches!(done, Ok(true)));
        }
    }
    while let Some(done) = creates.join_next().await {
        outcome.errors += usize::from(!matches!(done, Ok(true)));
    }
    outcome
}

async fn create_with_retries(api: &Api<Pod>, pod: &Pod) -> bool {
    for attempt in 1..=ATTEMPTS {
        match api.create(&PostParams::default(), pod).await {
            Ok(_) => return true,
            // An earlier attempt got through after all.
            Err(kube::Error::Api(status)) if attempt > 1 && status.code == 409 => return true,
            Err(e) if attempt < ATTEMPTS && retriable(&e) => tokio::time::sleep(RETRY_PAUSE).await,
            Err(_) => return false,
        }
    }
    false
}

/// Throttling, server errors and transport failures; not a rejected object.
fn retriable(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        _ => true,
    }
}
