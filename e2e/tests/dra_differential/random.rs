//! Seeded random worlds: one to three drivers with pools local to the node, reaching
//! it through a rack selector or `allNodes`, or belonging to another node; pools of
//! several slices, some incomplete, some with slices of an older generation, a few
//! naming a device twice; devices with attributes of every type (some missing, so
//! that selectors on them fail at run time) and capacities; classes and claims with
//! CEL selectors, `ExactCount`, `All`, `firstAvailable`, `matchAttribute` and
//! `distinctAttribute`; and other pods' claims holding some of the devices.

use std::collections::BTreeMap;

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

use super::model::{
    Alt, Attr, Claim, Constraint, Dev, Held, Mode, NODE, OTHER_NODE, Reach, Request, STANDARD, Sel,
    Slice, World,
};

/// Drivers: name, short name (class and pool names), models.
const DRIVERS: [(&str, &str, &[&str]); 3] = [
    ("gpu.example.com", "gpu", &["a100", "h100", "l4"]),
    ("nic.example.com", "nic", &["cx7", "e810"]),
    ("fpga.example.org", "fpga", &["u55", "u280"]),
];
const RACKS: [&str; 2] = ["r0", "r1"];
const ROOTS: [&str; 4] = ["pci0000:00", "pci0000:01", "pci0000:02", "pci0000:03"];
const GI: u64 = 1 << 30;
/// Device memory: bytes and how a slice writes them.
const MEMORY: [(u64, &str); 5] = [
    (512 << 20, "512Mi"),
    (8 * GI, "8Gi"),
    (16 * GI, "16Gi"),
    (20_000_000_000, "20G"),
    (80 * GI, "80Gi"),
];
/// At most this many devices asked for by `ExactCount` per pod, so that no search
/// runs into the time limit.
const MAX_ASKED: u32 = 8;

fn version(rng: &mut StdRng) -> Attr {
    let versions = [
        (1, 2, 0, None),
        (1, 2, 3, None),
        (1, 10, 0, None),
        (2, 0, 0, Some("rc.1")),
        (2, 0, 0, None),
    ];
    let (a, b, c, pre) = *versions.choose(rng).expect("versions");
    Attr::Version(a, b, c, pre.map(str::to_owned))
}

/// A device of `driver`; `qualified`: its own attributes written `domain/id`.
fn device(rng: &mut StdRng, name: String, driver: usize, qualified: bool) -> Dev {
    let (domain, _, models) = DRIVERS[driver];
    let own = |id: &str| {
        if qualified {
            format!("{domain}/{id}")
        } else {
            id.to_owned()
        }
    };
    let mut attributes = BTreeMap::new();
    if rng.random_bool(0.97) {
        let model = models.choose(rng).expect("models");
        attributes.insert(own("model"), Attr::Str((*model).to_owned()));
    }
    if rng.random_bool(0.95) {
        let cores = *[4, 8, 16, 32].choose(rng).expect("cores");
        attributes.insert(own("cores"), Attr::Int(cores));
    }
    if rng.random_bool(0.95) {
        attributes.insert(own("ecc"), Attr::Bool(rng.random_bool(0.6)));
    }
    if rng.random_bool(0.97) {
        attributes.insert(own("driverVersion"), version(rng));
    }
    if rng.random_bool(0.95) {
        let root = ROOTS.choose(rng).expect("roots");
        attributes.insert(
            format!("{STANDARD}/pcieRoot"),
            Attr::Str((*root).to_owned()),
        );
    }
    if rng.random_bool(0.5) {
        attributes.insert(
            format!("{STANDARD}/numaNode"),
            Attr::Int(rng.random_range(0..2)),
        );
    }
    let mut capacity = BTreeMap::new();
    if rng.random_bool(0.97) {
        let (bytes, text) = *MEMORY.choose(rng).expect("memory");
        capacity.insert(own("memory"), (bytes, text.to_owned()));
    }
    Dev {
        name,
        attributes,
        capacity,
    }
}

fn weighted(rng: &mut StdRng, weights: &[u32]) -> usize {
    let total: u32 = weights.iter().sum();
    let mut pick = rng.random_range(0..total);
    for (i, &w) in weights.iter().enumerate() {
        if pick < w {
            return i;
        }
        pick -= w;
    }
    weights.len() - 1
}

fn rack(rng: &mut StdRng) -> Reach {
    Reach::Rack(RACKS[rng.random_range(0..RACKS.len())].to_owned())
}

/// The slices of one pool of `driver`.
fn pool(rng: &mut StdRng, driver: usize, index: usize, out: &mut Vec<Slice>) {
    let (name, short, _) = DRIVERS[driver];
    let (pool, reach) = match weighted(rng, &[50, 20, 15, 15]) {
        0 => (
            format!("{NODE}-{short}-{index}"),
            Reach::Node(NODE.to_owned()),
        ),
        1 => (format!("rack-{short}-{index}"), rack(rng)),
        2 => (format!("fabric-{short}-{index}"), Reach::All),
        _ => (
            format!("{OTHER_NODE}-{short}-{index}"),
            Reach::Node(OTHER_NODE.to_owned()),
        ),
    };
    let networked = !matches!(reach, Reach::Node(_));
    let qualified = rng.random_bool(0.3);
    let generation = rng.random_range(1..=3);
    let mut count = [1, 1, 1, 2, 2, 3][rng.random_range(0..6)];
    let invalid = rng.random_bool(0.02);
    if invalid {
        count = count.max(2);
    }
    let mut slices = Vec::new();
    for s in 0..count {
        let devices = (0..rng.random_range(1..=4))
            .map(|d| device(rng, format!("{short}-{s}-{d}"), driver, qualified))
            .collect();
        // A pool's slices may reach nodes differently (a rack's worth and the rest).
        let reach = if networked && rng.random_bool(0.2) {
            if rng.random_bool(0.5) {
                rack(rng)
            } else {
                Reach::All
            }
        } else {
            reach.clone()
        };
        slices.push(Slice {
            name: format!("{pool}-s{s}"),
            driver: name.to_owned(),
            pool: pool.clone(),
            generation,
            count,
            reach,
            devices,
        });
    }
    if invalid {
        let twice = slices[0].devices[0].clone();
        slices[1].devices.push(twice);
    }
    if rng.random_bool(0.08) {
        // The driver is publishing a new generation: one slice still missing.
        if slices.len() > 1 {
            let gone = rng.random_range(0..slices.len());
            slices.remove(gone);
        } else {
            slices[0].count = 2;
        }
    }
    if generation > 1 && rng.random_bool(0.25) {
        // Slices of the previous generation, not yet deleted.
        for s in 0..rng.random_range(1..=2) {
            let devices = (0..rng.random_range(1..=3))
                .map(|d| device(rng, format!("{short}-{s}-{d}"), driver, qualified))
                .collect();
            let reach = if rng.random_bool(0.7) {
                reach.clone()
            } else {
                Reach::All
            };
            slices.push(Slice {
                name: format!("{pool}-old{s}"),
                driver: name.to_owned(),
                pool: pool.clone(),
                generation: generation - 1,
                count: 2,
                reach,
                devices,
            });
        }
    }
    out.append(&mut slices);
}

/// The classes: `any`, and per driver one per kind of selector.
fn classes(drivers: &[usize]) -> BTreeMap<String, Vec<Sel>> {
    let mut classes = BTreeMap::from([("any".to_owned(), Vec::new())]);
    for &d in drivers {
        let (name, short, _) = DRIVERS[d];
        let is = || Sel::Driver(name.to_owned());
        let own = |id: &str| (name.to_owned(), id.to_owned());
        let mut add = |suffix: &str, second: Option<Sel>| {
            let class = format!("{short}{suffix}");
            classes.insert(class, std::iter::once(is()).chain(second).collect());
        };
        add("", None);
        let (domain, id) = own("memory");
        add(
            "-big",
            Some(Sel::CapacityAtLeast(domain, id, 16 * GI, "16Gi".into())),
        );
        let (domain, id) = own("cores");
        add("-fast", Some(Sel::IntAtLeast(domain, id, 16)));
        let (domain, id) = own("cores");
        add("-safe", Some(Sel::IntAtLeastIfSet(domain, id, 8)));
        let (domain, id) = own("driverVersion");
        add(
            "-new",
            Some(Sel::VersionAtLeast(
                domain,
                id,
                Attr::Version(1, 10, 0, None),
            )),
        );
        let (domain, id) = own("ecc");
        add("-ecc", Some(Sel::IsTrue(domain, id)));
        // No driver check first: fails at run time on other drivers' devices.
        let (domain, id) = own("cores");
        classes.insert(
            format!("{short}-unguarded"),
            vec![Sel::IntAtLeast(domain, id, 8)],
        );
    }
    classes.insert(
        "root-1".to_owned(),
        vec![Sel::StrIs(
            STANDARD.into(),
            "pcieRoot".into(),
            ROOTS[1].into(),
        )],
    );
    classes
}

/// A request's own selector, mostly on the class's driver.
fn request_selector(rng: &mut StdRng, driver: usize) -> Sel {
    let (domain, _, models) = DRIVERS[driver];
    let d = domain.to_owned();
    let model = |rng: &mut StdRng| (*models.choose(rng).expect("models")).to_owned();
    match rng.random_range(0..7) {
        0 => Sel::StrIs(d, "model".into(), model(rng)),
        1 => Sel::IntAtLeastIfSet(d, "cores".into(), 16),
        2 => Sel::IntAtLeast(d, "cores".into(), 8),
        3 => Sel::VersionAtLeast(d, "driverVersion".into(), Attr::Version(1, 2, 3, None)),
        4 => Sel::CapacityAtLeast(d, "memory".into(), 8 * GI, "8Gi".into()),
        5 => Sel::Either(
            Box::new(Sel::StrIs(d.clone(), "model".into(), model(rng))),
            Box::new(Sel::StrIs(d, "model".into(), model(rng))),
        ),
        _ => {
            let root = ROOTS.choose(rng).expect("roots");
            Sel::StrIs(STANDARD.into(), "pcieRoot".into(), (*root).to_owned())
        }
    }
}

fn alternative(rng: &mut StdRng, name: String, drivers: &[usize], asked: &mut u32) -> Alt {
    let driver = *drivers.choose(rng).expect("drivers");
    let short = DRIVERS[driver].1;
    let class = match rng.random_range(0..50) {
        0 | 1 => "any".to_owned(),
        2 => "root-1".to_owned(),
        3 => "missing".to_owned(),
        4 => format!("{short}-unguarded"),
        n => {
            let suffixes = ["", "", "", "", "-big", "-fast", "-safe", "-new", "-ecc"];
            format!("{short}{}", suffixes[n as usize % suffixes.len()])
        }
    };
    let selectors = (0..weighted(rng, &[60, 30, 10]))
        .map(|_| request_selector(rng, driver))
        .collect();
    let mode = if rng.random_bool(0.08) {
        Mode::All
    } else {
        let count = [1, 1, 1, 2, 2, 3][rng.random_range(0..6)];
        let count = if *asked + count > MAX_ASKED { 1 } else { count };
        *asked += count;
        Mode::Exact((count > 1 || rng.random_bool(0.7)).then_some(count))
    };
    Alt {
        name,
        class,
        selectors,
        mode,
    }
}

fn claim(rng: &mut StdRng, index: usize, drivers: &[usize], asked: &mut u32) -> Claim {
    let mut requests = Vec::new();
    let mut names = Vec::new();
    for r in 0..=weighted(rng, &[60, 30, 10]) {
        let name = format!("req{r}");
        names.push(name.clone());
        let first_available = rng.random_bool(0.25);
        let alternatives = if first_available {
            (0..rng.random_range(2..=3))
                .map(|s| {
                    names.push(format!("{name}/sub{s}"));
                    alternative(rng, format!("sub{s}"), drivers, asked)
                })
                .collect()
        } else {
            vec![alternative(rng, name.clone(), drivers, asked)]
        };
        requests.push(Request {
            name,
            alternatives,
            first_available,
        });
    }
    let constraints = (0..weighted(rng, &[55, 35, 10]))
        .map(|_| {
            let domain = DRIVERS[*drivers.choose(rng).expect("drivers")].0;
            let attribute = match rng.random_range(0..6) {
                0 => format!("{domain}/model"),
                1 => format!("{domain}/cores"),
                2 => format!("{domain}/ecc"),
                3 => format!("{domain}/driverVersion"),
                4 => format!("{STANDARD}/pcieRoot"),
                _ => format!("{STANDARD}/numaNode"),
            };
            let requests = if rng.random_bool(0.6) {
                Vec::new()
            } else {
                names
                    .iter()
                    .filter(|_| rng.random_bool(0.5))
                    .cloned()
                    .collect()
            };
            Constraint {
                matching: rng.random_bool(0.65),
                attribute,
                requests,
            }
        })
        .collect();
    Claim {
        name: format!("claim-{index}"),
        requests,
        constraints,
    }
}

/// One random world.
pub fn world(rng: &mut StdRng) -> World {
    let mut drivers: Vec<usize> = (0..DRIVERS.len())
        .filter(|_| rng.random_bool(0.5))
        .collect();
    if drivers.is_empty() {
        drivers.push(rng.random_range(0..DRIVERS.len()));
    }
    let mut slices = Vec::new();
    for &d in &drivers {
        for p in 0..rng.random_range(1..=3) {
            pool(rng, d, p, &mut slices);
        }
    }
    let mut asked = 0;
    let claims = (0..=weighted(rng, &[60, 30, 10]))
        .map(|i| claim(rng, i, &drivers, &mut asked))
        .collect();
    // Other pods hold some devices (any slice's: stale and invisible ones too).
    let share = [0.0, 0.1, 0.3][rng.random_range(0..3)];
    let mut held: Vec<Vec<Held>> = vec![Vec::new(); rng.random_range(1..=3)];
    for slice in &slices {
        for device in &slice.devices {
            if rng.random_bool(share) {
                let holder = rng.random_range(0..held.len());
                let id = (
                    slice.driver.clone(),
                    slice.pool.clone(),
                    device.name.clone(),
                );
                if !held.iter().flatten().any(|h| *h == id) {
                    held[holder].push(id);
                }
            }
        }
    }
    held.retain(|h| !h.is_empty());
    World {
        rack: RACKS[rng.random_range(0..2)].to_owned(),
        slices,
        classes: classes(&drivers),
        claims,
        held,
    }
}
