//! Which Warehouses a webhook delivery refreshes: those subscribed to a repository the
//! delivery names, compared as [`RepoUrl`]s (so `https://h/x` refreshes a Warehouse
//! subscribed to `https://h/x.git` or `git@h:x`), or every Warehouse of the project when
//! the delivery names none.
//!
//! This is the decision only. Authenticating a delivery and reading what its payload
//! names is the server's (`server::webhooks`); asking a Warehouse to look again is the
//! refresh annotation the Warehouse controller answers.

use crate::api::{RepoUrl, SubscriptionKind, Warehouse};

/// What a delivery says changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Announced {
    /// Something, unnamed (a generic receiver called without `repoURL`): every
    /// Warehouse of the project looks again.
    Everything,
    /// These repositories (git repositories, image repositories), as the payload names
    /// them.
    Repositories(Vec<RepoUrl>),
    /// These Warehouses of the project, by name (a generic receiver's actions).
    Warehouses(Vec<String>),
}

impl Announced {
    /// What a payload naming `urls` announces: nothing named is [`Announced::Everything`].
    pub fn from_urls<S: AsRef<str>>(urls: &[S]) -> Self {
        if urls.is_empty() {
            return Announced::Everything;
        }
        Announced::Repositories(urls.iter().map(|u| RepoUrl::new(u.as_ref())).collect())
    }
}

/// The repositories a Warehouse subscribes to: image references read as Docker reads
/// them ([`RepoUrl::image`]: `nginx` is `docker.io/library/nginx`), every other kind's
/// URL as it is written (`oci://host/path/chart` is `host/path/chart`, so an image
/// registry's webhook naming that path refreshes a chart subscription too).
pub fn subscribed(warehouse: &Warehouse) -> impl Iterator<Item = RepoUrl> + '_ {
    warehouse.spec.subscriptions.iter().filter_map(|s| {
        let url = s.repo_url()?;
        Some(match s.kind() {
            Some(SubscriptionKind::Image) => RepoUrl::image(url),
            _ => RepoUrl::new(url),
        })
    })
}

/// Whether `announced` refreshes `warehouse`.
pub fn refreshes(warehouse: &Warehouse, announced: &Announced) -> bool {
    match announced {
        Announced::Everything => true,
        Announced::Repositories(named) => {
            subscribed(warehouse).any(|s| named.iter().any(|n| s.is_named_by(n)))
        }
        Announced::Warehouses(names) => warehouse
            .metadata
            .name
            .as_ref()
            .is_some_and(|name| names.contains(name)),
    }
}

/// The Warehouses among `warehouses` (with whatever handle the caller keeps for each:
/// a key, a stored object) that `announced` refreshes, in order.
pub fn to_refresh<'a, T>(
    warehouses: impl IntoIterator<Item = (T, &'a Warehouse)>,
    announced: &Announced,
) -> Vec<T> {
    warehouses
        .into_iter()
        .filter(|(_, warehouse)| refreshes(warehouse, announced))
        .map(|(handle, _)| handle)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warehouse(yaml: &str) -> Warehouse {
        serde_yaml_ng::from_str(&format!(
            "apiVersion: dray.dev/v1alpha1\nkind: Warehouse\nmetadata: {{name: w, namespace: demo}}\nspec:\n  subscriptions:\n{yaml}"
        ))
        .unwrap()
    }

    #[test]
    fn a_delivery_naming_a_url_refreshes_the_subscriber_however_it_spells_it() {
        let git = warehouse("    - git: {repoURL: 'https://h/x.git'}\n");
        for named in [
            "https://h/x",
            "https://H/x/",
            "git@h:x.git",
            "ssh://git@h/x",
        ] {
            assert!(
                refreshes(&git, &Announced::from_urls(&[named])),
                "`{named}` names `https://h/x.git`"
            );
        }
        assert!(!refreshes(&git, &Announced::from_urls(&["https://h/y"])));
    }

    #[test]
    fn images_match_by_repository_or_a_name_without_host() {
        let image = warehouse("    - image: {repoURL: 'ghcr.io/acme/app'}\n");
        assert!(refreshes(&image, &Announced::from_urls(&["acme/app"])));
        assert!(refreshes(
            &image,
            &Announced::from_urls(&["ghcr.io/acme/app"])
        ));
        assert!(!refreshes(&image, &Announced::from_urls(&["acme/app2"])));
    }

    #[test]
    fn docker_hub_images_match_however_the_warehouse_writes_them() {
        let named = Announced::Repositories(vec![RepoUrl::image("library/nginx")]);
        for subscribed in ["nginx", "docker.io/nginx", "index.docker.io/library/nginx"] {
            let image = warehouse(&format!("    - image: {{repoURL: '{subscribed}'}}\n"));
            assert!(refreshes(&image, &named), "{subscribed}");
        }
        let other = warehouse("    - image: {repoURL: 'acme/nginx'}\n");
        assert!(!refreshes(&other, &named));
    }

    #[test]
    fn naming_nothing_refreshes_everything_and_only_subscribers_are_picked() {
        let git = warehouse("    - git: {repoURL: 'https://h/x.git'}\n");
        let image = warehouse("    - image: {repoURL: 'ghcr.io/acme/app'}\n");
        let none: [&str; 0] = [];
        assert_eq!(Announced::from_urls(&none), Announced::Everything);
        let all = [("git", &git), ("image", &image)];
        assert_eq!(to_refresh(all, &Announced::Everything), ["git", "image"]);
        assert_eq!(
            to_refresh(all, &Announced::from_urls(&["https://h/x"])),
            ["git"]
        );
        assert!(to_refresh(all, &Announced::from_urls(&["https://h/z"])).is_empty());
    }
}
