//! Property: on random devices and claims, an allocation found is valid (no device
//! twice or in use, every device usable, selected and within its constraints, counts
//! right), and when none is found a brute-force search finds none either.

use std::collections::{BTreeSet, HashSet};

use proptest::prelude::*;

use crate::dra::{AllocateError, ZoneRule};

use super::builders::{Case, ClaimExt, DeviceExt, claim, device, exact, id, slice};

/// A generated device: model (0..3), socket (maybe), NUMA zone (maybe), tainted.
#[derive(Debug, Clone)]
struct Dev {
    model: u8,
    socket: Option<i64>,
    zone: Option<i64>,
    tainted: bool,
}

/// A generated request: count, and the model it selects (if any).
#[derive(Debug, Clone)]
struct Req {
    count: usize,
    model: Option<u8>,
}

/// A generated claim: its requests and whether they must share a socket.
#[derive(Debug, Clone)]
struct Cl {
    requests: Vec<Req>,
    same_socket: bool,
}

fn dev() -> impl Strategy<Value = Dev> {
    (
        0u8..3,
        proptest::option::of(0i64..2),
        proptest::option::of(0i64..2),
        proptest::bool::weighted(0.15),
    )
        .prop_map(|(model, socket, zone, tainted)| Dev {
            model,
            socket,
            zone,
            tainted,
        })
}

fn cl() -> impl Strategy<Value = Cl> {
    let req =
        (1usize..3, proptest::option::of(0u8..3)).prop_map(|(count, model)| Req { count, model });
    (proptest::collection::vec(req, 1..3), any::<bool>()).prop_map(|(requests, same_socket)| Cl {
        requests,
        same_socket,
    })
}

fn rule() -> impl Strategy<Value = ZoneRule> {
    prop_oneof![
        Just(ZoneRule::Any),
        (
            proptest::collection::btree_set(0u32..2, 0..3),
            any::<bool>()
        )
            .prop_map(|(zones, allow_unknown)| ZoneRule::Within {
                zones,
                allow_unknown
            }),
    ]
}

fn zones(d: &Dev) -> Option<BTreeSet<u32>> {
    d.zone.map(|z| BTreeSet::from([z as u32]))
}

/// Whether device `d` may serve request `r` on its own.
fn fits(d: &Dev, r: &Req, rule: &ZoneRule, in_use: bool) -> bool {
    !in_use && !d.tainted && rule.admits(zones(d).as_ref()) && r.model.is_none_or(|m| m == d.model)
}

/// Whether the devices of one claim satisfy its constraint.
fn constrained(devs: &[Dev], claim: &Cl, picked: &[usize]) -> bool {
    if !claim.same_socket {
        return true;
    }
    let sockets: Vec<Option<i64>> = picked.iter().map(|&i| devs[i].socket).collect();
    sockets.iter().all(|s| s.is_some() && *s == sockets[0])
}

/// Brute force over every combination: is there any valid allocation?
struct Brute<'a> {
    devs: &'a [Dev],
    claims: &'a [Cl],
    rule: &'a ZoneRule,
    used: Vec<bool>,
}

impl Brute<'_> {
    fn first_count(&self, claim: usize) -> usize {
        self.claims.get(claim).map_or(0, |c| c.requests[0].count)
    }

    /// Picks `left` more devices (from `from` on) for request `r` of claim `c`.
    fn go(
        &mut self,
        c: usize,
        r: usize,
        from: usize,
        left: usize,
        picked: &mut Vec<usize>,
    ) -> bool {
        let Some(claim) = self.claims.get(c) else {
            return true;
        };
        let Some(request) = claim.requests.get(r) else {
            return constrained(self.devs, claim, picked)
                && self.go(c + 1, 0, 0, self.first_count(c + 1), &mut Vec::new());
        };
        if left == 0 {
            let next = claim.requests.get(r + 1).map_or(0, |n| n.count);
            return self.go(c, r + 1, 0, next, picked);
        }
        for i in from..self.devs.len() {
            if self.used[i] || !fits(&self.devs[i], request, self.rule, false) {
                continue;
            }
            self.used[i] = true;
            picked.push(i);
            let found = self.go(c, r, i + 1, left - 1, picked);
            picked.pop();
            self.used[i] = false;
            if found {
                return true;
            }
        }
        false
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn allocations_are_valid_and_found_when_one_exists(
        devs in proptest::collection::vec(dev(), 0..8),
        claims in proptest::collection::vec(cl(), 1..3),
        in_use in proptest::collection::btree_set(0usize..8, 0..3),
        rule in rule(),
    ) {
        let slices = vec![slice("s", "pool", devs.iter().enumerate().map(|(i, d)| {
            let mut x = device(&format!("d{i}")).int("model", i64::from(d.model));
            if let Some(s) = d.socket { x = x.int("socket", s); }
            if let Some(z) = d.zone { x = x.numa(z); }
            if d.tainted { x = x.taint("NoSchedule"); }
            x
        }).collect())];
        let mut case = Case::new(slices);
        case.rule = rule.clone();
        case.in_use = in_use.iter().map(|i| id("pool", &format!("d{i}"))).collect();
        let objects: Vec<_> = claims.iter().enumerate().map(|(c, cl)| {
            let requests = cl.requests.iter().enumerate().map(|(r, req)| {
                let selector = req.model.map(|m| format!(r#"device.attributes["gpu.example.com"].model == {m}"#));
                exact(&format!("r{r}"), "gpu", req.count as i64, &selector.iter().map(String::as_str).collect::<Vec<_>>())
            }).collect();
            let object = claim(&format!("c{c}"), requests);
            if cl.same_socket { object.match_attribute("gpu.example.com/socket", &[]) } else { object }
        }).collect();
        let used = (0..devs.len()).map(|i| in_use.contains(&i)).collect();
        let mut brute = Brute { devs: &devs, claims: &claims, rule: &rule, used };
        let possible = brute.go(0, 0, 0, brute.first_count(0), &mut Vec::new());
        match case.run(&objects) {
            Ok(allocation) => {
                let mut seen = HashSet::new();
                for (cl, got) in claims.iter().zip(&allocation.claims) {
                    let mut picked = Vec::new();
                    for (r, req) in cl.requests.iter().enumerate() {
                        let of: Vec<usize> = got.devices.iter().filter(|d| d.request == format!("r{r}"))
                            .map(|d| d.id.device[1..].parse().expect("dN")).collect();
                        prop_assert_eq!(of.len(), req.count);
                        for &i in &of {
                            prop_assert!(seen.insert(i), "d{} twice", i);
                            prop_assert!(fits(&devs[i], req, &rule, in_use.contains(&i)), "d{} for {:?}", i, req);
                        }
                        picked.extend(of);
                    }
                    prop_assert!(constrained(&devs, cl, &picked));
                }
                prop_assert!(possible, "the brute force found nothing");
            }
            Err(AllocateError::Unsatisfiable { .. } | AllocateError::NoCombination) => prop_assert!(!possible),
            Err(e) => prop_assert!(false, "unexpected error {}", e),
        }
    }
}
