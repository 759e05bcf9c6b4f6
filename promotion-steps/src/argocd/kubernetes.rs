//! Argo CD through the Kubernetes API: `argoproj.io/v1alpha1` Applications read with
//! `GET …/namespaces/{ns}/applications/{name}` (or listed with `?labelSelector=`) and
//! changed with JSON merge patches (`application/merge-patch+json`).
//!
//! A sync is what `kubectl patch` or Kargo would write: an `operation` (`sync.revision`, or
//! `sync.revisions` with one entry per source, `initiatedBy.username`, `info`) plus the
//! `argocd.argoproj.io/refresh: hard` annotation, guarded by the `resourceVersion` last
//! read (a concurrent change answers 409). Argo CD's controller then runs it. Like the
//! `argocd` CLI, it refuses to start an operation while one is set or `Running`, naming
//! whose it is. Sync windows are read from the AppProject's `spec.syncWindows`.
//! Kubernetes errors are `Status` objects; 403 becomes an error with an RBAC hint.

use serde_json::{Value, json};

use super::{
    ApplicationRef, ArgocdError, Http, REFRESH_ANNOTATION, Refusal, SyncRefused, SyncRequest,
    describe_window, encode, initiator,
};

const GROUP_VERSION: &str = "/apis/argoproj.io/v1alpha1";
const MERGE_PATCH: &str = "application/merge-patch+json";

/// The Kubernetes API server of Argo CD's cluster.
pub(crate) struct Kubernetes {
    pub(super) http: Http,
    /// Argo CD's namespace.
    pub(super) namespace: String,
}

impl Kubernetes {
    fn namespace_of<'a>(&'a self, app: &'a ApplicationRef) -> &'a str {
        app.namespace.as_deref().unwrap_or(&self.namespace)
    }

    fn path(&self, app: &ApplicationRef) -> String {
        format!(
            "{GROUP_VERSION}/namespaces/{}/applications/{}",
            self.namespace_of(app),
            app.name
        )
    }

    /// 403 is an RBAC refusal: an error with a hint; anything else is the caller's.
    fn forbidden(&self, refusal: &Refusal, verb: &str, what: &str) -> Option<ArgocdError> {
        (refusal.status == 403).then(|| {
            ArgocdError::Failed(format!(
                "{} forbids Dray to {verb} {what} (403 {}); hint: grant the token's account \
                 `{verb}` on `applications.argoproj.io` (and `get` on `appprojects`) in that \
                 namespace",
                self.http.who, refusal.message
            ))
        })
    }

    pub(super) async fn get(&self, app: &ApplicationRef) -> Result<Option<Value>, ArgocdError> {
        let path = self.path(app);
        match self.http.send(reqwest::Method::GET, &path, None).await? {
            Ok(value) => Ok(Some(value)),
            Err(Refusal { status: 404, .. }) => Ok(None),
            Err(refusal) => Err(self
                .forbidden(&refusal, "get", &format!("Application `{}`", app.shown()))
                .unwrap_or_else(|| {
                    ArgocdError::Failed(format!(
                        "{} answered {} to `GET {path}`: {}",
                        self.http.who, refusal.status, refusal.message
                    ))
                })),
        }
    }

    pub(super) async fn list(
        &self,
        selector: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, ArgocdError> {
        let ns = namespace.unwrap_or(&self.namespace);
        let path = format!(
            "{GROUP_VERSION}/namespaces/{ns}/applications?labelSelector={}",
            encode(selector)
        );
        match self.http.send(reqwest::Method::GET, &path, None).await? {
            Ok(list) => Ok(list["items"].as_array().cloned().unwrap_or_default()),
            Err(refusal) => Err(self
                .forbidden(
                    &refusal,
                    "list",
                    &format!("Applications in namespace `{ns}`"),
                )
                .unwrap_or_else(|| {
                    ArgocdError::Failed(format!(
                        "{} answered {} to `GET {path}`: {}",
                        self.http.who, refusal.status, refusal.message
                    ))
                })),
        }
    }

    async fn patch(
        &self,
        app: &ApplicationRef,
        patch: &Value,
    ) -> Result<Result<(), Refusal>, ArgocdError> {
        match self
            .http
            .send(
                reqwest::Method::PATCH,
                &self.path(app),
                Some((MERGE_PATCH, patch)),
            )
            .await?
        {
            Ok(_) => Ok(Ok(())),
            Err(refusal) => {
                match self.forbidden(&refusal, "patch", &format!("Application `{}`", app.shown())) {
                    Some(error) => Err(error),
                    None => Ok(Err(refusal)),
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
                self.http.who,
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
        let path = format!(
            "{GROUP_VERSION}/namespaces/{}/appprojects/{project}",
            self.namespace
        );
        let answer = self.http.send(reqwest::Method::GET, &path, None).await?;
        let project_doc = match answer {
            Ok(doc) => doc,
            Err(Refusal { status, message }) => {
                return Ok(format!(
                    "cannot read AppProject `{project}` to name the window: {status} {message}"
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
    use crate::argocd::{ArgocdTarget, Transport};
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

    fn transport(server: String) -> Transport {
        Transport::new(
            reqwest::Client::new(),
            Some("t".into()),
            ArgocdTarget::Kubernetes {
                server,
                namespace: "argocd".into(),
            },
            None,
        )
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
        let t = transport("http://127.0.0.1:1".into());
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
