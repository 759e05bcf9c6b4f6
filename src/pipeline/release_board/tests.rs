//! The release board's model: columns merged across projects in pipeline order, a cell's
//! Freight, age and state, what differs downstream, what needs attention, the filters.

use serde_json::{Value, json};

use super::*;

fn stage(project: &str, name: &str, from: &[&str], status: Value) -> Stage {
    serde_json::from_value(json!({
        "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
        "metadata": {"name": name, "namespace": project},
        "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": format!("{project}-app")},
            "sources": {"direct": from.is_empty(), "stages": from}}]},
        "status": status
    }))
    .unwrap()
}

fn holding(id: &str, since: &str) -> Value {
    json!({"currentFreight": {"name": id, "since": since}})
}

fn freight(project: &str, id: &str, alias: &str, tag: &str) -> Freight {
    serde_json::from_value(json!({
        "apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
        "metadata": {"name": id, "namespace": project},
        "alias": alias, "origin": {"kind": "Warehouse", "name": format!("{project}-app")},
        "images": [{"repoURL": "reg.example/acme/app", "tag": tag, "digest": "sha256:aa"}],
        "commits": [{"repoURL": "https://git.example/config.git", "id": "0123456789abcdef"}]
    }))
    .unwrap()
}

fn promotion(name: &str, phase: &str) -> Promotion {
    serde_json::from_value(json!({
        "apiVersion": "dray.dev/v1alpha1", "kind": "Promotion",
        "metadata": {"name": name, "namespace": "x"},
        "spec": {"stage": "prod", "freight": "f1"},
        "status": {"phase": phase}
    }))
    .unwrap()
}

fn now() -> Timestamp {
    "2026-06-01T12:00:00Z".parse().unwrap()
}

/// `web`: dev → staging → prod, prod behind; `api`: dev → qa → prod, prod's last
/// promotion failed and qa is held; `batch`: one Stage, healthy.
fn projects() -> Vec<ProjectInput> {
    let web = ProjectInput {
        project: "web".into(),
        stages: vec![
            stage(
                "web",
                "prod",
                &["staging"],
                holding("f1", "2026-05-30T12:00:00Z"),
            ),
            stage("web", "dev", &[], holding("f2", "2026-06-01T11:00:00Z")),
            stage(
                "web",
                "staging",
                &["dev"],
                holding("f2", "2026-06-01T11:30:00Z"),
            ),
        ]
        .into(),
        freight: [
            ("f1".to_owned(), freight("web", "f1", "old-otter", "1.0.0")),
            ("f2".to_owned(), freight("web", "f2", "new-newt", "1.1.0")),
        ]
        .into(),
        ..Default::default()
    };
    let mut failed = holding("a1", "2026-06-01T00:00:00Z");
    failed["lastPromotion"] = json!("prod-1");
    let mut held = holding("a1", "2026-06-01T00:00:00Z");
    held["hold"] = json!({"by": "ann", "freight": "a1", "reason": "rollback"});
    let api = ProjectInput {
        project: "api".into(),
        stages: vec![
            stage("api", "dev", &[], holding("a1", "2026-06-01T00:00:00Z")),
            stage("api", "qa", &["dev"], held),
            stage("api", "prod", &["qa"], failed),
        ]
        .into(),
        freight: [("a1".to_owned(), freight("api", "a1", "", "2.0.0"))].into(),
        promotions: [("prod-1".to_owned(), promotion("prod-1", "Failed"))].into(),
        ..Default::default()
    };
    let batch = ProjectInput {
        project: "batch".into(),
        stages: vec![stage(
            "batch",
            "dev",
            &[],
            json!({"health": {"status": "Healthy"}, "verification": {"id": "v1", "freight": "b1", "phase": "Successful"}}),
        )].into(),
        ..Default::default()
    };
    vec![web, api, batch]
}

#[test]
fn columns_merge_each_projects_pipeline_order_and_rows_are_by_name() {
    let board = release_board(&projects(), &BoardFilter::default(), now());
    assert_eq!(board.columns, ["dev", "qa", "staging", "prod"]);
    let rows: Vec<&str> = board.rows.iter().map(|r| r.project.as_str()).collect();
    assert_eq!(rows, ["api", "batch", "web"]);
    let web = &board.rows[2];
    let order: Vec<&str> = web.cells.iter().map(|c| c.stage.as_str()).collect();
    assert_eq!(order, ["dev", "staging", "prod"]);
    assert_eq!(board.projects, 3);
}

#[test]
fn a_cell_holds_its_freight_its_age_and_what_differs_downstream() {
    let board = release_board(&projects(), &BoardFilter::default(), now());
    let web = board.rows.iter().find(|r| r.project == "web").unwrap();
    let staging = web.cell("staging").unwrap();
    let f = staging.freight.as_ref().unwrap();
    assert_eq!(f.label(), "new-newt");
    assert_eq!(f.images, ["app:1.1.0"]);
    assert_eq!(f.commit.as_deref(), Some("0123456"));
    assert_eq!(f.warehouse, "web-app");
    assert_eq!(staging.age(board.now), Some(30 * 60));
    assert_eq!(age_text(staging.age(board.now).unwrap()), "30m");
    // staging holds new-newt, prod still old-otter: staging differs from prod.
    assert_eq!(staging.differs_from, ["prod"]);
    assert!(web.cell("dev").unwrap().differs_from.is_empty());
    assert!(web.cell("prod").unwrap().differs_from.is_empty());
    // An id stands in for a missing alias.
    let api = board.rows.iter().find(|r| r.project == "api").unwrap();
    assert_eq!(
        api.cell("dev").unwrap().freight.as_ref().unwrap().label(),
        "a1"
    );
    let batch = board.rows.iter().find(|r| r.project == "batch").unwrap();
    let dev = batch.cell("dev").unwrap();
    assert_eq!(dev.health, Some(HealthState::Healthy));
    assert_eq!(dev.verification, Some(VerificationPhase::Successful));
    assert!(dev.freight.is_none() && dev.age(board.now).is_none());
}

#[test]
fn failed_held_and_frozen_stages_need_attention_and_the_filter_keeps_their_rows() {
    let mut inputs = projects();
    inputs[0].windows = vec![PromotionWindow {
        name: "freeze".to_owned(),
        kind: crate::api::WindowKind::Deny,
        schedule: Some("0 0 * * *".to_owned()),
        duration: Some("24h".to_owned()),
        ..PromotionWindow::default()
    }];
    let board = release_board(&inputs, &BoardFilter::default(), now());
    let api = board.rows.iter().find(|r| r.project == "api").unwrap();
    assert_eq!(
        api.cell("prod").unwrap().attention,
        [Attention::PromotionFailed]
    );
    assert_eq!(
        api.cell("prod").unwrap().promotion,
        Some(CellPromotion {
            name: "prod-1".into(),
            phase: PromotionPhase::Failed
        })
    );
    assert_eq!(api.cell("qa").unwrap().attention, [Attention::Held]);
    assert!(api.cell("dev").unwrap().attention.is_empty());
    let web = board.rows.iter().find(|r| r.project == "web").unwrap();
    assert_eq!(web.cell("prod").unwrap().attention, [Attention::Frozen]);

    let filter = BoardFilter::parse(None, None, Some("true")).unwrap();
    let stuck = release_board(&inputs, &filter, now());
    let rows: Vec<&str> = stuck.rows.iter().map(|r| r.project.as_str()).collect();
    assert_eq!(rows, ["api", "web"]);
    assert_eq!(stuck.projects, 3);
}

#[test]
fn name_and_warehouse_filters_narrow_rows_and_columns() {
    let by_name = release_board(
        &projects(),
        &BoardFilter::parse(Some("WE"), None, None).unwrap(),
        now(),
    );
    assert_eq!(by_name.rows.len(), 1);
    assert_eq!(by_name.rows[0].project, "web");
    assert_eq!(by_name.columns, ["dev", "staging", "prod"]);
    let by_warehouse = release_board(
        &projects(),
        &BoardFilter::parse(None, Some("api-app"), None).unwrap(),
        now(),
    );
    assert_eq!(by_warehouse.rows.len(), 1);
    assert_eq!(by_warehouse.columns, ["dev", "qa", "prod"]);
    let none = release_board(
        &projects(),
        &BoardFilter::parse(Some("nope"), None, None).unwrap(),
        now(),
    );
    assert!(none.rows.is_empty() && none.columns.is_empty());
}

#[test]
fn a_filter_dray_cannot_honour_is_refused_naming_it() {
    let bad = BoardFilter::parse(None, None, Some("maybe")).unwrap_err();
    assert_eq!(bad, FilterError::Attention("maybe".into()));
    assert!(bad.to_string().contains("attention=true"), "{bad}");
    let long = "x".repeat(300);
    let too_long = BoardFilter::parse(Some(&long), None, None).unwrap_err();
    assert!(
        too_long.to_string().contains("`name` is 300 characters"),
        "{too_long}"
    );
    assert!(
        BoardFilter::parse(Some(" "), Some(""), Some(""))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_cycle_across_projects_still_shows_every_column() {
    let a = ProjectInput {
        project: "a".into(),
        stages: vec![
            stage("a", "x", &[], json!({})),
            stage("a", "y", &["x"], json!({})),
        ]
        .into(),
        ..Default::default()
    };
    let b = ProjectInput {
        project: "b".into(),
        stages: vec![
            stage("b", "y", &[], json!({})),
            stage("b", "x", &["y"], json!({})),
        ]
        .into(),
        ..Default::default()
    };
    let board = release_board(&[a, b], &BoardFilter::default(), now());
    assert_eq!(board.columns.len(), 2, "{:?}", board.columns);
}

/// `load` reads Stages without the spec parts the board never shows, and the board drawn
/// from them is the board drawn from the whole Stages.
#[tokio::test]
async fn the_board_from_loaded_stages_is_the_board_from_whole_ones() {
    use crate::api::ObjectKey;
    use crate::store::{SqliteStore, Store as _};

    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let mut whole = Vec::new();
    for (name, from, status) in [
        ("dev", vec![], holding("f1", "2026-06-01T10:00:00Z")),
        (
            "prod",
            vec!["dev"],
            json!({"health": {"status": "Unhealthy"}}),
        ),
    ] {
        let mut body = serde_json::to_value(stage("web", name, &from, Value::Null)).unwrap();
        body["spec"]["health"] = json!({"timeout": "5m"});
        body["spec"]["promotionTemplate"] =
            json!({"spec": {"steps": [{"uses": "git-clone", "config": {"repoURL": "x"}}]}});
        let created = store.create(body).await.unwrap();
        let updated = store
            .update_status(&created.key, status, None)
            .await
            .unwrap();
        whole.push(updated.to_typed::<Stage>().unwrap());
    }
    let f1 = store
        .create(serde_json::to_value(freight("web", "f1", "brave-fox", "1.0.0")).unwrap())
        .await
        .unwrap();
    let f1 = store
        .update_status(
            &f1.key,
            json!({"verifiedIn": {"dev": {}}, "currentlyIn": {"dev": {}}}),
            None,
        )
        .await
        .unwrap();
    let failed = store
        .create(
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Promotion",
            "metadata": {"name": "prod.1", "namespace": "web"},
            "spec": {"stage": "prod", "freight": "f1",
                "steps": [{"uses": "git-clone", "config": {"repoURL": "x"}}]}}),
        )
        .await
        .unwrap();
    let failed = store
        .update_status(
            &failed.key,
            json!({"phase": "Failed", "state": {"git-clone": {"commit": "abc"}},
                "stepExecutionMetadata": [{"alias": "step-1", "status": "Failed"}]}),
            None,
        )
        .await
        .unwrap();
    let prod = ObjectKey::namespaced(Kind::Stage, "web", "prod");
    let prod_status = json!({"health": {"status": "Unhealthy"}, "lastPromotion": "prod.1"});
    let prod_stage = store.update_status(&prod, prod_status, None).await.unwrap();
    whole[1] = prod_stage.to_typed::<Stage>().unwrap();

    let loaded = load(&store, "web").await.unwrap();
    let again = load(&store, "web").await.unwrap();
    assert!(
        Arc::ptr_eq(&again.stages, &loaded.stages),
        "typed once while the Stages are unchanged"
    );
    assert_eq!(loaded.stages.len(), 2);
    for (read, full) in loaded.stages.iter().zip(&whole) {
        assert!(read.spec.promotion_template.is_none(), "{read:?}");
        assert!(full.spec.promotion_template.is_some());
        assert_eq!(read.spec.requested_freight, full.spec.requested_freight);
        assert_eq!(read.spec.health.is_some(), full.spec.health.is_some());
        assert_eq!(read.status, full.status);
    }
    let read = &loaded.freight["f1"];
    let full = f1.to_typed::<Freight>().unwrap();
    assert_eq!(read.spec.alias, full.spec.alias);
    assert_eq!(read.spec.images, full.spec.images);
    assert!(
        read.status.is_none(),
        "not the Stages it went through: {read:?}"
    );
    assert!(full.status.is_some());
    let read = &loaded.promotions["prod.1"];
    let full = failed.to_typed::<Promotion>().unwrap();
    assert!(read.spec.steps.is_empty(), "not its steps: {read:?}");
    assert!(!full.spec.steps.is_empty());
    let read_status = read.status.as_ref().unwrap();
    assert_eq!(read_status.phase, PromotionPhase::Failed);
    assert!(
        read_status.state.is_none(),
        "not the steps' state: {read:?}"
    );
    assert_eq!(
        read_status.step_execution_metadata,
        full.status.as_ref().unwrap().step_execution_metadata
    );
    let from_whole = ProjectInput {
        stages: whole.into(),
        freight: [("f1".to_owned(), f1.to_typed().unwrap())].into(),
        promotions: [("prod.1".to_owned(), full)].into(),
        ..loaded.clone()
    };
    let filter = BoardFilter::default();
    assert_eq!(
        release_board(&[loaded], &filter, now()),
        release_board(&[from_whole], &filter, now())
    );
}
