//! Child processes of a test cluster: spawning with a log file, stopping, log tails.
//!
//! Each component runs with stdin closed and stdout + stderr appended to
//! `<base>/logs/<component>.log`; its pid is appended to `<base>/pids`, which the
//! [watchdog](crate::watchdog) reads if the test process dies without dropping the
//! cluster.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Error;

/// The processes a test cluster may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Component {
    /// etcd, the API server's storage.
    Etcd,
    /// kube-apiserver.
    KubeApiserver,
    /// kube-controller-manager (Deployments, ReplicaSets, garbage collection, ...).
    KubeControllerManager,
    /// kube-scheduler, the default scheduler.
    KubeScheduler,
    /// kwok, which plays kubelet for fake nodes.
    Kwok,
}

impl Component {
    /// Every component, in start order.
    pub const ALL: [Component; 5] = [
        Component::Etcd,
        Component::KubeApiserver,
        Component::KubeControllerManager,
        Component::KubeScheduler,
        Component::Kwok,
    ];

    /// The binary name, also used for the log file name.
    pub fn name(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::KubeApiserver => "kube-apiserver",
            Component::KubeControllerManager => "kube-controller-manager",
            Component::KubeScheduler => "kube-scheduler",
            Component::Kwok => "kwok",
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A running component.
pub(crate) struct Running {
    pub component: Component,
    pub child: Child,
    pub log: PathBuf,
    /// What it was started with, to restart it the same way.
    pub binary: PathBuf,
    pub args: Vec<String>,
}

impl Running {
    /// Starts `binary args...` in `base`, logging to `base/logs/<component>.log`, and
    /// records its pid in `base/pids`.
    pub fn spawn(
        component: Component,
        binary: &Path,
        args: &[String],
        base: &Path,
    ) -> Result<Self, Error> {
        let log = log_path(base, component);
        // Appending: a restarted component keeps its earlier log above the new one.
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(Error::io(format!("creating {}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(Error::io(format!("duplicating {}", log.display())))?;
        let child = Command::new(binary)
            .args(args)
            .current_dir(base)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(Error::io(format!("starting {}", binary.display())))?;
        let pids = base.join("pids");
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&pids)
            .and_then(|mut f| writeln!(f, "{}", child.id()))
            .map_err(Error::io(format!("recording a pid in {}", pids.display())))?;
        Ok(Self {
            component,
            child,
            log,
            binary: binary.to_path_buf(),
            args: args.to_vec(),
        })
    }

    /// `Err` with the log tail when the process has exited.
    pub fn check_alive(&mut self) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.startup_error(format!("exited with {status}"))),
            Err(e) => Err(self.startup_error(format!("cannot query its status: {e}"))),
        }
    }

    /// A startup error for this component, carrying the end of its log.
    pub fn startup_error(&self, reason: String) -> Error {
        Error::Startup {
            component: self.component.name(),
            reason,
            log_tail: tail_lines(&self.log, STARTUP_TAIL_LINES),
        }
    }
}

/// Log lines an [`Error::Startup`] carries.
pub(crate) const STARTUP_TAIL_LINES: usize = 40;

/// Where a component's log goes.
pub(crate) fn log_path(base: &Path, component: Component) -> PathBuf {
    base.join("logs").join(format!("{}.log", component.name()))
}

/// Stops every process: SIGTERM to all, up to `grace` for them to exit, then SIGKILL
/// for the rest. Every child is reaped, so none is left as a zombie.
pub(crate) fn stop_all(running: &mut [Running], grace: Duration) {
    for r in running.iter_mut() {
        if matches!(r.child.try_wait(), Ok(None)) {
            send_sigterm(r.child.id());
        }
    }
    let deadline = Instant::now() + grace;
    for r in running.iter_mut() {
        while matches!(r.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if matches!(r.child.try_wait(), Ok(None)) {
            // Already-exited children make kill() fail harmlessly.
            let _ = r.child.kill();
        }
        let _ = r.child.wait();
    }
}

/// SIGTERM through the shell's `kill` builtin: std only sends SIGKILL, and sending
/// signals directly would need `unsafe` (forbidden in this workspace) or another
/// dependency. `sh` is needed anyway, for the watchdog.
fn send_sigterm(pid: u32) {
    let _ = Command::new("sh")
        .args(["-c", "kill -TERM \"$1\"", "sh", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The last `n` lines of a log file (at most the last 64 KiB are read); a note
/// instead when the file cannot be read.
pub fn tail_lines(path: &Path, n: usize) -> String {
    const MAX_BYTES: u64 = 64 * 1024;
    let read = || -> std::io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(MAX_BYTES)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_returns_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        std::fs::write(&path, "a\nb\nc\nd\n").unwrap();
        assert_eq!(tail_lines(&path, 2), "c\nd");
        assert_eq!(tail_lines(&path, 10), "a\nb\nc\nd");
        assert!(tail_lines(&dir.path().join("missing"), 3).starts_with("(cannot read"));
    }

    #[test]
    fn stop_all_terminates_and_reaps() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("logs")).unwrap();
        let args = ["-c".to_string(), "sleep 30".to_string()];
        let mut running =
            vec![Running::spawn(Component::Etcd, Path::new("sh"), &args, dir.path()).unwrap()];
        running[0].check_alive().unwrap();
        stop_all(&mut running, Duration::from_secs(5));
        assert!(running[0].child.try_wait().unwrap().is_some());
        let pids = std::fs::read_to_string(dir.path().join("pids")).unwrap();
        assert_eq!(pids.trim(), running[0].child.id().to_string());
    }
}
