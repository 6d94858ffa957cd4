//! The node's way to the API server: a TCP forwarder whose listening socket lives in
//! the node's network namespace and whose outgoing connections start
//! in the host's, where kube-apiserver listens on `127.0.0.1`.
//!
//! A socket belongs to the namespace of the thread that created it, for its whole life.
//! So one short-lived thread enters the node's namespace (`setns`), binds the listener
//! and exits; the accept loop and the copies run on ordinary threads of the test
//! process, in the host namespace. TLS passes through untouched: the kubelet talks to
//! `https://127.0.0.1:<port>`, a name kube-apiserver's self-signed certificate covers.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// A running forwarder; dropping it stops accepting (open connections end when either
/// side closes, e.g. when the node's processes are killed).
pub struct Forwarder {
    port: u16,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Forwarder {
    /// Listens on `bind` inside the network namespace `netns` (a `/proc/<pid>/ns/net`
    /// path) and forwards every connection to `target`.
    pub fn start(netns: &Path, bind: SocketAddr, target: SocketAddr) -> io::Result<Self> {
        let ns = std::fs::File::open(netns)?;
        let listener = std::thread::spawn(move || -> io::Result<TcpListener> {
            rustix::thread::move_into_link_name_space(
                std::os::fd::AsFd::as_fd(&ns),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
            TcpListener::bind(bind)
        })
        .join()
        .map_err(|_| io::Error::other("the thread binding in the node's namespace panicked"))??;
        let port = listener.local_addr()?.port();
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let accept = std::thread::spawn(move || accept_loop(&listener, target, &stopping));
        Ok(Self {
            port,
            stop,
            accept: Some(accept),
        })
    }

    /// The port it listens on, in the node's namespace.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, target: SocketAddr, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((client, _)) => {
                std::thread::spawn(move || forward(client, target));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Copies both ways until either side closes.
fn forward(client: TcpStream, target: SocketAddr) {
    let Ok(server) = TcpStream::connect(target) else {
        return;
    };
    let (Ok(mut client_r), Ok(mut server_w)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let (mut client_w, mut server_r) = (client, server);
    let _ = client_r.set_nonblocking(false);
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut client_r, &mut server_w);
        let _ = server_w.shutdown(Shutdown::Write);
    });
    let _ = io::copy(&mut server_r, &mut client_w);
    let _ = client_w.shutdown(Shutdown::Write);
    let _ = up.join();
}
