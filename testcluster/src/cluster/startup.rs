//! Bringing a [`TestCluster`] up, in order: pick free loopback ports and a fresh temp
//! dir; write credentials and config files; start the watchdog; start etcd and wait
//! for its port; start kube-apiserver and poll `/readyz`; start the optional
//! components together and wait for each one's port. A component exiting early fails
//! startup at once, with the tail of its log.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::{ClusterOptions, KEEP_CLUSTER_ENV, TestCluster};
use crate::components::{self, Layout, Ports};
use crate::credentials::{self, ServiceAccountKey};
use crate::process::{self, Component, Running};
use crate::watchdog::Watchdog;
use crate::{Error, Tools, kubeconfig, wait_for};

impl TestCluster {
    /// Starts every process `options` asks for and waits until each is up. On error
    /// the partly started cluster is dropped, which stops what already runs.
    pub(super) async fn start_with(tools: Tools, options: ClusterOptions) -> Result<Self, Error> {
        let started = Instant::now();
        let keep = std::env::var(KEEP_CLUSTER_ENV).is_ok_and(|v| v == "1");
        let dir = tempfile::Builder::new()
            .prefix("tas-testcluster-")
            .tempdir()
            .map_err(Error::io("creating the cluster directory"))?;
        let layout = Layout {
            base: dir.path().to_path_buf(),
        };
        let ports = Ports::from_slice(&crate::ports::free_ports(Ports::COUNT)?);
        let server = format!("https://127.0.0.1:{}", ports.apiserver);
        let token = credentials::random_token();
        write_files(&layout, &server, &token, &options)?;

        let mut cluster = Self {
            watchdog: Some(Watchdog::start(&layout.base, keep)?),
            layout,
            tools,
            server,
            running: Vec::new(),
            dir: Some(dir),
            keep_dir: keep,
        };
        eprintln!(
            "tas-testcluster: starting a test cluster in {}",
            cluster.base_dir().display()
        );
        let deadline = started + options.startup_timeout;

        cluster.spawn(
            Component::Etcd,
            components::etcd_args(&cluster.layout, ports),
        )?;
        cluster
            .wait_for_port(Component::Etcd, ports.etcd, deadline)
            .await?;
        let mut apiserver = components::apiserver_args(&cluster.layout, ports);
        if let Some(ip) = options.advertise_address {
            components::set_flag(&mut apiserver, "advertise-address", &ip.to_string());
            // Someone serves that address: keep the Service's endpoints on it.
            components::set_flag(&mut apiserver, "endpoint-reconciler-type", "lease");
        }
        if options.audit_bindings {
            apiserver.extend(components::audit_args(&cluster.layout));
        }
        cluster.spawn(Component::KubeApiserver, apiserver)?;
        cluster.wait_for_apiserver(deadline).await?;

        let layout = &cluster.layout;
        let optional = [
            (
                options.controller_manager,
                Component::KubeControllerManager,
                ports.controller_manager,
                components::controller_manager_args(layout, ports),
            ),
            (
                options.kube_scheduler,
                Component::KubeScheduler,
                ports.scheduler,
                components::scheduler_args(layout, ports),
            ),
            (
                options.kwok,
                Component::Kwok,
                ports.kwok,
                components::kwok_args(layout, ports),
            ),
        ];
        let mut listening = Vec::new();
        for (enabled, component, port, args) in optional {
            if enabled {
                cluster.spawn(component, args)?;
                listening.push((component, port));
            }
        }
        for (component, port) in listening {
            cluster.wait_for_port(component, port, deadline).await?;
        }
        eprintln!(
            "tas-testcluster: test cluster ready in {:.1}s ({})",
            started.elapsed().as_secs_f64(),
            cluster.server
        );
        Ok(cluster)
    }

    /// Stops `component` (SIGTERM, then SIGKILL after the grace period) and starts it
    /// again with the same flags, waiting until it serves again: for fault tests
    /// (clients must reconnect). Only a cluster a test owns can be restarted.
    pub async fn restart(&mut self, component: Component) -> Result<(), Error> {
        let Some(i) = self.running.iter().position(|r| r.component == component) else {
            return Err(Error::Startup {
                component: component.name(),
                reason: "not running in this cluster".into(),
                log_tail: String::new(),
            });
        };
        let old = self.running.remove(i);
        let (binary, args) = (old.binary.clone(), old.args.clone());
        process::stop_all(&mut [old], super::STOP_GRACE);
        let running = Running::spawn(component, &binary, &args, &self.layout.base)?;
        self.running.push(running);
        let deadline = Instant::now() + Duration::from_secs(60);
        if component == Component::KubeApiserver {
            self.wait_for_apiserver(deadline).await
        } else {
            Ok(())
        }
    }

    fn spawn(&mut self, component: Component, args: Vec<String>) -> Result<(), Error> {
        let binary = self.tools.binary(component.name());
        let running = Running::spawn(component, &binary, &args, &self.layout.base)?;
        self.running.push(running);
        Ok(())
    }

    /// Waits until `component` accepts TCP connections on `port`, failing early if
    /// it exits.
    async fn wait_for_port(
        &mut self,
        component: Component,
        port: u16,
        deadline: Instant,
    ) -> Result<(), Error> {
        let what = format!("{component} to listen on 127.0.0.1:{port}");
        let result = wait_for(what, remaining(deadline), || {
            let exited = self.exited(component);
            async move {
                if let Err(e) = exited {
                    return Ok(Some(Err(e)));
                }
                let addr = (std::net::Ipv4Addr::LOCALHOST, port).into();
                let up = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok();
                Ok::<_, Error>(up.then_some(Ok(())))
            }
        })
        .await;
        self.startup_result(component, result)
    }

    /// Polls kube-apiserver's `/readyz` (every post-start hook done, etcd reachable),
    /// failing early if it exits.
    async fn wait_for_apiserver(&mut self, deadline: Instant) -> Result<(), Error> {
        let kubeconfig = self.layout.kubeconfig();
        let result = wait_for("kube-apiserver /readyz", remaining(deadline), || {
            let exited = self.exited(Component::KubeApiserver);
            let kubeconfig = kubeconfig.clone();
            async move {
                if let Err(e) = exited {
                    return Ok(Some(Err(e)));
                }
                // Fails until kube-apiserver has written its cert, the kubeconfig's CA.
                let client = kube::Client::try_from(kubeconfig::load(&kubeconfig).await?)?;
                let body = client.request_text(readyz_request()).await?;
                Ok::<_, Error>((body.trim() == "ok").then_some(Ok(())))
            }
        })
        .await;
        self.startup_result(Component::KubeApiserver, result)
    }

    /// `Err` with the log tail when `component` has exited.
    fn exited(&mut self, component: Component) -> Result<(), Error> {
        self.running
            .iter_mut()
            .find(|r| r.component == component)
            .map_or(Ok(()), Running::check_alive)
    }

    /// Flattens a readiness wait whose value is the component's own verdict, and turns
    /// a timeout into a startup error carrying the component's log.
    fn startup_result(
        &self,
        component: Component,
        result: Result<Result<(), Error>, Error>,
    ) -> Result<(), Error> {
        match result {
            Ok(verdict) => verdict,
            Err(timeout) => Err(Error::Startup {
                component: component.name(),
                reason: timeout.to_string(),
                log_tail: self.logs_tail(component, process::STARTUP_TAIL_LINES),
            }),
        }
    }
}

/// `GET /readyz`; the API server answers `ok` once ready.
fn readyz_request() -> http::Request<Vec<u8>> {
    let mut request = http::Request::new(Vec::new());
    *request.uri_mut() = http::Uri::from_static("/readyz");
    request
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// Writes the credentials and config files the components read.
fn write_files(
    layout: &Layout,
    server: &str,
    token: &str,
    options: &ClusterOptions,
) -> Result<(), Error> {
    let key = ServiceAccountKey::generate()?;
    let kubeconfig = kubeconfig::render(server, &layout.apiserver_cert(), token)?;
    let scheduler =
        components::scheduler_config(layout, options.scheduler_qps, options.scheduler_burst);
    for dir in [layout.logs(), layout.cert_dir()] {
        std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    }
    if options.audit_bindings {
        std::fs::write(layout.audit_policy(), crate::audit::POLICY)
            .map_err(Error::io("writing the audit policy"))?;
    }
    let files = [
        (layout.sa_private_key(), key.private_pem.as_str()),
        (layout.sa_public_key(), key.public_pem.as_str()),
        (layout.tokens(), &credentials::admin_token_csv(token)),
        (layout.kubeconfig(), &kubeconfig),
        (layout.scheduler_config(), &scheduler),
        (layout.kwok_stages(), components::KWOK_STAGES),
    ];
    for (path, contents) in files {
        std::fs::write(&path, contents)
            .map_err(Error::io(format!("writing {}", path.display())))?;
    }
    Ok(())
}
