//! RBAC: each operand gets what it uses and nothing more.

use super::{FULL, cr, ctx, desired};
use crate::desired::*;

fn rules(d: &Desired, role: &str) -> Vec<(String, String, Vec<String>)> {
    let cr = d
        .cluster_roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(role))
        .unwrap();
    let mut out = Vec::new();
    for r in cr.rules.as_ref().unwrap() {
        let group = r.api_groups.clone().unwrap().concat();
        for res in r.resources.clone().unwrap() {
            out.push((group.clone(), res, r.verbs.clone()));
        }
    }
    out
}

#[test]
fn rbac_grants_only_what_each_operand_uses() {
    let d = desired(&cr(FULL), &ctx()).unwrap();
    let v = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let nrt = "topology.node.k8s.io".to_owned();
    assert_eq!(
        rules(&d, UPDATER_CLUSTER_ROLE),
        [
            (
                nrt.clone(),
                "noderesourcetopologies".into(),
                v(&["get", "list", "watch", "create", "update", "patch"])
            ),
            ("".into(), "nodes".into(), v(&["get"])),
            (
                "authentication.k8s.io".into(),
                "tokenreviews".into(),
                v(&["create"])
            ),
            (
                "authorization.k8s.io".into(),
                "subjectaccessreviews".into(),
                v(&["create"])
            ),
        ]
    );
    let sched = rules(&d, SCHEDULER_CLUSTER_ROLE);
    let verbs = |group: &str, res: &str| {
        sched
            .iter()
            .find(|(g, r, _)| g == group && r == res)
            .map(|(_, _, v)| v.clone())
    };
    assert_eq!(verbs("", "pods/binding"), Some(v(&["create"])));
    assert_eq!(
        verbs(&nrt, "noderesourcetopologies"),
        Some(v(&["get", "list", "watch"]))
    );
    assert_eq!(
        verbs("events.k8s.io", "events"),
        Some(v(&["create", "patch"]))
    );
    assert_eq!(
        verbs("policy", "poddisruptionbudgets"),
        Some(v(&["get", "list", "watch"]))
    );
    assert_eq!(verbs("", "namespaces"), Some(v(&["list", "watch"])));
    for res in ["persistentvolumeclaims", "persistentvolumes"] {
        assert_eq!(verbs("", res), Some(v(&["get", "list", "watch"])), "{res}");
    }
    assert_eq!(
        verbs("storage.k8s.io", "storageclasses"),
        Some(v(&["get", "list", "watch"])),
        "read only: the scheduler binds no volume"
    );
    for res in ["resourceslices", "deviceclasses"] {
        assert_eq!(
            verbs("resource.k8s.io", res),
            Some(v(&["get", "list", "watch"])),
            "{res}: read only"
        );
    }
    assert_eq!(
        verbs("resource.k8s.io", "resourceclaims"),
        Some(v(&["get", "list", "watch", "patch"]))
    );
    assert_eq!(
        verbs("resource.k8s.io", "resourceclaims/status"),
        Some(v(&["patch"]))
    );
    assert_eq!(
        verbs("authentication.k8s.io", "tokenreviews"),
        Some(v(&["create"]))
    );
    assert_eq!(
        verbs("authorization.k8s.io", "subjectaccessreviews"),
        Some(v(&["create"]))
    );
    assert_eq!(
        verbs("coordination.k8s.io", "leases"),
        None,
        "leases only through the Role"
    );
    for (g, r, verbs) in rules(&d, UPDATER_CLUSTER_ROLE).iter().chain(&sched) {
        assert!(
            g != "*" && r != "*" && !verbs.contains(&"*".to_owned()),
            "no wildcards"
        );
    }
    for b in &d.cluster_role_bindings {
        let s = &b.subjects.as_ref().unwrap()[0];
        assert_eq!(Some(b.role_ref.name.as_str()), b.metadata.name.as_deref());
        assert_eq!(
            (s.kind.as_str(), s.namespace.as_deref()),
            ("ServiceAccount", Some("numa-system"))
        );
    }
}
