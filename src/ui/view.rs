//! Small pieces several pages draw the same way: Freight in a line, commits and their
//! links, pull request links from step outputs, times.

use maud::{Markup, html};
use serde_json::Value;

use crate::api::{Freight, FreightCommit, FreightImage, Time};

/// A message as the UI shows it: text between backticks (`` `staging` ``) as `<code>`, the
/// rest as text. Every part is escaped by maud, so nothing in a message becomes markup; an
/// unmatched backtick is shown as it is.
pub(crate) fn message(text: &str) -> Markup {
    let parts: Vec<&str> = text.split('`').collect();
    // An even number of backticks splits into an odd number of parts.
    let balanced = parts.len() % 2 == 1;
    html! {
        @for (i, part) in parts.iter().enumerate() {
            @if !balanced && i == parts.len() - 1 {
                "`" (part)
            } @else if i % 2 == 1 {
                code { (part) }
            } @else {
                (part)
            }
        }
    }
}

/// A commit id's first 7 characters.
pub(crate) fn short(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}

/// The last path segment of a repository URL (`ghcr.io/acme/app` → `app`).
pub(crate) fn repo_name(url: &str) -> &str {
    url.trim_end_matches('/')
        .trim_end_matches(".git")
        .rsplit('/')
        .next()
        .unwrap_or(url)
}

/// The web address of a git repository when it is served over http(s): credentials and
/// `.git` dropped. `None` for ssh and file URLs.
pub(crate) fn repo_web_url(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let rest = match rest.split_once('/') {
        Some((authority, path)) => {
            let host = authority.rsplit('@').next().unwrap_or(authority);
            format!("{host}/{path}")
        }
        None => rest.rsplit('@').next().unwrap_or(rest).to_owned(),
    };
    Some(format!(
        "{scheme}://{}",
        rest.trim_end_matches('/').trim_end_matches(".git")
    ))
}

/// A commit: a link to `<repo>/commit/<sha>` when the repo has a web address, else the
/// short sha; the full sha is in the title either way.
pub(crate) fn commit_link(repo_url: &str, sha: &str) -> Markup {
    match repo_web_url(repo_url) {
        Some(web) => html! {
            a.sha href={ (web) "/commit/" (sha) } title=(sha) { code { (short(sha)) } }
        },
        None => html! { code.sha title=(sha) { (short(sha)) } },
    }
}

/// `app:1.2.3`.
pub(crate) fn image_label(image: &FreightImage) -> String {
    let tag = if image.tag.is_empty() {
        image.digest.get(..19).unwrap_or(&image.digest)
    } else {
        &image.tag
    };
    format!("{}:{tag}", repo_name(&image.repo_url))
}

/// The Freight's alias, or its id when it has none.
pub(crate) fn freight_label(freight: &Freight) -> String {
    if freight.spec.alias.is_empty() {
        freight.metadata.name.clone().unwrap_or_default()
    } else {
        freight.spec.alias.clone()
    }
}

/// Image tags, config short SHAs and chart versions, on one line.
pub(crate) fn artifacts(freight: &Freight) -> Markup {
    html! {
        span.artifacts {
            @for image in &freight.spec.images {
                span.image title={ (image.repo_url) "@" (image.digest) } { (image_label(image)) }
            }
            @for commit in &freight.spec.commits {
                span.commit title={ (commit.repo_url) " " (commit.message) } {
                    (repo_name(&commit.repo_url)) "@" (short(&commit.id))
                }
            }
            @for chart in &freight.spec.charts {
                span.chart title={ (chart.repo_url) " " (chart.digest.as_deref().unwrap_or_default()) } {
                    (chart.name) ":" (chart.version)
                }
            }
        }
    }
}

/// `tag@sha256:abcdef…` for an image in a confirmation.
pub(crate) fn image_version(image: Option<&FreightImage>) -> Markup {
    match image {
        Some(i) => html! {
            code { (if i.tag.is_empty() { "(no tag)" } else { &i.tag }) "@" (i.digest) }
        },
        None => html! { em { "none" } },
    }
}

/// `abc1234 subject` for a commit in a confirmation (the sha alone when no subject is known).
pub(crate) fn commit_version(commit: Option<&FreightCommit>) -> Markup {
    match commit {
        Some(c) => html! {
            (commit_link(&c.repo_url, &c.id))
            @if !c.message.is_empty() { " " span.subject { (c.message) } }
        },
        None => html! { em { "none" } },
    }
}

/// A time as people read it (UTC, to the second).
pub(crate) fn time(t: Option<&Time>) -> String {
    t.map(|t| {
        t.0.round(jiff::Unit::Second)
            .unwrap_or(t.0)
            .strftime("%Y-%m-%d %H:%M:%S UTC")
            .to_string()
    })
    .unwrap_or_default()
}

/// A Promotion's step outputs by alias (`status.state.outputs`).
pub(crate) fn step_outputs(state: Option<&Value>) -> Option<&serde_json::Map<String, Value>> {
    state?.get("outputs")?.as_object()
}

/// Pull request URLs in a Promotion's step outputs (`<alias>.pr.url`), with the step.
pub(crate) fn pull_requests(state: Option<&Value>) -> Vec<(String, String)> {
    let Some(steps) = step_outputs(state) else {
        return Vec::new();
    };
    steps
        .iter()
        .filter_map(|(alias, outputs)| {
            let url = outputs.get("pr")?.get("url")?.as_str()?;
            let http = url.starts_with("https://") || url.starts_with("http://");
            http.then(|| (alias.clone(), url.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod message_tests {
    use super::message;

    #[test]
    fn code_spans_become_code_and_everything_is_escaped() {
        assert_eq!(
            message("not verified in `staging`").into_string(),
            "not verified in <code>staging</code>"
        );
        assert_eq!(
            message("`a` and `b`").into_string(),
            "<code>a</code> and <code>b</code>"
        );
        assert_eq!(
            message("user `<script>` may not").into_string(),
            "user <code>&lt;script&gt;</code> may not"
        );
        assert_eq!(
            message("<b>no</b> markup").into_string(),
            "&lt;b&gt;no&lt;/b&gt; markup"
        );
        // An unmatched backtick stays a backtick.
        assert_eq!(message("one ` alone").into_string(), "one ` alone");
        assert_eq!(
            message("`a` then `b").into_string(),
            "<code>a</code> then `b"
        );
        assert_eq!(message("").into_string(), "");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_show_chart_versions() {
        let mut freight = Freight::new("f1", Default::default());
        freight.spec.charts.push(crate::api::FreightChart {
            repo_url: "oci://reg/charts/app".into(),
            name: "app".into(),
            version: "1.2.0".into(),
            digest: Some("sha256:cc".into()),
        });
        let html = artifacts(&freight).into_string();
        assert!(html.contains(">app:1.2.0<"), "{html}");
        assert!(
            html.contains("title=\"oci://reg/charts/app sha256:cc\""),
            "{html}"
        );
    }

    #[test]
    fn web_urls_drop_credentials_and_dot_git_and_skip_ssh() {
        assert_eq!(
            repo_web_url("https://bot:s3cret@git.example.com/acme/config.git").as_deref(),
            Some("https://git.example.com/acme/config")
        );
        assert_eq!(repo_web_url("git@github.com:acme/config.git"), None);
        assert_eq!(repo_web_url("file:///tmp/repo"), None);
        let link = commit_link("http://127.0.0.1:1/config.git", "0123456789abcdef").into_string();
        assert!(link.contains("href=\"http://127.0.0.1:1/config/commit/0123456789abcdef\""));
        assert!(link.contains(">0123456<"));
        let plain = commit_link("ssh://git@host/repo", "0123456789").into_string();
        assert!(!plain.contains("href"));
    }

    #[test]
    fn pull_requests_are_found_in_step_outputs() {
        let state = serde_json::json!({"outputs": {
            "open-pr": {"pr": {"id": 7, "url": "https://github.example/acme/config/pull/7"}},
            "push": {"commit": "abc"},
            "odd": {"pr": {"url": "javascript:alert(1)"}}
        }, "saved": {}});
        assert_eq!(
            pull_requests(Some(&state)),
            vec![(
                "open-pr".to_owned(),
                "https://github.example/acme/config/pull/7".to_owned()
            )]
        );
    }
}
