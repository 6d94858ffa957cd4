//! The fence and the bound of the writer, against local sockets (the API server
//! answers are covered by the cluster tests: binds, evictions, Events, conditions and
//! the renew-deadline fence in `tests/cluster`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;

use super::{MAX_IN_FLIGHT, Request, WriteError, Writer};

fn bind_request(i: usize) -> Request {
    bind_to(i, "n1")
}

fn bind_to(i: usize, node: &str) -> Request {
    Request::Bind {
        namespace: "default".into(),
        name: format!("p{i}"),
        uid: format!("uid-{i}"),
        node: node.into(),
        claims: Vec::new(),
        admission: super::Admission::InTurn,
    }
}

fn writer_for(addr: std::net::SocketAddr, timeout: Duration) -> Writer {
    let config = kube::Config::new(format!("http://{addr}").parse().expect("url"));
    let client = kube::Client::try_from(config).expect("client");
    let (writer, task) = Writer::new(client, "tas-test", None, timeout);
    tokio::spawn(task.run());
    writer
}

/// A server that accepts connections, counts them and never answers.
async fn silent_server() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("listener");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            held.push(socket);
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn nothing_is_sent_before_the_fence_is_set_or_while_it_says_no() {
    let (addr, accepted) = silent_server().await;
    let writer = writer_for(addr, Duration::from_secs(5));
    assert!(!writer.leads(), "no election yet: not the leader");
    assert!(matches!(
        writer.write(bind_request(0)).await,
        Err(WriteError::NotLeader)
    ));

    let leading = Arc::new(AtomicBool::new(false));
    let flag = leading.clone();
    writer.fence_with(Arc::new(move || flag.load(Ordering::SeqCst)));
    assert!(matches!(
        writer.write(bind_request(1)).await,
        Err(WriteError::NotLeader)
    ));
    let evict = Request::Evict {
        namespace: "default".into(),
        name: "victim".into(),
        uid: "uid-v".into(),
    };
    assert!(matches!(
        writer.write(evict).await,
        Err(WriteError::NotLeader)
    ));
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "no connection was made");
}

#[tokio::test]
async fn a_write_without_an_answer_is_abandoned_after_the_write_timeout() {
    let (addr, accepted) = silent_server().await;
    let timeout = Duration::from_millis(300);
    let writer = writer_for(addr, timeout);
    writer.fence_with(Arc::new(|| true));
    let started = Instant::now();
    let outcome = writer.write(bind_request(0)).await;
    assert!(
        matches!(outcome, Err(WriteError::TimedOut(t)) if t == timeout),
        "{outcome:?}"
    );
    assert!(started.elapsed() >= timeout);
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "the bind was sent");
}

#[tokio::test]
async fn an_api_error_is_returned_to_the_caller() {
    // A port nobody listens on: the request fails at once.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
        l.local_addr().expect("addr")
    };
    let writer = writer_for(addr, Duration::from_secs(5));
    writer.fence_with(Arc::new(|| true));
    let outcome = writer.write(bind_request(0)).await;
    assert!(matches!(outcome, Err(WriteError::Api(_))), "{outcome:?}");
    assert_eq!(outcome.unwrap_err().code(), None, "no HTTP status");
}

#[tokio::test]
async fn fenced_writes_run_concurrently_up_to_the_bound() {
    let (addr, accepted) = silent_server().await;
    let timeout = Duration::from_millis(400);
    let writer = writer_for(addr, timeout);
    writer.fence_with(Arc::new(|| true));
    let started = Instant::now();
    // Two full waves: the first MAX_IN_FLIGHT writes time out together, then the rest.
    let mut replies = Vec::new();
    for i in 0..2 * MAX_IN_FLIGHT {
        // Each to its own node: binds to one node go one after another.
        replies.push(writer.submit(bind_to(i, &format!("n{i}"))).await);
    }
    for reply in replies {
        assert!(matches!(
            reply.outcome().await,
            Err(WriteError::TimedOut(_))
        ));
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= 2 * timeout,
        "bounded: two waves, took {elapsed:?}"
    );
    assert!(
        elapsed < 8 * timeout,
        "concurrent: not one after another, took {elapsed:?}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 2 * MAX_IN_FLIGHT);
}

#[tokio::test]
async fn binds_to_one_node_are_sent_one_after_another_in_queue_order() {
    let (addr, accepted) = silent_server().await;
    let timeout = Duration::from_millis(500);
    let writer = writer_for(addr, timeout);
    writer.fence_with(Arc::new(|| true));
    let first = writer.submit(bind_to(0, "n1")).await;
    let second = writer.submit(bind_to(1, "n1")).await;
    let elsewhere = writer.submit(bind_to(2, "n2")).await;
    // The first bind and the other node's are sent at once; the second waits for the
    // first to end (here: its timeout), so the kubelet sees them in decision order.
    let deadline = Instant::now() + timeout / 2;
    while accepted.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "n1's first and n2's bind"
    );
    tokio::time::sleep(timeout / 4).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "n1's second still waits"
    );
    let started = Instant::now();
    for reply in [first, elsewhere] {
        assert!(matches!(
            reply.outcome().await,
            Err(WriteError::TimedOut(_))
        ));
    }
    assert!(matches!(
        second.outcome().await,
        Err(WriteError::TimedOut(_))
    ));
    assert!(
        started.elapsed() >= timeout / 2,
        "the second bind had its own timeout after the first's"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}
