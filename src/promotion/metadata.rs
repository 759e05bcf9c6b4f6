//! What a succeeded step asks of Dray's own resources, applied by the engine before the
//! next step runs: [`Effect::SetMetadata`] merges values into a Stage's or a Freight's
//! `status.metadata`, [`Effect::SetFreightAlias`] renames a Freight (and the alias the
//! Stages holding it show). Only resources of the promotion's own project are named, so a
//! promotion never writes another project's. A refusal (a resource that does not exist, a
//! key beyond the limits of [`crate::api::Metadata`], an alias taken or not a label) is a
//! [`MetadataError`] that fails the step; effects of other kinds are not this module's.
//!
//! It also loads what `freightMetadata()` and `stageMetadata()` read ([`load_view`]).

use dray_steps::{Effect, MetadataKind};
use serde_json::{Map, Value, json};

use crate::api::label::{self, MAX_LABEL};
use crate::api::{
    Freight, FreightStatus, Kind, MetadataLimitError, ObjectKey, Stage, StageStatus,
    merge_metadata, suggest,
};
use crate::expr::MetadataView;
use crate::store::{Store, StoreError, modify_object, modify_typed_status};

/// Why a step's change to a Stage or a Freight was refused.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// The Stage or Freight named is not in the promotion's project.
    #[error("{kind} `{name}` does not exist in project `{project}`{hint}")]
    NotFound {
        /// `Stage` or `Freight`.
        kind: MetadataKind,
        /// The name asked for.
        name: String,
        /// The promotion's project.
        project: String,
        /// "; did you mean …" or what to do.
        hint: String,
    },
    /// A key or value is beyond Dray's limits.
    #[error("{kind} `{name}`: {cause}")]
    Limit {
        /// `Stage` or `Freight`.
        kind: MetadataKind,
        /// Its name.
        name: String,
        /// Which key, and why.
        cause: MetadataLimitError,
    },
    /// The alias is not an RFC 1123 label.
    #[error(
        "alias `{alias}` is not an RFC 1123 label: lowercase letters, digits and `-`, starting \
         and ending with a letter or digit, at most {MAX_LABEL} characters{hint}"
    )]
    AliasNotLabel {
        /// The alias asked for.
        alias: String,
        /// "; use `…`" when a valid spelling exists.
        hint: String,
    },
    /// Other Freight of the project has the alias.
    #[error(
        "alias `{alias}` is already used by Freight `{other}` in project `{project}`: choose \
         another alias (aliases are unique in a project)"
    )]
    AliasTaken {
        /// The alias asked for.
        alias: String,
        /// The Freight that has it.
        other: String,
        /// The promotion's project.
        project: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Applies the effects of one succeeded step that change Dray's resources, in order; the
/// first refusal stops and is returned (what was applied before it stays, as when a step
/// fails halfway). Effects of other kinds are ignored.
pub async fn apply(
    store: &dyn Store,
    project: &str,
    effects: &[Effect],
) -> Result<(), MetadataError> {
    for effect in effects {
        match effect {
            Effect::SetMetadata { kind, name, values } => {
                set_metadata(store, project, *kind, name, values).await?
            }
            Effect::SetFreightAlias { freight, alias } => {
                set_alias(store, project, freight, alias).await?
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `effects` change Dray's resources (so the engine knows to apply them).
pub fn changes_dray(effects: &[Effect]) -> bool {
    effects.iter().any(|e| {
        matches!(
            e,
            Effect::SetMetadata { .. } | Effect::SetFreightAlias { .. }
        )
    })
}

async fn set_metadata(
    store: &dyn Store,
    project: &str,
    kind: MetadataKind,
    name: &str,
    values: &Map<String, Value>,
) -> Result<(), MetadataError> {
    let limit = |cause| MetadataError::Limit {
        kind,
        name: name.to_owned(),
        cause,
    };
    let written = match kind {
        MetadataKind::Stage => {
            let key = ObjectKey::namespaced(Kind::Stage, project, name);
            let mut refused = None;
            let written =
                modify_typed_status(store, &key, |_: &Stage, status: &mut StageStatus| {
                    let before = status.metadata.clone();
                    if let Err(cause) = merge_metadata(&mut status.metadata, values) {
                        refused = Some(cause);
                        return Ok(None);
                    }
                    Ok((status.metadata != before).then_some(()))
                })
                .await;
            if let Some(cause) = refused {
                return Err(limit(cause));
            }
            written
        }
        MetadataKind::Freight => {
            let key = ObjectKey::namespaced(Kind::Freight, project, name);
            let mut refused = None;
            let written =
                modify_typed_status(store, &key, |_: &Freight, status: &mut FreightStatus| {
                    let before = status.metadata.clone();
                    if let Err(cause) = merge_metadata(&mut status.metadata, values) {
                        refused = Some(cause);
                        return Ok(None);
                    }
                    Ok((status.metadata != before).then_some(()))
                })
                .await;
            if let Some(cause) = refused {
                return Err(limit(cause));
            }
            written
        }
    };
    match written {
        Ok(_) => Ok(()),
        Err(StoreError::NotFound(_)) => Err(not_found(store, project, kind, name).await),
        Err(error) => Err(error.into()),
    }
}

async fn set_alias(
    store: &dyn Store,
    project: &str,
    freight: &str,
    alias: &str,
) -> Result<(), MetadataError> {
    if !label::is_label(alias, MAX_LABEL) {
        let better = label::to_label(alias, MAX_LABEL);
        let hint = if better.is_empty() {
            "; choose an alias like `release-1`".to_owned()
        } else {
            format!("; use `{better}`")
        };
        return Err(MetadataError::AliasNotLabel {
            alias: alias.to_owned(),
            hint,
        });
    }
    let key = ObjectKey::namespaced(Kind::Freight, project, freight);
    let Some(current) = store.get(&key).await? else {
        return Err(not_found(store, project, MetadataKind::Freight, freight).await);
    };
    if current.object.get("alias").and_then(Value::as_str) == Some(alias) {
        return Ok(());
    }
    let others = store.list(Kind::Freight, Some(project)).await?;
    if let Some(other) = others.iter().find(|f| {
        f.key.name != freight && f.object.get("alias").and_then(Value::as_str) == Some(alias)
    }) {
        return Err(MetadataError::AliasTaken {
            alias: alias.to_owned(),
            other: other.key.name.clone(),
            project: project.to_owned(),
        });
    }
    modify_object(store, current, |_, object| {
        object["alias"] = json!(alias);
        Ok(true)
    })
    .await?;
    // The Stages holding it show its alias: they show the new one.
    for stage in store.list(Kind::Stage, Some(project)).await? {
        let holds = stage
            .object
            .pointer("/status/currentFreight/name")
            .and_then(Value::as_str)
            == Some(freight);
        if !holds {
            continue;
        }
        let written =
            modify_typed_status(store, &stage.key, |_: &Stage, status: &mut StageStatus| {
                match status.current_freight.as_mut() {
                    Some(current) if current.name == freight && current.alias != alias => {
                        current.alias = alias.to_owned();
                        Ok(Some(()))
                    }
                    _ => Ok(None),
                }
            })
            .await;
        match written {
            Ok(_) | Err(StoreError::NotFound(_)) => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

/// The refusal of a name that is not in the project, with the closest name (for Freight,
/// also the one whose alias was given instead of its name).
async fn not_found(
    store: &dyn Store,
    project: &str,
    kind: MetadataKind,
    name: &str,
) -> MetadataError {
    let listed = match kind {
        MetadataKind::Stage => store.list(Kind::Stage, Some(project)).await,
        MetadataKind::Freight => store.list(Kind::Freight, Some(project)).await,
    }
    .unwrap_or_default();
    let by_alias = listed.iter().find(|f| {
        kind == MetadataKind::Freight && f.object.get("alias").and_then(Value::as_str) == Some(name)
    });
    let hint = if let Some(freight) = by_alias {
        format!(
            "; `{name}` is the alias of Freight `{}`: name Freight by its name (e.g. \
             `${{{{ ctx.targetFreight.name }}}}`)",
            freight.key.name
        )
    } else if let Some(close) = suggest::closest(name, listed.iter().map(|o| o.key.name.as_str())) {
        format!("; did you mean `{close}`?")
    } else {
        format!(
            "; name a {kind} of project `{project}` (`dray get {}`)",
            match kind {
                MetadataKind::Stage => "stages",
                MetadataKind::Freight => "freight",
            }
        )
    };
    MetadataError::NotFound {
        kind,
        name: name.to_owned(),
        project: project.to_owned(),
        hint,
    }
}

/// The metadata of `project`'s Freight and Stages, for `freightMetadata()` and
/// `stageMetadata()`.
pub async fn load_view(store: &dyn Store, project: &str) -> Result<MetadataView, StoreError> {
    let mut view = MetadataView::default();
    for freight in store.list(Kind::Freight, Some(project)).await? {
        if let Some(metadata) = freight
            .object
            .pointer("/status/metadata")
            .and_then(metadata_of)
        {
            view.freight.insert(freight.key.name.clone(), metadata);
        }
    }
    for stage in store.list(Kind::Stage, Some(project)).await? {
        if let Some(metadata) = stage
            .object
            .pointer("/status/metadata")
            .and_then(metadata_of)
        {
            view.stages.insert(stage.key.name.clone(), metadata);
        }
    }
    Ok(view)
}

fn metadata_of(value: &Value) -> Option<crate::api::Metadata> {
    let map = value.as_object()?;
    (!map.is_empty()).then(|| map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

/// Whether expressions in `text` (a step, the promotion's vars, as JSON) may call
/// `freightMetadata()` or `stageMetadata()`: only then is the view loaded.
pub fn reads_metadata(text: &str) -> bool {
    text.contains("freightMetadata") || text.contains("stageMetadata")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::SqliteStore;

    async fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        for (name, alias) in [("f1aaaa", "frosty-otter"), ("f2bbbb", "windy-dolphin")] {
            store
                .create(json!({
                    "apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
                    "metadata": {"name": name, "namespace": "demo"},
                    "alias": alias, "origin": {"kind": "Warehouse", "name": "app"},
                }))
                .await
                .unwrap();
        }
        store
            .create(json!({
                "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
                "metadata": {"name": "dev", "namespace": "demo"},
                "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                                               "sources": {"direct": true}}]},
            }))
            .await
            .unwrap();
        let key = ObjectKey::namespaced(Kind::Stage, "demo", "dev");
        store
            .update_status(
                &key,
                json!({"currentFreight": {"name": "f1aaaa", "alias": "frosty-otter"}}),
                None,
            )
            .await
            .unwrap();
        (dir, store)
    }

    fn set(kind: MetadataKind, name: &str, values: Value) -> Effect {
        Effect::SetMetadata {
            kind,
            name: name.into(),
            values: values.as_object().cloned().unwrap(),
        }
    }

    async fn object(store: &SqliteStore, kind: Kind, name: &str) -> Value {
        let key = ObjectKey::namespaced(kind, "demo", name);
        store.get(&key).await.unwrap().unwrap().object
    }

    #[tokio::test]
    async fn metadata_is_merged_into_the_status_and_read_back_as_a_view() {
        let (_dir, store) = store().await;
        let effects = [
            set(MetadataKind::Stage, "dev", json!({"owner": "ana", "n": 1})),
            set(
                MetadataKind::Freight,
                "f1aaaa",
                json!({"qa": {"passed": true}}),
            ),
            set(MetadataKind::Stage, "dev", json!({"n": 2, "owner": null})),
        ];
        assert!(changes_dray(&effects));
        apply(&store, "demo", &effects).await.unwrap();
        let dev = object(&store, Kind::Stage, "dev").await;
        assert_eq!(dev["status"]["metadata"], json!({"n": 2}));
        assert_eq!(
            dev["status"]["currentFreight"]["name"], "f1aaaa",
            "the rest is kept"
        );
        let f1 = object(&store, Kind::Freight, "f1aaaa").await;
        assert_eq!(f1["status"]["metadata"], json!({"qa": {"passed": true}}));

        let view = load_view(&store, "demo").await.unwrap();
        assert_eq!(view.stage_map("dev").unwrap()["n"], json!(2));
        assert_eq!(
            view.freight_map("f1aaaa").unwrap()["qa"]["passed"],
            json!(true)
        );
        assert!(view.freight_map("f2bbbb").is_none());
        assert!(load_view(&store, "other").await.unwrap().stages.is_empty());
    }

    #[tokio::test]
    async fn unknown_names_other_projects_and_bad_keys_are_refused_by_name() {
        let (_dir, store) = store().await;
        let err = apply(
            &store,
            "demo",
            &[set(MetadataKind::Stage, "dve", json!({"a": 1}))],
        )
        .await
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Stage `dve` does not exist in project `demo`; did you mean `dev`?"
        );
        let err = apply(
            &store,
            "demo",
            &[set(MetadataKind::Freight, "frosty-otter", json!({"a": 1}))],
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("`frosty-otter` is the alias of Freight `f1aaaa`"),
            "{err}"
        );
        // A promotion of another project cannot reach this one's resources.
        let err = apply(
            &store,
            "shop",
            &[set(MetadataKind::Stage, "dev", json!({"a": 1}))],
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("Stage `dev` does not exist in project `shop`"),
            "{err}"
        );
        let err = apply(
            &store,
            "demo",
            &[set(MetadataKind::Freight, "f1aaaa", json!({"bad key": 1}))],
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("Freight `f1aaaa`: metadata key `bad key` is not valid"),
            "{err}"
        );
        let f1 = object(&store, Kind::Freight, "f1aaaa").await;
        assert!(
            f1.get("status").is_none_or(|s| s.get("metadata").is_none()),
            "{f1}"
        );
    }

    #[tokio::test]
    async fn aliases_are_renamed_unless_taken_or_not_labels() {
        let (_dir, store) = store().await;
        let rename = |freight: &str, alias: &str| Effect::SetFreightAlias {
            freight: freight.into(),
            alias: alias.into(),
        };
        apply(&store, "demo", &[rename("f1aaaa", "release-1")])
            .await
            .unwrap();
        assert_eq!(
            object(&store, Kind::Freight, "f1aaaa").await["alias"],
            "release-1"
        );
        let dev = object(&store, Kind::Stage, "dev").await;
        assert_eq!(dev["status"]["currentFreight"]["alias"], "release-1");
        // Again: nothing to do.
        apply(&store, "demo", &[rename("f1aaaa", "release-1")])
            .await
            .unwrap();

        let err = apply(&store, "demo", &[rename("f2bbbb", "release-1")])
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "alias `release-1` is already used by Freight `f1aaaa` in project `demo`: choose \
             another alias (aliases are unique in a project)"
        );
        assert_eq!(
            object(&store, Kind::Freight, "f2bbbb").await["alias"],
            "windy-dolphin"
        );
        let err = apply(&store, "demo", &[rename("f2bbbb", "Release_2")])
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("alias `Release_2` is not an RFC 1123 label")
                && err.to_string().ends_with("; use `release-2`"),
            "{err}"
        );
        let err = apply(&store, "demo", &[rename("nope", "x")])
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("Freight `nope` does not exist in project `demo`"),
            "{err}"
        );
    }
}
