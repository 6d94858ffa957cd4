//! One pod's worker: prepares the sandbox and volumes, runs a supervisor per container
//! (see [`super::container`]), writes the pod status whenever something changed, keeps
//! ConfigMaps and the token fresh, and on deletion stops the processes (SIGTERM, SIGKILL
//! after the grace period) and then removes the pod object, as the kubelet does.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use tokio::sync::{Notify, watch};

use super::container::{self, Shared};
use super::network::PodNetwork;
use super::sandbox::{HostPaths, Mount, write_etc};
use super::status::{PodView, State};
use super::volumes::PodVolumes;
use super::{Ctx, PodConfigError};

/// How often ConfigMaps, Secrets and the token are checked for changes.
const SYNC_PERIOD: Duration = Duration::from_secs(2);

/// `<node-dir>/pods/<namespace>_<name>_<uid>`.
pub fn sandbox_dir(node_dir: &Path, pod: &Pod) -> PathBuf {
    let m = &pod.metadata;
    node_dir.join("pods").join(format!(
        "{}_{}_{}",
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default()
    ))
}

/// The mounts of container `index`, from the materialised volumes.
fn mounts(pod: &Pod, index: usize, volumes: &PodVolumes) -> Result<Vec<Mount>, PodConfigError> {
    let Some(container) = pod.spec.as_ref().and_then(|s| s.containers.get(index)) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for m in container.volume_mounts.iter().flatten() {
        let source = volumes.paths.get(&m.name).ok_or_else(|| {
            PodConfigError::new(
                "CreateContainerConfigError",
                format!("volume mount {} names no volume of the pod", m.name),
            )
        })?;
        let source = match m.sub_path.as_deref() {
            Some(sub) if !sub.is_empty() => source.join(sub),
            _ => source.clone(),
        };
        out.push(Mount {
            source,
            target: m.mount_path.clone(),
            read_only: m.read_only.unwrap_or(false),
        });
    }
    Ok(out)
}

/// Runs `pod` on `node` until it is deleted (and removed) or finished for good.
pub async fn run(
    ctx: Arc<Ctx>,
    node: String,
    mut pod_rx: watch::Receiver<Pod>,
    view: Arc<Mutex<PodView>>,
) {
    let pod = pod_rx.borrow().clone();
    let Some(node_ctx) = ctx.node(&node) else {
        return;
    };
    let dir = sandbox_dir(&node_ctx.dir, &pod);
    let host = HostPaths::new(&node_ctx.dir);
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let changed = Arc::new(Notify::new());
    let containers = pod.spec.as_ref().map_or(0, |s| s.containers.len());
    let (stop_tx, stop_rx) = watch::channel(None);
    let mut volumes = PodVolumes::default();
    let mut mount_txs = Vec::new();
    let mut supervisors = tokio::task::JoinSet::new();

    let index = ctx
        .next_network
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let network = PodNetwork::create(
        index,
        ctx.subnet,
        ctx.api_server_for(&pod),
        &ctx.services,
        ctx.pids_file.as_deref(),
    )
    .await
    .map_err(|e| PodConfigError::new("RunContainerError", e.to_string()));
    let prepared = network.and_then(|network| {
        {
            let mut v = view.lock().unwrap_or_else(PoisonError::into_inner);
            v.ip = network.address;
            v.gateway = network.gateway;
            v.netns = Some(network.netns_path());
        }
        std::fs::create_dir_all(&dir)
            .and_then(|()| {
                let services: Vec<&str> = ctx.services.iter().map(|s| s.name.as_str()).collect();
                write_etc(
                    &dir,
                    &name,
                    &network.address.to_string(),
                    &network.gateway.to_string(),
                    &services,
                )
            })
            .map(|()| network)
            .map_err(|e| {
                PodConfigError::new("RunContainerError", format!("creating the sandbox: {e}"))
            })
    });
    let mut started = false;
    let mut tick = tokio::time::interval(SYNC_PERIOD);
    let mut deleting = false;
    // A status write that failed (the API server restarting, say) is written again on
    // the next sync, as the kubelet's status manager does: without that, a Ready
    // change made while the API server was away would never reach it.
    let mut unwritten = false;
    let mut retry = tokio::time::interval(SYNC_PERIOD);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    if let Err(e) = &prepared {
        set_waiting(&view, &e.reason, &e.message);
    }
    loop {
        tokio::select! {
            _ = retry.tick(), if unwritten => {
                unwritten = !write_status(&api, &name, &view).await;
            }
            _ = tick.tick(), if prepared.is_ok() && !deleting => {
                let current = pod_rx.borrow().clone();
                let synced = volumes.sync(&ctx.client, &current, &dir.join("volumes"), &host).await;
                let all_mounts = synced.and_then(|()| (0..containers).map(|i| mounts(&current, i, &volumes)).collect::<Result<Vec<_>, _>>());
                match all_mounts {
                    Err(e) if !started => { set_waiting(&view, &e.reason, &e.message); changed.notify_one(); }
                    Err(e) => tracing::warn!(pod = %name, error = %e.message, "refreshing volumes"),
                    Ok(all) if !started => {
                        started = true;
                        for (i, m) in all.into_iter().enumerate() {
                            let (tx, rx) = watch::channel(m);
                            mount_txs.push(tx);
                            let shared = Shared { view: view.clone(), changed: changed.clone(), stop: stop_rx.clone(), pod: pod_rx.clone(), mounts: rx };
                            supervisors.spawn(container::supervise(ctx.clone(), i, shared));
                        }
                    }
                    Ok(_) => {}
                }
            }
            () = changed.notified() => {
                unwritten = !write_status(&api, &name, &view).await;
            }
            r = pod_rx.changed(), if !deleting => {
                let gone = r.is_err();
                let current = pod_rx.borrow().clone();
                if gone || current.metadata.deletion_timestamp.is_some() {
                    deleting = true;
                    let grace = current.metadata.deletion_grace_period_seconds
                        .map_or_else(|| container::termination_grace(&current), |s| Duration::from_secs(s.max(0) as u64));
                    let _ = stop_tx.send(Some(if gone { Duration::ZERO } else { grace }));
                    if !started {
                        break;
                    }
                }
            }
            done = supervisors.join_next(), if started => {
                if done.is_none() {
                    if deleting {
                        break;
                    }
                    // Every container finished for good: the pod's phase is final.
                    let failed = view.lock().unwrap_or_else(PoisonError::into_inner).containers.iter()
                        .any(|c| matches!(&c.state, State::Terminated(t) if t.exit_code != 0));
                    view.lock().unwrap_or_else(PoisonError::into_inner).phase = Some(if failed { "Failed" } else { "Succeeded" });
                    let status = view.lock().unwrap_or_else(PoisonError::into_inner).status();
                    let _ = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await;
                    let _ = pod_rx.wait_for(|p| p.metadata.deletion_timestamp.is_some()).await;
                    break;
                }
            }
        }
    }
    if deleting {
        let uid = pod.metadata.uid.clone();
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid,
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let _ = api.delete(&name, &params).await;
    }
    drop(mount_txs);
    if let Ok(network) = prepared {
        network.destroy().await;
    }
}

/// Writes the pod's status as the view has it; whether the API server took it.
async fn write_status(api: &Api<Pod>, name: &str, view: &Mutex<PodView>) -> bool {
    let status = view.lock().unwrap_or_else(PoisonError::into_inner).status();
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
    {
        Ok(_) => true,
        // Gone: nothing left to write.
        Err(kube::Error::Api(e)) if e.code == 404 => true,
        Err(e) => {
            tracing::debug!(pod = %name, error = %e, "writing the pod status; retrying");
            false
        }
    }
}

fn set_waiting(view: &Mutex<PodView>, reason: &str, message: &str) {
    let mut v = view.lock().unwrap_or_else(PoisonError::into_inner);
    for c in &mut v.containers {
        c.state = State::Waiting {
            reason: reason.into(),
            message: message.into(),
        };
    }
}
