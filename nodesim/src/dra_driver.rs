//! The test DRA driver: what a DRA driver on a NUMA machine publishes, as objects for a
//! real API server, and the claims that ask for its devices.
//!
//! A driver publishes one node-local ResourceSlice per node ([`node_slice`]: one pool
//! named after the node, one slice) whose devices carry the standard attributes
//! `resource.kubernetes.io/numaNode` (KEP-6072, the int form) and, where given,
//! `resource.kubernetes.io/pcieRoot` (KEP-4381), as the GPU and NIC drivers do; a
//! DeviceClass per driver selects its devices ([`device_class`]). [`zone_devices`]
//! lays out devices zone after zone, each zone on a PCIe root of its own.
//!
//! [`device_zones`] reads the attribute back from the slices the API server holds: the
//! zone of every published device, by driver, pool and name (the key of an allocation
//! result), for judging where an allocation put a pod's devices.
//!
//! The end-to-end tests and the benchmark both build their DRA objects here.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::ResourceSlice;
use serde_json::{Value, json};

/// The standard attribute naming a device's NUMA node.
pub const NUMA_NODE: &str = "resource.kubernetes.io/numaNode";
/// The standard attribute naming a device's PCIe root complex.
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";

/// One device of a slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Its name in the slice.
    pub name: String,
    /// Its NUMA zone (`numaNode`).
    pub numa_node: u32,
    /// Its PCIe root (`pcieRoot`), if published.
    pub pcie_root: Option<String>,
}

/// A DeviceClass named `driver` that selects every device of that driver.
pub fn device_class(driver: &str) -> Value {
    json!({"metadata": {"name": driver}, "spec": {"selectors": [
        {"cel": {"expression": format!("device.driver == '{driver}'")}}]}})
}

/// The node-local ResourceSlice of `driver` on `node` (one pool named after the node,
/// one slice, generation 1) with `devices`, in slice order. Its name is
/// `<node>-<driver>`.
pub fn node_slice(driver: &str, node: &str, devices: &[Device]) -> Value {
    let devices: Vec<Value> = devices
        .iter()
        .map(|d| {
            let mut attributes = json!({ NUMA_NODE: {"int": d.numa_node} });
            if let Some(root) = &d.pcie_root {
                attributes[PCIE_ROOT] = json!({"string": root});
            }
            json!({"name": d.name, "attributes": attributes})
        })
        .collect();
    json!({
        "metadata": {"name": format!("{node}-{driver}")},
        "spec": {"driver": driver, "nodeName": node, "devices": devices,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}
    })
}

/// [`node_slice`] of GPUs given as (name, NUMA zone), without PCIe roots.
pub fn gpu_slice(driver: &str, node: &str, gpus: &[(&str, u32)]) -> Value {
    let devices: Vec<Device> = gpus
        .iter()
        .map(|(name, zone)| Device {
            name: (*name).to_owned(),
            numa_node: *zone,
            pcie_root: None,
        })
        .collect();
    node_slice(driver, node, &devices)
}

/// `per_zone` devices on each of `zones` zones, zone after zone, named
/// `<prefix>-<zone>-<k>`, each zone's on the PCIe root `pci<zone as 4 hex digits>:00`
/// (so the GPUs and NICs of one zone share a root, as on a machine with one root
/// complex per socket).
pub fn zone_devices(prefix: &str, zones: u32, per_zone: u32) -> Vec<Device> {
    (0..zones)
        .flat_map(|zone| {
            (0..per_zone).map(move |k| Device {
                name: format!("{prefix}-{zone}-{k}"),
                numa_node: zone,
                pcie_root: Some(pcie_root(zone)),
            })
        })
        .collect()
}

/// The PCIe root [`zone_devices`] puts zone `zone`'s devices on.
pub fn pcie_root(zone: u32) -> String {
    format!("pci{zone:04x}:00")
}

/// A claim for one device of `class` (a request named `gpu`), with extra fields of the
/// request's `exactly`.
pub fn gpu_claim(name: &str, class: &str, extra: Value) -> Value {
    let mut exactly = json!({"deviceClassName": class, "count": 1});
    if let (Some(e), Some(x)) = (exactly.as_object_mut(), extra.as_object()) {
        e.extend(x.clone());
    }
    json!({
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}
    })
}

/// The claim template of [`gpu_claim`].
pub fn gpu_claim_template(name: &str, class: &str) -> Value {
    let claim = gpu_claim(name, class, json!({}));
    claim_template(name, claim["spec"].clone())
}

/// A claim asking for one device of each class in `classes` (requests named after
/// their position: `r0`, `r1`, ...), all on one value of `same` when given (a
/// `matchAttribute` constraint, e.g. [`PCIE_ROOT`] for a GPU and a NIC behind one root).
pub fn claim_spec(classes: &[&str], same: Option<&str>) -> Value {
    let requests: Vec<Value> = classes
        .iter()
        .enumerate()
        .map(|(i, class)| {
            json!({"name": format!("r{i}"),
                "exactly": {"deviceClassName": class, "count": 1}})
        })
        .collect();
    let mut devices = json!({ "requests": requests });
    if let Some(attribute) = same {
        devices["constraints"] = json!([{"matchAttribute": attribute}]);
    }
    json!({ "devices": devices })
}

/// A ResourceClaimTemplate named `name` whose claims have `spec`.
pub fn claim_template(name: &str, spec: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"spec": spec}})
}

/// A device as an allocation result names it: driver, pool, device.
pub type DeviceKey = (String, String, String);

/// The NUMA zone of every device of `slices` that publishes one as an int
/// ([`NUMA_NODE`]); a device without it (or with another form) is left out, its zone
/// unknown.
pub fn device_zones(slices: &[ResourceSlice]) -> BTreeMap<DeviceKey, u32> {
    let mut zones = BTreeMap::new();
    for slice in slices {
        let spec = &slice.spec;
        for device in spec.devices.iter().flatten() {
            let zone = device
                .attributes
                .as_ref()
                .and_then(|a| a.get(NUMA_NODE))
                .and_then(|a| a.int)
                .and_then(|z| u32::try_from(z).ok());
            if let Some(zone) = zone {
                let key = (
                    spec.driver.clone(),
                    spec.pool.name.clone(),
                    device.name.clone(),
                );
                zones.insert(key, zone);
            }
        }
    }
    zones
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_carry_the_standard_attributes_and_read_back() {
        let devices = zone_devices("gpu", 2, 2);
        assert_eq!(devices.len(), 4);
        assert_eq!(devices[2].name, "gpu-1-0");
        assert_eq!(devices[2].pcie_root.as_deref(), Some("pci0001:00"));
        let slice = node_slice("gpu.example.com", "n1", &devices);
        assert_eq!(slice["metadata"]["name"], "n1-gpu.example.com");
        let attributes = &slice["spec"]["devices"][3]["attributes"];
        assert_eq!(attributes[NUMA_NODE]["int"], 1);
        assert_eq!(attributes[PCIE_ROOT]["string"], "pci0001:00");

        let mut parsed: ResourceSlice = serde_json::from_value(slice).expect("slice");
        // A device with a list-form zone is left out (unknown), not guessed.
        let mut odd = parsed.spec.devices.as_ref().expect("devices")[0].clone();
        odd.name = "odd".into();
        odd.attributes.as_mut().expect("attributes").insert(
            NUMA_NODE.into(),
            serde_json::from_value(json!({"string": "0-1"})).expect("attribute"),
        );
        parsed.spec.devices.as_mut().expect("devices").push(odd);
        let zones = device_zones(&[parsed]);
        let key = |d: &str| ("gpu.example.com".into(), "n1".into(), d.to_owned());
        assert_eq!(zones.get(&key("gpu-0-1")), Some(&0));
        assert_eq!(zones.get(&key("gpu-1-1")), Some(&1));
        assert_eq!(zones.get(&key("odd")), None);
        assert_eq!(zones.len(), 4);
    }

    #[test]
    fn claims_ask_for_one_device_per_class_on_one_root() {
        let spec = claim_spec(&["gpu", "nic"], Some(PCIE_ROOT));
        let template = claim_template("gpu-nic", spec);
        let devices = &template["spec"]["spec"]["devices"];
        assert_eq!(devices["requests"][1]["name"], "r1");
        assert_eq!(devices["requests"][1]["exactly"]["deviceClassName"], "nic");
        assert_eq!(devices["constraints"][0]["matchAttribute"], PCIE_ROOT);
        let gpu = gpu_claim_template("one-gpu", "gpu");
        assert_eq!(
            gpu["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"],
            1
        );
    }
}
