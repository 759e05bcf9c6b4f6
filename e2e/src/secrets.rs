//! The secrets a test process made, and the check that none of them shows up where it
//! must not: a `dray serve` log, a CLI output, an API response or a page.
//!
//! Owns a process-wide registry of (label, value). Whatever makes a secret calls
//! [`remember`]: [`crate::Credentials`] (the registry's htpasswd and the git server's
//! basic-auth passwords), the forge and Argo CD doubles' tokens, [`crate::Dray`] (its
//! bootstrap token, tokens printed by `dray token create`, secret-looking options and the
//! Credential documents it applies with `dray apply -f`) and the registry's notification
//! token. [`check`] looks for every remembered value in a text and fails naming the
//! secret by its label and where it was seen, never printing the value. An output that
//! legitimately holds one secret once (a new token printed by `dray token create`, the
//! bootstrap banner) uses [`check_except`], which lets exactly one occurrence of exactly
//! that value pass.
//!
//! Values shorter than [`MIN_LEN`] are not remembered (too likely to occur by chance);
//! a multi-line value (an SSH key) is also remembered line by line, so a dump that
//! escapes its newlines is caught too.

use std::sync::{Mutex, MutexGuard};

use anyhow::{Result, bail};

/// The shortest value remembered as a secret.
pub const MIN_LEN: usize = 8;

/// The shortest line of a multi-line secret remembered on its own.
const MIN_LINE_LEN: usize = 16;

/// Field names whose values are secrets in a Credential document.
const CREDENTIAL_FIELDS: [&str; 3] = ["token", "password", "sshPrivateKey"];

#[derive(Debug)]
struct Secret {
    label: String,
    value: String,
}

static SECRETS: Mutex<Vec<Secret>> = Mutex::new(Vec::new());

fn secrets() -> MutexGuard<'static, Vec<Secret>> {
    SECRETS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Remembers `value` as a secret called `label` (e.g. "the git server's password for
/// `alice`") for the rest of the process. Short or already known values are ignored.
pub fn remember(label: impl Into<String>, value: &str) {
    let label = label.into();
    let mut known = secrets();
    let mut add = |label: String, value: &str| {
        if value.len() >= MIN_LEN && !known.iter().any(|s| s.value == value) {
            known.push(Secret {
                label,
                value: value.to_owned(),
            });
        }
    };
    let trimmed = value.trim();
    add(label.clone(), trimmed);
    if trimmed.contains('\n') {
        for (n, line) in trimmed.lines().map(str::trim).enumerate() {
            if line.len() >= MIN_LINE_LEN && !line.starts_with("-----") {
                add(format!("{label} (line {})", n + 1), line);
            }
        }
    }
}

/// Forgets `value` (for the harness's own tests, which plant a secret on purpose).
#[cfg(test)]
pub(crate) fn forget(value: &str) {
    secrets().retain(|s| !s.value.contains(value));
}

/// The labels of the remembered secrets that occur in `text`, after one occurrence of
/// each of `allowed` is taken out.
fn leaks(text: &str, allowed: &[&str]) -> Vec<String> {
    let mut text = text.to_owned();
    for value in allowed.iter().filter(|v| !v.is_empty()) {
        if let Some(at) = text.find(value) {
            text.replace_range(at..at + value.len(), "");
        }
    }
    secrets()
        .iter()
        .filter(|s| text.contains(&s.value))
        .map(|s| format!("`{}`", s.label))
        .collect()
}

/// Fails when a remembered secret occurs in `text`, naming it by label and saying
/// `place` (e.g. "the log of `dray serve` (…/dray.log)").
pub fn check(place: &str, text: &str) -> Result<()> {
    check_except(place, text, &[])
}

/// [`check`], letting exactly one occurrence of each value in `allowed` pass (for the
/// few outputs that hold a secret by design, such as `dray token create`'s).
pub fn check_except(place: &str, text: &str, allowed: &[&str]) -> Result<()> {
    let found = leaks(text, allowed);
    if found.is_empty() {
        return Ok(());
    }
    bail!(
        "secret {} leaked into {place}; hint: Dray must redact secrets in logs, API \
         responses and pages (the value is not shown here)",
        found.join(", ")
    )
}

/// Remembers the secret fields (`token`, `password`, `sshPrivateKey`) of every
/// `kind: Credential` document in `yaml`, block or flow style, labelled by the
/// Credential's name.
pub fn remember_credentials_in(yaml: &str) {
    for doc in yaml.split("\n---") {
        if !doc.lines().any(|l| {
            let l = l.trim();
            l == "kind: Credential" || l == "kind: \"Credential\""
        }) {
            continue;
        }
        let name = field_value(doc, "name").unwrap_or_else(|| "<unnamed>".into());
        for field in CREDENTIAL_FIELDS {
            for value in field_values(doc, field) {
                remember(format!("`spec.{field}` of Credential `{name}`"), &value);
            }
        }
    }
}

fn field_value(doc: &str, field: &str) -> Option<String> {
    field_values(doc, field).into_iter().next()
}

/// Every value of `field:` in a YAML document, found in its text: `field: value` (ends
/// at a newline, or a `,`/`}` in flow style), quoted values and `|` block scalars.
fn field_values(doc: &str, field: &str) -> Vec<String> {
    let key = format!("{field}:");
    let mut found = Vec::new();
    let lines: Vec<&str> = doc.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let mut rest = *line;
        while let Some(at) = rest.find(&key) {
            let before = rest[..at].chars().last();
            let after = &rest[at + key.len()..];
            rest = after;
            if before.is_some_and(|c| !matches!(c, ' ' | '{' | ',' | '-')) {
                continue;
            }
            let value = after.trim_start();
            if value.starts_with('|') || value.starts_with('>') {
                let indent = |l: &str| l.len() - l.trim_start().len();
                let own = indent(line);
                let block: Vec<&str> = lines[n + 1..]
                    .iter()
                    .take_while(|l| l.trim().is_empty() || indent(l) > own)
                    .map(|l| l.trim())
                    .collect();
                found.push(block.join("\n"));
                continue;
            }
            let value = match value.chars().next() {
                Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or_default(),
                _ => value
                    .split([',', '}'])
                    .next()
                    .unwrap_or_default()
                    .split(" #")
                    .next()
                    .unwrap_or_default()
                    .trim(),
            };
            if !value.is_empty() {
                found.push(value.to_owned());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_secret_is_named_by_label_and_never_shown() {
        remember("unit-test token", "unit-test-secret-4711");
        let err = check(
            "a unit test's log",
            "line 1\nBearer unit-test-secret-4711\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("`unit-test token`"), "{err}");
        assert!(err.contains("a unit test's log"), "{err}");
        assert!(!err.contains("unit-test-secret-4711"), "{err}");
        assert!(check("clean", "nothing here").is_ok());
    }

    #[test]
    fn an_allowed_output_passes_once_only() {
        remember("unit-test new token", "dray_unit_new_token_1234");
        let once = "dray_unit_new_token_1234\n";
        assert!(check_except("token create", once, &["dray_unit_new_token_1234"]).is_ok());
        let twice = "dray_unit_new_token_1234 dray_unit_new_token_1234";
        assert!(check_except("token create", twice, &["dray_unit_new_token_1234"]).is_err());
    }

    #[test]
    fn short_values_are_not_secrets() {
        remember("short", "abc");
        assert!(check("text", "abc abc").is_ok());
    }

    #[test]
    fn credential_documents_in_block_and_flow_style_are_remembered() {
        let yaml = "apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {name: hook, namespace: demo}\n\
                    spec: {type: webhook, token: flow-style-secret-1}\n---\n\
                    kind: Credential\nmetadata:\n  name: reg\nspec:\n  username: ci\n  password: \"quoted-secret-2\"\n\
                    ---\nkind: Credential\nmetadata:\n  name: signing\nspec:\n  sshPrivateKey: |\n    \
                    -----BEGIN OPENSSH PRIVATE KEY-----\n    b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n    \
                    -----END OPENSSH PRIVATE KEY-----\n---\nkind: Stage\nspec:\n  token: not-a-credential-3\n";
        remember_credentials_in(yaml);
        let err = check("x", "flow-style-secret-1").unwrap_err().to_string();
        assert!(err.contains("Credential `hook`"), "{err}");
        assert!(check("x", "quoted-secret-2").is_err());
        let escaped = r#"{"key":"-----BEGIN\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"}"#;
        let err = check("x", escaped).unwrap_err().to_string();
        assert!(err.contains("Credential `signing`"), "{err}");
        assert!(check("x", "not-a-credential-3").is_ok());
    }
}
