//! A TCP proxy in front of kube-apiserver that can go silent, to cut one client off
//! the API server the way a network partition does: connections stay open, requests
//! get no answer.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct SilenceableProxy {
    addr: SocketAddr,
    silent: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl SilenceableProxy {
    /// Starts forwarding a loopback port to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (silent, _) = watch::channel(false);
        let silent_rx = silent.subscribe();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let silent = silent_rx.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        pipe(client, server, silent).await;
                    }
                });
            }
        });
        Self {
            addr,
            silent,
            accept,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// From now on no byte passes, in either direction, on any connection.
    pub fn go_silent(&self) {
        self.silent.send_replace(true);
    }
}

impl Drop for SilenceableProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn pipe(client: TcpStream, server: TcpStream, silent: watch::Receiver<bool>) {
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        forward(client_read, server_write, silent.clone()),
        forward(server_read, client_write, silent),
    );
}

async fn forward(
    mut from: impl AsyncReadExt + Unpin,
    mut to: impl AsyncWriteExt + Unpin,
    silent: watch::Receiver<bool>,
) {
    let mut buf = vec![0; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if *silent.borrow() {
            // Hold both ends open and say nothing, like a partitioned network.
            std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
