//! Cross-document checks: duplicates in a batch, projects that exist, and every name one
//! resource uses to refer to another (Warehouses, upstream Stages, PromotionTasks and the
//! variables they need, AnalysisTemplates and the args they need, a Promotion's Stage),
//! plus cycles in the stage graph. References
//! resolve against the batch first, then against resources already stored.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::api::{
    BUILTIN_ROLES, Kind, ObjectKey, PromotionStep, Stage, TaskKind, Var, Verification,
};

use super::cycles::{find_cycles, show};
use super::document::Checked;
use super::error::Issue;
use super::names::{self, MAX_LABEL};
use super::path::FieldPath;
use super::typed::{self, Resource};
use crate::api::suggest::hint_for;
use crate::expr::exprlang::ExprLanguage;

/// Every resource a batch can refer to: the batch over what is stored.
struct World<'a> {
    objects: BTreeMap<&'a ObjectKey, Option<&'a Resource>>,
}

impl<'a> World<'a> {
    fn has(&self, kind: Kind, project: &str, name: &str) -> bool {
        self.objects.contains_key(&key(kind, project, name))
    }

    fn get(&self, kind: Kind, project: &str, name: &str) -> Option<&'a Resource> {
        self.objects
            .get(&key(kind, project, name))
            .copied()
            .flatten()
    }

    /// Names of `kind` in `project` (`None` for Projects), sorted.
    fn names(&self, kind: Kind, project: Option<&str>) -> Vec<&'a str> {
        self.objects
            .keys()
            .filter(|k| k.kind == kind && k.namespace.as_deref() == project)
            .map(|k| k.name.as_str())
            .collect()
    }
}

fn key(kind: Kind, project: &str, name: &str) -> ObjectKey {
    if kind.is_namespaced() {
        ObjectKey::namespaced(kind, project, name)
    } else {
        ObjectKey::cluster(kind, name)
    }
}

/// Duplicate keys within the batch, reported on the later document.
pub(crate) fn duplicates(docs: &[Checked]) -> Vec<(usize, Issue)> {
    let mut first: BTreeMap<&ObjectKey, usize> = BTreeMap::new();
    let mut issues = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        let Some(key) = &doc.key else { continue };
        match first.get(key) {
            Some(&earlier) => {
                let o = &docs[earlier].origin;
                let message = format!(
                    "{key} is defined twice: also in {}:{} (document {})",
                    o.file, o.line, o.document
                );
                let issue = Issue::new(FieldPath::of(&["metadata", "name"]), message)
                    .hint("remove one of the two documents, or give them different names");
                issues.push((i, issue));
            }
            None => {
                first.insert(key, i);
            }
        }
    }
    issues
}

/// Every reference in the batch that does not resolve, and every stage cycle.
pub(crate) fn check(
    docs: &[Checked],
    existing: &BTreeMap<ObjectKey, Value>,
) -> Vec<(usize, Issue)> {
    let stored: Vec<(&ObjectKey, Option<Resource>)> = existing
        .iter()
        .map(|(k, v)| (k, typed::quietly(k.kind, v)))
        .collect();
    let mut world = World {
        objects: BTreeMap::new(),
    };
    for (k, resource) in &stored {
        world.objects.insert(k, resource.as_ref());
    }
    let mut batch: BTreeMap<&ObjectKey, usize> = BTreeMap::new();
    for (i, doc) in docs.iter().enumerate() {
        if let Some(k) = &doc.key {
            world.objects.insert(k, doc.resource.as_ref());
            batch.insert(k, i);
        }
    }
    let mut issues = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        let Some(project) = doc.key.as_ref().and_then(|k| k.namespace.as_deref()) else {
            continue;
        };
        let mut found = Vec::new();
        if names::is_valid(project, MAX_LABEL) && !world.has(Kind::Project, project, project) {
            let fallback = format!("create it with a `Project` document named `{project}`");
            found.push(
                Issue::new(
                    FieldPath::of(&["metadata", "namespace"]),
                    format!("project `{project}` does not exist"),
                )
                .hint(hint_for(
                    project,
                    world.names(Kind::Project, None),
                    &fallback,
                )),
            );
        }
        let refs = Refs {
            world: &world,
            project,
        };
        match &doc.readable {
            Some(resource @ Resource::Stage(stage)) => {
                let me = resource.metadata().name.as_deref().unwrap_or_default();
                refs.stage(me, stage, &mut found);
            }
            Some(Resource::Freight(freight)) => {
                refs.warehouse(
                    &freight.spec.origin.name,
                    FieldPath::of(&["origin", "name"]),
                    &mut found,
                );
            }
            Some(Resource::RoleBinding(binding)) => {
                refs.role(&binding.spec.role_ref.name, &mut found);
            }
            Some(Resource::Promotion(promo)) => {
                refs.exists(
                    Kind::Stage,
                    &promo.spec.stage,
                    FieldPath::of(&["spec", "stage"]),
                    "stage",
                    &mut found,
                );
                let at = FieldPath::of(&["spec", "steps"]);
                refs.tasks(
                    &promo.spec.steps,
                    &at,
                    &[&promo.spec.vars],
                    (
                        "the Promotion",
                        ExprLanguage::of_annotations(promo.metadata.annotations.as_ref()),
                    ),
                    &mut found,
                );
            }
            Some(Resource::ProjectConfig(config)) => {
                let notifications = FieldPath::of(&["spec", "notifications"]);
                for (n, notification) in config.spec.notifications.iter().enumerate() {
                    let named = [
                        (
                            notification
                                .webhook
                                .as_ref()
                                .and_then(|w| w.secret_ref.as_ref()),
                            notifications.index(n).key("webhook").key("secretRef"),
                        ),
                        (
                            notification
                                .slack
                                .as_ref()
                                .and_then(|s| s.url_secret_ref.as_ref()),
                            notifications.index(n).key("slack").key("urlSecretRef"),
                        ),
                    ];
                    for (name, path) in named {
                        if let Some(name) = name {
                            refs.exists(Kind::Credential, name, path, "Credential", &mut found);
                        }
                    }
                }
                let at = FieldPath::of(&["spec", "webhookReceivers"]);
                for (r, receiver) in config.spec.webhook_receivers.iter().enumerate() {
                    let actions = receiver.generic.iter().flat_map(|g| g.actions.iter());
                    for (a, action) in actions.enumerate() {
                        for (t, target) in action.target_selection_criteria.iter().enumerate() {
                            let path = at
                                .index(r)
                                .key("generic")
                                .key("actions")
                                .index(a)
                                .key("targetSelectionCriteria")
                                .index(t)
                                .key("name");
                            refs.warehouse(&target.name, path, &mut found);
                        }
                    }
                }
            }
            _ => {}
        }
        issues.extend(
            found
                .into_iter()
                .filter(|issue| doc.stands(issue))
                .map(|issue| (i, issue)),
        );
    }
    issues.extend(cycles(&world, &batch, docs));
    issues
}

/// Reference checks within one project.
struct Refs<'w, 'a> {
    world: &'w World<'a>,
    project: &'w str,
}

impl Refs<'_, '_> {
    /// Reports a RoleBinding's `roleRef.name` unless it is built in or a Role in the project.
    fn role(&self, name: &str, found: &mut Vec<Issue>) {
        if BUILTIN_ROLES.contains(&name) || !names::is_valid(name, MAX_LABEL) {
            return; // an invalid name is reported by its name check
        }
        if self.world.has(Kind::Role, self.project, name) {
            return;
        }
        let mut candidates: Vec<&str> = BUILTIN_ROLES.to_vec();
        candidates.extend(self.world.names(Kind::Role, Some(self.project)));
        let fallback = format!("define a Role named `{name}`");
        found.push(
            Issue::new(
                FieldPath::of(&["roleRef", "name"]),
                format!(
                    "role `{name}` is neither built in nor a Role in project `{}`",
                    self.project
                ),
            )
            .hint(hint_for(name, candidates, &fallback)),
        );
    }

    /// Reports `name` if no `kind` of that name exists in the project; `what` names the
    /// role in the message ("upstream stage", "Warehouse").
    fn exists(
        &self,
        kind: Kind,
        name: &str,
        path: FieldPath,
        what: &str,
        found: &mut Vec<Issue>,
    ) -> bool {
        if !names::is_valid(name, MAX_LABEL) {
            return false; // its name check already reported it
        }
        if self.world.has(kind, self.project, name) {
            return true;
        }
        let fallback = format!("define a {kind} named `{name}`");
        let scope = kind.is_namespaced().then_some(self.project);
        let candidates = self.world.names(kind, scope);
        let hint = hint_for(name, candidates, &fallback);
        let message = match scope {
            Some(project) => format!("{what} `{name}` does not exist in project `{project}`"),
            None => format!("{what} `{name}` does not exist"),
        };
        found.push(Issue::new(path, message).hint(hint));
        false
    }

    fn warehouse(&self, name: &str, path: FieldPath, found: &mut Vec<Issue>) {
        self.exists(Kind::Warehouse, name, path, "Warehouse", found);
    }

    fn stage(&self, me: &str, stage: &Stage, found: &mut Vec<Issue>) {
        let at = FieldPath::of(&["spec", "requestedFreight"]);
        for (i, request) in stage.spec.requested_freight.iter().enumerate() {
            let origin = request.origin.name.as_str();
            self.warehouse(origin, at.index(i).key("origin").key("name"), found);
            for (j, upstream) in request.sources.stages.iter().enumerate() {
                let path = at.index(i).key("sources").key("stages").index(j);
                let world = self.world;
                let candidates: Vec<&str> = world
                    .names(Kind::Stage, Some(self.project))
                    .into_iter()
                    .filter(|n| *n != me)
                    .collect();
                if !names::is_valid(upstream, MAX_LABEL) {
                    continue;
                }
                if !world.has(Kind::Stage, self.project, upstream) {
                    let message = format!(
                        "upstream stage `{upstream}` does not exist in project `{}`",
                        self.project
                    );
                    let hint = hint_for(
                        upstream,
                        candidates,
                        &format!("define a Stage named `{upstream}`"),
                    );
                    found.push(Issue::new(path, message).hint(hint));
                } else if let Some(Resource::Stage(up)) =
                    world.get(Kind::Stage, self.project, upstream)
                {
                    let requests_origin = up
                        .spec
                        .requested_freight
                        .iter()
                        .any(|r| r.origin.name == origin);
                    if upstream != me && !requests_origin {
                        let message = format!(
                            "upstream stage `{upstream}` does not request Freight from Warehouse `{origin}`"
                        );
                        let hint = format!(
                            "request Warehouse `{origin}` in Stage `{upstream}`, or remove `{upstream}` here"
                        );
                        found.push(Issue::new(path, message).hint(hint));
                    }
                }
            }
        }
        if let Some(verification) = &stage.spec.verification {
            self.analysis_templates(verification, found);
        }
        if let Some(template) = &stage.spec.promotion_template {
            let at = FieldPath::of(&["spec", "promotionTemplate", "spec", "steps"]);
            let outer: [&[Var]; 2] = [&template.spec.vars, &stage.spec.vars];
            self.tasks(
                &template.spec.steps,
                &at,
                &outer,
                (
                    "the promotion template or the Stage",
                    ExprLanguage::of_annotations(stage.metadata.annotations.as_ref()),
                ),
                found,
            );
        }
    }

    /// A Stage's AnalysisTemplates: each exists, gets every arg it needs (from the Stage or
    /// its own default), and no two define a metric of the same name.
    fn analysis_templates(&self, verification: &Verification, found: &mut Vec<Issue>) {
        let at = FieldPath::of(&["spec", "verification", "analysisTemplates"]);
        let mut metrics: BTreeMap<&str, &str> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for (i, reference) in verification.analysis_templates.iter().enumerate() {
            let path = at.index(i).key("name");
            let name = reference.name.as_str();
            if !seen.insert(name) {
                continue; // listed twice: reported by the Stage's own checks
            }
            if !self.exists(
                Kind::AnalysisTemplate,
                name,
                path.clone(),
                "AnalysisTemplate",
                found,
            ) {
                continue;
            }
            let Some(Resource::AnalysisTemplate(template)) =
                self.world.get(Kind::AnalysisTemplate, self.project, name)
            else {
                continue;
            };
            for arg in template.spec.args.iter().filter(|a| a.value.is_none()) {
                if verification.args.iter().any(|a| a.name == arg.name) {
                    continue;
                }
                found.push(
                    Issue::new(
                        path.clone(),
                        format!(
                            "AnalysisTemplate `{name}` needs arg `{}`, which has no default and is not in `verification.args`",
                            arg.name
                        ),
                    )
                    .hint(format!(
                        "add `- {{name: {}, value: …}}` to `spec.verification.args`",
                        arg.name
                    )),
                );
            }
            for metric in &template.spec.metrics {
                match metrics.get(metric.name.as_str()) {
                    Some(first) if *first != name => found.push(
                        Issue::new(
                            path.clone(),
                            format!(
                                "metric `{}` is defined by AnalysisTemplate `{first}` and by `{name}`",
                                metric.name
                            ),
                        )
                        .hint("rename one of them: a Stage's metrics need distinct names"),
                    ),
                    _ => {
                        metrics.insert(metric.name.as_str(), name);
                    }
                }
            }
        }
    }

    /// Steps that run a task: the task exists, its expressions are in the language of the
    /// steps' own document (`scope`'s), and every var it needs has a value.
    fn tasks(
        &self,
        steps: &[PromotionStep],
        at: &FieldPath,
        outer: &[&[Var]],
        (scope, language): (&str, ExprLanguage),
        found: &mut Vec<Issue>,
    ) {
        for (i, step) in steps.iter().enumerate() {
            let Some(task_ref) = &step.task else { continue };
            let path = at.index(i).key("task");
            let kind = match task_ref.task_kind() {
                Some(TaskKind::Project) => Kind::PromotionTask,
                Some(TaskKind::Cluster) => Kind::ClusterPromotionTask,
                None => continue, // its kind check reported it
            };
            if !self.exists(kind, &task_ref.name, path.key("name"), kind.as_str(), found) {
                continue;
            }
            let Some(Resource::PromotionTask(task)) =
                self.world.get(kind, self.project, &task_ref.name)
            else {
                continue;
            };
            let task_language = ExprLanguage::of_annotations(task.metadata.annotations.as_ref());
            if task_language != language {
                found.push(
                    Issue::new(
                        path.key("name"),
                        format!(
                            "PromotionTask `{}` is written in {} but {scope} in {}: one \
                             promotion reads one expression language",
                            task_ref.name,
                            task_language.as_str(),
                            language.as_str()
                        ),
                    )
                    .hint(
                        "write both in the same API version (`kargo.akuity.io` documents are \
                         expr-lang, `dray.dev` ones CEL), or set the \
                         `dray.dev/expression-language` annotation on both alike",
                    ),
                );
            }
            let sets =
                |vars: &[Var], name: &str| vars.iter().any(|v| v.name == name && v.value.is_some());
            let needed: BTreeSet<&str> = task
                .spec
                .vars
                .iter()
                .filter(|v| v.value.is_none())
                .map(|v| v.name.as_str())
                .collect();
            for name in needed {
                if sets(&step.vars, name) || outer.iter().any(|vars| sets(vars, name)) {
                    continue;
                }
                let message = format!(
                    "task `{}` needs var `{name}`, which has no value here: set it on the step or on {scope}",
                    task_ref.name
                );
                let hint = format!("add `vars: [{{name: {name}, value: …}}]` to this step");
                found.push(Issue::new(path.clone(), message).hint(hint));
            }
        }
    }
}

/// One issue per stage cycle, on the first stage of the cycle (in flow order, from its
/// alphabetically first stage) that is in the batch; a cycle among stored stages alone is
/// not this batch's fault.
fn cycles(
    world: &World<'_>,
    batch: &BTreeMap<&ObjectKey, usize>,
    docs: &[Checked],
) -> Vec<(usize, Issue)> {
    let mut graphs: BTreeMap<&str, BTreeMap<&str, Vec<&str>>> = BTreeMap::new();
    for (k, resource) in &world.objects {
        if let (Some(project), Some(Resource::Stage(stage))) = (k.namespace.as_deref(), resource) {
            let upstreams = stage
                .spec
                .requested_freight
                .iter()
                .flat_map(|r| r.sources.stages.iter().map(String::as_str));
            graphs
                .entry(project)
                .or_default()
                .insert(k.name.as_str(), upstreams.collect());
        }
    }
    let mut issues = Vec::new();
    for (project, graph) in &graphs {
        for cycle in find_cycles(graph) {
            let in_batch = cycle.iter().enumerate().find_map(|(p, name)| {
                batch
                    .get(&ObjectKey::namespaced(Kind::Stage, project, name))
                    .map(|doc| (p, *doc))
            });
            let Some((position, doc)) = in_batch else {
                continue;
            };
            let upstream = &cycle[(position + cycle.len() - 1) % cycle.len()];
            let Some(Resource::Stage(stage)) = &docs[doc].resource else {
                continue;
            };
            let path = edge_path(stage, upstream);
            let issue = Issue::new(path, format!("stages form a cycle: `{}`", show(&cycle)))
                .hint("Freight must flow one way: remove one of these upstream stages");
            issues.push((doc, issue));
        }
    }
    issues
}

/// The path of the first `sources.stages` entry of `stage` that names `upstream`.
fn edge_path(stage: &Stage, upstream: &str) -> FieldPath {
    let at = FieldPath::of(&["spec", "requestedFreight"]);
    for (i, request) in stage.spec.requested_freight.iter().enumerate() {
        if let Some(j) = request.sources.stages.iter().position(|s| s == upstream) {
            return at.index(i).key("sources").key("stages").index(j);
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::config::{SourceFile, load};

    const BASE: &str = "\
apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {name: demo}
spec: {}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {name: app, namespace: demo}
spec: {subscriptions: [{image: {repoURL: r.example.com/app}}]}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {name: lib, namespace: demo}
spec: {subscriptions: [{git: {repoURL: https://git.example.com/lib.git}}]}
---
apiVersion: dray.dev/v1alpha1
kind: PromotionTask
metadata: {name: deploy, namespace: demo}
spec:
  vars: [{name: target}]
  steps: [{uses: git-push}]
";

    fn problems(text: &str) -> Vec<(usize, String, String)> {
        let files = [
            SourceFile {
                path: "base.yaml".into(),
                content: BASE.into(),
            },
            SourceFile {
                path: "t.yaml".into(),
                content: text.into(),
            },
        ];
        match load(&files, Some("demo"), &BTreeMap::new()) {
            Ok(_) => Vec::new(),
            Err(e) => {
                e.0.into_iter()
                    .map(|e| (e.line.unwrap_or(0), e.field.unwrap_or_default(), e.message))
                    .collect()
            }
        }
    }

    #[test]
    fn an_upstream_stage_must_request_the_same_warehouse() {
        let text = "\
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: dev}
spec:
  requestedFreight:
  - {origin: {kind: Warehouse, name: app}, sources: {direct: true}}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: qa}
spec:
  requestedFreight:
  - {origin: {kind: Warehouse, name: app}, sources: {stages: [dev]}}
  - origin: {kind: Warehouse, name: lib}
    sources: {stages: [dev]}
";
        assert_eq!(
            problems(text),
            vec![(
                15,
                "spec.requestedFreight[1].sources.stages[0]".to_owned(),
                "upstream stage `dev` does not request Freight from Warehouse `lib`".to_owned()
            )]
        );
    }

    #[test]
    fn freight_and_promotions_refer_to_what_exists() {
        let text = "\
apiVersion: dray.dev/v1alpha1
kind: Freight
metadata: {name: 0a1b2c}
origin: {kind: Warehouse, name: nope}
images: [{repoURL: r.example.com/app, digest: 'sha256:00'}]
---
apiVersion: dray.dev/v1alpha1
kind: Promotion
metadata: {name: p1}
spec:
  stage: dev
  freight: 0a1b2c
  vars: [{name: target, value: prod}]
  steps:
  - task: {name: deploy}
  - task: {name: deploy}
    vars: [{name: target}]
";
        let found = problems(text);
        let fields: Vec<&str> = found.iter().map(|(_, f, _)| f.as_str()).collect();
        assert_eq!(fields, vec!["origin.name", "spec.stage"], "{found:#?}");
        assert_eq!(
            found[0].2,
            "Warehouse `nope` does not exist in project `demo`"
        );
    }

    #[test]
    fn a_task_var_is_needed_once_even_if_declared_twice() {
        let text = "\
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: dev}
spec:
  requestedFreight:
  - {origin: {kind: Warehouse, name: app}, sources: {direct: true}}
  promotionTemplate:
    spec:
      steps: [{task: {name: deploy}}]
";
        let found = problems(text);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].1, "spec.promotionTemplate.spec.steps[0].task");
    }
}
