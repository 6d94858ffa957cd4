//! What a real node changes on the host despite its own namespaces, recorded before it
//! starts and put back after it stops.
//!
//! The mount and network namespaces keep the kubelet's and CNI's files, mounts,
//! addresses, routes, iptables chains and `net.*` sysctls off the host. What remains
//! global: the kernel sysctls the kubelet sets (`vm.overcommit_memory`, `kernel.panic`,
//! `kernel.panic_on_oops`; `net.ipv4.ip_forward` is recorded too, as a check) and the
//! cgroups it creates (`kubepods` in every cgroup v1 hierarchy: there is no cgroup
//! namespace here). The host's iptables chains named `KUBE-*` are recorded as a check:
//! the kubelet creates its chains in the node's network namespace, so none should
//! appear on the host. [`HostState::restore_script`] is a `sh` script that writes the
//! values back and removes the cgroups that were absent; it runs from `Drop` and, when
//! the test process dies first, from the cluster's watchdog (`cleanup.d/`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::RealNodeError;

/// The global sysctls the kubelet or CNI may change.
pub const SYSCTLS: [&str; 4] = [
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
    "net/ipv4/ip_forward",
];

/// The cgroup the kubelet creates for pods (cgroupfs driver, default cgroup root).
const KUBEPODS: &str = "kubepods";
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The host's values before a node started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostState {
    /// `(path under /proc/sys, value)`.
    pub sysctls: Vec<(String, String)>,
    /// The `kubepods` cgroup directories that did not exist, to remove afterwards.
    pub absent_cgroups: Vec<PathBuf>,
    /// The host's iptables chains named `KUBE-*` (`table/chain`), when `iptables-save`
    /// is installed.
    pub kube_chains: Vec<String>,
}

impl HostState {
    /// Reads the current values.
    pub fn record() -> Result<Self, RealNodeError> {
        let mut sysctls = Vec::new();
        for name in SYSCTLS {
            let path = Path::new("/proc/sys").join(name);
            let value = std::fs::read_to_string(&path).map_err(|source| RealNodeError::Host {
                what: format!("reading {}", path.display()),
                source,
            })?;
            sysctls.push((name.to_owned(), value.trim().to_owned()));
        }
        let mut absent_cgroups = Vec::new();
        if let Ok(entries) = std::fs::read_dir(CGROUP_ROOT) {
            for entry in entries.flatten() {
                let dir = entry.path().join(KUBEPODS);
                if entry.path().is_dir() && !entry.path().is_symlink() && !dir.exists() {
                    absent_cgroups.push(dir);
                }
            }
        }
        absent_cgroups.sort();
        Ok(Self {
            sysctls,
            absent_cgroups,
            kube_chains: kube_chains(),
        })
    }

    /// The differences between `self` (before) and `now`, one line each; empty when the
    /// host is as it was.
    pub fn differences(&self, now: &HostState) -> Vec<String> {
        let mut out = Vec::new();
        for ((name, before), (_, after)) in self.sysctls.iter().zip(&now.sysctls) {
            if before != after {
                out.push(format!("sysctl {name}: {before} before, {after} now"));
            }
        }
        for dir in &self.absent_cgroups {
            if dir.exists() {
                out.push(format!("cgroup {} left behind", dir.display()));
            }
        }
        for chain in &now.kube_chains {
            if !self.kube_chains.contains(chain) {
                out.push(format!("iptables chain {chain} appeared on the host"));
            }
        }
        out
    }

    /// A `sh` script that restores the recorded state; run it after every process of
    /// the node has ended (a cgroup with a process in it cannot be removed; it retries
    /// for up to 5 s while killed processes finish exiting).
    pub fn restore_script(&self) -> String {
        let mut s =
            String::from("# Restores the host state recorded before a real node started.\n");
        for (name, value) in &self.sysctls {
            let _ = writeln!(s, "echo '{value}' > /proc/sys/{name} 2>/dev/null || true");
        }
        for dir in &self.absent_cgroups {
            let d = dir.display();
            let _ = writeln!(
                s,
                "i=0; while [ -d '{d}' ] && [ $i -lt 50 ]; do \
                 find '{d}' -depth -type d -exec rmdir {{}} + 2>/dev/null; \
                 [ -d '{d}' ] && sleep 0.1; i=$((i + 1)); done"
            );
        }
        s
    }
}

/// `table/chain` for every `KUBE-*` chain `iptables-save` lists; empty without it.
fn kube_chains() -> Vec<String> {
    let Ok(out) = std::process::Command::new("iptables-save")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    let mut table = "";
    let mut chains = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(t) = line.strip_prefix('*') {
            table = t;
        } else if let Some(chain) = line.strip_prefix(":KUBE-") {
            let name = chain.split_whitespace().next().unwrap_or_default();
            chains.push(format!("{table}/KUBE-{name}"));
        }
    }
    chains.sort();
    chains
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_writes_back_and_removes_cgroups() {
        let state = HostState {
            sysctls: vec![("kernel/panic".into(), "1".into())],
            absent_cgroups: vec![PathBuf::from("/sys/fs/cgroup/cpu/kubepods")],
            kube_chains: vec![],
        };
        let s = state.restore_script();
        assert!(s.contains("echo '1' > /proc/sys/kernel/panic"));
        assert!(s.contains("find '/sys/fs/cgroup/cpu/kubepods' -depth -type d -exec rmdir {} +"));
    }

    #[test]
    fn differences_name_changed_sysctls() {
        let before = HostState {
            sysctls: vec![("kernel/panic".into(), "1".into())],
            absent_cgroups: vec![],
            kube_chains: vec![],
        };
        let mut after = before.clone();
        after.sysctls[0].1 = "10".into();
        after.kube_chains.push("filter/KUBE-FIREWALL".into());
        assert_eq!(
            before.differences(&after),
            vec![
                "sysctl kernel/panic: 1 before, 10 now".to_owned(),
                "iptables chain filter/KUBE-FIREWALL appeared on the host".to_owned()
            ]
        );
    }
}
