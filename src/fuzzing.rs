//! Entry points for fuzzing: one function per parser of untrusted input, each taking raw
//! bytes and returning nothing. A panic, an abort or a stack overflow in any of them is a
//! finding; an `Err` is the expected answer to bad input.
//!
//! The cargo-fuzz targets in `fuzz/` call these (see "Fuzzing" in `docs/decisions.md`),
//! and so do the bounded property tests that `cargo test` runs (`tests`), over inputs
//! generated and mutated from the seed corpus in `fuzz/corpus/<target>/`. Not an API:
//! hidden from the docs, and free to change with the parsers.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde_json::json;

use crate::config::{self, SourceFile};
use crate::discovery::git::select::{PathFilter, SemverConstraint, TagFilter, parse_version};
use crate::discovery::image::constraint::{Constraint, parse_tag};
use crate::discovery::image::repo::Repo;
use crate::expr::{ExprCache, ExprContext, Template, validate_condition, validate_template};
use crate::server::webhooks;

/// One fuzzing entry point: bytes in, nothing out.
pub type Target = fn(&[u8]);

/// Every target, by the name of its `fuzz/fuzz_targets/<name>.rs` and corpus folder.
pub const TARGETS: &[(&str, Target)] = &[
    ("yaml_load", yaml_load),
    ("template", template),
    ("cel_eval", cel_eval),
    ("webhook_payload", webhook_payload),
    ("image_reference", image_reference),
    ("git_tags", git_tags),
    ("step_config", dray_steps::fuzzing::step_config),
    ("git_ref", dray_steps::fuzzing::git_ref),
    ("yaml_edit", dray_steps::fuzzing::yaml_edit),
];

/// The YAML loader of `dray apply`: one file, checked as a batch with nothing stored.
pub fn yaml_load(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let files = [SourceFile {
        path: "fuzz.yaml".to_owned(),
        content: text.to_owned(),
    }];
    let _ = config::load(&files, Some("fuzz"), &BTreeMap::new());
}

/// `${{ }}` templates and `if` conditions as `dray apply` validates them.
pub fn template(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = crate::expr::has_expressions(&text);
    if let Ok(template) = Template::parse(&text) {
        let _ = template.single_expression();
        let _ = template.expressions().count();
    }
    let _ = validate_template(&text);
    let _ = validate_condition(&text);
}

/// The context expressions see while fuzzing: a little of everything.
fn context() -> ExprContext {
    let mut ctx = ExprContext {
        project: "fuzz".into(),
        stage: "dev".into(),
        promotion: "p-1".into(),
        actor: "admin".into(),
        ..ExprContext::default()
    };
    ctx.vars.insert("n".into(), json!(2));
    ctx.vars.insert("big".into(), json!(i64::MAX));
    ctx.vars.insert("name".into(), json!("app"));
    ctx.vars.insert("list".into(), json!([1, "two", 3.5, null]));
    ctx.vars.insert("map".into(), json!({"a": {"b": [true]}}));
    ctx.outputs
        .insert("clone".into(), json!({"commit": "abc123", "count": 3}));
    ctx.step_statuses
        .insert("clone".into(), "Succeeded".to_owned());
    ctx.freight.images.push(crate::api::FreightImage {
        repo_url: "ghcr.io/team/app".into(),
        tag: "1.2.3".into(),
        ..Default::default()
    });
    ctx.freight.commits.push(crate::api::FreightCommit {
        repo_url: "https://git.example/team/config.git".into(),
        id: "0123456789abcdef0123456789abcdef01234567".into(),
        ..Default::default()
    });
    ctx
}

/// One cache for the whole run, as the server keeps one: compiled programs are reused.
static CACHE: LazyLock<ExprCache> = LazyLock::new(ExprCache::new);
static CONTEXT: LazyLock<ExprContext> = LazyLock::new(context);

/// CEL compiled and evaluated against a small context: as a string with `${{ }}`, as a
/// condition, and as bare CEL.
pub fn cel_eval(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = CACHE.evaluate_string(&text, &CONTEXT);
    let _ = CACHE.evaluate_condition(&text, &CONTEXT);
    let _ = CACHE.evaluate_expression(&text, &CONTEXT);
}

/// A webhook delivery's body as each receiver kind reads it. The first line is the event
/// header (`push`, `Push Hook`, …), the rest is the body.
pub fn webhook_payload(data: &[u8]) {
    let (event, body) = match data.iter().position(|b| *b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (&b""[..], data),
    };
    let event = String::from_utf8_lossy(event);
    let _ = webhooks::read_payload(&event, body);
}

/// An image subscription's `repoURL`, its `semverConstraint` and its tags.
pub fn image_reference(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = Repo::parse(&text, false);
    let _ = Repo::parse(&text, true);
    if let Ok(constraint) = Constraint::parse(&text) {
        for tag in ["1.2.3", "v2.0.0-rc.1", "0.0.1"] {
            if let Some(version) = parse_tag(tag, false) {
                let _ = constraint.matches(&version);
            }
        }
    }
    let _ = parse_tag(&text, true);
    let _ = parse_tag(&text, false);
}

/// A git subscription's tags and filters: a tag as a version, `semverConstraint`,
/// `allowTags`/`ignoreTags` and `includePaths`/`excludePaths` (the first line is the pattern,
/// the rest the tag or path matched against it).
pub fn git_tags(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (pattern, subject) = text.split_once('\n').unwrap_or((&text, "v1.2.3"));
    let version = parse_version(subject, true);
    let _ = parse_version(subject, false);
    if let Ok(constraint) = SemverConstraint::new(Some(pattern)) {
        let _ = constraint.describe();
        if let Some(version) = &version {
            let _ = constraint.allows(version);
        }
    }
    let patterns = [pattern.to_owned()];
    if let Ok(filter) = TagFilter::new(&patterns, &[]) {
        let _ = filter.allows(subject);
    }
    if let Ok(filter) = PathFilter::new(&patterns, &patterns) {
        let _ = filter.is_relevant([subject]);
    }
}

#[cfg(test)]
mod tests;
