//! PodDisruptionBudgets: counting violations and steering the choice of victims.

use super::*;

fn budget(selector: Value, allowed: i32, disrupted: &[&str]) -> Budget {
    let disrupted: serde_json::Map<String, Value> = disrupted
        .iter()
        .map(|n| ((*n).to_owned(), json!("2024-01-01T00:00:00Z")))
        .collect();
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "b", "namespace": "default"},
        "spec": {"selector": selector},
        "status": {"disruptionsAllowed": allowed, "disruptedPods": disrupted,
            "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
    }))
    .expect("pdb");
    Budget::from_pdb(&pdb)
}

#[test]
fn budgets_steer_the_choice() {
    let no_numa = [TopologyView::Missing];
    let mut n1 = node("n1", &[]);
    place(&mut n1, &gpod("p1", 8, 5));
    place(&mut n1, &gpod("p2", 8, 10));
    let preemptor = gpod("new", 8, 100);
    // No budget: the lower priority goes.
    let plans = search_plain(&[n1.clone()], &no_numa, &preemptor);
    assert_eq!(plans[0], ("n1".to_owned(), names(&["p1"])));
    // p1 protected with no disruption allowed: p2 goes instead.
    let mut budgets = Budgets::default();
    budgets.upsert(
        "default",
        "b",
        budget(json!({"matchLabels": {"app": "p1"}}), 0, &[]),
    );
    let plans = search(&[n1.clone()], &no_numa, &preemptor, &budgets, &none);
    assert_eq!(plans[0], ("n1".to_owned(), names(&["p2"])));
    // One disruption allowed: p1 is fine again.
    budgets.upsert(
        "default",
        "b",
        budget(json!({"matchLabels": {"app": "p1"}}), 1, &[]),
    );
    let plans = search(&[n1.clone()], &no_numa, &preemptor, &budgets, &none);
    assert_eq!(plans[0], ("n1".to_owned(), names(&["p1"])));
    // Across nodes: a node whose only plan violates a budget loses to a clean one.
    let mut n0 = node("n0", &[]);
    place(&mut n0, &gpod("q", 16, 1));
    budgets.upsert(
        "default",
        "q",
        budget(json!({"matchLabels": {"app": "q"}}), 0, &[]),
    );
    let plans = search(
        &[n0, n1],
        &[TopologyView::Missing, TopologyView::Missing],
        &preemptor,
        &budgets,
        &none,
    );
    assert_eq!(plans[0].0, "n1");
    assert_eq!(plans[1], ("n0".to_owned(), names(&["q"])));
}

#[test]
fn budget_violations_count_like_kube_scheduler() {
    let metas: Vec<crate::pod_meta::PodMeta> = ["a", "b", "c"]
        .iter()
        .map(|n| {
            let p = pod(n, &[("app", "web")], json!({}));
            crate::pod_meta::PodMeta::new(&p, &crate::numa::PodRequest::from_pod(&p).unwrap())
        })
        .collect();
    let refs: Vec<&crate::pod_meta::PodMeta> = metas.iter().collect();
    let web = json!({"matchLabels": {"app": "web"}});
    let mut b = Budgets::default();
    b.upsert("default", "web", budget(web.clone(), 1, &[]));
    assert_eq!(b.violations(&refs), 2, "one allowed, three taken");
    b.upsert("default", "web", budget(web.clone(), 1, &["b"]));
    assert_eq!(b.violations(&refs), 1, "b is already counted as disrupted");
    b.upsert("default", "web", budget(json!({}), 0, &[]));
    assert_eq!(b.violations(&refs), 0, "an empty selector covers nothing");
    b.upsert("default", "web", budget(web, 0, &[]));
    assert!(b.covers(refs[0]));
    b.remove("default", "web");
    assert_eq!(b.violations(&refs), 0);
}
