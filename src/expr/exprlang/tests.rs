//! The engine end to end: Kargo's templates (values from Kargo's own tests), the context
//! shape, Kargo's functions on Dray's Freight, expr-lang's operators and builtins (values
//! from expr-lang's documentation), Argo Rollouts' conditions, the apply-time checks, and
//! malformed input returning errors rather than panicking.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::api::{FreightChart, FreightCommit, FreightImage, FreightOrigin, FreightOriginKind};
use crate::expr::{ExprContext, FreightView};

fn ctx() -> ExprContext {
    let mut ctx = ExprContext {
        project: "shop".into(),
        stage: "test".into(),
        promotion: "test.01abc".into(),
        actor: "ann".into(),
        freight: FreightView {
            id: "f0123".into(),
            alias: "frosty-otter".into(),
            origin: FreightOrigin {
                kind: FreightOriginKind::Warehouse,
                name: "shop".into(),
            },
            images: vec![FreightImage {
                repo_url: "ghcr.io/acme/shop".into(),
                tag: "1.4.0".into(),
                digest: "sha256:abc".into(),
                ..Default::default()
            }],
            commits: vec![FreightCommit {
                repo_url: "https://git.example/shop.git".into(),
                id: "abcdef0123456789".into(),
                branch: Some("main".into()),
                tag: None,
                message: "fix".into(),
                author: "Ann <ann@example.com>".into(),
            }],
            charts: vec![FreightChart {
                repo_url: "oci://ghcr.io/acme/charts".into(),
                name: "shop".into(),
                version: "2.0.1".into(),
                digest: None,
            }],
        },
        ..ExprContext::default()
    };
    ctx.vars
        .insert("gitRepo".into(), json!("https://git.example/shop.git"));
    ctx.vars.insert("replicas".into(), json!(2));
    ctx.vars.insert("list".into(), json!([1, 2, 3]));
    ctx.outputs
        .insert("build".into(), json!({"sha": "deadbeef"}));
    ctx.step_statuses.insert("build".into(), "Succeeded".into());
    ctx
}

fn eval(text: &str) -> Value {
    ExprLangEngine::new()
        .evaluate_string(text, &ctx(), &NoHost)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn eval_err(text: &str) -> String {
    ExprLangEngine::new()
        .evaluate_string(text, &ctx(), &NoHost)
        .expect_err(text)
        .to_string()
}

#[test]
fn the_seed_template_takes_the_short_commit_id() {
    assert_eq!(
        eval("${{ commitFrom(vars.gitRepo).ID[0:7] }}"),
        json!("abcdef0")
    );
}

#[test]
fn templates_read_results_as_kargo_does() {
    // whole-string results keep their type; embedded ones become text
    assert_eq!(eval("${{ vars.replicas }}"), json!(2));
    assert_eq!(eval("${{ 2.5 }}"), json!(2.5));
    assert_eq!(eval("${{ true }}"), json!(true));
    assert_eq!(eval("${{ vars.list }}"), json!([1, 2, 3]));
    assert_eq!(eval("${{ {\"foo\": \"bar\"} }}"), json!({"foo": "bar"}));
    assert_eq!(eval("${{ \"null\" }}"), json!(null));
    assert_eq!(eval("app-${{ vars.replicas }}"), json!("app-2"));
    assert_eq!(eval("${{ 'hello' }}, ${{ 42 }}!"), json!("hello, 42!"));
    // text that reads as a number is one, as in Kargo
    assert_eq!(eval("${{ 1 }}${{ 2 }}"), json!(12));
    assert_eq!(eval("no expression: 42"), json!("no expression: 42"));
    // Kargo's quote() cases
    assert_eq!(eval("${{ quote(nil) }}"), json!("null"));
    assert_eq!(eval("${{ quote(true) }}"), json!("true"));
    assert_eq!(eval("${{ quote(42) }}"), json!("42"));
    assert_eq!(
        eval("${{ quote({ 'foo': 'bar' }) }}"),
        json!("{\"foo\":\"bar\"}")
    );
    assert_eq!(eval("${{ quote('foo') }}"), json!("foo"));
    assert_eq!(eval("${{ unsafeQuote('foo') }}"), json!("\"foo\""));
    assert_eq!(
        eval("${{ quote({\"foo\": \"bar\"}) }}\n"),
        json!("{\"foo\":\"bar\"}\n")
    );
    assert_eq!(eval("${{ 42 }}\n"), json!(42));
    assert_eq!(eval("${{ quote(42) }}\n"), json!("42\n"));
}

#[test]
fn both_delimiters_evaluate_alike() {
    assert_eq!(eval("${% vars.replicas %}"), json!(2));
    assert_eq!(
        eval("foo ${{ ctx.project }} and ${% 'bar' %}"),
        json!("foo shop and bar")
    );
    // `${% %}` lets `}}` appear inside, as in Kargo
    assert_eq!(eval("${% '{{.domain}}' %}"), json!("{{.domain}}"));
    assert!(eval_err("${{ '{{.domain}}' }}").contains("syntax error"));
    assert!(eval_err("${{ vars.replicas ").contains("unterminated `${{`"));
}

#[test]
fn ctx_has_kargos_shape() {
    assert_eq!(eval("${{ ctx.project }}"), json!("shop"));
    assert_eq!(eval("${{ ctx.stage }}"), json!("test"));
    assert_eq!(eval("${{ ctx.promotion }}"), json!("test.01abc"));
    assert_eq!(eval("${{ ctx.targetFreight.name }}"), json!("f0123"));
    assert_eq!(
        eval("${{ ctx.targetFreight.origin }}"),
        json!({"kind": "Warehouse", "name": "shop"})
    );
    assert_eq!(eval("${{ ctx.meta.promotion.rollback }}"), json!(false));
    assert_eq!(eval("${{ ctx.targetFreight.origin.name }}"), json!("shop"));
    assert_eq!(eval("${{ ctx.meta.promotion.actor }}"), json!("ann"));
    assert_eq!(eval("${{ outputs.build.sha }}"), json!("deadbeef"));

    struct Rollback;
    impl KargoHost for Rollback {
        fn rollback(&self) -> bool {
            true
        }
    }
    let engine = ExprLangEngine::new();
    let out = engine.evaluate_string("${{ ctx.meta.promotion.rollback }}", &ctx(), &Rollback);
    assert_eq!(out.unwrap(), json!(true));
    let mut task = ctx();
    task.task_outputs = Some(serde_json::Map::from_iter([("x".to_owned(), json!(1))]));
    assert_eq!(
        engine
            .evaluate_string("${{ task.outputs.x }}", &task, &NoHost)
            .unwrap(),
        json!(1)
    );
}

#[test]
fn freight_functions_use_kargos_field_names() {
    assert_eq!(
        eval("${{ imageFrom('ghcr.io/acme/shop') }}"),
        json!({"RepoURL": "ghcr.io/acme/shop", "Tag": "1.4.0", "Digest": "sha256:abc"})
    );
    assert_eq!(
        eval("${{ commitFrom(vars.gitRepo) }}"),
        json!({"RepoURL": "https://git.example/shop.git", "ID": "abcdef0123456789",
               "Branch": "main", "Tag": "", "Message": "fix",
               "Author": "Ann <ann@example.com>", "Committer": ""})
    );
    assert_eq!(
        eval("${{ chartFrom('oci://ghcr.io/acme/charts', 'shop').Version }}"),
        json!("2.0.1")
    );
    assert_eq!(
        eval("${{ chartFrom('oci://ghcr.io/acme/charts', warehouse('shop')).Name }}"),
        json!("shop")
    );
    assert_eq!(
        eval("${{ imageFrom('ghcr.io/acme/shop', warehouse('shop')).Tag }}"),
        json!("1.4.0")
    );
    assert_eq!(
        eval("${{ warehouse('shop') }}"),
        json!({"Kind": "Warehouse", "Name": "shop"})
    );
    let err = eval_err("${{ imageFrom('ghcr.io/acme/shop', warehouse('other')).Tag }}");
    assert!(
        err.contains("comes from Warehouse `shop`, not `other`"),
        "{err}"
    );
    let err = eval_err("${{ imageFrom('ghcr.io/acme/nope').Tag }}");
    assert!(
        err.contains("no image from `ghcr.io/acme/nope` in Freight `f0123`"),
        "{err}"
    );
    assert!(eval_err("${{ imageFrom() }}").contains("imageFrom() takes 1 to 2 arguments"));
    assert!(eval_err("${{ imageFrom(1) }}").contains("must be a string, not a int"));
}

#[test]
fn the_mapping_from_dray_freight_is_one_function_each() {
    let freight = ctx().freight;
    assert_eq!(kargo_image(&freight.images[0])["Digest"], "sha256:abc");
    assert_eq!(kargo_commit(&freight.commits[0])["ID"], "abcdef0123456789");
    assert_eq!(kargo_commit(&freight.commits[0])["Tag"], "");
    assert_eq!(kargo_chart(&freight.charts[0])["Version"], "2.0.1");
    // the field lists the checks use are the mapping's keys
    let keys = |v: Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    let mut fields = KARGO_COMMIT_FIELDS
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>();
    fields.sort();
    assert_eq!(keys(kargo_commit(&freight.commits[0])), fields);
    let mut fields = KARGO_IMAGE_FIELDS
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>();
    fields.sort();
    assert_eq!(keys(kargo_image(&freight.images[0])), fields);
    let mut fields = KARGO_CHART_FIELDS
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>();
    fields.sort();
    assert_eq!(keys(kargo_chart(&freight.charts[0])), fields);
}

#[test]
fn host_lookups_fill_metadata_secrets_and_config_maps() {
    struct Host;
    impl KargoHost for Host {
        fn freight_metadata(&self, freight: &str) -> Option<serde_json::Map<String, Value>> {
            (freight == "f0123")
                .then(|| serde_json::Map::from_iter([("qa".to_owned(), json!({"ok": true}))]))
        }
        fn stage_metadata(&self, stage: &str) -> Option<serde_json::Map<String, Value>> {
            (stage == "prod")
                .then(|| serde_json::Map::from_iter([("owner".to_owned(), json!("ops"))]))
        }
        fn secret(&self, name: &str) -> Option<BTreeMap<String, String>> {
            (name == "creds").then(|| BTreeMap::from([("token".to_owned(), "s3cr3t".to_owned())]))
        }
        fn config_map(&self, name: &str) -> Option<BTreeMap<String, String>> {
            (name == "settings").then(|| BTreeMap::from([("region".to_owned(), "eu".to_owned())]))
        }
    }
    let engine = ExprLangEngine::new();
    let e = |text: &str| engine.evaluate_string(text, &ctx(), &Host).unwrap();
    assert_eq!(
        e("${{ freightMetadata(ctx.targetFreight.name).qa.ok }}"),
        json!(true)
    );
    assert_eq!(
        e("${{ freightMetadata('f0123', 'qa') }}"),
        json!({"ok": true})
    );
    assert_eq!(e("${{ freightMetadata('other') }}"), json!(null));
    assert_eq!(e("${{ freightMetadata('f0123', 'missing') }}"), json!(null));
    assert_eq!(e("${{ stageMetadata('prod').owner }}"), json!("ops"));
    assert_eq!(e("${{ stageMetadata('dev') ?? 'none' }}"), json!("none"));
    assert_eq!(e("${{ secret('creds').token }}"), json!("s3cr3t"));
    assert_eq!(e("${{ secret('missing') }}"), json!({}));
    assert_eq!(e("${{ sharedSecret('creds') }}"), json!({}));
    assert_eq!(e("${{ configMap('settings').region }}"), json!("eu"));
    assert_eq!(e("${{ sharedConfigMap('settings') }}"), json!({}));
}

#[test]
fn metadata_loaded_into_the_context_answers_without_a_host() {
    use crate::api::Metadata;
    let mut ctx = ctx();
    ctx.metadata.freight.insert(
        "f0123".into(),
        Metadata::from([("qa".to_owned(), json!("passed"))]),
    );
    ctx.metadata.stages.insert(
        "dev".into(),
        Metadata::from([("build".to_owned(), json!({"n": 7}))]),
    );
    let engine = ExprLangEngine::new();
    let e = |text: &str| engine.evaluate_string(text, &ctx, &NoHost).unwrap();
    assert_eq!(
        e("${{ freightMetadata(ctx.targetFreight.name).qa }}"),
        json!("passed")
    );
    assert_eq!(e("${{ freightMetadata('f0123', 'qa') }}"), json!("passed"));
    assert_eq!(e("${{ stageMetadata('dev').build.n }}"), json!(7));
    assert_eq!(e("${{ stageMetadata('prod') }}"), json!(null));
    // The view is a host too.
    let view = ctx.metadata.clone();
    let bare = ExprContext::default();
    assert_eq!(
        engine
            .evaluate_string("${{ stageMetadata('dev').build.n }}", &bare, &view)
            .unwrap(),
        json!(7)
    );
}

#[test]
fn step_status_functions() {
    let engine = ExprLangEngine::new();
    let mut failed = ctx();
    assert!(
        engine
            .evaluate_condition("${{ success() }}", &failed, &NoHost)
            .unwrap()
    );
    assert!(
        engine
            .evaluate_condition("status('build') == 'Succeeded'", &failed, &NoHost)
            .unwrap()
    );
    assert!(
        engine
            .evaluate_condition("status('later') == ''", &failed, &NoHost)
            .unwrap()
    );
    failed.any_failed = true;
    assert!(
        !engine
            .evaluate_condition("success()", &failed, &NoHost)
            .unwrap()
    );
    assert!(
        engine
            .evaluate_condition("failure()", &failed, &NoHost)
            .unwrap()
    );
    assert!(
        engine
            .evaluate_condition("always()", &failed, &NoHost)
            .unwrap()
    );
    let err = engine
        .evaluate_condition("vars.replicas", &failed, &NoHost)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "condition `vars.replicas` must evaluate to a bool, not a int (`2`); hint: compare the \
         value, e.g. `result[0] < 0.05`"
    );
}

#[test]
fn semver_functions() {
    assert_eq!(eval("${{ semverParse('v1.2.3-rc.1').Major }}"), json!(1));
    assert_eq!(eval("${{ semverParse('1.2.3').Minor() }}"), json!(2));
    assert_eq!(eval("${{ semverParse('1.2.3').Patch() + 1 }}"), json!(4));
    assert_eq!(
        eval("${{ semverParse('1.2.3-rc.1').Prerelease() }}"),
        json!("rc.1")
    );
    assert_eq!(eval("${{ semverDiff('1.2.3', '2.0.0') }}"), json!("Major"));
    assert_eq!(eval("${{ semverDiff('1.2.3', '1.3.0') }}"), json!("Minor"));
    assert_eq!(eval("${{ semverDiff('1.2.3', '1.2.4') }}"), json!("Patch"));
    assert_eq!(
        eval("${{ semverDiff('1.2.3+a', '1.2.3+b') }}"),
        json!("Metadata")
    );
    assert_eq!(eval("${{ semverDiff('1.2.3', '1.2.3') }}"), json!("None"));
    assert_eq!(
        eval("${{ semverDiff('1.2.3', 'x') }}"),
        json!("Incomparable")
    );
    assert!(eval_err("${{ semverParse('x') }}").contains("invalid semantic version `x`"));
}

#[test]
fn expr_lang_operators_and_builtins() {
    // values as expr-lang's language definition gives them
    let cases: &[(&str, Value)] = &[
        ("'a' + 'b'", json!("ab")),
        ("'hello' contains 'ell'", json!(true)),
        ("'hello' startsWith 'he'", json!(true)),
        ("'hello' endsWith 'lo'", json!(true)),
        ("2 in [1, 2, 3]", json!(true)),
        ("'a' in {a: 1}", json!(true)),
        ("4 not in vars.list", json!(true)),
        ("vars.replicas > 1 ? 'many' : 'one'", json!("many")),
        ("vars.missing ?? 'fallback'", json!("fallback")),
        ("'abcdef'[0:3]", json!("abc")),
        ("'abcdef'[3:]", json!("def")),
        ("vars.list[0]", json!(1)),
        ("vars.list[-1]", json!(3)),
        ("vars.list[1:]", json!([2, 3])),
        ("len(vars.list)", json!(3)),
        ("len('héllo')", json!(5)),
        ("all(vars.list, # > 0)", json!(true)),
        ("any(vars.list, # > 2)", json!(true)),
        ("none(vars.list, # > 3)", json!(true)),
        ("filter(vars.list, # > 1)", json!([2, 3])),
        ("map(vars.list, # * 2)", json!([2, 4, 6])),
        ("vars.list | map(# + 1) | sum()", json!(9)),
        ("count(vars.list, # % 2 == 1)", json!(2)),
        ("let x = 2; x * vars.replicas", json!(4)),
        ("upper('abc')", json!("ABC")),
        ("lower('ABC')", json!("abc")),
        ("trim('  a  ')", json!("a")),
        ("split('a,b,c', ',')", json!(["a", "b", "c"])),
        ("join(['a', 'b'], '-')", json!("a-b")),
        ("int('42') + 1", json!(43)),
        ("float('1.5') * 2", json!(3.0)),
        ("string(42)", json!("42")),
        ("toJSON({a: 1})", json!("{\n  \"a\": 1\n}")),
        ("fromJSON('{\"a\": [1, 2]}').a[1]", json!(2)),
        ("replace('a-b', '-', '_')", json!("a_b")),
        ("7 % 3", json!(1)),
        ("2 ** 3", json!(8.0)),
        ("10 / 4", json!(2.5)),
        ("not false and true", json!(true)),
        ("'abc' matches '^a'", json!(true)),
        ("duration('90s') == duration('1m30s')", json!(true)),
        ("now() > date('2020-01-01')", json!(true)),
        ("first(vars.list)", json!(1)),
        ("max(1, 5, 3)", json!(5)),
        ("keys({b: 1})", json!(["b"])),
        ("vars?.missing?.deeper", json!(null)),
        ("type(1.5)", json!("float")),
        // map literals with computed values (rewritten for the crate, see rewrite.rs)
        (
            "{a: vars.replicas, 'b': [1, -1], c: {d: 1 + 1}}",
            json!({"a": 2, "b": [1, -1], "c": {"d": 2}}),
        ),
        ("{a: 1}.a", json!(1)),
    ];
    let engine = ExprLangEngine::new();
    for (source, want) in cases {
        let got = engine
            .evaluate_expression(source, &ctx(), &NoHost)
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        assert_eq!(expr_to_json(&got).unwrap(), *want, "{source}");
    }
}

#[test]
fn the_builtin_list_matches_the_crate() {
    let engine = ExprLangEngine::new();
    for name in EXPR_LANG_BUILTINS.iter().chain(KARGO_FUNCTIONS) {
        let err = engine.evaluate_expression(&format!("{name}()"), &ctx(), &NoHost);
        if let Err(err) = err {
            assert!(
                !err.to_string().contains("Unknown function"),
                "{name}: {err}"
            );
        }
    }
    let err = engine
        .evaluate_expression("nosuch()", &ctx(), &NoHost)
        .unwrap_err();
    assert!(
        err.to_string().contains("Unknown function: nosuch"),
        "{err}"
    );
}

#[test]
fn analysis_conditions_bind_result_as_argo_rollouts_does() {
    let engine = ExprLangEngine::new();
    let seed = "len(result) > 0 && result[0] < 0.05";
    let samples = |v: &[f64]| engine.evaluate_analysis_condition(seed, AnalysisResult::Samples(v));
    assert!(samples(&[0.01]).unwrap());
    assert!(!samples(&[0.2]).unwrap());
    assert!(!samples(&[]).unwrap());
    let json = |c: &str, v: Value| engine.evaluate_analysis_condition(c, AnalysisResult::Json(&v));
    assert!(json("result.ok == true", json!({"ok": true})).unwrap());
    assert!(json("asInt(result) == 3", json!("3")).unwrap());
    assert!(json("asFloat(result) > 0.5", json!("0.75")).unwrap());
    assert!(json("asInt(result) == 3", json!(3)).unwrap());
    assert!(json("isNil(result)", json!(null)).unwrap());
    assert!(json("default(result, 7) == 7", json!(null)).unwrap());
    assert!(json("default(result, 7) == 2", json!(2)).unwrap());
    assert!(json("!isNaN(result) && !isInf(result)", json!(1.5)).unwrap());
    let nan = engine
        .evaluate_analysis_condition("isNaN(result[0])", AnalysisResult::Samples(&[f64::NAN]));
    assert!(nan.unwrap());
    let inf = engine.evaluate_analysis_condition(
        "isInf(result[0])",
        AnalysisResult::Samples(&[f64::INFINITY]),
    );
    assert!(inf.unwrap());
    let err = json(seed, json!({"a": 1})).unwrap_err().to_string();
    assert!(
        err.starts_with("expr-lang expression `len(result) > 0 && result[0] < 0.05` failed:"),
        "{err}"
    );
    let err = json("asInt(result) == 1", json!("x"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("asInt(): `x` is not an integer"), "{err}");
    let err = json("result", json!(1)).unwrap_err().to_string();
    assert!(err.contains("must evaluate to a bool, not a int"), "{err}");
}

#[test]
fn apply_time_checks_refuse_kargo_mistakes() {
    let promotion = KnownShapes::promotion();
    let issues = check_exprlang_template("${{ commitFrom(vars.gitRepo).id[0:7] }}", &promotion);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].kind, IssueKind::UnknownField);
    assert_eq!(issues[0].offset, 29);
    assert_eq!(
        issues[0].message,
        "`commitFrom(…)` returns {RepoURL, ID, Branch, Tag, Message, Author, Committer}: it has \
         no field `id`; did you mean `ID`?"
    );
    assert_eq!(issues[0].candidates, ["ID"]);
    assert!(
        check_exprlang_template("${{ commitFrom(vars.gitRepo).ID[0:7] }}", &promotion).is_empty()
    );

    let issues = check_exprlang_template("x ${{ imagFrom('r').Tag }}", &promotion);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].kind, IssueKind::UnknownFunction);
    assert_eq!(issues[0].offset, 6);
    assert_eq!(
        issues[0].message,
        "unknown function `imagFrom`; did you mean `imageFrom`?"
    );

    let issues = check_exprlang_template("${{ var.gitRepo }}", &promotion);
    assert_eq!(issues[0].kind, IssueKind::UnknownVariable);
    assert_eq!(
        issues[0].message,
        "unknown variable `var`: the variables here are `ctx`, `vars`, `outputs`, `task`; did \
         you mean `vars`?"
    );

    let issues = check_exprlang_template("${{ ctx.targetFreight.origin.nam }}", &promotion);
    assert_eq!(
        issues[0].message,
        "`ctx.targetFreight.origin` is {kind, name}: it has no field `nam`; did you mean `name`?"
    );
    let issues = check_exprlang_template("${{ ctx.Stage }}", &promotion);
    assert_eq!(issues[0].candidates, ["stage"]);

    let issues = check_exprlang_template(
        "${{ imageFrom('r').tag }} ${{ chartFrom('r').version }}",
        &promotion,
    );
    assert_eq!(issues.len(), 2);
    assert_eq!(issues[0].candidates, ["Tag"]);
    assert_eq!(issues[1].candidates, ["Version"]);

    let issues = check_exprlang_template("${{ 1 + }}", &promotion);
    assert_eq!(issues[0].kind, IssueKind::Syntax);
    assert_eq!(issues[0].offset, 8);
    assert!(
        issues[0]
            .message
            .starts_with("syntax error in expr-lang expression `1 +` at offset 4:"),
        "{}",
        issues[0].message
    );

    let issues = check_exprlang_template("${{ oops", &promotion);
    assert_eq!(issues[0].kind, IssueKind::Syntax);
}

#[test]
fn apply_time_checks_accept_what_kargo_accepts() {
    let promotion = KnownShapes::promotion();
    for text in [
        "${{ commitFrom(vars.gitRepo, warehouse('shop')).ID }}",
        "${{ let c = commitFrom(vars.gitRepo); c.ID[0:7] }}",
        "${{ filter(vars.list, # > 1) }}",
        "${{ map(vars.items, #.name) }}",
        "${{ any(vars.items, name == 'x') }}",
        "${{ {name: vars.a, count: 1} }}",
        "${{ vars.a ? vars.b : vars.c }}",
        "${{ outputs.build.sha ?? ctx.targetFreight.name }}",
        "${{ semverParse(imageFrom('r').Tag).Major() > 1 }}",
        "${{ ctx.meta.promotion.rollback || ctx.meta.promotion.actor == 'ann' }}",
        "${{ upper(quote(secret('creds').token)) }}",
        "${{ task.outputs.x | lower() }}",
        "${{ 'a' in ['a'] && not true || $env != nil }}",
        "plain text",
    ] {
        let issues = check_exprlang_template(text, &promotion);
        assert!(issues.is_empty(), "{text}: {issues:?}");
    }
    let analysis = KnownShapes::analysis();
    assert!(check_exprlang_condition("len(result) > 0 && result[0] < 0.05", &analysis).is_empty());
    assert!(check_exprlang_condition("default(result, 0) < asFloat('1')", &analysis).is_empty());
    let issues = check_exprlang_condition("results[0] < 1", &analysis);
    assert_eq!(
        issues[0].message,
        "unknown variable `results`: the variables here are `result`; did you mean `result`?"
    );
    let issues = check_exprlang_condition("imageFrom('x') != nil", &analysis);
    assert_eq!(issues[0].kind, IssueKind::UnknownFunction);
    let http = KnownShapes::promotion().with_variables(&["response"]);
    assert!(check_exprlang_condition("response.status == 200", &http).is_empty());

    let config = json!({"a": ["${{ vars.x }}", {"b": "${{ nope.x }}"}], "c": 1});
    let issues = check_exprlang_value(&config, &promotion);
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].0, "a[1].b");
}

#[test]
fn languages_follow_the_api_version() {
    assert_eq!(
        ExprLanguage::for_api_version("dray.dev/v1alpha1"),
        ExprLanguage::Cel
    );
    assert_eq!(
        ExprLanguage::for_api_version("argoproj.io/v1alpha1"),
        ExprLanguage::ExprLang
    );
    assert_eq!(
        ExprLanguage::for_api_version("kargo.akuity.io/v1alpha1"),
        ExprLanguage::ExprLang
    );
    assert_eq!(
        ExprLanguage::from_annotation("expr-lang"),
        Some(ExprLanguage::ExprLang)
    );
    assert_eq!(
        ExprLanguage::from_annotation(ExprLanguage::Cel.as_str()),
        Some(ExprLanguage::Cel)
    );
    assert_eq!(ExprLanguage::from_annotation("python"), None);
    let annotations =
        BTreeMap::from([(ExprLanguage::ANNOTATION.to_owned(), "expr-lang".to_owned())]);
    assert_eq!(
        ExprLanguage::of_annotations(Some(&annotations)),
        ExprLanguage::ExprLang
    );
    assert_eq!(ExprLanguage::of_annotations(None), ExprLanguage::Cel);
}

#[test]
fn malformed_input_is_an_error_not_a_panic() {
    let engine = ExprLangEngine::new();
    let shapes = KnownShapes::promotion();
    let deep = format!("{}1{}", "(".repeat(3000), ")".repeat(3000));
    let long_chain = format!("1{}", " + 1".repeat(2000));
    let unary = format!("{}true", "false ? 1 : ".repeat(650));
    let samples = [
        "",
        " ",
        "(",
        ")",
        "[",
        "{",
        "}",
        "'",
        "\"",
        "`",
        "#",
        "$",
        "?",
        "?.",
        "??",
        "..",
        "|",
        "1 +",
        "a.",
        ".a",
        "a[",
        "a[1:",
        "f(",
        "let",
        "let x",
        "let x =",
        "let x = 1;",
        "if",
        "if true {",
        "x ? :",
        "1 ? 2",
        "{a:}",
        "{:1}",
        "[1,,]",
        "\\",
        "é",
        "\u{0}",
        "0x",
        "1e",
        "1__0",
        "9223372036854775808",
        "b'",
        "/*",
        "// c",
        "a matches '('",
        "1 in",
        "not",
        "semverParse('1').Major(",
        ".Major()",
        "map(",
        "all([1], ",
        "# > 1",
        "#acc",
        "$env.",
        "a?.[",
        "1..",
        "1..2..3",
        "-",
        "!",
        "~",
        "%",
        "&&",
        "||",
    ];
    for source in samples
        .iter()
        .map(|s| s.to_string())
        .chain([deep.clone(), unary.clone()])
    {
        let _ = engine.evaluate_expression(&source, &ctx(), &NoHost);
        let _ = check_exprlang_expression(&source, &shapes);
        let _ = check_exprlang_template(&format!("${{{{{source}}}}}"), &shapes);
        let _ = engine.evaluate_analysis_condition(&source, AnalysisResult::Samples(&[1.0]));
    }
    let err = engine
        .evaluate_expression(&deep, &ctx(), &NoHost)
        .unwrap_err();
    assert!(
        matches!(
            err,
            ExprLangError::TooDeep {
                max: MAX_NESTING,
                ..
            }
        ),
        "{err}"
    );
    let err = engine
        .evaluate_expression(&"1".repeat(MAX_LENGTH + 1), &ctx(), &NoHost)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("longer than {MAX_LENGTH} bytes")),
        "{err}"
    );
    // the longest chains accepted still evaluate, on a thread with a small stack
    let handle = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            let engine = ExprLangEngine::new();
            let sum = engine
                .evaluate_expression(&long_chain, &ctx(), &NoHost)
                .unwrap();
            let not = engine.evaluate_expression(&unary, &ctx(), &NoHost).unwrap();
            (expr_to_json(&sum).unwrap(), expr_to_json(&not).unwrap())
        })
        .unwrap();
    assert_eq!(handle.join().unwrap(), (json!(2001), json!(true)));
}

#[test]
fn programs_are_compiled_once() {
    let engine = ExprLangEngine::new();
    for _ in 0..3 {
        engine
            .evaluate_string("${{ vars.replicas }} ${{ vars.replicas }}", &ctx(), &NoHost)
            .unwrap();
    }
    assert_eq!(engine.len(), 1);
    assert!(engine.compile("1 +").is_err());
    assert_eq!(engine.len(), 1);
}

#[test]
fn random_token_soup_never_panics() {
    // a fixed linear congruential sequence over pieces of the language: deterministic
    const PIECES: &[&str] = &[
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "?",
        "??",
        "?.",
        ".",
        "..",
        "+",
        "-",
        "*",
        "/",
        "%",
        "**",
        "==",
        "!=",
        "<",
        ">=",
        "&&",
        "||",
        "!",
        "not",
        "in",
        "matches",
        "|",
        "#",
        "let",
        "=",
        ";",
        "if",
        "else",
        "1",
        "2.5",
        "'s'",
        "\"t\"",
        "nil",
        "true",
        "vars",
        "ctx",
        "result",
        "a",
        "len",
        "map",
        "filter",
        "semverParse",
        "Major",
        "imageFrom",
        "${{",
        "}}",
        "${%",
        "%}",
        " ",
    ];
    let engine = ExprLangEngine::new();
    let shapes = KnownShapes::promotion();
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    for _ in 0..1500 {
        let mut source = String::new();
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let len = 1 + (seed >> 59) as usize;
        for _ in 0..len {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            source.push_str(PIECES[(seed >> 33) as usize % PIECES.len()]);
            source.push(' ');
        }
        let _ = engine.evaluate_expression(&source, &ctx(), &NoHost);
        let _ = engine.evaluate_string(&source, &ctx(), &NoHost);
        let _ = check_exprlang_expression(&source, &shapes);
        let _ = check_exprlang_template(&source, &shapes);
        let _ = engine.evaluate_analysis_condition(&source, AnalysisResult::Samples(&[0.5]));
    }
}

#[test]
fn cel_expressions_get_the_same_field_check_with_drays_names() {
    let issues = check_cel_result_fields("commitFrom(vars.repo).ID.substring(0, 7)");
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].offset, 22);
    assert_eq!(
        issues[0].message,
        "`commitFrom(…)` returns {repoURL, id, branch, tag, message, author}: it has no field \
         `ID`; did you mean `id`?"
    );
    assert!(check_cel_result_fields("commitFrom(vars.repo).id + imageFrom(r).tag").is_empty());
    assert!(check_cel_result_fields("unknownFn(x) + nope.y").is_empty());
}
