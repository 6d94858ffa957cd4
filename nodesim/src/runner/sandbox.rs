//! A pod's sandbox: its directory on the host and the root filesystem its processes see.
//!
//! `<node-dir>/pods/<namespace>_<name>_<uid>/` holds `volumes/<volume>/` (see
//! [`super::volumes`]), `etc/` (the pod's `hosts`, `resolv.conf`, `nsswitch.conf`,
//! `passwd`, `group`, `hostname`) and `<container>.log`. A container starts through
//! `nsenter --net=<pod namespace> unshare --mount` and a generated `sh` script that,
//! inside the new mount namespace only: mounts a tmpfs as the pod's root, binds the
//! host's `/usr` (minus `/usr/local`), `/bin`, `/lib*`, `/dev`, `/sys`, a fresh `/proc`
//! (the process's own `status` replaced by the node's shared CPU pool where the node
//! has one) and the pod's `etc/`, binds the binary at the image's entrypoint
//! `/usr/local/bin/<image>`, binds every volume mount at its `mountPath` (read-only
//! where asked; `subPath` honoured), makes the root read-only if the container asks,
//! then `chroot`s there (`unshare --root --wd`) and drops to the container's user
//! (`setpriv`). So the binaries read the in-cluster paths they would in a real pod
//! (`/var/run/secrets/kubernetes.io/serviceaccount/token`, `/etc/tas-scheduler/...`,
//! the node's sysfs and kubelet socket under their mount paths) and nothing on the host
//! changes; the mounts vanish with the process.

use std::path::{Path, PathBuf};

/// A node's host paths: where a `hostPath` of the node lives in the simulator's files.
///
/// The simulated node's kubelet keeps its files where a kubelet does by default:
/// `/var/lib/kubelet/config.yaml` and `/var/lib/kubelet/pod-resources/`, so
/// `/var/lib/kubelet` is the node's directory; `/sys` holds the
/// node's fake sysfs. Any other host path lives under `<node-dir>/host/<path>`.
#[derive(Debug, Clone)]
pub struct HostPaths {
    node_dir: PathBuf,
}

impl HostPaths {
    /// The host paths of the node whose files are in `node_dir`.
    pub fn new(node_dir: &Path) -> Self {
        Self {
            node_dir: node_dir.to_path_buf(),
        }
    }

    /// Where host path `path` is, checked against the hostPath `type_` as the kubelet
    /// does (`Directory`, `File`, `Socket` must exist; `...OrCreate` creates).
    pub fn resolve(&self, path: &str, type_: &str) -> Result<PathBuf, String> {
        let mapped = self.map(path);
        let exists = mapped.exists();
        match type_ {
            "Directory" if !mapped.is_dir() => Err(format!(
                "hostPath type check failed: {path} is not a directory"
            )),
            "File" if !mapped.is_file() => {
                Err(format!("hostPath type check failed: {path} is not a file"))
            }
            "Socket" if !exists => Err(format!(
                "hostPath type check failed: {path} is not a socket"
            )),
            "DirectoryOrCreate" | "" if !exists => {
                std::fs::create_dir_all(&mapped).map_err(|e| format!("creating {path}: {e}"))?;
                Ok(mapped)
            }
            "FileOrCreate" if !exists => {
                if let Some(parent) = mapped.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| format!("creating {path}: {e}"))?;
                }
                std::fs::write(&mapped, b"").map_err(|e| format!("creating {path}: {e}"))?;
                Ok(mapped)
            }
            "Directory" | "File" | "Socket" | "DirectoryOrCreate" | "FileOrCreate" | "" => {
                Ok(mapped)
            }
            other => Err(format!(
                "hostPath type {other} is not supported by the pod runner"
            )),
        }
    }

    fn map(&self, path: &str) -> PathBuf {
        let path = path.trim_end_matches('/');
        let table = [
            ("/sys", self.node_dir.join("sys")),
            (
                "/var/lib/kubelet/config.yaml",
                self.node_dir.join("config.yaml"),
            ),
            (
                "/var/lib/kubelet/pod-resources",
                self.node_dir.join("pod-resources"),
            ),
            // The directory of the kubelet's config file (the node agent mounts it, not
            // the file); it holds the two entries above.
            ("/var/lib/kubelet", self.node_dir.clone()),
        ];
        for (prefix, target) in table {
            if path == prefix {
                return target;
            }
            if let Some(rest) = path.strip_prefix(prefix).and_then(|r| r.strip_prefix('/')) {
                return target.join(rest);
            }
        }
        self.node_dir
            .join("host")
            .join(path.trim_start_matches('/'))
    }
}

/// One bind mount into the pod's root.
#[derive(Debug, Clone)]
pub struct Mount {
    /// On the host.
    pub source: PathBuf,
    /// Inside the pod.
    pub target: String,
    /// Read-only.
    pub read_only: bool,
}

/// How to start one container process.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The pod's network namespace (`/proc/<pid>/ns/net`).
    pub netns: PathBuf,
    /// The pod's sandbox directory.
    pub sandbox: PathBuf,
    /// The binary on the host, and where the image keeps it.
    pub binary: PathBuf,
    /// E.g. `/usr/local/bin/tas-updater`.
    pub entrypoint: String,
    /// Volume mounts.
    pub mounts: Vec<Mount>,
    /// uid, gid.
    pub user: (i64, i64),
    /// Working directory inside the pod.
    pub working_dir: String,
    /// `readOnlyRootFilesystem`.
    pub read_only_root: bool,
    /// The node's shared-pool status file, shown as the process's own
    /// `/proc/<pid>/status` ([`crate::sysfs::shared_pool_status_path`]), if the node
    /// has one.
    pub proc_status: Option<PathBuf>,
}

/// Single-quotes `s` for `sh`.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl Launch {
    /// The program and arguments that start `argv` (the container's command line as the
    /// kubelet would exec it) inside the pod's root.
    pub fn command(&self, container: &str, argv: &[String]) -> (String, Vec<String>) {
        let script = self.script(container);
        let mut args = vec![
            format!("--net={}", self.netns.display()),
            "--".into(),
            "unshare".into(),
            "--mount".into(),
            "--propagation".into(),
            "private".into(),
            "--".into(),
            "sh".into(),
            "-c".into(),
            script,
            "tas-pod".into(),
        ];
        args.extend(argv.iter().cloned());
        ("nsenter".into(), args)
    }

    fn script(&self, container: &str) -> String {
        let root = self.sandbox.join(format!("root-{container}"));
        let r = root.display().to_string();
        let mut s = String::from("set -eu\n");
        s += &format!(
            "mkdir -p {q}\nmount -t tmpfs -o mode=0755 tas-pod-root {q}\n",
            q = sq(&r)
        );
        for top in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
            let host = Path::new("/").join(top);
            match std::fs::read_link(&host) {
                // Merged /usr: recreate the symlink, its target is bound below.
                Ok(link) => {
                    s += &format!(
                        "ln -sfn {} {}\n",
                        sq(&link.display().to_string()),
                        sq(&format!("{r}/{top}"))
                    );
                }
                Err(_) if host.is_dir() => bind(&mut s, &r, &host, &format!("/{top}"), true),
                Err(_) => {}
            }
        }
        if let Ok(entries) = std::fs::read_dir("/usr") {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name != "local" && e.path().is_dir() {
                    bind(&mut s, &r, &e.path(), &format!("/usr/{name}"), true);
                }
            }
        }
        bind(&mut s, &r, &self.binary, &self.entrypoint, true);
        bind(&mut s, &r, Path::new("/dev"), "/dev", false);
        bind(&mut s, &r, Path::new("/sys"), "/sys", true);
        // File by file: volumes may be mounted under /etc too.
        for name in ETC_FILES {
            bind(
                &mut s,
                &r,
                &self.sandbox.join("etc").join(name),
                &format!("/etc/{name}"),
                true,
            );
        }
        s += &format!(
            "mkdir -p {p}\nmount -t proc proc {p}\n",
            p = sq(&format!("{r}/proc"))
        );
        // The shell execs the container's process, which keeps its pid: its own status
        // shows the node's shared pool as a kubelet would set its cpuset.
        if let Some(status) = &self.proc_status {
            s += &format!(
                "mount --bind {} {}\"/$$/status\"\n",
                sq(&status.display().to_string()),
                sq(&format!("{r}/proc"))
            );
        }
        s += &format!("mkdir -p -m 1777 {}\n", sq(&format!("{r}/tmp")));
        for m in &self.mounts {
            bind(&mut s, &r, &m.source, &m.target, m.read_only);
        }
        if self.read_only_root {
            s += &format!("mount -o remount,ro {}\n", sq(&r));
        }
        s += &format!(
            "exec unshare --root={} --wd={} -- setpriv --reuid={} --regid={} --clear-groups -- \"$@\"\n",
            sq(&r),
            sq(&self.working_dir),
            self.user.0,
            self.user.1
        );
        s
    }
}

/// Appends the lines that bind `source` at `target` under `root`.
fn bind(s: &mut String, root: &str, source: &Path, target: &str, read_only: bool) {
    let t = sq(&format!("{root}{target}"));
    if source.is_dir() {
        *s += &format!("mkdir -p {t}\n");
    } else {
        *s += &format!("mkdir -p \"$(dirname {t})\"\ntouch {t}\n");
    }
    *s += &format!("mount --rbind {} {t}\n", sq(&source.display().to_string()));
    if read_only {
        *s += &format!("mount -o remount,bind,ro {t}\n");
    }
}

/// The files of the pod's `/etc`.
const ETC_FILES: [&str; 6] = [
    "hosts",
    "nsswitch.conf",
    "resolv.conf",
    "passwd",
    "group",
    "hostname",
];

/// Writes the pod's `etc/`: `hosts` (the pod's gateway as `kubernetes.default.svc` and
/// as each of `services`, the runner's host services),
/// `nsswitch.conf` (files only), an empty `resolv.conf`, `passwd`/`group` with root and
/// the images' `nonroot` (65532), `hostname`.
pub fn write_etc(
    sandbox: &Path,
    pod_name: &str,
    pod_ip: &str,
    gateway: &str,
    services: &[&str],
) -> std::io::Result<()> {
    let services: String = services
        .iter()
        .map(|s| format!("{gateway} {s}\n"))
        .collect();
    let etc = sandbox.join("etc");
    std::fs::create_dir_all(&etc)?;
    let files = [
        (
            "hosts",
            format!(
                "127.0.0.1 localhost\n{gateway} kubernetes.default.svc.cluster.local kubernetes.default.svc kubernetes.default kubernetes\n{services}{pod_ip} {pod_name}\n"
            ),
        ),
        ("nsswitch.conf", "hosts: files\npasswd: files\ngroup: files\n".into()),
        ("resolv.conf", String::new()),
        ("passwd", "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n".into()),
        ("group", "root:x:0:\nnonroot:x:65532:\n".into()),
        ("hostname", format!("{pod_name}\n")),
    ];
    for (name, content) in files {
        std::fs::write(etc.join(name), content)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_map_into_the_node() {
        let node = Path::new("/n");
        let h = HostPaths::new(node);
        assert_eq!(h.map("/sys"), node.join("sys"));
        assert_eq!(
            h.map("/sys/devices/system/node"),
            node.join("sys/devices/system/node")
        );
        assert_eq!(
            h.map("/var/lib/kubelet/pod-resources/"),
            node.join("pod-resources")
        );
        assert_eq!(
            h.map("/var/lib/kubelet/config.yaml"),
            node.join("config.yaml")
        );
        assert_eq!(h.map("/var/lib/kubelet"), node.to_path_buf());
        assert_eq!(h.map("/opt/x"), node.join("host/opt/x"));
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(sq("a'b"), "'a'\\''b'");
    }
}
