//! Which tags of a repository are candidates, and in which order: the subscription's
//! validation, `allowTags`/`ignoreTags`, and the `SemVer`, `Lexical` and `NewestBuild`
//! orderings.
//!
//! Owns the rules, as pure functions of the tag list (and, for `NewestBuild`, the build
//! times the caller fetched). Does not talk to the registry: see `registry`. The semver
//! grammar lives in `constraint`.
//!
//! Rules: `allowTags` (any must match) and `ignoreTags` (none may match) are unanchored
//! regular expressions applied first, then `expressionFilter` (CEL over `tag`). `SemVer` keeps tags that read as versions (with
//! `strictSemvers`, only full `x.y.z`, a leading `v` allowed) and satisfy `constraint`,
//! highest first; pre-releases only when the constraint names one. `Lexical` orders by the
//! tag string, greatest first. `NewestBuild` orders by the image config's `created`, newest
//! first (unknown times last). `constraint` is refused with `Lexical` and `NewestBuild`
//! rather than ignored.

use std::cmp::Ordering;

use jiff::Timestamp;
use node_semver::Version;
use regex::Regex;

use super::constraint::{Constraint, parse_tag};
use super::error::ImageDiscoveryError;
use super::manifest::Platform;
use crate::api::{ImageSelectionStrategy, ImageSubscription};
use crate::expr::exprlang::ExprLanguage;
use crate::expr::{FreightView, IMAGE_FIELDS, PredicateCache, Verdict, check_filter};

/// The largest `discoveryLimit`.
pub(crate) const MAX_DISCOVERY_LIMIT: u32 = 100;

/// A validated subscription: everything discovery needs besides the repository.
#[derive(Clone, Debug)]
pub(crate) struct Selector {
    pub(crate) strategy: ImageSelectionStrategy,
    allow: Vec<Regex>,
    ignore: Vec<Regex>,
    constraint: Option<(String, Constraint)>,
    strict: bool,
    /// The tag the `Digest` strategy follows.
    pub(crate) digest_tag: Option<String>,
    pub(crate) platform: Option<Platform>,
    /// How many candidates to return.
    pub(crate) limit: usize,
    /// `expressionFilter`, checked, and the cache it runs from.
    expression: Option<(String, PredicateCache)>,
}

impl Selector {
    /// Validate `sub` (all but `repoURL`), naming the field in the error.
    pub(crate) fn new(
        sub: &ImageSubscription,
        language: ExprLanguage,
    ) -> Result<Self, ImageDiscoveryError> {
        use ImageSelectionStrategy as S;
        let strategy = sub.image_selection_strategy;
        let text = sub
            .constraint
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty());
        let (constraint, digest_tag) = match (strategy, text) {
            (S::SemVer, Some(text)) => {
                let parsed = Constraint::parse(text).map_err(|reason| {
                    ImageDiscoveryError::invalid(
                        "constraint",
                        text,
                        reason,
                        Some("write a range such as `^1.2.0`, `>=1.0.0 <2.0.0` or `~1.4`"),
                    )
                })?;
                (Some((text.to_owned(), parsed)), None)
            }
            (S::SemVer, None) => (None, None),
            (S::Digest, Some(tag)) if is_tag(tag) => (None, Some(tag.to_owned())),
            (S::Digest, Some(tag)) => {
                return Err(ImageDiscoveryError::invalid(
                    "constraint",
                    tag,
                    "it is not a valid tag",
                    Some("with `Digest`, `constraint` is the tag to follow, e.g. `latest`"),
                ));
            }
            (S::Digest, None) => {
                return Err(ImageDiscoveryError::invalid(
                    "constraint",
                    "",
                    "the `Digest` strategy needs the tag to follow",
                    Some("set `constraint: latest` (or the tag you deploy)"),
                ));
            }
            (S::Lexical | S::NewestBuild, Some(text)) => {
                return Err(ImageDiscoveryError::invalid(
                    "constraint",
                    text,
                    format!("`{strategy:?}` does not use a constraint"),
                    Some("remove it, narrow the tags with `allowTags`, or use `SemVer`"),
                ));
            }
            (S::Lexical | S::NewestBuild, None) => (None, None),
        };
        let platform = match sub.platform.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some(Platform::parse(text).ok_or_else(|| {
                ImageDiscoveryError::invalid(
                    "platform",
                    text,
                    "it is not `os/arch[/variant]`",
                    Some("e.g. `linux/arm64` or `linux/arm/v7`"),
                )
            })?),
        };
        if !(1..=MAX_DISCOVERY_LIMIT).contains(&sub.discovery_limit) {
            return Err(ImageDiscoveryError::invalid(
                "discoveryLimit",
                sub.discovery_limit.to_string(),
                format!("it must be between 1 and {MAX_DISCOVERY_LIMIT}"),
                None,
            ));
        }
        let expression = match sub.expression_filter.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => {
                check_filter(language, text, IMAGE_FIELDS).map_err(|e| {
                    ImageDiscoveryError::invalid(
                        "expressionFilter",
                        text,
                        e.to_string(),
                        Some(tag_filter_hint(language)),
                    )
                })?;
                Some((text.to_owned(), PredicateCache::new(language)))
            }
        };
        Ok(Self {
            expression,
            strategy,
            allow: regexes("allowTags", &sub.allow_tags)?,
            ignore: regexes("ignoreTags", &sub.ignore_tags)?,
            constraint,
            strict: sub.strict_semvers,
            digest_tag,
            platform,
            limit: sub.discovery_limit as usize,
        })
    }

    /// Whether `tag` passes `allowTags`, `ignoreTags` and `expressionFilter`; an error
    /// when the expression fails on it (rather than being true or false).
    pub(crate) fn passes_filters(&self, tag: &str) -> Result<bool, ImageDiscoveryError> {
        let by_regex = (self.allow.is_empty() || self.allow.iter().any(|r| r.is_match(tag)))
            && !self.ignore.iter().any(|r| r.is_match(tag));
        let Some((expression, cache)) = self.expression.as_ref().filter(|_| by_regex) else {
            return Ok(by_regex);
        };
        let mut variables = serde_json::Map::new();
        variables.insert("tag".into(), tag.into());
        cache
            .evaluate(expression, &variables, &FreightView::default())
            .map(|verdict| verdict == Verdict::Accepted)
            .map_err(|e| {
                ImageDiscoveryError::invalid(
                    "expressionFilter",
                    expression.as_str(),
                    format!("it failed on tag `{tag}`: {e}"),
                    Some("guard the expression so it is a bool for every tag"),
                )
            })
    }

    /// The tags passing the filters, in listing order; an error when none does.
    pub(crate) fn filter(
        &self,
        repo: &str,
        tags: &[String],
    ) -> Result<Vec<String>, ImageDiscoveryError> {
        let mut kept = Vec::new();
        for tag in tags {
            if self.passes_filters(tag)? {
                kept.push(tag.clone());
            }
        }
        if kept.is_empty() {
            let criteria = match (
                self.allow.is_empty() && self.ignore.is_empty(),
                self.expression.is_some(),
            ) {
                (true, false) => "the subscription",
                (false, false) => "`allowTags`/`ignoreTags`",
                (_, true) => "`allowTags`/`ignoreTags`/`expressionFilter`",
            };
            return Err(no_match(repo, criteria, tags, newest_lexical(tags)));
        }
        Ok(kept)
    }

    /// `SemVer` and `Lexical`: all candidates, newest first (the caller keeps `limit`).
    pub(crate) fn rank(
        &self,
        repo: &str,
        tags: &[String],
    ) -> Result<Vec<String>, ImageDiscoveryError> {
        let mut kept = self.filter(repo, tags)?;
        if self.strategy != ImageSelectionStrategy::SemVer {
            kept.sort_unstable_by(|a, b| b.cmp(a));
            return Ok(kept);
        }
        let mut versions: Vec<(Version, String)> = kept
            .iter()
            .filter_map(|tag| parse_tag(tag, self.strict).map(|v| (v, tag.clone())))
            .collect();
        versions.sort_unstable_by(|a, b| b.cmp(a));
        let newest = versions
            .iter()
            .find(|(v, _)| !v.is_prerelease())
            .or(versions.first())
            .map(|(_, tag)| tag.clone())
            .or_else(|| newest_lexical(&kept));
        if versions.is_empty() {
            let criteria = if self.strict {
                "full semantic versions (`strictSemvers: true`, e.g. `1.2.3`)"
            } else {
                "semantic versions"
            };
            return Err(no_match(repo, criteria, tags, newest));
        }
        let matching: Vec<String> = versions
            .into_iter()
            .filter(|(v, _)| match &self.constraint {
                Some((_, c)) => c.matches(v),
                None => !v.is_prerelease(),
            })
            .map(|(_, tag)| tag)
            .collect();
        if matching.is_empty() {
            let criteria = match &self.constraint {
                Some((text, _)) => format!("constraint `{text}`"),
                None => "releases (no `constraint`, so pre-releases are skipped)".into(),
            };
            return Err(no_match(repo, &criteria, tags, newest));
        }
        Ok(matching)
    }
}

/// How a tag filter is written in `language`, for hints.
pub(crate) fn tag_filter_hint(language: ExprLanguage) -> &'static str {
    match language {
        ExprLanguage::Cel => "use CEL over `tag`, e.g. `!tag.endsWith('-debug')`",
        ExprLanguage::ExprLang => "use expr-lang over `tag`, e.g. `!(tag endsWith '-debug')`",
    }
}

/// `NewestBuild`'s order of `(tag, created)` pairs: newest first, unknown times last, ties
/// by tag, greatest first.
pub(crate) fn newest_build_first(
    (tag_a, created_a): (&str, Option<Timestamp>),
    (tag_b, created_b): (&str, Option<Timestamp>),
) -> Ordering {
    created_b.cmp(&created_a).then_with(|| tag_b.cmp(tag_a))
}

/// A valid OCI tag (`[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`).
fn is_tag(text: &str) -> bool {
    let mut chars = text.chars();
    text.len() <= 128
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn regexes(field: &str, patterns: &[String]) -> Result<Vec<Regex>, ImageDiscoveryError> {
    patterns
        .iter()
        .enumerate()
        .map(|(i, pattern)| {
            Regex::new(pattern).map_err(|err| {
                let reason = err
                    .to_string()
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                ImageDiscoveryError::invalid(
                    format!("{field}[{i}]"),
                    pattern,
                    format!("it is not a regular expression ({reason})"),
                    Some("the syntax is Rust `regex` (RE2-like, no look-around)"),
                )
            })
        })
        .collect()
}

fn newest_lexical(tags: &[String]) -> Option<String> {
    tags.iter().max().cloned()
}

fn no_match(
    repo: &str,
    criteria: &str,
    tags: &[String],
    newest: Option<String>,
) -> ImageDiscoveryError {
    ImageDiscoveryError::NoTagMatched {
        repo: repo.to_owned(),
        criteria: criteria.to_owned(),
        total: tags.len(),
        newest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPO: &str = "127.0.0.1:5000/app";

    fn sub(strategy: ImageSelectionStrategy, constraint: Option<&str>) -> ImageSubscription {
        ImageSubscription {
            repo_url: REPO.into(),
            image_selection_strategy: strategy,
            constraint: constraint.map(str::to_owned),
            strict_semvers: true,
            discovery_limit: 20,
            ..ImageSubscription::default()
        }
    }

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|t| (*t).to_owned()).collect()
    }

    fn rank(sub: &ImageSubscription, list: &[&str]) -> Result<Vec<String>, ImageDiscoveryError> {
        Selector::new(sub, ExprLanguage::Cel)?.rank(REPO, &tags(list))
    }

    #[test]
    fn semver_excludes_pre_releases_unless_the_constraint_names_one() {
        let list = ["1.0.0", "1.1.0", "1.2.0-rc.1", "2.0.0"];
        let got = rank(&sub(ImageSelectionStrategy::SemVer, Some("^1.0.0")), &list).unwrap();
        assert_eq!(got, ["1.1.0", "1.0.0"]);
        let got = rank(&sub(ImageSelectionStrategy::SemVer, None), &list).unwrap();
        assert_eq!(got, ["2.0.0", "1.1.0", "1.0.0"]);
        let got = rank(
            &sub(ImageSelectionStrategy::SemVer, Some(">=1.2.0-rc.0 <2.0.0")),
            &list,
        );
        assert_eq!(got.unwrap(), ["1.2.0-rc.1"]);
        let named = ">=1.0.0 <1.2.0 || ~1.2.0-rc.0";
        let got = rank(&sub(ImageSelectionStrategy::SemVer, Some(named)), &list);
        assert_eq!(got.unwrap(), ["1.2.0-rc.1", "1.1.0", "1.0.0"]);
    }

    #[test]
    fn semver_accepts_a_leading_v_and_orders_numerically() {
        let list = ["v1.9.0", "v1.10.0", "1.2.0", "latest", "v2.0.0"];
        let got = rank(&sub(ImageSelectionStrategy::SemVer, Some("<2.0.0")), &list).unwrap();
        assert_eq!(got, ["v1.10.0", "v1.9.0", "1.2.0"]);
    }

    #[test]
    fn strict_semvers_false_accepts_partial_versions() {
        let list = ["1.2", "1.1.5", "2", "main"];
        let mut loose = sub(ImageSelectionStrategy::SemVer, Some("^1.0.0"));
        loose.strict_semvers = false;
        assert_eq!(rank(&loose, &list).unwrap(), ["1.2", "1.1.5"]);
        let strict = sub(ImageSelectionStrategy::SemVer, Some("^1.0.0"));
        assert_eq!(rank(&strict, &list).unwrap(), ["1.1.5"]);
    }

    #[test]
    fn allow_and_ignore_regexes_apply_first() {
        let mut s = sub(ImageSelectionStrategy::SemVer, None);
        s.allow_tags = vec![r"^1\.".into()];
        s.ignore_tags = vec![r"^1\.1\.".into()];
        let got = rank(&s, &["1.0.0", "1.1.0", "1.1.1", "1.2.0", "2.0.0"]).unwrap();
        assert_eq!(got, ["1.2.0", "1.0.0"]);
        s.allow_tags = vec!["^nope$".into()];
        let err = rank(&s, &["1.0.0", "2.0.0"]).unwrap_err().to_string();
        assert!(
            err.starts_with("`allowTags`/`ignoreTags` matched 0 of 2 tags"),
            "{err}"
        );
    }

    #[test]
    fn lexical_takes_the_greatest_tag() {
        let s = sub(ImageSelectionStrategy::Lexical, None);
        let got = rank(&s, &["build-20240101", "build-20240315", "build-20231231"]).unwrap();
        assert_eq!(got, ["build-20240315", "build-20240101", "build-20231231"]);
    }

    #[test]
    fn no_match_names_constraint_count_and_newest() {
        let list = ["1.0.0", "1.2.0", "2.0.0", "2.1.0-rc.1"];
        let err = rank(&sub(ImageSelectionStrategy::SemVer, Some("^1.3.0")), &list).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "constraint `^1.3.0` matched 0 of 4 tags in `127.0.0.1:5000/app` (newest: `2.0.0`)"
            ),
            "{err}"
        );
        let err = rank(
            &sub(ImageSelectionStrategy::SemVer, None),
            &["latest", "main"],
        )
        .unwrap_err();
        assert!(err.to_string().contains("`strictSemvers: true`"), "{err}");
        assert!(err.to_string().contains("(newest: `main`)"), "{err}");
    }

    #[test]
    fn invalid_constraint_and_regex_name_the_field() {
        let err = Selector::new(
            &sub(ImageSelectionStrategy::SemVer, Some("^1.x.y")),
            ExprLanguage::Cel,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid `constraint` `^1.x.y`: `^1.x.y` is not a version comparator; hint: write a \
             range such as `^1.2.0`, `>=1.0.0 <2.0.0` or `~1.4`"
        );
        assert!(err.is_config_error());
        let mut s = sub(ImageSelectionStrategy::SemVer, None);
        s.ignore_tags = vec!["ok".into(), "(unclosed".into()];
        let err = Selector::new(&s, ExprLanguage::Cel)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid `ignoreTags[1]` `(unclosed`: it is not a regular expression"),
            "{err}"
        );
    }

    #[test]
    fn strategy_specific_constraint_rules() {
        let err = Selector::new(
            &sub(ImageSelectionStrategy::Digest, None),
            ExprLanguage::Cel,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("the `Digest` strategy needs the tag to follow")
        );
        let err = Selector::new(
            &sub(ImageSelectionStrategy::Digest, Some("a b")),
            ExprLanguage::Cel,
        )
        .unwrap_err();
        assert!(err.to_string().contains("not a valid tag"));
        let ok = Selector::new(
            &sub(ImageSelectionStrategy::Digest, Some("latest")),
            ExprLanguage::Cel,
        )
        .unwrap();
        assert_eq!(ok.digest_tag.as_deref(), Some("latest"));
        let err = Selector::new(
            &sub(ImageSelectionStrategy::Lexical, Some("^1.0.0")),
            ExprLanguage::Cel,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("`Lexical` does not use a constraint")
        );
    }

    #[test]
    fn platform_and_limit_are_validated() {
        let mut s = sub(ImageSelectionStrategy::SemVer, None);
        s.platform = Some("linux".into());
        assert!(
            Selector::new(&s, ExprLanguage::Cel)
                .unwrap_err()
                .to_string()
                .starts_with("invalid `platform` `linux`")
        );
        s.platform = Some("linux/arm64".into());
        s.discovery_limit = 0;
        assert!(
            Selector::new(&s, ExprLanguage::Cel)
                .unwrap_err()
                .to_string()
                .contains("between 1 and 100")
        );
        s.discovery_limit = 100;
        assert_eq!(
            Selector::new(&s, ExprLanguage::Cel)
                .unwrap()
                .platform
                .unwrap()
                .to_string(),
            "linux/arm64"
        );
    }

    #[test]
    fn newest_build_orders_by_created_unknown_last() {
        let t = |s: &str| Some(s.parse::<Timestamp>().unwrap());
        let mut c = [
            ("a".to_owned(), t("2024-01-01T00:00:00Z")),
            ("b".to_owned(), None),
            ("c".to_owned(), t("2024-03-01T00:00:00Z")),
            ("d".to_owned(), t("2024-01-01T00:00:00Z")),
        ];
        c.sort_by(|(ta, ca), (tb, cb)| newest_build_first((ta, *ca), (tb, *cb)));
        let order: Vec<&str> = c.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(order, ["c", "d", "a", "b"]);
    }
}
