//! The schedulers under comparison: their configuration files (pure functions, so tests
//! can check them) and their processes.
//!
//! Each run gets its own scheduler name, so a scheduler only ever sees its run's pods.
//! Processes log to `<cluster dir>/logs/<scheduler>-<run>.log` and their pids are added
//! to the cluster's pid file, so the cluster's watchdog stops them if the runner dies.
//!
//! A process is stopped as the kubelet stops a container: SIGTERM, then SIGKILL after a
//! grace period ([`SchedulerProcess::stop`]). The TAS scheduler always takes its Lease
//! (one replica too) and hands it over on SIGTERM; killed outright, it left the Lease
//! held, and the next run's scheduler — a new candidate that must see the record
//! unchanged for the whole lease duration before taking it, as any successor of a
//! crashed leader must — bound nothing for the first 15 s of every run after the first.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::BenchError;

/// One of the compared schedulers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SchedulerKind {
    /// The TAS scheduler (`tas-scheduler`).
    Tas,
    /// kube-scheduler with its default profile: topology-unaware.
    KubeScheduler,
    /// kube-scheduler built with scheduler-plugins, NodeResourceTopologyMatch enabled with
    /// its reserve cache.
    NumaPlugin,
    /// A trivial binder inside the runner: how fast this API server can bind at all.
    BindOnly,
}

impl SchedulerKind {
    /// Every kind, in report order.
    pub const ALL: [SchedulerKind; 4] = [
        SchedulerKind::Tas,
        SchedulerKind::NumaPlugin,
        SchedulerKind::KubeScheduler,
        SchedulerKind::BindOnly,
    ];

    /// Short name for flags, file names and scheduler names.
    pub fn id(self) -> &'static str {
        match self {
            Self::Tas => "tas",
            Self::KubeScheduler => "kube-scheduler",
            Self::NumaPlugin => "numa-plugin",
            Self::BindOnly => "bind-only",
        }
    }

    /// The kind named `id`.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.id() == id)
    }

    /// Name in the report.
    pub fn title(self) -> &'static str {
        match self {
            Self::Tas => "TAS scheduler",
            Self::KubeScheduler => "kube-scheduler (default profile, NUMA-unaware)",
            Self::NumaPlugin => "kube-scheduler + NodeResourceTopologyMatch (reserve cache)",
            Self::BindOnly => "bind-only ceiling (in-runner binder)",
        }
    }

    /// The `spec.schedulerName` of run `run`'s pods.
    pub fn scheduler_name(self, run: &str) -> String {
        format!("bench-{}-{run}", self.id())
    }
}

/// The TAS scheduler's configuration: the defaults (FragmentationAware scoring unless
/// `scoring` names another strategy, adaptive sampling, 5 s resync), under this run's
/// scheduler name.
pub fn tas_config(scheduler_name: &str, scoring: Option<&str>) -> String {
    let mut config = json!({ "schedulerName": scheduler_name });
    if let Some(strategy) = scoring {
        config["scoring"] = json!({ "strategy": strategy });
    }
    config.to_string()
}

/// A KubeSchedulerConfiguration with one profile named `scheduler_name` and the client
/// rate limits raised to `qps`/`burst`; with `numa`, the profile enables
/// NodeResourceTopologyMatch at every extension point (filter, score, reserve) with the
/// overreserve cache resyncing every 5 s, as the scheduler-plugins project documents
/// for its scheduler-side cache.
pub fn kube_scheduler_config(
    kubeconfig: &Path,
    scheduler_name: &str,
    qps: f32,
    burst: u32,
    numa: bool,
) -> String {
    let mut profile = json!({ "schedulerName": scheduler_name });
    if numa {
        profile["plugins"] = json!({
            "multiPoint": { "enabled": [{ "name": "NodeResourceTopologyMatch" }] },
        });
        profile["pluginConfig"] = json!([{
            "name": "NodeResourceTopologyMatch",
            "args": {
                "scoringStrategy": { "type": "LeastAllocated" },
                "cacheResyncPeriodSeconds": 5,
            },
        }]);
    }
    json!({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": { "kubeconfig": kubeconfig, "qps": qps, "burst": burst },
        "leaderElection": { "leaderElect": false },
        "profiles": [profile],
    })
    .to_string()
}

/// Where the scheduler binaries are.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// `tas-scheduler`.
    pub tas: PathBuf,
    /// `kube-scheduler`.
    pub kube_scheduler: PathBuf,
    /// `kube-scheduler-plugins`.
    pub schedplugins: PathBuf,
}

/// What a scheduler process needs besides its binary.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    /// The cluster directory (logs, configs, pid file).
    pub dir: &'a Path,
    /// Admin kubeconfig.
    pub kubeconfig: &'a Path,
    /// The run's tag, e.g. `r2`.
    pub run: &'a str,
    /// kube-scheduler client QPS.
    pub qps: f32,
    /// kube-scheduler client burst.
    pub burst: u32,
    /// kube-scheduler log verbosity (`-v`), if not its default.
    pub verbosity: Option<u32>,
    /// The TAS scheduler's `scoring.strategy`, if not its default.
    pub tas_scoring: Option<&'a str>,
}

/// How long a scheduler may take to exit after SIGTERM before it is killed: the TAS
/// scheduler closes its write fence (at most twice the write timeout, 5 s with the
/// default 15 s lease) and releases its Lease (at most 5 s) on the way out.
pub const STOP_GRACE: Duration = Duration::from_secs(15);

/// A running scheduler process.
pub struct SchedulerProcess {
    kind: SchedulerKind,
    child: Child,
    log: PathBuf,
    port: u16,
    started: Instant,
    /// The config file it was started with.
    pub config: String,
}

impl SchedulerProcess {
    /// Starts scheduler `kind` (not [`SchedulerKind::BindOnly`], which runs in the
    /// runner) for `launch.run`.
    pub fn spawn(
        kind: SchedulerKind,
        bin: &Binaries,
        launch: &Launch<'_>,
    ) -> Result<Self, BenchError> {
        let name = kind.scheduler_name(launch.run);
        let port = tas_testcluster::free_ports(1)?[0];
        let config_path = launch
            .dir
            .join(format!("{}-{}.json", kind.id(), launch.run));
        let (binary, config, args) = match kind {
            SchedulerKind::Tas => (
                &bin.tas,
                tas_config(&name, launch.tas_scoring),
                vec![
                    format!("--config={}", config_path.display()),
                    format!("--kubeconfig={}", launch.kubeconfig.display()),
                    format!("--http-address=127.0.0.1:{port}"),
                    "--identity=bench".to_string(),
                ],
            ),
            SchedulerKind::KubeScheduler | SchedulerKind::NumaPlugin => {
                let numa = kind == SchedulerKind::NumaPlugin;
                let config =
                    kube_scheduler_config(launch.kubeconfig, &name, launch.qps, launch.burst, numa);
                let binary = if numa {
                    &bin.schedplugins
                } else {
                    &bin.kube_scheduler
                };
                let mut args = vec![
                    format!("--config={}", config_path.display()),
                    "--bind-address=127.0.0.1".to_string(),
                    format!("--secure-port={port}"),
                ];
                args.extend(launch.verbosity.map(|v| format!("-v={v}")));
                (binary, config, args)
            }
            SchedulerKind::BindOnly => {
                return Err(BenchError::Setup(
                    "the bind-only binder runs in the runner".into(),
                ));
            }
        };
        std::fs::write(&config_path, &config).map_err(io(&config_path))?;
        let log = launch
            .dir
            .join("logs")
            .join(format!("{}-{}.log", kind.id(), launch.run));
        let out = std::fs::File::create(&log).map_err(io(&log))?;
        let err = out.try_clone().map_err(io(&log))?;
        let started = Instant::now();
        let child = Command::new(binary)
            .args(&args)
            .current_dir(launch.dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(io(binary))?;
        let pids = launch.dir.join("pids");
        OpenOptions::new()
            .append(true)
            .create(true)
            .open(&pids)
            .and_then(|mut f| writeln!(f, "{}", child.id()))
            .map_err(io(&pids))?;
        Ok(Self {
            kind,
            child,
            log,
            port,
            started,
            config,
        })
    }

    /// When the process was started (just before it was spawned).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The TAS scheduler's HTTPS port (health, `/metrics`); `None` for kube-scheduler,
    /// whose `/metrics` needs delegated authentication the benchmark does not set up.
    pub fn http_port(&self) -> Option<u16> {
        (self.kind == SchedulerKind::Tas).then_some(self.port)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Err` with the end of its log if the process has exited.
    pub fn check_alive(&mut self) -> Result<(), BenchError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(BenchError::SchedulerExited {
                scheduler: self.kind.id(),
                status: status.to_string(),
                log_tail: self.log_tail(40),
            }),
            Err(e) => Err(BenchError::Io {
                context: format!("waiting for {}", self.kind.id()),
                source: e,
            }),
        }
    }

    /// The last `n` lines of its log.
    pub fn log_tail(&self, n: usize) -> String {
        tas_testcluster::tail_lines(&self.log, n)
    }

    /// Stops it as the kubelet stops a container — SIGTERM, up to [`STOP_GRACE`] to
    /// exit, then SIGKILL — and reaps it; returns whether it exited on SIGTERM. Its
    /// figures are taken before. The graceful stop matters to the *next* run: the TAS
    /// scheduler releases its Lease on SIGTERM, so its successor leads at once (see the
    /// module documentation).
    pub async fn stop(mut self) -> bool {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return true;
        }
        let pid = rustix::process::Pid::from_child(&self.child);
        let termed = rustix::process::kill_process(pid, rustix::process::Signal::TERM).is_ok();
        let deadline = Instant::now() + STOP_GRACE;
        while termed && matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let graceful = termed && !matches!(self.child.try_wait(), Ok(None));
        if !graceful {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        graceful
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |source| BenchError::Io {
        context: path.display().to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_by_id() {
        for kind in SchedulerKind::ALL {
            assert_eq!(SchedulerKind::from_id(kind.id()), Some(kind));
        }
        assert_eq!(SchedulerKind::from_id("volcano"), None);
        assert_eq!(SchedulerKind::Tas.scheduler_name("r1"), "bench-tas-r1");
    }

    #[test]
    fn tas_config_is_a_valid_scheduler_config() {
        let parsed: tas_api::config::scheduler::SchedulerConfig =
            serde_norway::from_str(&tas_config("bench-tas-r1", None)).unwrap();
        assert_eq!(parsed.scheduler_name, "bench-tas-r1");
        assert!(!parsed.leader_election.enabled);
    }

    #[test]
    fn kube_scheduler_configs() {
        let kc = Path::new("dir/kubeconfig");
        let plain: serde_json::Value =
            serde_json::from_str(&kube_scheduler_config(kc, "s1", 1000.0, 1000, false)).unwrap();
        assert_eq!(plain["clientConnection"]["qps"], 1000.0);
        assert_eq!(plain["clientConnection"]["burst"], 1000);
        assert_eq!(plain["profiles"][0]["schedulerName"], "s1");
        assert!(plain["profiles"][0].get("plugins").is_none());

        let numa: serde_json::Value =
            serde_json::from_str(&kube_scheduler_config(kc, "s2", 1000.0, 1000, true)).unwrap();
        let profile = &numa["profiles"][0];
        assert_eq!(
            profile["plugins"]["multiPoint"]["enabled"][0]["name"],
            "NodeResourceTopologyMatch"
        );
        // The reserve plugin stays enabled (multiPoint includes it): the cache needs it.
        assert!(profile["plugins"].get("reserve").is_none());
        assert_eq!(
            profile["pluginConfig"][0]["args"]["cacheResyncPeriodSeconds"],
            5
        );
    }
}
