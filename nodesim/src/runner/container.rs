//! One container's life: start its process from the spec, follow its probes, restart
//! it per `restartPolicy` with the kubelet's back-off, stop it gracefully.
//!
//! Back-off as the kubelet's: the first restart is immediate, then 10 s doubling to
//! 5 min (`CrashLoopBackOff` meanwhile), reset after 10 min of running. A liveness
//! failure (`failureThreshold` failures in a row) stops the process as a deletion
//! would (SIGTERM, SIGKILL after the grace period) and counts as a crash.

use std::net::IpAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::process::{Child, Command};
use tokio::sync::{Notify, watch};

use super::probe::HttpProbe;
use super::sandbox::{Launch, Mount};
use super::status::{PodView, State, Terminated};
use super::{Ctx, PodConfigError, env};

const BACKOFF_START: Duration = Duration::from_secs(10);
const BACKOFF_MAX: Duration = Duration::from_secs(300);
const BACKOFF_RESET: Duration = Duration::from_secs(600);
const CONFIG_RETRY: Duration = Duration::from_secs(2);

/// Everything a container supervisor shares with its pod worker.
pub struct Shared {
    /// The pod as the runner sees it.
    pub view: Arc<Mutex<PodView>>,
    /// Wakes the status writer.
    pub changed: Arc<Notify>,
    /// `Some(grace)` once the pod is being deleted.
    pub stop: watch::Receiver<Option<Duration>>,
    /// The latest pod object.
    pub pod: watch::Receiver<Pod>,
    /// Mounts resolved by the pod worker, for this container.
    pub mounts: watch::Receiver<Vec<Mount>>,
}

impl Shared {
    fn update(&self, index: usize, f: impl FnOnce(&mut super::status::ContainerView)) {
        let mut view = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = view.containers.get_mut(index) {
            f(c);
        }
        drop(view);
        self.changed.notify_one();
    }

    fn waiting(&self, index: usize, reason: &str, message: String) {
        self.update(index, |c| {
            c.state = State::Waiting {
                reason: reason.into(),
                message,
            };
            c.ready = false;
        });
    }
}

/// What ended a run.
enum End {
    Exited(std::process::ExitStatus),
    Liveness,
    Stopping(Duration),
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Waits `delay`; false if the pod is being deleted meanwhile.
async fn pause(stop: &mut watch::Receiver<Option<Duration>>, delay: Duration) -> bool {
    let stopped = tokio::select! {
        _ = tokio::time::sleep(delay) => false,
        _ = stop.wait_for(Option::is_some) => true,
    };
    !stopped && stop.borrow().is_none()
}

/// Runs container `index` until the pod is deleted or its restart policy says done;
/// returns its last exit code.
pub async fn supervise(ctx: Arc<Ctx>, index: usize, mut shared: Shared) -> i32 {
    let mut crashes: u32 = 0;
    let mut last_code = 0;
    loop {
        let pod = shared.pod.borrow().clone();
        let Some(container) = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.get(index))
            .cloned()
        else {
            return 0;
        };
        let prepared = prepare(&ctx, &pod, &container, &shared).await;
        let (program, args, envs, ip) = match prepared {
            Ok(p) => p,
            Err(e) => {
                shared.waiting(index, &e.reason, e.message);
                if !pause(&mut shared.stop, CONFIG_RETRY).await {
                    return last_code;
                }
                continue;
            }
        };
        let log = shared
            .view
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .containers[index]
            .log
            .clone();
        let child = match spawn(&program, &args, &envs, &log) {
            Ok(c) => c,
            Err(message) => {
                shared.waiting(index, "RunContainerError", message);
                if !pause(&mut shared.stop, CONFIG_RETRY).await {
                    return last_code;
                }
                continue;
            }
        };
        let pid = child.id();
        if let (Some(file), Some(pid)) = (&ctx.pids_file, pid) {
            let _ = super::track_pid(file, pid);
        }
        let started = now();
        let started_at = tokio::time::Instant::now();
        let has_readiness = container.readiness_probe.is_some();
        shared.update(index, |c| {
            c.state = State::Running {
                since: started.clone(),
            };
            c.pid = pid;
            c.ready = !has_readiness;
        });
        let (end, status) = run(&shared, index, &container, child, ip).await;
        let code = status.and_then(|s| s.code()).unwrap_or_else(|| {
            128 + status
                .and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s))
                .unwrap_or(9)
        });
        last_code = code;
        let signal = status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s));
        let terminated = Terminated {
            exit_code: code,
            signal,
            reason: if code == 0 { "Completed" } else { "Error" }.into(),
            started,
            finished: now(),
        };
        let stopping = matches!(end, End::Stopping(_));
        let policy = pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into());
        let restart = !stopping && (policy == "Always" || (policy == "OnFailure" && code != 0));
        if !restart {
            shared.update(index, |c| {
                c.pid = None;
                c.ready = false;
                c.state = State::Terminated(terminated);
            });
            return code;
        }
        if started_at.elapsed() > BACKOFF_RESET {
            crashes = 0;
        }
        let delay = if crashes == 0 {
            Duration::ZERO
        } else {
            BACKOFF_START
                .saturating_mul(1 << (crashes - 1).min(5))
                .min(BACKOFF_MAX)
        };
        crashes += 1;
        let pod_name = format!(
            "{}_{}({})",
            pod.metadata.name.clone().unwrap_or_default(),
            pod.metadata.namespace.clone().unwrap_or_default(),
            pod.metadata.uid.clone().unwrap_or_default()
        );
        shared.update(index, |c| {
            c.pid = None;
            c.ready = false;
            c.restarts += 1;
            c.last = Some(terminated);
            c.state = State::Waiting {
                reason: if delay.is_zero() {
                    "ContainerCreating"
                } else {
                    "CrashLoopBackOff"
                }
                .into(),
                message: format!(
                    "back-off {}s restarting failed container={} pod={pod_name}",
                    delay.as_secs(),
                    container.name
                ),
            };
        });
        if !pause(&mut shared.stop, delay).await {
            return last_code;
        }
    }
}

type Prepared = (String, Vec<String>, Vec<(String, String)>, IpAddr);

async fn prepare(
    ctx: &Ctx,
    pod: &Pod,
    container: &Container,
    shared: &Shared,
) -> Result<Prepared, PodConfigError> {
    let image = container.image.clone().unwrap_or_default();
    let (name, binary) = ctx
        .images
        .binary(&image)
        .map(|(n, b)| (n.to_owned(), b.to_path_buf()))
        .map_err(|m| PodConfigError::new("ErrImagePull", m))?;
    let (ip, node, netns) = {
        let view = shared.view.lock().unwrap_or_else(PoisonError::into_inner);
        (view.ip, view.node.clone(), view.netns.clone())
    };
    let netns =
        netns.ok_or_else(|| PodConfigError::new("RunContainerError", "the pod has no network"))?;
    let node_ctx = ctx.node(&node).ok_or_else(|| {
        PodConfigError::new(
            "RunContainerError",
            format!("node {node} is not the runner's"),
        )
    })?;
    let envs = env::resolve(
        &ctx.client,
        pod,
        container,
        super::network::SERVICE_HOST,
        super::network::API_SERVICE_PORT,
    )
    .await?;
    let vars = envs.iter().cloned().collect();
    let entrypoint = format!("/usr/local/bin/{name}");
    let mut argv: Vec<String> = match &container.command {
        Some(cmd) if !cmd.is_empty() => cmd.iter().map(|a| env::expand(a, &vars)).collect(),
        _ => vec![entrypoint.clone()],
    };
    argv.extend(
        container
            .args
            .iter()
            .flatten()
            .map(|a| env::expand(a, &vars)),
    );
    let security = container.security_context.clone().unwrap_or_default();
    let pod_security = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default();
    // The images' USER is 65532 (see the Dockerfile).
    let uid = security
        .run_as_user
        .or(pod_security.run_as_user)
        .unwrap_or(65532);
    let gid = security
        .run_as_group
        .or(pod_security.run_as_group)
        .unwrap_or(65532);
    let launch = Launch {
        netns,
        sandbox: super::pod::sandbox_dir(&node_ctx.dir, pod),
        binary,
        entrypoint,
        mounts: shared.mounts.borrow().clone(),
        user: (uid, gid),
        working_dir: container.working_dir.clone().unwrap_or_else(|| "/".into()),
        read_only_root: security.read_only_root_filesystem.unwrap_or(false),
        proc_status: Some(crate::sysfs::shared_pool_status_path(&node_ctx.dir))
            .filter(|path| path.is_file()),
    };
    let (program, args) = launch.command(&container.name, &argv);
    Ok((program, args, envs, IpAddr::V4(ip)))
}

fn spawn(
    program: &str,
    args: &[String],
    envs: &[(String, String)],
    log: &std::path::Path,
) -> Result<Child, String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("opening the log {}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .kill_on_drop(true);
    cmd.spawn()
        .map_err(|e| format!("starting the container: {e}"))
}

/// Sends `signal` (a `kill -s` name) to `pid`.
pub async fn signal(pid: u32, signal: &str) -> Result<(), String> {
    let status = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .status()
        .await
        .map_err(|e| e.to_string())?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| format!("kill -s {signal} {pid} failed"))
}

/// SIGTERM, then SIGKILL after `grace`.
async fn terminate(child: &mut Child, grace: Duration) -> Option<std::process::ExitStatus> {
    if let Some(pid) = child.id() {
        let _ = signal(pid, "TERM").await;
        // A frozen process cannot handle SIGTERM; let it.
        let _ = signal(pid, "CONT").await;
    }
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            let _ = child.kill().await;
            child.wait().await.ok()
        }
    }
}

async fn run(
    shared: &Shared,
    index: usize,
    container: &Container,
    mut child: Child,
    ip: IpAddr,
) -> (End, Option<std::process::ExitStatus>) {
    let readiness = container
        .readiness_probe
        .as_ref()
        .map(|p| HttpProbe::resolve(container, p));
    let liveness = container
        .liveness_probe
        .as_ref()
        .map(|p| HttpProbe::resolve(container, p));
    let ready_task = match readiness {
        Some(Ok(probe)) => {
            let view = shared.view.clone();
            let changed = shared.changed.clone();
            Some(tokio::spawn(async move {
                tokio::time::sleep(probe.initial_delay).await;
                let (mut ok, mut bad, mut ready) = (0, 0, false);
                loop {
                    if probe.check(ip).await {
                        ok += 1;
                        bad = 0;
                    } else {
                        bad += 1;
                        ok = 0;
                    }
                    let next = if ok >= probe.success_threshold {
                        true
                    } else if bad >= probe.failure_threshold {
                        false
                    } else {
                        ready
                    };
                    if next != ready {
                        ready = next;
                        let mut v = view.lock().unwrap_or_else(PoisonError::into_inner);
                        if let Some(c) = v.containers.get_mut(index) {
                            c.ready = ready;
                        }
                        drop(v);
                        changed.notify_one();
                    }
                    tokio::time::sleep(probe.period).await;
                }
            }))
        }
        Some(Err(message)) => {
            tracing::warn!(%message, "readiness probe not run");
            None
        }
        None => None,
    };
    let live = async {
        let Some(Ok(probe)) = liveness else {
            return std::future::pending::<()>().await;
        };
        tokio::time::sleep(probe.initial_delay).await;
        let mut bad = 0;
        loop {
            if probe.check(ip).await {
                bad = 0;
            } else {
                bad += 1;
                if bad >= probe.failure_threshold {
                    return;
                }
            }
            tokio::time::sleep(probe.period).await;
        }
    };
    let mut stop = shared.stop.clone();
    let grace = termination_grace(&shared.pod.borrow());
    let end = tokio::select! {
        status = child.wait() => End::Exited(status.unwrap_or_else(|_| std::os::unix::process::ExitStatusExt::from_raw(9))),
        () = live => End::Liveness,
        g = stop.wait_for(Option::is_some) => End::Stopping(g.ok().and_then(|g| *g).unwrap_or(grace)),
    };
    if let Some(t) = ready_task {
        t.abort();
    }
    match end {
        End::Exited(status) => (End::Exited(status), Some(status)),
        End::Liveness => {
            let status = terminate(&mut child, grace).await;
            (End::Liveness, status)
        }
        End::Stopping(g) => {
            let status = terminate(&mut child, g).await;
            (End::Stopping(g), status)
        }
    }
}

/// The pod's `terminationGracePeriodSeconds` (default 30 s).
pub fn termination_grace(pod: &Pod) -> Duration {
    let secs = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    Duration::from_secs(secs.max(0) as u64)
}
