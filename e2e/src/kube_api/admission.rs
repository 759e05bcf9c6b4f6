//! Validating admission webhooks as the API server calls them: every create, update
//! (incl. `/status`) and delete matching a stored ValidatingWebhookConfiguration's rules
//! (operations, apiGroups, apiVersions, resources incl. `x/status`, `*/status`, `*/*`,
//! scope, namespaceSelector, objectSelector) is POSTed as an `admission.k8s.io/v1`
//! AdmissionReview to `clientConfig.url` or `clientConfig.service` (resolved through the
//! test's endpoint map) over HTTPS verifying `caBundle`, within `timeoutSeconds`;
//! `failurePolicy` Fail/Ignore; a denial is worded `admission webhook "NAME" denied the
//! request: …` with the webhook's code. Every call is recorded for tests.
//!
//! It owns the webhook protocol; it never holds the state lock across a call.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::routes::Call;
use super::selector::LabelSelector;
use super::state::Shared;
use super::status::ApiError;
use super::store::ObjKey;

/// An admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    fn options_kind(self) -> &'static str {
        match self {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
        }
    }
}

fn listed(list: &Value, wanted: &str) -> bool {
    list.as_array()
        .is_some_and(|items| items.iter().any(|item| item == "*" || item == wanted))
}

fn resource_matches(resources: &Value, plural: &str, subresource: &str) -> bool {
    resources.as_array().is_some_and(|items| {
        items.iter().filter_map(Value::as_str).any(|rule| {
            let (rule_res, rule_sub) = rule.split_once('/').unwrap_or((rule, ""));
            let res_ok = rule_res == "*" || rule_res == plural;
            let sub_ok = rule_sub == "*" || rule_sub == subresource;
            res_ok && sub_ok
        })
    })
}

fn rule_matches(rule: &Value, call: &Call, operation: Operation) -> bool {
    let ty = &call.target.ty;
    let scope_ok = match rule["scope"].as_str() {
        Some("Cluster") => !ty.namespaced,
        Some("Namespaced") => ty.namespaced,
        _ => true,
    };
    listed(&rule["operations"], operation.as_str())
        && listed(&rule["apiGroups"], &ty.group)
        && listed(&rule["apiVersions"], &ty.version)
        && resource_matches(&rule["resources"], &ty.plural, &call.target.subresource)
        && scope_ok
}

/// One webhook to call.
#[derive(Debug, Clone)]
struct Hook {
    name: String,
    url: String,
    /// `(service host, address)` for a `clientConfig.service`.
    resolve: Option<(String, std::net::SocketAddr)>,
    ca_bundle: Option<Vec<u8>>,
    timeout: Duration,
    ignore_failure: bool,
    /// `sideEffects` is `None` or `NoneOnDryRun`: it may see dry-run requests.
    dry_run_safe: bool,
}

fn matching_hooks(
    shared: &Shared,
    call: &Call,
    operation: Operation,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Vec<Hook>, ApiError> {
    let inner = shared.lock();
    let configurations = inner.store.all(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    );
    if configurations.is_empty() {
        return Ok(Vec::new());
    }
    let namespace_labels = inner
        .store
        .get(&ObjKey {
            group: String::new(),
            plural: "namespaces".into(),
            namespace: String::new(),
            name: call.target.namespace.clone(),
        })
        .map(|ns| ns["metadata"]["labels"].clone())
        .unwrap_or(Value::Null);
    let mut hooks = Vec::new();
    for (_, configuration) in configurations {
        for webhook in configuration["webhooks"].as_array().into_iter().flatten() {
            let rules_ok = webhook["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|rule| rule_matches(rule, call, operation));
            let namespace_ok = !call.target.ty.namespaced
                || LabelSelector::object_matches(&webhook["namespaceSelector"], &namespace_labels);
            let object_ok = [object, old].into_iter().flatten().any(|o| {
                LabelSelector::object_matches(&webhook["objectSelector"], &o["metadata"]["labels"])
            });
            if !(rules_ok && namespace_ok && object_ok) {
                continue;
            }
            let name = webhook["name"].as_str().unwrap_or_default().to_owned();
            let config = &webhook["clientConfig"];
            let (url, resolve) = if let Some(url) = config["url"].as_str() {
                (url.to_owned(), None)
            } else {
                let service = &config["service"];
                let namespace = service["namespace"].as_str().unwrap_or_default();
                let service_name = service["name"].as_str().unwrap_or_default();
                let path = service["path"].as_str().unwrap_or_default();
                let host = format!("{service_name}.{namespace}.svc");
                match inner
                    .services
                    .get(&(namespace.to_owned(), service_name.to_owned()))
                {
                    Some(addr) => (
                        format!("https://{host}:{}{path}", addr.port()),
                        Some((host, *addr)),
                    ),
                    None => (
                        format!(
                            "https://{host}:{}{path}",
                            service["port"].as_u64().unwrap_or(443)
                        ),
                        None,
                    ),
                }
            };
            let ca_bundle = config["caBundle"]
                .as_str()
                .and_then(|ca| base64::engine::general_purpose::STANDARD.decode(ca).ok());
            hooks.push(Hook {
                name,
                url,
                resolve,
                ca_bundle,
                timeout: Duration::from_secs(webhook["timeoutSeconds"].as_u64().unwrap_or(10)),
                ignore_failure: webhook["failurePolicy"].as_str() == Some("Ignore"),
                dry_run_safe: matches!(
                    webhook["sideEffects"].as_str(),
                    Some("None" | "NoneOnDryRun")
                ),
            });
        }
    }
    Ok(hooks)
}

fn review_request(
    call: &Call,
    operation: Operation,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let ty = &call.target.ty;
    let kind = json!({"group": ty.group, "version": ty.version, "kind": ty.kind});
    let resource = json!({"group": ty.group, "version": ty.version, "resource": ty.plural});
    let name = object
        .or(old)
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap_or(&call.target.name)
        .to_owned();
    let mut options = json!({"kind": operation.options_kind(), "apiVersion": "meta.k8s.io/v1"});
    if let Some(manager) = call.param("fieldManager") {
        options["fieldManager"] = json!(manager);
    }
    let typed = |o: Option<&Value>| {
        o.map(|o| super::objects::typed(ty, o.clone()))
            .unwrap_or(Value::Null)
    };
    let mut request = json!({
        "uid": uuid::Uuid::new_v4().to_string(),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": name,
        "operation": operation.as_str(),
        "userInfo": {"username": call.user.username, "uid": call.user.uid, "groups": call.user.groups},
        "object": typed(object),
        "oldObject": typed(old),
        "dryRun": call.dry_run(),
        "options": options,
    });
    if !call.target.namespace.is_empty() {
        request["namespace"] = json!(call.target.namespace);
    }
    if !call.target.subresource.is_empty() {
        request["subResource"] = json!(call.target.subresource);
        request["requestSubResource"] = json!(call.target.subresource);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

async fn send(hook: &Hook, review: &Value) -> Result<Value, String> {
    let mut builder = reqwest::Client::builder()
        .timeout(hook.timeout)
        .use_rustls_tls();
    if let Some(ca) = &hook.ca_bundle {
        let certificate =
            reqwest::Certificate::from_pem(ca).map_err(|err| format!("invalid caBundle: {err}"))?;
        builder = builder
            .tls_built_in_root_certs(false)
            .add_root_certificate(certificate);
    }
    if let Some((host, addr)) = &hook.resolve {
        builder = builder.resolve(host, *addr);
    }
    let client = builder.build().map_err(|err| err.to_string())?;
    let response = client
        .post(&hook.url)
        .json(review)
        .send()
        .await
        .map_err(|err| {
            let mut text = err.to_string();
            let mut source = std::error::Error::source(&err);
            while let Some(cause) = source {
                text = format!("{text}: {cause}");
                source = cause.source();
            }
            format!("Post {:?}: {text}", hook.url)
        })?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .map_err(|err| format!("failed to read the response: {err}"))?;
    if !status.is_success() {
        return Err(format!("received HTTP {status} from the webhook"));
    }
    let expected = &review["request"]["uid"];
    if body["response"]["uid"] != *expected {
        return Err(format!(
            "expected response.uid={expected}, got {}",
            body["response"]["uid"]
        ));
    }
    Ok(body)
}

/// Calls the matching webhooks; the first denial (or a failure under `failurePolicy:
/// Fail`) becomes the error the client sees. Returns the webhooks' warnings.
pub(crate) async fn review(
    shared: &Shared,
    call: &Call,
    operation: Operation,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    let hooks = matching_hooks(shared, call, operation, object, old)?;
    if call.dry_run()
        && let Some(hook) = hooks.iter().find(|hook| !hook.dry_run_safe)
    {
        return Err(ApiError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            hook.name
        )));
    }
    // Validating webhooks are called in parallel, as the real server does.
    let reviews: Vec<Value> = hooks
        .iter()
        .map(|hook| {
            let review = review_request(call, operation, object, old);
            shared
                .lock()
                .admission_calls
                .push(json!({"webhook": hook.name, "review": review.clone()}));
            review
        })
        .collect();
    let answers = futures_util::future::join_all(
        hooks
            .iter()
            .zip(&reviews)
            .map(|(hook, review)| send(hook, review)),
    )
    .await;
    let mut warnings = Vec::new();
    for (hook, answer) in hooks.iter().zip(answers) {
        let answer = match answer {
            Ok(answer) => answer,
            Err(_) if hook.ignore_failure => continue,
            Err(err) => {
                return Err(ApiError::internal(format!(
                    "Internal error occurred: failed calling webhook {:?}: failed to call webhook: {err}",
                    hook.name
                )));
            }
        };
        let response = &answer["response"];
        warnings.extend(
            response["warnings"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|w| w.as_str().map(str::to_owned)),
        );
        if response["allowed"] == true {
            continue;
        }
        let result = &response["status"];
        let code = result["code"]
            .as_u64()
            .filter(|code| *code >= 400)
            .unwrap_or(400) as u16;
        let denied = format!("admission webhook {:?} denied the request", hook.name);
        let message = match (result["message"].as_str(), result["reason"].as_str()) {
            (Some(message), _) if !message.is_empty() => format!("{denied}: {message}"),
            (_, Some(reason)) if !reason.is_empty() => format!("{denied}: {reason}"),
            _ => format!("{denied} without explanation"),
        };
        let mut error = ApiError::new(
            code,
            result["reason"].as_str().unwrap_or_default(),
            message,
            None,
        );
        if result["details"].is_object() {
            error.body["details"] = result["details"].clone();
        }
        if result["reason"].is_null()
            && let Some(fields) = error.body.as_object_mut()
        {
            fields.remove("reason");
        }
        return Err(error);
    }
    Ok(warnings)
}
