//! A network identity per pod: a network namespace with one veth pair to the host, and
//! a forwarder that lets the pod reach the API server. (As without `hostNetwork` on a
//! real node: two pods, even on one node, can bind the same port.)
//!
//! The namespace is held by a `sleep` process started with `unshare --net`, not by a
//! name under `/run/netns`: when that process dies (dropped, or killed by the test
//! cluster's watchdog when the test process is gone) the kernel frees the namespace and
//! its veth pair, so nothing outlives the run. Its pid is recorded for the watchdog.
//!
//! Addresses: each runner takes a free `10.a.0.0/16` on the host; its `k`-th pod gets
//! the /30 at offset `4k`: the host side `+1` (the pod's gateway) and the namespace side
//! `+2` (the pod's IP). The namespace has no default route: the pod reaches its gateway
//! and nothing else.
//!
//! The API server listens on 127.0.0.1 only, which no other namespace can reach, and
//! there is no kube-proxy (nor iptables) to DNAT a Service IP. So a TCP forwarder in the
//! runner listens on each gateway at port 443 and passes the bytes to the API server;
//! pods name it `kubernetes.default.svc` (their `/etc/hosts` resolves it to their
//! gateway), a name the API server's serving certificate carries, so TLS verification
//! works unchanged.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::RunnerError;

/// The name pods reach the API server by (in the API server's certificate).
pub const SERVICE_HOST: &str = "kubernetes.default.svc";
/// The port pods reach the API server on (as the `kubernetes` Service's port).
pub const API_SERVICE_PORT: u16 = 443;
/// Pods per runner (/30s in a /16).
pub const MAX_PODS: usize = 16383;

/// One pod's namespace, veth pair, API forwarder and host-service forwarders.
#[derive(Debug)]
pub struct PodNetwork {
    holder: Child,
    holder_pid: u32,
    /// Host side of the veth pair: the pods' way to the API server.
    pub gateway: Ipv4Addr,
    /// The node's (and its pods') IP inside the namespace.
    pub address: Ipv4Addr,
    forwarders: Vec<JoinHandle<()>>,
}

/// A free `10.a.0.0/16` for this runner: one not in use on the host.
pub async fn pick_subnet() -> Result<u8, RunnerError> {
    static RUNNERS: AtomicU32 = AtomicU32::new(0);
    let used = run("ip", &["-4", "-o", "addr"]).await? + &run("ip", &["-4", "route"]).await?;
    let seed = std::process::id() ^ (RUNNERS.fetch_add(1, Ordering::Relaxed) << 16);
    for i in 0..50u32 {
        let a = 200 + (seed.wrapping_mul(2_654_435_761).wrapping_add(i) % 50) as u8;
        if !used.contains(&format!("10.{a}.")) {
            return Ok(a);
        }
    }
    Err(RunnerError::Network(
        "no free 10.x.0.0/16 on this host".into(),
    ))
}

impl PodNetwork {
    /// Creates the `index`-th pod's namespace in `10.<subnet>.0.0/16` and starts its API
    /// forwarder.
    pub async fn create(
        index: usize,
        subnet: u8,
        api_server: SocketAddr,
        services: &[super::HostService],
        pids_file: Option<&Path>,
    ) -> Result<Self, RunnerError> {
        if index >= MAX_PODS {
            return Err(RunnerError::Network(format!(
                "at most {MAX_PODS} pods per runner"
            )));
        }
        let base = 4 * index as u32;
        let (hi, lo) = ((base >> 8) as u8, (base & 0xff) as u8);
        let gateway = Ipv4Addr::new(10, subnet, hi, lo + 1);
        let address = Ipv4Addr::new(10, subnet, hi, lo + 2);
        let holder = Command::new("unshare")
            .args(["--net", "--", "sleep", "infinity"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| RunnerError::Network(format!("starting `unshare --net`: {e}")))?;
        let holder_pid = holder
            .id()
            .ok_or_else(|| RunnerError::Network("the namespace holder exited".into()))?;
        if let Some(file) = pids_file {
            super::track_pid(file, holder_pid).map_err(RunnerError::Pids)?;
        }
        wait_unshared(holder_pid).await?;
        let host_if = format!(
            "t{:x}p{index}",
            (std::process::id() << 4 ^ subnet as u32) & 0xf_ffff
        );
        let ns = format!("--net=/proc/{holder_pid}/ns/net");
        let pid = holder_pid.to_string();
        run(
            "ip",
            &[
                "link", "add", &host_if, "type", "veth", "peer", "name", "eth0", "netns", &pid,
            ],
        )
        .await?;
        run(
            "ip",
            &["addr", "add", &format!("{gateway}/30"), "dev", &host_if],
        )
        .await?;
        run("ip", &["link", "set", &host_if, "up"]).await?;
        let inside = |args: &[&str]| {
            let mut v = vec![ns.as_str(), "--", "ip"];
            v.extend_from_slice(args);
            v.into_iter().map(str::to_owned).collect::<Vec<_>>()
        };
        for args in [
            inside(&["addr", "add", &format!("{address}/30"), "dev", "eth0"]),
            inside(&["link", "set", "eth0", "up"]),
            inside(&["link", "set", "lo", "up"]),
        ] {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            run("nsenter", &refs).await?;
        }
        let listener = TcpListener::bind((gateway, API_SERVICE_PORT))
            .await
            .map_err(|e| RunnerError::Network(format!("listening on {gateway}:443: {e}")))?;
        let mut forwarders = vec![tokio::spawn(forward(listener, api_server))];
        for service in services {
            let listener = TcpListener::bind((gateway, service.port))
                .await
                .map_err(|e| {
                    RunnerError::Network(format!(
                        "listening on {gateway}:{} for {}: {e}",
                        service.port, service.name
                    ))
                });
            match listener {
                Ok(l) => forwarders.push(tokio::spawn(forward(l, service.target))),
                Err(e) => {
                    forwarders.iter().for_each(JoinHandle::abort);
                    return Err(e);
                }
            }
        }
        Ok(Self {
            holder,
            holder_pid,
            gateway,
            address,
            forwarders,
        })
    }

    /// The namespace, for `nsenter --net=`.
    pub fn netns_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.holder_pid))
    }

    /// Stops the forwarder and frees the namespace (its veth pair goes with it).
    pub async fn destroy(mut self) {
        self.forwarders.iter().for_each(JoinHandle::abort);
        let _ = self.holder.kill().await;
    }
}

impl Drop for PodNetwork {
    fn drop(&mut self) {
        self.forwarders.iter().for_each(JoinHandle::abort);
        let _ = self.holder.start_kill();
    }
}

/// Waits until `pid` lives in a network namespace of its own.
async fn wait_unshared(pid: u32) -> Result<(), RunnerError> {
    let own = std::fs::read_link("/proc/self/ns/net").ok();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        tick.tick().await;
        let theirs = std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
        if theirs.is_some() && theirs != own {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(RunnerError::Network(format!(
                "process {pid} did not enter a new network namespace"
            )));
        }
    }
}

async fn forward(listener: TcpListener, api_server: SocketAddr) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            if let Ok(mut outbound) = TcpStream::connect(api_server).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

/// Runs a host tool; its stdout, or an error with its stderr.
pub async fn run(program: &str, args: &[&str]) -> Result<String, RunnerError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| RunnerError::Network(format!("running {program}: {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(RunnerError::Network(format!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}
