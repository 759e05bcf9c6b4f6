//! Minting Freight: a stable, content-addressed id and a friendly alias for a set of
//! exact artifacts, the Freight object itself, and [`mint`], the one path by which
//! Freight comes into being: the Warehouse controller's discoveries
//! ([`MintOrigin::Discovered`]) and the hotfix route's hand-assembled Freight
//! ([`MintOrigin::Assembled`]) alike. What is checked before (that digests and commits
//! exist, who may assemble) is the caller's.
//!
//! The id is the first 40 hex digits of the SHA-256 of the sorted, normalised artifacts
//! (`image <repo>:<tag>@<digest>`, `commit <repo>@<id>` and `chart <repo> <name>@<version>`
//! lines, the last with `@<digest>` for OCI charts), so the same artifacts give the same id
//! across restarts and machines, and Freight without charts keeps the id it always had. The alias (`frosty-otter`) is derived
//! from the id and made unique in the project by trying the next candidate.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::api::annotations::{ASSEMBLED, WAREHOUSE_LABEL};
use crate::api::label::label_value;
use crate::api::{API_VERSION, FreightChart, FreightCommit, FreightImage};
use crate::store::{Store, StoreError, StoredObject};

const ADJECTIVES: &[&str] = &[
    "amber", "brave", "bright", "calm", "clever", "cosmic", "crisp", "daring", "eager", "fancy",
    "fluffy", "frosty", "gentle", "giddy", "golden", "happy", "hazy", "humble", "icy", "jolly",
    "keen", "lively", "lucky", "mellow", "misty", "nimble", "noble", "plucky", "polar", "proud",
    "quick", "quiet", "rapid", "rosy", "rusty", "shiny", "silent", "silver", "sleepy", "snowy",
    "sunny", "swift", "tidy", "vivid", "wild", "windy", "witty", "zesty",
];

const ANIMALS: &[&str] = &[
    "badger", "bat", "bear", "beaver", "bison", "camel", "cobra", "crane", "crow", "deer", "dingo",
    "dolphin", "eagle", "falcon", "ferret", "finch", "fox", "gecko", "gibbon", "goose", "hare",
    "hawk", "heron", "ibis", "jackal", "koala", "lemur", "lynx", "marmot", "mole", "moose", "newt",
    "ocelot", "orca", "otter", "owl", "panda", "puffin", "quail", "raven", "seal", "sloth",
    "stoat", "tapir", "tiger", "walrus", "wombat", "yak",
];

fn normalise_repo(url: &str) -> String {
    url.trim().trim_end_matches('/').to_owned()
}

/// The content-addressed id of a set of images and commits (no charts).
pub fn freight_id(images: &[FreightImage], commits: &[FreightCommit]) -> String {
    artifacts_id(images, commits, &[])
}

/// The content-addressed id of a set of artifacts.
pub fn artifacts_id(
    images: &[FreightImage],
    commits: &[FreightCommit],
    charts: &[FreightChart],
) -> String {
    let mut lines = BTreeSet::new();
    for image in images {
        lines.insert(format!(
            "image {}:{}@{}",
            normalise_repo(&image.repo_url),
            image.tag,
            image.digest.to_ascii_lowercase()
        ));
    }
    for commit in commits {
        lines.insert(format!(
            "commit {}@{}",
            normalise_repo(&commit.repo_url),
            commit.id.to_ascii_lowercase()
        ));
    }
    for chart in charts {
        let mut line = format!(
            "chart {} {}@{}",
            normalise_repo(&chart.repo_url),
            chart.name,
            chart.version
        );
        if let Some(digest) = &chart.digest {
            line = format!("{line}@{}", digest.to_ascii_lowercase());
        }
        lines.insert(line);
    }
    let mut hasher = Sha256::new();
    for line in &lines {
        hasher.update(line.as_bytes());
        hasher.update(b"\n");
    }
    let digest = hasher.finalize();
    digest.iter().take(20).map(|b| format!("{b:02x}")).collect()
}

/// A friendly alias for `id` that is not in `taken`.
pub fn alias_for(id: &str, taken: &BTreeSet<String>) -> String {
    let seed = u64::from_str_radix(&id[..id.len().min(12)], 16).unwrap_or(0) as usize;
    let pairs = ADJECTIVES.len() * ANIMALS.len();
    for attempt in 0..pairs {
        let index = (seed + attempt) % pairs;
        let alias = format!(
            "{}-{}",
            ADJECTIVES[index % ADJECTIVES.len()],
            ANIMALS[index / ADJECTIVES.len()]
        );
        if !taken.contains(&alias) {
            return alias;
        }
    }
    format!("freight-{}", &id[..id.len().min(12)])
}

/// A Freight object ready to be created in `project`.
pub fn freight_object(
    project: &str,
    warehouse: &str,
    alias: &str,
    images: &[FreightImage],
    commits: &[FreightCommit],
    charts: &[FreightChart],
    warnings: &[String],
) -> Value {
    let id = artifacts_id(images, commits, charts);
    let mut object = json!({
        "apiVersion": API_VERSION,
        "kind": "Freight",
        "metadata": {
            "name": id,
            "namespace": project,
            "labels": {WAREHOUSE_LABEL: label_value(warehouse)},
        },
        "alias": alias,
        "origin": {"kind": "Warehouse", "name": warehouse},
        "images": images,
        "commits": commits,
    });
    if !charts.is_empty() {
        object["charts"] = json!(charts);
    }
    if !warnings.is_empty() {
        object["warnings"] = json!(warnings);
    }
    object
}

/// How the Freight to mint came to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MintOrigin {
    /// Discovered by its Warehouse: a friendly alias, and the discovery's warnings
    /// (`tagMoved: …`) recorded on the Freight.
    Discovered {
        /// Recorded as the Freight's `warnings`.
        warnings: Vec<String>,
    },
    /// Assembled by hand (the hotfix path): the alias asked for (a friendly one when
    /// `None`), and the [`ASSEMBLED`] annotation.
    Assembled {
        /// The alias asked for.
        alias: Option<String>,
        /// Recorded as the Freight's `warnings` (e.g. `criteriaNotMet: …`).
        warnings: Vec<String>,
    },
}

/// Freight to mint in `project`, recorded under `warehouse`.
#[derive(Clone, Debug)]
pub struct MintRequest<'a> {
    /// The project (namespace).
    pub project: &'a str,
    /// The Warehouse it is recorded under.
    pub warehouse: &'a str,
    /// Images pinned by digest.
    pub images: &'a [FreightImage],
    /// Config commits by full id.
    pub commits: &'a [FreightCommit],
    /// Helm charts at exact versions.
    pub charts: &'a [FreightChart],
    /// Discovered or assembled.
    pub origin: MintOrigin,
}

/// What [`mint`] did.
#[derive(Clone, Debug)]
pub enum Minted {
    /// New Freight, as created.
    Created(StoredObject),
    /// Freight with these artifacts existed already (the id is their hash): nothing was
    /// written.
    Existing(StoredObject),
}

/// Why Freight was not minted.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    /// The alias asked for names other Freight of the project.
    #[error("alias `{alias}` is already used in project `{project}`")]
    AliasTaken {
        /// The project.
        project: String,
        /// The alias asked for.
        alias: String,
    },
    /// Reading or writing the store failed (`AlreadyExists` when other Freight with the
    /// same id was created meanwhile).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What minting would do, before anything is written.
#[derive(Clone, Debug)]
pub enum Planned<'e> {
    /// Create this Freight object.
    Create(Value),
    /// Nothing: this Freight has the same artifacts.
    Existing(&'e StoredObject),
}

/// What minting `request` does, given the project's `existing` Freight. Pure; [`mint`]
/// writes it.
pub fn plan<'e>(
    request: &MintRequest<'_>,
    existing: &'e [StoredObject],
) -> Result<Planned<'e>, MintError> {
    let id = artifacts_id(request.images, request.commits, request.charts);
    if let Some(same) = existing.iter().find(|f| f.key.name == id) {
        return Ok(Planned::Existing(same));
    }
    let taken: BTreeSet<String> = existing
        .iter()
        .filter_map(|f| {
            f.object
                .get("alias")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    let (alias, warnings) = match &request.origin {
        MintOrigin::Discovered { warnings } => (alias_for(&id, &taken), warnings.as_slice()),
        MintOrigin::Assembled {
            alias: Some(alias), ..
        } if taken.contains(alias) => {
            return Err(MintError::AliasTaken {
                project: request.project.to_owned(),
                alias: alias.clone(),
            });
        }
        MintOrigin::Assembled {
            alias: Some(alias),
            warnings,
        } => (alias.clone(), warnings.as_slice()),
        MintOrigin::Assembled {
            alias: None,
            warnings,
        } => (alias_for(&id, &taken), warnings.as_slice()),
    };
    let mut object = freight_object(
        request.project,
        request.warehouse,
        &alias,
        request.images,
        request.commits,
        request.charts,
        warnings,
    );
    if matches!(request.origin, MintOrigin::Assembled { .. }) {
        object["metadata"]["annotations"] = json!({ASSEMBLED: "true"});
    }
    Ok(Planned::Create(object))
}

/// Mints the Freight `request` names, unless Freight with the same artifacts is among
/// the project's `existing` Freight (read by the caller, from the store or a cache).
pub async fn mint(
    store: &dyn Store,
    request: &MintRequest<'_>,
    existing: &[StoredObject],
) -> Result<Minted, MintError> {
    match plan(request, existing)? {
        Planned::Existing(same) => Ok(Minted::Existing(same.clone())),
        Planned::Create(object) => Ok(Minted::Created(store.create(object).await?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(tag: &str, digest: &str) -> FreightImage {
        FreightImage {
            repo_url: "reg/app".into(),
            tag: tag.into(),
            digest: digest.into(),
            ..Default::default()
        }
    }

    fn commit(id: &str) -> FreightCommit {
        FreightCommit {
            repo_url: "http://git/config.git".into(),
            id: id.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_id_depends_on_the_artifacts_only() {
        let a = freight_id(&[image("1.0.0", "sha256:aa")], &[commit("c1")]);
        let b = freight_id(&[image("1.0.0", "sha256:aa")], &[commit("c1")]);
        assert_eq!(a, b);
        assert_eq!(a.len(), 40);
        assert_ne!(
            a,
            freight_id(&[image("1.0.0", "sha256:bb")], &[commit("c1")])
        );
        assert_ne!(
            a,
            freight_id(&[image("1.0.0", "sha256:aa")], &[commit("c2")])
        );
        let trailing = FreightImage {
            repo_url: "reg/app/".into(),
            ..image("1.0.0", "sha256:aa")
        };
        assert_eq!(
            a,
            freight_id(&[trailing], &[commit("c1")]),
            "repo URLs are normalised"
        );
    }

    #[test]
    fn the_id_is_stable_across_releases() {
        // Changing how ids are computed would rename every Freight: pin one.
        let id = freight_id(&[image("1.0.0", "sha256:aa")], &[commit("c1")]);
        assert_eq!(
            id,
            freight_id(&[image("1.0.0", "sha256:AA")], &[commit("C1")])
        );
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    }

    fn chart(version: &str, digest: Option<&str>) -> FreightChart {
        FreightChart {
            repo_url: "oci://reg/charts/app".into(),
            name: "app".into(),
            version: version.into(),
            digest: digest.map(str::to_owned),
        }
    }

    #[test]
    fn charts_change_the_id_and_no_charts_keep_the_old_one() {
        let images = [image("1.0.0", "sha256:aa")];
        let commits = [commit("c1")];
        let old = freight_id(&images, &commits);
        assert_eq!(artifacts_id(&images, &commits, &[]), old);
        let with = artifacts_id(&images, &commits, &[chart("1.2.0", Some("sha256:cc"))]);
        assert_ne!(with, old);
        assert_ne!(
            with,
            artifacts_id(&images, &commits, &[chart("1.3.0", Some("sha256:cc"))])
        );
        assert_ne!(
            with,
            artifacts_id(&images, &commits, &[chart("1.2.0", None)]),
            "the digest of an OCI chart counts"
        );
        assert_eq!(
            with,
            artifacts_id(&images, &commits, &[chart("1.2.0", Some("sha256:CC"))])
        );
    }

    #[test]
    fn aliases_are_friendly_and_unique() {
        let id = freight_id(&[image("1.0.0", "sha256:aa")], &[]);
        let first = alias_for(&id, &BTreeSet::new());
        let (adjective, animal) = first.split_once('-').unwrap();
        assert!(
            ADJECTIVES.contains(&adjective) && ANIMALS.contains(&animal),
            "{first}"
        );
        let taken = BTreeSet::from([first.clone()]);
        let second = alias_for(&id, &taken);
        assert_ne!(first, second);
        assert_eq!(alias_for(&id, &BTreeSet::new()), first, "deterministic");
    }
}
