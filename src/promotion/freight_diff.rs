//! What differs between two Freight of a project: each image, chart and config commit
//! (`from → to`), the config repositories' commits in between with their messages, and —
//! when both were promoted into one Stage — the rendered manifests, as the unified diff
//! between the two stage-branch commits Dray made for them (found by their `Dray-Freight`
//! trailers, so the answer is git's, not Dray's database's).
//!
//! Owns pairing the artifacts ([`artifact_changes`], pure) and gathering the git parts
//! through the mirror cache; reading and authorizing is the caller's.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::api::{Freight, Kind, ObjectKey, Stage};
use crate::discovery::credentials::for_git;
use crate::discovery::git::{LoggedCommit, MirrorCache};
use crate::secrets::SecretKey;
use crate::store::Store;

use super::audit::{entry, freight_id};

/// The most commits listed per config repository.
pub const COMMITS_SHOWN: usize = 50;
/// The most of a stage branch's history searched for the two Freight's commits.
pub const BRANCH_SEARCHED: usize = 1000;
/// The most bytes of rendered-manifest diff returned.
pub const MANIFEST_DIFF_BYTES: usize = 512 * 1024;

/// The two Freight compared and what differs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FreightDiff {
    /// The older side.
    pub from: Side,
    /// The newer side.
    pub to: Side,
    /// One entry per image repository in either.
    pub images: Vec<ArtifactChange>,
    /// One entry per chart in either.
    pub charts: Vec<ArtifactChange>,
    /// One entry per config repository in either, with the commits in between.
    pub commits: Vec<CommitChange>,
    /// The rendered manifests, or why they were not compared.
    pub manifests: Manifests,
}

/// One Freight as the diff names it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// The id.
    pub name: String,
    /// The alias.
    pub alias: String,
    /// The Warehouse that minted it.
    pub origin: String,
}

/// One artifact on each side (`None`: not in that Freight).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactChange {
    /// The image repository, or `repo/chart` for a chart.
    pub artifact: String,
    /// `tag@digest` (image) or `version[@digest]` (chart) in the older Freight.
    pub from: Option<String>,
    /// The same in the newer Freight.
    pub to: Option<String>,
}

impl ArtifactChange {
    /// Whether the two sides differ.
    pub fn changed(&self) -> bool {
        self.from != self.to
    }
}

/// A config repository's commit on each side, and the history between them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CommitChange {
    /// The repository.
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The commit in the older Freight.
    pub from: Option<String>,
    /// The commit in the newer Freight.
    pub to: Option<String>,
    /// `to` and its first parents down to `from`, newest first, at most [`COMMITS_SHOWN`].
    pub log: Vec<CommitLine>,
    /// Whether `log` reaches `from` (false: cut, or `from` is not an ancestor of `to`).
    pub complete: bool,
    /// Why the history could not be read, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One commit of a config repository.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CommitLine {
    /// The commit id.
    pub id: String,
    /// Its subject line.
    pub subject: String,
    /// Its author.
    pub author: String,
}

/// The rendered manifests' diff, or why there is none.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "state"
)]
pub enum Manifests {
    /// Both were promoted into `stage`: its branch's two commits, compared.
    Compared {
        /// The Stage whose branch was read.
        stage: String,
        /// Dray's commit for the older Freight.
        from_commit: String,
        /// Dray's commit for the newer Freight.
        to_commit: String,
        /// Each changed file.
        files: Vec<ManifestFile>,
        /// Whether the diff was cut at [`MANIFEST_DIFF_BYTES`].
        truncated: bool,
    },
    /// Not compared, and why.
    NotCompared {
        /// Why, and what would make it possible.
        reason: String,
    },
}

/// One changed file of the rendered manifests.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestFile {
    /// The path in the stage branch.
    pub path: String,
    /// `added`, `deleted`, `renamed` or `modified`.
    pub change: String,
    /// Its unified diff.
    pub patch: String,
}

/// A key (a repository) and its value on each side.
type Pair = (String, Option<String>, Option<String>);

/// Two Freight's artifacts, side by side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paired {
    /// Images, by repository.
    pub images: Vec<ArtifactChange>,
    /// Charts, by repository and name.
    pub charts: Vec<ArtifactChange>,
    /// Config commits, by repository: `(repository, from, to)`.
    pub commits: Vec<Pair>,
}

/// The artifacts of two Freight, paired by repository (images and config commits) and by
/// repository and name (charts), in a stable order.
pub fn artifact_changes(from: &Freight, to: &Freight) -> Paired {
    fn pair(
        from: impl Iterator<Item = (String, String)>,
        to: impl Iterator<Item = (String, String)>,
    ) -> Vec<Pair> {
        let mut both: BTreeMap<String, (Option<String>, Option<String>)> = BTreeMap::new();
        for (key, value) in from {
            both.entry(key).or_default().0 = Some(value);
        }
        for (key, value) in to {
            both.entry(key).or_default().1 = Some(value);
        }
        both.into_iter().map(|(k, (a, b))| (k, a, b)).collect()
    }
    let image = |f: &Freight| {
        f.spec
            .images
            .iter()
            .map(|i| (i.repo_url.clone(), format!("{}@{}", i.tag, i.digest)))
            .collect::<Vec<_>>()
    };
    let chart = |f: &Freight| {
        f.spec
            .charts
            .iter()
            .map(|c| {
                let version = match &c.digest {
                    Some(d) => format!("{}@{d}", c.version),
                    None => c.version.clone(),
                };
                (
                    format!("{}/{}", c.repo_url.trim_end_matches('/'), c.name),
                    version,
                )
            })
            .collect::<Vec<_>>()
    };
    let commit = |f: &Freight| {
        f.spec
            .commits
            .iter()
            .map(|c| (c.repo_url.clone(), c.id.clone()))
            .collect::<Vec<_>>()
    };
    let change = |(artifact, from, to)| ArtifactChange { artifact, from, to };
    Paired {
        images: pair(image(from).into_iter(), image(to).into_iter())
            .into_iter()
            .map(change)
            .collect(),
        charts: pair(chart(from).into_iter(), chart(to).into_iter())
            .into_iter()
            .map(change)
            .collect(),
        commits: pair(commit(from).into_iter(), commit(to).into_iter()),
    }
}

/// The Stages a Freight is or was in (held now, or verified there).
fn stages_of(freight: &Freight) -> BTreeSet<String> {
    freight
        .status
        .as_ref()
        .map(|s| {
            s.currently_in
                .keys()
                .chain(s.verified_in.keys())
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

fn side(freight: &Freight) -> Side {
    Side {
        name: freight.metadata.name.clone().unwrap_or_default(),
        alias: freight.spec.alias.clone(),
        origin: freight.spec.origin.name.clone(),
    }
}

/// Why the git parts are missing when there is no mirror cache.
const NO_MIRRORS: &str = "this server reads no git (it has no mirror cache)";

/// Reads what is needed and compares `from` with `to` in `project`; without `mirrors`,
/// only the artifacts.
pub async fn freight_diff(
    store: &dyn Store,
    mirrors: Option<&MirrorCache>,
    secret_key: &SecretKey,
    project: &str,
    from: &Freight,
    to: &Freight,
) -> FreightDiff {
    let Paired {
        images,
        charts,
        commits: commit_pairs,
    } = artifact_changes(from, to);
    let mut commits = Vec::new();
    for (repo_url, old, new) in commit_pairs {
        let mut change = CommitChange {
            repo_url: repo_url.clone(),
            from: old.clone(),
            to: new.clone(),
            log: Vec::new(),
            complete: old == new,
            error: None,
        };
        if let Some(new) = new.as_deref().filter(|_| old != new) {
            let Some(mirrors) = mirrors else {
                change.error = Some(NO_MIRRORS.into());
                commits.push(change);
                continue;
            };
            match read_commits(
                store,
                mirrors,
                secret_key,
                project,
                &repo_url,
                old.as_deref(),
                new,
            )
            .await
            {
                Ok((log, complete)) => (change.log, change.complete) = (log, complete),
                Err(e) => change.error = Some(e),
            }
        }
        commits.push(change);
    }
    let manifests = match mirrors {
        Some(mirrors) => manifests(store, mirrors, secret_key, project, from, to).await,
        None => Manifests::NotCompared {
            reason: NO_MIRRORS.into(),
        },
    };
    FreightDiff {
        from: side(from),
        to: side(to),
        images,
        charts,
        commits,
        manifests,
    }
}

async fn read_commits(
    store: &dyn Store,
    mirrors: &MirrorCache,
    secret_key: &SecretKey,
    project: &str,
    repo_url: &str,
    from: Option<&str>,
    to: &str,
) -> Result<(Vec<CommitLine>, bool), String> {
    let creds = for_git(store, secret_key, project, repo_url)
        .await
        .map_err(|e| e.to_string())?;
    let range = mirrors
        .commits_between(repo_url, creds.as_ref(), from, to, COMMITS_SHOWN)
        .await
        .map_err(|e| e.to_string())?;
    let line = |c: LoggedCommit| CommitLine {
        subject: c.message.lines().next().unwrap_or_default().to_owned(),
        id: c.id,
        author: c.author,
    };
    Ok((range.commits.into_iter().map(line).collect(), range.reached))
}

async fn manifests(
    store: &dyn Store,
    mirrors: &MirrorCache,
    secret_key: &SecretKey,
    project: &str,
    from: &Freight,
    to: &Freight,
) -> Manifests {
    let not = |reason: String| Manifests::NotCompared { reason };
    let (a, b) = (side(from), side(to));
    let shared: Vec<String> = stages_of(from)
        .intersection(&stages_of(to))
        .cloned()
        .collect();
    let Some(stage_name) = shared.first() else {
        return not(format!(
            "`{}` and `{}` were never both in one Stage, and rendered manifests are compared \
             within one stage branch; promote both into the same Stage to compare them",
            a.alias, b.alias
        ));
    };
    let key = ObjectKey::namespaced(Kind::Stage, project, stage_name);
    let stage: Option<Stage> = match store.get(&key).await {
        Ok(found) => found.and_then(|s| s.to_typed().ok()),
        Err(e) => return not(format!("cannot read Stage `{stage_name}`: {e}")),
    };
    let Some(branch) = stage
        .and_then(|s| s.status)
        .and_then(|s| s.branch)
        .filter(|b| !b.repo_url.is_empty())
    else {
        return not(format!("Stage `{stage_name}` has no branch recorded"));
    };
    let creds = match for_git(store, secret_key, project, &branch.repo_url).await {
        Ok(creds) => creds,
        Err(e) => return not(e.to_string()),
    };
    let log = match mirrors
        .branch_log(
            &branch.repo_url,
            &branch.name,
            creds.as_ref(),
            BRANCH_SEARCHED,
        )
        .await
    {
        Ok(Some(log)) => log,
        Ok(None) => return not(format!("branch `{}` does not exist any more", branch.name)),
        Err(e) => return not(e.to_string()),
    };
    let commit_of = |id: &str| {
        log.iter()
            .find(|c| entry(c).freight.as_deref().map(freight_id) == Some(id))
            .map(|c| c.id.clone())
    };
    let (Some(from_commit), Some(to_commit)) = (commit_of(&a.name), commit_of(&b.name)) else {
        return not(format!(
            "the newest {BRANCH_SEARCHED} commits of `{}` do not hold Dray's commits for both \
             `{}` and `{}`",
            branch.name, a.alias, b.alias
        ));
    };
    match mirrors
        .tree_diff(
            &branch.repo_url,
            creds.as_ref(),
            &from_commit,
            &to_commit,
            MANIFEST_DIFF_BYTES,
        )
        .await
    {
        Ok(diff) => Manifests::Compared {
            stage: stage_name.clone(),
            from_commit,
            to_commit,
            files: diff
                .files
                .into_iter()
                .map(|f| ManifestFile {
                    path: f.path,
                    change: f.change.as_str().to_owned(),
                    patch: f.patch,
                })
                .collect(),
            truncated: diff.truncated,
        },
        Err(e) => not(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{FreightChart, FreightCommit, FreightImage};

    fn freight(
        name: &str,
        images: &[(&str, &str)],
        commit: Option<&str>,
        chart: Option<&str>,
    ) -> Freight {
        let mut f = Freight::new(name, Default::default());
        f.spec.alias = format!("{name}-alias");
        f.spec.images = images
            .iter()
            .map(|(repo, tag)| FreightImage {
                repo_url: (*repo).into(),
                tag: (*tag).into(),
                digest: format!("sha256:{tag}"),
                ..Default::default()
            })
            .collect();
        f.spec.commits = commit
            .map(|id| FreightCommit {
                repo_url: "http://git/config.git".into(),
                id: id.into(),
                ..Default::default()
            })
            .into_iter()
            .collect();
        f.spec.charts = chart
            .map(|v| FreightChart {
                repo_url: "https://charts/".into(),
                name: "app".into(),
                version: v.into(),
                digest: None,
            })
            .into_iter()
            .collect();
        f
    }

    #[test]
    fn artifacts_pair_by_repository_and_show_what_each_side_lacks() {
        let old = freight(
            "a",
            &[("reg/app", "1.0.0"), ("reg/gone", "1")],
            Some("c1"),
            Some("1.0.0"),
        );
        let new = freight(
            "b",
            &[("reg/app", "1.1.0"), ("reg/new", "2")],
            Some("c2"),
            Some("1.0.0"),
        );
        let Paired {
            images,
            charts,
            commits,
        } = artifact_changes(&old, &new);
        let shown: Vec<_> = images
            .iter()
            .map(|c| {
                (
                    c.artifact.as_str(),
                    c.from.as_deref(),
                    c.to.as_deref(),
                    c.changed(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                (
                    "reg/app",
                    Some("1.0.0@sha256:1.0.0"),
                    Some("1.1.0@sha256:1.1.0"),
                    true
                ),
                ("reg/gone", Some("1@sha256:1"), None, true),
                ("reg/new", None, Some("2@sha256:2"), true),
            ]
        );
        assert_eq!(charts.len(), 1);
        assert_eq!(charts[0].artifact, "https://charts/app");
        assert!(!charts[0].changed());
        assert_eq!(
            commits,
            [(
                "http://git/config.git".to_owned(),
                Some("c1".to_owned()),
                Some("c2".to_owned())
            )]
        );
    }

    #[test]
    fn the_stages_a_freight_was_in_include_where_it_was_verified() {
        let mut f = freight("a", &[], None, None);
        let status = f.status.get_or_insert_with(Default::default);
        status
            .currently_in
            .insert("staging".into(), Default::default());
        status.verified_in.insert("dev".into(), Default::default());
        assert_eq!(
            stages_of(&f).into_iter().collect::<Vec<_>>(),
            ["dev", "staging"]
        );
        assert!(stages_of(&freight("b", &[], None, None)).is_empty());
    }
}
