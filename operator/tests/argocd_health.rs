//! The Argo CD health check shipped in `docs/argocd/health.lua`, run by Lua 5.1 (the
//! language of Argo CD's gopher-lua) on objects whose conditions come from the
//! operator's own decision functions: Healthy when Ready, Degraded with the problem,
//! Progressing while a rollout runs, agents start or the generation is not reconciled
//! yet, Suspended when paused.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mlua::serde::SerializeOptions;
use mlua::{Lua, LuaSerdeExt, Table};
use serde_json::{Value, json};
use tas_operator::reconcile::conditions::{Facts, Problem, Workload, decide, merge};

const SCRIPT: &str = include_str!("../../docs/argocd/health.lua");

/// Runs the check as Argo CD does: `obj` global, the script's return value.
fn health(object: &Value) -> (String, String) {
    let lua = Lua::new();
    let options = SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false);
    let obj = lua.to_value_with(object, options).expect("obj as Lua");
    lua.globals().set("obj", obj).expect("obj set");
    let hs: Table = lua.load(SCRIPT).eval().expect("the script runs");
    (
        hs.get("status").expect("status"),
        hs.get("message").expect("message"),
    )
}

fn workload(name: &str, desired: i32, ready: i32, updated: i32) -> Workload {
    Workload {
        name: name.into(),
        exists: true,
        desired,
        ready,
        updated,
        available: ready,
        current: desired,
        observed: true,
    }
}

fn healthy() -> Facts {
    Facts {
        daemon_sets: vec![workload("tas-updater-workers", 2, 2, 2)],
        scheduler: workload("tas-scheduler", 1, 1, 1),
        desired_nodes: 2,
        missed_heartbeats: 3,
        ..Facts::default()
    }
}

/// The object as the operator writes it for `facts`, at `generation`, reconciled at
/// `observed`.
fn object(facts: &Facts, generation: i64, observed: i64) -> Value {
    let now = Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap());
    let conditions = merge(&[], decide(facts), Some(observed), &now);
    json!({
        "apiVersion": "tas.dev/v1alpha1", "kind": "TopologyAwareScheduling",
        "metadata": {"name": "default", "generation": generation},
        "spec": {"paused": facts.paused},
        "status": {"observedGeneration": observed, "conditions": conditions}
    })
}

#[test]
fn a_ready_stack_is_healthy() {
    let (status, message) = health(&object(&healthy(), 3, 3));
    assert_eq!(status, "Healthy", "{message}");
    assert!(message.contains("node agent(s) ready"), "{message}");
}

#[test]
fn a_problem_is_degraded_with_its_reason() {
    let mut f = healthy();
    f.problem = Some(Problem {
        reason: "NodeGroupsOverlap".into(),
        message: "node n1 is in groups a and b".into(),
    });
    let (status, message) = health(&object(&f, 3, 3));
    assert_eq!(status, "Degraded");
    assert_eq!(message, "NodeGroupsOverlap: node n1 is in groups a and b");
}

#[test]
fn rollouts_starting_agents_and_unreconciled_generations_are_progressing() {
    let mut rolling = healthy();
    rolling.scheduler.updated = 0;
    let (status, message) = health(&object(&rolling, 3, 3));
    assert_eq!(status, "Progressing");
    assert!(
        message.starts_with("Rolling: Progressing=True: rolling out"),
        "{message}"
    );

    let mut starting = healthy();
    starting.daemon_sets[0].ready = 1;
    let (status, message) = health(&object(&starting, 3, 3));
    assert_eq!(status, "Progressing");
    assert!(message.starts_with("UpdaterNotReady: "), "{message}");

    // Ready=True, but of the generation before the user's edit.
    let (status, message) = health(&object(&healthy(), 4, 3));
    assert_eq!(status, "Progressing");
    assert_eq!(
        message,
        "Waiting for the operator to reconcile generation 4"
    );

    let (status, _) = health(&json!({"metadata": {"name": "default", "generation": 1}}));
    assert_eq!(status, "Progressing");
}

#[test]
fn a_paused_stack_is_suspended() {
    let mut f = healthy();
    f.paused = true;
    let (status, message) = health(&object(&f, 2, 2));
    assert_eq!(status, "Suspended");
    assert!(message.contains("spec.paused is true"), "{message}");
}

/// The user guide's argocd-cm snippet is the shipped script, indented under its key.
#[test]
fn the_user_guides_snippet_is_the_shipped_script() {
    let guide = include_str!("../../docs/user-guide.md");
    let key = "  resource.customizations.health.tas.dev_TopologyAwareScheduling: |\n";
    let start = guide
        .find(key)
        .expect("the argocd-cm snippet in docs/user-guide.md")
        + key.len();
    let end = start + guide[start..].find("```").expect("the snippet's end");
    let unindented: String = guide[start..end]
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        unindented, SCRIPT,
        "docs/user-guide.md's snippet differs from docs/argocd/health.lua: paste the file again, indented by 4"
    );
}
