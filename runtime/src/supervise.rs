//! Supervised long-running tasks: a process's background tasks (watches, loops, the
//! HTTP server, leader election) are meant to run until the process ends. If one of
//! them returns, fails or panics, the process is no longer doing its job, so the
//! [`Supervisor`] reports the first one to end, by name, and the binary exits non-zero
//! to be restarted clean (a task that silently died would otherwise leave `/healthz`
//! green while, say, a watch no longer updates the cache).
//!
//! ```no_run
//! # async fn demo() -> Result<(), tas_runtime::supervise::TaskEnded> {
//! use tas_runtime::supervise::Supervisor;
//!
//! let mut tasks = Supervisor::new();
//! tasks.spawn("resync loop", async { std::future::pending::<()>().await });
//! tasks.spawn_fallible("http server", async { Ok::<(), std::io::Error>(()) });
//! // Resolves when the first task ends; the error names it.
//! Err(tasks.wait().await)
//! # }
//! ```

use std::collections::HashMap;
use std::fmt::Display;

use tokio::task::{Id, JoinSet};

/// How the first supervised task ended. Every variant is an error: supervised tasks
/// are meant to run for the life of the process.
#[derive(Debug, thiserror::Error)]
pub enum TaskEnded {
    /// The task returned without an error.
    #[error("task {task:?} ended unexpectedly")]
    Returned { task: String },
    /// The task returned an error.
    #[error("task {task:?} failed: {error}")]
    Failed { task: String, error: String },
    /// The task panicked.
    #[error("task {task:?} panicked: {message}")]
    Panicked { task: String, message: String },
    /// The task was cancelled from outside, or no task was ever spawned.
    #[error("task {task:?} was cancelled")]
    Cancelled { task: String },
}

impl TaskEnded {
    /// The name of the task that ended.
    pub fn task(&self) -> &str {
        match self {
            TaskEnded::Returned { task }
            | TaskEnded::Failed { task, .. }
            | TaskEnded::Panicked { task, .. }
            | TaskEnded::Cancelled { task } => task,
        }
    }
}

impl TaskEnded {
    /// How a task joined through its own `JoinHandle` ended (for a task that must be
    /// awaited on shutdown, so it is not in a [`Supervisor`]), logged like
    /// [`Supervisor::wait`] logs.
    pub fn from_join(task: &str, joined: Result<(), tokio::task::JoinError>) -> Self {
        let task = task.to_owned();
        let ended = match joined {
            Ok(()) => TaskEnded::Returned { task },
            Err(e) if e.is_panic() => TaskEnded::Panicked {
                task,
                message: panic_message(e.into_panic()),
            },
            Err(_) => TaskEnded::Cancelled { task },
        };
        tracing::error!(task = ended.task(), error = %ended, "a supervised task ended; exiting");
        ended
    }
}

/// A set of named tasks that should never end. Dropping it aborts them all.
#[derive(Default)]
pub struct Supervisor {
    tasks: JoinSet<Result<(), String>>,
    names: HashMap<Id, String>,
}

impl Supervisor {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawns `task`, which should run forever, under `name`.
    pub fn spawn(
        &mut self,
        name: impl Into<String>,
        task: impl Future<Output = ()> + Send + 'static,
    ) {
        self.spawn_fallible(name, async move {
            task.await;
            Ok::<(), std::convert::Infallible>(())
        });
    }

    /// Spawns `task`, which should run forever or fail, under `name`.
    pub fn spawn_fallible<E: Display>(
        &mut self,
        name: impl Into<String>,
        task: impl Future<Output = Result<(), E>> + Send + 'static,
    ) {
        let handle = self
            .tasks
            .spawn(async move { task.await.map_err(|e| e.to_string()) });
        self.names.insert(handle.id(), name.into());
    }

    /// Waits for the first task to end, logs it as an error naming the task, and
    /// returns how it ended. The remaining tasks keep running until the supervisor is
    /// dropped.
    pub async fn wait(&mut self) -> TaskEnded {
        let ended = match self.tasks.join_next_with_id().await {
            None => TaskEnded::Cancelled {
                task: "(no supervised task)".into(),
            },
            Some(Ok((id, result))) => {
                let task = self.name(id);
                match result {
                    Ok(()) => TaskEnded::Returned { task },
                    Err(error) => TaskEnded::Failed { task, error },
                }
            }
            Some(Err(e)) => {
                let task = self.name(e.id());
                if e.is_panic() {
                    TaskEnded::Panicked {
                        task,
                        message: panic_message(e.into_panic()),
                    }
                } else {
                    TaskEnded::Cancelled { task }
                }
            }
        };
        tracing::error!(task = ended.task(), error = %ended, "a supervised task ended; exiting");
        ended
    }

    fn name(&mut self, id: Id) -> String {
        self.names
            .remove(&id)
            .unwrap_or_else(|| format!("task {id}"))
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forever() -> impl Future<Output = ()> + Send + 'static {
        std::future::pending()
    }

    #[tokio::test]
    async fn a_panicking_task_is_reported_by_name() {
        let mut tasks = Supervisor::new();
        tasks.spawn("watch nodes", forever());
        tasks.spawn("resync loop", async { panic!("cache poisoned") });
        let ended = tasks.wait().await;
        assert!(
            matches!(&ended, TaskEnded::Panicked { task, message }
                if task == "resync loop" && message == "cache poisoned"),
            "{ended:?}"
        );
        assert!(ended.to_string().contains("resync loop"), "{ended}");
    }

    #[tokio::test]
    async fn a_task_that_returns_or_fails_is_an_error_naming_it() {
        let mut tasks = Supervisor::new();
        tasks.spawn("watch pods", forever());
        tasks.spawn("events", async {});
        let ended = tasks.wait().await;
        assert!(
            matches!(&ended, TaskEnded::Returned { task } if task == "events"),
            "{ended:?}"
        );

        let mut tasks = Supervisor::new();
        tasks.spawn("watch pods", forever());
        tasks.spawn_fallible("http server", async {
            Err::<(), _>(std::io::Error::other("address in use"))
        });
        let ended = tasks.wait().await;
        assert_eq!(ended.task(), "http server");
        assert!(
            ended.to_string().contains("address in use"),
            "the cause is kept: {ended}"
        );
    }

    #[tokio::test]
    async fn a_joined_task_that_panicked_is_named() {
        let joined = tokio::spawn(async { panic!("reconcile bug") }).await;
        let ended = TaskEnded::from_join("controller", joined);
        assert!(
            matches!(&ended, TaskEnded::Panicked { task, message }
                if task == "controller" && message == "reconcile bug"),
            "{ended:?}"
        );
        let ended = TaskEnded::from_join("controller", tokio::spawn(async {}).await);
        assert!(matches!(ended, TaskEnded::Returned { .. }), "{ended:?}");
    }

    #[tokio::test]
    async fn dropping_the_supervisor_stops_the_other_tasks() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut tasks = Supervisor::new();
        tasks.spawn("holder", async move {
            let _tx = tx;
            std::future::pending::<()>().await;
        });
        tasks.spawn("quitter", async {});
        assert_eq!(tasks.wait().await.task(), "quitter");
        drop(tasks);
        assert!(rx.await.is_err(), "the remaining task was aborted");
    }
}
