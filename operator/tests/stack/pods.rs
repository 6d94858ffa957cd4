//! The CR's pod settings reach the applied Deployment and DaemonSet and the pods the
//! controllers create from them: the scheduler lands on the tainted node its node
//! selector and toleration point at, the agents get the priority of the class the CR
//! names, and changing extra pod labels rolls the scheduler to a new ReplicaSet.

use crate::harness::*;
use k8s_openapi::api::core::v1::{Pod, Taint};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tas_api::tas::status::condition_type::AVAILABLE;
use tas_operator::desired::{NAME_LABEL, updater_daemonset_name};
use tas_testcluster::{FakeNode, create_fake_node, unique_name, wait_for, wait_node_ready};

const POOL: &str = "e2e.tas.dev/pool";
const INFRA: &str = INFRA_TAINT;
const GROUP: &str = "pods";
const AGENT_PRIORITY: i32 = 1_000_000;

pub async fn scenario(client: &Client) {
    let ns = unique_name("tas-pods");
    let pool = unique_name("pool");
    let agents = nodes(client, "pods", 1, &[(POOL, &pool)]).await;
    // The only node the scheduler may run on: labelled for its node selector and
    // tainted, so only its toleration lets it there.
    let infra = FakeNode {
        taints: vec![Taint {
            key: INFRA.to_owned(),
            value: Some(pool.clone()),
            effect: "NoSchedule".to_owned(),
            ..Taint::default()
        }],
        ..FakeNode::new(unique_name("infra")).label(INFRA, &pool)
    };
    create_fake_node(client, &infra).await.unwrap();
    wait_node_ready(client, &infra.name, TIMEOUT).await.unwrap();

    let classes: Api<PriorityClass> = Api::all(client.clone());
    let class = unique_name("tas-agents");
    classes
        .create(
            &PostParams::default(),
            &PriorityClass {
                metadata: ObjectMeta {
                    name: Some(class.clone()),
                    ..ObjectMeta::default()
                },
                value: AGENT_PRIORITY,
                ..PriorityClass::default()
            },
        )
        .await
        .unwrap();

    let mut cr = with_groups(&ns, &[(GROUP, POOL, &pool)]);
    let mut spec = serde_json::to_value(&cr.spec).unwrap();
    let settings = json!({
        "imagePullSecrets": [{"name": "registry-credentials"}],
        "imagePullPolicy": "IfNotPresent",
        "updater": {
            "priorityClassName": class,
            "podLabels": {"team": "numa-agents"},
            "maxUnavailable": 2,
        },
        "scheduler": {
            "nodeSelector": {INFRA: pool},
            "tolerations": [{"key": INFRA, "operator": "Exists", "effect": "NoSchedule"}],
            "podLabels": {"team": "numa"},
            "podAnnotations": {"example.com/owner": "platform"},
        },
    });
    merge(&mut spec, &settings);
    cr.spec = serde_json::from_value(spec).unwrap();
    create(client, &cr).await;

    // The applied objects carry the settings.
    let ds = get_daemon_set(client, &ns, &updater_daemonset_name(GROUP)).await;
    let ds_spec = ds.spec.unwrap();
    let rolling = ds_spec.update_strategy.unwrap().rolling_update.unwrap();
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(2)));
    let template = ds_spec.template;
    let agent = template.spec.unwrap();
    assert_eq!(agent.priority_class_name.as_deref(), Some(class.as_str()));
    assert_eq!(
        agent.image_pull_secrets.unwrap()[0].name,
        "registry-credentials"
    );
    assert_eq!(
        agent.containers[0].image_pull_policy.as_deref(),
        Some("IfNotPresent")
    );
    assert_eq!(
        template.metadata.unwrap().labels.unwrap()["team"],
        "numa-agents"
    );
    let deployment = get_deployment(client, &ns).await;
    let template = deployment.spec.unwrap().template;
    let sched = template.spec.unwrap();
    assert_eq!(sched.node_selector.unwrap()[INFRA], pool);
    assert_eq!(sched.tolerations.unwrap()[0].key.as_deref(), Some(INFRA));
    assert_eq!(
        sched.containers[0].image_pull_policy.as_deref(),
        Some("IfNotPresent")
    );
    let meta = template.metadata.unwrap();
    assert_eq!(meta.annotations.unwrap()["example.com/owner"], "platform");

    // The pods exist, so the API server admitted them (the priority classes resolve),
    // and run where the settings say.
    wait_condition(client, AVAILABLE, "True", None).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let scheduler = running_pod(&pods, "tas-scheduler", |p| {
        label_of(p, "team") == Some("numa")
    })
    .await;
    let spec = scheduler.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(infra.name.as_str()));
    assert_eq!(
        spec.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );
    assert_eq!(
        spec.priority,
        Some(2_000_000_000),
        "system-cluster-critical's value"
    );
    let agent = running_pod(&pods, "tas-updater", |p| {
        label_of(p, "team") == Some("numa-agents")
    })
    .await;
    let spec = agent.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(agents[0].as_str()));
    assert_eq!(spec.priority, Some(AGENT_PRIORITY));

    // New extra labels: a new pod template, so a new ReplicaSet whose pod replaces the
    // old one on the same node.
    let old_hash = label_of(&scheduler, "pod-template-hash")
        .unwrap()
        .to_owned();
    patch_spec(
        client,
        json!({"scheduler": {"podLabels": {"team": "numa", "rollout": "two"}}}),
    )
    .await;
    let rolled = running_pod(&pods, "tas-scheduler", |p| {
        label_of(p, "rollout") == Some("two")
    })
    .await;
    assert_ne!(
        label_of(&rolled, "pod-template-hash"),
        Some(old_hash.as_str())
    );
    assert_eq!(
        rolled.spec.as_ref().unwrap().node_name.as_deref(),
        Some(infra.name.as_str())
    );

    uninstall(client, &ns).await;
    classes
        .delete(&class, &DeleteParams::default())
        .await
        .unwrap();
}

/// Merges `patch` into `target` as a JSON merge patch would.
fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    match (target, patch) {
        (serde_json::Value::Object(t), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn label_of<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// Waits for a running pod of `app` (its `app.kubernetes.io/name`) matching `check`.
async fn running_pod(pods: &Api<Pod>, app: &str, check: impl Fn(&Pod) -> bool) -> Pod {
    let params = ListParams::default().labels(&format!("{NAME_LABEL}={app}"));
    wait_for(format!("a running {app} pod"), TIMEOUT, || async {
        let list = pods.list(&params).await?;
        Ok::<_, kube::Error>(list.items.into_iter().find(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                && check(p)
        }))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}
