//! Encryption at rest for the secret fields of Credentials.
//!
//! The key is 32 bytes from `DRAY_SECRET_KEY` (base64) or, when that is unset, from the
//! file `secret.key` in the data directory, created with mode 0600 on first start.
//! Secrets are sealed with ChaCha20-Poly1305 (random nonce per write) into
//! `spec.sealed`; the plaintext fields never reach the store. The API shows only which
//! fields are set (`status.secretFields`), never their values.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::ResourceBody as _;

/// The environment variable that may hold the key (base64 of 32 bytes).
pub const DRAY_SECRET_KEY: &str = "DRAY_SECRET_KEY";
/// The key file in the data directory.
pub const KEY_FILE: &str = "secret.key";
/// The secret fields of a Credential's spec.
pub const SECRET_FIELDS: [&str; 3] = ["password", "token", "sshPrivateKey"];

const SEALED_PREFIX: &str = "v1:";

/// Why a secret could not be kept or read.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The key (from `DRAY_SECRET_KEY` or the key file) is not base64 of 32 bytes.
    #[error(
        "the secret key in {from} is not 32 bytes in base64: set it to the key the \
         Credentials were sealed with (a new one comes from `openssl rand -base64 32`)"
    )]
    BadKey {
        /// Where the key came from: `` `DRAY_SECRET_KEY` `` or the key file.
        from: String,
    },
    /// The key file could not be read or created.
    #[error(
        "cannot read or create the key file `{path}`: {cause}; check that the data \
         directory is writable by Dray, or set `{DRAY_SECRET_KEY}`"
    )]
    KeyFile {
        /// The file.
        path: String,
        /// Why.
        cause: String,
    },
    /// A sealed value could not be opened (wrong key or damaged data).
    #[error(
        "cannot decrypt the secrets of {what}: the data directory's key does not match the one \
         they were sealed with; restore that key (`{KEY_FILE}` or `{DRAY_SECRET_KEY}`), or \
         apply the Credential again with its secrets"
    )]
    Open {
        /// Whose secrets.
        what: String,
    },
}

/// The secret values of a Credential.
#[derive(Serialize, Deserialize, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CredentialSecrets {
    /// A password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// A token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// An SSH private key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_private_key: Option<String>,
}

impl std::fmt::Debug for CredentialSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CredentialSecrets(<redacted>)")
    }
}

impl CredentialSecrets {
    /// The password or, failing that, the token: what HTTP basic auth sends.
    pub fn password_or_token(&self) -> Option<&str> {
        self.password.as_deref().or(self.token.as_deref())
    }

    /// The names (as in [`SECRET_FIELDS`]) of the fields that hold a value.
    fn field_names(&self) -> Vec<String> {
        let values = [&self.password, &self.token, &self.ssh_private_key];
        SECRET_FIELDS
            .into_iter()
            .zip(values)
            .filter(|(_, value)| value.is_some())
            .map(|(name, _)| name.to_owned())
            .collect()
    }
}

/// The key that seals and opens secrets.
pub struct SecretKey(ChaCha20Poly1305);

impl SecretKey {
    /// The key from `DRAY_SECRET_KEY`, or from (or newly into) `<data_dir>/secret.key`.
    pub fn load(data_dir: &Path) -> Result<Self, SecretError> {
        if let Ok(text) = std::env::var(DRAY_SECRET_KEY) {
            return Self::from_base64(text.trim())
                .ok_or_else(|| bad_key(format!("`{DRAY_SECRET_KEY}`")));
        }
        let path = data_dir.join(KEY_FILE);
        let key_file_error = |cause: String| SecretError::KeyFile {
            path: path.display().to_string(),
            cause,
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::from_base64(text.trim())
                .ok_or_else(|| bad_key(format!("the key file `{}`", path.display()))),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(data_dir).map_err(|e| key_file_error(e.to_string()))?;
                let key = ChaCha20Poly1305::generate_key(&mut OsRng);
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)
                    .map_err(|e| key_file_error(e.to_string()))?;
                file.write_all(BASE64.encode(key).as_bytes())
                    .and_then(|()| file.sync_all())
                    .map_err(|e| key_file_error(e.to_string()))?;
                Ok(SecretKey(ChaCha20Poly1305::new(&key)))
            }
            Err(error) => Err(key_file_error(error.to_string())),
        }
    }

    /// A key from base64 text; `None` unless it is 32 bytes in base64.
    fn from_base64(text: &str) -> Option<Self> {
        let bytes = BASE64.decode(text).ok()?;
        (bytes.len() == 32).then(|| SecretKey(ChaCha20Poly1305::new(Key::from_slice(&bytes))))
    }

    fn seal(&self, plaintext: &[u8]) -> String {
        let nonce = ChaCha20Poly1305::generate_nonce(&mut OsRng);
        // Encryption with a fresh nonce cannot fail for inputs of this size.
        let ciphertext = self.0.encrypt(&nonce, plaintext).unwrap_or_default();
        let mut sealed = nonce.to_vec();
        sealed.extend(ciphertext);
        format!("{SEALED_PREFIX}{}", BASE64.encode(sealed))
    }

    fn open(&self, sealed: &str, what: &str) -> Result<Vec<u8>, SecretError> {
        let error = || SecretError::Open {
            what: what.to_owned(),
        };
        let bytes = BASE64
            .decode(sealed.strip_prefix(SEALED_PREFIX).ok_or_else(error)?)
            .map_err(|_| error())?;
        if bytes.len() < 12 {
            return Err(error());
        }
        let (nonce, ciphertext) = bytes.split_at(12);
        self.0
            .decrypt(Nonce::from_slice(nonce), ciphertext)
            .map_err(|_| error())
    }
}

fn bad_key(from: String) -> SecretError {
    SecretError::BadKey { from }
}

fn describe(object: &Value) -> String {
    let name = object.name().unwrap_or("?");
    let namespace = object.namespace().unwrap_or("?");
    format!("Credential {namespace}/{name}")
}

/// `spec.sealed` of a stored Credential (read alone: the rest of the spec may be
/// anything a client sent).
fn sealed(object: &Value) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Sealed {
        sealed: Option<String>,
    }
    object.spec::<Sealed>()?.sealed
}

/// The plaintext secret fields written in a Credential object, if any.
pub fn plaintext_secrets(object: &Value) -> Option<CredentialSecrets> {
    let spec = object.get("spec")?;
    let secrets = CredentialSecrets {
        password: spec
            .get("password")
            .and_then(Value::as_str)
            .map(str::to_owned),
        token: spec.get("token").and_then(Value::as_str).map(str::to_owned),
        ssh_private_key: spec
            .get("sshPrivateKey")
            .and_then(Value::as_str)
            .map(str::to_owned),
    };
    (secrets != CredentialSecrets::default()).then_some(secrets)
}

/// Replaces a Credential's plaintext secret fields by `spec.sealed` and records which
/// fields are set in `status.secretFields`. With no plaintext fields, `previous` (the
/// stored object) keeps its sealed secrets, so a read-modify-write loses nothing.
pub fn seal_credential(
    key: &SecretKey,
    object: &mut Value,
    previous: Option<&Value>,
) -> Result<(), SecretError> {
    let (sealed, fields) = match plaintext_secrets(object) {
        Some(secrets) => {
            let text = serde_json::to_vec(&secrets).unwrap_or_default();
            (Some(key.seal(&text)), secrets.field_names())
        }
        None => match previous {
            Some(previous) => {
                let secrets = open_credential(key, previous)?;
                (sealed(previous), secrets.field_names())
            }
            None => (None, Vec::new()),
        },
    };
    redact(object);
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
        && let Some(sealed) = sealed
    {
        spec.insert("sealed".into(), Value::String(sealed));
    }
    if let Some(map) = object.as_object_mut() {
        map.insert("status".into(), json!({"secretFields": fields}));
    }
    Ok(())
}

/// The secret values of a stored Credential.
pub fn open_credential(key: &SecretKey, object: &Value) -> Result<CredentialSecrets, SecretError> {
    let Some(sealed) = sealed(object) else {
        return Ok(CredentialSecrets::default());
    };
    let what = describe(object);
    let bytes = key.open(&sealed, &what)?;
    serde_json::from_slice(&bytes).map_err(|_| SecretError::Open { what })
}

/// Removes every secret (plaintext and sealed) from a Credential object, for the API.
pub fn redact(object: &mut Value) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        for field in SECRET_FIELDS {
            spec.remove(field);
        }
        spec.remove("sealed");
    }
    // `kubectl apply` keeps the whole applied document, secrets in plain text, in this
    // annotation: shown, it would give them back.
    if let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
}

/// Where `kubectl apply` (client-side) keeps the document it last applied.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(password: Option<&str>) -> Value {
        let mut object = json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Credential",
            "metadata": {"name": "registry", "namespace": "demo"},
            "spec": {"type": "image", "repoURL": "127.0.0.1:5000/demo/app", "username": "ci"}
        });
        if let Some(password) = password {
            object["spec"]["password"] = json!(password);
        }
        object
    }

    #[test]
    fn redacting_drops_the_secrets_and_kubectls_copy_of_them() {
        let mut object = credential(Some("hunter2-secret"));
        let applied = object.to_string();
        object["metadata"]["annotations"] = json!({LAST_APPLIED_ANNOTATION: applied, "team": "a"});
        redact(&mut object);
        assert!(!object.to_string().contains("hunter2-secret"), "{object}");
        assert_eq!(object["metadata"]["annotations"], json!({"team": "a"}));
    }

    #[test]
    fn sealing_hides_the_secret_and_opening_returns_it() {
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::load(dir.path()).unwrap();
        let mut object = credential(Some("hunter2-secret"));
        seal_credential(&key, &mut object, None).unwrap();
        let text = object.to_string();
        assert!(!text.contains("hunter2-secret"), "{text}");
        assert_eq!(object["status"]["secretFields"], json!(["password"]));
        let secrets = open_credential(&key, &object).unwrap();
        assert_eq!(secrets.password.as_deref(), Some("hunter2-secret"));
        assert!(!format!("{secrets:?}").contains("hunter2"));

        let reloaded = SecretKey::load(dir.path()).unwrap();
        assert_eq!(
            open_credential(&reloaded, &object).unwrap(),
            secrets,
            "the key file persists"
        );
    }

    #[test]
    fn an_update_without_secrets_keeps_the_sealed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::load(dir.path()).unwrap();
        let mut stored = credential(Some("s3cret"));
        seal_credential(&key, &mut stored, None).unwrap();
        let mut edited = credential(None);
        edited["spec"]["username"] = json!("robot");
        seal_credential(&key, &mut edited, Some(&stored)).unwrap();
        assert_eq!(
            open_credential(&key, &edited).unwrap().password.as_deref(),
            Some("s3cret")
        );
    }

    #[test]
    fn a_wrong_key_is_a_clear_error() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let mut object = credential(Some("pw"));
        seal_credential(&SecretKey::load(a.path()).unwrap(), &mut object, None).unwrap();
        let error = open_credential(&SecretKey::load(b.path()).unwrap(), &object).unwrap_err();
        assert!(
            error.to_string().contains("Credential demo/registry"),
            "{error}"
        );
    }

    #[test]
    fn a_damaged_key_file_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(KEY_FILE), "not-a-key").unwrap();
        let Err(error) = SecretKey::load(dir.path()) else {
            panic!("a damaged key file was accepted");
        };
        let text = error.to_string();
        assert!(text.contains(KEY_FILE), "{text}");
        assert!(!text.contains("not-a-key"), "{text}");
    }

    #[test]
    fn the_key_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        SecretKey::load(dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
