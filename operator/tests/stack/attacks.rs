//! The operator's token in an attacker's hands (issue 29, findings 2, 3 and 6), against
//! the RBAC and admission policies of config/rbac and config/policy as least_privilege.rs
//! installed them: every attempt is refused with 403 and the refusing policy's message,
//! while what the operator renders still passes. Writes are server-side dry runs, so an
//! attempt that gets through changes nothing.

use crate::harness::*;
use crate::least_privilege::{AGENTS_NS, INSTALL_NS, OPERATOR, operator_client};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde_json::{Value, json};
use tas_api::tas::TopologyAwareScheduling;
use tas_operator::desired::{self, ApiObject, BuildContext};
use tas_testcluster::{TestCluster, wait_for};

mod host_paths;
mod rbac;

/// Messages of the policies (config/policy/operator-*-policy.yaml).
const NAMES: &str = "only the DaemonSets tas-updater-<node group> and the Deployment";
const SERVICE_ACCOUNT: &str = "only as ServiceAccount";
const HOST_NAMESPACES: &str = "may not run pods in the host namespaces";
const PRIVILEGED: &str = "may not run privileged containers";
const HOST_PATHS: &str = "may mount only the kubelet host paths of the allow-list";
const SCHEDULER_HOST_PATHS: &str = "may not mount host paths into the scheduler";
const READ_ONLY: &str = "mounts host paths only read-only";
const IMAGES: &str = "may run only the images its install allows";
const RENDERED: &str = "it renders";
const SELF_BINDING: &str = "only to itself";
const ROLE_BINDING: &str = "may bind the Role";
const CLUSTER_BINDING: &str = "only by the ClusterRoleBinding of that name";
/// Both tas-operator-scope (the mark) and tas-operator-namespaces (the record) say so.
const CREATED_NAMESPACE: &str = "or in a namespace it created";
const MARK: &str = "only the TAS operator marks a namespace";
/// tas-operator-agents: the node agents stay in their namespace.
const AGENTS_ONLY_THERE: &str = "runs the node agents only in their namespace tas-node";
const AGENTS_BINDING: &str =
    "bind tas-updater only to a ServiceAccount of the node agents namespace tas-node";

pub async fn scenario(cluster: &TestCluster, admin: &Client, marked_namespace: &str) {
    let op = operator_client(cluster, admin).await;
    // The parameter of tas-operator-namespaces; no operator runs, so it stays as it is.
    create(admin, &sample(INSTALL_NS)).await;
    let objects = render(&stack_cr(None));
    // The roles the rendered bindings refer to (a binding's RBAC check reads its role).
    let roles: Vec<&ApiObject> = objects
        .iter()
        .filter(|o| matches!(o.resource.kind.as_str(), "ClusterRole" | "Role"))
        .collect();
    for role in &roles {
        apply_as(admin, role, false).await.unwrap();
    }
    // The renders pass (polled: the policies' view of the new parameter may lag).
    let legit: Vec<&ApiObject> = objects
        .iter()
        .filter(|o| {
            !matches!(
                o.resource.kind.as_str(),
                "Namespace" | "CustomResourceDefinition"
            )
        })
        .collect();
    wait_for(
        "the operator's renders to pass its policies",
        TIMEOUT,
        || async {
            for obj in &legit {
                if let Err(e) = apply_as(&op, obj, true).await {
                    tracing::info!(object = %obj.name, error = %e, "not yet accepted");
                    return Ok::<_, kube::Error>(None);
                }
            }
            Ok(Some(()))
        },
    )
    .await
    .unwrap();

    workloads(&op, &objects).await;
    rbac::bindings(&op).await;
    rbac::namespaces(admin, &op, marked_namespace).await;
    host_paths::scenario(admin, &op).await;

    stacks(admin)
        .delete(STACK, &DeleteParams::default())
        .await
        .unwrap();
    for role in roles {
        api_for(admin, role)
            .delete(&role.name, &DeleteParams::default())
            .await
            .unwrap();
    }
}

/// The stack in the operator's namespace, with two scheduler replicas (so the
/// leader-election Role and RoleBinding are rendered) and `kubelet` paths if given.
fn stack_cr(kubelet: Option<Value>) -> TopologyAwareScheduling {
    let mut cr = with_groups(INSTALL_NS, &[("attack", "tas.dev/attack", "yes")]);
    cr.spec.scheduler.replicas = 2;
    if let Some(kubelet) = kubelet {
        cr.spec.updater.kubelet = serde_json::from_value(kubelet).unwrap();
    }
    cr
}

/// What the operator renders for `cr`, with the images its Deployment allows.
fn render(cr: &TopologyAwareScheduling) -> Vec<ApiObject> {
    let ctx = BuildContext {
        updater_image_default: Some(UPDATER_IMAGE.into()),
        scheduler_image_default: Some(SCHEDULER_IMAGE.into()),
        allowed_images: Vec::new(),
        allowed_toleration_keys: Vec::new(),
        updater_namespace: Some(AGENTS_NS.into()),
    };
    let valid = tas_operator::validate::validate(cr, &ctx, None).unwrap();
    desired::build(&valid).unwrap().into_api_objects().unwrap()
}

fn api_for(client: &Client, obj: &ApiObject) -> Api<DynamicObject> {
    match &obj.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &obj.resource),
        None => Api::all_with(client.clone(), &obj.resource),
    }
}

/// Server-side apply of `obj` as the operator applies it, as a dry run if `dry_run`.
async fn apply_as(client: &Client, obj: &ApiObject, dry_run: bool) -> Result<(), kube::Error> {
    let mut params = PatchParams::apply("tas-operator").force();
    params.dry_run = dry_run;
    api_for(client, obj)
        .patch(&obj.name, &params, &Patch::Apply(&obj.value))
        .await
        .map(|_| ())
}

/// A dry-run create of `value` (a `kind` of `group`/`version`) in `namespace`.
async fn try_create(
    client: &Client,
    gvk: (&str, &str, &str),
    namespace: Option<&str>,
    value: Value,
) -> Result<(), kube::Error> {
    let (group, version, kind) = gvk;
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let api = match namespace {
        Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let object: DynamicObject = serde_json::from_value(value).unwrap();
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&params, &object).await.map(|_| ())
}

/// Collects `what` unless `result` is a 403 whose message contains `needle` (any 403
/// when `needle` is empty).
pub fn expect_refused(
    wrong: &mut Vec<String>,
    what: &str,
    result: Result<(), kube::Error>,
    needle: &str,
) {
    match result {
        Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains(needle) => {}
        other => wrong.push(format!(
            "{what}: expected 403 with {needle:?}, got {other:?}"
        )),
    }
}

pub fn assert_all_refused(wrong: &[String]) {
    assert!(
        wrong.is_empty(),
        "not refused as expected:\n{}",
        wrong.join("\n")
    );
}

/// Finding 2: DaemonSets and Deployments only as rendered.
async fn workloads(op: &Client, objects: &[ApiObject]) {
    let find = |kind: &str| {
        objects
            .iter()
            .find(|o| o.resource.kind == kind)
            .unwrap()
            .value
            .clone()
    };
    let ds = find("DaemonSet");
    let deployment = find("Deployment");
    let variant = |base: &Value, edit: &dyn Fn(&mut Value)| {
        let mut v = base.clone();
        edit(&mut v);
        v
    };
    let pod = "/spec/template/spec";
    let container = "/spec/template/spec/containers/0";
    let attempts: Vec<(&str, Value, &str)> = vec![
        (
            "a privileged node agent",
            variant(&ds, &|v| {
                // The API server refuses privileged without privilege escalation.
                let context = &mut v.pointer_mut(container).unwrap()["securityContext"];
                context["privileged"] = json!(true);
                context["allowPrivilegeEscalation"] = json!(true);
            }),
            PRIVILEGED,
        ),
        (
            "a node agent allowed privilege escalation",
            variant(&ds, &|v| {
                v.pointer_mut(container).unwrap()["securityContext"]["allowPrivilegeEscalation"] =
                    json!(true);
            }),
            PRIVILEGED,
        ),
        (
            "a node agent with CAP_SYS_ADMIN",
            variant(&ds, &|v| {
                v.pointer_mut(container).unwrap()["securityContext"]["capabilities"]["add"] =
                    json!(["SYS_ADMIN"]);
            }),
            PRIVILEGED,
        ),
        (
            "a privileged init container",
            variant(&ds, &|v| {
                let mut init = v.pointer(container).unwrap().clone();
                init["name"] = json!("init");
                init["securityContext"]["privileged"] = json!(true);
                init["securityContext"]["allowPrivilegeEscalation"] = json!(true);
                let fields = init.as_object_mut().unwrap();
                fields.remove("livenessProbe");
                fields.remove("readinessProbe");
                v.pointer_mut(pod).unwrap()["initContainers"] = json!([init]);
            }),
            PRIVILEGED,
        ),
        (
            "a node agent mounting /",
            variant(&ds, &|v| set_host_path(v, "/")),
            HOST_PATHS,
        ),
        (
            "a node agent mounting the containerd socket's directory",
            variant(&ds, &|v| set_host_path(v, "/run/containerd")),
            HOST_PATHS,
        ),
        (
            "a node agent mounting the kubelet's root directory",
            variant(&ds, &|v| set_host_path(v, "/var/lib/kubelet")),
            HOST_PATHS,
        ),
        (
            "a host path mounted writable",
            variant(&ds, &|v| {
                for m in v.pointer_mut(container).unwrap()["volumeMounts"]
                    .as_array_mut()
                    .unwrap()
                {
                    m["readOnly"] = json!(false);
                    m.as_object_mut().unwrap().remove("recursiveReadOnly");
                }
            }),
            READ_ONLY,
        ),
        (
            "an image outside the allowed set",
            variant(&ds, &|v| {
                v.pointer_mut(container).unwrap()["image"] = json!("registry.invalid/miner:1");
            }),
            IMAGES,
        ),
        (
            "a DaemonSet with a name the operator never renders",
            variant(&ds, &|v| {
                v["metadata"]["name"] = json!("node-shell");
            }),
            NAMES,
        ),
        (
            "a node agent running with the operator's token",
            variant(&ds, &|v| {
                v.pointer_mut(pod).unwrap()["serviceAccountName"] = json!(OPERATOR);
            }),
            SERVICE_ACCOUNT,
        ),
        (
            "a scheduler mounting a host path",
            variant(&deployment, &|v| {
                v.pointer_mut(pod).unwrap()["volumes"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "root", "hostPath": {"path": "/"}}));
            }),
            SCHEDULER_HOST_PATHS,
        ),
        (
            "a Deployment with a name the operator never renders",
            variant(&deployment, &|v| {
                v["metadata"]["name"] = json!("tas-operator-2");
            }),
            NAMES,
        ),
    ];
    // One field of the pod (or its container) set to a value the renderer never sets.
    let one_field: [(&str, &str, &str, Value); 4] = [
        (
            "a node agent in the host's PID namespace",
            pod,
            "hostPID",
            json!(true),
        ),
        (
            "a node agent on the host's network",
            pod,
            "hostNetwork",
            json!(true),
        ),
        (
            "a node agent in the host's IPC namespace",
            pod,
            "hostIPC",
            json!(true),
        ),
        (
            "a node agent on a host port",
            "/spec/template/spec/containers/0/ports/0",
            "hostPort",
            json!(8443),
        ),
    ];
    let attempts =
        attempts
            .into_iter()
            .chain(one_field.into_iter().map(|(what, pointer, field, value)| {
                let v = variant(&ds, &|v| {
                    v.pointer_mut(pointer).unwrap()[field] = value.clone()
                });
                (what, v, HOST_NAMESPACES)
            }));
    let mut wrong = Vec::new();
    for (what, value, needle) in attempts {
        let kind = value["kind"].as_str().unwrap().to_owned();
        let namespace = value["metadata"]["namespace"].as_str().unwrap().to_owned();
        let result = try_create(op, ("apps", "v1", &kind), Some(&namespace), value).await;
        expect_refused(&mut wrong, what, result, needle);
    }
    // The agent exactly as rendered, but in the scheduler's `restricted` namespace (the
    // operator holds tas-operator-operands there too): tas-operator-agents refuses.
    let moved = try_create(op, ("apps", "v1", "DaemonSet"), Some(INSTALL_NS), {
        let mut v = ds.clone();
        v["metadata"]["namespace"] = json!(INSTALL_NS);
        v
    })
    .await;
    expect_refused(
        &mut wrong,
        "a node agent in the scheduler's namespace",
        moved,
        AGENTS_ONLY_THERE,
    );
    // Its own Deployment, whose env is the policy's parameter: widening the images.
    let own = Api::<Deployment>::namespaced(op.clone(), INSTALL_NS)
        .patch(
            OPERATOR,
            &PatchParams {
                dry_run: true,
                ..PatchParams::default()
            },
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{
                "name": "operator",
                "env": [{"name": "TAS_ALLOWED_IMAGES", "value": "registry.invalid/miner:1"}],
            }]}}}})),
        )
        .await
        .map(|_| ());
    // Refused by tas-operator-workloads (its name) and tas-operator-images (the
    // operator's own image is not an operand image): either may answer.
    expect_refused(
        &mut wrong,
        "patch its own Deployment",
        own,
        "ValidatingAdmissionPolicy 'tas-operator-",
    );
    // Deleting it would remove the image list (tas-operator-images' parameter).
    let delete = Api::<Deployment>::namespaced(op.clone(), INSTALL_NS)
        .delete(
            OPERATOR,
            &DeleteParams {
                dry_run: true,
                ..DeleteParams::default()
            },
        )
        .await
        .map(|_| ());
    expect_refused(&mut wrong, "delete its own Deployment", delete, NAMES);
    // Another namespace: RBAC alone refuses.
    let elsewhere = try_create(op, ("apps", "v1", "DaemonSet"), Some("kube-system"), {
        let mut v = ds.clone();
        v["metadata"]["namespace"] = json!("kube-system");
        v
    })
    .await;
    expect_refused(&mut wrong, "a DaemonSet in kube-system", elsewhere, "");
    assert_all_refused(&wrong);
}

/// Points the DaemonSet's pod-resources volume at `path`.
fn set_host_path(ds: &mut Value, path: &str) {
    let volumes = ds.pointer_mut("/spec/template/spec/volumes").unwrap();
    for volume in volumes.as_array_mut().unwrap() {
        if volume["name"] == "pod-resources" {
            volume["hostPath"]["path"] = json!(path);
        }
    }
}
