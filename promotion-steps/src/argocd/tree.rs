//! Failing fast on pods that will not come up, from an Application's resource tree
//! (Argo CD's `GET /api/v1/applications/{name}/resource-tree`, an `ApplicationTree`:
//! `nodes[]` of `ResourceNode` with `kind`, `name`, `namespace`, `uid`, `parentRefs[]`,
//! `info[]` (`{name, value}`) and `health {status, message}`).
//!
//! Argo CD's controller fills a Pod node's `info` as `kubectl get pods` shows it
//! (`controller/cache/info.go`, `populatePodInfo`): `Status Reason` is the waiting reason of
//! a container (`CrashLoopBackOff`, `ImagePullBackOff`, `ErrImagePull`), else its
//! terminated reason (`OOMKilled`), and `Restart Count` the containers' restarts; a
//! ReplicaSet node carries `Revision` (`Rev:3`, from `deployment.kubernetes.io/revision`).
//! [`failing_pods`] finds the pods of each Deployment's newest ReplicaSet (and pods no
//! ReplicaSet owns) that crash-loop, cannot pull their image, or were OOM-killed again and
//! again, so health fails with that reason at once instead of after the Deployment's
//! progress deadline. Pods of older ReplicaSets are being replaced and are not judged.
//!
//! The Kubernetes transport has no tree (an Application's `status.resources` carries no
//! Pods); there, health waits for Argo CD's own verdict.

use std::collections::BTreeMap;

use serde_json::Value;

/// How many restarts, the last one `OOMKilled`, make "repeatedly OOM-killed".
pub const OOM_RESTARTS: u64 = 2;

/// Why a pod will not come up, as the tree shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodFailure {
    /// A container restarts and crashes again (`CrashLoopBackOff`).
    CrashLoop,
    /// Its image cannot be pulled (`ImagePullBackOff`, `ErrImagePull`, `InvalidImageName`).
    ImagePull,
    /// A container was killed for memory again and again (`OOMKilled`, restarted at least
    /// [`OOM_RESTARTS`] times).
    OomKilled,
}

impl PodFailure {
    fn of(reason: &str, restarts: u64) -> Option<PodFailure> {
        match reason {
            "CrashLoopBackOff" => Some(PodFailure::CrashLoop),
            "ImagePullBackOff" | "ErrImagePull" | "InvalidImageName" => Some(PodFailure::ImagePull),
            "OOMKilled" if restarts >= OOM_RESTARTS => Some(PodFailure::OomKilled),
            _ => None,
        }
    }
}

/// One failing pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailingPod {
    /// `namespace/name`.
    pub pod: String,
    /// The ReplicaSet that owns it, if one does.
    pub replica_set: Option<String>,
    /// What is wrong.
    pub failure: PodFailure,
    /// Argo CD's `Status Reason` as given.
    pub reason: String,
    /// Its `Restart Count`.
    pub restarts: u64,
    /// Argo CD's health message of the pod, if any.
    pub message: Option<String>,
}

impl FailingPod {
    /// ``pod `demo/app-7d9c-x` (ReplicaSet `app-7d9c`) is in CrashLoopBackOff, restarted 5 times: back-off …``
    pub fn describe(&self) -> String {
        let owner = self
            .replica_set
            .as_ref()
            .map(|rs| format!(" (ReplicaSet `{rs}`)"))
            .unwrap_or_default();
        let restarts = match self.restarts {
            0 => String::new(),
            1 => ", restarted once".to_owned(),
            n => format!(", restarted {n} times"),
        };
        let message = self
            .message
            .as_ref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        format!(
            "pod `{}`{owner} is in {}{restarts}{message}",
            self.pod, self.reason
        )
    }
}

/// The `value` of the `info` item `name` of a node.
fn info<'a>(node: &'a Value, name: &str) -> Option<&'a str> {
    node["info"]
        .as_array()?
        .iter()
        .find(|i| i["name"] == name)
        .and_then(|i| i["value"].as_str())
}

/// A ReplicaSet node's revision (`Rev:3` → 3).
fn revision(node: &Value) -> u64 {
    info(node, "Revision")
        .and_then(|r| r.strip_prefix("Rev:"))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn key(node: &Value) -> String {
    format!(
        "{}/{}",
        node["namespace"].as_str().unwrap_or(""),
        node["name"].as_str().unwrap_or("")
    )
}

/// The parent of `kind` a node names.
fn parent<'a>(node: &'a Value, kind: &str) -> Option<&'a Value> {
    node["parentRefs"]
        .as_array()?
        .iter()
        .find(|p| p["kind"] == kind)
}

/// The failing pods of the newest ReplicaSet of each Deployment (and of no ReplicaSet) in
/// `tree`, by pod name.
pub fn failing_pods(tree: &Value) -> Vec<FailingPod> {
    let nodes = tree["nodes"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    // The newest ReplicaSet of each Deployment, by revision.
    let mut newest: BTreeMap<String, (u64, String)> = BTreeMap::new();
    for rs in nodes.iter().filter(|n| n["kind"] == "ReplicaSet") {
        let owner = parent(rs, "Deployment").map_or_else(|| key(rs), key);
        let rev = revision(rs);
        let entry = newest.entry(owner).or_insert((rev, key(rs)));
        if rev > entry.0 {
            *entry = (rev, key(rs));
        }
    }
    let current: Vec<&str> = newest.values().map(|(_, rs)| rs.as_str()).collect();
    let mut failing = Vec::new();
    for pod in nodes.iter().filter(|n| n["kind"] == "Pod") {
        let replica_set = parent(pod, "ReplicaSet").map(key);
        if replica_set
            .as_deref()
            .is_some_and(|rs| !current.contains(&rs))
        {
            continue;
        }
        let reason = info(pod, "Status Reason").unwrap_or("");
        let restarts = info(pod, "Restart Count")
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        let Some(failure) = PodFailure::of(reason, restarts) else {
            continue;
        };
        failing.push(FailingPod {
            pod: key(pod),
            replica_set: replica_set.map(|rs| rs.rsplit('/').next().unwrap_or("").to_owned()),
            failure,
            reason: reason.to_owned(),
            restarts,
            message: pod["health"]["message"]
                .as_str()
                .filter(|m| !m.is_empty())
                .map(str::to_owned),
        });
    }
    failing.sort_by(|a, b| a.pod.cmp(&b.pod));
    failing
}

/// The reason an Application fails at once, from its tree: its first failing pod, and how
/// many more there are; `None` when no pod fails.
pub fn fail_fast_reason(app: &str, tree: &Value) -> Option<String> {
    let failing = failing_pods(tree);
    let first = failing.first()?;
    let more = match failing.len() - 1 {
        0 => String::new(),
        n => format!(" (and {n} more pod(s))"),
    };
    Some(format!(
        "`{app}` will not become healthy: {}{more}; hint: `kubectl describe pod` and its \
         logs say why — fix the image or its configuration and promote again",
        first.describe()
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rs(name: &str, rev: u64) -> Value {
        json!({"group": "apps", "version": "v1", "kind": "ReplicaSet", "namespace": "demo",
            "name": name, "uid": name,
            "parentRefs": [{"group": "apps", "kind": "Deployment", "namespace": "demo", "name": "app", "uid": "d1"}],
            "info": [{"name": "Revision", "value": format!("Rev:{rev}")}],
            "health": {"status": "Progressing"}})
    }

    fn pod(name: &str, rs: &str, reason: &str, restarts: u64, message: &str) -> Value {
        let mut info = vec![
            json!({"name": "Status Reason", "value": reason}),
            json!({"name": "Node", "value": "node-1"}),
            json!({"name": "Containers", "value": "0/1"}),
        ];
        if restarts > 0 {
            info.push(json!({"name": "Restart Count", "value": restarts.to_string()}));
        }
        json!({"version": "v1", "kind": "Pod", "namespace": "demo", "name": name, "uid": name,
            "parentRefs": [{"group": "apps", "kind": "ReplicaSet", "namespace": "demo", "name": rs, "uid": rs}],
            "info": info,
            "health": {"status": "Degraded", "message": message}})
    }

    fn tree(pods: Vec<Value>) -> Value {
        let mut nodes = vec![
            json!({"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "demo",
                "name": "app", "uid": "d1", "health": {"status": "Progressing"}}),
            rs("app-old", 1),
            rs("app-new", 2),
        ];
        nodes.extend(pods);
        json!({"nodes": nodes, "orphanedNodes": [], "hosts": []})
    }

    #[test]
    fn a_crash_looping_pod_of_the_new_replica_set_fails_at_once() {
        let t = tree(vec![pod(
            "app-new-x1",
            "app-new",
            "CrashLoopBackOff",
            5,
            "back-off 5m0s restarting failed container=app",
        )]);
        let failing = failing_pods(&t);
        assert_eq!(failing.len(), 1);
        assert_eq!(failing[0].failure, PodFailure::CrashLoop);
        let reason = fail_fast_reason("shop-dev", &t).unwrap();
        assert!(
            reason.starts_with(
                "`shop-dev` will not become healthy: pod `demo/app-new-x1` (ReplicaSet `app-new`) \
                 is in CrashLoopBackOff, restarted 5 times: back-off 5m0s restarting failed container=app"
            ),
            "{reason}"
        );
        assert!(reason.contains("hint: "), "{reason}");
    }

    #[test]
    fn image_pull_failures_fail_at_once() {
        for reason in ["ImagePullBackOff", "ErrImagePull"] {
            let t = tree(vec![pod("app-new-x1", "app-new", reason, 0, "")]);
            let failing = failing_pods(&t);
            assert_eq!(failing.len(), 1, "{reason}");
            assert_eq!(failing[0].failure, PodFailure::ImagePull, "{reason}");
            let said = fail_fast_reason("shop", &t).unwrap();
            assert!(said.contains(&format!("is in {reason}")), "{said}");
        }
    }

    #[test]
    fn oom_killed_fails_only_once_repeated() {
        let once = tree(vec![pod("app-new-x1", "app-new", "OOMKilled", 1, "")]);
        assert_eq!(failing_pods(&once), []);
        let again = tree(vec![pod("app-new-x1", "app-new", "OOMKilled", 2, "")]);
        let failing = failing_pods(&again);
        assert_eq!(failing.len(), 1);
        assert_eq!(failing[0].failure, PodFailure::OomKilled);
        assert!(
            fail_fast_reason("shop", &again)
                .unwrap()
                .contains("is in OOMKilled, restarted 2 times")
        );
    }

    #[test]
    fn old_replica_sets_and_running_pods_are_not_judged() {
        let t = tree(vec![
            pod("app-old-y1", "app-old", "CrashLoopBackOff", 9, ""),
            pod("app-new-x1", "app-new", "Running", 0, ""),
            pod("app-new-x2", "app-new", "ContainerCreating", 0, ""),
        ]);
        assert_eq!(failing_pods(&t), []);
        assert_eq!(fail_fast_reason("shop", &t), None);
        assert_eq!(failing_pods(&json!({})), []);
    }

    #[test]
    fn more_failing_pods_are_counted() {
        let t = tree(vec![
            pod("app-new-x2", "app-new", "CrashLoopBackOff", 3, ""),
            pod("app-new-x1", "app-new", "CrashLoopBackOff", 3, ""),
        ]);
        let said = fail_fast_reason("shop", &t).unwrap();
        assert!(said.contains("pod `demo/app-new-x1`"), "{said}");
        assert!(said.contains("(and 1 more pod(s))"), "{said}");
    }
}
