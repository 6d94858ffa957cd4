//! Where `/metrics` gets its text: a prometheus-client registry (encoded as
//! OpenMetrics on every scrape) or any function producing exposition text.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::registry::Registry;

use crate::metrics::encode;

/// Content type of OpenMetrics text exposition.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The last line of an OpenMetrics exposition.
const EOF: &str = "# EOF\n";

type Render = dyn Fn() -> Result<String, fmt::Error> + Send + Sync;

/// A source of metrics text, cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    render: Arc<Render>,
}

impl Metrics {
    /// Metrics produced by `render` on every scrape.
    pub fn from_fn(
        render: impl Fn() -> Result<String, fmt::Error> + Send + Sync + 'static,
    ) -> Self {
        Self {
            render: Arc::new(render),
        }
    }

    /// A registry that is still being added to while served.
    pub fn from_shared_registry(registry: Arc<Mutex<Registry>>) -> Self {
        Self::from_fn(move || {
            let registry = registry.lock().unwrap_or_else(PoisonError::into_inner);
            encode(&registry)
        })
    }

    /// A registry that is complete before serving starts.
    pub fn from_registry(registry: Arc<Registry>) -> Self {
        Self::from_fn(move || encode(&registry))
    }

    /// No metrics: an empty exposition.
    pub fn none() -> Self {
        Self::from_registry(Arc::new(Registry::default()))
    }

    /// These metrics followed by `other`'s, as one exposition (`other`'s families must
    /// not repeat these').
    pub fn with(self, other: Metrics) -> Self {
        Self::from_fn(move || {
            let mut text = self.render()?;
            let more = other.render()?;
            if text.ends_with(EOF) && more.ends_with(EOF) {
                text.truncate(text.len() - EOF.len());
            }
            text.push_str(&more);
            Ok(text)
        })
    }

    /// The current exposition text.
    pub fn render(&self) -> Result<String, fmt::Error> {
        (self.render)()
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl From<Arc<Mutex<Registry>>> for Metrics {
    fn from(registry: Arc<Mutex<Registry>>) -> Self {
        Self::from_shared_registry(registry)
    }
}

impl From<Arc<Registry>> for Metrics {
    fn from(registry: Arc<Registry>) -> Self {
        Self::from_registry(registry)
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;

    use super::*;

    #[test]
    fn a_shared_registry_shows_metrics_added_after_serving_started() {
        let registry = Arc::new(Mutex::new(Registry::default()));
        let metrics = Metrics::from(registry.clone());
        assert_eq!(metrics.render().unwrap(), "# EOF\n");

        let binds: Counter = Counter::default();
        binds.inc();
        registry
            .lock()
            .unwrap()
            .register("binds", "Pods bound", binds);
        let text = metrics.render().unwrap();
        assert!(text.contains("binds_total 1"), "{text}");
    }

    #[test]
    fn two_sources_make_one_exposition() {
        let register = |name: &str| {
            let mut registry = Registry::default();
            let counter: Counter = Counter::default();
            counter.inc();
            registry.register(name, "A counter", counter);
            Metrics::from(Arc::new(registry))
        };
        let text = register("binds")
            .with(register("reloads"))
            .render()
            .unwrap();
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        let binds = text.find("binds_total 1").expect("the first source's");
        let reloads = text.find("reloads_total 1").expect("the second source's");
        assert!(binds < reloads, "{text}");
    }
}
