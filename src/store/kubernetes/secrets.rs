//! Credentials from Kubernetes Secrets: a Secret in a project namespace labelled
//! `dray.dev/cred-type: git|image|webhook|argocd|signing` (or Kargo's
//! `kargo.akuity.io/cred-type`) is read as the `Credential` of the same name. Its keys are
//! Kargo's: `repoURL` (with `repoURLIsRegex: "true"` a pattern), `username`, `password`;
//! and Dray's: `token` (Kargo's webhook receivers call it `secret`), `sshPrivateKey`.
//!
//! The secret values are sealed with Dray's key as soon as they are read, exactly as the
//! embedded store keeps a Credential, so nothing downstream sees them in plain text and
//! nothing copies them into a status or a log.

use k8s_openapi::api::core::v1::Secret;
use serde_json::{Map, Value, json};

use crate::secrets::{SecretKey, seal_credential};
use crate::store::StoredObject;

use super::resources::{GROUP, VERSION, stored_value};

/// Dray's label naming a Secret's credential type.
pub(crate) const CRED_TYPE_LABEL: &str = "dray.dev/cred-type";
/// Kargo's, accepted too.
pub(crate) const KARGO_CRED_TYPE_LABEL: &str = "kargo.akuity.io/cred-type";
/// The annotation on a Credential read from a Secret.
pub(crate) const FROM_SECRET_ANNOTATION: &str = "dray.dev/from-secret";

/// Why a labelled Secret is not a credential.
#[derive(Debug, thiserror::Error)]
pub(super) enum SecretCredentialError {
    /// The label names a type Dray has no use for.
    #[error(
        "Secret {namespace}/{name}: credential type `{value}` is not one Dray reads; label it \
         `{CRED_TYPE_LABEL}` with one of git, image, webhook, argocd, signing"
    )]
    UnknownType {
        namespace: String,
        name: String,
        value: String,
    },
    /// A value is not UTF-8 text.
    #[error("Secret {namespace}/{name}: key `{field}` is not UTF-8 text; store it as text")]
    NotText {
        namespace: String,
        name: String,
        field: String,
    },
    /// Sealing failed.
    #[error("Secret {namespace}/{name}: {cause}")]
    Seal {
        namespace: String,
        name: String,
        cause: String,
    },
}

/// The Credential a labelled Secret stands for (`None` when it carries neither label).
pub(super) fn credential_of(
    secret: &Secret,
    key: &SecretKey,
) -> Option<Result<StoredObject, SecretCredentialError>> {
    let labels = secret.metadata.labels.as_ref()?;
    let type_ = labels
        .get(CRED_TYPE_LABEL)
        .or_else(|| labels.get(KARGO_CRED_TYPE_LABEL))?;
    Some(convert(secret, type_, key))
}

fn convert(
    secret: &Secret,
    type_: &str,
    key: &SecretKey,
) -> Result<StoredObject, SecretCredentialError> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let namespace = secret.metadata.namespace.clone().unwrap_or_default();
    let type_ = match type_ {
        "git" | "image" | "webhook" | "argocd" | "signing" => type_,
        // Kargo's receivers read their secret from `generic` Secrets.
        "generic" => "webhook",
        other => {
            return Err(SecretCredentialError::UnknownType {
                namespace,
                name,
                value: other.to_owned(),
            });
        }
    };
    let text = |field: &str| -> Result<Option<String>, SecretCredentialError> {
        let from_data = secret
            .data
            .as_ref()
            .and_then(|d| d.get(field))
            .map(|bytes| {
                String::from_utf8(bytes.0.clone()).map_err(|_| SecretCredentialError::NotText {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    field: field.to_owned(),
                })
            });
        match from_data {
            Some(value) => value.map(Some),
            None => Ok(secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(field))
                .cloned()),
        }
    };
    let mut spec = Map::new();
    spec.insert("type".into(), json!(type_));
    if let Some(url) = text("repoURL")? {
        let is_regex = text("repoURLIsRegex")?.is_some_and(|v| v == "true");
        let field = if is_regex {
            "repoURLPattern"
        } else {
            "repoURL"
        };
        spec.insert(field.into(), json!(url));
    }
    for (from, to) in [
        ("username", "username"),
        ("password", "password"),
        ("token", "token"),
        ("secret", "token"),
        ("sshPrivateKey", "sshPrivateKey"),
    ] {
        if let Some(value) = text(from)? {
            spec.entry(to).or_insert(json!(value));
        }
    }
    let mut object = json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "Credential",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": secret.metadata.uid,
            "resourceVersion": secret.metadata.resource_version,
            "creationTimestamp": secret.metadata.creation_timestamp,
            "annotations": {FROM_SECRET_ANNOTATION: name},
        },
        "spec": Value::Object(spec),
    });
    seal_credential(key, &mut object, None).map_err(|e| SecretCredentialError::Seal {
        namespace: namespace.clone(),
        name: name.clone(),
        cause: e.to_string(),
    })?;
    stored_value(object).map_err(|e| SecretCredentialError::Seal {
        namespace,
        name,
        cause: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::secrets::open_credential;

    fn secret(label: &str, value: &str, data: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("repo".into()),
                namespace: Some("demo".into()),
                resource_version: Some("42".into()),
                labels: Some(BTreeMap::from([(label.to_owned(), value.to_owned())])),
                ..Default::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn a_kargo_git_secret_is_a_sealed_credential() {
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::load(dir.path()).unwrap();
        let s = secret(
            KARGO_CRED_TYPE_LABEL,
            "git",
            &[
                ("repoURL", "https://git.example.com/.*"),
                ("repoURLIsRegex", "true"),
                ("username", "ci"),
                ("password", "hunter2-hunter2"),
            ],
        );
        let stored = credential_of(&s, &key).unwrap().unwrap();
        assert_eq!(stored.resource_version, 42);
        let spec = &stored.object["spec"];
        assert_eq!(spec["type"], "git");
        assert_eq!(spec["repoURLPattern"], "https://git.example.com/.*");
        assert_eq!(spec["username"], "ci");
        assert!(spec.get("password").is_none(), "{spec}");
        assert!(!stored.object.to_string().contains("hunter2"));
        let opened = open_credential(&key, &stored.object).unwrap();
        assert_eq!(opened.password.as_deref(), Some("hunter2-hunter2"));
    }

    #[test]
    fn a_webhook_secret_key_becomes_the_token_and_unknown_types_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::load(dir.path()).unwrap();
        let s = secret(
            CRED_TYPE_LABEL,
            "webhook",
            &[("secret", "0123456789abcdef0")],
        );
        let stored = credential_of(&s, &key).unwrap().unwrap();
        let opened = open_credential(&key, &stored.object).unwrap();
        assert_eq!(opened.token.as_deref(), Some("0123456789abcdef0"));
        let helm = secret(CRED_TYPE_LABEL, "helm", &[]);
        let error = credential_of(&helm, &key).unwrap().unwrap_err().to_string();
        assert!(
            error.contains("`helm`") && error.contains("git, image"),
            "{error}"
        );
        let plain = Secret::default();
        assert!(credential_of(&plain, &key).is_none());
    }
}
