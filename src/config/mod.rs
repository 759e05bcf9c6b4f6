//! Loading and validating YAML resources: what `dray apply` (and the server behind it) run
//! before anything is stored.
//!
//! [`read_paths`] finds and reads files; [`load`] parses every document of every file and
//! checks them all together, returning either the [`Manifest`]s or **every** problem at
//! once, each located by file, document, line and field, with a hint:
//!
//! ```text
//! examples/bad.yaml:14: document 2 (Stage demo/staging): spec.requestedFreight[0].sources.stages[0]: upstream stage `qa` does not exist in project `demo`
//!   hint: define a Stage named `qa`, or use one of: `dev`
//! ```
//!
//! The checks, in order, one file each: YAML syntax and positions (`yaml`), the envelope
//! and each document alone (`document`: unknown fields in `schema_check`, types in `typed`,
//! names in `names`, durations in `durations`, kind-specific rules in `semantics`,
//! `steps` and `analysis`), then the batch as a whole
//! (`references`, `cycles`). A document with misspelled or mistyped fields still gets its
//! rules and reference checks, on what could be read of it (misspellings respelled, mistyped
//! fields left out), so that fixing one kind of mistake never reveals another. What a webhook secret must be is in `webhook_secret` (the
//! webhook receivers apply the same rule at request time). Errors and hints are built with
//! `error`, `path` and `crate::api::suggest`; files are found by `files`. This module does not store
//! anything, and knows nothing of the server or the CLI.

mod analysis;
mod argo_rollouts;
mod argocd;
mod cycles;
mod document;
mod durations;
mod error;
mod files;
mod kargo;
mod names;
mod notifications;
mod path;
mod references;
mod schema_check;
mod semantics;
mod signoff;
mod steps;
mod typed;
pub mod webhook_secret;
mod yaml;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::api::ObjectKey;

pub use error::{ConfigError, ConfigErrors};
pub use files::read_paths;

/// A configuration file's name and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// The path as given or found, used in errors.
    pub path: String,
    /// The file's text.
    pub content: String,
}

/// Where a document was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentOrigin {
    /// The file.
    pub file: String,
    /// The document's position in the file, counting from 1 (empty documents count too).
    pub document: usize,
    /// The line on which the document's content starts.
    pub line: usize,
}

/// One valid resource from the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Its identity.
    pub key: ObjectKey,
    /// The whole object as JSON (apiVersion, kind, metadata, spec/top-level fields, status if
    /// given), with `metadata.namespace` filled in and server-set metadata
    /// (`resourceVersion`, `uid`, `creationTimestamp`, `generation`) dropped.
    pub object: serde_json::Value,
    /// Where it was written.
    pub origin: DocumentOrigin,
}

/// Parses and validates all `files` together.
///
/// `existing` holds resources already stored (body = the full JSON object) so that
/// references to them resolve; documents in the batch override stored ones with the same
/// key. `default_namespace` fills `metadata.namespace` for namespaced kinds that omit it.
/// Returns every error found, sorted by file (in the order given), document and line.
pub fn load(
    files: &[SourceFile],
    default_namespace: Option<&str>,
    existing: &BTreeMap<ObjectKey, serde_json::Value>,
) -> Result<Vec<Manifest>, ConfigErrors> {
    let mut errors = Vec::new();
    let mut docs = Vec::new();
    let mut is_complete = true;
    let mut schemas = document::Schemas::default();
    for file in files {
        let stream = yaml::parse(&file.content);
        if let Some(e) = stream.error {
            is_complete = false;
            errors.push(syntax_error(file, &e));
        }
        for doc in stream.documents {
            docs.push(document::check(
                &file.path,
                doc,
                default_namespace,
                &mut schemas,
            ));
        }
    }
    for doc in &docs {
        errors.extend(doc.issues.iter().map(|issue| doc.error(issue)));
    }
    let mut batch_issues = references::duplicates(&docs);
    // With a file unreadable past a syntax error, missing references prove nothing.
    if is_complete {
        batch_issues.extend(references::check(&docs, existing));
    }
    errors.extend(batch_issues.iter().map(|(i, issue)| docs[*i].error(issue)));
    if !errors.is_empty() {
        sort(&mut errors, files);
        return Err(ConfigErrors(errors));
    }
    Ok(docs
        .into_iter()
        .filter_map(|doc| {
            Some(Manifest {
                key: doc.key?,
                object: doc.object,
                origin: doc.origin,
            })
        })
        .collect())
}

/// Each document of `files` on its own, as Dray stores it (Kargo's and Argo Rollouts'
/// documents adopted as Dray's kinds), with every single-document check of [`load`] but
/// no reference between documents checked: what `dray convert` prints.
pub fn adopt(files: &[SourceFile]) -> Result<Vec<Manifest>, ConfigErrors> {
    let mut errors = Vec::new();
    let mut manifests = Vec::new();
    let mut schemas = document::Schemas::default();
    for file in files {
        let stream = yaml::parse(&file.content);
        if let Some(e) = stream.error {
            errors.push(syntax_error(file, &e));
        }
        for doc in stream.documents {
            let checked = document::check(&file.path, doc, None, &mut schemas);
            errors.extend(checked.issues.iter().map(|issue| checked.error(issue)));
            if let Some(key) = checked.key {
                manifests.push(Manifest {
                    key,
                    object: checked.object,
                    origin: checked.origin,
                });
            }
        }
    }
    if errors.is_empty() {
        Ok(manifests)
    } else {
        sort(&mut errors, files);
        Err(ConfigErrors(errors))
    }
}

/// [`read_paths`] then [`load`].
pub fn load_paths(
    paths: &[PathBuf],
    default_namespace: Option<&str>,
    existing: &BTreeMap<ObjectKey, serde_json::Value>,
) -> Result<Vec<Manifest>, ConfigErrors> {
    load(&read_paths(paths)?, default_namespace, existing)
}

fn syntax_error(file: &SourceFile, e: &yaml::SyntaxError) -> ConfigError {
    let text = file
        .content
        .lines()
        .nth(e.line.saturating_sub(1))
        .unwrap_or_default();
    let hint = if text.trim_start_matches(' ').starts_with('\t') {
        "indent with spaces: YAML does not allow tabs for indentation".to_owned()
    } else {
        "check indentation and quoting here; quote values that contain `: ` or ` #`, or start \
         with `*`, `&`, `!`, `{`, `[` or `%`"
            .to_owned()
    };
    ConfigError {
        file: file.path.clone(),
        document: e.document,
        kind: None,
        name: None,
        line: Some(e.line),
        field: None,
        message: format!("invalid YAML: {} (column {})", e.message, e.column),
        hint: Some(hint),
    }
}

/// Orders errors by file (as given), document and line; keeps the order of checks within
/// one line.
fn sort(errors: &mut [ConfigError], files: &[SourceFile]) {
    let order: HashMap<&str, usize> = files
        .iter()
        .enumerate()
        .rev()
        .map(|(i, f)| (f.path.as_str(), i))
        .collect();
    errors.sort_by_key(|e| {
        (
            order.get(e.file.as_str()).copied().unwrap_or(usize::MAX),
            e.document.unwrap_or(0),
            e.line.unwrap_or(0),
        )
    });
}

#[cfg(test)]
mod tests;
