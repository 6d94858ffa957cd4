//! The generated world of one case, as plain data the checker can reason about, and
//! its rendering as the Kubernetes objects both allocators read.
//!
//! Selectors are generated as [`Sel`] values: each renders to one CEL expression and
//! evaluates natively here ([`Sel::eval`]), so the checker judges an allocation
//! without any CEL implementation of its own or of TAS. A runtime error (an attribute
//! or capacity the device lacks) is `Err(())`, as in Kubernetes' CEL environment.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

/// The node the cases allocate for.
pub const NODE: &str = "node-0";
/// Another node, whose slices must stay invisible.
pub const OTHER_NODE: &str = "node-1";
/// The domain of the standard attributes.
pub const STANDARD: &str = "resource.kubernetes.io";

/// An attribute value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attr {
    Int(i64),
    Bool(bool),
    Str(String),
    /// major, minor, patch and an optional pre-release (`rc.1`).
    Version(u64, u64, u64, Option<String>),
}

impl Attr {
    fn to_json(&self) -> Value {
        match self {
            Self::Int(i) => json!({"int": i}),
            Self::Bool(b) => json!({"bool": b}),
            Self::Str(s) => json!({"string": s}),
            Self::Version(..) => json!({"version": self.to_string()}),
        }
    }

    /// Semantic version precedence (pre-releases before the release; the generated
    /// pre-releases compare as text).
    fn version_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        let (Self::Version(a1, b1, c1, p1), Self::Version(a2, b2, c2, p2)) = (self, other) else {
            return None;
        };
        let pre = |p: &Option<String>| (p.is_none(), p.clone().unwrap_or_default());
        Some((a1, b1, c1, pre(p1)).cmp(&(a2, b2, c2, pre(p2))))
    }
}

impl fmt::Display for Attr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(i) => write!(f, "{i}"),
            Self::Bool(b) => write!(f, "{b}"),
            Self::Str(s) => write!(f, "{s:?}"),
            Self::Version(a, b, c, None) => write!(f, "{a}.{b}.{c}"),
            Self::Version(a, b, c, Some(pre)) => write!(f, "{a}.{b}.{c}-{pre}"),
        }
    }
}

/// A device of a slice.
#[derive(Debug, Clone)]
pub struct Dev {
    pub name: String,
    /// Keyed as written in the slice: bare (the driver's domain) or `domain/id`.
    pub attributes: BTreeMap<String, Attr>,
    /// Bytes, with the text written in the slice.
    pub capacity: BTreeMap<String, (u64, String)>,
}

impl Dev {
    /// The attribute `id` of `domain`, for a device of `driver`, as CEL's
    /// `device.attributes[domain][id]` and the constraints look it up.
    pub fn attribute(&self, driver: &str, domain: &str, id: &str) -> Option<&Attr> {
        self.attributes.get(&format!("{domain}/{id}")).or_else(|| {
            (domain == driver)
                .then(|| self.attributes.get(id))
                .flatten()
        })
    }

    fn capacity_of(&self, driver: &str, domain: &str, id: &str) -> Option<u64> {
        let qualified = self.capacity.get(&format!("{domain}/{id}"));
        let bare = (domain == driver).then(|| self.capacity.get(id)).flatten();
        qualified.or(bare).map(|(bytes, _)| *bytes)
    }
}

/// How a slice reaches nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    Node(String),
    /// Nodes whose `rack` label is this.
    Rack(String),
    All,
}

/// One ResourceSlice.
#[derive(Debug, Clone)]
pub struct Slice {
    pub name: String,
    pub driver: String,
    pub pool: String,
    pub generation: i64,
    pub count: i64,
    pub reach: Reach,
    pub devices: Vec<Dev>,
}

/// One generated selector: a CEL expression with known semantics.
#[derive(Debug, Clone)]
pub enum Sel {
    /// `device.driver == "d"`.
    Driver(String),
    /// A string attribute equals a value; an error when the device lacks it.
    StrIs(String, String, String),
    /// An int attribute is at least a value; an error when the device lacks it.
    IntAtLeast(String, String, i64),
    /// The same, guarded by `in`: false rather than an error when absent.
    IntAtLeastIfSet(String, String, i64),
    /// A bool attribute is true; an error when the device lacks it.
    IsTrue(String, String),
    /// A version attribute is at least a version; an error when absent.
    VersionAtLeast(String, String, Attr),
    /// A capacity is at least a quantity (bytes, text); an error when absent.
    CapacityAtLeast(String, String, u64, String),
    /// Either holds (CEL's `||`: true if one side is, even if the other errs).
    Either(Box<Sel>, Box<Sel>),
}

impl Sel {
    /// The CEL expression.
    pub fn cel(&self) -> String {
        let attr = |domain: &str, id: &str| format!("device.attributes[{domain:?}].{id}");
        match self {
            Self::Driver(d) => format!("device.driver == {d:?}"),
            Self::StrIs(domain, id, v) => format!("{} == {v:?}", attr(domain, id)),
            Self::IntAtLeast(domain, id, n) => format!("{} >= {n}", attr(domain, id)),
            Self::IntAtLeastIfSet(domain, id, n) => format!(
                "{id:?} in device.attributes[{domain:?}] && {} >= {n}",
                attr(domain, id)
            ),
            Self::IsTrue(domain, id) => attr(domain, id),
            Self::VersionAtLeast(domain, id, v) => {
                format!("{}.compareTo(semver(\"{v}\")) >= 0", attr(domain, id))
            }
            Self::CapacityAtLeast(domain, id, _, text) => {
                format!("device.capacity[{domain:?}].{id}.compareTo(quantity({text:?})) >= 0")
            }
            Self::Either(a, b) => format!("({}) || ({})", a.cel(), b.cel()),
        }
    }

    /// The expression's value on `device` of `driver`; `Err` is a runtime error.
    pub fn eval(&self, driver: &str, device: &Dev) -> Result<bool, ()> {
        let get = |domain: &str, id: &str| device.attribute(driver, domain, id).ok_or(());
        match self {
            Self::Driver(d) => Ok(d == driver),
            Self::StrIs(domain, id, v) => match get(domain, id)? {
                Attr::Str(s) => Ok(s == v),
                _ => Err(()),
            },
            Self::IntAtLeast(domain, id, n) => match get(domain, id)? {
                Attr::Int(i) => Ok(i >= n),
                _ => Err(()),
            },
            Self::IntAtLeastIfSet(domain, id, n) => match get(domain, id) {
                Err(()) => Ok(false),
                Ok(Attr::Int(i)) => Ok(i >= n),
                Ok(_) => Err(()),
            },
            Self::IsTrue(domain, id) => match get(domain, id)? {
                Attr::Bool(b) => Ok(*b),
                _ => Err(()),
            },
            Self::VersionAtLeast(domain, id, v) => {
                get(domain, id)?.version_cmp(v).map(|o| o.is_ge()).ok_or(())
            }
            Self::CapacityAtLeast(domain, id, min, _) => device
                .capacity_of(driver, domain, id)
                .map(|bytes| bytes >= *min)
                .ok_or(()),
            Self::Either(a, b) => match (a.eval(driver, device), b.eval(driver, device)) {
                (Ok(true), _) | (_, Ok(true)) => Ok(true),
                (Ok(false), Ok(false)) => Ok(false),
                _ => Err(()),
            },
        }
    }
}

/// Evaluates selectors one after the other, as Kubernetes does: the first that is
/// false decides, an error before that is an error.
pub fn all_hold(selectors: &[Sel], driver: &str, device: &Dev) -> Result<bool, ()> {
    for selector in selectors {
        if !selector.eval(driver, device)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// How many devices an alternative takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `ExactCount`; `None`: the count left out (one).
    Exact(Option<u32>),
    All,
}

/// A request, or one subrequest of `firstAvailable`.
#[derive(Debug, Clone)]
pub struct Alt {
    pub name: String,
    pub class: String,
    pub selectors: Vec<Sel>,
    pub mode: Mode,
}

#[derive(Debug, Clone)]
pub struct Request {
    pub name: String,
    /// One alternative for `exactly`, several for `firstAvailable`.
    pub alternatives: Vec<Alt>,
    pub first_available: bool,
}

#[derive(Debug, Clone)]
pub struct Constraint {
    /// `matchAttribute` when true, `distinctAttribute` otherwise.
    pub matching: bool,
    /// `domain/id`.
    pub attribute: String,
    /// Empty: every request.
    pub requests: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Claim {
    pub name: String,
    pub requests: Vec<Request>,
    pub constraints: Vec<Constraint>,
}

/// A device held by another pod's claim: (driver, pool, device).
pub type Held = (String, String, String);

/// One case: the cluster's slices and classes, the pod's claims, devices in use.
#[derive(Debug, Clone)]
pub struct World {
    pub rack: String,
    pub slices: Vec<Slice>,
    pub classes: BTreeMap<String, Vec<Sel>>,
    pub claims: Vec<Claim>,
    /// Other pods' claims and the devices each holds.
    pub held: Vec<Vec<Held>>,
}

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("a generated object: {e}"))
}

fn selectors_json(selectors: &[Sel]) -> Value {
    selectors
        .iter()
        .map(|s| json!({"cel": {"expression": s.cel()}}))
        .collect()
}

impl World {
    pub fn node(&self) -> Node {
        from(json!({"metadata": {"name": NODE,
            "labels": {"kubernetes.io/hostname": NODE, "rack": self.rack}}}))
    }

    /// The slices, sorted by driver, pool and name. Both allocators then try a
    /// pool's slices in the same order, and kube-scheduler's map of pools is filled
    /// in the order TAS tries pools in, which Go's randomised iteration of a small
    /// map reproduces about once in every few runs.
    pub fn slice_objects(&self) -> Vec<ResourceSlice> {
        let mut slices: Vec<&Slice> = self.slices.iter().collect();
        slices.sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
        slices.into_iter().map(slice_object).collect()
    }

    pub fn class_objects(&self) -> Vec<DeviceClass> {
        self.classes
            .iter()
            .map(|(name, selectors)| {
                from(json!({"metadata": {"name": name},
                    "spec": {"selectors": selectors_json(selectors)}}))
            })
            .collect()
    }

    pub fn claim_objects(&self) -> Vec<ResourceClaim> {
        self.claims.iter().map(claim_object).collect()
    }

    /// Other pods' claims, allocated.
    pub fn allocated_objects(&self) -> Vec<ResourceClaim> {
        self.held
            .iter()
            .enumerate()
            .map(|(i, devices)| {
                let results: Vec<Value> = devices
                    .iter()
                    .map(|(driver, pool, device)| {
                        json!({"request": "r", "driver": driver, "pool": pool, "device": device})
                    })
                    .collect();
                from(json!({
                    "metadata": {"name": format!("other-{i}"), "namespace": "default", "uid": format!("other-{i}")},
                    "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "any"}}]}},
                    "status": {"allocation": {"devices": {"results": results}}}
                }))
            })
            .collect()
    }
}

fn slice_object(slice: &Slice) -> ResourceSlice {
    let devices: Vec<Value> = slice
        .devices
        .iter()
        .map(|d| {
            let mut device = json!({"name": d.name});
            if !d.attributes.is_empty() {
                let attributes: serde_json::Map<String, Value> = d
                    .attributes
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect();
                device["attributes"] = Value::Object(attributes);
            }
            if !d.capacity.is_empty() {
                let capacity: serde_json::Map<String, Value> = d
                    .capacity
                    .iter()
                    .map(|(k, (_, text))| (k.clone(), json!({"value": text})))
                    .collect();
                device["capacity"] = Value::Object(capacity);
            }
            device
        })
        .collect();
    let mut spec = json!({
        "driver": slice.driver,
        "pool": {"name": slice.pool, "generation": slice.generation, "resourceSliceCount": slice.count},
        "devices": devices,
    });
    match &slice.reach {
        Reach::Node(node) => spec["nodeName"] = json!(node),
        Reach::All => spec["allNodes"] = json!(true),
        Reach::Rack(rack) => {
            spec["nodeSelector"] = json!({"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "rack", "operator": "In", "values": [rack]}]}]});
        }
    }
    from(json!({"metadata": {"name": slice.name}, "spec": spec}))
}

fn claim_object(claim: &Claim) -> ResourceClaim {
    let alt_json = |alt: &Alt| {
        let mut v = json!({"deviceClassName": alt.class});
        match alt.mode {
            Mode::Exact(count) => {
                v["allocationMode"] = json!("ExactCount");
                if let Some(count) = count {
                    v["count"] = json!(count);
                }
            }
            Mode::All => v["allocationMode"] = json!("All"),
        }
        if !alt.selectors.is_empty() {
            v["selectors"] = selectors_json(&alt.selectors);
        }
        v
    };
    let requests: Vec<Value> = claim
        .requests
        .iter()
        .map(|r| {
            if r.first_available {
                let subs: Vec<Value> = r
                    .alternatives
                    .iter()
                    .map(|a| {
                        let mut v = alt_json(a);
                        v["name"] = json!(a.name);
                        v
                    })
                    .collect();
                json!({"name": r.name, "firstAvailable": subs})
            } else {
                json!({"name": r.name, "exactly": alt_json(&r.alternatives[0])})
            }
        })
        .collect();
    let constraints: Vec<Value> = claim
        .constraints
        .iter()
        .map(|c| {
            let key = if c.matching {
                "matchAttribute"
            } else {
                "distinctAttribute"
            };
            let mut v = json!({ key: c.attribute });
            if !c.requests.is_empty() {
                v["requests"] = json!(c.requests);
            }
            v
        })
        .collect();
    let mut devices = json!({"requests": requests});
    if !constraints.is_empty() {
        devices["constraints"] = Value::Array(constraints);
    }
    from(json!({
        "metadata": {"name": claim.name, "namespace": "default", "uid": format!("uid-{}", claim.name)},
        "spec": {"devices": devices}
    }))
}
