//! The test control plane itself (`dray_e2e::control_plane`): the real API server answers
//! with RBAC, the static token file and TokenRequest, and the real controller-manager
//! finishes namespace deletion and garbage-collects dependents. Every Kubernetes-mode test
//! stands on these.

use anyhow::{Result, ensure};
use std::time::Duration;

use dray_e2e::control_plane::{ControlPlane, ControlPlaneOptions};
use dray_e2e::{TestWorld, wait_until};

#[test]
fn the_real_control_plane_authenticates_authorizes_and_deletes_namespaces() -> Result<()> {
    let world = TestWorld::new()?;
    let cluster = ControlPlane::start(
        &world,
        ControlPlaneOptions::default().user("ann", &["devs"]),
    )?;
    let version = cluster.kubectl_ok(&["version", "-o", "json"])?;
    let version: serde_json::Value = serde_json::from_str(&version)?;
    let pinned =
        std::fs::read_to_string(dray_e2e::workspace_root().join("e2e/tools/versions.env"))?;
    let server = version["serverVersion"]["gitVersion"]
        .as_str()
        .unwrap_or_default();
    ensure!(
        pinned.contains(&format!("KUBERNETES_VERSION={server}")),
        "the API server is the pinned release: {server}"
    );

    // A user of the token file with no binding is refused by RBAC, by name.
    let ann = world.unique_dir("ann")?.join("kubeconfig");
    cluster.write_kubeconfig(&ann, cluster.token("ann")?)?;
    let denied = cluster
        .kubectl(&ann)
        .args(["get", "configmaps", "-n", "default"])
        .output()?;
    let said = String::from_utf8_lossy(&denied.stderr);
    ensure!(!denied.status.success(), "ann has no binding");
    ensure!(
        said.contains("User \"ann\" cannot list resource \"configmaps\""),
        "{said}"
    );
    cluster.kubectl_ok(&[
        "create",
        "rolebinding",
        "ann-view",
        "-n",
        "default",
        "--clusterrole=view",
        "--user=ann",
    ])?;
    // The authorizer follows bindings through a watch: allowed once it has seen it.
    wait_until(
        "ann's RoleBinding to take effect",
        Duration::from_secs(30),
        || {
            let allowed = cluster
                .kubectl(&ann)
                .args(["get", "configmaps", "-n", "default"])
                .output()?;
            Ok(allowed.status.success().then_some(()))
        },
    )?;

    // TokenRequest: a ServiceAccount's token authenticates as that account.
    cluster.kubectl_ok(&["create", "namespace", "team"])?;
    cluster.kubectl_ok(&["create", "serviceaccount", "robot", "-n", "team"])?;
    let token = cluster.service_account_token("team", "robot")?;
    let robot = world.unique_dir("robot")?.join("kubeconfig");
    cluster.write_kubeconfig(&robot, &token)?;
    let whoami = cluster
        .kubectl(&robot)
        .args([
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ])
        .output()?;
    ensure!(
        String::from_utf8_lossy(&whoami.stdout) == "system:serviceaccount:team:robot",
        "{}{}",
        String::from_utf8_lossy(&whoami.stdout),
        String::from_utf8_lossy(&whoami.stderr)
    );

    // The namespace controller empties and removes a deleted namespace.
    cluster.kubectl_ok(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "team",
        "--from-literal=a=b",
    ])?;
    cluster.kubectl_ok(&[
        "delete",
        "namespace",
        "team",
        "--wait=true",
        "--timeout=90s",
    ])?;
    let gone = cluster
        .kubectl(&cluster.admin_kubeconfig())
        .args(["get", "namespace", "team"])
        .output()?;
    ensure!(!gone.status.success(), "namespace team is gone");

    // Every request was audited with its user.
    let records = cluster.requests()?;
    ensure!(
        records.iter().any(|r| r.user == "ann"
            && r.verb == "list"
            && r.resource == "configmaps"
            && r.code == 403),
        "the audit log holds ann's refused list"
    );
    Ok(())
}
