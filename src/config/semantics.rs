//! Rules about one resource that its type cannot express: Warehouse subscriptions (and
//! their criteria and commit filters, compiled here so `dray apply` refuses a bad one), Stage
//! requests (and sign-off policies), Credentials' fields (a webhook secret's length), durations, names used as
//! references, Promotion targets, ProjectConfig naming.
//! Rules that need other documents live in [`super::references`].

use std::collections::BTreeMap;

use crate::api::{
    BUILTIN_ROLES, ChartSubscription, Credential, CredentialType, Freight, GitSubscription,
    ObjectKey, ProjectConfig, Promotion, PromotionTask, RepoSubscription, Role, RoleBinding, Stage,
    Verb, WILDCARD, Warehouse, WebhookProvider, rule_resources,
};

use crate::api::ImageSubscription;
use crate::discovery::chart::source::ChartSource;
use crate::discovery::git;
use crate::discovery::git::error::GitDiscoveryError;
use crate::discovery::git::select::{PathFilter, SemverConstraint, TagFilter};
use crate::discovery::image::constraint::Constraint;
use crate::discovery::image::{self, ImageDiscoveryError};
use crate::expr::{IMAGE_FIELDS, PredicateScope, check_filter, check_predicate, commit_fields};

use super::durations;
use super::error::Issue;
use super::names::{self, MAX_FREIGHT, MAX_LABEL};
use super::path::FieldPath;
use super::steps::{check_steps, check_vars};
use super::typed::Resource;
use super::webhook_secret;
use crate::api::suggest;
use crate::expr::exprlang::ExprLanguage;

/// The most candidates a subscription may keep.
const MAX_DISCOVERY_LIMIT: u32 = 100;

/// Every single-resource rule for `resource`, whose identity is `key`.
pub(crate) fn check(resource: &Resource, key: &ObjectKey) -> Vec<Issue> {
    match resource {
        Resource::Project(_) => Vec::new(),
        Resource::Credential(credential) => self::credential(credential),
        Resource::Role(role) => self::role(role),
        Resource::RoleBinding(binding) => self::role_binding(binding),
        Resource::ProjectConfig(config) => project_config(config, key),
        Resource::Warehouse(warehouse) => self::warehouse(warehouse),
        Resource::Freight(freight) => self::freight(freight),
        Resource::Stage(stage) => self::stage(stage),
        Resource::PromotionTask(task) => self::task(task),
        Resource::Promotion(promo) => promotion(promo),
        Resource::AnalysisTemplate(template) => super::analysis::template(template),
    }
}

/// Whether `key` looks like an unencrypted-or-not OpenSSH private key file.
fn is_openssh_private_key(key: &str) -> bool {
    let key = key.trim();
    key.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----")
        && key.ends_with("-----END OPENSSH PRIVATE KEY-----")
}

fn credential(credential: &Credential) -> Vec<Issue> {
    let spec = &credential.spec;
    let mut issues = Vec::new();
    let at = FieldPath::root().key("spec");
    let repo_fields = (spec.repo_url.is_some(), spec.repo_url_pattern.is_some());
    match (spec.type_, repo_fields) {
        (CredentialType::Webhook, _) => {}
        (_, (false, false)) => issues.push(
            Issue::new(
                at.key("repoURL"),
                "a git, image, helm, argocd or signing credential must name its repository or server",
            )
            .hint("set `repoURL`, or `repoURLPattern` (a regular expression)"),
        ),
        (_, (true, true)) => issues.push(
            Issue::new(
                at.key("repoURLPattern"),
                "set `repoURL` or `repoURLPattern`, not both",
            )
            .hint("keep the one that says which repositories this credential is for"),
        ),
        _ => {}
    }
    if let Some(pattern) = &spec.repo_url_pattern
        && let Err(error) = regex::Regex::new(pattern)
    {
        issues.push(
            Issue::new(
                at.key("repoURLPattern"),
                format!("`{pattern}` is not a regular expression: {error}"),
            )
            .hint("escape dots and slashes as needed, e.g. `^https://git\\.example\\.com/.*`"),
        );
    }
    match (spec.type_, &spec.ssh_private_key) {
        (CredentialType::Signing, None) => issues.push(
            Issue::new(
                at.key("sshPrivateKey"),
                "a signing credential needs the SSH private key that signs Dray's commits",
            )
            .hint("make one with `ssh-keygen -t ed25519 -N '' -f dray-signing` and give the contents of `dray-signing` (not `.pub`)"),
        ),
        (CredentialType::Signing, Some(key)) if !is_openssh_private_key(key) => issues.push(
            // Never quote the value: it is a secret, however malformed.
            Issue::new(
                at.key("sshPrivateKey"),
                "`sshPrivateKey` is not an OpenSSH private key",
            )
            .hint("give the whole key file, from `-----BEGIN OPENSSH PRIVATE KEY-----` to `-----END OPENSSH PRIVATE KEY-----`, unencrypted (no passphrase)"),
        ),
        (CredentialType::Signing, Some(_)) => {
            for (field, set) in [
                ("password", spec.password.is_some()),
                ("token", spec.token.is_some()),
                ("username", spec.username.is_some()),
            ] {
                if set {
                    issues.push(
                        Issue::new(
                            at.key(field),
                            format!("a signing credential takes only `sshPrivateKey`, not `{field}`"),
                        )
                        .hint("put the repository's login into a separate credential of type `git`"),
                    );
                }
            }
        }
        (_, Some(_)) => issues.push(
            Issue::new(
                at.key("sshPrivateKey"),
                "SSH keys are only used to sign commits (type `signing`); git is reached over https",
            )
            .hint("use an https repository URL with `username` and `token` (or `password`)"),
        ),
        (_, None) => {}
    }
    if spec.type_ == CredentialType::Webhook {
        for (field, value) in [("token", &spec.token), ("password", &spec.password)] {
            // Never quote the value: it is the secret, however weak.
            if let Some(weak) = value.as_deref().and_then(webhook_secret::check) {
                issues.push(Issue::new(at.key(field), weak.to_string()).hint(webhook_secret::HINT));
            }
        }
    }
    if spec.sealed.is_some() {
        issues.push(
            Issue::new(at.key("sealed"), "`sealed` is written by Dray, not by hand")
                .hint("give `password`, `token` or `sshPrivateKey` instead; Dray encrypts them"),
        );
    }
    issues
}

fn role(role: &Role) -> Vec<Issue> {
    let mut issues = Vec::new();
    let name = role.metadata.name.as_deref().unwrap_or_default();
    if BUILTIN_ROLES.contains(&name) {
        issues.push(
            Issue::new(
                FieldPath::of(&["metadata", "name"]),
                format!("`{name}` is a built-in role and cannot be redefined"),
            )
            .hint("give the Role another name; bind the built-in one with a RoleBinding"),
        );
    }
    let at = FieldPath::of(&["rules"]);
    if role.spec.rules.is_empty() {
        issues.push(
            Issue::new(at.clone(), "a Role needs at least one rule").hint(
                "add `- {resources: [stages], verbs: [get, list]}`; a Role allows nothing else",
            ),
        );
    }
    let verbs: Vec<&str> = Verb::ALL.iter().map(|v| v.as_str()).collect();
    let resources: Vec<&str> = rule_resources().collect();
    for (i, rule) in role.spec.rules.iter().enumerate() {
        let at = at.index(i);
        known_words(&rule.verbs, &verbs, "verb", &at.key("verbs"), &mut issues);
        known_words(
            &rule.resources,
            &resources,
            "resource",
            &at.key("resources"),
            &mut issues,
        );
        for (j, name) in rule.resource_names.iter().enumerate() {
            if name.trim().is_empty() {
                issues.push(
                    Issue::new(at.key("resourceNames").index(j), "a resource name is empty")
                        .hint("name a resource, or remove `resourceNames` to cover them all"),
                );
            }
        }
    }
    issues
}

/// Checks that `words` (verbs or resources of a rule) is not empty and holds only `known`
/// words or `*`.
fn known_words(
    words: &[String],
    known: &[&str],
    what: &str,
    at: &FieldPath,
    issues: &mut Vec<Issue>,
) {
    if words.is_empty() {
        issues.push(
            Issue::new(at.clone(), format!("the rule names no {what}")).hint(format!(
                "list at least one {what}: {}, or `*`",
                suggest::list(known.iter().copied(), 12)
            )),
        );
    }
    for (i, word) in words.iter().enumerate() {
        if word != WILDCARD && !known.contains(&word.as_str()) {
            issues.push(
                Issue::new(at.index(i), format!("unknown {what} `{word}`")).hint(
                    suggest::hint_for(
                        word,
                        known.iter().copied(),
                        &format!("`*` for every {what}"),
                    ),
                ),
            );
        }
    }
}

fn role_binding(binding: &RoleBinding) -> Vec<Issue> {
    let mut issues = Vec::new();
    let role = &binding.spec.role_ref.name;
    issues.extend(names::check(
        role,
        MAX_LABEL,
        "role name",
        FieldPath::of(&["roleRef", "name"]),
    ));
    let at = FieldPath::of(&["subjects"]);
    if binding.spec.subjects.is_empty() {
        issues.push(
            Issue::new(at.clone(), "a RoleBinding needs at least one subject")
                .hint("add `- {kind: User, name: <user>}` or `- {kind: Group, name: <group>}`"),
        );
    }
    for (i, subject) in binding.spec.subjects.iter().enumerate() {
        if subject.name.trim().is_empty() {
            issues.push(
                Issue::new(at.index(i).key("name"), "the subject's name is empty")
                    .hint("name the user or group, as its API token says"),
            );
        }
    }
    issues
}

fn project_config(config: &ProjectConfig, key: &ObjectKey) -> Vec<Issue> {
    let mut issues = Vec::new();
    let receivers = FieldPath::of(&["spec", "webhookReceivers"]);
    let mut names = std::collections::BTreeSet::new();
    for (i, receiver) in config.spec.webhook_receivers.iter().enumerate() {
        let at = receivers.index(i);
        let set = receiver.providers();
        if set.len() != 1 {
            let all: Vec<String> = WebhookProvider::ALL
                .iter()
                .map(|p| format!("`{}`", p.field()))
                .collect();
            let found = if set.is_empty() {
                "none is set".to_owned()
            } else {
                let named: Vec<String> = set
                    .iter()
                    .map(|(p, _)| format!("`{}`", p.field()))
                    .collect();
                format!("{} are set", named.join(" and "))
            };
            issues.push(
                Issue::new(
                    at.clone(),
                    format!(
                        "a webhook receiver must set exactly one of {}; {found}",
                        all.join(", ")
                    ),
                )
                .hint("keep one provider block per receiver, e.g. `github: {secretRef: github-webhook}` naming a Credential of type `webhook`; add another receiver for another service"),
            );
        }
        if !names.insert(receiver.name.as_str()) {
            issues.push(
                Issue::new(
                    at.key("name"),
                    format!("webhook receiver `{}` is defined twice", receiver.name),
                )
                .hint("give every receiver its own name; it is part of its URL"),
            );
        }
        if let Some(issue) =
            names::check(&receiver.name, MAX_LABEL, "receiver name", at.key("name"))
        {
            issues.push(issue);
        }
    }
    let policies = FieldPath::of(&["spec", "promotionPolicies"]);
    for (i, policy) in config.spec.promotion_policies.iter().enumerate() {
        let selects =
            policy.stage_selector.name.is_some() || !policy.stage_selector.match_labels.is_empty();
        if policy.stage.is_some() && selects {
            issues.push(
                Issue::new(
                    policies.index(i).key("stage"),
                    "a promotion policy sets both `stage` and `stageSelector`",
                )
                .hint("keep one: `stage: dev` is short for `stageSelector: {name: dev}`"),
            );
        }
        if let Some(name) = policy.stage.as_deref()
            && let Some(issue) = names::check(
                name,
                MAX_LABEL,
                "Stage name",
                policies.index(i).key("stage"),
            )
        {
            issues.push(issue);
        }
    }
    let windows = FieldPath::of(&["spec", "promotionWindows"]);
    let mut window_names = std::collections::BTreeSet::new();
    for (i, window) in config.spec.promotion_windows.iter().enumerate() {
        let at = windows.index(i);
        if !window_names.insert(window.name.as_str()) {
            issues.push(
                Issue::new(
                    at.key("name"),
                    format!("promotion window `{}` is defined twice", window.name),
                )
                .hint("give every window its own name; it is named when it blocks a promotion"),
            );
        }
        if let Some(issue) = names::check(&window.name, MAX_LABEL, "window name", at.key("name")) {
            issues.push(issue);
        }
        let problems = crate::pipeline::windows::problems(window);
        let duration_ok = problems.iter().all(|p| p.field() != "duration");
        for problem in problems {
            let path = problem.field().split('.').fold(at.clone(), |p, k| p.key(k));
            issues.push(Issue::new(path, problem.to_string()).hint(problem.hint()));
        }
        // The form the CRD's schema accepts (`60h`, not `60 hours`).
        if duration_ok && let Some(duration) = &window.duration {
            issues.extend(durations::check(duration, at.key("duration")));
        }
    }
    issues.extend(super::argocd::check(config));
    issues.extend(super::notifications::check(config));
    if let Some(project) = key.namespace.as_deref().filter(|ns| *ns != key.name) {
        issues.push(
            Issue::new(
                FieldPath::of(&["metadata", "name"]),
                format!(
                    "a ProjectConfig must be named after its project `{project}`, not `{}`",
                    key.name
                ),
            )
            .hint(format!("set `metadata.name: {project}`")),
        );
    }
    issues
}

fn warehouse(warehouse: &Warehouse) -> Vec<Issue> {
    let mut issues = Vec::new();
    let at = FieldPath::of(&["spec", "subscriptions"]);
    if warehouse.spec.subscriptions.is_empty() {
        issues.push(
            Issue::new(at.clone(), "a Warehouse needs at least one subscription").hint(
                "add `- image: {repoURL: …}`, `- git: {repoURL: …}` or `- chart: {repoURL: …}`",
            ),
        );
    }
    let language = ExprLanguage::of_annotations(warehouse.metadata.annotations.as_ref());
    for (i, sub) in warehouse.spec.subscriptions.iter().enumerate() {
        subscription(sub, &at.index(i), language, &mut issues);
    }
    if let Some(interval) = &warehouse.spec.interval {
        issues.extend(durations::check(
            interval,
            FieldPath::of(&["spec", "interval"]),
        ));
    }
    criteria(warehouse, language, &mut issues);
    issues
}

/// `freightCreationCriteria.expression`: in the Warehouse's `language`, over
/// `imageFrom()`/`commitFrom()`/`chartFrom()` of the Warehouse's own subscriptions.
fn criteria(warehouse: &Warehouse, language: ExprLanguage, issues: &mut Vec<Issue>) {
    let Some(expression) = warehouse
        .spec
        .freight_creation_criteria
        .as_ref()
        .map(|c| c.expression.trim())
    else {
        return;
    };
    let at = FieldPath::of(&["spec", "freightCreationCriteria", "expression"]);
    if expression.is_empty() {
        issues.push(
            Issue::new(at, "`expression` is empty")
                .hint("write a condition such as `imageFrom('<repo>').tag == commitFrom('<repo>').tag`, or remove freightCreationCriteria"),
        );
        return;
    }
    let subs = &warehouse.spec.subscriptions;
    let images: Vec<&str> = subs
        .iter()
        .filter_map(|s| s.image.as_ref())
        .map(|i| i.repo_url.as_str())
        .collect();
    let commits: Vec<&str> = subs
        .iter()
        .filter_map(|s| s.git.as_ref())
        .map(|g| g.repo_url.as_str())
        .collect();
    let charts: Vec<&str> = warehouse
        .spec
        .subscriptions
        .iter()
        .filter_map(|s| s.chart.as_ref())
        .map(|c| c.repo_url.as_str())
        .collect();
    let scope = PredicateScope {
        language,
        artifact_functions: true,
        images: &images,
        commits: &commits,
        charts: &charts,
        ..PredicateScope::default()
    };
    if let Err(error) = check_predicate(expression, &scope) {
        issues.push(Issue::new(at, error.to_string()).hint(
            "the expression sees the newest artifact of each subscription through \
             imageFrom(repoURL), commitFrom(repoURL) and chartFrom(repoURL[, name]), with repoURL as the subscription writes it",
        ));
    }
}

/// An image subscription's selection rules, compiled as discovery compiles them: a
/// `SemVer` constraint that parses, the tag `Digest` follows, tag regexes, the platform.
fn image_selection(
    image: &ImageSubscription,
    at: &FieldPath,
    language: ExprLanguage,
    issues: &mut Vec<Issue>,
) {
    if let Err(ImageDiscoveryError::InvalidSubscription {
        field,
        value,
        reason,
        hint,
    }) = image::check_subscription(image, language)
        // `discoveryLimit` and `expressionFilter` have their own rules.
        && field != "discoveryLimit"
        && field != "expressionFilter"
    {
        // `allowTags[1]` is a key and an index.
        let path = match field.strip_suffix(']').and_then(|f| f.split_once('[')) {
            Some((key, index)) => match index.parse() {
                Ok(index) => at.key(key).index(index),
                Err(_) => at.key(&field),
            },
            None => at.key(&field),
        };
        let issue = Issue::new(path, format!("`{field}` `{value}`: {reason}"));
        issues.push(match hint {
            Some(hint) => issue.hint(hint),
            None => issue,
        });
    }
}

/// A git subscription's `semverConstraint`, tag regexes and path patterns, compiled as
/// discovery compiles them.
fn git_selection(git: &GitSubscription, at: &FieldPath, issues: &mut Vec<Issue>) {
    if let Err(GitDiscoveryError::InvalidConstraint { constraint, reason }) =
        SemverConstraint::new(git.semver_constraint.as_deref())
    {
        issues.push(
            Issue::new(
                at.key("semverConstraint"),
                format!("`semverConstraint` `{constraint}` is not a version range: {reason}"),
            )
            .hint("write a range such as `^1.2.0`, `>=1.0.0 <2.0.0` or `~1.4`"),
        );
    }
    let lists: [(&str, &[String], Checker); 4] = [
        ("allowTags", &git.allow_tags, |p| {
            TagFilter::new(std::slice::from_ref(p), &[]).map(|_| ())
        }),
        ("ignoreTags", &git.ignore_tags, |p| {
            TagFilter::new(&[], std::slice::from_ref(p)).map(|_| ())
        }),
        ("includePaths", &git.include_paths, |p| {
            PathFilter::new(std::slice::from_ref(p), &[]).map(|_| ())
        }),
        ("excludePaths", &git.exclude_paths, |p| {
            PathFilter::new(&[], std::slice::from_ref(p)).map(|_| ())
        }),
    ];
    for (field, list, check) in lists {
        for (i, pattern) in list.iter().enumerate() {
            if let Err(GitDiscoveryError::InvalidPattern { reason, .. }) = check(pattern) {
                let hint = if field.ends_with("Paths") {
                    "write a path prefix (`apps/web/`), `glob:apps/*/values.yaml` or `regex:^env/(dev|prod)/`"
                } else {
                    "write a regular expression (Rust `regex` syntax, no look-around), e.g. `^v[0-9]+`"
                };
                // A regex error spans lines (the pattern, a caret, the error): keep the error.
                let reason = reason.lines().last().unwrap_or_default().trim();
                let reason = reason.strip_prefix("error: ").unwrap_or(reason);
                issues.push(
                    Issue::new(
                        at.key(field).index(i),
                        format!("`{pattern}` is not a valid pattern: {reason}"),
                    )
                    .hint(hint),
                );
            }
        }
    }
}

/// Compiles one pattern of a git subscription's list.
type Checker = fn(&String) -> Result<(), GitDiscoveryError>;

/// A git subscription's `expressionFilter` and `since`.
fn commit_filters(
    git: &GitSubscription,
    at: &FieldPath,
    language: ExprLanguage,
    issues: &mut Vec<Issue>,
) {
    if let Some(expression) = git.expression_filter.as_deref().map(str::trim)
        && let Err(error) = check_filter(language, expression, commit_fields(language))
    {
        issues.push(
            Issue::new(at.key("expressionFilter"), error.to_string())
                .hint(git::filter_hint(language)),
        );
    }
    if let Err(reason) = git.since_time() {
        issues.push(
            Issue::new(
                at.key("since"),
                format!("`since` is not an RFC 3339 time: {reason}"),
            )
            .hint("write a time with its offset, e.g. `2026-01-31T00:00:00Z`"),
        );
    }
}

fn subscription(
    sub: &RepoSubscription,
    at: &FieldPath,
    language: ExprLanguage,
    issues: &mut Vec<Issue>,
) {
    let (kind, repo_url, limit) = match (&sub.image, &sub.git, &sub.chart) {
        (Some(image), None, None) => ("image", &image.repo_url, image.discovery_limit),
        (None, Some(git), None) => ("git", &git.repo_url, git.discovery_limit),
        (None, None, Some(chart)) => {
            chart_subscription(chart, &at.key("chart"), issues);
            return;
        }
        (None, None, None) => {
            let issue = Issue::new(
                at.clone(),
                "a subscription must set `image`, `git` or `chart`",
            )
            .hint("add `image: {repoURL: …}`, `git: {repoURL: …}` or `chart: {repoURL: …}`");
            issues.push(issue);
            return;
        }
        _ => {
            let issue = Issue::new(
                at.clone(),
                "a subscription must set exactly one of `image`, `git` and `chart`",
            )
            .hint("split it into one subscription per repository");
            issues.push(issue);
            return;
        }
    };
    let at = at.key(kind);
    if repo_url.trim().is_empty() {
        let issue = Issue::new(at.key("repoURL"), "`repoURL` is empty").hint(if kind == "image" {
            "name the image repository, e.g. `registry.example.com/team/app`"
        } else {
            "give the repository URL, e.g. `https://git.example.com/team/config.git`"
        });
        issues.push(issue);
    }
    if let Some(git) = &sub.git {
        commit_filters(git, &at, language, issues);
        git_selection(git, &at, issues);
    }
    if let Some(image) = &sub.image {
        image_selection(image, &at, language, issues);
    }
    if let Some(expression) = sub
        .image
        .as_ref()
        .and_then(|i| i.expression_filter.as_deref())
        && let Err(error) = check_filter(language, expression.trim(), IMAGE_FIELDS)
    {
        issues.push(
            Issue::new(at.key("expressionFilter"), error.to_string())
                .hint(image::tag_filter_hint(language)),
        );
    }
    if !(1..=MAX_DISCOVERY_LIMIT).contains(&limit) {
        issues.push(
            Issue::new(
                at.key("discoveryLimit"),
                format!(
                    "`discoveryLimit` is {limit}, but must be between 1 and {MAX_DISCOVERY_LIMIT}"
                ),
            )
            .hint("remove it to use the default (20)"),
        );
    }
}

/// A chart subscription: where the chart is (`discovery::chart::source`, the rule discovery
/// applies), that `semverConstraint` compiles and `discoveryLimit` is in bounds.
fn chart_subscription(chart: &ChartSubscription, at: &FieldPath, issues: &mut Vec<Issue>) {
    if let Err(issue) = ChartSource::of(chart) {
        issues.push(Issue::new(at.key(issue.field), issue.reason).hint(issue.hint));
    }
    if let Some(text) = chart
        .semver_constraint
        .as_deref()
        .filter(|c| !c.trim().is_empty())
        && let Err(reason) = Constraint::parse(text.trim())
    {
        issues.push(
            Issue::new(
                at.key("semverConstraint"),
                format!("`semverConstraint` `{text}` is not a version range: {reason}"),
            )
            .hint("write a range such as `^1.2.0`, `>=1.0.0 <2.0.0` or `~1.4`"),
        );
    }
    if !(1..=MAX_DISCOVERY_LIMIT).contains(&chart.discovery_limit) {
        issues.push(
            Issue::new(
                at.key("discoveryLimit"),
                format!(
                    "`discoveryLimit` is {}, but must be between 1 and {MAX_DISCOVERY_LIMIT}",
                    chart.discovery_limit
                ),
            )
            .hint("remove it to use the default (20)"),
        );
    }
}

fn freight(freight: &Freight) -> Vec<Issue> {
    let mut issues = Vec::new();
    let origin = &freight.spec.origin.name;
    issues.extend(names::check(
        origin,
        MAX_LABEL,
        "Warehouse name",
        FieldPath::of(&["origin", "name"]),
    ));
    if freight.spec.images.is_empty()
        && freight.spec.commits.is_empty()
        && freight.spec.charts.is_empty()
    {
        issues.push(
            Issue::new(
                FieldPath::root(),
                "Freight must pin at least one image, commit or chart",
            )
            .hint("add `images:` or `commits:`"),
        );
    }
    issues
}

fn stage(stage: &Stage) -> Vec<Issue> {
    let mut issues = Vec::new();
    let at = FieldPath::of(&["spec", "requestedFreight"]);
    if stage.spec.requested_freight.is_empty() {
        issues.push(
            Issue::new(at.clone(), "a Stage must request Freight from at least one Warehouse")
                .hint("add `- origin: {kind: Warehouse, name: <warehouse>}` with `sources: {direct: true}`"),
        );
    }
    let mut origins: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, request) in stage.spec.requested_freight.iter().enumerate() {
        let path = at.index(i);
        let name = request.origin.name.as_str();
        let origin_path = path.key("origin").key("name");
        issues.extend(names::check(
            name,
            MAX_LABEL,
            "Warehouse name",
            origin_path.clone(),
        ));
        if let Some(first) = origins.insert(name, i) {
            origins.insert(name, first);
            issues.push(
                Issue::new(
                    origin_path,
                    format!("Warehouse `{name}` is already requested by requestedFreight[{first}]"),
                )
                .hint("request each Warehouse once; list all its sources in one request"),
            );
        }
        let sources = &request.sources;
        let sources_path = path.key("sources");
        if !sources.direct && sources.stages.is_empty() {
            issues.push(
                Issue::new(sources_path.clone(), "the request has no source: it is not `direct` and names no upstream `stages`")
                    .hint("set `direct: true` to take Freight from the Warehouse, or list upstream `stages`"),
            );
        }
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (j, upstream) in sources.stages.iter().enumerate() {
            let stage_path = sources_path.key("stages").index(j);
            issues.extend(names::check(
                upstream,
                MAX_LABEL,
                "stage name",
                stage_path.clone(),
            ));
            if seen.insert(upstream, j).is_some() {
                issues.push(
                    Issue::new(
                        stage_path,
                        format!("upstream stage `{upstream}` is listed twice"),
                    )
                    .hint("list it once"),
                );
            }
        }
        if let Some(soak) = &sources.required_soak_time {
            let soak_path = sources_path.key("requiredSoakTime");
            if let Some(issue) = durations::check(soak, soak_path.clone()) {
                issues.push(issue);
            } else if sources.stages.is_empty() {
                issues.push(
                    Issue::new(soak_path, "`requiredSoakTime` applies to upstream stages, and this request names none")
                        .hint("remove it, or list the upstream `stages` that Freight must soak in"),
                );
            }
        }
    }
    issues.extend(check_vars(
        &stage.spec.vars,
        &FieldPath::of(&["spec", "vars"]),
    ));
    if let Some(template) = &stage.spec.promotion_template {
        let at = FieldPath::of(&["spec", "promotionTemplate", "spec"]);
        if template.spec.steps.is_empty() {
            issues.push(
                Issue::new(at.key("steps"), "the promotion template has no steps")
                    .hint("add steps, or remove `promotionTemplate`"),
            );
        }
        issues.extend(check_vars(&template.spec.vars, &at.key("vars")));
        issues.extend(check_steps(
            &template.spec.steps,
            &at.key("steps"),
            true,
            ExprLanguage::of_annotations(stage.metadata.annotations.as_ref()),
        ));
    }
    if let Some(verification) = &stage.spec.verification {
        issues.extend(super::analysis::verification(verification));
    }
    if let Some(policy) = &stage.spec.signoff {
        issues.extend(super::signoff::policy(policy));
    }
    issues
}

fn task(task: &PromotionTask) -> Vec<Issue> {
    let at = FieldPath::of(&["spec"]);
    let mut issues = check_vars(&task.spec.vars, &at.key("vars"));
    if task.spec.steps.is_empty() {
        issues.push(
            Issue::new(at.key("steps"), "the task has no steps").hint("add at least one step"),
        );
    }
    issues.extend(check_steps(
        &task.spec.steps,
        &at.key("steps"),
        false,
        ExprLanguage::of_annotations(task.metadata.annotations.as_ref()),
    ));
    issues
}

fn promotion(promo: &Promotion) -> Vec<Issue> {
    let at = FieldPath::of(&["spec"]);
    let mut issues = Vec::new();
    issues.extend(names::check(
        &promo.spec.stage,
        MAX_LABEL,
        "stage name",
        at.key("stage"),
    ));
    if promo.spec.freight.is_empty() {
        issues.push(
            Issue::new(at.key("freight"), "`freight` is empty")
                .hint("give the id of the Freight to promote (see `dray get freight`)"),
        );
    } else {
        issues.extend(names::check(
            &promo.spec.freight,
            MAX_FREIGHT,
            "Freight id",
            at.key("freight"),
        ));
    }
    issues.extend(check_vars(&promo.spec.vars, &at.key("vars")));
    issues.extend(check_steps(
        &promo.spec.steps,
        &at.key("steps"),
        true,
        ExprLanguage::of_annotations(promo.metadata.annotations.as_ref()),
    ));
    issues
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::api::Kind;
    use crate::config::typed;

    fn issues(kind: Kind, object: Value) -> Vec<(String, String)> {
        let resource = typed::quietly(kind, &object).expect("test object deserializes");
        let key = ObjectKey::namespaced(kind, "demo", object["metadata"]["name"].as_str().unwrap());
        check(&resource, &key)
            .into_iter()
            .map(|i| (i.path.to_string(), i.message))
            .collect()
    }

    #[test]
    fn warehouse_subscriptions() {
        let found = issues(
            Kind::Warehouse,
            json!({"metadata": {"name": "app"}, "spec": {"interval": "often", "subscriptions": [
                {"image": {"repoURL": "r"}, "git": {"repoURL": "g"}},
                {},
                {"image": {"repoURL": " ", "discoveryLimit": 0}},
                {"git": {"repoURL": "https://x", "discoveryLimit": 101}},
            ]}}),
        );
        let paths: Vec<_> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "spec.subscriptions[0]",
                "spec.subscriptions[1]",
                "spec.subscriptions[2].image.repoURL",
                "spec.subscriptions[2].image.discoveryLimit",
                "spec.subscriptions[3].git.discoveryLimit",
                "spec.interval",
            ]
        );
        let found = issues(
            Kind::Warehouse,
            json!({"metadata": {"name": "app"}, "spec": {"subscriptions": []}}),
        );
        assert_eq!(found[0].1, "a Warehouse needs at least one subscription");
    }

    #[test]
    fn chart_subscriptions() {
        let found = issues(
            Kind::Warehouse,
            json!({"metadata": {"name": "app"}, "spec": {"subscriptions": [
                {"chart": {"repoURL": "https://charts.example.com", "name": "app", "semverConstraint": "^1.0.0"}},
                {"chart": {"repoURL": "oci://reg.example.com/charts/app"}},
                {"chart": {"repoURL": "https://charts.example.com"}},
                {"chart": {"repoURL": "oci://reg.example.com/charts/app", "name": "app"}},
                {"chart": {"repoURL": "ftp://charts.example.com", "name": "app"}},
                {"chart": {"repoURL": "oci://reg.example.com/charts/app", "semverConstraint": ">=1.0 <2.x.y", "discoveryLimit": 101}},
                {"chart": {"repoURL": "oci://r/c/app"}, "image": {"repoURL": "r/c/app"}},
            ]}}),
        );
        let paths: Vec<_> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "spec.subscriptions[2].chart.name",
                "spec.subscriptions[3].chart.name",
                "spec.subscriptions[4].chart.repoURL",
                "spec.subscriptions[5].chart.semverConstraint",
                "spec.subscriptions[5].chart.discoveryLimit",
                "spec.subscriptions[6]",
            ]
        );
        assert!(found[0].1.contains("needs the chart's `name`"), "{found:?}");
        assert!(
            found[1].1.contains("must not be set for an `oci://`"),
            "{found:?}"
        );
        assert!(found[3].1.contains("`<2.x.y`"), "{found:?}");
    }

    #[test]
    fn a_promotion_policy_names_its_stage_one_way() {
        let found = issues(
            Kind::ProjectConfig,
            json!({"metadata": {"name": "demo", "namespace": "demo"}, "spec": {"promotionPolicies": [
                {"stage": "dev", "autoPromotionEnabled": true},
                {"stage": "qa", "stageSelector": {"name": "qa"}},
                {"stage": "Bad_Name"}]}}),
        );
        let paths: Vec<&str> = found.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.promotionPolicies[1].stage",
                "spec.promotionPolicies[2].stage"
            ],
            "{found:?}"
        );
        assert!(
            found[0].1.contains("sets both `stage` and `stageSelector`"),
            "{}",
            found[0].1
        );
    }

    #[test]
    fn selection_rules_are_compiled_at_apply_time_naming_the_value() {
        let found = issues(
            Kind::Warehouse,
            json!({"metadata": {"name": "app"}, "spec": {"subscriptions": [
                {"image": {"repoURL": "reg/app", "constraint": ">=1.0 <2.x.y"}},
                {"image": {"repoURL": "reg/app", "imageSelectionStrategy": "Digest"}},
                {"image": {"repoURL": "reg/app", "allowTags": ["^v(1"]}},
                {"git": {"repoURL": "https://git/cfg.git", "commitSelectionStrategy": "SemVer",
                         "semverConstraint": "^^1", "allowTags": ["ok", "(("],
                         "includePaths": ["apps/", "glob:apps/[", "regexp:^env/(("],
                         "excludePaths": ["regex:docs/[a-"]}},
                {"git": {"repoURL": "https://git/ok.git", "includePaths": ["regexp:^env/(dev|prod)/", "glob:**/*.yaml"]}},
            ]}}),
        );
        let paths: Vec<&str> = found.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.subscriptions[0].image.constraint",
                "spec.subscriptions[1].image.constraint",
                "spec.subscriptions[2].image.allowTags[0]",
                "spec.subscriptions[3].git.semverConstraint",
                "spec.subscriptions[3].git.allowTags[1]",
                "spec.subscriptions[3].git.includePaths[1]",
                "spec.subscriptions[3].git.includePaths[2]",
                "spec.subscriptions[3].git.excludePaths[0]",
            ],
            "{found:?}"
        );
        assert!(
            found[0].1.starts_with("`constraint` `>=1.0 <2.x.y`: "),
            "{}",
            found[0].1
        );
        assert!(
            found[1]
                .1
                .contains("the `Digest` strategy needs the tag to follow"),
            "{}",
            found[1].1
        );
        assert!(
            found[2].1.contains("it is not a regular expression"),
            "{}",
            found[2].1
        );
        assert!(
            found[3]
                .1
                .starts_with("`semverConstraint` `^^1` is not a version range"),
            "{}",
            found[3].1
        );
        assert_eq!(
            found[6].1,
            "`regexp:^env/((` is not a valid pattern: unclosed group"
        );
    }

    #[test]
    fn criteria_may_name_chart_subscriptions_and_only_those() {
        let warehouse = |expression: &str| {
            json!({"metadata": {"name": "app"}, "spec": {
                "freightCreationCriteria": {"expression": expression},
                "subscriptions": [
                    {"image": {"repoURL": "reg/app"}},
                    {"chart": {"repoURL": "oci://reg/charts/app"}}]}})
        };
        let fine = issues(
            Kind::Warehouse,
            warehouse("imageFrom('reg/app').tag == chartFrom('oci://reg/charts/app').version"),
        );
        assert!(fine.is_empty(), "{fine:?}");
        let found = issues(
            Kind::Warehouse,
            warehouse("imageFrom('reg/app').tag == chartFrom('oci://reg/charts/ap').version"),
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].1.contains("`chartFrom('oci://reg/charts/ap')` names no chart subscription of this Warehouse (its chart subscriptions: `oci://reg/charts/app`)"),
            "{}",
            found[0].1
        );
    }

    #[test]
    fn a_kargo_warehouse_s_filters_and_criteria_are_checked_as_expr_lang() {
        let annotations = json!({"dray.dev/expression-language": "expr-lang"});
        let kargo = |spec: serde_json::Value| {
            issues(
                Kind::Warehouse,
                json!({"metadata": {"name": "app", "annotations": annotations}, "spec": spec}),
            )
        };
        // Kargo's own examples apply.
        let found = kargo(json!({
        "freightCreationCriteria": {"expression": "imageFrom('reg/app').Tag == commitFrom('https://git/cfg.git').Tag"},
        "subscriptions": [
            {"image": {"repoURL": "reg/app", "expressionFilter": "!(tag endsWith '-debug')"}},
            {"git": {"repoURL": "https://git/cfg.git", "expressionFilter": "!(subject contains '[skip-ci]') && commitDate.After(date('2025-01-01'))"}},
        ]}));
        assert!(found.is_empty(), "{found:?}");
        // CEL's spelling, a Dray field name, an unsubscribed repository and a Kargo variable
        // Dray has no value for are each refused with the reason.
        let found = kargo(json!({
        "freightCreationCriteria": {"expression": "imageFrom('reg/ap').Tag != ''"},
        "subscriptions": [
            {"image": {"repoURL": "reg/app", "expressionFilter": "!tag.endsWith('-debug')"}},
            {"git": {"repoURL": "https://git/cfg.git", "expressionFilter": "tagger == 'ann'"}},
        ]}));
        let paths: Vec<_> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "spec.subscriptions[0].image.expressionFilter",
                "spec.subscriptions[1].git.expressionFilter",
                "spec.freightCreationCriteria.expression",
            ],
            "{found:?}"
        );
        assert!(
            found[1].1.contains("Kargo's `tagger` is not available"),
            "{}",
            found[1].1
        );
        assert!(
            found[2]
                .1
                .contains("`imageFrom('reg/ap')` names no image subscription"),
            "{}",
            found[2].1
        );
        let found = kargo(json!({
            "freightCreationCriteria": {"expression": "imageFrom('reg/app').tag == ''"},
            "subscriptions": [{"image": {"repoURL": "reg/app"}}]}));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].1.contains("did you mean `Tag`"), "{}", found[0].1);
    }

    #[test]
    fn warehouse_criteria_and_commit_filters_are_checked_at_apply_time() {
        let found = issues(
            Kind::Warehouse,
            json!({"metadata": {"name": "app"}, "spec": {
            "freightCreationCriteria": {"expression": "imageFrom('reg/ap').tag == commitFrom('https://git/cfg.git').tag"},
            "subscriptions": [
                {"image": {"repoURL": "reg/app", "expressionFilter": "digest == ''"}},
                {"git": {"repoURL": "https://git/cfg.git", "expressionFilter": "msg.startsWith('wip')", "since": "last week"}},
                {"git": {"repoURL": "https://git/other.git", "expressionFilter": "subject ==", "since": "2026-01-31T00:00:00Z"}},
            ]}}),
        );
        let paths: Vec<_> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "spec.subscriptions[0].image.expressionFilter",
                "spec.subscriptions[1].git.expressionFilter",
                "spec.subscriptions[1].git.since",
                "spec.subscriptions[2].git.expressionFilter",
                "spec.freightCreationCriteria.expression",
            ]
        );
        assert!(
            found[0].1.contains("no variable `digest` (known: tag)"),
            "{}",
            found[0].1
        );
        assert!(
            found[1]
                .1
                .contains("no variable `msg` (known: id, subject,"),
            "{}",
            found[1].1
        );
        assert!(
            found[2].1.starts_with("`since` is not an RFC 3339 time"),
            "{}",
            found[2].1
        );
        assert!(
            found[3]
                .1
                .contains("syntax error in expression `subject ==`"),
            "{}",
            found[3].1
        );
        assert!(
            found[4].1.contains("`imageFrom('reg/ap')` names no image subscription of this Warehouse (its image subscriptions: `reg/app`)"),
            "{}",
            found[4].1
        );
        let fine = issues(
            Kind::Warehouse,
            json!({"metadata": {"name": "app"}, "spec": {
            "freightCreationCriteria": {"expression": "imageFrom('reg/app').tag == commitFrom('https://git/cfg.git').tag"},
            "subscriptions": [
                {"image": {"repoURL": "reg/app"}},
                {"git": {"repoURL": "https://git/cfg.git", "expressionFilter": "!subject.startsWith('wip')", "since": "2026-01-31T00:00:00Z"}},
            ]}}),
        );
        assert!(fine.is_empty(), "{fine:?}");
    }

    #[test]
    fn stage_requests() {
        let found = issues(
            Kind::Stage,
            json!({"metadata": {"name": "qa"}, "spec": {"requestedFreight": [
                {"origin": {"kind": "Warehouse", "name": "app"}, "sources": {}},
                {"origin": {"kind": "Warehouse", "name": "app"},
                 "sources": {"stages": ["dev", "dev"], "requiredSoakTime": "1x"}},
                {"origin": {"kind": "Warehouse", "name": "lib"}, "sources": {"direct": true, "requiredSoakTime": "1h"}},
            ], "promotionTemplate": {"spec": {"steps": []}}}}),
        );
        let paths: Vec<_> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "spec.requestedFreight[0].sources",
                "spec.requestedFreight[1].origin.name",
                "spec.requestedFreight[1].sources.stages[1]",
                "spec.requestedFreight[1].sources.requiredSoakTime",
                "spec.requestedFreight[2].sources.requiredSoakTime",
                "spec.promotionTemplate.spec.steps",
            ]
        );
    }

    #[test]
    fn promotion_and_project_config() {
        let found = issues(
            Kind::Promotion,
            json!({"metadata": {"name": "p"}, "spec": {"stage": "Prod", "freight": ""}}),
        );
        let paths: Vec<_> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, vec!["spec.stage", "spec.freight"]);

        let found = issues(
            Kind::ProjectConfig,
            json!({"metadata": {"name": "other"}, "spec": {}}),
        );
        assert_eq!(
            found,
            vec![(
                "metadata.name".to_owned(),
                "a ProjectConfig must be named after its project `demo`, not `other`".to_owned()
            )]
        );
    }
}
