//! The install: the Helm chart in `deploy/helm/dray` and its plain rendering in
//! `deploy/kubernetes/`.
//!
//! The chart is rendered with the real `helm` v4 (built from `helm.sh/helm/v4` by
//! `e2e/tools/build.sh`, version in `e2e/tools/versions.env`): its template engine, values
//! schema, `required`/`fail` checks and `helm lint`. What is checked is what an
//! operator relies on: every document parses; the Deployment runs `dray controller` and
//! `dray serve --kubernetes` with the interface's flags; RBAC grants the verbs Dray and its
//! users need and no more; the admission webhook fails closed on Promotions and status;
//! the committed plain manifests are a fresh render and hold no key. No cluster is
//! contacted: applying the manifests to an API server is another test's job.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use dray_e2e::workspace_root;
use serde_json::Value;

const RELEASE: &str = "dray";
const NAMESPACE: &str = "dray";

/// The real `helm` (v4) the tests pin, built from its Go module (e2e/tools/build.sh). A
/// test that skipped would pass with the chart broken, so a missing helm fails the test.
fn helm() -> PathBuf {
    dray_e2e::tools::helm().expect("the pinned helm builds (e2e/tools/build.sh helm)")
}

fn chart() -> PathBuf {
    workspace_root().join("deploy/helm/dray")
}

/// `helm template dray deploy/helm/dray --namespace dray ARGS…`: (success, stdout, stderr).
fn helm_template(args: &[&str]) -> Result<(bool, String, String)> {
    let out = Command::new(helm())
        .arg("template")
        .arg(RELEASE)
        .arg(chart())
        .args(["--namespace", NAMESPACE])
        .args(args)
        .output()
        .context("cannot run helm")?;
    Ok((
        out.status.success(),
        String::from_utf8(out.stdout)?,
        String::from_utf8(out.stderr)?,
    ))
}

/// The chart's objects rendered with `--set` values (none: the defaults).
fn render(sets: &[&str]) -> Result<Vec<Value>> {
    let mut args = Vec::new();
    for set in sets {
        args.extend(["--set", set]);
    }
    let (ok, stdout, stderr) = helm_template(&args)?;
    ensure!(ok, "helm template {sets:?} failed: {stderr}");
    documents(&stdout, "the rendered chart")
}

/// Every YAML document of a multi-document stream, each a mapping with apiVersion, kind
/// and metadata.name (empty documents, e.g. a file's header comment, are skipped).
fn documents(text: &str, what: &str) -> Result<Vec<Value>> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut flush = |current: &mut String| -> Result<()> {
        let doc: Value = serde_yaml_ng::from_str(current)
            .with_context(|| format!("a document of {what} is not YAML:\n{current}"))?;
        current.clear();
        if doc.is_null() {
            return Ok(());
        }
        for field in ["/apiVersion", "/kind", "/metadata/name"] {
            ensure!(
                doc.pointer(field).and_then(Value::as_str).is_some(),
                "a document of {what} has no {field}: {doc}"
            );
        }
        docs.push(doc);
        Ok(())
    };
    for line in text.lines() {
        if line.trim_end() == "---" {
            flush(&mut current)?;
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    flush(&mut current)?;
    Ok(docs)
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

fn name(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

fn kinds(docs: &[Value]) -> Vec<String> {
    let mut kinds: Vec<String> = docs.iter().map(|d| kind(d).to_string()).collect();
    kinds.sort();
    kinds
}

/// The one object of `kind` named `name`.
fn object<'a>(docs: &'a [Value], of_kind: &str, named: &str) -> Result<&'a Value> {
    let mut found = docs
        .iter()
        .filter(|d| kind(d) == of_kind && name(d) == named);
    let Some(doc) = found.next() else {
        bail!(
            "no {of_kind} `{named}` in the render; kinds: {:?}",
            kinds(docs)
        );
    };
    ensure!(found.next().is_none(), "two {of_kind} `{named}`");
    Ok(doc)
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn container<'a>(deployment: &'a Value, named: &str) -> Result<&'a Value> {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == named))
        .with_context(|| format!("the Deployment has no container `{named}`"))
}

/// Whether a role's rules allow `verb` on `resource` (maybe `plural/subresource`) in `group`,
/// with RBAC's `*` wildcards.
fn grants(role: &Value, group: &str, resource: &str, verb: &str) -> bool {
    let has = |list: &Value, want: &str| strings(list).iter().any(|s| s == want || s == "*");
    role["rules"].as_array().is_some_and(|rules| {
        rules.iter().any(|rule| {
            has(&rule["apiGroups"], group)
                && has(&rule["resources"], resource)
                && has(&rule["verbs"], verb)
        })
    })
}

fn assert_grants(role: &Value, group: &str, resource: &str, verbs: &[&str]) {
    for verb in verbs {
        assert!(
            grants(role, group, resource, verb),
            "{} `{}` does not grant `{verb}` on `{resource}` in `{group}`: {}",
            kind(role),
            name(role),
            role["rules"]
        );
    }
}

fn assert_denies(role: &Value, group: &str, resource: &str, verbs: &[&str]) {
    for verb in verbs {
        assert!(
            !grants(role, group, resource, verb),
            "{} `{}` grants `{verb}` on `{resource}` in `{group}`, which it must not",
            kind(role),
            name(role)
        );
    }
}

/// The plural names of the CRDs in the top-level `crds/`.
fn crd_plurals() -> Result<Vec<String>> {
    let mut plurals = Vec::new();
    for (path, text) in yaml_files(&workspace_root().join("crds"))? {
        for crd in documents(&text, &path.display().to_string())? {
            let plural = crd["spec"]["names"]["plural"]
                .as_str()
                .with_context(|| format!("{} has no spec.names.plural", path.display()))?;
            plurals.push(plural.to_string());
        }
    }
    ensure!(!plurals.is_empty(), "no CRDs in crds/");
    Ok(plurals)
}

/// The `*.yaml` files of a directory (not below it), by name.
fn yaml_files(dir: &Path) -> Result<Vec<(PathBuf, String)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            let text = std::fs::read_to_string(&path)?;
            files.push((path, text));
        }
    }
    files.sort();
    Ok(files)
}

fn file_names(files: &[(PathBuf, String)]) -> Vec<String> {
    files
        .iter()
        .filter_map(|(p, _)| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect()
}

fn decode(value: &Value, what: &str) -> Result<Vec<u8>> {
    let text = value
        .as_str()
        .with_context(|| format!("{what} is missing"))?;
    BASE64
        .decode(text)
        .with_context(|| format!("{what} is not base64"))
}

#[test]
fn default_values_render_every_object_and_generate_the_webhook_certificate() -> Result<()> {
    let docs = render(&[])?;
    let mut expected = vec![
        "ClusterRole",
        "ClusterRole",
        "ClusterRole",
        "ClusterRole",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Secret",
        "Secret",
        "Service",
        "Service",
        "ServiceAccount",
        "ValidatingWebhookConfiguration",
    ];
    expected.sort();
    assert_eq!(kinds(&docs), expected);
    for doc in &docs {
        let cluster_scoped = [
            "ClusterRole",
            "ClusterRoleBinding",
            "ValidatingWebhookConfiguration",
        ]
        .contains(&kind(doc));
        let namespace = doc["metadata"]["namespace"].as_str();
        if cluster_scoped {
            assert_eq!(namespace, None, "{} `{}`", kind(doc), name(doc));
        } else {
            assert_eq!(namespace, Some(NAMESPACE), "{} `{}`", kind(doc), name(doc));
        }
    }

    // The secret key: base64 of 32 bytes, kept when Dray is uninstalled.
    let key = object(&docs, "Secret", "dray-secret-key")?;
    assert_eq!(
        key["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    let key = decode(&key["data"]["DRAY_SECRET_KEY"], "DRAY_SECRET_KEY")?;
    assert_eq!(
        BASE64.decode(&key)?.len(),
        32,
        "DRAY_SECRET_KEY is not base64 of 32 bytes"
    );

    // The generated certificate: the webhook trusts the CA the serving certificate is signed
    // with, and the certificate names the webhook Service.
    let tls = object(&docs, "Secret", "dray-webhook-tls")?;
    assert_eq!(tls["type"], "kubernetes.io/tls");
    let webhook = object(&docs, "ValidatingWebhookConfiguration", "dray")?;
    let ca = decode(
        &webhook["webhooks"][0]["clientConfig"]["caBundle"],
        "the caBundle",
    )?;
    assert_eq!(ca, decode(&tls["data"]["ca.crt"], "ca.crt")?);
    assert!(String::from_utf8(ca)?.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(
        String::from_utf8(decode(&tls["data"]["tls.key"], "tls.key")?)?.contains("PRIVATE KEY")
    );
    let dir = tempfile::tempdir()?;
    std::fs::write(
        dir.path().join("ca.crt"),
        decode(&tls["data"]["ca.crt"], "ca.crt")?,
    )?;
    std::fs::write(
        dir.path().join("tls.crt"),
        decode(&tls["data"]["tls.crt"], "tls.crt")?,
    )?;
    let verify = Command::new("openssl")
        .args([
            "verify",
            "-purpose",
            "sslserver",
            "-CAfile",
            "ca.crt",
            "tls.crt",
        ])
        .current_dir(dir.path())
        .output()
        .context("cannot run openssl; install it (Debian: `apt-get install openssl`)")?;
    assert!(
        verify.status.success(),
        "the serving certificate is not signed by the caBundle: {}",
        String::from_utf8_lossy(&verify.stderr)
    );
    let sans = Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName", "-in", "tls.crt"])
        .current_dir(dir.path())
        .output()
        .context("cannot run openssl; install it (Debian: `apt-get install openssl`)")?;
    let sans = String::from_utf8(sans.stdout)?;
    for dns in [
        "dray-webhook.dray.svc",
        "dray-webhook.dray.svc.cluster.local",
    ] {
        assert!(sans.contains(&format!("DNS:{dns}")), "no {dns} in {sans}");
    }
    Ok(())
}

#[test]
fn ingress_and_cert_manager_render_an_ingress_an_issuer_and_a_certificate() -> Result<()> {
    let docs = render(&[
        "ingress.enabled=true",
        "ingress.host=dray.example.com",
        "ingress.className=nginx",
        "ingress.tls.enabled=true",
        "webhook.certManager.enabled=true",
    ])?;
    let ingress = object(&docs, "Ingress", "dray")?;
    assert_eq!(ingress["spec"]["ingressClassName"], "nginx");
    assert_eq!(ingress["spec"]["rules"][0]["host"], "dray.example.com");
    let backend = &ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"];
    assert_eq!(backend["name"], "dray");
    assert_eq!(backend["port"]["name"], "http");
    assert_eq!(ingress["spec"]["tls"][0]["secretName"], "dray-tls");
    assert_eq!(
        strings(&ingress["spec"]["tls"][0]["hosts"]),
        ["dray.example.com"]
    );

    // cert-manager issues the webhook's certificate into the Secret the server mounts and
    // injects its CA; the chart makes no certificate of its own.
    let issuer = object(&docs, "Issuer", "dray-selfsigned")?;
    assert!(issuer["spec"]["selfSigned"].is_object());
    let cert = object(&docs, "Certificate", "dray-webhook")?;
    assert_eq!(cert["apiVersion"], "cert-manager.io/v1");
    assert_eq!(cert["spec"]["secretName"], "dray-webhook-tls");
    assert_eq!(cert["spec"]["issuerRef"]["name"], "dray-selfsigned");
    assert!(strings(&cert["spec"]["dnsNames"]).contains(&"dray-webhook.dray.svc".to_string()));
    let webhook = object(&docs, "ValidatingWebhookConfiguration", "dray")?;
    assert_eq!(
        webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "dray/dray-webhook"
    );
    assert!(webhook["webhooks"][0]["clientConfig"]["caBundle"].is_null());
    assert!(
        docs.iter()
            .all(|d| !(kind(d) == "Secret" && d["type"] == "kubernetes.io/tls")),
        "with cert-manager the chart must not make the TLS Secret itself"
    );
    let deployment = object(&docs, "Deployment", "dray")?;
    let volumes = &deployment["spec"]["template"]["spec"]["volumes"];
    assert!(
        volumes
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["secret"]["secretName"] == "dray-webhook-tls"),
        "the server does not mount the Certificate's Secret: {volumes}"
    );
    Ok(())
}

#[test]
fn deployment_runs_the_controller_and_the_server_with_their_flags() -> Result<()> {
    let docs = render(&[])?;
    let deployment = object(&docs, "Deployment", "dray")?;
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    let names: Vec<&str> = pod["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["controller", "server"]);
    assert_eq!(pod["serviceAccountName"], "dray");

    let controller = container(deployment, "controller")?;
    assert_eq!(controller["image"], "ghcr.io/dray-dev/dray:0.1.0");
    assert_eq!(
        strings(&controller["args"]),
        [
            "controller",
            "--data-dir=/var/lib/dray",
            "--lease-namespace=$(POD_NAMESPACE)",
            "--lease-name=dray-controller",
            "--identity=$(POD_NAME)",
            "--health-listen=0.0.0.0:8081",
        ]
    );
    let server = container(deployment, "server")?;
    assert_eq!(
        strings(&server["args"]),
        [
            "serve",
            "--kubernetes",
            "--listen=0.0.0.0:7070",
            "--data-dir=/var/lib/dray",
            "--admission-listen=0.0.0.0:9443",
            "--admission-tls-dir=/etc/dray/admission-tls",
            "--service-account=system:serviceaccount:dray:dray",
        ]
    );

    // Probes reach the health endpoints on the ports the processes listen on.
    let port = |c: &Value, named: &str| {
        c["ports"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == named))
            .map(|p| p["containerPort"].clone())
    };
    assert_eq!(port(controller, "health"), Some(8081.into()));
    assert_eq!(controller["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(controller["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(controller["readinessProbe"]["httpGet"]["port"], "health");
    assert_eq!(port(server, "http"), Some(7070.into()));
    assert_eq!(port(server, "admission"), Some(9443.into()));
    assert_eq!(server["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(server["readinessProbe"]["httpGet"]["port"], "http");

    for c in [controller, server] {
        let env = |named: &str| {
            c["env"]
                .as_array()
                .and_then(|es| es.iter().find(|e| e["name"] == named))
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(
            env("POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.name"
        );
        assert_eq!(
            env("POD_NAMESPACE")["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.namespace"
        );
        let key = &env("DRAY_SECRET_KEY")["valueFrom"]["secretKeyRef"];
        assert_eq!(key["name"], "dray-secret-key");
        assert_eq!(key["key"], "DRAY_SECRET_KEY");
        let security = &c["securityContext"];
        assert_eq!(security["readOnlyRootFilesystem"], true);
        assert_eq!(security["allowPrivilegeEscalation"], false);
        assert_eq!(strings(&security["capabilities"]["drop"]), ["ALL"]);
        assert!(c["resources"]["requests"].is_object());
        // The writable paths are emptyDirs; the root file system is read-only.
        for path in ["/var/lib/dray", "/tmp"] {
            let mount = c["volumeMounts"]
                .as_array()
                .and_then(|ms| ms.iter().find(|m| m["mountPath"] == path))
                .with_context(|| format!("{} mounts nothing at {path}", c["name"]))?;
            let volume = pod["volumes"]
                .as_array()
                .and_then(|vs| vs.iter().find(|v| v["name"] == mount["name"]))
                .with_context(|| format!("no volume {}", mount["name"]))?;
            assert!(volume["emptyDir"].is_object(), "{path} is not an emptyDir");
        }
    }
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );

    // The admission certificate the server reads from --admission-tls-dir.
    let mount = server["volumeMounts"]
        .as_array()
        .and_then(|ms| {
            ms.iter()
                .find(|m| m["mountPath"] == "/etc/dray/admission-tls")
        })
        .context("the server does not mount /etc/dray/admission-tls")?;
    let volume = pod["volumes"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == mount["name"]))
        .context("no admission TLS volume")?;
    assert_eq!(volume["secret"]["secretName"], "dray-webhook-tls");
    let items: BTreeSet<_> = volume["secret"]["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["path"].as_str())
        .collect();
    assert_eq!(items, BTreeSet::from(["tls.crt", "tls.key"]));

    // Two replicas on different nodes when they can be; one survives a drain.
    assert!(
        pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
            .is_array()
    );
    assert_eq!(
        pod["topologySpreadConstraints"][0]["whenUnsatisfiable"],
        "ScheduleAnyway"
    );
    let pdb = object(&docs, "PodDisruptionBudget", "dray")?;
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in pdb["spec"]["selector"]["matchLabels"]
        .as_object()
        .context("the PDB selects nothing")?
    {
        assert_eq!(&labels[key], value, "the PDB does not select the pods");
    }

    // The Services reach the named ports of the server.
    let api = object(&docs, "Service", "dray")?;
    assert_eq!(api["spec"]["ports"][0]["port"], 7070);
    assert_eq!(api["spec"]["ports"][0]["targetPort"], "http");
    let hook = object(&docs, "Service", "dray-webhook")?;
    assert_eq!(hook["spec"]["ports"][0]["port"], 443);
    assert_eq!(hook["spec"]["ports"][0]["targetPort"], "admission");
    for svc in [api, hook] {
        for (key, value) in svc["spec"]["selector"]
            .as_object()
            .context("a Service selects nothing")?
        {
            assert_eq!(
                &labels[key],
                value,
                "Service `{}` misses the pods",
                name(svc)
            );
        }
    }
    Ok(())
}

#[test]
fn values_reach_the_processes() -> Result<()> {
    let docs = render(&[
        "image.tag=1.2.3",
        "replicas=1",
        "controller.namespaceSelector=team=shop",
        "oidc.issuer=https://idp.example.com",
        "oidc.clientId=dray",
        "oidc.redirectUrl=https://dray.example.com/auth/callback",
        "oidc.clientSecret.existingSecret=dray-oidc",
    ])?;
    let deployment = object(&docs, "Deployment", "dray")?;
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert!(
        docs.iter().all(|d| kind(d) != "PodDisruptionBudget"),
        "one replica with minAvailable 1 would block every node drain"
    );
    let controller = container(deployment, "controller")?;
    assert_eq!(controller["image"], "ghcr.io/dray-dev/dray:1.2.3");
    assert!(strings(&controller["args"]).contains(&"--namespace-selector=team=shop".into()));
    let server = container(deployment, "server")?;
    let args = strings(&server["args"]);
    for flag in [
        "--oidc-issuer=https://idp.example.com",
        "--oidc-client-id=dray",
        "--oidc-redirect-url=https://dray.example.com/auth/callback",
        "--oidc-client-secret-file=/etc/dray/oidc/client-secret",
    ] {
        assert!(args.contains(&flag.to_string()), "no {flag} in {args:?}");
    }
    let pod = &deployment["spec"]["template"]["spec"];
    assert!(
        pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["secret"]["secretName"] == "dray-oidc"),
        "the OIDC client secret is not mounted"
    );

    // The OIDC flags are the ones `dray serve` takes today (the Kubernetes-mode flags are
    // being built beside this chart, so they are left out here).
    let oidc: Vec<String> = args
        .iter()
        .filter(|a| a.starts_with("--oidc-"))
        .cloned()
        .collect();
    let parsed = <dray::cli::Cli as clap::Parser>::try_parse_from(
        ["dray".to_string(), "serve".to_string()]
            .into_iter()
            .chain(oidc),
    );
    if let Err(error) = parsed {
        panic!("dray serve refuses the chart's OIDC flags: {error}");
    }
    Ok(())
}

/// Dray's own command line takes the Deployment's arguments as they are.
#[test]
fn dray_parses_the_deployments_arguments() -> Result<()> {
    let docs = render(&[])?;
    let deployment = object(&docs, "Deployment", "dray")?;
    for named in ["controller", "server"] {
        let args = strings(&container(deployment, named)?["args"])
            .into_iter()
            .map(|a| {
                a.replace("$(POD_NAMESPACE)", NAMESPACE)
                    .replace("$(POD_NAME)", "dray-0")
            });
        let parsed = <dray::cli::Cli as clap::Parser>::try_parse_from(
            std::iter::once("dray".to_string()).chain(args),
        );
        if let Err(error) = parsed {
            panic!("dray refuses the {named} arguments: {error}");
        }
    }
    Ok(())
}

#[test]
fn rbac_grants_dray_and_its_users_the_verbs_they_need() -> Result<()> {
    let docs = render(&[])?;
    let dray = object(&docs, "ClusterRole", "dray")?;
    for plural in crd_plurals()? {
        assert_grants(
            dray,
            "dray.dev",
            &plural,
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        );
        assert_grants(
            dray,
            "dray.dev",
            &format!("{plural}/status"),
            &["get", "update", "patch"],
        );
        assert_grants(
            dray,
            "dray.dev",
            &format!("{plural}/finalizers"),
            &["update"],
        );
    }
    assert_grants(dray, "", "secrets", &["get", "list", "watch"]);
    assert_denies(
        dray,
        "",
        "secrets",
        &["create", "update", "patch", "delete"],
    );
    assert_grants(
        dray,
        "",
        "namespaces",
        &["get", "list", "watch", "create", "patch"],
    );
    assert_grants(dray, "", "events", &["create", "patch"]);
    assert_grants(
        dray,
        "argoproj.io",
        "applications",
        &["get", "list", "watch", "patch", "update"],
    );
    assert_grants(
        dray,
        "argoproj.io",
        "appprojects",
        &["get", "list", "watch"],
    );
    assert_denies(dray, "argoproj.io", "appprojects", &["patch", "update"]);
    assert_grants(dray, "authentication.k8s.io", "tokenreviews", &["create"]);
    assert_grants(
        dray,
        "authorization.k8s.io",
        "subjectaccessreviews",
        &["create"],
    );
    let binding = object(&docs, "ClusterRoleBinding", "dray")?;
    assert_eq!(binding["roleRef"]["name"], "dray");
    assert_eq!(binding["subjects"][0]["kind"], "ServiceAccount");
    assert_eq!(binding["subjects"][0]["name"], "dray");
    assert_eq!(binding["subjects"][0]["namespace"], NAMESPACE);

    // Leader election, in the release namespace only.
    let lease = object(&docs, "Role", "dray-leader-election")?;
    assert_eq!(lease["metadata"]["namespace"], NAMESPACE);
    assert_grants(
        lease,
        "coordination.k8s.io",
        "leases",
        &["get", "list", "watch", "create", "update", "patch"],
    );
    assert_denies(dray, "coordination.k8s.io", "leases", &["create", "update"]);
    let lease_binding = object(&docs, "RoleBinding", "dray-leader-election")?;
    assert_eq!(lease_binding["roleRef"]["kind"], "Role");
    assert_eq!(lease_binding["subjects"][0]["name"], "dray");

    // The roles a platform team binds per project namespace.
    let read = ["get", "list", "watch"];
    let viewer = object(&docs, "ClusterRole", "dray-viewer")?;
    assert_grants(viewer, "dray.dev", "stages", &read);
    assert_grants(viewer, "dray.dev", "promotions", &read);
    assert_denies(
        viewer,
        "dray.dev",
        "stages",
        &["promote", "approve", "create", "update"],
    );
    assert_eq!(
        viewer["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"],
        "true"
    );
    let promoter = object(&docs, "ClusterRole", "dray-promoter")?;
    assert_grants(
        promoter,
        "dray.dev",
        "stages",
        &["get", "list", "watch", "promote", "abort"],
    );
    assert_grants(promoter, "dray.dev", "promotions", &["abort"]);
    assert_denies(
        promoter,
        "dray.dev",
        "promotions",
        &["create", "update", "delete"],
    );
    assert_denies(
        promoter,
        "dray.dev",
        "stages",
        &["approve", "override", "verify", "update"],
    );
    let approver = object(&docs, "ClusterRole", "dray-approver")?;
    assert_grants(
        approver,
        "dray.dev",
        "stages",
        &["approve", "override", "freeze"],
    );
    assert_grants(approver, "dray.dev", "freight", &["reject"]);
    assert_grants(approver, "dray.dev", "projects", &["freeze"]);
    assert_denies(promoter, "dray.dev", "freight", &["reject"]);
    assert_denies(approver, "dray.dev", "stages", &["promote", "update"]);
    let admin = object(&docs, "ClusterRole", "dray-project-admin")?;
    for plural in crd_plurals()? {
        assert_grants(
            admin,
            "dray.dev",
            &plural,
            &["get", "create", "update", "delete"],
        );
    }
    assert_grants(
        admin,
        "dray.dev",
        "stages",
        &["promote", "approve", "override", "abort", "verify"],
    );
    assert_eq!(
        admin["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"],
        "true"
    );
    for role in [viewer, promoter, approver, admin] {
        for rule in role["rules"].as_array().into_iter().flatten() {
            assert_eq!(
                strings(&rule["apiGroups"]),
                ["dray.dev"],
                "`{}` reaches beyond dray.dev",
                name(role)
            );
        }
    }
    Ok(())
}

#[test]
fn webhook_checks_promotions_and_status_and_fails_closed() -> Result<()> {
    let docs = render(&[])?;
    let config = object(&docs, "ValidatingWebhookConfiguration", "dray")?;
    let webhooks = config["webhooks"].as_array().context("no webhooks")?;
    assert_eq!(webhooks.len(), 1);
    let hook = &webhooks[0];
    assert_eq!(hook["failurePolicy"], "Fail");
    assert_eq!(hook["sideEffects"], "None");
    assert_eq!(strings(&hook["admissionReviewVersions"]), ["v1"]);
    assert_eq!(hook["timeoutSeconds"], 10);
    let service = &hook["clientConfig"]["service"];
    assert_eq!(service["name"], "dray-webhook");
    assert_eq!(service["namespace"], NAMESPACE);
    assert_eq!(service["path"], "/admission/validate");
    assert_eq!(service["port"], 443);

    let rules = hook["rules"].as_array().context("no rules")?;
    let covers = |resource: &str, operation: &str| {
        rules.iter().any(|r| {
            strings(&r["apiGroups"]).contains(&"dray.dev".to_string())
                && strings(&r["resources"]).contains(&resource.to_string())
                && strings(&r["operations"]).contains(&operation.to_string())
        })
    };
    assert!(covers("promotions", "CREATE"), "{rules:?}");
    assert!(covers("promotions", "UPDATE"), "{rules:?}");
    assert!(covers("*/status", "UPDATE"), "{rules:?}");
    assert!(
        covers("promotions", "DELETE"),
        "a running Promotion is deleted only once it ended: {rules:?}"
    );
    assert!(covers("freight", "CREATE"), "Freight is minted: {rules:?}");
    assert!(
        covers("freight", "UPDATE"),
        "Freight is immutable: {rules:?}"
    );
    Ok(())
}

#[test]
fn bad_values_are_refused_with_what_to_set() -> Result<()> {
    for (set, says) in [
        ("webhook.failurePolicy=Maybe", "failurePolicy"),
        ("replicaz=2", "replicaz"),
        ("ingress.enabled=true", "ingress.host is required"),
        (
            "oidc.issuer=https://idp.example.com",
            "oidc.clientId is required",
        ),
    ] {
        let (ok, _, stderr) = helm_template(&["--set", set])?;
        assert!(!ok, "--set {set} rendered");
        assert!(stderr.contains(says), "--set {set}: {stderr}");
    }
    Ok(())
}

#[test]
fn chart_crds_are_the_top_level_crds() -> Result<()> {
    let top = yaml_files(&workspace_root().join("crds"))?;
    let chart = yaml_files(&chart().join("crds"))?;
    assert_eq!(
        file_names(&chart),
        file_names(&top),
        "deploy/helm/dray/crds/ does not hold the files of crds/: run deploy/render.sh"
    );
    for ((path, text), (_, chart_text)) in top.iter().zip(&chart) {
        assert!(
            text == chart_text,
            "deploy/helm/dray/crds/ differs from {}: run deploy/render.sh",
            path.display()
        );
    }
    Ok(())
}

#[test]
fn plain_manifests_are_a_fresh_render() -> Result<()> {
    helm();
    let fresh = tempfile::tempdir()?;
    let out = Command::new(workspace_root().join("deploy/render.sh"))
        .arg(fresh.path())
        .output()
        .context("cannot run deploy/render.sh")?;
    ensure!(
        out.status.success(),
        "deploy/render.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = yaml_files(fresh.path())?;
    let committed = yaml_files(&workspace_root().join("deploy/kubernetes"))?;
    assert_eq!(
        file_names(&committed),
        file_names(&fresh),
        "deploy/kubernetes/ holds other files than a render: run deploy/render.sh"
    );
    for ((path, text), (_, fresh_text)) in committed.iter().zip(&fresh) {
        assert!(
            text == fresh_text,
            "{} is stale: run deploy/render.sh and commit the result",
            path.display()
        );
    }
    Ok(())
}

#[test]
fn plain_manifests_parse_and_hold_no_key() -> Result<()> {
    let mut docs = Vec::new();
    for (path, text) in yaml_files(&workspace_root().join("deploy/kubernetes"))? {
        assert!(
            !text.contains("PRIVATE KEY"),
            "{} holds a private key",
            path.display()
        );
        docs.extend(documents(&text, &path.display().to_string())?);
    }
    assert!(
        docs.iter().all(|d| kind(d) != "Secret"),
        "the plain manifests hold a Secret: they are committed, so the secret key and the \
         webhook certificate must be made at install time (deploy/kubernetes/README.md)"
    );
    let namespace = object(&docs, "Namespace", NAMESPACE)?;
    assert_eq!(namespace["apiVersion"], "v1");
    let plurals: BTreeSet<String> = docs
        .iter()
        .filter(|d| kind(d) == "CustomResourceDefinition")
        .filter_map(|d| d["spec"]["names"]["plural"].as_str().map(str::to_string))
        .collect();
    assert_eq!(plurals, crd_plurals()?.into_iter().collect());
    let webhook = object(&docs, "ValidatingWebhookConfiguration", "dray")?;
    assert!(
        webhook["webhooks"][0]["clientConfig"]["caBundle"].is_null(),
        "the plain manifests' caBundle is patched in at install time"
    );
    let deployment = object(&docs, "Deployment", "dray")?;
    assert_eq!(
        strings(&container(deployment, "server")?["args"])[..2],
        ["serve", "--kubernetes"]
    );
    Ok(())
}

#[test]
fn provided_certificate_is_trusted_as_given() -> Result<()> {
    let ca = BASE64.encode("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    let ca_set = format!("webhook.tls.caBundle={ca}");
    let docs = render(&[
        "webhook.tls.source=provided",
        "webhook.tls.secretName=my-webhook-tls",
        &ca_set,
        "secretKey.existingSecret=my-key",
    ])?;
    assert!(
        docs.iter().all(|d| kind(d) != "Secret"),
        "with a provided certificate and key Secret the chart makes no Secret"
    );
    let webhook = object(&docs, "ValidatingWebhookConfiguration", "dray")?;
    assert_eq!(
        webhook["webhooks"][0]["clientConfig"]["caBundle"],
        ca.as_str()
    );
    let deployment = object(&docs, "Deployment", "dray")?;
    let pod = &deployment["spec"]["template"]["spec"];
    assert!(
        pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["secret"]["secretName"] == "my-webhook-tls"),
        "the server does not mount the provided Secret"
    );
    let server = container(deployment, "server")?;
    let key = server["env"]
        .as_array()
        .and_then(|es| es.iter().find(|e| e["name"] == "DRAY_SECRET_KEY"))
        .context("no DRAY_SECRET_KEY")?;
    assert_eq!(key["valueFrom"]["secretKeyRef"]["name"], "my-key");
    Ok(())
}

/// `helm lint --strict`: no warning and no error (an `[INFO]` such as "icon is
/// recommended" is fine).
#[test]
fn chart_passes_helm_lint_strict() -> Result<()> {
    let out = Command::new(helm())
        .args(["lint", "--strict", "--namespace", NAMESPACE])
        .arg(chart())
        .output()
        .context("cannot run helm lint")?;
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(out.status.success(), "helm lint --strict failed: {report}");
    let findings: Vec<&str> = report
        .lines()
        .filter(|l| l.contains("[WARNING]") || l.contains("[ERROR]"))
        .collect();
    assert!(findings.is_empty(), "helm lint --strict: {findings:?}");
    assert!(
        report.contains("1 chart(s) linted, 0 chart(s) failed"),
        "{report}"
    );
    Ok(())
}

/// The plain manifests as the resources of a kustomization, built by the real
/// `kubectl kustomize`: every object is read, and the image can be pinned.
#[test]
fn plain_manifests_build_with_kubectl_kustomize() -> Result<()> {
    let overlay = tempfile::tempdir()?;
    let files = yaml_files(&workspace_root().join("deploy/kubernetes"))?;
    // kustomize reads resources only from below the kustomization (no symlinks out).
    for (path, text) in &files {
        let name = path.file_name().context("a file without a name")?;
        std::fs::write(overlay.path().join(name), text)?;
    }
    let names = file_names(&files);
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{}\
             images:\n  - name: ghcr.io/dray-dev/dray\n    newTag: 9.9.9\n",
            names
                .iter()
                .map(|n| format!("  - {n}\n"))
                .collect::<String>()
        ),
    )?;
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(overlay.path())
        .output()
        .context("cannot run kubectl; install it (Debian: `apt-get install kubernetes-client`)")?;
    ensure!(
        out.status.success(),
        "kubectl kustomize refused deploy/kubernetes/: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let built = documents(&String::from_utf8(out.stdout)?, "the kustomize build")?;
    let mut committed = Vec::new();
    for (path, text) in &files {
        committed.extend(documents(text, &path.display().to_string())?);
    }
    assert_eq!(kinds(&built), kinds(&committed));
    let deployment = object(&built, "Deployment", "dray")?;
    for named in ["controller", "server"] {
        assert_eq!(
            container(deployment, named)?["image"],
            "ghcr.io/dray-dev/dray:9.9.9"
        );
    }
    Ok(())
}
