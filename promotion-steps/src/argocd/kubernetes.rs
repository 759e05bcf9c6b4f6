//! Argo CD through the Kubernetes API, over `kube::Client`: `argoproj.io/v1alpha1`
//! Applications read with `GET …/namespaces/{ns}/applications/{name}` (or listed with
//! `?labelSelector=`) through `Api<DynamicObject>`, and changed with JSON merge patches
//! (`Patch::Merge`, `application/merge-patch+json`).
//!
//! A sync is what `kubectl patch` or Kargo would write: an `operation` (`sync.revision`, or
//! `sync.revisions` with one entry per source, `initiatedBy.username`, `info`) plus the
//! `argocd.argoproj.io/refresh: hard` annotation, guarded by the `resourceVersion` last
//! read (a concurrent change answers 409, and the step looks again). Argo CD's controller
//! then runs it. Like the `argocd` CLI, it refuses to start an operation while one is set
//! or `Running`, naming whose it is. Sync windows are read from the AppProject's
//! `spec.syncWindows`.
//!
//! Kubernetes errors are `Status` objects (`kube::Error::Api`): 401 becomes an error whose
//! hint names where the credentials come from, 403 one with an RBAC hint naming the verb
//! and `applications.argoproj.io`, 429 and 5xx "later"; no answer is "later" too, except
//! a TLS failure (a CA that does not match will not heal), which names the server and the
//! fix. Building the client is `client.rs`'s.

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::core::Status;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::client::{auth_failure, chain};
use super::{
    ApplicationRef, ArgocdError, REFRESH_ANNOTATION, Refusal, SyncRefused, SyncRequest,
    describe_window, initiator,
};

const GROUP: &str = "argoproj.io";
const VERSION: &str = "v1alpha1";
const GROUP_VERSION: &str = "/apis/argoproj.io/v1alpha1";

/// Where the credentials that the API server may refuse come from, for the 401 hint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Auth {
    /// The project's `argocd` Credential for the server's URL (present or not).
    Credential { has_token: bool },
    /// The kubeconfig's user, or the pod's service account.
    Kubeconfig,
}

/// The Kubernetes API server of Argo CD's cluster.
pub(crate) struct Kubernetes {
    pub(super) client: kube::Client,
    /// "the Kubernetes API at `…`".
    pub(super) who: String,
    /// The API server's URL, without a trailing `/`.
    pub(super) cluster_url: String,
    /// Argo CD's namespace.
    pub(super) namespace: String,
    pub(super) auth: Auth,
    pub(super) cancel: Option<CancellationToken>,
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, kind), plural)
}

impl Kubernetes {
    fn namespace_of<'a>(&'a self, app: &'a ApplicationRef) -> &'a str {
        app.namespace.as_deref().unwrap_or(&self.namespace)
    }

    fn applications(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            namespace,
            &resource("Application", "applications"),
        )
    }

    fn path(&self, app: &ApplicationRef) -> String {
        format!(
            "{GROUP_VERSION}/namespaces/{}/applications/{}",
            self.namespace_of(app),
            app.name
        )
    }

    /// Runs one call, giving up when the promotion is aborted. `Err(Status)` inside is an
    /// API refusal for the caller (404, 403, 409, …); 401, 429/5xx, no answer and a TLS
    /// failure are decided here.
    async fn call<T>(
        &self,
        request: &str,
        call: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<Result<T, Status>, ArgocdError> {
        let answered = match &self.cancel {
            Some(cancel) => tokio::select! {
                answered = call => answered,
                () = cancel.cancelled() => return Err(ArgocdError::Aborted),
            },
            None => call.await,
        };
        match answered {
            Ok(value) => Ok(Ok(value)),
            Err(kube::Error::Api(status)) => self.refused(request, *status).map(Err),
            Err(error) => Err(self.unanswered(request, &error)),
        }
    }

    /// A `Status` answer: the caller's, unless it is 401 or "later".
    fn refused(&self, request: &str, status: Status) -> Result<Status, ArgocdError> {
        let code = status.code;
        // kube makes a `Status` of a body that is not one (a proxy's page): its words are
        // not the API server's, and only the status is said.
        let own = status.reason != "Failed to parse error data";
        if crate::is_transient_status(code) {
            let said = if own && !status.message.is_empty() {
                format!(": {}", status.message)
            } else {
                String::new()
            };
            return Err(ArgocdError::Unavailable(format!(
                "{} answered {code} to `{request}`{said}",
                self.who
            )));
        }
        if code == 401 {
            let hint = match self.auth {
                Auth::Credential { has_token: true } => {
                    "the project's token for it was refused; hint: renew the `argocd` \
                     Credential whose `repoURL` is this URL"
                }
                Auth::Credential { has_token: false } => {
                    "the project has no token for it; hint: add a credential with a token for \
                     this URL (a Credential of type `argocd` whose `repoURL` is the server)"
                }
                Auth::Kubeconfig => {
                    "the kubeconfig's user (token, client certificate or `exec` plugin) or the \
                     pod's service account was refused; hint: check that user with `kubectl \
                     auth whoami` against this cluster"
                }
            };
            return Err(ArgocdError::Failed(format!(
                "{} refused `{request}` (401 {}): {hint}",
                self.who, status.message
            )));
        }
        Ok(status)
    }

    /// No answer: "later", except what will not heal by waiting.
    fn unanswered(&self, request: &str, error: &kube::Error) -> ArgocdError {
        let text = chain(error);
        match error {
            kube::Error::Auth(auth) => ArgocdError::Failed(format!(
                "cannot authenticate to {} for `{request}`: {}; hint: check the user of the \
                 kubeconfig (its token, client certificate or `exec` plugin)",
                self.who,
                auth_failure(auth)
            )),
            _ if text.contains("certificate") || text.contains("tls handshake") => {
                ArgocdError::Failed(format!(
                    "{} failed the TLS handshake for `{request}`: {text}; hint: give Dray the CA \
                     that signed the server's certificate (the kubeconfig cluster's \
                     `certificate-authority-data`, or `certificateAuthorityData` beside \
                     `server` in the ProjectConfig's `spec.argocd.kubernetes`)",
                    self.who
                ))
            }
            kube::Error::SerdeError(_) => ArgocdError::Unavailable(format!(
                "{} gave an unreadable answer to `{request}`: {text}",
                self.who
            )),
            _ => {
                ArgocdError::Unavailable(format!("{} did not answer `{request}`: {text}", self.who))
            }
        }
    }

    /// 403 is an RBAC refusal: an error with a hint; anything else is the caller's.
    fn forbidden(&self, status: &Status, verb: &str, what: &str) -> Option<ArgocdError> {
        (status.code == 403).then(|| {
            ArgocdError::Failed(format!(
                "{} forbids Dray to {verb} {what} (403 {}); hint: grant the token's account \
                 `{verb}` on `applications.argoproj.io` (and `get` on `appprojects`) in that \
                 namespace",
                self.who, status.message
            ))
        })
    }

    fn failed(&self, request: &str, status: &Status) -> ArgocdError {
        ArgocdError::Failed(format!(
            "{} answered {} to `{request}`: {}",
            self.who, status.code, status.message
        ))
    }

    pub(super) async fn get(&self, app: &ApplicationRef) -> Result<Option<Value>, ArgocdError> {
        let request = format!("GET {}", self.path(app));
        let api = self.applications(self.namespace_of(app));
        match self.call(&request, api.get(&app.name)).await? {
            Ok(object) => Ok(Some(to_value(object))),
            Err(status) if status.code == 404 => Ok(None),
            Err(status) => Err(self
                .forbidden(&status, "get", &format!("Application `{}`", app.shown()))
                .unwrap_or_else(|| self.failed(&request, &status))),
        }
    }

    pub(super) async fn list(
        &self,
        selector: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, ArgocdError> {
        let ns = namespace.unwrap_or(&self.namespace);
        let request =
            format!("GET {GROUP_VERSION}/namespaces/{ns}/applications?labelSelector={selector}");
        let params = ListParams::default().labels(selector);
        match self
            .call(&request, self.applications(ns).list(&params))
            .await?
        {
            Ok(list) => Ok(list.items.into_iter().map(to_value).collect()),
            Err(status) => Err(self
                .forbidden(
                    &status,
                    "list",
                    &format!("Applications in namespace `{ns}`"),
                )
                .unwrap_or_else(|| self.failed(&request, &status))),
        }
    }

    async fn patch(
        &self,
        app: &ApplicationRef,
        patch: &Value,
    ) -> Result<Result<(), Refusal>, ArgocdError> {
        let request = format!("PATCH {}", self.path(app));
        let api = self.applications(self.namespace_of(app));
        let params = PatchParams::default();
        match self
            .call(
                &request,
                api.patch(&app.name, &params, &Patch::Merge(patch)),
            )
            .await?
        {
            Ok(_) => Ok(Ok(())),
            Err(status) => {
                match self.forbidden(&status, "patch", &format!("Application `{}`", app.shown())) {
                    Some(error) => Err(error),
                    None => Ok(Err(Refusal {
                        status: status.code,
                        message: status.message,
                    })),
                }
            }
        }
    }

    pub(super) async fn patch_spec(
        &self,
        app: &ApplicationRef,
        spec: &Value,
    ) -> Result<Result<(), Refusal>, ArgocdError> {
        let patch = json!({
            "metadata": {"annotations": {REFRESH_ANNOTATION: "hard"}},
            "spec": spec,
        });
        self.patch(app, &patch).await
    }

    pub(super) async fn sync(
        &self,
        app: &ApplicationRef,
        current: &Value,
        request: &SyncRequest,
    ) -> Result<Result<(), SyncRefused>, ArgocdError> {
        // As `argocd app sync` does: never replace an operation someone else set.
        if let Some(operation) = current.get("operation").filter(|o| o.is_object()) {
            return Ok(Err(SyncRefused::Busy {
                by: initiator(operation),
                message: "an operation is already set on the Application".to_owned(),
            }));
        }
        let state = &current["status"]["operationState"];
        if state["phase"] == "Running" {
            return Ok(Err(SyncRefused::Busy {
                by: initiator(&state["operation"]),
                message: "another operation is already in progress".to_owned(),
            }));
        }
        let sync = if request.multi {
            let sources = current["spec"]["sources"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let revisions: Vec<Value> = sources
                .iter()
                .enumerate()
                .map(|(i, source)| {
                    request
                        .revisions
                        .iter()
                        .find(|(at, _)| *at == i)
                        .map(|(_, r)| json!(r))
                        .unwrap_or_else(|| source["targetRevision"].clone())
                })
                .collect();
            json!({"revisions": revisions})
        } else {
            json!({"revision": request.revisions.first().map(|(_, r)| r.as_str()).unwrap_or("")})
        };
        let mut metadata = json!({"annotations": {REFRESH_ANNOTATION: "hard"}});
        if let Some(version) = current["metadata"]["resourceVersion"].as_str() {
            metadata["resourceVersion"] = json!(version);
        }
        let patch = json!({
            "metadata": metadata,
            "operation": {
                "sync": sync,
                "initiatedBy": {"username": request.initiator},
                "info": [{"name": "Reason", "value": request.reason}],
            },
        });
        match self.patch(app, &patch).await? {
            Ok(()) => Ok(Ok(())),
            Err(Refusal {
                status: 409,
                message,
            }) => Ok(Err(SyncRefused::Conflict(message))),
            Err(Refusal { status, message }) => Err(ArgocdError::Failed(format!(
                "{} refused the sync operation for `{}`: {status} {message}",
                self.who,
                app.shown()
            ))),
        }
    }

    /// The windows of the Application's AppProject that apply to it; a failure to read
    /// the AppProject is said in the text rather than failing the look.
    pub(super) async fn windows(&self, current: &Value) -> Result<String, ArgocdError> {
        let project = current["spec"]["project"]
            .as_str()
            .filter(|p| !p.is_empty())
            .unwrap_or("default");
        let request = format!(
            "GET {GROUP_VERSION}/namespaces/{}/appprojects/{project}",
            self.namespace
        );
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &resource("AppProject", "appprojects"),
        );
        let project_doc = match self.call(&request, api.get(project)).await? {
            Ok(doc) => to_value(doc),
            Err(status) => {
                return Ok(format!(
                    "cannot read AppProject `{project}` to name the window: {} {}",
                    status.code, status.message
                ));
            }
        };
        let windows: Vec<String> = project_doc["spec"]["syncWindows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|w| window_applies(w, current))
            .map(describe_window)
            .collect();
        Ok(if windows.is_empty() {
            format!("no window of AppProject `{project}` names it")
        } else {
            format!("AppProject `{project}`: {}", windows.join(", "))
        })
    }
}

/// An object as JSON, as the rest of the step reads it.
fn to_value(object: DynamicObject) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// Whether a window's `applications`, `namespaces` or `clusters` select the Application
/// (any of them, or all the non-empty ones with `andOperator`), as Argo CD matches them.
pub(super) fn window_applies(window: &Value, app: &Value) -> bool {
    let list = |key: &str| -> Vec<String> {
        window[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    let name = app["metadata"]["name"].as_str().unwrap_or("");
    let destination = &app["spec"]["destination"];
    let namespace = destination["namespace"].as_str().unwrap_or("");
    let clusters: Vec<&str> = [&destination["server"], &destination["name"]]
        .into_iter()
        .filter_map(|v| v.as_str())
        .collect();
    let checks = [
        (list("applications"), vec![name]),
        (list("namespaces"), vec![namespace]),
        (list("clusters"), clusters),
    ];
    let results: Vec<bool> = checks
        .iter()
        .filter(|(patterns, _)| !patterns.is_empty())
        .map(|(patterns, values)| patterns.iter().any(|p| values.iter().any(|v| glob(p, v))))
        .collect();
    if results.is_empty() {
        return false;
    }
    if window["andOperator"] == true {
        results.iter().all(|r| *r)
    } else {
        results.iter().any(|r| *r)
    }
}

/// `*` and `?` wildcards.
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argocd::{ArgocdTarget, KubeAccess, Transport};
    use axum::Router;
    use axum::http::StatusCode;
    use axum::routing::get;

    /// A Kubernetes API that forbids everything, as RBAC without a grant answers.
    async fn forbidding() -> String {
        let status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "applications.argoproj.io \"shop\" is forbidden: User \"system:serviceaccount:dray:dray\" cannot get resource \"applications\" in API group \"argoproj.io\" in the namespace \"argocd\"",
            "reason": "Forbidden", "code": 403,
        });
        let app = Router::new().route(
            "/apis/argoproj.io/v1alpha1/namespaces/{ns}/applications/{name}",
            get(move || {
                let status = status.clone();
                async move { (StatusCode::FORBIDDEN, axum::Json(status)) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    async fn transport(server: String) -> Transport {
        let target = ArgocdTarget::Kubernetes {
            access: KubeAccess::Server {
                url: server,
                certificate_authority_data: None,
            },
            namespace: "argocd".into(),
        };
        Transport::connect(reqwest::Client::new(), Some("t".into()), target, None)
            .await
            .unwrap()
    }

    fn shop() -> ApplicationRef {
        ApplicationRef {
            name: "shop".into(),
            namespace: None,
        }
    }

    #[tokio::test]
    async fn forbidden_is_an_error_with_an_rbac_hint() {
        let server = forbidding().await;
        let error = transport(server.clone())
            .await
            .get(&shop(), true)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(&format!(
                "the Kubernetes API at `{server}` forbids Dray to get Application `shop` (403 applications.argoproj.io \"shop\" is forbidden"
            )),
            "{error}"
        );
        assert!(
            error.contains("hint: grant the token's account `get`"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn an_operation_already_set_is_never_replaced() {
        // Nothing listens at this address: a request would fail, so none may be sent.
        let t = transport("http://127.0.0.1:1".into()).await;
        let request = SyncRequest {
            revisions: vec![(0, "4b825dc6".into())],
            multi: false,
            initiator: "dray:shop/prod".into(),
            reason: "test".into(),
        };
        let set = json!({"operation": {"sync": {}, "initiatedBy": {"username": "carol"}}});
        match t.sync(&shop(), &set, &request).await {
            Ok(Err(SyncRefused::Busy { by, message })) => {
                assert_eq!(by, "`carol`");
                assert_eq!(message, "an operation is already set on the Application");
            }
            other => panic!("expected Busy, got {other:?}"),
        }
        let running = json!({"status": {"operationState": {"phase": "Running", "operation": {"initiatedBy": {"automated": true}}}}});
        match t.sync(&shop(), &running, &request).await {
            Ok(Err(SyncRefused::Busy { by, .. })) => {
                assert_eq!(by, "Argo CD's automated sync");
            }
            other => panic!("expected Busy, got {other:?}"),
        }
    }

    #[test]
    fn windows_match_as_argocd_matches_them() {
        let app = json!({"metadata": {"name": "shop-prod"}, "spec": {"destination": {"server": "https://kubernetes.default.svc", "namespace": "shop"}}});
        assert!(window_applies(&json!({"applications": ["shop-*"]}), &app));
        assert!(!window_applies(&json!({"applications": ["cart-*"]}), &app));
        assert!(window_applies(
            &json!({"applications": ["cart"], "namespaces": ["sh?p"]}),
            &app
        ));
        assert!(!window_applies(
            &json!({"applications": ["cart"], "namespaces": ["shop"], "andOperator": true}),
            &app
        ));
        assert!(!window_applies(&json!({"kind": "deny"}), &app));
        assert!(glob("*", "") && glob("a*c", "abbc") && !glob("a*c", "abd"));
    }
}
