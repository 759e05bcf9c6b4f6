//! Helm chart repositories, as both sides of Dray read them: the Warehouse's chart
//! discovery (in the `dray` crate, which depends on this one) and the chart steps
//! (`helm-template` with `chart:`, `helm-update-chart`).
//!
//! Owns the classic repository's `index.yaml` ([`ChartIndex`], fetched with
//! [`fetch_index`]), the chart-archive download ([`fetch_chart`]: the URL from the index,
//! or the chart layer of an OCI artifact through the steps' OCI client, `crate::oci`), the
//! `+`/`_` mapping between chart versions and OCI tags, and Helm's media types. Does not
//! choose versions (discovery's `chart` module does) nor run `helm`.
//!
//! Credentials (HTTP Basic) go only to the repository's own scheme, host and port, as
//! Helm does without `--pass-credentials`, and to the token service an OCI registry names.

mod error;
mod fetch;
mod http;
mod index;
mod oci;

pub use error::ChartRepoError;
pub use fetch::{ChartRef, fetch_chart};
pub use index::{ChartIndex, IndexEntry, fetch_index};
pub use oci::chart_layer;

/// The config media type of a Helm chart stored as an OCI artifact.
pub const CHART_CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";
/// The media type of the chart archive layer of a Helm OCI artifact.
pub const CHART_LAYER_MEDIA_TYPE: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
/// The largest chart archive or `index.yaml` read (Bitnami's index is about 20 MiB).
pub const MAX_DOWNLOAD: usize = 64 * 1024 * 1024;

/// The OCI tag Helm pushes a chart version under: `+` is not allowed in tags, so Helm
/// writes `_` instead (`1.2.0+build.1` is tagged `1.2.0_build.1`).
pub fn version_to_tag(version: &str) -> String {
    version.replace('+', "_")
}

/// The chart version an OCI tag stands for (the inverse of [`version_to_tag`]).
pub fn tag_to_version(tag: &str) -> String {
    tag.replace('_', "+")
}

/// Whether `repo_url` names a chart in an OCI registry (`oci://…`).
pub fn is_oci(repo_url: &str) -> bool {
    repo_url.trim().starts_with("oci://")
}

/// The chart's name in an `oci://host/path/chart` URL: its last path segment.
pub fn oci_chart_name(repo_url: &str) -> &str {
    repo_url
        .trim()
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_tags_map_both_ways() {
        assert_eq!(version_to_tag("1.2.0+build.1"), "1.2.0_build.1");
        assert_eq!(tag_to_version("1.2.0_build.1"), "1.2.0+build.1");
        assert_eq!(tag_to_version("1.2.0-rc.1"), "1.2.0-rc.1");
        assert_eq!(version_to_tag("1.2.0"), "1.2.0");
    }

    #[test]
    fn oci_urls_name_their_chart() {
        assert!(is_oci("oci://127.0.0.1:5000/charts/app"));
        assert!(!is_oci("https://charts.example.com"));
        assert_eq!(oci_chart_name("oci://127.0.0.1:5000/charts/app/"), "app");
    }
}
