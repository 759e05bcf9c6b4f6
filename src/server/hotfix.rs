//! What hand-assembled Freight (`POST …/freight/assemble`, `dray freight create`) must
//! satisfy before it is minted, beyond each digest and commit existing: its alias is an RFC
//! 1123 label (it becomes part of Promotion names); it covers every subscription of its
//! Warehouse exactly once (an image per image subscription, a commit per git subscription,
//! a chart per chart subscription) and names nothing the Warehouse does not subscribe to;
//! and each image's tag points at the given digest — now, or (a moved tag) before, as
//! Dray's Freight and discovery saw it, which is accepted with a warning stating the move.
//!
//! The checks are pure: the route reads the registry and the store and asks them.

use serde_json::Value;

use crate::api::{FreightCommit, FreightImage, RepoUrl, Warehouse, label};
use crate::store::StoredObject;

/// The longest alias: an RFC 1123 label.
const MAX_ALIAS: usize = label::MAX_LABEL;

/// The refusal of an alias that is not an RFC 1123 label, with a valid spelling when
/// there is one.
pub(crate) fn check_alias(alias: &str) -> Result<(), (String, String)> {
    if label::is_label(alias, MAX_ALIAS) {
        return Ok(());
    }
    let message = format!(
        "alias `{alias}` is not an RFC 1123 label: lowercase letters, digits and `-`, starting and ending with a letter or digit, at most {MAX_ALIAS} characters (it becomes part of Promotion names)"
    );
    let better = label::to_label(alias, MAX_ALIAS);
    let hint = if better.is_empty() {
        "choose an alias like `hotfix-1`, or leave --alias out for a generated one".to_owned()
    } else {
        format!("use --alias {better}")
    };
    Err((message, hint))
}

/// What is wrong with how `images` and `commits` cover `warehouse`'s subscriptions: each
/// image and git subscription needs exactly one artifact, a chart subscription cannot be
/// pinned by hand, and every artifact must belong to a subscription.
pub(crate) fn coverage(
    warehouse: &Warehouse,
    images: &[FreightImage],
    commits: &[FreightCommit],
) -> Vec<String> {
    let name = warehouse.metadata.name.as_deref().unwrap_or_default();
    let mut problems = Vec::new();
    let mut image_subs = Vec::new();
    let mut git_subs = Vec::new();
    for subscription in &warehouse.spec.subscriptions {
        if let Some(image) = &subscription.image {
            image_subs.push(RepoUrl::new(&image.repo_url));
            let given = images
                .iter()
                .filter(|i| RepoUrl::new(&i.repo_url) == RepoUrl::new(&image.repo_url))
                .count();
            match given {
                1 => {}
                0 => problems.push(format!(
                    "Warehouse `{name}` subscribes to image `{}`, and no --image names it: pass --image {}:TAG@sha256:DIGEST",
                    image.repo_url, image.repo_url
                )),
                n => problems.push(format!(
                    "{n} images name `{}`; Freight holds one image per subscription",
                    image.repo_url
                )),
            }
        }
        if let Some(git) = &subscription.git {
            git_subs.push(RepoUrl::new(&git.repo_url));
            let given = commits
                .iter()
                .filter(|c| RepoUrl::new(&c.repo_url) == RepoUrl::new(&git.repo_url))
                .count();
            match given {
                1 => {}
                0 => problems.push(format!(
                    "Warehouse `{name}` subscribes to git repository `{}`, and no --commit names it: pass --commit {}@SHA",
                    git.repo_url, git.repo_url
                )),
                n => problems.push(format!(
                    "{n} commits name `{}`; Freight holds one commit per subscription",
                    git.repo_url
                )),
            }
        }
        if let Some(chart) = &subscription.chart {
            let chart_name = chart
                .name
                .as_deref()
                .map_or_else(String::new, |n| format!(" `{n}`"));
            problems.push(format!(
                "Warehouse `{name}` subscribes to chart{chart_name} of `{}`, which Freight assembled from --image and --commit cannot pin: use `dray freight create --warehouse {name} --newest` for the newest discovered artifacts",
                chart.repo_url
            ));
        }
    }
    for image in images {
        if !image_subs.contains(&RepoUrl::new(&image.repo_url)) {
            problems.push(format!(
                "Warehouse `{name}` does not subscribe to image `{}`",
                image.repo_url
            ));
        }
    }
    for commit in commits {
        if !git_subs.contains(&RepoUrl::new(&commit.repo_url)) {
            problems.push(format!(
                "Warehouse `{name}` does not subscribe to git repository `{}`",
                commit.repo_url
            ));
        }
    }
    problems
}

/// What the tag of a hand-assembled image says about its digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TagCheck {
    /// The tag points at the digest (or carries none to check).
    Agrees,
    /// The tag points elsewhere now but pointed at the digest before: accepted, with this
    /// warning.
    Moved(String),
    /// The tag and the digest disagree: refused, with this problem.
    Disagrees(String),
}

/// Judges `image`'s tag against what the registry says it points at `now` (`None`: no
/// such tag), what discovery last saw (`discovered`: `(tag, digest)` pairs of the
/// subscription) and the digests Freight of the same Warehouse pinned it at (`history`).
/// With `platform` (the subscription picks one platform's manifest from a tag's index),
/// the tag's own digest is the index's, and a digest discovery picked for the tag agrees.
pub(crate) fn judge_tag(
    image: &FreightImage,
    now: Option<&str>,
    discovered: &[(String, String)],
    platform: bool,
    history: &[StoredObject],
    warehouse: &str,
) -> TagCheck {
    let FreightImage {
        repo_url,
        tag,
        digest,
        ..
    } = image;
    if tag.is_empty() || now == Some(digest.as_str()) {
        return TagCheck::Agrees;
    }
    let seen_by_discovery = discovered.iter().any(|(t, d)| t == tag && d == digest);
    if seen_by_discovery && platform && now.is_some() {
        return TagCheck::Agrees;
    }
    let pinned_before = history.iter().find(|f| {
        f.object.pointer("/origin/name").and_then(Value::as_str) == Some(warehouse)
            && f.object
                .get("images")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|i| {
                    RepoUrl::new(i.get("repoURL").and_then(Value::as_str).unwrap_or_default())
                        == RepoUrl::new(repo_url)
                        && i.get("tag").and_then(Value::as_str) == Some(tag)
                        && i.get("digest").and_then(Value::as_str) == Some(digest)
                })
    });
    let where_now = match now {
        Some(current) => format!("now points at `{current}`"),
        None => "no longer exists in the registry".to_owned(),
    };
    if let Some(freight) = pinned_before {
        let by = freight
            .object
            .get("alias")
            .and_then(Value::as_str)
            .unwrap_or(&freight.key.name);
        return TagCheck::Moved(format!(
            "tagMoved: tag `{tag}` of `{repo_url}` {where_now}; `{digest}` is the image it pointed at before (Freight `{by}` pinned it), and this Freight holds that earlier image"
        ));
    }
    if seen_by_discovery {
        return TagCheck::Moved(format!(
            "tagMoved: tag `{tag}` of `{repo_url}` {where_now}; discovery saw it at `{digest}` before, and this Freight holds that earlier image"
        ));
    }
    let problem = match now {
        Some(current) => format!(
            "image `{repo_url}:{tag}@{digest}`: tag `{tag}` points at `{current}` in the registry, not at the given digest, and Dray never saw it point there; pass the tag's own digest, or the tag the digest was pushed as"
        ),
        None => format!(
            "image `{repo_url}:{tag}@{digest}`: tag `{tag}` does not exist in `{repo_url}`, and Dray never saw it point at the given digest; pass the tag the digest was pushed as"
        ),
    };
    TagCheck::Disagrees(problem)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Kind, ObjectKey};
    use serde_json::json;

    #[test]
    fn aliases_are_rfc_1123_labels_with_a_suggestion() {
        assert!(check_alias("hot-fix-2").is_ok());
        let (message, hint) = check_alias("Hot_Fix").unwrap_err();
        assert!(
            message.starts_with("alias `Hot_Fix` is not an RFC 1123 label"),
            "{message}"
        );
        assert_eq!(hint, "use --alias hot-fix");
        for wrong in ["-a", "a-", "", "a.b", &"a".repeat(64)] {
            assert!(check_alias(wrong).is_err(), "{wrong}");
        }
        assert!(
            check_alias("__")
                .unwrap_err()
                .1
                .contains("leave --alias out")
        );
    }

    fn warehouse(subscriptions: Value) -> Warehouse {
        serde_json::from_value(
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Warehouse",
            "metadata": {"name": "app", "namespace": "demo"},
            "spec": {"subscriptions": subscriptions}}),
        )
        .unwrap()
    }

    fn image(repo: &str, tag: &str, digest: &str) -> FreightImage {
        FreightImage {
            repo_url: repo.into(),
            tag: tag.into(),
            digest: digest.into(),
            ..Default::default()
        }
    }

    #[test]
    fn every_subscription_is_covered_once_and_nothing_else() {
        let w = warehouse(json!([{"image": {"repoURL": "reg/app"}},
                                 {"git": {"repoURL": "https://git/config.git"}}]));
        let commit = FreightCommit {
            repo_url: "https://git/config.git".into(),
            id: "a".repeat(40),
            ..Default::default()
        };
        let app = image("reg/app", "1.0", "sha256:aa");
        assert!(
            coverage(
                &w,
                std::slice::from_ref(&app),
                std::slice::from_ref(&commit)
            )
            .is_empty()
        );
        let missing = coverage(&w, std::slice::from_ref(&app), &[]);
        assert_eq!(
            missing,
            [
                "Warehouse `app` subscribes to git repository `https://git/config.git`, and no --commit names it: pass --commit https://git/config.git@SHA"
            ]
        );
        let extra = coverage(
            &w,
            &[
                app.clone(),
                app.clone(),
                image("reg/other", "1", "sha256:bb"),
            ],
            &[commit],
        );
        assert_eq!(extra.len(), 2, "{extra:?}");
        assert!(extra[0].starts_with("2 images name `reg/app`"), "{extra:?}");
        assert!(extra[1].contains("does not subscribe to image `reg/other`"));
        let charts = warehouse(json!([{"chart": {"repoURL": "oci://reg/charts/app"}}]));
        assert!(coverage(&charts, &[], &[])[0].contains("--newest"));
    }

    fn freight(alias: &str, image: &FreightImage) -> StoredObject {
        let object = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
            "metadata": {"name": "f-old", "namespace": "demo"}, "alias": alias,
            "origin": {"kind": "Warehouse", "name": "app"},
            "images": [{"repoURL": image.repo_url, "tag": image.tag, "digest": image.digest}]});
        StoredObject {
            key: ObjectKey::namespaced(Kind::Freight, "demo", "f-old"),
            resource_version: 1,
            object,
        }
    }

    #[test]
    fn a_tag_must_point_at_its_digest_now_or_before() {
        let given = image("reg/app", "9.9.9", "sha256:old");
        assert_eq!(
            judge_tag(&given, Some("sha256:old"), &[], false, &[], "app"),
            TagCheck::Agrees
        );
        assert_eq!(
            judge_tag(
                &image("reg/app", "", "sha256:x"),
                None,
                &[],
                false,
                &[],
                "app"
            ),
            TagCheck::Agrees
        );
        let TagCheck::Disagrees(problem) =
            judge_tag(&given, Some("sha256:new"), &[], false, &[], "app")
        else {
            panic!("a wrong digest is refused")
        };
        assert!(
            problem.contains(
                "tag `9.9.9` points at `sha256:new` in the registry, not at the given digest"
            ),
            "{problem}"
        );
        let history = [freight("old-otter", &given)];
        let TagCheck::Moved(warning) =
            judge_tag(&given, Some("sha256:new"), &[], false, &history, "app")
        else {
            panic!("a moved tag is accepted")
        };
        assert!(
            warning.starts_with("tagMoved: tag `9.9.9` of `reg/app` now points at `sha256:new`; `sha256:old` is the image it pointed at before (Freight `old-otter` pinned it)"),
            "{warning}"
        );
        assert!(matches!(
            judge_tag(&given, Some("sha256:new"), &[], false, &history, "other"),
            TagCheck::Disagrees(_)
        ));
        // A platform's digest discovery picked from the tag's index agrees.
        let discovered = [("9.9.9".to_owned(), "sha256:old".to_owned())];
        assert_eq!(
            judge_tag(&given, Some("sha256:index"), &discovered, true, &[], "app"),
            TagCheck::Agrees
        );
        // Without a platform, what discovery saw before is a move.
        assert!(matches!(
            judge_tag(&given, Some("sha256:new"), &discovered, false, &[], "app"),
            TagCheck::Moved(w) if w.contains("discovery saw it at `sha256:old` before")
        ));
        assert!(matches!(
            judge_tag(&given, None, &[], false, &[], "app"),
            TagCheck::Disagrees(p) if p.contains("does not exist")
        ));
    }
}
