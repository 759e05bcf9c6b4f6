//! Minting Freight: a stable, content-addressed id and a friendly alias for a set of
//! exact artifacts, and the Freight object itself.
//!
//! The id is the first 40 hex digits of the SHA-256 of the sorted, normalised artifacts
//! (`image <repo>:<tag>@<digest>` and `commit <repo>@<id>` lines), so the same artifacts
//! give the same id across restarts and machines. The alias (`frosty-otter`) is derived
//! from the id and made unique in the project by trying the next candidate.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::api::{API_VERSION, FreightCommit, FreightImage};

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

/// The content-addressed id of a set of artifacts.
pub fn freight_id(images: &[FreightImage], commits: &[FreightCommit]) -> String {
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
    warnings: &[String],
) -> Value {
    let id = freight_id(images, commits);
    let mut object = json!({
        "apiVersion": API_VERSION,
        "kind": "Freight",
        "metadata": {
            "name": id,
            "namespace": project,
            "labels": {"dray.dev/warehouse": warehouse},
        },
        "alias": alias,
        "origin": {"kind": "Warehouse", "name": warehouse},
        "images": images,
        "commits": commits,
    });
    if !warnings.is_empty() {
        object["warnings"] = json!(warnings);
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(tag: &str, digest: &str) -> FreightImage {
        FreightImage {
            repo_url: "reg/app".into(),
            tag: tag.into(),
            digest: digest.into(),
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
