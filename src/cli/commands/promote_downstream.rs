//! `dray promote --downstream-from S [--freight ID | --alias A]`: promote into every Stage
//! fed by S (each Stage whose `requestedFreight` names S among its `sources.stages`) the
//! Freight S holds, or the one given. Each Stage is asked on its own: the promotions the
//! server accepts are requested and printed, and a Stage that refuses is printed with its
//! reason while the others still go; the command then fails naming the refused ones.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::FreightChoice;
use super::promote::AfterSuccess;
use crate::api::{Promotion, Stage};
use crate::cli::{CliError, Context};
use crate::server::promotions::PromoteBody;

/// What `--downstream-from` asks for.
#[derive(Debug)]
pub struct Downstream {
    /// The upstream Stage.
    pub upstream: String,
    /// The Freight, when given; otherwise the one the upstream Stage holds.
    pub which: FreightChoice,
    /// The `--override-window` reason.
    pub override_window: Option<String>,
    /// With `--wait`: how long to follow each promotion, and whether to wait for its
    /// verification too.
    pub wait: Option<(Duration, AfterSuccess)>,
}

/// The Stages fed by `upstream`, by name, in the order listed.
pub fn fed_by<'a>(stages: &'a [Stage], upstream: &str) -> Vec<&'a str> {
    stages
        .iter()
        .filter(|stage| {
            stage.spec.requested_freight.iter().any(|request| {
                request
                    .sources
                    .stages
                    .iter()
                    .any(|source| source == upstream)
            })
        })
        .filter_map(|stage| stage.metadata.name.as_deref())
        .collect()
}

/// Runs `dray promote --downstream-from`.
pub async fn run(ctx: &Context, args: Downstream) -> Result<(), CliError> {
    let project = ctx.project().await?;
    let stages_path = format!("/api/v1/projects/{project}/stages");
    let listed: Vec<Value> = ctx.client.get(&stages_path).await?;
    let stages: Vec<Stage> = listed
        .into_iter()
        .filter_map(|s| serde_json::from_value(s).ok())
        .collect();
    let Some(upstream) = stages
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(args.upstream.as_str()))
    else {
        return Err(CliError::usage(
            format!(
                "there is no Stage `{}` in project `{project}`",
                args.upstream
            ),
            format!("list the Stages with `dray get stages -p {project}`"),
        ));
    };
    let downstream = fed_by(&stages, &args.upstream);
    if downstream.is_empty() {
        return Err(CliError::usage(
            format!(
                "no Stage in project `{project}` is fed by `{}` (none names it in `requestedFreight[].sources.stages`)",
                args.upstream
            ),
            "promote into one Stage with `dray promote --stage S`",
        ));
    }
    let (freight, alias, shown) = match (args.which.freight, args.which.alias) {
        (Some(id), _) => (Some(id.clone()), None, id),
        (None, Some(alias)) => (None, Some(alias.clone()), alias),
        (None, None) => {
            let held = upstream
                .status
                .as_ref()
                .and_then(|s| s.current_freight.as_ref())
                .ok_or_else(|| {
                    CliError::usage(
                        format!(
                            "Stage `{}` holds no Freight yet, so there is nothing to promote downstream",
                            args.upstream
                        ),
                        "promote into it first, or name the Freight with --freight or --alias",
                    )
                })?;
            let shown = if held.alias.is_empty() {
                held.name.clone()
            } else {
                held.alias.clone()
            };
            (Some(held.name.clone()), None, shown)
        }
    };
    println!(
        "promoting {shown} into the {} Stage(s) fed by {}: {}",
        downstream.len(),
        args.upstream,
        downstream.join(", ")
    );
    let mut requested = Vec::new();
    let mut refused = Vec::new();
    for stage in &downstream {
        let body = PromoteBody {
            freight: freight.clone(),
            alias: alias.clone(),
            override_window: args.override_window.clone(),
        };
        let path = format!("/api/v1/projects/{project}/stages/{stage}/promote");
        match ctx
            .client
            .send::<Promotion>(Method::POST, &path, Some(&body))
            .await
        {
            Ok(promotion) => {
                let name = promotion.metadata.name.unwrap_or_default();
                println!("stage {stage}: promotion {name} requested");
                requested.push(name);
            }
            Err(error @ (CliError::Api { .. } | CliError::Usage { .. })) => {
                let hint = error.hint().map(|h| format!(" ({h})")).unwrap_or_default();
                println!("stage {stage}: refused: {error}{hint}");
                for reason in error.details() {
                    println!("  {reason}");
                }
                refused.push(*stage);
            }
            Err(other) => return Err(other),
        }
    }
    let mut failed = Vec::new();
    if let Some((timeout, after)) = args.wait {
        for name in &requested {
            if let Err(error) = super::promote::follow(ctx, &project, name, timeout, after).await {
                println!("{error}");
                failed.push(name.clone());
            }
        }
    }
    if refused.is_empty() && failed.is_empty() {
        return Ok(());
    }
    let mut problems = Vec::new();
    if !refused.is_empty() {
        problems.push(format!(
            "{} of {} Stage(s) refused the promotion: {}",
            refused.len(),
            downstream.len(),
            refused.join(", ")
        ));
    }
    if !failed.is_empty() {
        problems.push(format!(
            "promotion(s) that did not succeed: {}",
            failed.join(", ")
        ));
    }
    Err(CliError::Local(format!(
        "{}; see each Stage's line above for why",
        problems.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, sources: &[&str]) -> Stage {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
            "metadata": {"name": name, "namespace": "demo"},
            "spec": {"requestedFreight": [{
                "origin": {"kind": "Warehouse", "name": "app"},
                "sources": {"direct": sources.is_empty(), "stages": sources}}]}
        }))
        .unwrap()
    }

    #[test]
    fn fed_by_lists_every_stage_naming_the_upstream() {
        let stages = vec![
            stage("dev", &[]),
            stage("staging-eu", &["dev"]),
            stage("staging-us", &["dev", "qa"]),
            stage("prod", &["staging-eu"]),
        ];
        assert_eq!(fed_by(&stages, "dev"), ["staging-eu", "staging-us"]);
        assert_eq!(fed_by(&stages, "staging-eu"), ["prod"]);
        assert!(fed_by(&stages, "prod").is_empty());
    }
}
