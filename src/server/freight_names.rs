//! The one way every route names Freight: its full id, a unique id prefix of at least
//! [`MIN_PREFIX`] characters, or its alias. An ambiguous prefix is refused listing the
//! candidates; an unknown name gets "did you mean" over the project's aliases. The generic
//! `…/freight/{name}` routes, promote, approve and Promotion documents all resolve here.

use serde_json::Value;

use crate::api::suggest;
use crate::api::{Kind, ResourceBody as _};
use crate::pipeline::request::PromoteError;
use crate::store::{Store, StoredObject};

use super::error::ApiError;

/// The shortest id prefix that names Freight.
pub const MIN_PREFIX: usize = 7;

/// Why a name names no one Freight.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FreightNameError {
    /// Nothing has that id, id prefix or alias.
    #[error(
        "Freight `{name}` does not exist in project `{project}` (by id, id prefix or alias){}",
        meant.as_ref().map(|m| format!("; did you mean `{m}`?")).unwrap_or_default()
    )]
    Unknown {
        /// The project.
        project: String,
        /// The name as given.
        name: String,
        /// The alias it is closest to, if any.
        meant: Option<String>,
    },
    /// The prefix starts several ids.
    #[error(
        "Freight id prefix `{name}` is ambiguous in project `{project}`: it starts {}",
        candidates.join(", ")
    )]
    Ambiguous {
        /// The project.
        project: String,
        /// The prefix as given.
        name: String,
        /// Each candidate, `id (alias)`.
        candidates: Vec<String>,
    },
}

impl From<FreightNameError> for ApiError {
    fn from(error: FreightNameError) -> Self {
        let message = error.to_string();
        match error {
            FreightNameError::Unknown { project, .. } => ApiError::not_found(message)
                .with_hint(format!("run `dray get freight -p {project}` to list them")),
            FreightNameError::Ambiguous { .. } => ApiError::bad_request(message)
                .with_hint("give more of the id, or the Freight's alias"),
        }
    }
}

/// Which of `freight` (`(id, alias)` pairs) `name` names: an exact id or alias first, then
/// a unique id prefix of at least [`MIN_PREFIX`] characters. Returns the index.
pub fn resolve_in(
    project: &str,
    freight: &[(&str, &str)],
    name: &str,
) -> Result<usize, FreightNameError> {
    let name = name.trim();
    if let Some(at) = freight.iter().position(|(id, _)| *id == name) {
        return Ok(at);
    }
    if let Some(at) = freight.iter().position(|(_, alias)| *alias == name) {
        return Ok(at);
    }
    if name.chars().count() >= MIN_PREFIX {
        let matches: Vec<usize> = (0..freight.len())
            .filter(|i| freight[*i].0.starts_with(name))
            .collect();
        match matches.as_slice() {
            [one] => return Ok(*one),
            [] => {}
            many => {
                return Err(FreightNameError::Ambiguous {
                    project: project.to_owned(),
                    name: name.to_owned(),
                    candidates: many
                        .iter()
                        .map(|i| format!("`{}` ({})", freight[*i].0, freight[*i].1))
                        .collect(),
                });
            }
        }
    }
    let meant = suggest::closest(name, freight.iter().map(|(_, alias)| *alias)).map(str::to_owned);
    Err(FreightNameError::Unknown {
        project: project.to_owned(),
        name: name.to_owned(),
        meant,
    })
}

/// The Freight of `project` that `name` names (see the module doc).
pub async fn resolve(
    store: &dyn Store,
    project: &str,
    name: &str,
) -> Result<StoredObject, ApiError> {
    let mut all = store.list(Kind::Freight, Some(project)).await?;
    let at = resolve_in(project, &pairs(&all), name)?;
    Ok(all.swap_remove(at))
}

/// `(id, alias)` of each stored Freight.
fn pairs(all: &[StoredObject]) -> Vec<(&str, &str)> {
    all.iter()
        .map(|f| {
            let alias = f.object.get("alias").and_then(Value::as_str).unwrap_or("");
            (f.object.name().unwrap_or(f.key.name.as_str()), alias)
        })
        .collect()
}

/// A Freight choice (`freight` or `alias`) as the pipeline gets it: resolved to the full
/// id when it names Freight, else passed on as given, with why it names none kept — the
/// pipeline authorizes and checks the Stage first (so a caller who may not promote is told
/// that, whatever the Freight), and only where it would say "no Freight" is the resolver's
/// answer (ambiguous, or "did you mean") given instead ([`Resolved::explain`]).
#[derive(Debug, Default)]
pub struct Resolved {
    /// The Freight's id (or the name as given, when it names none).
    pub freight: Option<String>,
    /// The alias as given, when `freight` is not resolved from it.
    pub alias: Option<String>,
    unresolved: Option<FreightNameError>,
}

impl Resolved {
    /// The API's answer to a refused request: the resolver's, where the pipeline found no
    /// Freight for a name the resolver could not resolve.
    pub fn explain(&self, error: PromoteError) -> ApiError {
        match (error, &self.unresolved) {
            (PromoteError::NoFreight { .. }, Some(why)) => why.clone().into(),
            (other, _) => other.into(),
        }
    }
}

/// Resolves `freight` (an id, id prefix or alias) or, failing that, `alias` (any of the
/// three too) — see [`Resolved`]. Neither or both given stay as given (the pipeline refuses
/// that, naming it).
pub async fn resolve_choice(
    store: &dyn Store,
    project: &str,
    freight: Option<String>,
    alias: Option<String>,
) -> Result<Resolved, ApiError> {
    let name = match (&freight, &alias) {
        (Some(name), None) | (None, Some(name)) => name.clone(),
        _ => {
            return Ok(Resolved {
                freight,
                alias,
                unresolved: None,
            });
        }
    };
    let all = store.list(Kind::Freight, Some(project)).await?;
    let pairs = pairs(&all);
    Ok(match resolve_in(project, &pairs, &name) {
        Ok(at) => Resolved {
            freight: Some(all[at].key.name.clone()),
            alias: None,
            unresolved: None,
        },
        Err(why) => Resolved {
            freight,
            alias,
            unresolved: Some(why),
        },
    })
}

/// Resolves the Freight `request` names (see [`resolve_choice`]) in place, keeping the
/// [`Resolved`] for explaining a refusal. Every route that hands a [`PromoteRequest`] to the
/// pipeline — promote, preview, approve, sign off — names Freight through here.
pub async fn resolve_request(
    store: &dyn Store,
    project: &str,
    request: &mut crate::pipeline::request::PromoteRequest,
) -> Result<Resolved, ApiError> {
    let named =
        resolve_choice(store, project, request.freight.take(), request.alias.take()).await?;
    (request.freight, request.alias) = (named.freight.clone(), named.alias.clone());
    Ok(named)
}

/// The two Freight of `project` that `a` and `b` name, from one read of its Freight.
pub async fn resolve_two(
    store: &dyn Store,
    project: &str,
    a: &str,
    b: &str,
) -> Result<(StoredObject, StoredObject), ApiError> {
    let all = store.list(Kind::Freight, Some(project)).await?;
    let pairs = pairs(&all);
    let (a, b) = (
        resolve_in(project, &pairs, a)?,
        resolve_in(project, &pairs, b)?,
    );
    Ok((all[a].clone(), all[b].clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FREIGHT: [(&str, &str); 3] = [
        ("3f2a9c1b7d0e11aa", "fresh-otter"),
        ("3f2a9c1b7d0e22bb", "calm-heron"),
        ("9b8c7d6e5f4a3b2c", "brave-lynx"),
    ];

    #[test]
    fn full_ids_unique_prefixes_and_aliases_all_name_freight() {
        assert_eq!(resolve_in("p", &FREIGHT, "3f2a9c1b7d0e11aa"), Ok(0));
        assert_eq!(resolve_in("p", &FREIGHT, "calm-heron"), Ok(1));
        assert_eq!(resolve_in("p", &FREIGHT, "9b8c7d6"), Ok(2));
        assert_eq!(resolve_in("p", &FREIGHT, "3f2a9c1b7d0e2"), Ok(1));
    }

    #[test]
    fn short_ambiguous_and_unknown_names_are_refused_with_what_to_do() {
        let Err(FreightNameError::Ambiguous { candidates, .. }) =
            resolve_in("p", &FREIGHT, "3f2a9c1b")
        else {
            panic!("two ids start with 3f2a9c1b");
        };
        assert_eq!(
            candidates,
            vec![
                "`3f2a9c1b7d0e11aa` (fresh-otter)",
                "`3f2a9c1b7d0e22bb` (calm-heron)"
            ]
        );
        // Fewer than 7 characters is not a prefix, however unique.
        assert!(matches!(
            resolve_in("p", &FREIGHT, "9b8c7d"),
            Err(FreightNameError::Unknown { .. })
        ));
        let Err(FreightNameError::Unknown { meant, .. }) = resolve_in("p", &FREIGHT, "fresh-oter")
        else {
            panic!("no such alias");
        };
        assert_eq!(meant.as_deref(), Some("fresh-otter"));
        let Err(error) = resolve_in("p", &FREIGHT, "nothing-like-it") else {
            panic!("no such Freight");
        };
        assert_eq!(
            error.to_string(),
            "Freight `nothing-like-it` does not exist in project `p` (by id, id prefix or alias)"
        );
    }

    /// Route tests: the resolver behind the real routes.
    mod routes {
        use axum::http::{Method, StatusCode};
        use serde_json::json;

        use crate::server::AuthMode;
        use crate::server::test_support::{call, fresh, three_stages_dev_promotable};
        use crate::store::Store as _;

        async fn stored(store: &crate::store::SqliteStore, id: &str, alias: &str) {
            let freight = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
                "metadata": {"name": id, "namespace": "demo"},
                "alias": alias, "origin": {"kind": "Warehouse", "name": "app"},
                "images": [{"repoURL": "127.0.0.1:5000/demo/app", "tag": "1.0.0", "digest": "sha256:aa"}]});
            store.create(freight).await.unwrap();
        }

        #[tokio::test]
        async fn get_delete_and_promote_take_a_prefix_and_refuse_an_ambiguous_one() {
            let f = fresh(AuthMode::None).await;
            let apply =
                json!({"files": [{"path": "t.yaml", "content": three_stages_dev_promotable()}]});
            let (status, body) =
                call(&f.state, None, Method::POST, "/api/v1/apply", Some(apply)).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            stored(&f.store, "3f2a9c1b7d0e11aa", "fresh-otter").await;
            stored(&f.store, "3f2a9c1b7d0e22bb", "calm-heron").await;
            let freight = "/api/v1/projects/demo/freight";

            let (status, got) = call(
                &f.state,
                None,
                Method::GET,
                &format!("{freight}/3f2a9c1b7d0e2"),
                None,
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{got}");
            assert_eq!(got["metadata"]["name"], "3f2a9c1b7d0e22bb");
            let (status, got) = call(
                &f.state,
                None,
                Method::GET,
                &format!("{freight}/fresh-otter"),
                None,
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{got}");
            assert_eq!(got["metadata"]["name"], "3f2a9c1b7d0e11aa");

            let (status, refused) = call(
                &f.state,
                None,
                Method::GET,
                &format!("{freight}/3f2a9c1"),
                None,
            )
            .await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
            let message = refused["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("`3f2a9c1b7d0e11aa` (fresh-otter)"),
                "{refused}"
            );

            let promote = "/api/v1/projects/demo/stages/dev/promote";
            let (status, made) = call(
                &f.state,
                None,
                Method::POST,
                promote,
                Some(json!({"alias": "3f2a9c1b7d0e11"})),
            )
            .await;
            assert_eq!(status, StatusCode::CREATED, "{made}");
            assert_eq!(made["spec"]["freight"], "3f2a9c1b7d0e11aa");
            let (status, refused) = call(
                &f.state,
                None,
                Method::POST,
                promote,
                Some(json!({"freight": "fresh-oter"})),
            )
            .await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
            assert!(
                refused["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .ends_with("did you mean `fresh-otter`?"),
                "{refused}"
            );

            let (status, deleted) = call(
                &f.state,
                None,
                Method::DELETE,
                &format!("{freight}/calm-heron"),
                None,
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{deleted}");
            assert_eq!(deleted["metadata"]["name"], "3f2a9c1b7d0e22bb");
        }
    }
}
