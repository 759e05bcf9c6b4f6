//! Sign-offs: a Stage's `spec.signoff` gate. `required` distinct people (members of one of
//! its `groups`, when it names any) sign Freight off for the Stage before it may be
//! promoted there. It is a gate beside verification and soak: an approval (`dray approve`)
//! does not bypass it, and auto-promotion waits for it like a person does.
//!
//! This module owns recording a sign-off ([`sign_off`], `signoff` on the Stage; written to
//! the Freight's `status.signedOffFor[<stage>]`, by Dray only) and counting them
//! ([`counted`], [`missing`]). The promoter's own sign-off does not count unless the policy
//! says `allowSelf`. Who is in which group is the signer's identity's groups
//! ([`Authorizer::groups`]), recorded with the sign-off; Roles and bindings are not groups.

use serde_json::json;

use crate::api::{Freight, Kind, ObjectKey, Signoff, SignoffPolicy, Stage, Verb};
use crate::store::{StoreError, StoredObject, modify_status};

use super::availability::Reason;
use super::door::{Authorizer, PromoteRequest};
use super::request::{PromoteError, find_freight, no_stage};
use crate::store::Store;

/// Why a sign-off was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum SignoffError {
    /// The Stage has no `spec.signoff`.
    #[error(
        "Stage `{stage}` in project `{project}` asks for no sign-offs (it has no `spec.signoff`)"
    )]
    NotAsked {
        /// The project.
        project: String,
        /// The Stage.
        stage: String,
    },
    /// The signer is in none of the policy's groups.
    #[error(
        "user `{user}` may not sign off for Stage `{stage}`: only members of {} count, and `{user}` is in {}",
        backticked(.groups),
        their_groups(.theirs)
    )]
    NotInGroups {
        /// The signer.
        user: String,
        /// The Stage.
        stage: String,
        /// The groups the policy names.
        groups: Vec<String>,
        /// The signer's own groups.
        theirs: Vec<String>,
    },
    /// Auto-promotion cannot sign off.
    #[error("auto-promotion cannot sign off Freight for Stage `{stage}`: a sign-off is a person's")]
    NotAPerson {
        /// The Stage.
        stage: String,
    },
    /// Finding the Stage or the Freight, or authorizing, failed.
    #[error(transparent)]
    Promote(#[from] PromoteError),
}

impl SignoffError {
    /// What to do next.
    pub fn hint(&self) -> String {
        match self {
            SignoffError::NotAsked { project, stage } => format!(
                "promote without signing off, or add `signoff: {{required: N}}` to Stage `{stage}` and `dray apply` it (project `{project}`)"
            ),
            SignoffError::NotInGroups { groups, .. } => format!(
                "ask a member of {} to sign off, or log in with an identity in one of them",
                backticked(groups)
            ),
            SignoffError::NotAPerson { .. } => "a person with `signoff` must do it".to_owned(),
            SignoffError::Promote(_) => String::new(),
        }
    }
}

impl From<StoreError> for SignoffError {
    fn from(error: StoreError) -> Self {
        SignoffError::Promote(PromoteError::Store(error))
    }
}

fn backticked(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.len() {
        0 => "nobody".to_owned(),
        1 => format!("group {}", quoted[0]),
        _ => format!("groups {}", quoted.join(", ")),
    }
}

fn their_groups(groups: &[String]) -> String {
    match groups.len() {
        0 => "no group".to_owned(),
        _ => backticked(groups),
    }
}

/// The sign-offs of `freight` for `stage`, in the order they were given.
pub fn signoffs<'a>(freight: &'a Freight, stage: &str) -> &'a [Signoff] {
    freight
        .status
        .as_ref()
        .and_then(|s| s.signed_off_for.get(stage))
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Whether `signoff` counts under `policy` for a promotion by `promoter` (`None`: whoever
/// promotes, as the board shows it): one of the policy's groups (when it names any) was
/// the signer's when they signed, and the signer is not the promoter unless `allowSelf`.
fn counts(policy: &SignoffPolicy, signoff: &Signoff, promoter: Option<&str>) -> bool {
    let in_group =
        policy.groups.is_empty() || signoff.groups.iter().any(|g| policy.groups.contains(g));
    let is_self = promoter == Some(signoff.user.as_str());
    in_group && (policy.allow_self || !is_self)
}

/// The sign-offs that count toward `policy` for a promotion by `promoter`, one per person.
pub fn counted<'a>(
    policy: &SignoffPolicy,
    signoffs: &'a [Signoff],
    promoter: Option<&str>,
) -> Vec<&'a Signoff> {
    let mut seen: Vec<&'a Signoff> = Vec::new();
    for signoff in signoffs {
        if counts(policy, signoff, promoter) && !seen.iter().any(|s| s.user == signoff.user) {
            seen.push(signoff);
        }
    }
    seen
}

/// The sign-off gate for `freight` entering `stage`, promoted by `promoter` (`None` when
/// not known yet): `None` when the Stage asks for none or enough have signed off.
pub fn missing(stage: &Stage, freight: &Freight, promoter: Option<&str>) -> Option<Reason> {
    let policy = stage.spec.signoff.as_ref()?;
    let name = stage.metadata.name.as_deref().unwrap_or_default();
    let all = signoffs(freight, name);
    let have = counted(policy, all, promoter);
    if have.len() >= policy.required as usize {
        return None;
    }
    let own = promoter
        .filter(|p| !policy.allow_self && all.iter().any(|s| s.user == *p))
        .map(str::to_owned);
    Some(Reason::SignoffsMissing {
        required: policy.required,
        have: have.iter().map(|s| s.user.clone()).collect(),
        groups: policy.groups.clone(),
        own,
    })
}

/// The trailers' values for the sign-offs that count for `promoter`: `user` or
/// `user (reason)`, one per person.
pub fn trailer_values(stage: &Stage, freight: &Freight, promoter: &str) -> Vec<String> {
    let Some(policy) = stage.spec.signoff.as_ref() else {
        return Vec::new();
    };
    let name = stage.metadata.name.as_deref().unwrap_or_default();
    counted(policy, signoffs(freight, name), Some(promoter))
        .into_iter()
        .map(|s| match s.reason.trim() {
            "" => s.user.clone(),
            reason => format!("{} ({})", s.user, reason.replace(['\r', '\n'], " ")),
        })
        .collect()
}

/// Records `who`'s sign-off of Freight `which` for `stage_name`, once `who` may `signoff`
/// the Stage and is in one of its policy's groups. Signing again replaces one's own earlier
/// sign-off (reason and time). Returns the updated Freight.
pub async fn sign_off(
    store: &dyn Store,
    who: &dyn Authorizer,
    project: &str,
    stage_name: &str,
    which: &PromoteRequest,
    reason: &str,
) -> Result<StoredObject, SignoffError> {
    who.authorize(
        store,
        Verb::Signoff,
        Kind::Stage.plural(),
        project,
        stage_name,
    )
    .await
    .map_err(PromoteError::from)?;
    let actor = who.actor();
    if actor.is_auto_promotion() {
        return Err(SignoffError::NotAPerson {
            stage: stage_name.to_owned(),
        });
    }
    let stage_key = ObjectKey::namespaced(Kind::Stage, project, stage_name);
    let Some(stored) = store.get(&stage_key).await? else {
        return Err(no_stage(store, project, stage_name).await.into());
    };
    let stage: Stage = stored.to_typed()?;
    let Some(policy) = stage.spec.signoff.as_ref() else {
        return Err(SignoffError::NotAsked {
            project: project.to_owned(),
            stage: stage_name.to_owned(),
        });
    };
    let theirs = who.groups();
    let groups: Vec<String> = theirs
        .iter()
        .filter(|g| policy.groups.contains(g))
        .cloned()
        .collect();
    if !policy.groups.is_empty() && groups.is_empty() {
        return Err(SignoffError::NotInGroups {
            user: actor.name().to_owned(),
            stage: stage_name.to_owned(),
            groups: policy.groups.clone(),
            theirs,
        });
    }
    let freight = find_freight(store, project, which).await?;
    let key = ObjectKey::namespaced(
        Kind::Freight,
        project,
        freight.metadata.name.as_deref().unwrap_or_default(),
    );
    let signoff = Signoff {
        user: actor.name().to_owned(),
        groups,
        reason: reason.to_owned(),
        at: Some(crate::api::Time(jiff::Timestamp::now())),
    };
    let entry = serde_json::to_value(&signoff).map_err(|e| StoreError::Internal(e.to_string()))?;
    let signed = modify_status(store, &key, |_, status| {
        let list = &mut status["signedOffFor"][stage_name];
        let mut kept: Vec<serde_json::Value> = list
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|s| s["user"] != json!(signoff.user))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        kept.push(entry.clone());
        *list = json!(kept);
        Ok(true)
    })
    .await?;
    signed.ok_or_else(|| StoreError::Internal(format!("{key} was not signed off")).into())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use serde_json::{Value, json};

    use super::*;
    use crate::api::{API_VERSION, Actor, annotations};
    use crate::pipeline::availability::availability;
    use crate::pipeline::door::{AuthorizeError, AutoPromotion};
    use crate::pipeline::request::{approve, request_promotion};
    use crate::store::SqliteStore;

    /// A person in `groups` who may do anything.
    struct Person(&'static str, &'static [&'static str]);

    #[async_trait]
    impl Authorizer for Person {
        fn actor(&self) -> Actor {
            Actor::Person(self.0.to_owned())
        }

        fn groups(&self) -> Vec<String> {
            self.1.iter().map(|g| (*g).to_owned()).collect()
        }

        async fn authorize(
            &self,
            _: &dyn Store,
            _: Verb,
            _: &str,
            _: &str,
            _: &str,
        ) -> Result<(), AuthorizeError> {
            Ok(())
        }
    }

    /// Project `demo`, Stage `prod` (direct from `app`) with `signoff`, Freight `f1`.
    async fn world(signoff: Value) -> (tempfile::TempDir, Arc<dyn Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let objects = [
            json!({"apiVersion": API_VERSION, "kind": "Project", "metadata": {"name": "demo"}, "spec": {}}),
            json!({"apiVersion": API_VERSION, "kind": "Stage",
                   "metadata": {"name": "prod", "namespace": "demo"},
                   "spec": {"signoff": signoff,
                            "requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                                                  "sources": {"direct": true}}],
                            "promotionTemplate": {"spec": {"steps": [
                                {"uses": "git-push", "as": "push", "config": {"path": "./out"}}]}}}}),
            json!({"apiVersion": API_VERSION, "kind": "Freight",
                "metadata": {"name": "f1", "namespace": "demo"},
                "alias": "one", "origin": {"kind": "Warehouse", "name": "app"},
                "images": [{"repoURL": "reg/app", "tag": "1.0.0", "digest": "sha256:aa"}]}),
        ];
        for object in objects {
            store.create(object).await.unwrap();
        }
        (dir, store)
    }

    fn f1() -> PromoteRequest {
        PromoteRequest {
            stage: "prod".into(),
            alias: Some("one".into()),
            ..Default::default()
        }
    }

    async fn sign(store: &dyn Store, who: &Person, reason: &str) -> Result<(), SignoffError> {
        sign_off(store, who, "demo", "prod", &f1(), reason)
            .await
            .map(|_| ())
    }

    /// The refusal's reasons, or the Promotion made.
    async fn promote(store: &dyn Store, who: &dyn Authorizer) -> Result<Value, Vec<String>> {
        match request_promotion(store, who, "demo", &f1()).await {
            Ok(made) => Ok(made.object),
            Err(PromoteError::Refused { reasons, .. }) => Err(reasons),
            Err(other) => panic!("unexpected error: {other}"),
        }
    }

    #[tokio::test]
    async fn n_distinct_people_from_the_groups_let_freight_in() {
        let (_dir, store) = world(json!({"required": 2, "groups": ["sre", "qa"]})).await;
        let store = store.as_ref();
        let dee = Person("dee", &[]);
        let refused = promote(store, &dee).await.unwrap_err();
        assert!(
            refused[0].starts_with(
                "needs sign-offs from 2 people in `sre`, `qa`, has none — ask 2 more people (members of `sre`, `qa`) to run `dray signoff one -p demo --stage prod --reason …`"
            ),
            "{refused:?}"
        );
        let ann = Person("ann", &["sre", "dev"]);
        sign(store, &ann, "first").await.unwrap();
        sign(store, &ann, "again").await.unwrap();
        let refused = promote(store, &dee).await.unwrap_err();
        assert!(
            refused[0].starts_with("needs sign-offs from 2 people in `sre`, `qa`, has 1 (`ann`)"),
            "one person signing twice counts once: {refused:?}"
        );
        let bob = Person("bob", &["dev"]);
        let outside = sign(store, &bob, "").await.unwrap_err();
        assert_eq!(
            outside.to_string(),
            "user `bob` may not sign off for Stage `prod`: only members of groups `sre`, `qa` count, and `bob` is in group `dev`"
        );
        assert!(matches!(outside, SignoffError::NotInGroups { .. }));
        sign(store, &Person("cy", &["qa"]), "").await.unwrap();
        let made = promote(store, &dee).await.unwrap();
        assert_eq!(
            made.pointer(&format!(
                "/metadata/annotations/{}",
                annotations::SIGNED_OFF_BY.replace('/', "~1")
            )),
            Some(&json!("ann (again)\ncy")),
            "one trailer value per person, with the latest reason"
        );
        let stored = store
            .get(&ObjectKey::namespaced(Kind::Freight, "demo", "f1"))
            .await
            .unwrap()
            .unwrap();
        let freight: Freight = stored.to_typed().unwrap();
        let users: Vec<_> = signoffs(&freight, "prod").iter().map(|s| &s.user).collect();
        assert_eq!(users, ["ann", "cy"]);
        assert_eq!(signoffs(&freight, "prod")[0].groups, ["sre"]);
    }

    #[tokio::test]
    async fn the_promoters_own_signoff_counts_only_with_allow_self() {
        let (_dir, store) = world(json!({"required": 1})).await;
        let store = store.as_ref();
        let ann = Person("ann", &[]);
        sign(store, &ann, "").await.unwrap();
        let refused = promote(store, &ann).await.unwrap_err();
        assert!(
            refused[0].starts_with(
                "needs sign-offs from 1 person, has none; `ann` signed off too, but your own sign-off does not count"
            ),
            "{refused:?}"
        );
        promote(store, &Person("bob", &[])).await.unwrap();

        let (_dir, store) = world(json!({"required": 1, "allowSelf": true})).await;
        let store = store.as_ref();
        sign(store, &ann, "").await.unwrap();
        promote(store, &ann).await.unwrap();
    }

    #[tokio::test]
    async fn an_approval_does_not_bypass_signoffs() {
        let (_dir, store) = world(json!({"required": 1})).await;
        let store = store.as_ref();
        let ann = Person("ann", &[]);
        approve(store, &ann, "demo", "prod", &f1(), "hotfix")
            .await
            .unwrap();
        let refused = promote(store, &Person("bob", &[])).await.unwrap_err();
        assert!(
            refused[0].contains("an approval does not lift this gate"),
            "{refused:?}"
        );
        let stage: Stage = store
            .get(&ObjectKey::namespaced(Kind::Stage, "demo", "prod"))
            .await
            .unwrap()
            .unwrap()
            .to_typed()
            .unwrap();
        let freight: Freight = store
            .get(&ObjectKey::namespaced(Kind::Freight, "demo", "f1"))
            .await
            .unwrap()
            .unwrap()
            .to_typed()
            .unwrap();
        let gates = availability(&stage, &freight, jiff::Timestamp::now());
        assert_eq!(gates.approved_by.as_deref(), Some("ann"));
        assert!(!gates.is_available(), "approved, still not signed off");
    }

    #[tokio::test]
    async fn auto_promotion_waits_for_signoffs_and_may_not_sign() {
        let (_dir, store) = world(json!({"required": 1})).await;
        let store = store.as_ref();
        assert!(promote(store, &AutoPromotion).await.is_err());
        let refused = sign_off(store, &AutoPromotion, "demo", "prod", &f1(), "")
            .await
            .unwrap_err();
        assert!(
            matches!(
                refused,
                SignoffError::Promote(PromoteError::Forbidden { .. })
            ),
            "{refused}"
        );
        sign(store, &Person("ann", &[]), "").await.unwrap();
        let made = promote(store, &AutoPromotion).await.unwrap();
        assert_eq!(
            made["metadata"]["annotations"][annotations::SIGNED_OFF_BY],
            json!("ann")
        );
    }

    #[tokio::test]
    async fn a_stage_without_signoff_asks_for_none() {
        let (_dir, store) = world(Value::Null).await;
        let refused = sign(store.as_ref(), &Person("ann", &[]), "")
            .await
            .unwrap_err();
        assert!(
            matches!(refused, SignoffError::NotAsked { .. }),
            "{refused}"
        );
        assert!(refused.hint().contains("signoff: {required: N}"));
    }
}
