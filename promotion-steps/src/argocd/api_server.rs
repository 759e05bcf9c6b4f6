//! Argo CD's API server (`/api/v1/applications/…`): reads with `?refresh=normal`, patches
//! with an `ApplicationPatchRequest`, syncs with `POST …/sync` (which Argo CD refuses with
//! 403 in a sync window and 400 while another operation runs), and names windows from
//! `GET …/syncwindows`.

use serde_json::{Value, json};

use super::{
    ApplicationRef, ArgocdError, Http, Refusal, SyncRefused, SyncRequest, describe_window, encode,
    initiator,
};

/// Argo CD's API server.
pub(crate) struct ApiServer {
    pub(super) http: Http,
}

/// `path` with `appNamespace=` when the Application names its namespace.
fn at(path: &str, app_namespace: Option<&str>) -> String {
    match app_namespace {
        Some(ns) => format!(
            "{path}{}appNamespace={}",
            if path.contains('?') { '&' } else { '?' },
            encode(ns)
        ),
        None => path.to_owned(),
    }
}

impl ApiServer {
    pub(super) async fn get(
        &self,
        app: &ApplicationRef,
        refresh: bool,
    ) -> Result<Option<Value>, ArgocdError> {
        let name = &app.name;
        let path = if refresh {
            format!("/api/v1/applications/{name}?refresh=normal")
        } else {
            format!("/api/v1/applications/{name}")
        };
        self.http.get(&at(&path, app.namespace.as_deref())).await
    }

    pub(super) async fn resource_tree(
        &self,
        app: &ApplicationRef,
    ) -> Result<Option<Value>, ArgocdError> {
        let path = format!("/api/v1/applications/{}/resource-tree", app.name);
        self.http.get(&at(&path, app.namespace.as_deref())).await
    }

    pub(super) async fn list(
        &self,
        selector: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, ArgocdError> {
        let path = format!("/api/v1/applications?selector={}", encode(selector));
        let list = self.http.get(&at(&path, namespace)).await?;
        Ok(list
            .and_then(|l| l["items"].as_array().cloned())
            .unwrap_or_default())
    }

    pub(super) async fn patch_spec(
        &self,
        app: &ApplicationRef,
        spec: &Value,
    ) -> Result<Result<(), Refusal>, ArgocdError> {
        let name = &app.name;
        let patch = json!({"spec": spec}).to_string();
        let body = json!({"name": name, "appNamespace": app.namespace, "patch": patch, "patchType": "merge"});
        let path = at(
            &format!("/api/v1/applications/{name}"),
            app.namespace.as_deref(),
        );
        Ok(self
            .http
            .send(
                reqwest::Method::PATCH,
                &path,
                Some(("application/json", &body)),
            )
            .await?
            .map(|_| ()))
    }

    pub(super) async fn sync(
        &self,
        app: &ApplicationRef,
        request: &SyncRequest,
    ) -> Result<Result<(), SyncRefused>, ArgocdError> {
        let name = &app.name;
        let mut body = json!({"name": name, "prune": false});
        if let Some(ns) = &app.namespace {
            body["appNamespace"] = json!(ns);
        }
        if request.multi {
            body["revisions"] = request.revisions.iter().map(|(_, r)| json!(r)).collect();
            body["sourcePositions"] = request
                .revisions
                .iter()
                .map(|(i, _)| json!(*i as i64 + 1))
                .collect();
        } else if let Some((_, revision)) = request.revisions.first() {
            body["revision"] = json!(revision);
        }
        body["infos"] = json!([{"name": "Reason", "value": request.reason}]);
        let path = at(
            &format!("/api/v1/applications/{name}/sync"),
            app.namespace.as_deref(),
        );
        match self
            .http
            .send(
                reqwest::Method::POST,
                &path,
                Some(("application/json", &body)),
            )
            .await?
        {
            Ok(_) => Ok(Ok(())),
            Err(Refusal { status, message })
                if status == 403 && message.to_lowercase().contains("sync window") =>
            {
                Ok(Err(SyncRefused::Window(self.windows(app).await?)))
            }
            Err(Refusal { status, message })
                if (status == 400 || status == 409) && message.contains("in progress") =>
            {
                // Argo CD does not say whose operation it is: look again to name them.
                let by = self
                    .get(app, false)
                    .await?
                    .map(|fresh| initiator(&fresh["status"]["operationState"]["operation"]))
                    .unwrap_or_else(|| "someone unknown".to_owned());
                Ok(Err(SyncRefused::Busy { by, message }))
            }
            Err(Refusal { status, message }) => Err(ArgocdError::Failed(format!(
                "{} refused to sync `{}`: {status} {message}",
                self.http.who,
                app.shown()
            ))),
        }
    }

    pub(super) async fn windows(&self, app: &ApplicationRef) -> Result<String, ArgocdError> {
        let path = at(
            &format!("/api/v1/applications/{}/syncwindows", app.name),
            app.namespace.as_deref(),
        );
        Ok(self
            .http
            .get(&path)
            .await?
            .map(|w| describe_windows(&w))
            .unwrap_or_default())
    }
}

/// `GET …/syncwindows`' answer, for a message.
pub(super) fn describe_windows(response: &Value) -> String {
    let windows: Vec<String> = response["activeWindows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(describe_window)
        .collect();
    if windows.is_empty() {
        "cannot sync: blocked by sync window".to_owned()
    } else {
        format!("active: {}", windows.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_described() {
        let text = describe_windows(
            &json!({"activeWindows": [{"kind": "deny", "schedule": "0 22 * * *", "duration": "8h", "manualSync": false}]}),
        );
        assert_eq!(text, "active: `deny` window `0 22 * * *` for 8h");
        assert_eq!(
            at("/api/v1/applications/a?refresh=normal", Some("team a")),
            "/api/v1/applications/a?refresh=normal&appNamespace=team%20a"
        );
    }
}
