//! What discovery remembers between refreshes, shared by every warehouse.
//!
//! Owns three maps:
//! - tag → digest per repository. Tags move, so an entry is a guess: `discover` re-checks
//!   the newest candidate with a `HEAD` on every refresh and [`Caches::forget_tag`] lets a
//!   registry webhook drop an entry. Entries of tags no longer listed are dropped at each
//!   listing, so this map is bounded by what the registries hold.
//! - manifest digest → what the manifest says (index entries or config digest), and
//! - config digest → build time, platform and origin (source and revision labels). Both are content-addressed, hence never
//!   stale; each is cleared when it exceeds [`MAX_ENTRIES`] (a crude bound, enough for a
//!   cache that only saves requests).
//!
//! Entries are only read after this call's own authorised request to the same repository
//! (the tag listing or a `HEAD`), so a warehouse without access learns nothing from them.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;

use super::manifest::{Descriptor, Origin, Platform};

/// The largest number of entries in the manifest and config maps.
pub(crate) const MAX_ENTRIES: usize = 50_000;

/// What a manifest says, as far as discovery cares.
#[derive(Clone, Debug)]
pub(crate) enum ManifestFacts {
    /// An image index: its entries, and the origin its annotations name.
    Index {
        entries: Vec<Descriptor>,
        origin: Origin,
    },
    /// An image manifest: the digest of its config blob, and the origin its annotations
    /// name.
    Image { config: String, origin: Origin },
}

/// What an image config says.
#[derive(Clone, Debug)]
pub(crate) struct ConfigFacts {
    pub(crate) created: Option<Timestamp>,
    pub(crate) platform: Platform,
    /// The origin its labels name.
    pub(crate) origin: Origin,
}

/// The caches; cheap to share through `Arc`.
#[derive(Debug, Default)]
pub(crate) struct Caches {
    /// repository → tag → digest.
    tags: Mutex<HashMap<String, HashMap<String, String>>>,
    manifests: Mutex<HashMap<String, Arc<ManifestFacts>>>,
    configs: Mutex<HashMap<String, ConfigFacts>>,
}

impl Caches {
    /// The cached digest of `repo:tag`.
    pub(crate) fn tag(&self, repo: &str, tag: &str) -> Option<String> {
        lock(&self.tags).get(repo)?.get(tag).cloned()
    }

    /// Remember `repo:tag`; returns the digest it replaced, if different.
    pub(crate) fn set_tag(&self, repo: &str, tag: &str, digest: &str) -> Option<String> {
        let mut tags = lock(&self.tags);
        let old = tags
            .entry(repo.to_owned())
            .or_default()
            .insert(tag.to_owned(), digest.to_owned());
        old.filter(|old| old != digest)
    }

    /// Forget `repo:tag`, e.g. when a webhook says it was pushed.
    pub(crate) fn forget_tag(&self, repo: &str, tag: &str) {
        if let Some(repo) = lock(&self.tags).get_mut(repo) {
            repo.remove(tag);
        }
    }

    /// Drop the entries of `repo` whose tag is not in `listed`.
    pub(crate) fn retain_tags(&self, repo: &str, listed: &[String]) {
        if let Some(cached) = lock(&self.tags).get_mut(repo) {
            let listed: HashSet<&str> = listed.iter().map(String::as_str).collect();
            cached.retain(|tag, _| listed.contains(tag.as_str()));
        }
    }

    pub(crate) fn manifest(&self, key: &str) -> Option<Arc<ManifestFacts>> {
        lock(&self.manifests).get(key).cloned()
    }

    pub(crate) fn set_manifest(&self, key: &str, facts: Arc<ManifestFacts>) {
        insert_bounded(&self.manifests, key, facts);
    }

    pub(crate) fn config(&self, key: &str) -> Option<ConfigFacts> {
        lock(&self.configs).get(key).cloned()
    }

    pub(crate) fn set_config(&self, key: &str, facts: ConfigFacts) {
        insert_bounded(&self.configs, key, facts);
    }
}

fn insert_bounded<V>(map: &Mutex<HashMap<String, V>>, key: &str, value: V) {
    let mut map = lock(map);
    if map.len() >= MAX_ENTRIES {
        map.clear();
    }
    map.insert(key.to_owned(), value);
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_tag_reports_the_old_digest() {
        let caches = Caches::default();
        assert_eq!(caches.set_tag("r", "1.0.0", "sha256:a"), None);
        assert_eq!(caches.set_tag("r", "1.0.0", "sha256:a"), None);
        assert_eq!(
            caches.set_tag("r", "1.0.0", "sha256:b").as_deref(),
            Some("sha256:a")
        );
        assert_eq!(caches.tag("r", "1.0.0").as_deref(), Some("sha256:b"));
    }

    #[test]
    fn unlisted_and_forgotten_tags_are_dropped() {
        let caches = Caches::default();
        caches.set_tag("r", "a", "sha256:a");
        caches.set_tag("r", "b", "sha256:b");
        caches.set_tag("r", "c", "sha256:c");
        caches.retain_tags("r", &["a".into(), "c".into()]);
        caches.forget_tag("r", "c");
        assert!(caches.tag("r", "a").is_some());
        assert!(caches.tag("r", "b").is_none() && caches.tag("r", "c").is_none());
    }
}
