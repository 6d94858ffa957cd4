//! Errors of calls to the kubelet podresources API, each naming the socket it was about.

use std::path::PathBuf;
use std::time::Duration;

use tonic::Code;

/// A failed call to the kubelet podresources API.
#[derive(Debug, thiserror::Error)]
pub enum PodResourcesError {
    /// No socket at the path: the kubelet is not running (yet), or the socket's directory
    /// is not mounted into the agent.
    #[error("kubelet podresources socket {} does not exist", path.display())]
    SocketMissing {
        /// Socket path that was dialled.
        path: PathBuf,
    },

    /// The socket exists but dialling it failed (typically a stale socket left by a
    /// kubelet that has stopped).
    #[error("cannot connect to kubelet podresources socket {}: {}", path.display(), root_cause(source))]
    Connect {
        /// Socket path that was dialled.
        path: PathBuf,
        /// Transport error of the dial.
        source: tonic::transport::Error,
    },

    /// The kubelet answered `Unavailable`, or the connection broke during the call.
    #[error("kubelet podresources socket {}: {method} unavailable: {}", path.display(), status.message())]
    Unavailable {
        /// Socket path of the kubelet.
        path: PathBuf,
        /// RPC that failed.
        method: &'static str,
        /// Status as received.
        status: tonic::Status,
    },

    /// The kubelet's rate limit rejected the call (`ResourceExhausted`).
    #[error("kubelet podresources socket {}: {method} rejected by the kubelet's rate limit", path.display())]
    RateLimited {
        /// Socket path of the kubelet.
        path: PathBuf,
        /// RPC that was rejected.
        method: &'static str,
    },

    /// No answer within the per-call timeout (dialling included).
    #[error("kubelet podresources socket {}: {method} timed out after {timeout:?}", path.display())]
    Timeout {
        /// Socket path of the kubelet.
        path: PathBuf,
        /// RPC that timed out.
        method: &'static str,
        /// The per-call timeout.
        timeout: Duration,
    },

    /// Any other gRPC status.
    #[error("kubelet podresources socket {}: {method} failed with {:?}: {}", path.display(), status.code(), status.message())]
    Rpc {
        /// Socket path of the kubelet.
        path: PathBuf,
        /// RPC that failed.
        method: &'static str,
        /// Status as received.
        status: tonic::Status,
    },
}

/// Coarse class of a [`PodResourcesError`], with a stable label for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// [`PodResourcesError::SocketMissing`].
    SocketMissing,
    /// [`PodResourcesError::Connect`] and [`PodResourcesError::Unavailable`].
    Unavailable,
    /// [`PodResourcesError::RateLimited`].
    RateLimited,
    /// [`PodResourcesError::Timeout`].
    Timeout,
    /// [`PodResourcesError::Rpc`].
    Other,
}

impl ErrorKind {
    /// Every kind, e.g. to pre-register one metric series per kind.
    pub const ALL: [ErrorKind; 5] = [
        ErrorKind::SocketMissing,
        ErrorKind::Unavailable,
        ErrorKind::RateLimited,
        ErrorKind::Timeout,
        ErrorKind::Other,
    ];

    /// Low-cardinality label value, e.g. `socket_missing`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::SocketMissing => "socket_missing",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Other => "other",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl PodResourcesError {
    /// Class of this error, for metrics.
    pub fn kind(&self) -> ErrorKind {
        match self {
            PodResourcesError::SocketMissing { .. } => ErrorKind::SocketMissing,
            PodResourcesError::Connect { .. } | PodResourcesError::Unavailable { .. } => {
                ErrorKind::Unavailable
            }
            PodResourcesError::RateLimited { .. } => ErrorKind::RateLimited,
            PodResourcesError::Timeout { .. } => ErrorKind::Timeout,
            PodResourcesError::Rpc { .. } => ErrorKind::Other,
        }
    }

    /// Whether retrying later can succeed without anyone changing the kubelet or the
    /// agent's configuration. Permanent: the kubelet does not implement the RPC, refuses
    /// the caller, or sent a message above the client's receive limit.
    pub fn is_transient(&self) -> bool {
        match self {
            PodResourcesError::Rpc { status, .. } => !matches!(
                status.code(),
                Code::InvalidArgument
                    | Code::NotFound
                    | Code::AlreadyExists
                    | Code::PermissionDenied
                    | Code::Unauthenticated
                    | Code::FailedPrecondition
                    | Code::OutOfRange
                    | Code::Unimplemented
            ),
            _ => true,
        }
    }

    /// Whether the connection is suspect after this error and must be dialled afresh.
    /// Statuses the kubelet itself sent (rate limit, not found, ...) leave it in place.
    pub(crate) fn breaks_connection(&self) -> bool {
        match self {
            PodResourcesError::RateLimited { .. } => false,
            // Transport failures that tonic cannot classify surface as these codes.
            PodResourcesError::Rpc { status, .. } => {
                matches!(
                    status.code(),
                    Code::Unknown | Code::Internal | Code::Cancelled
                )
            }
            _ => true,
        }
    }

    /// Classifies a status returned by `method`.
    pub(crate) fn from_status(
        path: PathBuf,
        method: &'static str,
        timeout: Duration,
        status: tonic::Status,
    ) -> Self {
        match status.code() {
            // The channel redials by itself once; that dial finding no socket is reported
            // like our own dial finding none.
            Code::Unavailable if is_not_found(&status) => PodResourcesError::SocketMissing { path },
            Code::Unavailable => PodResourcesError::Unavailable {
                path,
                method,
                status,
            },
            Code::ResourceExhausted => PodResourcesError::RateLimited { path, method },
            // tonic enforces the deadline sent along with the request and reports it as
            // `Cancelled`, with `TimeoutExpired` as the cause.
            Code::Cancelled if has_cause::<tonic::TimeoutExpired>(&status) => {
                PodResourcesError::Timeout {
                    path,
                    method,
                    timeout,
                }
            }
            Code::DeadlineExceeded => PodResourcesError::Timeout {
                path,
                method,
                timeout,
            },
            _ => PodResourcesError::Rpc {
                path,
                method,
                status,
            },
        }
    }
}

/// Whether `error` or one of its causes is an `E`.
fn has_cause<E: std::error::Error + 'static>(error: &(dyn std::error::Error + 'static)) -> bool {
    causes(error).any(|cause| cause.is::<E>())
}

/// Whether a dial failed because the socket file does not exist.
pub(crate) fn is_not_found(error: &(dyn std::error::Error + 'static)) -> bool {
    causes(error)
        .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::NotFound)
}

fn causes<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |cause| cause.source())
}

/// Innermost cause, which for a failed dial is the OS error (`Connection refused`).
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    causes(error)
        .last()
        .map_or_else(|| error.to_string(), ToString::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(code: Code) -> PodResourcesError {
        PodResourcesError::from_status(
            PathBuf::from("kubelet.sock"),
            "List",
            Duration::from_secs(1),
            tonic::Status::new(code, "x"),
        )
    }

    #[test]
    fn statuses_map_to_kinds() {
        let cases = [
            (Code::Unavailable, ErrorKind::Unavailable, true),
            (Code::ResourceExhausted, ErrorKind::RateLimited, true),
            (Code::DeadlineExceeded, ErrorKind::Timeout, true),
            (Code::Internal, ErrorKind::Other, true),
            (Code::Unknown, ErrorKind::Other, true),
            (Code::Unimplemented, ErrorKind::Other, false),
            (Code::OutOfRange, ErrorKind::Other, false),
            (Code::PermissionDenied, ErrorKind::Other, false),
        ];
        for (code, kind, transient) in cases {
            let error = rpc(code);
            assert_eq!(error.kind(), kind, "{code:?}");
            assert_eq!(error.is_transient(), transient, "{code:?}");
        }
    }

    #[test]
    fn expired_client_deadline_is_a_timeout() {
        let status = tonic::Status::from_error(Box::new(tonic::TimeoutExpired(())));
        assert_eq!(status.code(), Code::Cancelled);
        let error = PodResourcesError::from_status(
            PathBuf::from("kubelet.sock"),
            "List",
            Duration::from_secs(1),
            status,
        );
        assert_eq!(error.kind(), ErrorKind::Timeout);
        assert_eq!(rpc(Code::Cancelled).kind(), ErrorKind::Other);
    }

    #[test]
    fn rate_limit_keeps_the_connection_and_unavailable_drops_it() {
        assert!(!rpc(Code::ResourceExhausted).breaks_connection());
        assert!(!rpc(Code::NotFound).breaks_connection());
        assert!(rpc(Code::Unavailable).breaks_connection());
        assert!(rpc(Code::DeadlineExceeded).breaks_connection());
    }

    #[test]
    fn messages_name_the_socket() {
        let error = PodResourcesError::SocketMissing {
            path: PathBuf::from("/run/kubelet.sock"),
        };
        assert!(error.to_string().contains("/run/kubelet.sock"));
        assert!(
            rpc(Code::ResourceExhausted)
                .to_string()
                .contains("kubelet.sock")
        );
    }

    #[test]
    fn labels_are_distinct() {
        let labels: std::collections::HashSet<_> =
            ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(labels.len(), ErrorKind::ALL.len());
        for (i, kind) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(kind.index(), i);
        }
    }
}
