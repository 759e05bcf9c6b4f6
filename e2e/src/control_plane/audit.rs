//! The API server's audit log, read back: one record per request (who, which verb, which
//! object, what status), for tests that ask who wrote what and benchmarks that count
//! requests.

use std::path::Path;

use anyhow::Result;
use serde_json::Value;

/// Every request at the `Metadata` level, recorded once when its response is complete
/// (watches once when they start).
pub(super) const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
";

/// One audited request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRecord {
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`).
    pub verb: String,
    /// The request URI (path and query).
    pub uri: String,
    /// The authenticated user.
    pub user: String,
    /// The resource (plural), if any.
    pub resource: String,
    /// The subresource (`status`), if any.
    pub subresource: String,
    /// The namespace, if any.
    pub namespace: String,
    /// The object's name, if any.
    pub name: String,
    /// The response's status code.
    pub code: u16,
}

/// Reads every record of the log at `path` (none when it does not exist yet). Only
/// `ResponseComplete` and `ResponseStarted` (watches) stages count, once per request.
pub(super) fn read(path: &Path) -> Result<Vec<AuditRecord>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut records = Vec::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            // The last line may be half written while the server runs.
            continue;
        };
        let stage = event["stage"].as_str().unwrap_or_default();
        let verb = event["verb"].as_str().unwrap_or_default();
        let counted = match verb {
            "watch" => stage == "ResponseStarted",
            _ => stage == "ResponseComplete",
        };
        if !counted {
            continue;
        }
        let field =
            |object: &str, key: &str| event[object][key].as_str().unwrap_or_default().to_owned();
        records.push(AuditRecord {
            verb: verb.to_owned(),
            uri: event["requestURI"].as_str().unwrap_or_default().to_owned(),
            user: field("user", "username"),
            resource: field("objectRef", "resource"),
            subresource: field("objectRef", "subresource"),
            namespace: field("objectRef", "namespace"),
            name: field("objectRef", "name"),
            code: event["responseStatus"]["code"].as_u64().unwrap_or_default() as u16,
        });
    }
    Ok(records)
}
