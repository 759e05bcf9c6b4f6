//! `dray get KIND [NAME] [-o table|wide|name|yaml|json] [-w]`: one resource or a listing,
//! filtered by `--stage` / `--warehouse` (each must name an existing resource), Stages in
//! pipeline order, Freight shown as `alias (short id)` wherever it appears.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::{
    BodyPart, FreightFields, Kind, PromotionSpec, ResourceBody as _, StageStatus, annotations,
};
use crate::cli::output::{self, freight_label};
use crate::cli::{CliError, Context};

use super::listing_filters::{Filtered, must_exist};
use super::watch::{self, Frame};

/// How `dray get` prints.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GetFormat {
    /// An aligned table.
    #[default]
    Table,
    /// The table with extra columns (full ids, messages).
    Wide,
    /// `kind/name`, one per line, as kubectl prints it.
    Name,
    /// YAML documents.
    Yaml,
    /// JSON.
    Json,
}

/// Arguments of `dray get`.
#[derive(clap::Args, Debug)]
pub struct GetArgs {
    /// The kind: projects, projectconfigs, credentials, roles, rolebindings, warehouses,
    /// freight, stages, promotiontasks, analysistemplates, promotions; or `board`, the
    /// release board across projects.
    pub kind: String,
    /// Show only this resource (Freight: its id, a unique id prefix or its alias). For the
    /// board: only projects whose name contains it.
    pub name: Option<String>,
    /// The output format.
    #[arg(short = 'o', long, value_enum, default_value_t = GetFormat::Table)]
    pub output: GetFormat,
    /// For freight: only Freight from this Warehouse. For stages: only Stages that take
    /// Freight from it. For the board: only projects (and Stages) taking Freight from it.
    #[arg(long)]
    pub warehouse: Option<String>,
    /// For promotions: only promotions into this Stage. For stages: only this Stage. For
    /// freight: every Freight with `available` or the reasons it may not enter this Stage
    /// (the gates promote checks, promotion windows included).
    #[arg(long)]
    pub stage: Option<String>,
    /// Keep watching: print the listing, then each resource again when it changes, until
    /// Ctrl-C.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// For the board: only projects with a Stage that needs attention (a failed
    /// promotion or verification, unhealthy, held, frozen, waiting).
    #[arg(long)]
    pub attention: bool,
}

/// Parses a kind as users type it, with a hint listing the kinds.
pub fn parse_kind(text: &str) -> Result<Kind, CliError> {
    Kind::from_user_input(text).ok_or_else(|| {
        let kinds: Vec<_> = Kind::ALL.iter().map(|k| k.plural()).collect();
        CliError::usage(
            format!("unknown kind `{text}`"),
            format!("use one of: {}", kinds.join(", ")),
        )
    })
}

/// Refuses a filter the kind has no use for, rather than ignoring it.
fn check_filters(kind: Kind, args: &GetArgs) -> Result<(), CliError> {
    if args.stage.is_some() && !matches!(kind, Kind::Stage | Kind::Freight | Kind::Promotion) {
        return Err(CliError::usage(
            format!("--stage does not filter {}", kind.plural()),
            "--stage filters stages, freight and promotions",
        ));
    }
    if args.warehouse.is_some() && !matches!(kind, Kind::Stage | Kind::Freight) {
        return Err(CliError::usage(
            format!("--warehouse does not filter {}", kind.plural()),
            "--warehouse filters stages and freight",
        ));
    }
    if args.watch && args.output == GetFormat::Yaml {
        return Err(CliError::usage(
            "--watch prints one line per change, which YAML is not",
            "use -o table, wide, name or json with --watch",
        ));
    }
    Ok(())
}

/// Runs `dray get`.
pub async fn run(ctx: &Context, args: GetArgs) -> Result<(), CliError> {
    if args.kind.eq_ignore_ascii_case("board") {
        return super::board::run(ctx, &args).await;
    }
    if args.attention {
        return Err(CliError::usage(
            "--attention filters only the board",
            "use `dray get board --attention`",
        ));
    }
    let kind = parse_kind(&args.kind)?;
    check_filters(kind, &args)?;
    let project = if !kind.is_namespaced() {
        None
    } else {
        Some(ctx.project().await?)
    };
    let project = project.as_deref();
    if args.watch {
        return watch::watch(|| frame(ctx, &args, kind, project)).await;
    }
    let (items, single) = fetch(ctx, &args, kind, project).await?;
    let text = match args.output {
        GetFormat::Json => {
            let value = match (single, items.first()) {
                (true, Some(item)) => item.clone(),
                _ => Value::Array(items),
            };
            let mut text = serde_json::to_string_pretty(&value)
                .map_err(|e| CliError::Local(format!("cannot render JSON: {e}")))?;
            text.push('\n');
            text
        }
        GetFormat::Yaml => output::yaml(&items)?,
        GetFormat::Name => items
            .iter()
            .map(|i| format!("{}\n", name_line(kind, i)))
            .collect(),
        GetFormat::Table | GetFormat::Wide if items.is_empty() => {
            eprintln!("no {} found", kind.plural());
            return Ok(());
        }
        GetFormat::Table | GetFormat::Wide => {
            let wide = args.output == GetFormat::Wide;
            let (header, rows) = table(ctx, project, kind, &items, wide).await?;
            output::table(&header, &rows)
        }
    };
    print!("{text}");
    Ok(())
}

/// `kind/name`, as `-o name` prints it.
fn name_line(kind: Kind, item: &Value) -> String {
    format!(
        "{}/{}",
        kind.as_str().to_lowercase(),
        item.name().unwrap_or_default()
    )
}

/// One poll of `--watch`: the listing as lines keyed by resource name.
async fn frame(
    ctx: &Context,
    args: &GetArgs,
    kind: Kind,
    project: Option<&str>,
) -> Result<Frame, CliError> {
    let (items, _) = fetch(ctx, args, kind, project).await?;
    let key = |i: &Value| i.name().unwrap_or_default().to_owned();
    match args.output {
        GetFormat::Name => Ok(Frame {
            header: None,
            lines: items.iter().map(|i| (key(i), name_line(kind, i))).collect(),
        }),
        GetFormat::Json | GetFormat::Yaml => Ok(Frame {
            header: None,
            lines: items.iter().map(|i| (key(i), i.to_string())).collect(),
        }),
        GetFormat::Table | GetFormat::Wide => {
            let wide = args.output == GetFormat::Wide;
            let (header, rows) = table(ctx, project, kind, &items, wide).await?;
            let text = output::table(&header, &rows);
            let mut lines = text.lines().map(str::to_owned);
            let header = lines.next();
            Ok(Frame {
                header,
                lines: items.iter().map(key).zip(lines).collect(),
            })
        }
    }
}

/// The names of the project's `plural` (stages, warehouses).
async fn names_of(ctx: &Context, project: &str, plural: &str) -> Result<Vec<String>, CliError> {
    let all: Vec<Value> = ctx
        .client
        .get(&format!("/api/v1/projects/{project}/{plural}"))
        .await?;
    Ok(all
        .iter()
        .filter_map(|i| i.name().map(str::to_owned))
        .collect())
}

/// Checks that a filter names an existing Stage or Warehouse of `project`.
async fn check_exists(
    ctx: &Context,
    project: &str,
    what: Filtered,
    wanted: &str,
) -> Result<(), CliError> {
    let plural = match what {
        Filtered::Stage => "stages",
        Filtered::Warehouse => "warehouses",
    };
    let names = names_of(ctx, project, plural).await?;
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    must_exist(what, wanted, &names, project)
}

/// The resources to show (filtered, in listing order), and whether one was asked for.
async fn fetch(
    ctx: &Context,
    args: &GetArgs,
    kind: Kind,
    project: Option<&str>,
) -> Result<(Vec<Value>, bool), CliError> {
    let Some(project) = project else {
        // A cluster-scoped kind: `/api/v1/projects`, `/api/v1/clusterpromotiontasks`.
        let base = format!("/api/v1/{}", kind.plural());
        return Ok(match &args.name {
            Some(name) => (vec![ctx.client.get(&format!("{base}/{name}")).await?], true),
            None => (ctx.client.get(&base).await?, false),
        });
    };
    if let Some(stage) = &args.stage {
        check_exists(ctx, project, Filtered::Stage, stage).await?;
    }
    if let Some(warehouse) = &args.warehouse {
        check_exists(ctx, project, Filtered::Warehouse, warehouse).await?;
    }
    let base = format!("/api/v1/projects/{project}/{}", kind.plural());
    let (mut items, single) = match (&args.name, kind, &args.stage) {
        (Some(name), _, _) => (vec![ctx.client.get(&format!("{base}/{name}")).await?], true),
        (None, Kind::Freight, Some(stage)) => {
            let path = format!("/api/v1/projects/{project}/stages/{stage}/freight");
            (ctx.client.get::<Vec<Value>>(&path).await?, false)
        }
        (None, _, _) => (ctx.client.get::<Vec<Value>>(&base).await?, false),
    };
    if single {
        return Ok((items, true));
    }
    match kind {
        Kind::Promotion => {
            if let Some(stage) = &args.stage {
                items.retain(|p| {
                    p.spec::<PromotionSpec>()
                        .is_some_and(|spec| &spec.stage == stage)
                });
            }
        }
        Kind::Stage => {
            if let Some(stage) = &args.stage {
                items.retain(|s| s.name() == Some(stage.as_str()));
            }
            if let Some(warehouse) = &args.warehouse {
                items.retain(|s| takes_from(s, warehouse));
            }
            items = super::stage_order::pipeline_order(items);
        }
        Kind::Freight => items = newest_first(items, args.warehouse.as_deref()),
        _ => {}
    }
    Ok((items, false))
}

/// Whether the Stage requests Freight from the Warehouse `warehouse`.
fn takes_from(stage: &Value, warehouse: &str) -> bool {
    array(stage, "/spec/requestedFreight")
        .iter()
        .any(|r| r.pointer("/origin/name").and_then(Value::as_str) == Some(warehouse))
}

/// The table of `items`: the kind's columns, then what only the server's other listings
/// say (what a running promotion waits for, Freight availability).
async fn table(
    ctx: &Context,
    project: Option<&str>,
    kind: Kind,
    items: &[Value],
    wide: bool,
) -> Result<(Vec<&'static str>, Vec<Vec<String>>), CliError> {
    let aliases = match (kind, project) {
        (Kind::Promotion, Some(project)) => {
            let freight: Vec<Value> = ctx
                .client
                .get(&format!("/api/v1/projects/{project}/freight"))
                .await?;
            freight
                .iter()
                .filter_map(|f| Some((f.name()?.to_owned(), f.get("alias")?.as_str()?.to_owned())))
                .collect()
        }
        _ => BTreeMap::new(),
    };
    let (mut header, mut rows) = columns(kind, items, &aliases, wide);
    let current_promotions: Vec<Option<String>> = match kind {
        Kind::Stage => items
            .iter()
            .map(|i| {
                i.status::<StageStatus>()
                    .and_then(|status| status.current_promotion)
            })
            .collect(),
        _ => Vec::new(),
    };
    if let Some(project) = project
        && current_promotions.iter().any(Option::is_some)
    {
        // What each running promotion waits for (e.g. a review, with its link), from
        // one list call rather than one call per Stage.
        let promotions: Vec<Value> = ctx
            .client
            .get(&format!("/api/v1/projects/{project}/promotions"))
            .await?;
        header.push("WAITING FOR");
        for (row, current) in rows.iter_mut().zip(&current_promotions) {
            let message = promotions
                .iter()
                .find(|p| current.is_some() && p.name() == current.as_deref())
                .and_then(|p| p.status::<PromotionMessage>())
                .map(|status| status.message)
                .and_then(|m| {
                    m.split_once(" is waiting for ")
                        .map(|(_, what)| what.to_owned())
                })
                .unwrap_or_else(|| "-".into());
            row.push(message);
        }
    }
    if items.iter().any(|i| i.get("availability").is_some()) {
        header.push("AVAILABILITY");
        for (row, item) in rows.iter_mut().zip(items) {
            row.push(availability_cell(item));
        }
    }
    if items
        .iter()
        .any(|i| i.pointer("/availability/signoffs").is_some())
    {
        header.push("SIGN-OFFS");
        for (row, item) in rows.iter_mut().zip(items) {
            row.push(signoffs_cell(item));
        }
    }
    Ok((header, rows))
}

/// `have/required`, and who signed off: `1/2 (ann)`.
fn signoffs_cell(item: &Value) -> String {
    let Some(signoffs) = item.pointer("/availability/signoffs") else {
        return "-".into();
    };
    let who: Vec<&str> = signoffs["signedOffBy"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let required = signoffs["required"].as_u64().unwrap_or_default();
    match who.is_empty() {
        true => format!("0/{required}"),
        false => format!("{}/{required} ({})", who.len(), who.join(", ")),
    }
}

/// `available`, or every reason the Freight may not enter the Stage.
fn availability_cell(item: &Value) -> String {
    let gates = &item["availability"];
    if gates["available"].as_bool() == Some(true) {
        return match gates["approvedBy"].as_str() {
            Some(by) => format!("available (approved by {by})"),
            None => "available".into(),
        };
    }
    let reasons: Vec<&str> = gates["reasons"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    reasons.join("; ")
}

/// A Promotion status's `message` alone (the rest, step logs included, is not needed).
#[derive(serde::Deserialize)]
struct PromotionMessage {
    #[serde(default)]
    message: String,
}

/// Freight newest first, optionally only from one Warehouse.
fn newest_first(mut items: Vec<Value>, warehouse: Option<&str>) -> Vec<Value> {
    if let Some(warehouse) = warehouse {
        items.retain(|f| {
            f.part::<FreightFields>(BodyPart::Whole)
                .ok()
                .flatten()
                .is_some_and(|fields| fields.origin.name == warehouse)
        });
    }
    let created = |f: &Value| f.creation_timestamp().unwrap_or_default().to_owned();
    let revision = |f: &Value| {
        f.metadata()
            .and_then(|meta| meta.get("resourceVersion"))
            .and_then(Value::as_str)
            .and_then(|r| r.parse::<u64>().ok())
            .unwrap_or_default()
    };
    items.sort_by_key(|f| std::cmp::Reverse((created(f), revision(f))));
    items
}

/// A Warehouse's `FreightCreationCriteriaSatisfied` condition: `satisfied`, the refusal's
/// message, or `-` without criteria.
fn criteria_verdict(warehouse: &Value) -> String {
    let condition = array(warehouse, "/status/conditions")
        .iter()
        .find(|c| text(c, "/type") == crate::api::CRITERIA_CONDITION);
    match condition {
        None => "-".to_owned(),
        Some(c) if text(c, "/status") == "True" => "satisfied".to_owned(),
        Some(c) => text(c, "/message"),
    }
}

fn text(value: &Value, pointer: &str) -> String {
    match value.pointer(pointer) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => "-".into(),
    }
}

fn array<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A ProjectConfig's deliveries in a few words: how many wait, and each notification
/// that gave up, with its count and last error (`-` when all is well).
fn deliveries(item: &Value) -> String {
    let mut parts = Vec::new();
    let pending = array(item, "/status/outbox/pending").len();
    if pending > 0 {
        parts.push(format!("{pending} pending"));
    }
    for record in array(item, "/status/notifications") {
        let failures = record["failures"].as_u64().unwrap_or(0);
        if let Some(error) = record["lastError"].as_str().filter(|_| failures > 0) {
            parts.push(format!(
                "{}: {failures} failed, last: {error}",
                record["name"].as_str().unwrap_or("?")
            ));
        }
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join("; ")
    }
}

fn age(item: &Value) -> String {
    output::age(item.creation_timestamp())
}

fn short_digest(digest: &str) -> String {
    match digest.split_once(':') {
        Some((algorithm, hex)) => format!("{algorithm}:{}", &hex[..hex.len().min(12)]),
        None => digest.to_owned(),
    }
}

/// The kind's columns (with `wide`, the extra ones at the end); `aliases` maps Freight
/// ids to aliases where a row names Freight by id.
fn columns(
    kind: Kind,
    items: &[Value],
    aliases: &BTreeMap<String, String>,
    wide: bool,
) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let (mut header, mut rows) = narrow_columns(kind, items, aliases);
    if wide {
        let extra: Vec<(&'static str, &str)> = match kind {
            Kind::Freight => vec![("FULL ID", "/metadata/name")],
            Kind::Stage => vec![("FREIGHT ID", "/status/currentFreight/name")],
            Kind::Promotion => vec![
                ("FREIGHT ID", "/spec/freight"),
                ("MESSAGE", "/status/message"),
            ],
            _ => vec![("RESOURCE VERSION", "/metadata/resourceVersion")],
        };
        for (column, pointer) in extra {
            header.push(column);
            for (row, item) in rows.iter_mut().zip(items) {
                row.push(text(item, pointer));
            }
        }
    }
    (header, rows)
}

fn narrow_columns(
    kind: Kind,
    items: &[Value],
    aliases: &BTreeMap<String, String>,
) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let name = |item: &Value| text(item, "/metadata/name");
    match kind {
        Kind::Project => (
            vec!["NAME", "DESCRIPTION", "AGE"],
            items
                .iter()
                .map(|i| vec![name(i), text(i, "/spec/description"), age(i)])
                .collect(),
        ),
        Kind::ProjectConfig => (
            vec![
                "NAME",
                "POLICIES",
                "RECEIVERS",
                "NOTIFICATIONS",
                "DELIVERIES",
                "AGE",
            ],
            items
                .iter()
                .map(|i| {
                    vec![
                        name(i),
                        array(i, "/spec/promotionPolicies").len().to_string(),
                        array(i, "/spec/webhookReceivers").len().to_string(),
                        array(i, "/spec/notifications").len().to_string(),
                        deliveries(i),
                        age(i),
                    ]
                })
                .collect(),
        ),
        Kind::Credential => (
            vec!["NAME", "TYPE", "REPOSITORY", "USERNAME", "SECRETS", "AGE"],
            items
                .iter()
                .map(|i| {
                    let repo = match text(i, "/spec/repoURL").as_str() {
                        "-" => text(i, "/spec/repoURLPattern"),
                        url => url.to_owned(),
                    };
                    let secrets: Vec<&str> = array(i, "/status/secretFields")
                        .iter()
                        .filter_map(Value::as_str)
                        .collect();
                    vec![
                        name(i),
                        text(i, "/spec/type"),
                        repo,
                        text(i, "/spec/username"),
                        if secrets.is_empty() {
                            "-".into()
                        } else {
                            secrets.join(",")
                        },
                        age(i),
                    ]
                })
                .collect(),
        ),
        Kind::Role => (
            vec!["NAME", "RULES", "AGE"],
            items
                .iter()
                .map(|i| {
                    let rules: Vec<String> = array(i, "/rules")
                        .iter()
                        .map(|rule| {
                            let words = |pointer| {
                                array(rule, pointer)
                                    .iter()
                                    .filter_map(Value::as_str)
                                    .collect::<Vec<_>>()
                                    .join(",")
                            };
                            let names = words("/resourceNames");
                            let on = if names.is_empty() {
                                words("/resources")
                            } else {
                                format!("{}/{names}", words("/resources"))
                            };
                            format!("{} on {on}", words("/verbs"))
                        })
                        .collect();
                    let built_in = i
                        .metadata()
                        .and_then(|meta| meta.get("labels")?.get(annotations::BUILTIN_LABEL))
                        .is_some();
                    vec![
                        name(i),
                        rules.join("; "),
                        if built_in { "built-in".into() } else { age(i) },
                    ]
                })
                .collect(),
        ),
        Kind::RoleBinding => (
            vec!["NAME", "ROLE", "SUBJECTS", "AGE"],
            items
                .iter()
                .map(|i| {
                    let subjects: Vec<String> = array(i, "/subjects")
                        .iter()
                        .map(|s| format!("{}:{}", text(s, "/kind"), text(s, "/name")))
                        .collect();
                    vec![
                        name(i),
                        text(i, "/roleRef/name"),
                        subjects.join(","),
                        age(i),
                    ]
                })
                .collect(),
        ),
        Kind::Warehouse => (
            vec!["NAME", "SUBSCRIPTIONS", "INTERVAL", "AGE", "CRITERIA"],
            items
                .iter()
                .map(|i| {
                    let subscriptions: Vec<String> = array(i, "/spec/subscriptions")
                        .iter()
                        .map(|s| {
                            if let Some(image) = s.get("image") {
                                format!("image:{}", text(image, "/repoURL"))
                            } else if let Some(chart) = s.get("chart") {
                                format!("chart:{}", text(chart, "/repoURL"))
                            } else {
                                format!("git:{}", text(s, "/git/repoURL"))
                            }
                        })
                        .collect();
                    let interval = match text(i, "/spec/interval").as_str() {
                        "-" => "5m".to_owned(),
                        other => other.to_owned(),
                    };
                    vec![
                        name(i),
                        subscriptions.join(","),
                        interval,
                        age(i),
                        criteria_verdict(i),
                    ]
                })
                .collect(),
        ),
        Kind::Freight => (
            vec![
                "ALIAS", "ID", "ORIGIN", "STAGES", "IMAGES", "COMMITS", "CHARTS", "AGE", "WARNINGS",
            ],
            items
                .iter()
                .map(|i| {
                    let images: Vec<String> = array(i, "/images")
                        .iter()
                        .map(|img| {
                            format!(
                                "{}:{}@{}",
                                text(img, "/repoURL"),
                                text(img, "/tag"),
                                short_digest(&text(img, "/digest"))
                            )
                        })
                        .collect();
                    let commits: Vec<String> = array(i, "/commits")
                        .iter()
                        .map(|c| {
                            let id = text(c, "/id");
                            format!("{} {}", &id[..id.len().min(7)], text(c, "/message"))
                        })
                        .collect();
                    let charts: Vec<String> = array(i, "/charts")
                        .iter()
                        .map(|c| {
                            let chart = format!("{}:{}", text(c, "/name"), text(c, "/version"));
                            match c.get("digest").and_then(Value::as_str) {
                                Some(digest) => format!("{chart}@{}", short_digest(digest)),
                                None => chart,
                            }
                        })
                        .collect();
                    let id = name(i);
                    let stages: Vec<&str> = i
                        .pointer("/status/currentlyIn")
                        .and_then(Value::as_object)
                        .map(|m| m.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    vec![
                        text(i, "/alias"),
                        output::short_id(&id).to_owned(),
                        text(i, "/origin/name"),
                        if stages.is_empty() {
                            "-".into()
                        } else {
                            stages.join(",")
                        },
                        images.join(", "),
                        commits.join(", "),
                        charts.join(", "),
                        age(i),
                        array(i, "/warnings").len().to_string(),
                    ]
                })
                .collect(),
        ),
        Kind::Stage => (
            vec![
                "NAME",
                "REQUESTS",
                "FREIGHT",
                "HEALTH",
                "VERIFICATION",
                "PROMOTING",
                "NOTES",
                "AGE",
            ],
            items
                .iter()
                .map(|i| {
                    let requests: Vec<String> = array(i, "/spec/requestedFreight")
                        .iter()
                        .map(|r| {
                            let mut from: Vec<String> = array(r, "/sources/stages")
                                .iter()
                                .filter_map(|s| s.as_str().map(str::to_owned))
                                .collect();
                            if r.pointer("/sources/direct").and_then(Value::as_bool) == Some(true) {
                                from.insert(0, "direct".into());
                            }
                            format!("{} from {}", text(r, "/origin/name"), from.join("+"))
                        })
                        .collect();
                    let mut notes = Vec::new();
                    if let Some(drift) = i.pointer("/status/drift/commit").and_then(Value::as_str) {
                        notes.push(format!(
                            "branch moved outside Dray to {}",
                            &drift[..drift.len().min(10)]
                        ));
                    }
                    if i.pointer("/status/window/open").and_then(Value::as_bool) == Some(false) {
                        let window = text(i, "/status/window/blockedBy/window");
                        notes.push(
                            match i
                                .pointer("/status/window/nextChange")
                                .and_then(Value::as_str)
                            {
                                Some(until) => format!("frozen by window `{window}` until {until}"),
                                None => format!("frozen by window `{window}`"),
                            },
                        );
                    }
                    if i.pointer("/status/hold").is_some() {
                        notes.push("auto-promotion held".to_owned());
                    }
                    vec![
                        name(i),
                        requests.join(", "),
                        freight_label(
                            i.pointer("/status/currentFreight/alias")
                                .and_then(Value::as_str),
                            i.pointer("/status/currentFreight/name")
                                .and_then(Value::as_str),
                        ),
                        text(i, "/status/health/status"),
                        text(i, "/status/verification/phase"),
                        text(i, "/status/currentPromotion"),
                        if notes.is_empty() {
                            "-".into()
                        } else {
                            notes.join("; ")
                        },
                        age(i),
                    ]
                })
                .collect(),
        ),
        Kind::PromotionTask | Kind::ClusterPromotionTask => (
            vec!["NAME", "STEPS", "VARS", "AGE"],
            items
                .iter()
                .map(|i| {
                    vec![
                        name(i),
                        array(i, "/spec/steps").len().to_string(),
                        array(i, "/spec/vars").len().to_string(),
                        age(i),
                    ]
                })
                .collect(),
        ),
        Kind::AnalysisTemplate => (
            vec!["NAME", "METRICS", "ARGS", "AGE"],
            items
                .iter()
                .map(|i| {
                    let metrics: Vec<String> = array(i, "/spec/metrics")
                        .iter()
                        .filter_map(|m| m["name"].as_str().map(str::to_owned))
                        .collect();
                    vec![
                        name(i),
                        metrics.join(", "),
                        array(i, "/spec/args").len().to_string(),
                        age(i),
                    ]
                })
                .collect(),
        ),
        Kind::Promotion => (
            vec!["NAME", "STAGE", "FREIGHT", "PHASE", "AGE"],
            items
                .iter()
                .map(|i| {
                    let id = i.pointer("/spec/freight").and_then(Value::as_str);
                    let alias = id.and_then(|id| aliases.get(id)).map(String::as_str);
                    vec![
                        name(i),
                        text(i, "/spec/stage"),
                        freight_label(alias, id),
                        text(i, "/status/phase"),
                        age(i),
                    ]
                })
                .collect(),
        ),
    }
}
