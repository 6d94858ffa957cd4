//! The workload section of a scenario: pod templates rendered into Pods.
//!
//! Every template renders `count` pods named `<name>-<i>`, each with `containers`
//! identical containers carrying the template's amounts (per container):
//!
//! - `Guaranteed`: requests = limits for cpu, memory, hugepages and devices;
//! - `Burstable`: requests for cpu and memory (no limits), requests = limits for
//!   hugepages and devices;
//! - `BestEffort`: no cpu or memory; devices only.
//!
//! Pods carry [`NODE_SIM_LABEL`](tas_testcluster::NODE_SIM_LABEL)`=true` (so the node simulator,
//! not kwok, decides their fate) and [`WORKLOAD_LABEL`]`=<template>`, plus the
//! template's labels and node selector.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tas_api::quantity::{parse_milli, parse_value};

use crate::scenario::{Scenario, one};
use tas_testcluster::NODE_SIM_LABEL;

/// Label naming the template a workload pod was rendered from.
pub const WORKLOAD_LABEL: &str = "e2e.tas.dev/workload";
/// Image of the rendered containers (never pulled: there is no container runtime).
pub const IMAGE: &str = "registry.invalid/nodesim:1";

/// QoS class a template asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Qos {
    /// requests = limits.
    Guaranteed,
    /// Requests only for cpu and memory.
    Burstable,
    /// No cpu or memory.
    BestEffort,
}

/// A pod template of the workload section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadTemplate {
    /// Template name; pods are `<name>-<i>`.
    pub name: String,
    /// How many pods.
    #[serde(default = "one")]
    pub count: u32,
    /// QoS class.
    pub qos: Qos,
    /// CPU per container (`"4"`, `"500m"`).
    #[serde(default)]
    pub cpu: Option<String>,
    /// Memory per container.
    #[serde(default)]
    pub memory: Option<String>,
    /// `hugepages-2Mi` per container.
    #[serde(default, rename = "hugepages-2Mi")]
    pub hugepages_2mi: Option<String>,
    /// `hugepages-1Gi` per container.
    #[serde(default, rename = "hugepages-1Gi")]
    pub hugepages_1gi: Option<String>,
    /// Devices per container: resource → count.
    #[serde(default)]
    pub devices: BTreeMap<String, u32>,
    /// Containers per pod.
    #[serde(default = "one")]
    pub containers: u32,
    /// Node selector of the pods.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Extra pod labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl WorkloadTemplate {
    pub(super) fn validate(&self) -> Result<(), String> {
        let quantities = [
            ("cpu", &self.cpu),
            ("memory", &self.memory),
            ("hugepages-2Mi", &self.hugepages_2mi),
            ("hugepages-1Gi", &self.hugepages_1gi),
        ];
        for (name, value) in quantities {
            if let Some(value) = value {
                let parse = if name == "cpu" {
                    parse_milli
                } else {
                    parse_value
                };
                match parse(value) {
                    Ok(amount) if amount > 0 => {}
                    Ok(_) => return Err(format!("{name} must be positive")),
                    Err(e) => return Err(format!("{name}: {e}")),
                }
            }
        }
        if self.containers == 0 {
            return Err("needs at least one container".into());
        }
        let has_hugepages = self.hugepages_2mi.is_some() || self.hugepages_1gi.is_some();
        match self.qos {
            Qos::Guaranteed if self.cpu.is_none() || self.memory.is_none() => {
                Err("a Guaranteed template needs cpu and memory".into())
            }
            Qos::Burstable if self.cpu.is_none() && self.memory.is_none() => {
                Err("a Burstable template needs cpu or memory".into())
            }
            Qos::BestEffort if self.cpu.is_some() || self.memory.is_some() || has_hugepages => {
                Err("a BestEffort template takes no cpu, memory or hugepages".into())
            }
            _ => Ok(()),
        }
    }

    /// The container resources (`requests` and `limits`).
    fn resources(&self) -> Value {
        let mut requests = Map::new();
        let mut limits = Map::new();
        for (name, value) in [("cpu", &self.cpu), ("memory", &self.memory)] {
            if let Some(value) = value {
                requests.insert(name.into(), json!(value));
                if self.qos == Qos::Guaranteed {
                    limits.insert(name.into(), json!(value));
                }
            }
        }
        let hugepages = [
            ("hugepages-2Mi", &self.hugepages_2mi),
            ("hugepages-1Gi", &self.hugepages_1gi),
        ];
        for (name, value) in hugepages {
            if let Some(value) = value {
                requests.insert(name.into(), json!(value));
                limits.insert(name.into(), json!(value));
            }
        }
        for (name, count) in &self.devices {
            requests.insert(name.clone(), json!(count.to_string()));
            limits.insert(name.clone(), json!(count.to_string()));
        }
        json!({ "requests": requests, "limits": limits })
    }

    /// The template's pods in `namespace`, scheduled by `scheduler_name`.
    pub fn pods(&self, scheduler_name: &str, namespace: &str) -> Vec<Pod> {
        let mut labels = self.labels.clone();
        labels.insert(NODE_SIM_LABEL.into(), "true".into());
        labels.insert(WORKLOAD_LABEL.into(), self.name.clone());
        let containers: Vec<Value> = (0..self.containers)
            .map(|i| json!({ "name": format!("c{i}"), "image": IMAGE, "resources": self.resources() }))
            .collect();
        (0..self.count)
            .map(|i| {
                let pod = json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": format!("{}-{i}", self.name),
                        "namespace": namespace,
                        "labels": labels,
                    },
                    "spec": {
                        "schedulerName": scheduler_name,
                        "nodeSelector": self.node_selector,
                        "containers": containers,
                    },
                });
                serde_json::from_value(pod).expect("a rendered workload pod is a valid Pod")
            })
            .collect()
    }
}

impl Scenario {
    /// Every workload pod, template after template, for `scheduler_name` in `namespace`.
    pub fn workload_pods(&self, scheduler_name: &str, namespace: &str) -> Vec<Pod> {
        self.workload()
            .iter()
            .flat_map(|t| t.pods(scheduler_name, namespace))
            .collect()
    }
}
