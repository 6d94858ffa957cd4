//! The kubelet podresources v1 gRPC API (`k8s.io/kubelet/pkg/apis/podresources/v1`):
//! messages, client and server generated from `proto/podresources_v1.proto`, written
//! from the wire contract (field numbers) with a pure-Rust protobuf compiler.
//!
//! The node agent (`tas-updater`) is the client; the node simulator serves it. Both
//! speak it over the kubelet's unix socket: [`connect_unix`] dials one.

use std::path::PathBuf;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// Generated messages, client (`pod_resources_lister_client`) and server
/// (`pod_resources_lister_server`) of package `v1`.
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("v1");
}

/// The URI is never resolved: the connector dials the unix socket. `localhost` is the
/// authority gRPC clients conventionally send over unix sockets.
const UNUSED_URI: &str = "http://localhost";

/// Dials the podresources socket at `path` and returns a gRPC channel over it.
pub async fn connect_unix(path: impl Into<PathBuf>) -> Result<Channel, tonic::transport::Error> {
    let path = path.into();
    let connector = tower::service_fn(move |_: Uri| {
        let path = path.clone();
        async move { UnixStream::connect(path).await.map(TokioIo::new) }
    });
    Endpoint::from_static(UNUSED_URI)
        .connect_with_connector(connector)
        .await
}
