//! The Kubernetes API-server double (`dray_e2e::kube_api`) proved with the real `kubectl`
//! 1.32 and the `kube` crate's own Client, runtime watcher and kube-lease-manager.

use std::path::{Path, PathBuf};
use std::process::Output;

use anyhow::{Context, Result, bail};
use dray_e2e::kube_api::{KubeApi, KubeApiOptions};
use dray_e2e::workspace_root;

fn run(mut command: std::process::Command) -> Result<Output> {
    let output = command.output().context("Failed to run kubectl")?;
    Ok(output)
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs kubectl with `args` and fails with its output when it fails.
fn kubectl_ok(api: &KubeApi, kubeconfig: &Path, args: &[&str]) -> Result<String> {
    let mut command = api.kubectl(kubeconfig);
    command.args(args);
    let output = run(command)?;
    if !output.status.success() {
        bail!("kubectl {args:?} failed: {}", text(&output));
    }
    Ok(text(&output))
}

fn kubectl_fails(api: &KubeApi, kubeconfig: &Path, args: &[&str]) -> Result<String> {
    let mut command = api.kubectl(kubeconfig);
    command.args(args);
    let output = run(command)?;
    if output.status.success() {
        bail!(
            "kubectl {args:?} succeeded, expected a failure: {}",
            text(&output)
        );
    }
    Ok(text(&output))
}

struct Fixture {
    api: KubeApi,
    dir: tempfile::TempDir,
    admin: PathBuf,
}

async fn fixture() -> Result<Fixture> {
    let api = KubeApi::start().await?;
    let dir = tempfile::tempdir()?;
    let admin = dir.path().join("admin.kubeconfig");
    api.write_kubeconfig(&admin, &api.admin_token())?;
    Ok(Fixture { api, dir, admin })
}

/// Creates a namespace as a user would (kubectl's typed client sends it as protobuf).
fn create_namespace(f: &Fixture, name: &str) -> Result<()> {
    let out = kubectl_ok(&f.api, &f.admin, &["create", "namespace", name])?;
    assert!(out.contains(&format!("namespace/{name} created")), "{out}");
    Ok(())
}

fn crds_dir() -> String {
    workspace_root().join("crds").display().to_string()
}

#[tokio::test]
async fn kubectl_applies_crds_and_the_quickstart_project() -> Result<()> {
    let f = fixture().await?;
    let version = kubectl_ok(&f.api, &f.admin, &["version", "-o", "json"])?;
    assert!(version.contains("\"gitVersion\": \"v1.32.0\""), "{version}");
    let applied = kubectl_ok(&f.api, &f.admin, &["apply", "-f", &crds_dir()])?;
    assert!(
        applied.contains("customresourcedefinition.apiextensions.k8s.io/stages.dray.dev created"),
        "{applied}"
    );
    let waited = kubectl_ok(
        &f.api,
        &f.admin,
        &[
            "wait",
            "--for=condition=Established",
            "crd/stages.dray.dev",
            "--timeout=20s",
        ],
    )?;
    assert!(waited.contains("condition met"), "{waited}");
    let names = kubectl_ok(
        &f.api,
        &f.admin,
        &[
            "get",
            "crd",
            "stages.dray.dev",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"NamesAccepted\")].status}",
        ],
    )?;
    assert_eq!(names.trim(), "True");
    let resources = kubectl_ok(
        &f.api,
        &f.admin,
        &["api-resources", "--api-group", "dray.dev"],
    )?;
    assert!(
        resources.contains("stages") && resources.contains("Stage"),
        "{resources}"
    );
    create_namespace(&f, "demo")?;
    let project = workspace_root()
        .join("examples/quickstart/project")
        .display()
        .to_string();
    let out = kubectl_ok(&f.api, &f.admin, &["apply", "-f", &project])?;
    assert!(out.contains("stage.dray.dev/dev created"), "{out}");
    // Applying again writes nothing. Objects whose lists the CRD schema defaults inside
    // (a Stage's `requestedFreight[].sources.availabilityStrategy`) come back "configured":
    // kubectl's merge patch resends the whole list, as against a real server, and the
    // server finds nothing to change.
    let before = f.api.revision();
    let again = kubectl_ok(&f.api, &f.admin, &["apply", "-f", &project])?;
    assert!(again.contains("project.dray.dev/demo unchanged"), "{again}");
    assert!(
        again.contains("promotiontask.dray.dev/render-to-stage-branch unchanged"),
        "{again}"
    );
    assert_eq!(
        f.api.revision(),
        before,
        "the second apply changed nothing: {again}"
    );
    let dev = f
        .api
        .get("/apis/dray.dev/v1alpha1/namespaces/demo/stages/dev")
        .context("dev is stored")?;
    assert_eq!(
        dev["spec"]["requestedFreight"][0]["sources"]["availabilityStrategy"], "OneOf",
        "defaulted"
    );
    let stages = kubectl_ok(&f.api, &f.admin, &["get", "stages", "-n", "demo"])?;
    let chunked = kubectl_ok(
        &f.api,
        &f.admin,
        &[
            "get",
            "stages",
            "-n",
            "demo",
            "--chunk-size=1",
            "-o",
            "name",
        ],
    )?;
    assert_eq!(chunked.lines().count(), 3, "all pages: {chunked}");
    let header = stages.lines().next().unwrap_or_default();
    assert!(
        header.contains("NAME") && header.contains("FREIGHT") && header.contains("AGE"),
        "{stages}"
    );
    assert!(stages.contains("staging"), "{stages}");
    let _ = &f.dir;
    Ok(())
}

/// A fixture with the CRDs applied and namespace `demo` created.
async fn with_crds() -> Result<Fixture> {
    with_crds_options(KubeApiOptions::default()).await
}

async fn with_crds_options(options: KubeApiOptions) -> Result<Fixture> {
    let api = KubeApi::start_with(options).await?;
    let dir = tempfile::tempdir()?;
    let admin = dir.path().join("admin.kubeconfig");
    api.write_kubeconfig(&admin, &api.admin_token())?;
    let f = Fixture { api, dir, admin };
    kubectl_ok(&f.api, &f.admin, &["apply", "-f", &crds_dir()])?;
    create_namespace(&f, "demo")?;
    Ok(f)
}

fn write(f: &Fixture, name: &str, body: &str) -> Result<String> {
    let path = f.dir.path().join(name);
    std::fs::write(&path, body)?;
    Ok(path.display().to_string())
}

const WAREHOUSE: &str = "apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata:
  name: app
  namespace: demo
spec:
  subscriptions:
    - image:
        repoURL: 127.0.0.1:5000/demo/app
";

#[tokio::test]
async fn kubectl_server_side_apply_patch_and_delete() -> Result<()> {
    let f = with_crds().await?;
    let file = write(&f, "warehouse.yaml", WAREHOUSE)?;
    let out = kubectl_ok(&f.api, &f.admin, &["apply", "--server-side", "-f", &file])?;
    assert!(
        out.contains("warehouse.dray.dev/app serverside-applied"),
        "{out}"
    );
    let again = kubectl_ok(&f.api, &f.admin, &["apply", "--server-side", "-f", &file])?;
    assert!(again.contains("serverside-applied"), "{again}");
    let path = "/apis/dray.dev/v1alpha1/namespaces/demo/warehouses/app";
    let stored = f.api.get(path).context("the warehouse is stored")?;
    assert_eq!(stored["metadata"]["managedFields"][0]["manager"], "kubectl");
    assert_eq!(stored["metadata"]["generation"], 1);

    kubectl_ok(
        &f.api,
        &f.admin,
        &[
            "patch",
            "warehouse",
            "app",
            "-n",
            "demo",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"interval":"10m"}}"#,
        ],
    )?;
    let stored = f.api.get(path).context("the warehouse is stored")?;
    assert_eq!(stored["spec"]["interval"], "10m");
    assert_eq!(stored["metadata"]["generation"], 2);
    kubectl_ok(
        &f.api,
        &f.admin,
        &[
            "patch",
            "warehouse",
            "app",
            "-n",
            "demo",
            "--type",
            "json",
            "-p",
            r#"[{"op":"replace","path":"/spec/interval","value":"1m"}]"#,
        ],
    )?;
    assert_eq!(f.api.get(path).context("stored")?["spec"]["interval"], "1m");
    let out = kubectl_fails(
        &f.api,
        &f.admin,
        &[
            "patch",
            "warehouse",
            "app",
            "-n",
            "demo",
            "--type",
            "strategic",
            "-p",
            r#"{"spec":{"interval":"2m"}}"#,
        ],
    )?;
    assert!(
        out.contains("UnsupportedMediaType") || out.contains("unknown format"),
        "{out}"
    );

    let out = kubectl_ok(
        &f.api,
        &f.admin,
        &["delete", "warehouse", "app", "-n", "demo"],
    )?;
    assert!(out.contains("warehouse.dray.dev \"app\" deleted"), "{out}");
    assert!(f.api.get(path).is_none());
    let out = kubectl_fails(&f.api, &f.admin, &["get", "warehouse", "app", "-n", "demo"])?;
    assert!(
        out.contains("Error from server (NotFound): warehouses.dray.dev \"app\" not found"),
        "{out}"
    );
    Ok(())
}

#[tokio::test]
async fn kubectl_dry_run_describe_and_wide_tables() -> Result<()> {
    let f = with_crds().await?;
    let file = write(&f, "warehouse.yaml", WAREHOUSE)?;
    let out = kubectl_ok(
        &f.api,
        &f.admin,
        &["apply", "--dry-run=server", "-f", &file],
    )?;
    assert!(
        out.contains("warehouse.dray.dev/app created (server dry run)"),
        "{out}"
    );
    assert!(
        f.api
            .get("/apis/dray.dev/v1alpha1/namespaces/demo/warehouses/app")
            .is_none()
    );
    kubectl_ok(&f.api, &f.admin, &["apply", "-f", &file])?;
    let described = kubectl_ok(
        &f.api,
        &f.admin,
        &["describe", "warehouse", "app", "-n", "demo"],
    )?;
    assert!(
        described.contains("Name:") && described.contains("app"),
        "{described}"
    );
    let listed = kubectl_ok(&f.api, &f.admin, &["get", "crds"])?;
    assert!(listed.contains("stages.dray.dev"), "{listed}");
    let json = kubectl_ok(
        &f.api,
        &f.admin,
        &[
            "get",
            "warehouse",
            "app",
            "-n",
            "demo",
            "-o",
            "jsonpath={.metadata.generation}",
        ],
    )?;
    assert_eq!(json.trim(), "1");
    Ok(())
}

#[tokio::test]
async fn kubectl_shows_invalid_objects_and_prunes_unknown_fields() -> Result<()> {
    let f = with_crds().await?;
    let invalid = write(
        &f,
        "invalid.yaml",
        "apiVersion: dray.dev/v1alpha1\nkind: Warehouse\nmetadata:\n  name: bad\n  namespace: demo\nspec:\n  interval: 5\n",
    )?;
    let out = kubectl_fails(&f.api, &f.admin, &["apply", "-f", &invalid])?;
    assert!(out.contains("is invalid"), "{out}");
    assert!(out.contains("spec.interval"), "{out}");

    let elsewhere = write(
        &f,
        "elsewhere.yaml",
        &WAREHOUSE.replace("namespace: demo", "namespace: nope"),
    )?;
    let out = kubectl_fails(&f.api, &f.admin, &["create", "-f", &elsewhere])?;
    assert!(
        out.contains("Error from server (NotFound)")
            && out.contains("namespaces \"nope\" not found"),
        "{out}"
    );

    let unknown = write(&f, "unknown.yaml", &format!("{WAREHOUSE}  foo: bar\n"))?;
    let out = kubectl_ok(
        &f.api,
        &f.admin,
        &["apply", "--validate=warn", "-f", &unknown],
    )?;
    assert!(
        out.contains(r#"Warning: unknown field "spec.foo""#),
        "{out}"
    );
    let stored = f
        .api
        .get("/apis/dray.dev/v1alpha1/namespaces/demo/warehouses/app")
        .context("stored")?;
    assert!(stored["spec"].get("foo").is_none(), "pruned: {stored}");
    let out = kubectl_fails(
        &f.api,
        &f.admin,
        &["create", "--validate=strict", "-f", &unknown],
    )?;
    assert!(out.contains(r#"unknown field "spec.foo""#), "{out}");
    Ok(())
}

mod kube_client {
    use std::time::Duration;

    use anyhow::{Context, Result, bail};
    use futures_util::StreamExt;
    use kube::api::{
        Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
        PostParams,
    };
    use kube::runtime::watcher;
    use serde_json::json;
    use tokio::sync::mpsc;

    use super::{with_crds, with_crds_options};

    /// How long a test waits for something the double should do at once.
    const WAIT: Duration = Duration::from_secs(20);

    fn warehouses(client: kube::Client) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk("dray.dev", "v1alpha1", "Warehouse");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "warehouses");
        Api::namespaced_with(client, "demo", &ar)
    }

    fn warehouse(name: &str) -> Result<DynamicObject> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "dray.dev/v1alpha1",
            "kind": "Warehouse",
            "metadata": {"name": name, "namespace": "demo"},
            "spec": {"subscriptions": [{"image": {"repoURL": "127.0.0.1:5000/demo/app"}}]},
        }))?)
    }

    fn api_error(err: kube::Error) -> Result<kube::core::Status> {
        match err {
            kube::Error::Api(response) => Ok(*response),
            other => bail!("expected an API error, got {other}"),
        }
    }

    #[tokio::test]
    async fn dynamic_crud_conflict_status_and_finalizers() -> Result<()> {
        let f = with_crds().await?;
        let api = warehouses(f.api.client(&f.api.admin_token()).await?);
        let created = api
            .create(&PostParams::default(), &warehouse("app")?)
            .await?;
        assert_eq!(created.metadata.generation, Some(1));
        assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
        let stale = created.clone();

        let err = api
            .create(&PostParams::default(), &warehouse("app")?)
            .await
            .expect_err("a second create");
        let err = api_error(err)?;
        assert_eq!((err.code, err.reason.as_str()), (409, "AlreadyExists"));

        let mut changed = created.clone();
        changed.data["spec"]["interval"] = json!("1m");
        let updated = api.replace("app", &PostParams::default(), &changed).await?;
        assert_eq!(updated.metadata.generation, Some(2));
        let err = api_error(
            api.replace("app", &PostParams::default(), &stale)
                .await
                .expect_err("a stale replace"),
        )?;
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            "Operation cannot be fulfilled on warehouses.dray.dev \"app\": the object has been modified; please apply your changes to the latest version and try again"
        );

        let status = json!({"status": {"observedGeneration": 2}, "spec": {"interval": "9m"}});
        let after = api
            .patch_status("app", &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        assert_eq!(after.data["status"]["observedGeneration"], 2);
        assert_eq!(
            after.data["spec"]["interval"], "1m",
            "a status write changes only status"
        );
        assert_eq!(
            after.metadata.generation,
            Some(2),
            "no generation bump on status"
        );
        let main = json!({"status": {"observedGeneration": 7}, "spec": {"interval": "2m"}});
        let after = api
            .patch("app", &PatchParams::default(), &Patch::Merge(&main))
            .await?;
        assert_eq!(
            after.data["status"]["observedGeneration"], 2,
            "the main resource ignores status"
        );
        assert_eq!(after.data["spec"]["interval"], "2m");
        let paths: Vec<String> = f
            .api
            .requests()
            .into_iter()
            .filter(|(verb, ..)| verb == "patch")
            .map(|(_, path, _)| path)
            .collect();
        assert!(
            paths
                .iter()
                .any(|path| path.ends_with("/warehouses/app/status")),
            "{paths:?}"
        );

        let finalizers = json!({"metadata": {"finalizers": ["dray.dev/test"]}});
        let marked = api
            .patch("app", &PatchParams::default(), &Patch::Merge(&finalizers))
            .await?;
        let from = marked
            .metadata
            .resource_version
            .clone()
            .context("a resourceVersion")?;
        let client = f.api.client(&f.api.admin_token()).await?;
        let watch = http::Request::get(format!(
            "/apis/dray.dev/v1alpha1/namespaces/demo/warehouses?watch=true&resourceVersion={from}&timeoutSeconds=20"
        ))
        .body(Vec::new())?;
        let mut events = client.request_events::<DynamicObject>(watch).await?.boxed();
        api.delete("app", &DeleteParams::default()).await?;
        let held = api.get("app").await?;
        assert!(
            held.metadata.deletion_timestamp.is_some(),
            "a finalizer holds the delete"
        );
        let none = json!({"metadata": {"finalizers": null}});
        api.patch("app", &PatchParams::default(), &Patch::Merge(&none))
            .await?;
        let err = api_error(
            api.get("app")
                .await
                .expect_err("gone once the finalizer is removed"),
        )?;
        assert_eq!(err.code, 404);
        // The delete marked it; removing the last finalizer deleted it at once.
        let mut kinds = Vec::new();
        while kinds.len() < 2 {
            let event = tokio::time::timeout(WAIT, events.next())
                .await
                .context("watch events of the delete")?
                .context("stream open")??;
            kinds.push(match event {
                kube::core::WatchEvent::Modified(o) => format!(
                    "MODIFIED deletionTimestamp={}",
                    o.metadata.deletion_timestamp.is_some()
                ),
                kube::core::WatchEvent::Deleted(_) => "DELETED".to_owned(),
                other => format!("{other:?}"),
            });
        }
        assert_eq!(kinds, vec!["MODIFIED deletionTimestamp=true", "DELETED"]);
        Ok(())
    }

    #[tokio::test]
    async fn dry_run_generate_name_and_selectors() -> Result<()> {
        let f = with_crds().await?;
        let api = warehouses(f.api.client(&f.api.admin_token()).await?);
        let dry = PostParams {
            dry_run: true,
            ..Default::default()
        };
        let planned = api.create(&dry, &warehouse("dry")?).await?;
        assert_eq!(planned.metadata.name.as_deref(), Some("dry"));
        assert!(
            f.api
                .get("/apis/dray.dev/v1alpha1/namespaces/demo/warehouses/dry")
                .is_none(),
            "dryRun stores nothing"
        );

        let mut generated = warehouse("")?;
        generated.metadata.name = None;
        generated.metadata.generate_name = Some("wh-".into());
        generated.metadata.labels = Some([("tier".to_owned(), "front".to_owned())].into());
        let made = api.create(&PostParams::default(), &generated).await?;
        let name = made.metadata.name.clone().context("a generated name")?;
        assert!(name.starts_with("wh-") && name.len() == 8, "{name}");
        api.create(&PostParams::default(), &warehouse("plain")?)
            .await?;

        let selected = api
            .list(&kube::api::ListParams::default().labels("tier=front"))
            .await?;
        let names: Vec<_> = selected
            .items
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        assert_eq!(names, vec![name.clone()]);
        let others = api
            .list(&kube::api::ListParams::default().labels("tier notin (front)"))
            .await?;
        assert_eq!(others.items.len(), 1);
        let by_field = api
            .list(&kube::api::ListParams::default().fields("metadata.name=plain"))
            .await?;
        assert_eq!(by_field.items.len(), 1);
        assert!(by_field.metadata.resource_version.is_some());
        let first = api.list(&kube::api::ListParams::default().limit(1)).await?;
        assert_eq!(first.items.len(), 1);
        let token = first
            .metadata
            .continue_
            .clone()
            .context("a continue token")?;
        let rest = api
            .list(
                &kube::api::ListParams::default()
                    .limit(1)
                    .continue_token(&token),
            )
            .await?;
        assert_eq!(rest.items.len(), 1);
        assert!(
            rest.metadata.continue_.is_none(),
            "two warehouses, two pages"
        );
        // A write after the first page, then compaction: the token's revision is gone.
        let touch = json!({"metadata": {"labels": {"touched": "yes"}}});
        api.patch("plain", &PatchParams::default(), &Patch::Merge(&touch))
            .await?;
        f.api.compact();
        let err = api_error(
            api.list(
                &kube::api::ListParams::default()
                    .limit(1)
                    .continue_token(&token),
            )
            .await
            .expect_err("a token from before compaction"),
        )?;
        assert_eq!((err.code, err.reason.as_str()), (410, "Expired"));
        // kube-runtime pages its initial list too.
        let pages = kube::runtime::watcher::Config::default().page_size(1);
        let mut stream = kube::runtime::watcher(api.clone(), pages).boxed();
        let mut listed = 0;
        while let Some(event) = tokio::time::timeout(WAIT, stream.next())
            .await
            .context("the paged initial list")?
        {
            match event? {
                watcher::Event::InitApply(_) => listed += 1,
                watcher::Event::InitDone => break,
                _ => {}
            }
        }
        assert_eq!(listed, 2);
        Ok(())
    }

    #[tokio::test]
    async fn server_side_apply_conflicts_and_force() -> Result<()> {
        let f = with_crds().await?;
        let client = f.api.client(&f.api.admin_token()).await?;
        let api = warehouses(client.clone());
        let config = |interval: &str| {
            json!({
                "apiVersion": "dray.dev/v1alpha1", "kind": "Warehouse",
                "metadata": {"name": "app"},
                "spec": {"interval": interval, "subscriptions": [{"image": {"repoURL": "r"}}]},
            })
        };
        let made = api
            .patch(
                "app",
                &PatchParams::apply("alice"),
                &Patch::Apply(config("1m")),
            )
            .await?;
        assert_eq!(made.data["spec"]["interval"], "1m");
        let same = api
            .patch(
                "app",
                &PatchParams::apply("bob"),
                &Patch::Apply(config("1m")),
            )
            .await?;
        assert_eq!(
            same.metadata.resource_version, made.metadata.resource_version,
            "no change, no write"
        );
        let err = api_error(
            api.patch(
                "app",
                &PatchParams::apply("bob"),
                &Patch::Apply(config("2m")),
            )
            .await
            .expect_err("bob conflicts with alice"),
        )?;
        assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
        assert!(
            err.message.contains("conflict with \"alice\"")
                && err.message.contains(".spec.interval"),
            "{}",
            err.message
        );
        let forced = api
            .patch(
                "app",
                &PatchParams::apply("bob").force(),
                &Patch::Apply(config("2m")),
            )
            .await?;
        assert_eq!(forced.data["spec"]["interval"], "2m");
        // alice no longer owns the interval: dropping it from her config leaves bob's value.
        let mut without = config("2m");
        without["spec"]
            .as_object_mut()
            .context("spec")?
            .remove("interval");
        let after = api
            .patch("app", &PatchParams::apply("alice"), &Patch::Apply(without))
            .await?;
        assert_eq!(after.data["spec"]["interval"], "2m");
        let status = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Warehouse", "status": {"observedGeneration": 3}});
        let applied = api
            .patch_status(
                "app",
                &PatchParams::apply("dray").force(),
                &Patch::Apply(status),
            )
            .await?;
        assert_eq!(applied.data["status"]["observedGeneration"], 3);
        assert_eq!(applied.data["spec"]["interval"], "2m");

        let discovery = kube::discovery::Discovery::new(client).run().await?;
        let group = discovery
            .get("dray.dev")
            .context("dray.dev is discovered")?;
        assert!(
            group
                .recommended_resources()
                .iter()
                .any(|(ar, caps)| ar.plural == "stages"
                    && caps.scope == kube::discovery::Scope::Namespaced)
        );
        Ok(())
    }

    #[tokio::test]
    async fn deleting_an_owner_collects_its_dependents() -> Result<()> {
        let f = with_crds().await?;
        let client = f.api.client(&f.api.admin_token()).await?;
        let api = warehouses(client.clone());
        let owner = api
            .create(&PostParams::default(), &warehouse("owner")?)
            .await?;
        let uid = owner.metadata.uid.clone().context("a uid")?;
        let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(client, "demo");
        let owned = |name: &str| -> Result<k8s_openapi::api::core::v1::ConfigMap> {
            Ok(serde_json::from_value(
                json!({"metadata": {"name": name, "ownerReferences": [{
                    "apiVersion": "dray.dev/v1alpha1", "kind": "Warehouse", "name": "owner", "uid": uid,
                }]}}),
            )?)
        };
        config_maps
            .create(&PostParams::default(), &owned("dependent")?)
            .await?;
        api.delete("owner", &DeleteParams::default()).await?;
        assert!(
            f.api
                .get("/api/v1/namespaces/demo/configmaps/dependent")
                .is_none(),
            "collected with its owner"
        );

        let owner = api
            .create(&PostParams::default(), &warehouse("owner")?)
            .await?;
        let uid = owner.metadata.uid.clone().context("a uid")?;
        let kept: k8s_openapi::api::core::v1::ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": "kept", "ownerReferences": [{
                "apiVersion": "dray.dev/v1alpha1", "kind": "Warehouse", "name": "owner", "uid": uid,
            }]}}))?;
        config_maps.create(&PostParams::default(), &kept).await?;
        api.delete("owner", &DeleteParams::orphan()).await?;
        let kept = f
            .api
            .get("/api/v1/namespaces/demo/configmaps/kept")
            .context("orphaned, not deleted")?;
        assert!(
            kept["metadata"]["ownerReferences"]
                .as_array()
                .is_none_or(Vec::is_empty)
        );
        Ok(())
    }

    #[tokio::test]
    async fn kube_runtime_finalizer_helper_adds_and_cleans_up() -> Result<()> {
        use kube::runtime::controller::Action;
        use kube::runtime::finalizer::{Event, finalizer};
        use std::sync::Arc;
        let f = with_crds().await?;
        let api = warehouses(f.api.client(&f.api.admin_token()).await?);
        let name = "dray.dev/cleanup";
        let made = api
            .create(&PostParams::default(), &warehouse("app")?)
            .await?;
        let seen = std::sync::Mutex::new(Vec::new());
        let reconcile = |event: Event<DynamicObject>| {
            let kind = match event {
                Event::Apply(_) => "apply",
                Event::Cleanup(_) => "cleanup",
            };
            if let Ok(mut seen) = seen.lock() {
                seen.push(kind);
            }
            async { Ok::<_, std::convert::Infallible>(Action::await_change()) }
        };
        finalizer(&api, name, Arc::new(made), reconcile).await?;
        let held = api.get("app").await?;
        assert_eq!(held.metadata.finalizers, Some(vec![name.to_owned()]));
        finalizer(&api, name, Arc::new(held), reconcile).await?;
        api.delete("app", &DeleteParams::default()).await?;
        let deleting = api.get("app").await?;
        assert!(deleting.metadata.deletion_timestamp.is_some());
        finalizer(&api, name, Arc::new(deleting), reconcile).await?;
        assert!(
            api.get_opt("app").await?.is_none(),
            "gone once the finalizer is removed"
        );
        assert_eq!(
            *seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?,
            vec!["apply", "cleanup"]
        );
        Ok(())
    }

    #[tokio::test]
    async fn malformed_bodies_are_400s_not_crashes() -> Result<()> {
        let f = with_crds().await?;
        let client = f.api.client(&f.api.admin_token()).await?;
        let path = "/apis/dray.dev/v1alpha1/namespaces/demo/warehouses";
        for body in [
            r#"{"metadata": "x"}"#,
            "[1, 2]",
            "not json",
            r#"{"apiVersion": "v9", "kind": "Warehouse"}"#,
        ] {
            let request = http::Request::post(path)
                .header("content-type", "application/json")
                .body(body.as_bytes().to_vec())?;
            let err = api_error(
                client
                    .request::<serde_json::Value>(request)
                    .await
                    .expect_err("a malformed body is refused"),
            )?;
            assert_eq!(
                (err.code, err.reason.as_str()),
                (400, "BadRequest"),
                "{body}: {}",
                err.message
            );
        }
        let patch = http::Request::patch(format!("{path}/none"))
            .header("content-type", "application/json-patch+json")
            .body(br#"[{"op": "replace", "path": "/metadata", "value": 1}]"#.to_vec())?;
        let err = api_error(
            client
                .request::<serde_json::Value>(patch)
                .await
                .expect_err("no such object"),
        )?;
        assert_eq!(err.code, 404);
        // The double still serves; a patch that breaks the object's shape is a 400.
        warehouses(client.clone())
            .create(&PostParams::default(), &warehouse("after")?)
            .await?;
        let patch = http::Request::patch(format!("{path}/after"))
            .header("content-type", "application/json-patch+json")
            .body(br#"[{"op": "replace", "path": "/metadata", "value": 1}]"#.to_vec())?;
        let err = api_error(
            client
                .request::<serde_json::Value>(patch)
                .await
                .expect_err("a shapeless object"),
        )?;
        assert_eq!(err.code, 400, "{}", err.message);
        Ok(())
    }

    #[tokio::test]
    async fn a_kube_runtime_controller_reconciles_through_the_double() -> Result<()> {
        use kube::runtime::Controller;
        use kube::runtime::controller::Action;
        use std::sync::Arc;
        let f = with_crds().await?;
        let api = warehouses(f.api.client(&f.api.admin_token()).await?);
        let gvk = GroupVersionKind::gvk("dray.dev", "v1alpha1", "Warehouse");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "warehouses");
        let reconcile = |object: Arc<DynamicObject>, api: Arc<Api<DynamicObject>>| async move {
            let name = object.metadata.name.clone().unwrap_or_default();
            let status = json!({"status": {"observedGeneration": object.metadata.generation}});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await?;
            Ok::<_, kube::Error>(Action::await_change())
        };
        let error_policy = |_: Arc<DynamicObject>, _: &kube::Error, _: Arc<Api<DynamicObject>>| {
            Action::requeue(Duration::from_secs(1))
        };
        let controller = Controller::new_with(api.clone(), watcher::Config::default(), ar)
            .run(reconcile, error_policy, Arc::new(api.clone()))
            .for_each(|_| async {});
        let task = tokio::spawn(controller);
        api.create(&PostParams::default(), &warehouse("app")?)
            .await?;
        let observed = |wanted: i64| {
            let api = api.clone();
            async move {
                // kube's await_condition: a watch on `metadata.name=app` until the status says so.
                let seen = kube::runtime::wait::await_condition(
                    api,
                    "app",
                    move |o: Option<&DynamicObject>| {
                        o.is_some_and(|o| o.data["status"]["observedGeneration"] == wanted)
                    },
                );
                tokio::time::timeout(WAIT, seen).await.with_context(|| {
                    format!("the controller observes generation {wanted} within {WAIT:?}")
                })??;
                anyhow::Ok(())
            }
        };
        observed(1).await?;
        let patch = json!({"spec": {"interval": "9m"}});
        api.patch("app", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        observed(2).await?;
        task.abort();
        Ok(())
    }

    /// The next event from the watcher task matching `wanted`, within [`WAIT`].
    async fn next_event(
        rx: &mut mpsc::UnboundedReceiver<Result<watcher::Event<DynamicObject>, String>>,
        what: &str,
        wanted: impl Fn(&Result<watcher::Event<DynamicObject>, String>) -> bool,
    ) -> Result<Vec<String>> {
        let mut seen = Vec::new();
        let found = tokio::time::timeout(WAIT, async {
            while let Some(event) = rx.recv().await {
                seen.push(describe(&event));
                if wanted(&event) {
                    return true;
                }
            }
            false
        })
        .await;
        match found {
            Ok(true) => Ok(seen),
            _ => bail!("timed out after {WAIT:?} waiting for {what}; saw {seen:?}"),
        }
    }

    fn describe(event: &Result<watcher::Event<DynamicObject>, String>) -> String {
        let name = |o: &DynamicObject| o.metadata.name.clone().unwrap_or_default();
        match event {
            Ok(watcher::Event::Apply(o)) => format!("Apply({})", name(o)),
            Ok(watcher::Event::Delete(o)) => format!("Delete({})", name(o)),
            Ok(watcher::Event::Init) => "Init".into(),
            Ok(watcher::Event::InitApply(o)) => format!("InitApply({})", name(o)),
            Ok(watcher::Event::InitDone) => "InitDone".into(),
            Err(err) => format!("Err({err})"),
        }
    }

    fn is(event: &Result<watcher::Event<DynamicObject>, String>, text: &str) -> bool {
        describe(event) == text
    }

    async fn watch_survives_compaction(config: watcher::Config) -> Result<()> {
        // No bookmarks during the test: the watcher's last revision stays behind the
        // unrelated write below, so its resumed watch must get 410 Gone and relist.
        let options = dray_e2e::kube_api::KubeApiOptions {
            bookmark_interval: Duration::from_secs(3600),
        };
        let f = with_crds_options(options).await?;
        let client = f.api.client(&f.api.admin_token()).await?;
        let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(client, "demo");
        let api = warehouses(f.api.client(&f.api.admin_token()).await?);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stream_api = api.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(stream_api, config).boxed();
            while let Some(event) = stream.next().await {
                if tx.send(event.map_err(|err| err.to_string())).is_err() {
                    break;
                }
            }
        });
        next_event(&mut rx, "the initial list", |e| is(e, "InitDone")).await?;
        api.create(&PostParams::default(), &warehouse("a")?).await?;
        next_event(&mut rx, "a added", |e| is(e, "Apply(a)")).await?;
        let patch = json!({"spec": {"interval": "3m"}});
        api.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let seen = next_event(
            &mut rx,
            "a modified",
            |e| matches!(e, Ok(watcher::Event::Apply(o)) if o.data["spec"]["interval"] == "3m"),
        )
        .await?;
        assert_eq!(seen, vec!["Apply(a)"], "in order, nothing in between");
        api.delete("a", &DeleteParams::default()).await?;
        next_event(&mut rx, "a deleted", |e| is(e, "Delete(a)")).await?;

        // History forgotten and streams cut: the watcher must relist and carry on.
        let unrelated =
            serde_json::from_value(json!({"metadata": {"name": "unrelated"}, "data": {"k": "v"}}))?;
        config_maps
            .create(&PostParams::default(), &unrelated)
            .await?;
        f.api.compact();
        f.api.break_watches();
        api.create(&PostParams::default(), &warehouse("b")?).await?;
        let seen = next_event(&mut rx, "b after the relist", |e| {
            is(e, "InitApply(b)") || is(e, "Apply(b)")
        })
        .await?;
        assert!(
            seen.contains(&"Init".to_owned()),
            "relisted after 410: {seen:?}"
        );
        assert!(seen.contains(&"InitApply(b)".to_owned()), "{seen:?}");
        let watches = f
            .api
            .requests()
            .into_iter()
            .filter(|(verb, path, _)| verb == "watch" && path.ends_with("/warehouses"))
            .count();
        assert!(watches >= 2, "the watch was resumed after the break");
        api.delete("b", &DeleteParams::default()).await?;
        next_event(&mut rx, "b deleted", |e| is(e, "Delete(b)")).await?;
        task.abort();
        Ok(())
    }

    #[tokio::test]
    async fn runtime_watcher_sees_changes_in_order_and_relists_after_compaction() -> Result<()> {
        watch_survives_compaction(watcher::Config::default()).await
    }

    #[tokio::test]
    async fn runtime_watcher_with_streaming_lists() -> Result<()> {
        watch_survives_compaction(watcher::Config::default().streaming_lists()).await
    }

    #[tokio::test]
    async fn a_watch_from_a_compacted_revision_gets_410_expired() -> Result<()> {
        let f = with_crds().await?;
        let client = f.api.client(&f.api.admin_token()).await?;
        let api = warehouses(client.clone());
        api.create(&PostParams::default(), &warehouse("a")?).await?;
        let old = f.api.revision();
        api.delete("a", &DeleteParams::default()).await?;
        f.api.compact();
        let now = f.api.revision();
        let request = http_request(&format!(
            "/apis/dray.dev/v1alpha1/namespaces/demo/warehouses?watch=true&resourceVersion={}",
            old - 1
        ))?;
        let text = tokio::time::timeout(WAIT, client.request_text(request))
            .await
            .context("the 410 watch answers at once")??;
        let line: serde_json::Value = serde_json::from_str(text.trim())?;
        assert_eq!(line["type"], "ERROR");
        assert_eq!(line["object"]["code"], 410);
        assert_eq!(line["object"]["reason"], "Expired");
        assert_eq!(
            line["object"]["message"],
            format!("too old resource version: {} ({now})", old - 1)
        );
        Ok(())
    }

    #[tokio::test]
    async fn watches_get_bookmarks() -> Result<()> {
        let f = with_crds().await?;
        let client = f.api.client(&f.api.admin_token()).await?;
        let api = warehouses(client.clone());
        api.create(&PostParams::default(), &warehouse("a")?).await?;
        let request = http_request(
            "/apis/dray.dev/v1alpha1/namespaces/demo/warehouses?watch=true&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=30",
        )?;
        let mut events = client
            .request_events::<DynamicObject>(request)
            .await?
            .boxed();
        let first = tokio::time::timeout(WAIT, events.next())
            .await
            .context("the initial event")?
            .context("stream open")??;
        assert!(
            matches!(first, kube::core::WatchEvent::Added(ref o) if o.metadata.name.as_deref() == Some("a")),
            "{first:?}"
        );
        let bookmark = tokio::time::timeout(WAIT, events.next())
            .await
            .context("a bookmark within the interval")?
            .context("stream open")??;
        let kube::core::WatchEvent::Bookmark(bookmark) = bookmark else {
            bail!("expected a bookmark, got {bookmark:?}")
        };
        assert_eq!(
            bookmark.metadata.resource_version,
            f.api.revision().to_string()
        );
        Ok(())
    }

    fn http_request(path: &str) -> Result<http::Request<Vec<u8>>> {
        Ok(http::Request::get(path).body(Vec::new())?)
    }

    #[tokio::test]
    async fn lease_manager_acquires_waits_and_takes_over() -> Result<()> {
        use kube_lease_manager::LeaseManagerBuilder;
        let f = with_crds().await?;
        let client = f.api.client(&f.api.admin_token()).await?;
        let build = |identity: &str| {
            LeaseManagerBuilder::new(client.clone(), "dray-controller")
                .with_namespace("default")
                .with_identity(identity)
                .with_duration(3)
                .with_grace(1)
                .build()
        };
        let first = build("first").await?;
        let acquired = tokio::time::timeout(WAIT, first.changed())
            .await
            .context("the first manager acquires")??;
        assert!(acquired);
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(client.clone(), "default");
        let holder = |lease: k8s_openapi::api::coordination::v1::Lease| {
            lease.spec.and_then(|s| s.holder_identity)
        };
        assert_eq!(
            holder(leases.get("dray-controller").await?),
            Some("first".into())
        );

        let second = std::sync::Arc::new(build("second").await?);
        let waiting = {
            let second = second.clone();
            tokio::spawn(async move { second.changed().await })
        };
        // The lease is the first's, so the second is still waiting for it.
        assert!(
            !waiting.is_finished(),
            "the second waits while the first holds the lease"
        );
        first.release().await?;
        let took = tokio::time::timeout(WAIT, waiting)
            .await
            .context("the second takes over after release")???;
        assert!(took);
        assert_eq!(
            holder(leases.get("dray-controller").await?),
            Some("second".into())
        );

        // The second stops renewing (dropped): a third takes over once the lease expires.
        drop(second);
        let third = build("third").await?;
        let took = tokio::time::timeout(WAIT, third.changed())
            .await
            .context("the third takes over after expiry")??;
        assert!(took);
        assert_eq!(
            holder(leases.get("dray-controller").await?),
            Some("third".into())
        );
        Ok(())
    }
}

mod auth {
    use anyhow::Result;
    use serde_json::{Value, json};

    use super::{kubectl_fails, kubectl_ok, with_crds, write};

    const RBAC: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: promoter
  namespace: demo
rules:
  - apiGroups: [dray.dev]
    resources: [stages]
    verbs: [get, list, promote]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: ann-promotes
  namespace: demo
subjects:
  - kind: User
    name: ann
    apiGroup: rbac.authorization.k8s.io
roleRef:
  kind: Role
  name: promoter
  apiGroup: rbac.authorization.k8s.io
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: dray-reviews
subjects:
  - kind: ServiceAccount
    name: dray
    namespace: dray-system
roleRef:
  kind: ClusterRole
  name: system:auth-delegator
  apiGroup: rbac.authorization.k8s.io
";

    async fn post(client: &kube::Client, path: &str, body: Value) -> Result<Value> {
        let request = http::Request::post(path)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body)?)?;
        Ok(client.request::<Value>(request).await?)
    }

    fn access_review(user: &str, verb: &str) -> Value {
        json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": ["system:authenticated"],
                "resourceAttributes": {"namespace": "demo", "verb": verb, "group": "dray.dev", "resource": "stages", "name": "prod"},
            },
        })
    }

    #[tokio::test]
    async fn rbac_subject_access_and_token_reviews() -> Result<()> {
        let f = with_crds().await?;
        let rbac = write(&f, "rbac.yaml", RBAC)?;
        kubectl_ok(&f.api, &f.admin, &["apply", "-f", &rbac])?;
        f.api.add_token("ann-token", "ann", &[]);
        f.api.add_token("bob-token", "bob", &["dev"]);
        f.api
            .add_service_account_token("dray-sa-token", "dray-system", "dray");
        let dray = f.api.client("dray-sa-token").await?;

        let sar = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
        let allowed = post(&dray, sar, access_review("ann", "promote")).await?;
        assert_eq!(allowed["status"]["allowed"], true, "{allowed}");
        assert_eq!(
            allowed["status"]["reason"],
            "RBAC: allowed by RoleBinding \"ann-promotes/demo\" of Role \"promoter\" to User \"ann\""
        );
        let denied = post(&dray, sar, access_review("bob", "promote")).await?;
        assert_eq!(denied["status"]["allowed"], false, "{denied}");
        let not_this_verb = post(&dray, sar, access_review("ann", "delete")).await?;
        assert_eq!(not_this_verb["status"]["allowed"], false);

        let tr = "/apis/authentication.k8s.io/v1/tokenreviews";
        let review = |token: &str| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
        let known = post(&dray, tr, review("ann-token")).await?;
        assert_eq!(known["status"]["authenticated"], true);
        assert_eq!(known["status"]["user"]["username"], "ann");
        assert_eq!(
            known["status"]["user"]["groups"],
            json!(["system:authenticated"])
        );
        let sa = post(&dray, tr, review("dray-sa-token")).await?;
        assert_eq!(
            sa["status"]["user"]["username"],
            "system:serviceaccount:dray-system:dray"
        );
        assert_eq!(
            sa["status"]["user"]["groups"],
            json!([
                "system:serviceaccounts",
                "system:serviceaccounts:dray-system",
                "system:authenticated"
            ])
        );
        let unknown = post(&dray, tr, review("nobody")).await?;
        assert_ne!(unknown["status"]["authenticated"], true, "{unknown}");

        // ann may not review tokens: 403 worded as the real server.
        let ann = f.api.client("ann-token").await?;
        let err = post(&ann, tr, review("x"))
            .await
            .expect_err("ann cannot create tokenreviews");
        let text = format!("{err:#}");
        assert!(text.contains(r#"tokenreviews.authentication.k8s.io is forbidden: User "ann" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope"#), "{text}");

        // kubectl as bob: 403 with the RBAC message; an unknown token: 401.
        let bob = f.dir.path().join("bob.kubeconfig");
        f.api.write_kubeconfig(&bob, "bob-token")?;
        let out = kubectl_fails(&f.api, &bob, &["-n", "demo", "delete", "stage", "prod"])?;
        assert!(out.contains(r#"Error from server (Forbidden): stages.dray.dev "prod" is forbidden: User "bob" cannot delete resource "stages" in API group "dray.dev" in the namespace "demo""#), "{out}");
        let stranger = f.dir.path().join("stranger.kubeconfig");
        f.api.write_kubeconfig(&stranger, "no-such-token")?;
        let out = kubectl_fails(&f.api, &stranger, &["get", "namespaces"])?;
        assert!(
            out.contains("Unauthorized") || out.contains("must be logged in"),
            "{out}"
        );
        let ann_config = f.dir.path().join("ann.kubeconfig");
        f.api.write_kubeconfig(&ann_config, "ann-token")?;
        let out = kubectl_ok(
            &f.api,
            &ann_config,
            &["-n", "demo", "auth", "can-i", "promote", "stages"],
        )?;
        assert_eq!(out.lines().next(), Some("yes"), "{out}");
        let out = kubectl_fails(
            &f.api,
            &bob,
            &["-n", "demo", "auth", "can-i", "promote", "stages"],
        )?;
        assert_eq!(out.lines().next(), Some("no"), "{out}");
        Ok(())
    }
}

mod admission {
    use std::sync::{Arc, Mutex};

    use anyhow::{Context, Result};
    use axum::Json;
    use axum::extract::State;
    use base64::Engine;
    use dray_e2e::kube_api::tls::{CertAuthority, TlsServer};
    use serde_json::{Value, json};

    use super::{kubectl_fails, kubectl_ok, with_crds, write};

    type Seen = Arc<Mutex<Vec<Value>>>;

    /// The webhook under test: denies creating Promotions, allows everything else.
    async fn validate(State(seen): State<Seen>, Json(review): Json<Value>) -> Json<Value> {
        if let Ok(mut seen) = seen.lock() {
            seen.push(review.clone());
        }
        let request = &review["request"];
        let deny = request["kind"]["kind"] == "Promotion" && request["operation"] == "CREATE";
        let mut response = json!({"uid": request["uid"], "allowed": !deny});
        if deny {
            response["status"] = json!({"code": 403, "reason": "Forbidden", "message": "Promotions come through the promote path: run `dray promote`"});
        }
        Json(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
        )
    }

    const PROMOTION: &str = "apiVersion: dray.dev/v1alpha1
kind: Promotion
metadata:
  name: sneaky
  namespace: demo
spec:
  stage: prod
  freight: abc123
";

    #[tokio::test]
    async fn a_validating_webhook_denies_promotion_creates() -> Result<()> {
        let f = with_crds().await?;
        let ca = CertAuthority::new("webhook-ca")?;
        let cert = ca.issue(&["dray-webhook.dray-system.svc"])?;
        let seen: Seen = Arc::default();
        let app = axum::Router::new()
            .route("/validate", axum::routing::post(validate))
            .with_state(seen.clone());
        let webhook = TlsServer::spawn("test-webhook", app, cert, None)?;
        f.api
            .set_service_endpoint("dray-system", "dray-webhook", webhook.addr());
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca.ca_pem());
        let configuration = format!(
            "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: dray
webhooks:
  - name: promotions.dray.dev
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    timeoutSeconds: 5
    clientConfig:
      service: {{namespace: dray-system, name: dray-webhook, path: /validate}}
      caBundle: {ca_bundle}
    rules:
      - apiGroups: [dray.dev]
        apiVersions: ['*']
        operations: [CREATE, UPDATE]
        resources: [promotions, stages/status]
"
        );
        let file = write(&f, "webhook.yaml", &configuration)?;
        kubectl_ok(&f.api, &f.admin, &["apply", "-f", &file])?;

        let promotion = write(&f, "promotion.yaml", PROMOTION)?;
        let out = kubectl_fails(&f.api, &f.admin, &["create", "-f", &promotion])?;
        assert!(
            out.contains("admission webhook \"promotions.dray.dev\" denied the request: Promotions come through the promote path: run `dray promote`"),
            "{out}"
        );
        assert!(
            f.api
                .get("/apis/dray.dev/v1alpha1/namespaces/demo/promotions/sneaky")
                .is_none()
        );

        // Other kinds pass without a call; a matching status write is reviewed and allowed.
        let project = super::workspace_root()
            .join("examples/quickstart/project/stages.yaml")
            .display()
            .to_string();
        kubectl_ok(&f.api, &f.admin, &["apply", "-f", &project])?;
        let client = f.api.client(&f.api.admin_token()).await?;
        let gvk = kube::api::GroupVersionKind::gvk("dray.dev", "v1alpha1", "Stage");
        let stages: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
            client,
            "demo",
            &kube::api::ApiResource::from_gvk_with_plural(&gvk, "stages"),
        );
        let status = json!({"status": {"branch": {"name": "stage/dev", "commit": "9f2c", "repoURL": "http://127.0.0.1/config.git"}}});
        stages
            .patch_status(
                "dev",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&status),
            )
            .await?;

        let calls = f.api.admission_calls();
        assert_eq!(calls.len(), 2, "{calls:#?}");
        let review = &calls[0]["review"];
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(review["kind"], "AdmissionReview");
        let request = &review["request"];
        assert!(request["uid"].as_str().is_some_and(|uid| !uid.is_empty()));
        assert_eq!(
            request["kind"],
            json!({"group": "dray.dev", "version": "v1alpha1", "kind": "Promotion"})
        );
        assert_eq!(
            request["resource"],
            json!({"group": "dray.dev", "version": "v1alpha1", "resource": "promotions"})
        );
        assert_eq!(request["requestKind"], request["kind"]);
        assert_eq!(
            (request["name"].as_str(), request["namespace"].as_str()),
            (Some("sneaky"), Some("demo"))
        );
        assert_eq!(request["operation"], "CREATE");
        assert_eq!(request["userInfo"]["username"], "kubernetes-admin");
        assert!(
            request["userInfo"]["groups"]
                .as_array()
                .context("groups")?
                .contains(&json!("system:masters"))
        );
        assert_eq!(request["object"]["spec"]["stage"], "prod");
        assert!(request["oldObject"].is_null());
        assert_eq!(request["dryRun"], false);
        assert_eq!(request["options"]["kind"], "CreateOptions");
        let status_review = &calls[1]["review"]["request"];
        assert_eq!(status_review["subResource"], "status");
        assert_eq!(status_review["operation"], "UPDATE");
        assert_eq!(status_review["oldObject"]["metadata"]["name"], "dev");
        assert_eq!(
            status_review["object"]["status"]["branch"]["commit"],
            "9f2c"
        );
        let received = seen.lock().map(|seen| seen.len()).unwrap_or_default();
        assert_eq!(received, 2, "the webhook itself got both reviews");

        // A server-side dry run is reviewed too (the webhook has no side effects), marked so.
        let out = kubectl_fails(
            &f.api,
            &f.admin,
            &["create", "--dry-run=server", "-f", &promotion],
        )?;
        assert!(out.contains("denied the request"), "{out}");
        let calls = f.api.admission_calls();
        let last = calls.last().context("a third call")?;
        assert_eq!(last["review"]["request"]["dryRun"], true);
        Ok(())
    }
}

#[tokio::test]
async fn kubectl_typed_creates_and_crd_deletion() -> Result<()> {
    let f = with_crds().await?;
    kubectl_ok(
        &f.api,
        &f.admin,
        &[
            "-n",
            "demo",
            "create",
            "secret",
            "generic",
            "git",
            "--from-literal=password=s3cret",
        ],
    )?;
    let secret = f
        .api
        .get("/api/v1/namespaces/demo/secrets/git")
        .context("the secret is stored")?;
    assert_eq!(secret["data"]["password"], "czNjcmV0");
    assert_eq!(secret["type"], "Opaque");
    kubectl_ok(
        &f.api,
        &f.admin,
        &[
            "-n",
            "demo",
            "create",
            "configmap",
            "settings",
            "--from-literal=mode=fast",
        ],
    )?;
    assert_eq!(
        f.api
            .get("/api/v1/namespaces/demo/configmaps/settings")
            .context("stored")?["data"]["mode"],
        "fast"
    );
    kubectl_ok(
        &f.api,
        &f.admin,
        &[
            "-n",
            "demo",
            "create",
            "role",
            "reader",
            "--verb=get,list",
            "--resource=stages.dray.dev",
        ],
    )?;
    let role = f
        .api
        .get("/apis/rbac.authorization.k8s.io/v1/namespaces/demo/roles/reader")
        .context("stored")?;
    assert_eq!(
        role["rules"][0]["apiGroups"],
        serde_json::json!(["dray.dev"])
    );
    kubectl_ok(
        &f.api,
        &f.admin,
        &[
            "-n",
            "demo",
            "create",
            "rolebinding",
            "ann-reads",
            "--role=reader",
            "--user=ann",
        ],
    )?;
    let binding = f
        .api
        .get("/apis/rbac.authorization.k8s.io/v1/namespaces/demo/rolebindings/ann-reads")
        .context("stored")?;
    assert_eq!(binding["subjects"][0]["name"], "ann");
    assert_eq!(binding["roleRef"]["name"], "reader");
    // kubectl apply of a built-in speaks strategic merge patch the second time.
    let config_map = |mode: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: demo\ndata:\n  mode: {mode}\n  keep: yes-please\n"
        )
    };
    let cm = write(&f, "cm.yaml", &config_map("slow"))?;
    kubectl_ok(&f.api, &f.admin, &["apply", "-f", &cm])?;
    let cm = write(&f, "cm.yaml", &config_map("fast"))?;
    let out = kubectl_ok(&f.api, &f.admin, &["apply", "-f", &cm])?;
    assert!(out.contains("configmap/applied configured"), "{out}");
    let applied = f
        .api
        .get("/api/v1/namespaces/demo/configmaps/applied")
        .context("stored")?;
    assert_eq!(
        (
            applied["data"]["mode"].as_str(),
            applied["data"]["keep"].as_str()
        ),
        (Some("fast"), Some("yes-please"))
    );
    let patched = f
        .api
        .requests()
        .into_iter()
        .any(|(verb, path, _)| verb == "patch" && path.ends_with("/configmaps/applied"));
    assert!(patched, "the second apply patched");
    kubectl_ok(
        &f.api,
        &f.admin,
        &["-n", "demo", "create", "serviceaccount", "dray"],
    )?;
    assert!(
        f.api
            .get("/api/v1/namespaces/demo/serviceaccounts/dray")
            .is_some()
    );

    let file = write(&f, "warehouse.yaml", WAREHOUSE)?;
    kubectl_ok(&f.api, &f.admin, &["apply", "-f", &file])?;
    kubectl_ok(&f.api, &f.admin, &["delete", "crd", "warehouses.dray.dev"])?;
    assert!(
        f.api
            .get("/apis/dray.dev/v1alpha1/namespaces/demo/warehouses/app")
            .is_none()
    );
    let out = kubectl_fails(&f.api, &f.admin, &["get", "warehouses", "-n", "demo"])?;
    // With a warm discovery cache kubectl still knows the type and the list is a 404.
    assert!(
        out.contains("the server doesn't have a resource type \"warehouses\"")
            || out.contains("the server could not find the requested resource"),
        "{out}"
    );
    Ok(())
}

#[tokio::test]
async fn kubectl_get_watch_prints_new_objects() -> Result<()> {
    use std::io::BufRead;
    let f = with_crds().await?;
    let first = write(
        &f,
        "first.yaml",
        &WAREHOUSE.replace("name: app", "name: first"),
    )?;
    kubectl_ok(&f.api, &f.admin, &["apply", "-f", &first])?;
    let mut command = f.api.kubectl(&f.admin);
    command
        .args([
            "get",
            "warehouses",
            "-n",
            "demo",
            "-w",
            "--request-timeout=60s",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().context("Failed to start kubectl get -w")?;
    let stdout = child.stdout.take().context("kubectl's stdout")?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut lines = Vec::new();
    let mut wait_for = |name: &str| loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.starts_with(&format!("{name} ")) => break true,
            Ok(line) => lines.push(line),
            Err(_) => break false,
        }
    };
    // `first` comes from the list; `app`, created after it was printed, from the watch.
    let listed = wait_for("first");
    let file = write(&f, "warehouse.yaml", WAREHOUSE)?;
    kubectl_ok(&f.api, &f.admin, &["apply", "-f", &file])?;
    let found = listed && wait_for("app");
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
    assert!(
        found,
        "kubectl get -w printed `app` within 30s; printed {lines:?}"
    );
    Ok(())
}

mod admission_failures {
    use anyhow::Result;

    use super::{kubectl_fails, kubectl_ok, with_crds, write};

    fn configuration(policy: &str, url: &str) -> String {
        let lower = policy.to_lowercase();
        format!(
            "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: unreachable-{lower}
webhooks:
  - name: down.dray.dev
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: {policy}
    timeoutSeconds: 2
    clientConfig:
      url: {url}
    rules:
      - apiGroups: ['']
        apiVersions: [v1]
        operations: ['*']
        resources: [configmaps]
"
        )
    }

    #[tokio::test]
    async fn failure_policy_fail_refuses_and_ignore_admits() -> Result<()> {
        let f = with_crds().await?;
        // A port nothing listens on: bind, note it, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let url = format!("https://127.0.0.1:{port}/validate");
        let ignore = write(&f, "ignore.yaml", &configuration("Ignore", &url))?;
        kubectl_ok(&f.api, &f.admin, &["apply", "-f", &ignore])?;
        kubectl_ok(
            &f.api,
            &f.admin,
            &[
                "-n",
                "demo",
                "create",
                "configmap",
                "one",
                "--from-literal=a=b",
            ],
        )?;
        let fail = write(&f, "fail.yaml", &configuration("Fail", &url))?;
        kubectl_ok(&f.api, &f.admin, &["apply", "-f", &fail])?;
        let out = kubectl_fails(
            &f.api,
            &f.admin,
            &[
                "-n",
                "demo",
                "create",
                "configmap",
                "two",
                "--from-literal=a=b",
            ],
        )?;
        assert!(
            out.contains("Internal error occurred: failed calling webhook \"down.dray.dev\""),
            "{out}"
        );
        assert!(
            f.api
                .get("/api/v1/namespaces/demo/configmaps/two")
                .is_none()
        );
        assert_eq!(
            f.api.admission_calls().len(),
            3,
            "each matching webhook was tried"
        );
        Ok(())
    }
}
