//! Whole-batch tests of [`super::load`]: what a user sees for real files.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::api::Kind;

const PROJECT: &str = "\
apiVersion: dray.dev/v1alpha1
kind: Project
metadata:
  name: demo
spec: {}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata:
  name: app
  namespace: demo
spec:
  interval: 5m
  subscriptions:
  - image:
      repoURL: registry.example.com/team/app
      constraint: ^1.0.0
  - git:
      repoURL: https://git.example.com/team/config.git
      branch: main
---
apiVersion: dray.dev/v1alpha1
kind: PromotionTask
metadata:
  name: update-image
  namespace: demo
spec:
  vars:
  - name: image
  - name: branch
    value: main
  steps:
  - uses: git-clone
    as: clone
  - uses: kustomize-set-image
    config:
      images: [\"${{ vars.image }}\"]
  - uses: git-push
    retry:
      timeout: 5m
";

const STAGES: &str = "\
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: dev
  namespace: demo
spec:
  requestedFreight:
  - origin: {kind: Warehouse, name: app}
    sources: {direct: true}
  promotionTemplate:
    spec:
      steps:
      - task: {name: update-image}
        vars:
        - {name: image, value: registry.example.com/team/app}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: staging
  namespace: demo
spec:
  vars:
  - {name: image, value: registry.example.com/team/app}
  requestedFreight:
  - origin: {kind: Warehouse, name: app}
    sources:
      stages: [dev]
      requiredSoakTime: 1h
  promotionTemplate:
    spec:
      steps:
      - task: {name: update-image}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: prod
  namespace: demo
  labels: {tier: production}
spec:
  queuePolicy: Queue
  requestedFreight:
  - origin: {kind: Warehouse, name: app}
    sources: {stages: [staging]}
  promotionTemplate:
    spec:
      vars:
      - {name: image, value: registry.example.com/team/app}
      steps:
      - task: {name: update-image}
      - uses: git-push
        as: sync
";

fn file(path: &str, content: &str) -> SourceFile {
    SourceFile {
        path: path.to_owned(),
        content: content.to_owned(),
    }
}

fn nothing() -> BTreeMap<ObjectKey, Value> {
    BTreeMap::new()
}

fn load_errors(
    files: &[SourceFile],
    ns: Option<&str>,
    existing: &BTreeMap<ObjectKey, Value>,
) -> Vec<ConfigError> {
    match load(files, ns, existing) {
        Ok(m) => panic!("expected errors, loaded {} manifests", m.len()),
        Err(e) => e.0,
    }
}

/// `files` loaded on their own: no default namespace, nothing stored yet.
fn load_new(files: &[SourceFile]) -> Result<Vec<Manifest>, ConfigErrors> {
    load(files, None, &nothing())
}

/// The errors of `files` loaded on their own (see [`load_new`]).
fn load_new_errors(files: &[SourceFile]) -> Vec<ConfigError> {
    load_errors(files, None, &nothing())
}

/// (line, field, message) of each error.
fn summary(errors: &[ConfigError]) -> Vec<(usize, String, String)> {
    errors
        .iter()
        .map(|e| {
            (
                e.line.unwrap_or(0),
                e.field.clone().unwrap_or_default(),
                e.message.clone(),
            )
        })
        .collect()
}

#[test]
fn a_valid_three_stage_project_loads() {
    let manifests =
        load_new(&[file("project.yaml", PROJECT), file("stages.yaml", STAGES)]).unwrap();
    let keys: Vec<String> = manifests.iter().map(|m| m.key.to_string()).collect();
    assert_eq!(
        keys,
        vec![
            "Project demo",
            "Warehouse demo/app",
            "PromotionTask demo/update-image",
            "Stage demo/dev",
            "Stage demo/staging",
            "Stage demo/prod"
        ]
    );
    let prod = &manifests[5];
    assert_eq!(
        prod.origin,
        DocumentOrigin {
            file: "stages.yaml".into(),
            document: 3,
            line: 35
        }
    );
    assert_eq!(prod.object["apiVersion"], "dray.dev/v1alpha1");
    assert_eq!(prod.object["metadata"]["labels"]["tier"], "production");
    assert_eq!(
        prod.object["spec"]["requestedFreight"][0]["sources"]["stages"],
        json!(["staging"])
    );
    assert_eq!(manifests[1].origin.line, 7);
}

#[test]
fn a_misspelled_field_a_bad_name_and_a_missing_upstream_are_exactly_three_errors() {
    let text = "\
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: dev
  namespace: demo
spec:
  requestedFrieght:
  - origin: {kind: Warehouse, name: app}
    sources: {direct: true}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: Staging_1
  namespace: demo
spec:
  requestedFreight:
  - origin: {kind: Warehouse, name: app}
    sources: {stages: [dev]}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: prod
  namespace: demo
spec:
  requestedFreight:
  - origin:
      kind: Warehouse
      name: app
    sources:
      stages:
      - qa
";
    let errors = load_new_errors(&[file("project.yaml", PROJECT), file("bad.yaml", text)]);
    assert_eq!(
        summary(&errors),
        vec![
            (
                7,
                "spec.requestedFrieght".into(),
                "unknown field `requestedFrieght`".into()
            ),
            (
                14,
                "metadata.name".into(),
                "`Staging_1` is not a valid name: use lowercase letters, digits and `-`, starting \
                 and ending with a letter or digit, at most 63 characters"
                    .into()
            ),
            (
                33,
                "spec.requestedFreight[0].sources.stages[0]".into(),
                "upstream stage `qa` does not exist in project `demo`".into()
            ),
        ]
    );
    let hints: Vec<_> = errors
        .iter()
        .map(|e| e.hint.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        hints,
        vec![
            "did you mean `requestedFreight`?",
            "write `staging-1` instead",
            "define a Stage named `qa`, or use one of: `Staging_1`, `dev`",
        ]
    );
    assert_eq!(
        errors
            .iter()
            .map(|e| (e.document, e.name.clone()))
            .collect::<Vec<_>>(),
        vec![
            (Some(1), Some("demo/dev".into())),
            (Some(2), Some("demo/Staging_1".into())),
            (Some(3), Some("demo/prod".into()))
        ]
    );
    assert_eq!(
        errors[2].to_string(),
        "bad.yaml:33: document 3 (Stage demo/prod): spec.requestedFreight[0].sources.stages[0]: \
         upstream stage `qa` does not exist in project `demo`\n  \
         hint: define a Stage named `qa`, or use one of: `Staging_1`, `dev`"
    );
}

#[test]
fn stage_cycles_are_reported_once_with_their_path() {
    let text = "\
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: dev, namespace: demo}
spec:
  requestedFreight:
  - origin: {kind: Warehouse, name: app}
    sources:
      direct: true
      stages: [staging]
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: staging, namespace: demo}
spec:
  requestedFreight:
  - origin: {kind: Warehouse, name: app}
    sources: {stages: [dev]}
";
    let errors = load_new_errors(&[file("p.yaml", PROJECT), file("cycle.yaml", text)]);
    assert_eq!(
        summary(&errors),
        vec![(
            9,
            "spec.requestedFreight[0].sources.stages[0]".into(),
            "stages form a cycle: `dev -> staging -> dev`".into()
        )]
    );
    assert_eq!(errors[0].file, "cycle.yaml");
    assert!(errors[0].hint.is_some());
}

#[test]
fn a_task_var_without_a_value_must_be_supplied() {
    let text = "\
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: dev, namespace: demo}
spec:
  requestedFreight:
  - origin: {kind: Warehouse, name: app}
    sources: {direct: true}
  promotionTemplate:
    spec:
      steps:
      - uses: git-clone
      - task:
          name: update-image
        vars:
        - {name: imagee, value: x}
";
    let errors = load_new_errors(&[file("p.yaml", PROJECT), file("dev.yaml", text)]);
    assert_eq!(
        summary(&errors),
        vec![(
            12,
            "spec.promotionTemplate.spec.steps[1].task".into(),
            "task `update-image` needs var `image`, which has no value here: set it on the step \
             or on the promotion template or the Stage"
                .into()
        )]
    );
    assert_eq!(
        errors[0].hint.as_deref(),
        Some("add `vars: [{name: image, value: …}]` to this step")
    );
}

#[test]
fn a_document_defined_twice_names_both_places() {
    let dev = STAGES.split("---\n").next().unwrap();
    let errors = load_new_errors(&[
        file("p.yaml", PROJECT),
        file("a.yaml", dev),
        file("b.yaml", &format!("# again\n{dev}")),
    ]);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(
        (errors[0].file.as_str(), errors[0].line),
        ("b.yaml", Some(5))
    );
    assert_eq!(
        errors[0].message,
        "Stage demo/dev is defined twice: also in a.yaml:1 (document 1)"
    );
}

#[test]
fn yaml_syntax_errors_have_a_line_and_do_not_hide_other_files() {
    let broken = "\
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: dev
  namespace: demo
spec:
  requestedFreight: [
";
    let bad_kind =
        "apiVersion: dray.dev/v1alpha1\nkind: Stgae\nmetadata: {name: x, namespace: demo}\n";
    let errors = load_new_errors(&[file("broken.yaml", broken), file("kind.yaml", bad_kind)]);
    let found: Vec<_> = errors
        .iter()
        .map(|e| (e.file.as_str(), e.line, e.document))
        .collect();
    assert_eq!(
        found,
        vec![
            ("broken.yaml", Some(8), Some(1)),
            ("kind.yaml", Some(2), Some(1))
        ]
    );
    assert!(
        errors[0].message.starts_with("invalid YAML: "),
        "{}",
        errors[0].message
    );
    assert!(errors[0].hint.is_some());
    assert_eq!(errors[1].message, "unknown kind `Stgae`");

    let tabs = "a:\n\t- b\n";
    let errors = load_new_errors(&[file("tabs.yaml", tabs)]);
    assert_eq!(errors[0].line, Some(2));
    assert_eq!(
        errors[0].hint.as_deref(),
        Some("indent with spaces: YAML does not allow tabs for indentation")
    );
}

fn stored(text: &str) -> BTreeMap<ObjectKey, Value> {
    load_new(&[file("stored.yaml", text)])
        .unwrap()
        .into_iter()
        .map(|m| (m.key, m.object))
        .collect()
}

#[test]
fn references_resolve_against_stored_resources() {
    let existing = stored(&format!(
        "{PROJECT}---\n{}",
        STAGES.split("---\n").next().unwrap()
    ));
    assert_eq!(existing.len(), 4);
    let staging = STAGES.split("---\n").nth(1).unwrap();
    let manifests = load(&[file("staging.yaml", staging)], None, &existing).unwrap();
    assert_eq!(manifests.len(), 1);
    assert_eq!(
        manifests[0].key,
        ObjectKey::namespaced(Kind::Stage, "demo", "staging")
    );

    // A batch document overrides the stored one: dev now takes from staging, a cycle.
    let dev = "\
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: dev, namespace: demo}
spec:
  requestedFreight:
  - origin: {kind: Warehouse, name: app}
    sources: {stages: [staging]}
";
    let errors = load_errors(
        &[file("staging.yaml", staging), file("dev.yaml", dev)],
        None,
        &existing,
    );
    assert_eq!(
        summary(&errors),
        vec![(
            7,
            "spec.requestedFreight[0].sources.stages[0]".into(),
            "stages form a cycle: `dev -> staging -> dev`".into()
        )]
    );
    assert_eq!(errors[0].file, "dev.yaml");

    // Without the stored resources, nothing resolves.
    let errors = load_new_errors(&[file("staging.yaml", staging)]);
    let fields: Vec<_> = errors
        .iter()
        .map(|e| e.field.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        fields,
        vec![
            "metadata.namespace",
            "spec.requestedFreight[0].origin.name",
            "spec.requestedFreight[0].sources.stages[0]",
            "spec.promotionTemplate.spec.steps[0].task.name",
        ]
    );
    assert_eq!(errors[0].message, "project `demo` does not exist");
    assert_eq!(errors[0].line, Some(5));
}

#[test]
fn the_default_namespace_fills_in_the_project() {
    let task = "apiVersion: dray.dev/v1alpha1\nkind: PromotionTask\nmetadata:\n  name: t\nspec:\n  steps: [{uses: git-clone}]\n";
    let project = PROJECT.split("---\n").next().unwrap();
    let manifests = load(
        &[file("p.yaml", project), file("t.yaml", task)],
        Some("demo"),
        &nothing(),
    )
    .unwrap();
    assert_eq!(
        manifests[1].key,
        ObjectKey::namespaced(Kind::PromotionTask, "demo", "t")
    );
    assert_eq!(manifests[1].object["metadata"]["namespace"], "demo");
    assert_eq!(manifests[0].object["metadata"], json!({"name": "demo"}));

    let errors = load_new_errors(&[file("p.yaml", project), file("t.yaml", task)]);
    assert_eq!(
        summary(&errors),
        vec![(
            3,
            "metadata".into(),
            "a PromotionTask belongs to a project, but `metadata.namespace` is not set".into()
        )]
    );
    assert_eq!(
        errors[0].hint.as_deref(),
        Some("add `metadata.namespace: <project>` or pass `-p <project>`")
    );
}

#[test]
fn webhook_receivers_need_one_provider_and_unique_names() {
    let config = "\
apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {name: demo, namespace: demo}
spec:
  promotionPolicies:
  - stageSelector: {name: dev}
    autoPromotionEnabled: true
  webhookReceivers:
  - name: gh
    github: {secretRef: gh-secret}
    gitlab: {secretRef: gl-secret}
  - name: gh
    generic: {secretRef: token}
  - name: none
  - name: hub
    dockerhub: {secretRef: token}
  - name: jfrog
    artifactory: {secretRef: token, virtualRepoName: docker-virtual}
";
    let errors = load_new_errors(&[file("p.yaml", PROJECT), file("c.yaml", config)]);
    let found = summary(&errors);
    let fields: Vec<_> = found.iter().map(|(_, field, _)| field.as_str()).collect();
    assert_eq!(
        fields,
        vec![
            "spec.webhookReceivers[0]",
            "spec.webhookReceivers[1].name",
            "spec.webhookReceivers[2]"
        ]
    );
    // The message names every kind and what is wrong; the hint says what to do.
    assert!(
        found[0].2.contains("`github` and `gitlab` are set"),
        "{}",
        found[0].2
    );
    assert!(
        found[0].2.contains("`bitbucket`") && found[0].2.contains("`artifactory`"),
        "{}",
        found[0].2
    );
    assert!(found[2].2.ends_with("none is set"), "{}", found[2].2);
    assert!(
        errors[0]
            .hint
            .as_deref()
            .unwrap_or_default()
            .contains("add another receiver")
    );
}

#[test]
fn a_webhook_secret_shorter_than_sixteen_bytes_is_refused_and_never_shown() {
    let credential = |fields: &str| {
        format!(
            "apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: hook, namespace: demo}}\nspec:\n  type: webhook\n{fields}"
        )
    };
    let files = |fields: &str| [file("p.yaml", PROJECT), file("c.yaml", &credential(fields))];
    let errors = |fields: &str| load_new_errors(&files(fields));
    assert!(load_new(&files("  token: a-secret-of-16-by\n")).is_ok());
    // No secret at all keeps the stored one (or leaves the receiver refusing everything).
    assert!(load_new(&files("")).is_ok());
    for (fields, field, message) in [
        (
            "  token: \"\"\n",
            "spec.token",
            "the webhook secret is empty: a receiver needs a secret of at least 16 bytes",
        ),
        (
            "  token: hunter2hunter2\n",
            "spec.token",
            "the webhook secret is shorter than 16 bytes, too easy to guess",
        ),
        (
            "  password: hunter2hunter2\n",
            "spec.password",
            "the webhook secret is shorter than 16 bytes, too easy to guess",
        ),
    ] {
        let found = errors(fields);
        assert_eq!(
            summary(&found)
                .into_iter()
                .map(|(_, f, m)| (f, m))
                .collect::<Vec<_>>(),
            vec![(field.to_owned(), message.to_owned())],
            "{fields}"
        );
        assert_eq!(found[0].kind.as_deref(), Some("Credential"));
        assert_eq!(found[0].name.as_deref(), Some("demo/hook"));
        assert_eq!(
            found[0].hint.as_deref(),
            Some(crate::config::webhook_secret::HINT)
        );
        assert!(
            found.iter().all(|e| !e.to_string().contains("hunter2")),
            "{found:?}"
        );
    }
}

#[test]
fn promotions_name_a_stage_and_freight() {
    let promo = "\
apiVersion: dray.dev/v1alpha1
kind: Promotion
metadata: {name: p1, namespace: demo}
spec:
  stage: qa
  freight: ''
";
    let errors = load_new_errors(&[
        file("p.yaml", PROJECT),
        file("s.yaml", STAGES),
        file("promo.yaml", promo),
    ]);
    assert_eq!(
        summary(&errors),
        vec![
            (
                5,
                "spec.stage".into(),
                "stage `qa` does not exist in project `demo`".into()
            ),
            (6, "spec.freight".into(), "`freight` is empty".into()),
        ]
    );
}

#[test]
fn type_errors_and_envelope_errors_are_located() {
    let text = "\
apiVersion: v1
kind: Warehouse
metadata: {name: images, namespace: demo}
spec:
  subscriptions:
  - image:
      repoURL: registry.example.com/app
      discoveryLimit: lots
";
    let errors = load_new_errors(&[file("p.yaml", PROJECT), file("w.yaml", text)]);
    assert_eq!(
        summary(&errors),
        vec![
            (
                1,
                "apiVersion".into(),
                "`apiVersion` is `v1`, but Dray reads `dray.dev/v1alpha1`".into()
            ),
            (
                8,
                "spec.subscriptions[0].image.discoveryLimit".into(),
                "invalid type: string \"lots\", expected u32".into()
            ),
        ]
    );
    assert!(
        errors[1]
            .hint
            .as_deref()
            .unwrap()
            .starts_with("expected an integer")
    );
}

#[test]
fn errors_serialize_for_the_api() {
    let errors = ConfigErrors(load_new_errors(&[file("t.yaml", "kind: Stage\n")]));
    let json = serde_json::to_value(&errors).unwrap();
    assert_eq!(json[0]["file"], "t.yaml");
    assert_eq!(json[0]["document"], 1);
    assert!(json[0].get("hint").is_some());
    let back: ConfigErrors = serde_json::from_value(json).unwrap();
    assert_eq!(back, errors);
}

#[test]
fn empty_input_loads_nothing() {
    assert_eq!(
        load_new(&[file("e.yaml", "# nothing\n---\n")]).unwrap(),
        Vec::new()
    );
}

#[test]
fn never_panics_on_truncated_or_mangled_input() {
    let text = format!("{PROJECT}---\n{STAGES}");
    let cuts = text.char_indices().map(|(i, _)| i).step_by(23);
    for cut in cuts {
        let _ = load(&[file("cut.yaml", &text[..cut])], Some("demo"), &nothing());
        let mangled = format!("{}\t: [{{&*!|>\n{}", &text[..cut], &text[cut..]);
        let _ = load_new(&[file("mangled.yaml", &mangled)]);
    }
}

const ANALYSIS: &str = "\
apiVersion: dray.dev/v1alpha1
kind: AnalysisTemplate
metadata:
  name: success-rate
  namespace: demo
spec:
  args:
  - name: service
  - name: prometheus
    value: http://prometheus.monitoring:9090
  metrics:
  - name: success-rate
    interval: 1m
    count: 3
    failureLimit: 1
    successCondition: result[0] >= 0.95
    provider:
      prometheus:
        address: '{{args.prometheus}}'
        query: sum(rate(http_requests_total{service=\"{{args.service}}\",code!~\"5..\"}[2m]))
  - name: healthz
    successCondition: result == true
    provider:
      web:
        url: http://{{args.service}}.example.com/healthz
        jsonPath: '{$.ok}'
";

/// A Stage `verified` (line 1 of its document) with `verification` as written.
fn verified_stage(verification: &str) -> String {
    format!(
        "\
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: verified, namespace: demo}}
spec:
  requestedFreight:
  - origin: {{kind: Warehouse, name: app}}
    sources: {{direct: true}}
  verification:
{verification}"
    )
}

#[test]
fn an_analysis_template_and_a_stage_using_it_load() {
    let stage = verified_stage(
        "    analysisTemplates: [{name: success-rate}]\n    args: [{name: service, value: web}]\n    timeout: 15m\n",
    );
    let manifests = load_new(&[
        file("project.yaml", PROJECT),
        file("analysis.yaml", ANALYSIS),
        file("stage.yaml", &stage),
    ])
    .unwrap();
    let template = manifests
        .iter()
        .find(|m| m.key.kind == Kind::AnalysisTemplate)
        .unwrap();
    assert_eq!(template.object["spec"]["metrics"][1]["name"], "healthz");
    // Stored, the template still resolves for a Stage applied later.
    let existing = stored(&format!("{PROJECT}---\n{ANALYSIS}"));
    assert!(load(&[file("stage.yaml", &stage)], None, &existing).is_ok());
}

#[test]
fn args_in_conditions_are_checked_as_numbers_and_must_be_declared() {
    let template = |success: &str| {
        format!(
            "\
apiVersion: dray.dev/v1alpha1
kind: AnalysisTemplate
metadata: {{name: rate, namespace: demo}}
spec:
  args: [{{name: min}}]
  metrics:
  - name: rate
    successCondition: '{success}'
    provider: {{web: {{url: http://x}}}}
"
        )
    };
    let load_one = |text: &str| {
        load(
            &[file("project.yaml", PROJECT), file("t.yaml", text)],
            None,
            &Default::default(),
        )
    };
    assert!(load_one(&template("result[0] >= {{args.min}}")).is_ok());
    assert!(load_one(&template("result.status == \"{{ args.min }}\"")).is_ok());
    let errors = load_new_errors(&[
        file("project.yaml", PROJECT),
        file("t.yaml", &template("result[0] >= {{args.max}}")),
    ]);
    let found = summary(&errors);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].1, "spec.metrics[0].successCondition");
    assert_eq!(
        found[0].2,
        "metric `rate` uses `{{args.max}}`, but the template declares no arg `max`"
    );
    let errors = load_new_errors(&[
        file("project.yaml", PROJECT),
        file("t.yaml", &template("result[0] >= {{args.min}} &&")),
    ]);
    let found = summary(&errors);
    assert!(
        found[0].2.starts_with(
            "metric `rate`: `successCondition` is not valid CEL (each `{{args.…}}` taken as 0): "
        ),
        "{found:#?}"
    );
}

#[test]
fn analysis_template_errors_name_the_metric_and_field() {
    let text = "\
apiVersion: dray.dev/v1alpha1
kind: AnalysisTemplate
metadata: {name: broken, namespace: demo}
spec:
  metrics:
  - name: rate
    interval: 5 minutes
    count: 3
    successCondition: result[0] >=
    provider:
      prometheus: {address: prometheus:9090, query: 'up{job=\"{{args.job}}\"}'}
  - name: rate
    count: 2
    provider: {}
  - name: badweb
    provider:
      web: {url: http://x, method: DELETE, jsonPath: '{$.items[*]}', timeoutSeconds: 0}
  - name: both
    provider:
      web: {url: http://x}
      prometheus: {address: http://p, query: up}
  - name: typo
    sucessCondition: 'true'
    provider: {web: {url: http://x}}
";
    let errors = load_new_errors(&[file("project.yaml", PROJECT), file("t.yaml", text)]);
    let found: Vec<(String, String)> = summary(&errors)
        .into_iter()
        .map(|(_, field, message)| (field, message))
        .collect();
    let fields: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        vec![
            "spec.metrics[0].interval",
            "spec.metrics[0].successCondition",
            "spec.metrics[0].provider.prometheus.address",
            "spec.metrics[0].provider.prometheus.query",
            "spec.metrics[1].name",
            "spec.metrics[1].count",
            "spec.metrics[1].provider",
            "spec.metrics[2].provider.web.method",
            "spec.metrics[2].provider.web.timeoutSeconds",
            "spec.metrics[2].provider.web.jsonPath",
            "spec.metrics[3].provider",
            "spec.metrics[4].sucessCondition",
        ],
        "{found:#?}"
    );
    assert!(
        found[1]
            .1
            .starts_with("metric `rate`: `successCondition` is not valid CEL: "),
        "{}",
        found[1].1
    );
    assert_eq!(
        found[3].1,
        "metric `rate` uses `{{args.job}}`, but the template declares no arg `job`"
    );
    assert_eq!(found[6].1, "metric `rate` has no provider");
    assert_eq!(
        found[10].1,
        "metric `both` sets both `web` and `prometheus`"
    );
    let typo = &errors[11];
    assert_eq!(typo.line, Some(23));
    assert!(
        typo.hint
            .as_deref()
            .unwrap_or_default()
            .contains("successCondition"),
        "{typo:?}"
    );
}

#[test]
fn a_stage_names_existing_templates_and_gives_their_args() {
    let stage = verified_stage(
        "    analysisTemplates: [{name: success-rate}, {name: succes-rate}, {name: success-rate}]\n    timeout: soon\n",
    );
    let errors = load_new_errors(&[
        file("project.yaml", PROJECT),
        file("analysis.yaml", ANALYSIS),
        file("stage.yaml", &stage),
    ]);
    assert_eq!(
        summary(&errors),
        vec![
            (
                9,
                "spec.verification.analysisTemplates[2].name".into(),
                "AnalysisTemplate `success-rate` is listed twice".into()
            ),
            (
                9,
                "spec.verification.analysisTemplates[0].name".into(),
                "AnalysisTemplate `success-rate` needs arg `service`, which has no default and is not in `verification.args`".into()
            ),
            (
                9,
                "spec.verification.analysisTemplates[1].name".into(),
                "AnalysisTemplate `succes-rate` does not exist in project `demo`".into()
            ),
            (
                10,
                "spec.verification.timeout".into(),
                "`soon` is not a duration; write a duration such as `30s`, `5m` or `1h30m` (no spaces)".into()
            ),
        ],
    );
    assert_eq!(
        errors[1].hint.as_deref(),
        Some("add `- {name: service, value: …}` to `spec.verification.args`")
    );
    assert!(
        errors[2]
            .hint
            .as_deref()
            .unwrap_or_default()
            .contains("`success-rate`"),
        "{:?}",
        errors[2].hint
    );
}

#[test]
fn a_signing_credential_needs_an_openssh_key_and_never_shows_it() {
    let credential = |type_: &str, fields: &str| {
        format!(
            "apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: c, namespace: demo}}\nspec:\n  type: {type_}\n  repoURL: https://git.example.com/config.git\n{fields}"
        )
    };
    let issues = |text: &str| -> Vec<(String, String)> {
        match load_new(&[file("project.yaml", PROJECT), file("c.yaml", text)]) {
            Ok(_) => Vec::new(),
            Err(errors) => summary(&errors.0)
                .into_iter()
                .map(|(_, field, message)| (field, message))
                .collect(),
        }
    };
    let key = "  sshPrivateKey: |\n    -----BEGIN OPENSSH PRIVATE KEY-----\n    b3BlbnNzaC1rZXktdjEAAAAA\n    -----END OPENSSH PRIVATE KEY-----\n";
    assert!(issues(&credential("signing", key)).is_empty());
    assert_eq!(
        issues(&credential("signing", "")),
        vec![(
            "spec.sshPrivateKey".to_owned(),
            "a signing credential needs the SSH private key that signs Dray's commits".to_owned()
        )]
    );
    let found = issues(&credential(
        "signing",
        "  sshPrivateKey: hunter2-not-a-key\n",
    ));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].1, "`sshPrivateKey` is not an OpenSSH private key");
    let errors = load_new_errors(&[
        file("project.yaml", PROJECT),
        file(
            "c.yaml",
            &credential("signing", "  sshPrivateKey: hunter2-not-a-key\n"),
        ),
    ]);
    assert!(
        errors.iter().all(|e| !e.to_string().contains("hunter2")),
        "{errors:?}"
    );
    let found = issues(&credential("signing", &format!("{key}  token: abc\n")));
    assert_eq!(found[0].0, "spec.token", "{found:?}");
    let found = issues(&credential("git", key));
    assert_eq!(found[0].0, "spec.sshPrivateKey", "{found:?}");
    assert!(
        found[0].1.contains("only used to sign commits"),
        "{found:?}"
    );
}

/// Promotion windows are checked by the rules `pipeline::windows` owns.
#[test]
fn config_loader_reports_each_bad_window_at_its_field() {
    use crate::api::WindowKind;
    use crate::pipeline::windows::evaluate;
    let ts = |text: &str| -> jiff::Timestamp { text.parse().unwrap() };
    let no_labels = BTreeMap::<String, String>::new;
    let yaml = "\
apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {name: demo}
spec: {}
---
apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {name: demo, namespace: demo}
spec:
  promotionWindows:
  - name: weekend-freeze
    kind: Deny
    schedule: 0 22 * * 5
    duration: 60h
    timeZone: Europe/Berlin
    stageSelector: {name: glob:prod-*}
    description: CHG-1234
  - name: xmas
    kind: Deny
    rrule: |-
      DTSTART:20261224T000000Z
      RRULE:FREQ=YEARLY;COUNT=3
    duration: 24h
  - name: bad
    kind: Allow
    schedule: 0 22 * *
    duration: 1h
    timeZone: Mars/Olympus
  - name: xmas
    kind: Deny
    schedule: 0 0 24 12 *
";
    let files = [SourceFile {
        path: "c.yaml".into(),
        content: yaml.into(),
    }];
    let errors = load(&files, None, &BTreeMap::new()).unwrap_err().0;
    let found: Vec<_> = errors
        .iter()
        .map(|e| (e.field.clone().unwrap_or_default(), e.message.clone()))
        .collect();
    let fields: Vec<_> = found.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.promotionWindows[2].schedule",
            "spec.promotionWindows[2].timeZone",
            "spec.promotionWindows[3].name",
            "spec.promotionWindows[3].duration",
        ],
        "{found:#?}"
    );
    assert!(found[1].1.contains("`bad`"), "{found:#?}");
    assert!(errors.iter().all(|e| e.hint.is_some()));
    // Valid windows load, and read back as written.
    let valid = yaml.split("  - name: bad").next().unwrap();
    let files = [SourceFile {
        path: "c.yaml".into(),
        content: valid.into(),
    }];
    let manifests = load(&files, None, &BTreeMap::new()).unwrap();
    let config: crate::api::ProjectConfig =
        serde_json::from_value(manifests[1].object.clone()).unwrap();
    let windows = &config.spec.promotion_windows;
    assert_eq!(windows.len(), 2);
    assert_eq!(windows[0].kind, WindowKind::Deny);
    assert_eq!(windows[0].description.as_deref(), Some("CHG-1234"));
    assert!(
        !evaluate(windows, "prod-eu", &no_labels(), ts("2026-12-24T12:00:00Z"))
            .unwrap()
            .open
    );
}

#[test]
fn a_pull_request_steps_forge_is_checked_at_apply() {
    let text = "\
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: dev, namespace: demo}
spec:
  requestedFreight:
  - origin: {kind: Warehouse, name: app}
    sources: {direct: true}
  promotionTemplate:
    spec:
      steps:
      - uses: git-open-pr
        config: {repoURL: 'https://git.example.com/acme/config.git', provider: gittea, targetBranch: main}
      - uses: git-wait-for-pr
        config: {repoURL: 'https://git.example.com/acme/config.git', prNumber: 1}
      - uses: git-merge-pr
        config: {repoURL: 'https://git.example.com/acme/config.git', provider: gitea, prNumber: 1}
";
    let errors = load_new_errors(&[file("p.yaml", PROJECT), file("dev.yaml", text)]);
    let found: Vec<(String, String)> = summary(&errors)
        .into_iter()
        .map(|(_, field, message)| (field, message))
        .collect();
    assert_eq!(
        found,
        vec![
            (
                "spec.promotionTemplate.spec.steps[0].config.provider".into(),
                "`provider` `gittea` is not a forge Dray speaks".into()
            ),
            (
                "spec.promotionTemplate.spec.steps[1].config.repoURL".into(),
                "cannot tell the forge of `git.example.com`".into()
            ),
        ]
    );
    assert_eq!(
        errors[0].hint.as_deref(),
        Some("use `github`, `gitlab`, `gitea`, `forgejo` or `bitbucket`")
    );
}

/// One mistake of each kind, spread over several documents: every one is reported in one
/// pass, each on its line and with a "did you mean" where a near name exists.
#[test]
fn every_kind_of_mistake_in_every_document_is_reported_at_once() {
    let text = "\
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata:
  name: app
  namespace: demo
spec:
  interval: 5 m
  subscriptons:
  - image:
      repoURL: registry.example.com/team/app
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: qa
  namespace: demo
spec:
  queuePolicy: 5
  requestedFreight:
  - origin: {kind: Warehouse, name: ap}
    sources: {direct: true}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: prod
  namespace: demo
spec:
  requestedFreight:
  - origin: {kind: Warehouse, name: app}
    sources:
      stages: [qaa]
      requiredSoakTim: 1h
  promotionTemplate:
    spec:
      steps:
      - task: {name: update-imag}
      - uses: git-push
        if: ${{ outputs.clone. }}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: dev
  namespace: demo
spec:
  requestedFrieght:
  - origin: {kind: Warehouse, name: nope}
    sources: {direct: true}
";
    let project = "\
apiVersion: dray.dev/v1alpha1
kind: Project
metadata:
  name: demo
spec: {}
---
apiVersion: dray.dev/v1alpha1
kind: PromotionTask
metadata:
  name: update-image
  namespace: demo
spec:
  steps:
  - uses: git-clone
";
    let errors = load_new_errors(&[file("project.yaml", project), file("bad.yaml", text)]);
    let found: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let expect = [
        "bad.yaml:7: document 1 (Warehouse demo/app): spec.interval: `5 m` is not a duration",
        "bad.yaml:8: document 1 (Warehouse demo/app): spec.subscriptons: unknown field `subscriptons`\n  hint: did you mean `subscriptions`?",
        "bad.yaml:18: document 2 (Stage demo/qa): spec.queuePolicy: invalid type",
        "bad.yaml:20: document 2 (Stage demo/qa): spec.requestedFreight[0].origin.name: Warehouse `ap` does not exist in project `demo`\n  hint: did you mean `app`?",
        "bad.yaml:32: document 3 (Stage demo/prod): spec.requestedFreight[0].sources.stages[0]: upstream stage `qaa` does not exist in project `demo`\n  hint: did you mean `qa`?",
        "bad.yaml:33: document 3 (Stage demo/prod): spec.requestedFreight[0].sources.requiredSoakTim: unknown field `requiredSoakTim`\n  hint: did you mean `requiredSoakTime`?",
        "bad.yaml:37: document 3 (Stage demo/prod): spec.promotionTemplate.spec.steps[0].task.name: PromotionTask `update-imag` does not exist in project `demo`\n  hint: did you mean `update-image`?",
        "bad.yaml:39: document 3 (Stage demo/prod): spec.promotionTemplate.spec.steps[1].if:",
        "bad.yaml:47: document 4 (Stage demo/dev): spec.requestedFrieght: unknown field `requestedFrieght`\n  hint: did you mean `requestedFreight`?",
        "bad.yaml:48: document 4 (Stage demo/dev): spec.requestedFrieght[0].origin.name: Warehouse `nope` does not exist in project `demo`",
    ];
    for (i, want) in expect.iter().enumerate() {
        assert!(
            found.iter().any(|f| f.starts_with(want)),
            "mistake {i} not reported as `{want}`; reported:\n{}",
            found.join("\n")
        );
    }
    assert_eq!(found.len(), expect.len(), "{}", found.join("\n"));
}

/// What `dray apply` of `files` alone says, one line per error.
fn said(files: &[SourceFile]) -> Vec<String> {
    load_new_errors(files)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The seed article's Kargo project (e2e/src/fixtures/kargo-seed), as written.
fn kargo_seed() -> Vec<SourceFile> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/e2e/src/fixtures/kargo-seed");
    [
        "project.yaml",
        "secrets.yaml",
        "warehouse.yaml",
        "task.yaml",
        "stages.yaml",
    ]
    .iter()
    .map(|name| {
        let path = format!("{dir}/{name}");
        file(name, &std::fs::read_to_string(&path).unwrap())
    })
    .collect()
}

#[test]
fn the_seed_kargo_project_applies_as_written_and_is_stored_as_drays() {
    let manifests = load(&kargo_seed(), None, &nothing()).unwrap_or_else(|e| panic!("{e}"));
    let kinds: Vec<String> = manifests.iter().map(|m| m.key.to_string()).collect();
    assert_eq!(manifests.len(), 9, "{kinds:?}");
    for manifest in &manifests {
        assert_eq!(manifest.object["apiVersion"], "dray.dev/v1alpha1");
    }
    let by_name = |kind: Kind, name: &str| {
        manifests
            .iter()
            .find(|m| m.key.kind == kind && m.key.name == name)
            .map(|m| m.object.clone())
            .unwrap_or_else(|| panic!("no {kind} {name} in {kinds:?}"))
    };
    let task = by_name(Kind::PromotionTask, "render-to-stage-branch");
    assert_eq!(
        task["metadata"]["annotations"]["dray.dev/expression-language"],
        "expr-lang"
    );
    let hook = by_name(Kind::Credential, "gitlab-webhook");
    assert_eq!(hook["spec"]["type"], "webhook");
    assert_eq!(hook["spec"]["token"], "gitlab-webhook-secret-0123456789");
    let config = by_name(Kind::ProjectConfig, "myapp");
    assert_eq!(
        config["spec"]["webhookReceivers"][0]["generic"]["secretRef"],
        "ci-webhook"
    );
    assert_eq!(
        config["spec"]["webhookReceivers"][0]["generic"]["actions"][0]["targetSelectionCriteria"]
            [0]["name"],
        "myapp"
    );
}

#[test]
fn a_kargo_document_is_checked_in_kargos_language_and_field_names() {
    let mut files = kargo_seed();
    let task = files.iter_mut().find(|f| f.path == "task.yaml").unwrap();
    // Dray's field name in Kargo's language, and a CEL-only form in a Kargo template.
    task.content = task
        .content
        .replace(
            "commitFrom(vars.gitRepo).ID[0:7]",
            "commitFrom(vars.gitRepo).id[0:7]",
        )
        .replace(
            "branch: stage/${{ ctx.stage }}",
            "branch: stage/${{ ctx.stag }}",
        );
    let found = said(&files);
    assert!(
        found
            .iter()
            .any(|e| e.contains("config.message") && e.contains("did you mean `ID`")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|e| e.contains("checkout[1].branch") && e.contains("stag")),
        "{found:#?}"
    );
    // A Stage of Kargo's using a task of Dray's is refused: one promotion, one language.
    let mut mixed = kargo_seed();
    let task = mixed.iter_mut().find(|f| f.path == "task.yaml").unwrap();
    task.content = task
        .content
        .replace("kargo.akuity.io/v1alpha1", "dray.dev/v1alpha1")
        .replace(".ID", ".id")
        .replace(".Tag", ".tag")
        .replace(".Digest", ".digest")
        .replace("[0:7]", "")
        .replace("ctx.targetFreight.name", "ctx.targetFreight.alias");
    let found = said(&mixed);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found
            .iter()
            .all(|e| e.contains("one promotion reads one expression language")),
        "{found:#?}"
    );
}

#[test]
fn a_generic_receiver_targets_warehouses_that_exist() {
    let mut files = kargo_seed();
    let project = files.iter_mut().find(|f| f.path == "project.yaml").unwrap();
    project.content = project.content.replace(
        "name: myapp\n          - action",
        "name: myap\n          - action",
    );
    project.content = project.content.replace(
        "              - kind: Warehouse\n                name: myapp",
        "              - kind: Warehouse\n                name: myap",
    );
    let found = said(&files);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("targetSelectionCriteria[0].name: Warehouse `myap` does not exist"),
        "{found:#?}"
    );
    assert!(found[0].contains("did you mean `myapp`"), "{found:#?}");
}

#[test]
fn a_cluster_task_is_shared_by_every_project_and_named_by_its_kind() {
    let mut files = kargo_seed();
    let task = files.iter_mut().find(|f| f.path == "task.yaml").unwrap();
    task.content = task
        .content
        .replace("kind: PromotionTask", "kind: ClusterPromotionTask")
        .replace("  namespace: myapp\nspec:\n  vars:", "spec:\n  vars:");
    let stages = files.iter_mut().find(|f| f.path == "stages.yaml").unwrap();
    stages.content = stages.content.replace(
        "task: { name: render-to-stage-branch }",
        "task: { name: render-to-stage-branch, kind: ClusterPromotionTask }",
    );
    let manifests = load_new(&files).unwrap_or_else(|e| panic!("{e}"));
    let task = manifests
        .iter()
        .find(|m| m.key.kind == Kind::ClusterPromotionTask)
        .expect("the cluster task");
    assert_eq!(task.key.namespace, None);
    assert_eq!(
        task.object["metadata"]["annotations"]["dray.dev/expression-language"],
        "expr-lang"
    );
    // The same name as a project's task is another task: it does not exist.
    let stages = files.iter_mut().find(|f| f.path == "stages.yaml").unwrap();
    stages.content = stages
        .content
        .replacen(", kind: ClusterPromotionTask }", " }", 1);
    let found = said(&files);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0]
            .contains("PromotionTask `render-to-stage-branch` does not exist in project `myapp`"),
        "{found:#?}"
    );
    // A cluster task takes no namespace.
    let task = files.iter_mut().find(|f| f.path == "task.yaml").unwrap();
    task.content = task.content.replace(
        "  name: render-to-stage-branch\n",
        "  name: render-to-stage-branch\n  namespace: myapp\n",
    );
    let found = said(&files);
    assert!(
        found
            .iter()
            .any(|e| e.contains("a ClusterPromotionTask is cluster-scoped")),
        "{found:#?}"
    );
}

#[test]
fn analysis_conditions_name_only_what_their_language_has_and_cluster_templates_are_named() {
    let template = |condition: &str| {
        format!(
            "apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {{name: demo}}
---
apiVersion: dray.dev/v1alpha1
kind: AnalysisTemplate
metadata: {{name: error-rate, namespace: demo}}
spec:
  metrics:
    - name: rate
      successCondition: '{condition}'
      provider: {{prometheus: {{address: 'http://127.0.0.1:9', query: q}}}}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {{name: app, namespace: demo}}
spec:
  subscriptions:
    - image: {{repoURL: 127.0.0.1:5000/demo/app}}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: dev, namespace: demo}}
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{direct: true}}
  verification:
    analysisTemplates: [{{name: error-rate, kind: ClusterAnalysisTemplate}}]
"
        )
    };
    let good = template("size(result) > 0 && result[0] < 0.05");
    load_new(&[file("a.yaml", &good)]).unwrap_or_else(|e| panic!("{e}"));
    // Argo Rollouts' `len` in a CEL template, and a misspelt variable.
    for (condition, message) in [
        (
            "len(result) > 0 && result[0] < 0.05",
            "no function `len` in CEL",
        ),
        ("results[0] < 0.05", "no variable `results`"),
    ] {
        let found = said(&[file("a.yaml", &template(condition))]);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].contains("successCondition") && found[0].contains(message),
            "{found:#?}"
        );
    }
    let wrong_kind = good.replace("kind: ClusterAnalysisTemplate", "kind: Rollout");
    let found = said(&[file("a.yaml", &wrong_kind)]);
    assert!(
        found[0].contains("`Rollout` is not a kind of analysis template"),
        "{found:#?}"
    );
}

#[test]
fn a_kargo_function_dray_cannot_serve_is_refused_at_apply() {
    let mut files = kargo_seed();
    let task = files.iter_mut().find(|f| f.path == "task.yaml").unwrap();
    task.content = task.content.replace(
        "releaseName: myapp",
        "releaseName: ${{ secret('release').name }}",
    );
    let found = said(&files);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("config.releaseName")
            && found[0].contains("`secret()` is not served by Dray"),
        "{found:#?}"
    );
}

#[test]
fn notifications_need_one_target_a_safe_url_known_events_and_existing_secrets() {
    let config = "\
apiVersion: dray.dev/v1alpha1
kind: Credential
metadata: {name: hook-secret, namespace: demo}
spec: {type: webhook, token: a-signing-secret-of-32-bytes-ok!}
---
apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {name: demo, namespace: demo}
spec:
  notifications:
  - name: ci
    webhook: {url: 'https://ci.example.com/dray', secretRef: hook-secret}
    events: [PromotionSucceeded, FreightVerified]
  - name: ci
    webhook: {url: 'http://ci.example.com/dray', secretRef: hook-secert}
    events: []
  - name: both
    webhook: {url: 'http://127.0.0.1:9000/x'}
    slack: {urlSecretRef: hook-secret}
    events: [StageFrozen]
  - name: chat
    slack: {}
    events: [VerificationFailed]
";
    let errors = load_new_errors(&[file("p.yaml", PROJECT), file("c.yaml", config)]);
    let found = summary(&errors);
    let fields: Vec<&str> = found.iter().map(|(_, field, _)| field.as_str()).collect();
    assert_eq!(
        fields,
        vec![
            "spec.notifications[1].name",
            "spec.notifications[1].webhook.url",
            "spec.notifications[1].webhook.secretRef",
            "spec.notifications[1].events",
            "spec.notifications[2]",
            "spec.notifications[3].slack",
        ],
        "{found:#?}"
    );
    assert!(found[1].2.contains("not `http://`"), "{}", found[1].2);
    assert!(
        found[2].2.contains("`hook-secert` does not exist"),
        "{}",
        found[2].2
    );
    assert!(
        errors[2]
            .hint
            .as_deref()
            .unwrap_or_default()
            .contains("hook-secret"),
        "did you mean: {:?}",
        errors[2].hint
    );
    // An event Dray does not know is refused where it is written.
    let unknown = config.replace("[StageFrozen]", "[StageMelted]");
    let errors = load_new_errors(&[file("p.yaml", PROJECT), file("c.yaml", &unknown)]);
    assert!(
        errors.iter().any(|e| e.message.contains("StageMelted")),
        "{:#?}",
        summary(&errors)
    );
}
